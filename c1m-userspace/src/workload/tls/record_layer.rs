//! c1m's own TLS record layer, for a session whose handshake rustls finished: rustls hands
//! over the traffic keys and sequence numbers (`dangerous_into_kernel_connection`, made
//! for kTLS) and is dropped, and c1m seals and opens the records itself, as the kernel
//! would. An idle session then keeps per direction the key bytes, the IV and the
//! sequence number, expanded into ring's key for each batch (as `compact_aead` does),
//! instead of rustls's connection (1,088 B + 640 B deframer spans + 224 B traffic
//! state + 192 B queues on a server).
//!
//! Records (RFC 8446 §5.2, RFC 5246 §6.2.3.3, RFC 7905):
//! - TLS 1.3: every record says application data; the content, then its real type
//!   byte, then zero padding is sealed; nonce = IV xor sequence number; AAD = the
//!   5-byte header.
//! - TLS 1.2 AES-GCM: nonce = the 4-byte salt, then 8 bytes sent before the ciphertext
//!   (rustls's, so ours: the IV's last 8 bytes xor the sequence number); AAD =
//!   sequence number ‖ type ‖ version ‖ plaintext length.
//! - TLS 1.2 ChaCha20-Poly1305: nonce = IV xor sequence number; the same AAD.
//!
//! After the handshake a peer may still send: alerts (close_notify ends the input; a
//! TLS 1.2 warning or TLS 1.3 user_canceled is passed over; any other is the peer's
//! fatal alert), a client a server's NewSessionTicket (passed over: a client hands over
//! only without resumption, see `session`) or a TLS 1.2 HelloRequest (passed over:
//! no renegotiation). A TLS 1.3 KeyUpdate is refused with a fatal alert, counted as a
//! protocol failure: following it needs the traffic secret (2 × 32–48 B more per
//! session), which rustls hands over only through its key-log debugging hook, and no
//! peer of this lab sends one (rustls's at 2^24 records on AES-GCM, Go and OpenSSL
//! only when asked). Anything else is a fatal alert and a counted failure.

use ring::aead;
use rustls::{AlertDescription, ConnectionTrafficSecrets, ExtractedSecrets, ProtocolVersion};

const HEADER: usize = 5;
const TAG: usize = 16;
/// TLS 1.2 AES-GCM's explicit nonce, sent before each record's ciphertext.
const EXPLICIT: usize = 8;
/// The most plaintext a record carries (both versions).
const MAX_PLAIN: usize = 1 << 14;

/// Content types (RFC 8446 §5.1).
const ALERT: u8 = 21;
const HANDSHAKE: u8 = 22;
const APPLICATION_DATA: u8 = 23;

/// Handshake messages a peer may send after the handshake (RFC 8446 §4).
const HELLO_REQUEST: u8 = 0;
const NEW_SESSION_TICKET: u8 = 4;
const KEY_UPDATE: u8 = 24;

/// The AEAD the handshake chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Alg {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20Poly1305,
}

impl Alg {
    fn ring(self) -> &'static aead::Algorithm {
        match self {
            Alg::Aes128Gcm => &aead::AES_128_GCM,
            Alg::Aes256Gcm => &aead::AES_256_GCM,
            Alg::Chacha20Poly1305 => &aead::CHACHA20_POLY1305,
        }
    }

    /// Records one key may seal (ring's suites' `confidentiality_limit`, the same for
    /// both versions): past it rustls would update the key (TLS 1.3) or close; c1m
    /// refuses to seal, and the connection closes, counted.
    fn limit(self) -> u64 {
        match self {
            Alg::Aes128Gcm | Alg::Aes256Gcm => 1 << 24,
            Alg::Chacha20Poly1305 => u64::MAX,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    Tls12,
    Tls13,
}

/// One direction's key: its bytes (16 or 32 used), the IV (TLS 1.2 AES-GCM: salt and
/// the first explicit nonce) and the next record's sequence number.
struct Keys {
    key: [u8; 32],
    iv: [u8; 12],
    seq: u64,
}

impl Keys {
    fn of((seq, secrets): (u64, ConnectionTrafficSecrets)) -> Result<(Alg, Keys), RecordError> {
        let (alg, key, iv) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (Alg::Aes128Gcm, key, iv),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (Alg::Aes256Gcm, key, iv),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (Alg::Chacha20Poly1305, key, iv)
            }
            _ => return Err(RecordError::Unsupported("an AEAD c1m does not seal")),
        };
        let mut k = Keys {
            key: [0; 32],
            iv: [0; 12],
            seq,
        };
        let (key, iv) = (key.as_ref(), iv.as_ref());
        if key.len() != alg.ring().key_len() || iv.len() != k.iv.len() {
            return Err(RecordError::Unsupported("a key or IV of another length"));
        }
        k.key[..key.len()].copy_from_slice(key);
        k.iv.copy_from_slice(iv);
        Ok((alg, k))
    }

    /// ring's key for this batch of records (dropped after it).
    fn expanded(&self, alg: Alg) -> Result<aead::LessSafeKey, RecordError> {
        aead::UnboundKey::new(alg.ring(), &self.key[..alg.ring().key_len()])
            .map(aead::LessSafeKey::new)
            .map_err(|_| RecordError::Unsupported("a key ring refuses"))
    }

    /// The IV xor the sequence number (RFC 8446 §5.3; TLS 1.2 AES-GCM's explicit nonce
    /// is this nonce's last 8 bytes, as rustls makes it).
    fn nonce(&self) -> [u8; 12] {
        let mut n = self.iv;
        for (b, s) in n[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *b ^= s;
        }
        n
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        self.key = [0; 32];
    }
}

/// A session after its handshake: both directions' keys, nothing else.
pub(crate) struct RecordLayer {
    version: Version,
    alg: Alg,
    /// A client passes over the server's NewSessionTicket and HelloRequest; a server
    /// receives neither.
    client: bool,
    /// close_notify came: the rest of the input is not read.
    peer_closed: bool,
    tx: Keys,
    rx: Keys,
}

/// A record or message this layer refuses, or could not make.
#[derive(Debug, PartialEq, thiserror::Error)]
pub(crate) enum RecordError {
    #[error("a record that does not open (bad_record_mac)")]
    Decrypt,
    #[error("a record of {0} bytes, more than TLS allows")]
    Oversized(usize),
    #[error("a record of content type {0} after the handshake")]
    UnexpectedContent(u8),
    #[error("handshake message {0} after the handshake")]
    UnexpectedHandshake(u8),
    #[error("a TLS 1.3 KeyUpdate, refused: c1m keeps no traffic secret to follow it")]
    KeyUpdate,
    #[error("a malformed {0}")]
    Malformed(&'static str),
    #[error("the peer's fatal alert {0:?}")]
    Alert(AlertDescription),
    #[error("{0} records sealed with one key: the suite's confidentiality limit")]
    Limit(u64),
    #[error("cannot hand over: {0}")]
    Unsupported(&'static str),
    #[error("ring could not seal a record")]
    Seal,
}

impl RecordError {
    /// The alert that tells the peer why (None: none is owed).
    fn alert(&self) -> Option<AlertDescription> {
        Some(match self {
            RecordError::Decrypt => AlertDescription::BadRecordMac,
            RecordError::Oversized(_) => AlertDescription::RecordOverflow,
            RecordError::UnexpectedContent(_)
            | RecordError::UnexpectedHandshake(_)
            | RecordError::KeyUpdate => AlertDescription::UnexpectedMessage,
            RecordError::Malformed(_) => AlertDescription::DecodeError,
            RecordError::Unsupported(_) | RecordError::Seal => AlertDescription::InternalError,
            RecordError::Alert(_) | RecordError::Limit(_) => return None,
        })
    }
}

/// What one batch of ciphertext did.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Opened {
    /// Bytes used; the rest is a record not yet complete.
    pub consumed: usize,
    /// The peer sent close_notify.
    pub peer_closed: bool,
}

/// The 13-byte TLS 1.2 AAD (RFC 5246 §6.2.3.3).
fn tls12_aad(seq: u64, typ: u8, version: [u8; 2], len: usize) -> aead::Aad<[u8; 13]> {
    let mut a = [0; 13];
    a[..8].copy_from_slice(&seq.to_be_bytes());
    a[8] = typ;
    a[9..11].copy_from_slice(&version);
    a[11..].copy_from_slice(&(len as u16).to_be_bytes());
    aead::Aad::from(a)
}

impl RecordLayer {
    /// Takes over from rustls: `secrets` as it hands them over, for `version`.
    pub(crate) fn new(
        secrets: ExtractedSecrets,
        version: ProtocolVersion,
        client: bool,
    ) -> Result<RecordLayer, RecordError> {
        let version = match version {
            ProtocolVersion::TLSv1_3 => Version::Tls13,
            ProtocolVersion::TLSv1_2 => Version::Tls12,
            _ => return Err(RecordError::Unsupported("a TLS version before 1.2")),
        };
        let (alg, tx) = Keys::of(secrets.tx)?;
        let (rx_alg, rx) = Keys::of(secrets.rx)?;
        if rx_alg != alg {
            return Err(RecordError::Unsupported("two AEADs"));
        }
        Ok(RecordLayer {
            version,
            alg,
            client,
            peer_closed: false,
            tx,
            rx,
        })
    }

    /// Opens the complete records of `incoming` in place: application data is appended
    /// to `plain`. On an error the fatal alert owed to the peer is in `wire`.
    pub(crate) fn input(
        &mut self,
        incoming: &mut [u8],
        plain: &mut Vec<u8>,
        wire: &mut Vec<u8>,
    ) -> Result<Opened, RecordError> {
        let r = self.open_all(incoming, plain);
        if let Err(e) = &r
            && let Some(a) = e.alert()
        {
            self.alert(a, wire);
        }
        r
    }

    fn open_all(
        &mut self,
        incoming: &mut [u8],
        plain: &mut Vec<u8>,
    ) -> Result<Opened, RecordError> {
        let mut out = Opened::default();
        if self.peer_closed {
            out.consumed = incoming.len();
            out.peer_closed = true;
            return Ok(out);
        }
        let key = self.rx.expanded(self.alg)?;
        while let Some(hdr) = incoming.get(out.consumed..out.consumed + HEADER) {
            let len = usize::from(u16::from_be_bytes([hdr[3], hdr[4]]));
            let max = match self.version {
                Version::Tls13 => MAX_PLAIN + 256,
                Version::Tls12 => MAX_PLAIN + 2048,
            };
            if len > max {
                return Err(RecordError::Oversized(len));
            }
            let end = out.consumed + HEADER + len;
            let Some(rec) = incoming.get_mut(out.consumed..end) else {
                break;
            };
            out.consumed = end;
            let (typ, content) = self.open(&key, rec)?;
            match typ {
                APPLICATION_DATA => plain.extend_from_slice(content),
                ALERT => {
                    if self.read_alert(content)? {
                        self.peer_closed = true;
                        out.peer_closed = true;
                        out.consumed = incoming.len();
                        break;
                    }
                }
                HANDSHAKE => self.read_handshake(content)?,
                t => return Err(RecordError::UnexpectedContent(t)),
            }
        }
        Ok(out)
    }

    /// Opens one record (header and body) in place: its content type and content.
    fn open<'a>(
        &mut self,
        key: &aead::LessSafeKey,
        rec: &'a mut [u8],
    ) -> Result<(u8, &'a [u8]), RecordError> {
        let (hdr, body) = rec.split_at_mut(HEADER);
        let (typ, version) = (hdr[0], [hdr[1], hdr[2]]);
        let (typ, content): (u8, &'a [u8]) = match (self.version, self.alg) {
            (Version::Tls13, _) => {
                if typ != APPLICATION_DATA {
                    return Err(RecordError::UnexpectedContent(typ));
                }
                let aad = aead::Aad::from([hdr[0], hdr[1], hdr[2], hdr[3], hdr[4]]);
                let nonce = aead::Nonce::assume_unique_for_key(self.rx.nonce());
                let inner = key
                    .open_in_place(nonce, aad, body)
                    .map_err(|_| RecordError::Decrypt)?;
                // The real type is the last byte that is not padding; none: an error.
                let at = inner
                    .iter()
                    .rposition(|&b| b != 0)
                    .ok_or(RecordError::UnexpectedContent(0))?;
                (inner[at], &inner[..at])
            }
            (Version::Tls12, Alg::Chacha20Poly1305) => {
                let n = body.len().checked_sub(TAG).ok_or(RecordError::Decrypt)?;
                let aad = tls12_aad(self.rx.seq, typ, version, n);
                let nonce = aead::Nonce::assume_unique_for_key(self.rx.nonce());
                let p = key
                    .open_in_place(nonce, aad, body)
                    .map_err(|_| RecordError::Decrypt)?;
                (typ, &*p)
            }
            (Version::Tls12, Alg::Aes128Gcm | Alg::Aes256Gcm) => {
                let n = body
                    .len()
                    .checked_sub(EXPLICIT + TAG)
                    .ok_or(RecordError::Decrypt)?;
                let (explicit, sealed) = body.split_at_mut(EXPLICIT);
                let mut nonce = [0; 12];
                nonce[..4].copy_from_slice(&self.rx.iv[..4]);
                nonce[4..].copy_from_slice(explicit);
                let aad = tls12_aad(self.rx.seq, typ, version, n);
                let p = key
                    .open_in_place(aead::Nonce::assume_unique_for_key(nonce), aad, sealed)
                    .map_err(|_| RecordError::Decrypt)?;
                (typ, &*p)
            }
        };
        if content.len() > MAX_PLAIN {
            return Err(RecordError::Oversized(content.len()));
        }
        self.rx.seq = self
            .rx
            .seq
            .checked_add(1)
            .ok_or(RecordError::Limit(u64::MAX))?;
        Ok((typ, content))
    }

    /// An alert from the peer: true for close_notify, Ok(false) for one passed over.
    fn read_alert(&self, content: &[u8]) -> Result<bool, RecordError> {
        let &[level, desc] = content else {
            return Err(RecordError::Malformed("alert"));
        };
        let desc = AlertDescription::from(desc);
        Ok(match (self.version, level, desc) {
            (_, _, AlertDescription::CloseNotify) => true,
            (Version::Tls13, _, AlertDescription::UserCanceled) | (Version::Tls12, 1, _) => false,
            _ => return Err(RecordError::Alert(desc)),
        })
    }

    /// Handshake messages after the handshake, each whole in this record.
    fn read_handshake(&self, mut content: &[u8]) -> Result<(), RecordError> {
        while let [typ, a, b, c, rest @ ..] = content {
            let len = u32::from_be_bytes([0, *a, *b, *c]) as usize;
            if rest.len() < len {
                return Err(RecordError::Malformed(
                    "handshake message split across records",
                ));
            }
            match (self.version, self.client, *typ) {
                (Version::Tls13, true, NEW_SESSION_TICKET) => {}
                (Version::Tls12, true, HELLO_REQUEST) => {}
                (Version::Tls13, _, KEY_UPDATE) => return Err(RecordError::KeyUpdate),
                (_, _, t) => return Err(RecordError::UnexpectedHandshake(t)),
            }
            content = &rest[len..];
        }
        if content.is_empty() {
            Ok(())
        } else {
            Err(RecordError::Malformed("handshake message header"))
        }
    }

    /// Seals `data` as application records at the end of `wire`.
    pub(crate) fn seal(&mut self, data: &[u8], wire: &mut Vec<u8>) -> Result<(), RecordError> {
        let key = self.tx.expanded(self.alg)?;
        let start = wire.len();
        wire.reserve(data.len() + data.len().div_ceil(MAX_PLAIN) * (HEADER + EXPLICIT + TAG));
        for chunk in data.chunks(MAX_PLAIN) {
            if let Err(e) = self.seal_one(&key, APPLICATION_DATA, chunk, wire) {
                wire.truncate(start);
                return Err(e);
            }
        }
        Ok(())
    }

    /// A close_notify at the end of `wire` (best effort).
    pub(crate) fn close_notify(&mut self, wire: &mut Vec<u8>) {
        self.send_alert(1, AlertDescription::CloseNotify, wire);
    }

    /// A fatal alert at the end of `wire` (best effort).
    fn alert(&mut self, desc: AlertDescription, wire: &mut Vec<u8>) {
        self.send_alert(2, desc, wire);
    }

    fn send_alert(&mut self, level: u8, desc: AlertDescription, wire: &mut Vec<u8>) {
        if let Ok(key) = self.tx.expanded(self.alg) {
            let start = wire.len();
            if self
                .seal_one(&key, ALERT, &[level, u8::from(desc)], wire)
                .is_err()
            {
                wire.truncate(start);
            }
        }
    }

    /// Seals one record of `typ` carrying `content` (≤ 16 KiB) at the end of `wire`.
    fn seal_one(
        &mut self,
        key: &aead::LessSafeKey,
        typ: u8,
        content: &[u8],
        wire: &mut Vec<u8>,
    ) -> Result<(), RecordError> {
        if self.tx.seq >= self.alg.limit() {
            return Err(RecordError::Limit(self.tx.seq));
        }
        let nonce = self.tx.nonce();
        let n = content.len();
        let tag = match self.version {
            Version::Tls13 => {
                let len = (n + 1 + TAG) as u16;
                let [l0, l1] = len.to_be_bytes();
                let hdr = [APPLICATION_DATA, 3, 3, l0, l1];
                wire.extend_from_slice(&hdr);
                let body = wire.len();
                wire.extend_from_slice(content);
                wire.push(typ);
                key.seal_in_place_separate_tag(
                    aead::Nonce::assume_unique_for_key(nonce),
                    aead::Aad::from(hdr),
                    &mut wire[body..],
                )
            }
            Version::Tls12 => {
                let explicit = match self.alg {
                    Alg::Chacha20Poly1305 => 0,
                    Alg::Aes128Gcm | Alg::Aes256Gcm => EXPLICIT,
                };
                let [l0, l1] = ((explicit + n + TAG) as u16).to_be_bytes();
                wire.extend_from_slice(&[typ, 3, 3, l0, l1]);
                wire.extend_from_slice(&nonce[12 - explicit..]);
                let body = wire.len();
                wire.extend_from_slice(content);
                key.seal_in_place_separate_tag(
                    aead::Nonce::assume_unique_for_key(nonce),
                    tls12_aad(self.tx.seq, typ, [3, 3], n),
                    &mut wire[body..],
                )
            }
        }
        .map_err(|_| RecordError::Seal)?;
        wire.extend_from_slice(tag.as_ref());
        self.tx.seq += 1;
        Ok(())
    }

    /// A handshake message sealed as the peer would send it (tests: a KeyUpdate).
    #[cfg(test)]
    pub(crate) fn seal_handshake(
        &mut self,
        msg: &[u8],
        wire: &mut Vec<u8>,
    ) -> Result<(), RecordError> {
        let key = self.tx.expanded(self.alg)?;
        self.seal_one(&key, HANDSHAKE, msg, wire)
    }

    /// The version and AEAD, as rustls names them (tests and logs).
    #[cfg(test)]
    pub(crate) fn describe(&self) -> String {
        format!("{:?} {:?}", self.version, self.alg)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use std::sync::Arc;

    use rustls::{
        ClientConfig, ServerConfig, SupportedCipherSuite,
        crypto::ring,
        unbuffered::ConnectionState,
        version::{TLS12, TLS13},
    };

    use super::*;
    use crate::workload::{
        stats::counters::TlsErrors,
        tls::{
            failure::TlsFailure,
            footprint::tests::{client, handshaken, server},
            session::TlsConn,
        },
    };

    /// Every AEAD of both versions, by rustls's name.
    const SUITES: [(&str, &rustls::SupportedProtocolVersion); 6] = [
        ("TLS13_AES_128_GCM", &TLS13),
        ("TLS13_AES_256_GCM", &TLS13),
        ("TLS13_CHACHA20", &TLS13),
        ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM", &TLS12),
        ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM", &TLS12),
        ("TLS_ECDHE_ECDSA_WITH_CHACHA20", &TLS12),
    ];

    fn suite(name: &str) -> SupportedCipherSuite {
        *ring::default_provider()
            .cipher_suites
            .iter()
            .find(|s| format!("{:?}", s.suite()).contains(name))
            .unwrap()
    }

    fn with_extraction<T: Clone>(cfg: &Arc<T>, on: bool, set: fn(&mut T, bool)) -> Arc<T> {
        let mut c = (**cfg).clone();
        set(&mut c, on);
        Arc::new(c)
    }

    fn server_extracting(sc: &Arc<ServerConfig>, on: bool) -> Arc<ServerConfig> {
        with_extraction(sc, on, |c, on| c.enable_secret_extraction = on)
    }

    fn client_extracting(cc: &Arc<ClientConfig>, on: bool) -> Arc<ClientConfig> {
        with_extraction(cc, on, |c, on| c.enable_secret_extraction = on)
    }

    /// `from` seals each message, `to` opens it: the same bytes, nothing answered.
    fn carry(from: &mut TlsConn, to: &mut TlsConn, sizes: &[usize]) -> usize {
        let mut records = 0;
        for (k, &n) in sizes.iter().enumerate() {
            let msg: Vec<u8> = (0..n).map(|i| (i + k) as u8).collect();
            let mut wire = Vec::new();
            from.seal(&msg, &mut wire).unwrap();
            records += n.div_ceil(MAX_PLAIN).max(1);
            let (mut plain, mut back) = (Vec::new(), Vec::new());
            let i = to.input(&mut wire, &mut plain, &mut back).unwrap();
            assert_eq!(i.consumed, wire.len());
            assert!(plain == msg && back.is_empty(), "message {k} of {n} B");
        }
        records
    }

    fn sizes() -> Vec<usize> {
        let mut s: Vec<usize> = (0..1500).map(|i| 1 + i % 300).collect();
        s.extend([MAX_PLAIN - 1, MAX_PLAIN, MAX_PLAIN + 1, 40_000]);
        s
    }

    /// c1m's record layer on one side, rustls's own on the other, for each suite of
    /// both versions, each side in turn: over 1,500 records each way (sequence numbers
    /// past one byte), records of 1 B to 16 KiB and a message cut into three, then a
    /// close_notify each way.
    #[test]
    fn records_sealed_by_c1m_open_in_rustls_and_back_for_every_suite_and_version() {
        let (sc, cert) = server(false);
        for (name, version) in SUITES {
            let rustls_client = client(&cert, &[suite(name)], &[version], false);
            for c1m_side_is_server in [true, false] {
                let (sc, cc) = match c1m_side_is_server {
                    true => (sc.clone(), rustls_client.clone()),
                    false => (
                        server_extracting(&sc, false),
                        client_extracting(&rustls_client, true),
                    ),
                };
                let (mut s, mut c) = handshaken(&sc, &cc);
                let what = format!("{name}, c1m's side the server: {c1m_side_is_server}");
                assert_eq!(
                    (s.handed_over(), c.handed_over()),
                    (c1m_side_is_server, !c1m_side_is_server),
                    "{what}"
                );
                let ours = match c1m_side_is_server {
                    true => s.records().unwrap().describe(),
                    false => c.records().unwrap().describe(),
                };
                let v = if *version == TLS13 { "Tls13" } else { "Tls12" };
                assert!(ours.starts_with(v), "{what}: {ours}");
                let up = carry(&mut c, &mut s, &sizes());
                let down = carry(&mut s, &mut c, &sizes());
                assert!(up > 1500 && down > 1500, "{what}");
                let close = |from: &mut TlsConn, to: &mut TlsConn| {
                    let mut wire = Vec::new();
                    from.close_notify(&mut wire);
                    let i = to
                        .input(&mut wire, &mut Vec::new(), &mut Vec::new())
                        .unwrap();
                    assert!(i.peer_closed, "{what}");
                };
                close(&mut s, &mut c);
                close(&mut c, &mut s);
            }
        }
    }

    /// Both sides handed over (c1m's client without resumption), against a server that
    /// hands out tickets: the client passes the ticket over and data flows.
    #[test]
    fn two_c1m_sides_hand_over_and_a_client_passes_a_ticket_over() {
        let (sc, cert) = server(true);
        let cc = crate::workload::tls::config::ClientTls {
            ca_pem: Some(cert),
            insecure_skip_verify: false,
            server_name: "127.0.0.1".into(),
            resumption: false,
        }
        .config()
        .unwrap();
        let (mut s, mut c) = handshaken(&sc, &cc);
        assert!(s.handed_over() && c.handed_over());
        carry(&mut c, &mut s, &[5, 300, 20_000]);
        carry(&mut s, &mut c, &[5, 300, 20_000]);
    }

    fn counted(e: TlsFailure) -> TlsErrors {
        let mut c = TlsErrors::default();
        e.count(&mut c);
        c
    }

    /// A flipped bit in a record rustls sealed: the server refuses it, counts a protocol
    /// failure and tells the peer bad_record_mac, which rustls reads as such.
    #[test]
    fn a_tampered_record_is_a_counted_failure_and_the_peer_hears_bad_record_mac() {
        let (sc, cert) = server(false);
        for (name, version) in SUITES {
            let cc = client(&cert, &[suite(name)], &[version], false);
            let (mut s, mut c) = handshaken(&sc, &cc);
            let mut wire = Vec::new();
            c.seal(b"GET / HTTP/1.1\r\n\r\n", &mut wire).unwrap();
            let last = wire.len() - 1;
            wire[last] ^= 0x40;
            let mut back = Vec::new();
            let e = s.input(&mut wire, &mut Vec::new(), &mut back).unwrap_err();
            assert!(matches!(e, TlsFailure::Record(RecordError::Decrypt)), "{e}");
            assert_eq!(counted(e).protocol, 1, "{name}");
            let e = c
                .input(&mut back, &mut Vec::new(), &mut Vec::new())
                .unwrap_err();
            assert!(
                matches!(
                    e,
                    TlsFailure::Rustls(rustls::Error::AlertReceived(
                        AlertDescription::BadRecordMac
                    ))
                ),
                "{name}: {e}"
            );
        }
    }

    /// rustls's client updates its keys (TLS 1.3 KeyUpdate): c1m's server refuses it with
    /// unexpected_message, counted as a protocol failure.
    #[test]
    fn a_key_update_is_refused_with_a_fatal_alert_counted_as_protocol() {
        let (sc, cert) = server(false);
        let cc = client(&cert, &[suite("TLS13_AES_128_GCM")], &[&TLS13], false);
        let (mut s, mut c) = handshaken(&sc, &cc);
        let TlsConn::Client { conn, .. } = &mut c else {
            unreachable!("a rustls client")
        };
        match conn.process_tls_records(&mut []).state {
            Ok(ConnectionState::WriteTraffic(w)) => w.refresh_traffic_keys().unwrap(),
            other => panic!("{other:?}"),
        }
        let mut wire = Vec::new();
        c.seal(b"after the update", &mut wire).unwrap();
        let mut back = Vec::new();
        let e = s.input(&mut wire, &mut Vec::new(), &mut back).unwrap_err();
        assert!(
            matches!(e, TlsFailure::Record(RecordError::KeyUpdate)),
            "{e}"
        );
        assert_eq!(counted(e).protocol, 1);
        let e = c
            .input(&mut back, &mut Vec::new(), &mut Vec::new())
            .unwrap_err();
        assert!(
            matches!(
                e,
                TlsFailure::Rustls(rustls::Error::AlertReceived(
                    AlertDescription::UnexpectedMessage
                ))
            ),
            "{e}"
        );
    }

    /// What else a peer may send after the handshake: a fatal alert (counted as the
    /// peer's), a TLS 1.2 warning (passed over), a record too long, a handshake message a
    /// server never receives, a record of no known type; none panics.
    #[test]
    fn other_post_handshake_input_is_counted_and_never_panics() {
        let (sc, cert) = server(false);
        let mk = |v: &'static rustls::SupportedProtocolVersion, name: &str| {
            let cc = client_extracting(&client(&cert, &[suite(name)], &[v], false), true);
            handshaken(&sc, &cc)
        };
        // A fatal alert from the peer.
        let (mut s, mut c) = mk(&TLS13, "TLS13_CHACHA20");
        let mut wire = Vec::new();
        c.records()
            .unwrap()
            .alert(AlertDescription::HandshakeFailure, &mut wire);
        let e = s
            .input(&mut wire, &mut Vec::new(), &mut Vec::new())
            .unwrap_err();
        assert_eq!(counted(e).incompatible, 1);
        // A TLS 1.2 warning is passed over, the data after it read.
        let (mut s, mut c) = mk(&TLS12, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM");
        let mut wire = Vec::new();
        c.records()
            .unwrap()
            .send_alert(1, AlertDescription::UserCanceled, &mut wire);
        c.seal(b"still here", &mut wire).unwrap();
        let mut plain = Vec::new();
        s.input(&mut wire, &mut plain, &mut Vec::new()).unwrap();
        assert_eq!(plain, b"still here");
        // A header announcing more than TLS allows.
        let mut big = vec![23, 3, 3, 0xff, 0xff];
        let e = s
            .input(&mut big, &mut Vec::new(), &mut Vec::new())
            .unwrap_err();
        assert_eq!(counted(e).protocol, 1);
        // A ClientHello after the handshake (renegotiation), to a server.
        let (mut s, mut c) = mk(&TLS13, "TLS13_AES_256_GCM");
        let mut wire = Vec::new();
        c.records()
            .unwrap()
            .seal_handshake(&[1, 0, 0, 0], &mut wire)
            .unwrap();
        let e = s
            .input(&mut wire, &mut Vec::new(), &mut Vec::new())
            .unwrap_err();
        assert!(matches!(
            e,
            TlsFailure::Record(RecordError::UnexpectedHandshake(1))
        ));
        // A record of an unknown type, and a cut one that waits.
        let (mut s, _c) = mk(&TLS12, "TLS_ECDHE_ECDSA_WITH_CHACHA20");
        let mut odd = vec![99, 3, 3, 0, 17];
        odd.extend([0; 17]);
        let e = s
            .input(&mut odd, &mut Vec::new(), &mut Vec::new())
            .unwrap_err();
        assert_eq!(counted(e).protocol, 1);
        let mut cut = vec![23, 3, 3, 0, 40, 1, 2];
        let i = s.input(&mut cut, &mut Vec::new(), &mut Vec::new()).unwrap();
        assert_eq!(i.consumed, 0);
    }
}
