//! What an idle TLS session costs on the heap, measured: a counting allocator (the lib's
//! test build only) and an ignored test that handshakes N server/client pairs in memory,
//! the way the engine holds them (`Box<TlsConn>`, the shard's scratch outside), and
//! prints live bytes per connection, requested and as malloc hands them out, by size.
//!
//! `cargo test --release -p c1m-userspace --lib tls::footprint -- --ignored --nocapture`

use std::{
    alloc::{GlobalAlloc, Layout, System},
    cell::Cell,
    sync::atomic::{AtomicI64, Ordering::Relaxed},
};

/// Counts only the allocations of the thread that turned it on, so the other tests
/// running beside it do not show.
struct Counting;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
}

/// Size buckets of 16 B up to 4 KiB; the last bucket takes anything bigger.
const BUCKETS: usize = 257;
static LIVE_REQUESTED: AtomicI64 = AtomicI64::new(0);
static LIVE_USABLE: AtomicI64 = AtomicI64::new(0);
static LIVE_COUNT: AtomicI64 = AtomicI64::new(0);
static BY_SIZE: [AtomicI64; BUCKETS] = [const { AtomicI64::new(0) }; BUCKETS];

fn on() -> bool {
    ON.try_with(Cell::get).unwrap_or(false)
}

fn account(ptr: *mut u8, size: usize, sign: i64) {
    // SAFETY: `ptr` is a live block of the system allocator (glibc's malloc).
    let usable = unsafe { libc::malloc_usable_size(ptr.cast()) };
    LIVE_REQUESTED.fetch_add(sign * size as i64, Relaxed);
    LIVE_USABLE.fetch_add(sign * usable as i64, Relaxed);
    LIVE_COUNT.fetch_add(sign, Relaxed);
    BY_SIZE[size.div_ceil(16).min(BUCKETS - 1)].fetch_add(sign, Relaxed);
}

// SAFETY: every call goes to `System` unchanged; the counting reads only the pointers.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as given.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && on() {
            account(p, layout.size(), 1);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if on() {
            account(ptr, layout.size(), -1);
        }
        // SAFETY: forwarded as given.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        let counting = on();
        if counting {
            account(ptr, layout.size(), -1);
        }
        // SAFETY: forwarded as given.
        let p = unsafe { System.realloc(ptr, layout, new) };
        if counting {
            // A failed realloc leaves the old block live.
            match p.is_null() {
                true => account(ptr, layout.size(), 1),
                false => account(p, new, 1),
            }
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Live heap at one instant (of the counting thread's allocations).
#[derive(Clone, Copy)]
struct Live {
    requested: i64,
    usable: i64,
    count: i64,
    by_size: [i64; BUCKETS],
}

fn live() -> Live {
    Live {
        requested: LIVE_REQUESTED.load(Relaxed),
        usable: LIVE_USABLE.load(Relaxed),
        count: LIVE_COUNT.load(Relaxed),
        by_size: std::array::from_fn(|i| BY_SIZE[i].load(Relaxed)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
pub(crate) mod tests {
    use std::sync::Arc;

    use rustls::{
        ClientConfig, HandshakeKind, RootCertStore, ServerConfig, SupportedCipherSuite,
        crypto::ring,
        pki_types::{CertificateDer, ServerName, pem::PemObject},
    };

    use super::*;
    use crate::workload::tls::{
        config::{ServerTls, self_signed},
        session::TlsConn,
    };

    /// c1m's server configuration on a fresh self-signed pair: (config, its cert PEM).
    pub(crate) fn server(resumption: bool) -> (Arc<ServerConfig>, String) {
        let (cert, key) = self_signed(&["127.0.0.1".into()]).unwrap();
        let sc = ServerTls {
            cert_pem: cert.clone(),
            key_pem: key,
            resumption,
            ticket_key: None,
        }
        .config()
        .unwrap();
        (sc, cert)
    }

    /// A client on ring's own provider offering only `suites` (the server follows the
    /// client's order), on `versions`.
    pub(crate) fn client(
        ca: &str,
        suites: &[SupportedCipherSuite],
        versions: &[&'static rustls::SupportedProtocolVersion],
        resumption: bool,
    ) -> Arc<ClientConfig> {
        let mut p = ring::default_provider();
        p.cipher_suites = suites.to_vec();
        let mut roots = RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let mut c = ClientConfig::builder_with_provider(Arc::new(p))
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        if !resumption {
            c.resumption = rustls::client::Resumption::disabled();
        }
        Arc::new(c)
    }

    /// Moves bytes both ways until neither side has anything to say, then carries a
    /// WebSocket-upgrade-sized exchange each way, as a wss connection does before it
    /// idles. `wire`, `plain` and `back` are the shard's scratch.
    fn exchange(
        s: &mut TlsConn,
        c: &mut TlsConn,
        scratch: &mut [Vec<u8>; 3],
    ) -> (Option<HandshakeKind>, Option<HandshakeKind>) {
        let [to_s, to_c, plain] = scratch;
        c.start(to_s).unwrap();
        let (mut ks, mut kc) = (None, None);
        for _ in 0..10 {
            let i = s.input(to_s, plain, to_c).unwrap();
            to_s.drain(..i.consumed);
            ks = ks.or(i.handshake_done);
            let i = c.input(to_c, plain, to_s).unwrap();
            to_c.drain(..i.consumed);
            kc = kc.or(i.handshake_done);
            if !s.handshaking() && !c.handshaking() && to_s.is_empty() && to_c.is_empty() {
                break;
            }
        }
        c.seal(&[b'q'; 200], to_s).unwrap();
        let i = s.input(to_s, plain, to_c).unwrap();
        to_s.drain(..i.consumed);
        assert_eq!(plain.len(), 200);
        s.seal(&[b'a'; 130], to_c).unwrap();
        let i = c.input(to_c, plain, to_s).unwrap();
        to_c.drain(..i.consumed);
        assert!(to_s.is_empty() && to_c.is_empty());
        assert_eq!(plain.len(), 330);
        plain.clear();
        (ks, kc)
    }

    /// One pair through its handshake and a request and answer: how each side finished.
    pub(crate) fn connect(
        sc: &Arc<ServerConfig>,
        cc: &Arc<ClientConfig>,
    ) -> (Option<HandshakeKind>, Option<HandshakeKind>) {
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let mut s = TlsConn::server(sc).unwrap();
        let mut c = TlsConn::client(cc, name).unwrap();
        exchange(&mut s, &mut c, &mut Default::default())
    }

    /// One pair through its handshake and a request and answer, both kept.
    pub(crate) fn handshaken(sc: &Arc<ServerConfig>, cc: &Arc<ClientConfig>) -> (TlsConn, TlsConn) {
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let mut s = TlsConn::server(sc).unwrap();
        let mut c = TlsConn::client(cc, name).unwrap();
        exchange(&mut s, &mut c, &mut Default::default());
        (s, c)
    }

    /// ns per 100-byte record sealed by `c`'s side (a client of `cc`).
    fn seal_ns(sc: &Arc<ServerConfig>, cc: &Arc<ClientConfig>) -> f64 {
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let mut s = TlsConn::server(sc).unwrap();
        let mut c = TlsConn::client(cc, name).unwrap();
        exchange(&mut s, &mut c, &mut Default::default());
        let mut wire = Vec::with_capacity(1 << 20);
        let t = std::time::Instant::now();
        const K: usize = 20_000;
        for _ in 0..K {
            c.seal(&[1; 100], &mut wire).unwrap();
            wire.clear();
        }
        t.elapsed().as_nanos() as f64 / K as f64
    }

    /// ns per 100-byte record opened by a server of `sc` (records from a client of `cc`).
    fn open_ns(sc: &Arc<ServerConfig>, cc: &Arc<ClientConfig>) -> f64 {
        let (mut s, mut c) = handshaken(sc, cc);
        const K: usize = 20_000;
        let mut wire = Vec::with_capacity(K * 150);
        for _ in 0..K {
            c.seal(&[1; 100], &mut wire).unwrap();
        }
        let (mut plain, mut back) = (Vec::with_capacity(K * 100), Vec::new());
        let t = std::time::Instant::now();
        // rustls opens a bounded number of records per call.
        let mut used = 0;
        while used < wire.len() {
            let i = s.input(&mut wire[used..], &mut plain, &mut back).unwrap();
            assert!(i.consumed > 0);
            used += i.consumed;
        }
        let ns = t.elapsed().as_nanos() as f64 / K as f64;
        assert_eq!(plain.len(), K * 100);
        ns
    }

    fn per_conn(name: &str, d: Live, n: i64) {
        println!(
            "  {name}: {} B requested, {} B from malloc, {:.1} blocks per connection",
            d.requested / n,
            d.usable / n,
            d.count as f64 / n as f64
        );
        let mut rows = Vec::new();
        for (i, &k) in d.by_size.iter().enumerate() {
            if k.abs() >= n / 2 && k != 0 {
                rows.push(format!(
                    "{}{} B ×{:.2}",
                    if i == BUCKETS - 1 { ">" } else { "≤" },
                    (i * 16).min(4096),
                    k as f64 / n as f64
                ));
            }
        }
        println!("    blocks: {}", rows.join(", "));
    }

    fn measure(label: &str, n: usize, resumption: bool, cc: impl Fn(&str) -> Arc<ClientConfig>) {
        let (sc, cert) = server(resumption);
        let cc = cc(&cert);
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let mut servers: Vec<Box<TlsConn>> = Vec::with_capacity(n);
        let mut clients: Vec<Box<TlsConn>> = Vec::with_capacity(n);
        let mut scratch = [const { Vec::new() }; 3].map(|_: Vec<u8>| Vec::with_capacity(1 << 16));
        let mut kinds = (0, 0);
        ON.with(|o| o.set(true));
        let base = live();
        for _ in 0..n {
            let mut s = Box::new(TlsConn::server(&sc).unwrap());
            let mut c = Box::new(TlsConn::client(&cc, name.clone()).unwrap());
            let (ks, _) = exchange(&mut s, &mut c, &mut scratch);
            match ks {
                Some(HandshakeKind::Resumed) => kinds.1 += 1,
                _ => kinds.0 += 1,
            }
            servers.push(s);
            clients.push(c);
        }
        let both = live();
        clients.clear();
        let servers_only = live();
        servers.clear();
        let after = live();
        ON.with(|o| o.set(false));
        let d = |a: Live, b: Live| Live {
            requested: a.requested - b.requested,
            usable: a.usable - b.usable,
            count: a.count - b.count,
            by_size: std::array::from_fn(|i| a.by_size[i] - b.by_size[i]),
        };
        let n = n as i64;
        println!("{label}: {n} pairs ({} full, {} resumed)", kinds.0, kinds.1);
        per_conn("server", d(servers_only, after), n);
        per_conn("client", d(both, servers_only), n);
        per_conn("kept by the configs", d(after, base), n);
    }

    #[test]
    #[ignore = "a measurement: prints bytes per idle session"]
    fn bytes_per_idle_session() {
        println!(
            "size_of: UnbufferedServerConnection {} B, UnbufferedClientConnection {} B, TlsConn {} B (c1m's record layer {} B)",
            size_of::<rustls::server::UnbufferedServerConnection>(),
            size_of::<rustls::client::UnbufferedClientConnection>(),
            size_of::<TlsConn>(),
            size_of::<crate::workload::tls::record_layer::RecordLayer>(),
        );
        let p = ring::default_provider();
        let suite = |name: &str| {
            *p.cipher_suites
                .iter()
                .find(|s| format!("{:?}", s.suite()).contains(name))
                .unwrap()
        };
        let v13: &[&'static rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];
        let v12: &[&'static rustls::SupportedProtocolVersion] = &[&rustls::version::TLS12];
        let n = 2000;
        let c1m_client = |ca: &str| {
            crate::workload::tls::config::ClientTls {
                ca_pem: Some(ca.into()),
                insecure_skip_verify: false,
                server_name: "127.0.0.1".into(),
                resumption: false,
            }
            .config()
            .unwrap()
        };
        measure("c1m's configs on both sides", n, false, c1m_client);
        let (sc, cert) = server(false);
        for name in ["TLS13_AES_128_GCM", "TLS13_AES_256_GCM", "TLS13_CHACHA20"] {
            let ring = client(&cert, &[suite(name)], v13, false);
            // c1m's provider (compact TLS 1.3 keys), the same one suite.
            let mut p = (**c1m_client(&cert).crypto_provider()).clone();
            p.cipher_suites
                .retain(|s| format!("{:?}", s.suite()).contains(name));
            let mut roots = RootCertStore::empty();
            for x in CertificateDer::pem_slice_iter(cert.as_bytes()) {
                roots.add(x.unwrap()).unwrap();
            }
            let ours = Arc::new(
                ClientConfig::builder_with_provider(Arc::new(p))
                    .with_protocol_versions(v13)
                    .unwrap()
                    .with_root_certificates(roots)
                    .with_no_client_auth(),
            );
            let mut handing = (*ours).clone();
            handing.enable_secret_extraction = true;
            println!(
                "seal, 100-byte record, {name}: ring's kept key {:.0} ns, c1m's compact key {:.0} ns, c1m's record layer {:.0} ns",
                seal_ns(&sc, &ring),
                seal_ns(&sc, &ours),
                seal_ns(&sc, &Arc::new(handing))
            );
            let mut kept = (*sc).clone();
            kept.enable_secret_extraction = false;
            println!(
                "open, 100-byte record, {name}: rustls (compact key) {:.0} ns, c1m's record layer {:.0} ns",
                open_ns(&Arc::new(kept), &ring),
                open_ns(&sc, &ring)
            );
        }
        for (label, s, v) in [
            (
                "ring's own client, TLS 1.3 AES-128-GCM",
                "TLS13_AES_128_GCM",
                v13,
            ),
            (
                "ring's own client, TLS 1.3 AES-256-GCM",
                "TLS13_AES_256_GCM",
                v13,
            ),
            ("ring's own client, TLS 1.3 CHACHA20", "TLS13_CHACHA20", v13),
            (
                "ring's own client, TLS 1.2 ECDHE_ECDSA AES-128-GCM",
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM",
                v12,
            ),
            (
                "ring's own client, TLS 1.2 ECDHE_ECDSA CHACHA20",
                "TLS_ECDHE_ECDSA_WITH_CHACHA20",
                v12,
            ),
        ] {
            measure(label, n, false, |ca| client(ca, &[suite(s)], v, false));
        }
        measure(
            "c1m's configs on both sides, resumption on",
            n,
            true,
            |ca| {
                crate::workload::tls::config::ClientTls {
                    ca_pem: Some(ca.into()),
                    insecure_skip_verify: false,
                    server_name: "127.0.0.1".into(),
                    resumption: true,
                }
                .config()
                .unwrap()
            },
        );
    }
}
