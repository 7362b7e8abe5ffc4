//! One connection's TLS, on rustls's unbuffered API: the shard owns every buffer (its
//! read buffer holds the ciphertext and is decrypted in place; its scratch takes what
//! goes out), so a connection keeps no plaintext or ciphertext buffer of its own.
//! rustls's buffered connection keeps a 4 KiB read buffer per connection for good once
//! it has read.
//!
//! Once the handshake is done (and a server's tickets are out), a session whose config
//! allows it (`enable_secret_extraction`: every server, a client without resumption)
//! is handed over to c1m's own record layer (`record_layer`) and rustls's connection is
//! dropped: an idle session then keeps its two keys, IVs and sequence numbers, not
//! rustls's 2 KiB of state. A client with resumption stays on rustls, which reads the
//! server's tickets whenever they come.

use std::sync::Arc;

use rustls::{
    ClientConfig, HandshakeKind, ServerConfig,
    client::UnbufferedClientConnection,
    pki_types::ServerName,
    server::UnbufferedServerConnection,
    unbuffered::{ConnectionState, EncodeError, EncryptError, InsufficientSizeError},
};

use super::{failure::TlsFailure, record_layer::RecordLayer};

/// A connection's TLS session, either side. The handshake's rustls connection is boxed
/// so that the handed-over state (`Records`) is all an idle session's box holds.
pub(crate) enum TlsConn {
    Server {
        conn: Box<UnbufferedServerConnection>,
        /// Hand over to c1m's record layer once the handshake is done.
        hand_over: bool,
    },
    Client {
        conn: Box<UnbufferedClientConnection>,
        hand_over: bool,
    },
    /// After the handshake: rustls dropped, c1m seals and opens the records.
    Records(RecordLayer),
    /// A handover that failed (rustls's connection is gone with it): every call fails.
    Gone,
}

/// What one batch of ciphertext did.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Input {
    /// Bytes of the input used; the rest is a record not yet complete, to keep.
    pub consumed: usize,
    /// The handshake finished in this batch, and how.
    pub handshake_done: Option<HandshakeKind>,
    /// The peer sent close_notify.
    pub peer_closed: bool,
}

impl Input {
    /// Counts the handshake this batch finished, by kind (both engines, both sides).
    pub(crate) fn count(&self, c: &mut crate::workload::stats::counters::TlsHandshakes) {
        match self.handshake_done {
            Some(HandshakeKind::Resumed) => c.resumed += 1,
            Some(_) => c.full += 1,
            None => {}
        }
    }
}

/// The same body for either side: the unbuffered API's calls are inherent methods of
/// each side's type, not a trait.
macro_rules! either {
    ($self:expr, $c:ident => $body:expr, $rec:ident => $after:expr) => {
        match $self {
            TlsConn::Server { conn: $c, .. } => $body,
            TlsConn::Client { conn: $c, .. } => $body,
            TlsConn::Records($rec) => $after,
            TlsConn::Gone => Err(TlsFailure::Local("session lost in its handover".into())),
        }
    };
}

/// Writes at the end of `wire` with `f`, growing it to what `f` says it needs.
fn append<E>(
    wire: &mut Vec<u8>,
    guess: usize,
    mut f: impl FnMut(&mut [u8]) -> Result<usize, E>,
    needs: impl Fn(&E) -> Option<usize>,
) -> Result<(), E> {
    let start = wire.len();
    wire.resize(start + guess, 0);
    let r = match f(&mut wire[start..]) {
        Err(e) => match needs(&e) {
            Some(size) => {
                wire.resize(start + size, 0);
                f(&mut wire[start..])
            }
            None => Err(e),
        },
        ok => ok,
    };
    match r {
        Ok(n) => {
            wire.truncate(start + n);
            Ok(())
        }
        Err(e) => {
            wire.truncate(start);
            Err(e)
        }
    }
}

fn encode_needs(e: &EncodeError) -> Option<usize> {
    match e {
        EncodeError::InsufficientSize(InsufficientSizeError { required_size }) => {
            Some(*required_size)
        }
        _ => None,
    }
}

fn encrypt_needs(e: &EncryptError) -> Option<usize> {
    match e {
        EncryptError::InsufficientSize(InsufficientSizeError { required_size }) => {
            Some(*required_size)
        }
        _ => None,
    }
}

/// Room for `n` bytes sealed: 16 KiB records, each with a 5-byte header, a type byte
/// and a 16-byte tag (TLS 1.3; TLS 1.2 GCM's 8-byte nonce fits too).
fn sealed_len(n: usize) -> usize {
    n + (n / 16384 + 1) * 32
}

/// Bounds the loops below: a state machine that neither blocks nor lets us write
/// within this many steps is a bug, reported as one rather than spun on.
const MAX_STEPS: usize = 64;

impl TlsConn {
    pub(crate) fn server(cfg: &Arc<ServerConfig>) -> Result<TlsConn, rustls::Error> {
        Ok(TlsConn::Server {
            conn: Box::new(UnbufferedServerConnection::new(cfg.clone())?),
            hand_over: cfg.enable_secret_extraction,
        })
    }

    pub(crate) fn client(
        cfg: &Arc<ClientConfig>,
        name: ServerName<'static>,
    ) -> Result<TlsConn, rustls::Error> {
        Ok(TlsConn::Client {
            conn: Box::new(UnbufferedClientConnection::new(cfg.clone(), name)?),
            hand_over: cfg.enable_secret_extraction,
        })
    }

    pub(crate) fn handshaking(&self) -> bool {
        match self {
            TlsConn::Server { conn, .. } => conn.is_handshaking(),
            TlsConn::Client { conn, .. } => conn.is_handshaking(),
            TlsConn::Records(_) | TlsConn::Gone => false,
        }
    }

    /// Whether rustls has handed the session over to c1m's record layer.
    #[cfg(test)]
    pub(crate) fn handed_over(&self) -> bool {
        matches!(self, TlsConn::Records(_))
    }

    /// The record layer, once handed over (tests).
    #[cfg(test)]
    pub(crate) fn records(&mut self) -> Option<&mut RecordLayer> {
        match self {
            TlsConn::Records(r) => Some(r),
            _ => None,
        }
    }

    /// rustls's connection, handed over to c1m's record layer: its keys and sequence
    /// numbers kept, the rest (and the `KernelConnection` it leaves for key updates and
    /// tickets) dropped.
    fn hand_over(&mut self) -> Result<(), TlsFailure> {
        let handed = match std::mem::replace(self, TlsConn::Gone) {
            TlsConn::Server { conn, .. } => conn
                .dangerous_into_kernel_connection()
                .map(|(s, k)| (s, k.protocol_version(), false)),
            TlsConn::Client { conn, .. } => conn
                .dangerous_into_kernel_connection()
                .map(|(s, k)| (s, k.protocol_version(), true)),
            other => {
                *self = other;
                return Ok(());
            }
        };
        let (secrets, version, client) = handed?;
        *self = TlsConn::Records(
            RecordLayer::new(secrets, version, client).map_err(TlsFailure::Record)?,
        );
        Ok(())
    }

    /// Takes `incoming` ciphertext (decrypted in place): appends the application data
    /// to `plain` and the records to send (handshake, alerts) to `wire`. On an error the
    /// fatal alert rustls has for the peer is in `wire` too.
    pub(crate) fn input(
        &mut self,
        incoming: &mut [u8],
        plain: &mut Vec<u8>,
        wire: &mut Vec<u8>,
    ) -> Result<Input, TlsFailure> {
        let was_handshaking = self.handshaking();
        let mut out = Input::default();
        // The batch ended where the session can write: nothing left to send.
        let mut writable = false;
        let r = either!(self, c => {
            let mut r = Ok(());
            for _ in 0..MAX_STEPS {
                let st = c.process_tls_records(&mut incoming[out.consumed..]);
                let mut discard = st.discard;
                let done = match st.state {
                    Err(e) => {
                        r = Err(TlsFailure::from(e));
                        true
                    }
                    Ok(ConnectionState::ReadTraffic(mut t)) => {
                        while let Some(rec) = t.next_record() {
                            match rec {
                                Ok(rec) => {
                                    plain.extend_from_slice(rec.payload);
                                    discard += rec.discard;
                                }
                                Err(e) => {
                                    r = Err(TlsFailure::from(e));
                                    break;
                                }
                            }
                        }
                        r.is_err()
                    }
                    // Never offered (no max_early_data_size on the server).
                    Ok(ConnectionState::ReadEarlyData(_)) => {
                        r = Err(TlsFailure::Local("early data, never offered".into()));
                        true
                    }
                    Ok(ConnectionState::EncodeTlsData(mut e)) => {
                        if let Err(e) = append(wire, 2048, |b| e.encode(b), encode_needs) {
                            r = Err(TlsFailure::Local(format!("encode: {e}")));
                        }
                        r.is_err()
                    }
                    Ok(ConnectionState::TransmitTlsData(t)) => {
                        // The caller sends `wire` after this batch.
                        t.done();
                        false
                    }
                    Ok(ConnectionState::PeerClosed) => {
                        out.peer_closed = true;
                        false
                    }
                    Ok(ConnectionState::WriteTraffic(_)) => {
                        writable = true;
                        true
                    }
                    Ok(ConnectionState::BlockedHandshake | ConnectionState::Closed) => true,
                    Ok(_) => true,
                };
                out.consumed += discard;
                if done {
                    break;
                }
            }
            r
        }, rec => {
            let o = rec.input(incoming, plain, wire).map_err(TlsFailure::Record)?;
            out.consumed = o.consumed;
            out.peer_closed = o.peer_closed;
            return Ok(out);
        });
        if let Err(e) = r {
            self.alert(wire);
            return Err(e);
        }
        if was_handshaking && !self.handshaking() {
            let kind = match self {
                TlsConn::Server { conn, .. } => conn.handshake_kind(),
                TlsConn::Client { conn, .. } => conn.handshake_kind(),
                TlsConn::Records(_) | TlsConn::Gone => None,
            };
            out.handshake_done = Some(kind.unwrap_or(HandshakeKind::Full));
        }
        let hand_over = match self {
            TlsConn::Server { hand_over, .. } | TlsConn::Client { hand_over, .. } => *hand_over,
            TlsConn::Records(_) | TlsConn::Gone => false,
        };
        if hand_over && writable && !self.handshaking() && !out.peer_closed {
            self.hand_over()?;
        }
        Ok(out)
    }

    /// The client's first flight (ClientHello), into `wire`.
    pub(crate) fn start(&mut self, wire: &mut Vec<u8>) -> Result<(), TlsFailure> {
        let mut plain = Vec::new();
        self.input(&mut [], &mut plain, wire).map(drop)
    }

    /// Seals `data` as application records at the end of `wire`.
    pub(crate) fn seal(&mut self, data: &[u8], wire: &mut Vec<u8>) -> Result<(), TlsFailure> {
        if let TlsConn::Records(r) = self {
            return r.seal(data, wire).map_err(TlsFailure::Record);
        }
        self.writable(wire, |w, wire| {
            append(
                wire,
                sealed_len(data.len()),
                |b| w.encrypt(data, b),
                encrypt_needs,
            )
            .map_err(|e| TlsFailure::Local(format!("encrypt: {e}")))
        })
    }

    /// A close_notify alert at the end of `wire` (best effort: nothing if the session
    /// cannot write).
    pub(crate) fn close_notify(&mut self, wire: &mut Vec<u8>) {
        if let TlsConn::Records(r) = self {
            r.close_notify(wire);
            return;
        }
        let _ = self.writable(wire, |w, wire| {
            append(wire, 64, |b| w.queue_close_notify(b), encrypt_needs)
                .map_err(|e| TlsFailure::Local(format!("close_notify: {e}")))
        });
    }

    /// Runs `f` in the session's WriteTraffic state, encoding anything rustls queued
    /// first (a key update, tickets).
    fn writable(
        &mut self,
        wire: &mut Vec<u8>,
        mut f: impl FnMut(&mut dyn Encrypt, &mut Vec<u8>) -> Result<(), TlsFailure>,
    ) -> Result<(), TlsFailure> {
        either!(self, c => {
            for _ in 0..MAX_STEPS {
                match c.process_tls_records(&mut []).state {
                    Ok(ConnectionState::WriteTraffic(mut w)) => return f(&mut w, wire),
                    Ok(ConnectionState::EncodeTlsData(mut e)) => {
                        append(wire, 2048, |b| e.encode(b), encode_needs)
                            .map_err(|e| TlsFailure::Local(format!("encode: {e}")))?;
                    }
                    Ok(ConnectionState::TransmitTlsData(t)) => t.done(),
                    Ok(ConnectionState::PeerClosed) => {}
                    Ok(s) => return Err(TlsFailure::Local(format!("cannot write now ({s:?})"))),
                    Err(e) => return Err(TlsFailure::from(e)),
                }
            }
            Err(TlsFailure::Local("no write state within the step bound".into()))
        }, _rec => Err(TlsFailure::Local("handed over: no rustls write state".into())))
    }

    /// The fatal alert rustls queued after an error, into `wire`.
    fn alert(&mut self, wire: &mut Vec<u8>) {
        let _: Result<(), TlsFailure> = either!(self, c => {
            if let Ok(ConnectionState::EncodeTlsData(mut e)) = c.process_tls_records(&mut []).state {
                let _ = append(wire, 64, |b| e.encode(b), encode_needs);
            }
            Ok(())
        }, _rec => Ok(()));
    }
}

/// WriteTraffic of either side, as one type for [`TlsConn::writable`]'s callers.
pub(crate) trait Encrypt {
    fn encrypt(&mut self, data: &[u8], out: &mut [u8]) -> Result<usize, EncryptError>;
    fn queue_close_notify(&mut self, out: &mut [u8]) -> Result<usize, EncryptError>;
}

impl<Data> Encrypt for rustls::unbuffered::WriteTraffic<'_, Data> {
    fn encrypt(&mut self, data: &[u8], out: &mut [u8]) -> Result<usize, EncryptError> {
        rustls::unbuffered::WriteTraffic::encrypt(self, data, out)
    }
    fn queue_close_notify(&mut self, out: &mut [u8]) -> Result<usize, EncryptError> {
        rustls::unbuffered::WriteTraffic::queue_close_notify(self, out)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;
    use crate::workload::{
        stats::counters::TlsErrors,
        tls::config::{ClientTls, ServerTls, self_signed},
    };

    fn pair(resumption: bool) -> (Arc<ServerConfig>, Arc<ClientConfig>, ServerName<'static>) {
        let (cert, key) = self_signed(&["127.0.0.1".into()]).unwrap();
        let s = ServerTls {
            cert_pem: cert.clone(),
            key_pem: key,
            resumption,
            ticket_key: None,
        };
        let c = ClientTls {
            ca_pem: Some(cert),
            insecure_skip_verify: false,
            server_name: "127.0.0.1".into(),
            resumption,
        };
        (s.config().unwrap(), c.config().unwrap(), c.name().unwrap())
    }

    /// Moves `wire` into the peer's pending input, one byte-exact stream each way.
    fn feed(to: &mut TlsConn, pending: &mut Vec<u8>, back: &mut Vec<u8>) -> (Vec<u8>, Input) {
        let mut plain = Vec::new();
        let i = to.input(pending, &mut plain, back).unwrap();
        pending.drain(..i.consumed);
        (plain, i)
    }

    fn handshake(
        sc: &Arc<ServerConfig>,
        cc: &Arc<ClientConfig>,
        n: &ServerName<'static>,
    ) -> (TlsConn, TlsConn, HandshakeKind, HandshakeKind) {
        let mut s = TlsConn::server(sc).unwrap();
        let mut c = TlsConn::client(cc, n.clone()).unwrap();
        let (mut to_s, mut to_c) = (Vec::new(), Vec::new());
        c.start(&mut to_s).unwrap();
        let (mut ks, mut kc) = (None, None);
        for _ in 0..10 {
            let (p, i) = feed(&mut s, &mut to_s, &mut to_c);
            assert!(p.is_empty());
            ks = ks.or(i.handshake_done);
            let (p, i) = feed(&mut c, &mut to_c, &mut to_s);
            assert!(p.is_empty());
            kc = kc.or(i.handshake_done);
            if !s.handshaking() && !c.handshaking() && to_s.is_empty() && to_c.is_empty() {
                break;
            }
        }
        (s, c, ks.unwrap(), kc.unwrap())
    }

    #[test]
    fn a_session_carries_bytes_both_ways_in_pieces_of_any_size() {
        let (sc, cc, n) = pair(false);
        let (mut s, mut c, ks, kc) = handshake(&sc, &cc, &n);
        assert_eq!((ks, kc), (HandshakeKind::Full, HandshakeKind::Full));
        let msg: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
        let mut wire = Vec::new();
        c.seal(&msg, &mut wire).unwrap();
        // Fed one odd-sized piece at a time, as reads cut it: the tail of a record waits.
        let (mut got, mut pending, mut back) = (Vec::new(), Vec::new(), Vec::new());
        for piece in wire.chunks(777) {
            pending.extend_from_slice(piece);
            let i = s.input(&mut pending, &mut got, &mut back).unwrap();
            pending.drain(..i.consumed);
        }
        assert_eq!((got == msg, pending.len(), back.len()), (true, 0, 0));
        let mut wire = Vec::new();
        s.seal(b"pong", &mut wire).unwrap();
        s.close_notify(&mut wire);
        let mut got = Vec::new();
        let i = c.input(&mut wire, &mut got, &mut Vec::new()).unwrap();
        assert_eq!((&got[..], i.peer_closed), (&b"pong"[..], true));
        eprintln!(
            "size of a session: server {} B, client {} B",
            size_of::<UnbufferedServerConnection>(),
            size_of::<UnbufferedClientConnection>()
        );
    }

    #[test]
    fn resumption_resumes_the_next_connection_and_garbage_is_not_tls() {
        let (sc, cc, n) = pair(true);
        let (_s, mut c, ks, _) = handshake(&sc, &cc, &n);
        assert_eq!(ks, HandshakeKind::Full);
        // The ticket arrives after the handshake: the client reads it like data.
        let _ = c.input(&mut [], &mut Vec::new(), &mut Vec::new());
        let (_, _, ks2, kc2) = handshake(&sc, &cc, &n);
        assert_eq!((ks2, kc2), (HandshakeKind::Resumed, HandshakeKind::Resumed));

        let mut s = TlsConn::server(&sc).unwrap();
        let mut garbage = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
        let mut alert = Vec::new();
        let e = s
            .input(&mut garbage, &mut Vec::new(), &mut alert)
            .unwrap_err();
        let mut c = TlsErrors::default();
        e.count(&mut c);
        assert_eq!(c.not_tls, 1, "{e}");
        assert!(!alert.is_empty(), "a fatal alert goes back");
    }

    #[test]
    fn a_client_rejects_a_certificate_it_does_not_trust_and_the_server_hears_why() {
        let (sc, _, n) = pair(false);
        let (_, other_cc, _) = pair(false);
        let mut s = TlsConn::server(&sc).unwrap();
        let mut c = TlsConn::client(&other_cc, n).unwrap();
        let (mut to_s, mut to_c) = (Vec::new(), Vec::new());
        c.start(&mut to_s).unwrap();
        feed(&mut s, &mut to_s, &mut to_c);
        let mut plain = Vec::new();
        let e = c.input(&mut to_c, &mut plain, &mut to_s).unwrap_err();
        let mut ce = TlsErrors::default();
        e.count(&mut ce);
        assert_eq!(ce.untrusted_certificate, 1, "{e}");
        let e = s.input(&mut to_s, &mut plain, &mut Vec::new()).unwrap_err();
        let mut se = TlsErrors::default();
        e.count(&mut se);
        assert_eq!(se.peer_rejected_certificate, 1, "{e}");
    }
}
