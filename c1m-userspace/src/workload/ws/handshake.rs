//! The opening handshake (RFC 6455 §4): parse and answer the client's HTTP/1.1 upgrade
//! request; build the request and check the server's answer on the client side.

use base64::{Engine as _, engine::general_purpose::STANDARD as B64};
use sha1::{Digest, Sha1};
use thiserror::Error;

/// §1.3: the GUID concatenated to the key before hashing.
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Largest request or response head we accept. Real handshakes are ~200–500 bytes; 8 KiB
/// is the common HTTP server default and bounds what a slow or hostile peer can make us hold.
pub(crate) const MAX_HEAD: usize = 8192;

/// Why an opening handshake failed, on either side.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum HandshakeError {
    /// The request or response head passed [`MAX_HEAD`] bytes without ending.
    #[error("request head larger than {MAX_HEAD} bytes")]
    TooLarge,
    /// The head is not well-formed HTTP (bad line ending, header line, or UTF-8).
    #[error("malformed HTTP head")]
    Malformed,
    /// The request's method is not GET.
    #[error("not a GET request")]
    NotGet,
    /// The request or status line is not HTTP/1.1.
    #[error("not HTTP/1.1")]
    BadVersion,
    /// No `Upgrade: websocket` header, or another value.
    #[error("missing or wrong Upgrade: websocket")]
    NoUpgrade,
    /// No `upgrade` token in the `Connection` header.
    #[error("missing Connection: upgrade")]
    NoConnectionUpgrade,
    /// `Sec-WebSocket-Key` missing, or not 16 bytes of base64.
    #[error("missing Sec-WebSocket-Key or not 16 bytes of base64")]
    BadKey,
    /// A `Sec-WebSocket-Version` other than 13.
    #[error("unsupported Sec-WebSocket-Version (only 13)")]
    UnsupportedVersion,
    /// Client side: the server answered with another status than 101 (the payload).
    #[error("server answered HTTP {0}, not 101")]
    Rejected(u16),
    /// Client side: `Sec-WebSocket-Accept` does not match the key sent.
    #[error("wrong Sec-WebSocket-Accept")]
    BadAccept,
}

impl HandshakeError {
    /// The HTTP status the server answers with (§4.2.2: 426 for an unsupported version,
    /// 431 is not in the RFC, so an oversize head is a plain 400).
    pub fn status(&self) -> u16 {
        match self {
            HandshakeError::UnsupportedVersion => 426,
            _ => 400,
        }
    }
}

/// Base64 of 16 bytes: a `Sec-WebSocket-Key`, held inline so a handshake allocates nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key([u8; 24]);

impl Key {
    /// A key from 16 bytes of nonce (§4.1: base64 of 16 random bytes).
    pub fn from_nonce(nonce: [u8; 16]) -> Key {
        let mut k = [0; 24];
        // 16 bytes are always 24 base64 characters: the slice fits by construction.
        let _ = B64.encode_slice(nonce, &mut k);
        Key(k)
    }

    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// Base64 of a SHA-1 digest: a `Sec-WebSocket-Accept`, inline like [`Key`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Accept([u8; 28]);

impl Accept {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    #[cfg(test)]
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// `Sec-WebSocket-Accept` for a key (§4.2.2 step 5.4).
pub(crate) fn accept_key(key: &[u8]) -> Accept {
    let mut h = Sha1::new();
    h.update(key);
    h.update(GUID.as_bytes());
    let mut a = [0; 28];
    // 20 bytes are always 28 base64 characters.
    let _ = B64.encode_slice(h.finalize(), &mut a);
    Accept(a)
}

/// Index just past the `\r\n\r\n` that ends the head, if present.
fn head_end(buf: &[u8]) -> Option<usize> {
    // The first `\n` with `\r\n\r` before it ends the first `\r\n\r\n`: a head has a
    // handful of lines, and memchr finds their ends faster than a substring search finds
    // the blank line (`memmem`: its searcher's build and search were 0.7% of a 1M
    // WebSocket ramp's CPU, perf 2026-12-05).
    memchr::memchr_iter(b'\n', buf)
        .find(|&nl| nl >= 3 && &buf[nl - 3..nl] == b"\r\n\r")
        .map(|nl| nl + 1)
}

/// What the handshake needs from a head: its start line and the upgrade headers, as slices
/// of the input. One pass over the bytes, nothing allocated: the handshake is on every
/// connection's path, and a `Vec` of headers, `str` splitting, owned keys and `format!`
/// were ~4% of a 1M WebSocket ramp's CPU (perf; ~2.7% after).
#[derive(Default)]
struct Head<'a> {
    start: &'a [u8],
    /// Some `Upgrade` header lists `websocket`; some `Connection` header lists `upgrade`.
    upgrade_websocket: bool,
    connection_upgrade: bool,
    /// The first of each.
    version: Option<&'a [u8]>,
    key: Option<&'a [u8]>,
    accept: Option<&'a [u8]>,
}

impl<'a> Head<'a> {
    /// `head` ends with the blank line (see [`head_end`]).
    fn parse(head: &'a [u8]) -> Result<Head<'a>, HandshakeError> {
        // A head that is not UTF-8 is not HTTP we answer (400, as tests/corpus/ws says).
        // ASCII, as every real head is, is UTF-8: the word-wide test first.
        if !head.is_ascii() {
            std::str::from_utf8(head).map_err(|_| HandshakeError::Malformed)?;
        }
        // Every line, the start line too, ends in CRLF; the blank line is left out. Lines
        // found by memchr, and control characters by a fold the compiler vectorizes:
        // byte-wise, these two passes made the parse 0.2–0.4 µs a head (perf, 200k–1M).
        let body = head
            .strip_suffix(b"\r\n")
            .ok_or(HandshakeError::Malformed)?;
        let mut lines = memchr::memchr_iter(b'\n', body)
            .scan(0, |start, nl| {
                let line = &body[*start..nl];
                *start = nl + 1;
                Some(line)
            })
            .map(|l| l.strip_suffix(b"\r").ok_or(HandshakeError::Malformed));
        let mut h = Head {
            start: lines.next().ok_or(HandshakeError::Malformed)??,
            ..Head::default()
        };
        for line in lines {
            // Obsolete line folding and bare control characters are rejected (RFC 9112 §5.2).
            let line = line?;
            let control = line
                .iter()
                .fold(false, |seen, &b| seen | ((b < 0x20) & (b != b'\t')));
            if line.starts_with(b" ") || line.starts_with(b"\t") || control {
                return Err(HandshakeError::Malformed);
            }
            let colon = memchr::memchr(b':', line).ok_or(HandshakeError::Malformed)?;
            let (name, value) = (&line[..colon], trim_ows(&line[colon + 1..]));
            if name.is_empty() || name.iter().any(|&b| b == b' ' || b == b'\t') {
                return Err(HandshakeError::Malformed);
            }
            // By length first: every other header (Host, User-Agent, …) is then one
            // compare of a length, not five case-folding compares of the name.
            let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
            match name.len() {
                7 if is("upgrade") => h.upgrade_websocket |= has_token(value, "websocket"),
                10 if is("connection") => h.connection_upgrade |= has_token(value, "upgrade"),
                21 if is("sec-websocket-version") => h.version = h.version.or(Some(value)),
                17 if is("sec-websocket-key") => h.key = h.key.or(Some(value)),
                20 if is("sec-websocket-accept") => h.accept = h.accept.or(Some(value)),
                _ => {}
            }
        }
        Ok(h)
    }
}

/// Without the optional white space around a field value or list element (RFC 9110 §5.6.3).
fn trim_ows(v: &[u8]) -> &[u8] {
    let ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = v.iter().position(|b| !ows(b)).unwrap_or(v.len());
    let end = v.iter().rposition(|b| !ows(b)).map_or(start, |e| e + 1);
    &v[start..end]
}

/// True if the comma-separated `value` (trimmed) has `token` (case-insensitive).
fn has_token(value: &[u8], token: &str) -> bool {
    // A value of one token, as clients send, is one compare; only a list is split and
    // trimmed: 0.25 µs a WebSocket in has_token before, four calls a connection over
    // both sides (perf, 1M ramp, 2026-12-06).
    if memchr::memchr(b',', value).is_none() {
        return value.eq_ignore_ascii_case(token.as_bytes());
    }
    value
        .split(|&b| b == b',')
        .any(|t| trim_ows(t).eq_ignore_ascii_case(token.as_bytes()))
}

/// A valid upgrade request, as slices of the input.
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    /// The request target, e.g. "/".
    pub path: &'a str,
    /// The `Sec-WebSocket-Key` header's value, as sent.
    pub key: &'a str,
}

/// Parses a client's upgrade request from the start of `buf`.
/// `Ok(None)`: incomplete, read more. `Ok(Some((req, n)))`: `n` bytes were the head.
pub fn parse_request(buf: &[u8]) -> Result<Option<(Request<'_>, usize)>, HandshakeError> {
    match request_as_written(buf) {
        Some(ours) => Ok(Some(ours)),
        None => parse_any_request(buf),
    }
}

/// [`parse_request`] for any request, by the general parse.
fn parse_any_request(buf: &[u8]) -> Result<Option<(Request<'_>, usize)>, HandshakeError> {
    let Some(end) = head_end(buf) else {
        return if buf.len() > MAX_HEAD {
            Err(HandshakeError::TooLarge)
        } else {
            Ok(None)
        };
    };
    if end > MAX_HEAD {
        return Err(HandshakeError::TooLarge);
    }
    let head = Head::parse(&buf[..end])?;
    let mut parts = head.start.split(|&b| b == b' ');
    let (Some(method), Some(path), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HandshakeError::Malformed);
    };
    if method != b"GET" {
        return Err(HandshakeError::NotGet);
    }
    if version != b"HTTP/1.1" {
        return Err(HandshakeError::BadVersion);
    }
    let path = std::str::from_utf8(path).map_err(|_| HandshakeError::Malformed)?;
    if path.is_empty() {
        return Err(HandshakeError::Malformed);
    }
    if !head.upgrade_websocket {
        return Err(HandshakeError::NoUpgrade);
    }
    if !head.connection_upgrade {
        return Err(HandshakeError::NoConnectionUpgrade);
    }
    if head.version != Some(b"13") {
        return Err(HandshakeError::UnsupportedVersion);
    }
    let key = head
        .key
        .filter(|k| is_key(k))
        .ok_or(HandshakeError::BadKey)?;
    let key = std::str::from_utf8(key).map_err(|_| HandshakeError::BadKey)?;
    Ok(Some((Request { path, key }, end)))
}

/// A request in the shape [`write_request`] writes, any path and host, matched byte by
/// byte; `None` for anything else, which the general parse then reads. It accepts only
/// what the general parse accepts, with the same result (test `as_written_agrees`): the
/// general parse of our own clients' requests (line splits, header lookups, case folds)
/// was ~0.6 µs a WebSocket at 1M, this is a few compares (perf, 2026-12-06).
fn request_as_written(buf: &[u8]) -> Option<(Request<'_>, usize)> {
    let rest = buf.strip_prefix(b"GET ")?;
    let (path, rest) = rest.split_at(memchr::memchr(b' ', rest)?);
    let rest = rest.strip_prefix(b" HTTP/1.1\r\nHost: ")?;
    let (host, rest) = rest.split_at(memchr::memchr(b'\r', rest)?);
    let rest = rest.strip_prefix(
        b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ".as_slice(),
    )?;
    let (key, rest) = rest.split_at_checked(24)?;
    let rest = rest.strip_prefix(b"\r\nSec-WebSocket-Version: 13\r\n\r\n")?;
    let end = buf.len() - rest.len();
    // Visible ASCII in the path, and no control character but tab in the host: what the
    // general parse's line and start-line rules allow, narrowed to what clients send.
    let plain_host = host
        .iter()
        .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b));
    if end > MAX_HEAD
        || path.is_empty()
        || !path.iter().all(u8::is_ascii_graphic)
        || !plain_host
        || !is_key(key)
    {
        return None;
    }
    let request = Request {
        path: std::str::from_utf8(path).ok()?,
        key: std::str::from_utf8(key).ok()?,
    };
    Some((request, end))
}

/// A `Sec-WebSocket-Key` of 16 bytes in base64 (§4.1): 22 characters of the alphabet, the
/// last carrying 2 bits (so its low 4 are zero: A, Q, g or w), then `==`. Exactly what
/// decoding to 16 bytes accepts (test `key_check_agrees_with_decoding`), without decoding.
fn is_key(k: &[u8]) -> bool {
    let b64 = |b: &u8| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/';
    k.len() == 24
        && k[..21].iter().all(b64)
        && matches!(k[21], b'A' | b'Q' | b'g' | b'w')
        && k[22..] == *b"=="
}

/// The 101 answer up to its accept key, as [`write_accept`] writes it.
const ACCEPT_HEAD: &[u8] = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ";

/// Appends the 101 answer to a valid request.
pub(crate) fn write_accept(out: &mut Vec<u8>, key: &str) {
    out.extend_from_slice(ACCEPT_HEAD);
    out.extend_from_slice(accept_key(key.as_bytes()).as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
}

/// Appends the error answer to a bad request; the connection is closed after it.
pub(crate) fn write_reject(out: &mut Vec<u8>, err: &HandshakeError) {
    let (status, reason) = match err.status() {
        426 => (426, "Upgrade Required"),
        _ => (400, "Bad Request"),
    };
    let body = err.to_string();
    out.extend_from_slice(
        format!(
            "HTTP/1.1 {status} {reason}\r\nSec-WebSocket-Version: 13\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
}

/// The 101 answer to a valid request, on its own (tests and tools; the engines append).
pub fn response_accept(key: &str) -> Vec<u8> {
    let mut out = Vec::new();
    write_accept(&mut out, key);
    out
}

/// The client's upgrade request, on its own (tests and tools; the engines append).
pub fn request(host: &str, path: &str, key: &Key) -> Vec<u8> {
    let mut out = Vec::new();
    write_request(&mut out, host, path, key);
    out
}

/// Appends the client's upgrade request.
pub(crate) fn write_request(out: &mut Vec<u8>, host: &str, path: &str, key: &Key) {
    for part in [
        "GET ",
        path,
        " HTTP/1.1\r\nHost: ",
        host,
        "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ",
        key.as_str(),
        "\r\nSec-WebSocket-Version: 13\r\n\r\n",
    ] {
        out.extend_from_slice(part.as_bytes());
    }
}

/// Checks the server's answer at the start of `buf` against the key we sent.
/// `Ok(None)`: incomplete. `Ok(Some(n))`: accepted, `n` bytes were the head (frames may follow).
pub fn parse_response(buf: &[u8], key: &Key) -> Result<Option<usize>, HandshakeError> {
    match response_as_written(buf, key) {
        Some(n) => Ok(Some(n)),
        None => parse_any_response(buf, key),
    }
}

/// The answer as [`write_accept`] writes it (and the C reference server), compared whole:
/// what [`parse_any_response`] accepts (test `as_written_agrees`), without its ~0.5 µs a
/// WebSocket (perf, 1M ramp, 2026-12-06). The accept key is hashed only once the whole
/// answer is there: a head that arrives in pieces costs one SHA-1, not one a read.
fn response_as_written(buf: &[u8], key: &Key) -> Option<usize> {
    let rest = buf.strip_prefix(ACCEPT_HEAD)?;
    let (got, rest) = rest.split_at_checked(28)?;
    let rest = rest.strip_prefix(b"\r\n\r\n")?;
    (got == accept_key(key.as_str().as_bytes()).as_bytes()).then_some(buf.len() - rest.len())
}

/// [`parse_response`] for any answer, by the general parse.
fn parse_any_response(buf: &[u8], key: &Key) -> Result<Option<usize>, HandshakeError> {
    let Some(end) = head_end(buf) else {
        return if buf.len() > MAX_HEAD {
            Err(HandshakeError::TooLarge)
        } else {
            Ok(None)
        };
    };
    let head = Head::parse(&buf[..end])?;
    let mut parts = head.start.splitn(3, |&b| b == b' ');
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
        return Err(HandshakeError::Malformed);
    };
    if version != b"HTTP/1.1" {
        return Err(HandshakeError::BadVersion);
    }
    let code: u16 = std::str::from_utf8(code)
        .ok()
        .and_then(|c| c.parse().ok())
        .ok_or(HandshakeError::Malformed)?;
    if code != 101 {
        return Err(HandshakeError::Rejected(code));
    }
    if !head.upgrade_websocket {
        return Err(HandshakeError::NoUpgrade);
    }
    if !head.connection_upgrade {
        return Err(HandshakeError::NoConnectionUpgrade);
    }
    if head.accept != Some(accept_key(key.as_str().as_bytes()).as_bytes()) {
        return Err(HandshakeError::BadAccept);
    }
    Ok(Some(end))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    const RFC_KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

    /// RFC_KEY as a [`Key`]: the RFC's nonce.
    fn rfc_key() -> Key {
        Key::from_nonce(*b"the sample nonce")
    }

    fn response_reject(err: &HandshakeError) -> Vec<u8> {
        let mut out = Vec::new();
        write_reject(&mut out, err);
        out
    }

    #[test]
    fn rfc_accept_vector() {
        // RFC 6455 §1.3.
        assert_eq!(rfc_key().as_str(), RFC_KEY);
        assert_eq!(
            accept_key(RFC_KEY.as_bytes()).as_str(),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn rfc_request_parses_and_round_trips() {
        // RFC 6455 §1.2, with the Origin and protocol lines it shows.
        let req = "GET /chat HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                   Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://example.com\r\n\
                   Sec-WebSocket-Protocol: chat, superchat\r\nSec-WebSocket-Version: 13\r\n\r\nrest";
        let (r, n) = parse_request(req.as_bytes()).unwrap().unwrap();
        assert_eq!((r.path, r.key, &req[n..]), ("/chat", RFC_KEY, "rest"));
        let resp = response_accept(r.key);
        assert_eq!(parse_response(&resp, &rfc_key()), Ok(Some(resp.len())));
        assert!(String::from_utf8_lossy(&resp).contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
        let ours = request("h", "/", &rfc_key());
        assert!(parse_request(&ours).unwrap().is_some());
    }

    #[test]
    fn header_spellings_browsers_send() {
        // Names in any case, token lists, white space around values, UTF-8 in a value we
        // do not read: all valid (RFC 9110 §5.1, §5.6.1); a head that is not UTF-8 is not.
        let req = "GET /x?y=1 HTTP/1.1\r\nhost: h\r\nUPGRADE:websocket\r\n\
                   connection:  keep-alive, Upgrade \r\nsec-websocket-key:\tdGhlIHNhbXBsZSBub25jZQ==\r\n\
                   User-Agent: café\r\nSec-WebSocket-Version: 13\r\n\r\n";
        let (r, n) = parse_request(req.as_bytes()).unwrap().unwrap();
        assert_eq!((r.path, r.key, n), ("/x?y=1", RFC_KEY, req.len()));
        let mut latin1 = req.as_bytes().to_vec();
        let at = latin1.windows(2).position(|w| w == "é".as_bytes()).unwrap();
        latin1[at] = 0xe9;
        assert_eq!(parse_request(&latin1), Err(HandshakeError::Malformed));
        for bad in [
            req.replace("host: h\r\n", "host: h\n"),
            req.replace("host: h", "host h"),
            req.replace("host: h", "ho st: h"),
            req.replace("host: h", "host: h\rx"),
        ] {
            assert_eq!(
                parse_request(bad.as_bytes()).map(|r| r.is_some()),
                Err(HandshakeError::Malformed),
                "{bad:?}"
            );
        }
    }

    /// The blank line is found where a substring search finds the first `\r\n\r\n`.
    #[test]
    fn head_end_is_the_first_blank_line() {
        for buf in [
            &b""[..],
            b"\r\n\r\n",
            b"\r\n\r",
            b"\n\r\n\r\n",
            b"\r\r\n\r\n",
            b"\r\n\n\r\n\r\nx",
            b"GET / HTTP/1.1\r\nA: b\r\n\r\n\x82\x01\r\n\r\n",
            b"a\nb\r\nc\r\r\n\r\n",
        ] {
            let want = memchr::memmem::find(buf, b"\r\n\r\n").map(|p| p + 4);
            assert_eq!(head_end(buf), want, "{buf:?}");
        }
    }

    #[test]
    fn incomplete_then_complete() {
        let req = request("h", "/", &rfc_key());
        for cut in 0..req.len() {
            assert_eq!(parse_request(&req[..cut]), Ok(None));
        }
    }

    #[test]
    fn bad_requests() {
        let ok = String::from_utf8(request("h", "/", &rfc_key())).unwrap();
        let cases = [
            (ok.replace("GET", "POST"), HandshakeError::NotGet),
            (
                ok.replace("HTTP/1.1", "HTTP/1.0"),
                HandshakeError::BadVersion,
            ),
            (
                ok.replace("Upgrade: websocket", "Upgrade: h2c"),
                HandshakeError::NoUpgrade,
            ),
            (
                ok.replace("Connection: Upgrade", "Connection: close"),
                HandshakeError::NoConnectionUpgrade,
            ),
            (ok.replace(RFC_KEY, "c2hvcnQ="), HandshakeError::BadKey),
            (
                ok.replace(RFC_KEY, "!!!notbase64!!!"),
                HandshakeError::BadKey,
            ),
            (
                ok.replace("Sec-WebSocket-Key", "X-Key"),
                HandshakeError::BadKey,
            ),
            (
                ok.replace("Version: 13", "Version: 8"),
                HandshakeError::UnsupportedVersion,
            ),
            (ok.replace("Host: h", " folded"), HandshakeError::Malformed),
        ];
        for (req, err) in cases {
            assert_eq!(parse_request(req.as_bytes()), Err(err.clone()), "{req:?}");
            let resp = String::from_utf8(response_reject(&err)).unwrap();
            assert!(resp.starts_with(&format!("HTTP/1.1 {}", err.status())));
        }
        assert_eq!(
            parse_request(&vec![b'a'; MAX_HEAD + 1]),
            Err(HandshakeError::TooLarge)
        );
    }

    #[test]
    fn bad_responses() {
        let ok = String::from_utf8(response_accept(RFC_KEY)).unwrap();
        assert_eq!(
            parse_response(ok.as_bytes(), &Key::from_nonce([0; 16])),
            Err(HandshakeError::BadAccept)
        );
        let rej = response_reject(&HandshakeError::BadKey);
        assert_eq!(
            parse_response(&rej, &rfc_key()),
            Err(HandshakeError::Rejected(400))
        );
    }

    #[test]
    fn key_check_agrees_with_decoding() {
        let decodes_16 = |k: &[u8]| {
            let mut raw = [0; 18];
            k.len() == 24 && B64.decode_slice(k, &mut raw) == Ok(16)
        };
        let other = Key::from_nonce([0xff; 16]);
        for base in [RFC_KEY.as_bytes(), other.as_str().as_bytes()] {
            for i in 0..base.len() {
                for b in 0..=255u8 {
                    let mut k = base.to_vec();
                    k[i] = b;
                    assert_eq!(
                        is_key(&k),
                        decodes_16(&k),
                        "{:?}",
                        String::from_utf8_lossy(&k)
                    );
                }
            }
            for n in 0..base.len() + 2 {
                let k: Vec<u8> = base.iter().copied().cycle().take(n).collect();
                assert_eq!(is_key(&k), decodes_16(&k), "length {n}");
            }
        }
    }

    /// Every head the fast paths take, the general parse takes too, with the same result:
    /// ours, and each of them with one byte changed, one byte cut, or cut short.
    #[test]
    fn as_written_agrees() {
        let key = rfc_key();
        let mut heads = vec![
            (request("h", "/", &rfc_key()), true),
            (
                request("server.example.com:8080", "/chat?x=1", &rfc_key()),
                true,
            ),
            (request("", "/", &rfc_key()), true),
            (request("a\tb", "/", &rfc_key()), true),
            (response_accept(RFC_KEY), false),
        ];
        let mut long = request("h", "/", &rfc_key());
        long.splice(4..5, "/".repeat(MAX_HEAD).bytes());
        assert!(request_as_written(&long).is_none(), "a head over MAX_HEAD");
        heads.push((long, true));
        let bytes = [
            b' ', b'\t', b'\r', b'\n', 0, 0x7f, 0x80, b'a', b'A', b':', b'=',
        ];
        let mut variants = Vec::new();
        for (head, is_request) in &heads {
            let mut more = head.clone();
            more.extend_from_slice(b"\x81\x05hello");
            variants.push((more, *is_request));
            for i in 0..head.len().min(200) {
                for b in bytes {
                    let mut v = head.clone();
                    v[i] = b;
                    variants.push((v, *is_request));
                }
                let mut cut = head.clone();
                cut.remove(i);
                variants.push((cut, *is_request));
                variants.push((head[..i].to_vec(), *is_request));
            }
        }
        let (mut fast_requests, mut fast_responses) = (0, 0);
        for (v, is_request) in &variants {
            if *is_request {
                if let Some(fast) = request_as_written(v) {
                    fast_requests += 1;
                    assert_eq!(
                        parse_any_request(v),
                        Ok(Some(fast)),
                        "{:?}",
                        String::from_utf8_lossy(v)
                    );
                }
                assert_eq!(parse_request(v).is_ok(), parse_any_request(v).is_ok());
            } else if let Some(fast) = response_as_written(v, &key) {
                fast_responses += 1;
                assert_eq!(parse_any_response(v, &key), Ok(Some(fast)));
            }
        }
        // The fast paths did take ours (and harmless changes such as another path byte).
        assert!(
            fast_requests > 5 && fast_responses >= 2,
            "{fast_requests} {fast_responses}"
        );
    }
}
