//! The opening handshake (RFC 6455 §4): parse and answer the client's HTTP/1.1 upgrade
//! request; build the request and check the server's answer on the client side.

use base64::{Engine as _, engine::general_purpose::STANDARD as B64};
use sha1::{Digest, Sha1};
use thiserror::Error;

/// §1.3: the GUID concatenated to the key before hashing.
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Largest request or response head we accept. Real handshakes are ~200–500 bytes; 8 KiB
/// is the common HTTP server default and bounds what a slow or hostile peer can make us hold.
pub const MAX_HEAD: usize = 8192;

#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum HandshakeError {
    #[error("request head larger than {MAX_HEAD} bytes")]
    TooLarge,
    #[error("malformed HTTP head")]
    Malformed,
    #[error("not a GET request")]
    NotGet,
    #[error("not HTTP/1.1")]
    BadVersion,
    #[error("missing or wrong Upgrade: websocket")]
    NoUpgrade,
    #[error("missing Connection: upgrade")]
    NoConnectionUpgrade,
    #[error("missing Sec-WebSocket-Key or not 16 bytes of base64")]
    BadKey,
    #[error("unsupported Sec-WebSocket-Version (only 13)")]
    UnsupportedVersion,
    #[error("server answered HTTP {0}, not 101")]
    Rejected(u16),
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

/// `Sec-WebSocket-Accept` for a key (§4.2.2 step 5.4).
pub fn accept_key(key: &str) -> String {
    let mut h = Sha1::new();
    h.update(key.as_bytes());
    h.update(GUID.as_bytes());
    B64.encode(h.finalize())
}

/// A key from 16 bytes of nonce (§4.1: base64 of 16 random bytes).
pub fn key_from_nonce(nonce: [u8; 16]) -> String {
    B64.encode(nonce)
}

/// Index just past the `\r\n\r\n` that ends the head, if present.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

/// A parsed head: start line and headers, as slices of the input.
struct Head<'a> {
    start: &'a str,
    headers: Vec<(&'a str, &'a str)>,
}

impl<'a> Head<'a> {
    fn parse(head: &'a [u8]) -> Result<Head<'a>, HandshakeError> {
        let text = std::str::from_utf8(head).map_err(|_| HandshakeError::Malformed)?;
        let mut lines = text
            .strip_suffix("\r\n\r\n")
            .ok_or(HandshakeError::Malformed)?
            .split("\r\n");
        let start = lines.next().ok_or(HandshakeError::Malformed)?;
        let mut headers = Vec::new();
        for line in lines {
            // Obsolete line folding and bare control characters are rejected (RFC 9112 §5.2).
            if line.starts_with([' ', '\t']) || line.bytes().any(|b| b < 0x20 && b != b'\t') {
                return Err(HandshakeError::Malformed);
            }
            let (name, value) = line.split_once(':').ok_or(HandshakeError::Malformed)?;
            if name.is_empty() || name.contains([' ', '\t']) {
                return Err(HandshakeError::Malformed);
            }
            headers.push((name, value.trim_matches([' ', '\t'])));
        }
        Ok(Head { start, headers })
    }

    fn get(&self, name: &str) -> Option<&'a str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }

    /// True if any header `name` has `token` in its comma-separated list.
    fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .any(|(_, v)| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    }
}

/// A valid upgrade request.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    pub path: String,
    pub key: String,
}

/// Parses a client's upgrade request from the start of `buf`.
/// `Ok(None)`: incomplete, read more. `Ok(Some((req, n)))`: `n` bytes were the head.
pub fn parse_request(buf: &[u8]) -> Result<Option<(Request, usize)>, HandshakeError> {
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
    let mut parts = head.start.split(' ');
    let (Some(method), Some(path), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HandshakeError::Malformed);
    };
    if method != "GET" {
        return Err(HandshakeError::NotGet);
    }
    if version != "HTTP/1.1" {
        return Err(HandshakeError::BadVersion);
    }
    if path.is_empty() {
        return Err(HandshakeError::Malformed);
    }
    if !head.has_token("upgrade", "websocket") {
        return Err(HandshakeError::NoUpgrade);
    }
    if !head.has_token("connection", "upgrade") {
        return Err(HandshakeError::NoConnectionUpgrade);
    }
    if head.get("sec-websocket-version") != Some("13") {
        return Err(HandshakeError::UnsupportedVersion);
    }
    let key = head
        .get("sec-websocket-key")
        .ok_or(HandshakeError::BadKey)?;
    match B64.decode(key) {
        Ok(raw) if raw.len() == 16 => {}
        _ => return Err(HandshakeError::BadKey),
    }
    Ok(Some((
        Request {
            path: path.to_owned(),
            key: key.to_owned(),
        },
        end,
    )))
}

/// The 101 answer to a valid request.
pub fn response_accept(key: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        accept_key(key)
    )
    .into_bytes()
}

/// The error answer to a bad request; the connection is closed after it.
pub fn response_reject(err: &HandshakeError) -> Vec<u8> {
    let (status, reason) = match err.status() {
        426 => (426, "Upgrade Required"),
        _ => (400, "Bad Request"),
    };
    let body = err.to_string();
    format!(
        "HTTP/1.1 {status} {reason}\r\nSec-WebSocket-Version: 13\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The client's upgrade request.
pub fn request(host: &str, path: &str, key: &str) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .into_bytes()
}

/// Checks the server's answer at the start of `buf` against the key we sent.
/// `Ok(None)`: incomplete. `Ok(Some(n))`: accepted, `n` bytes were the head (frames may follow).
pub fn parse_response(buf: &[u8], key: &str) -> Result<Option<usize>, HandshakeError> {
    let Some(end) = head_end(buf) else {
        return if buf.len() > MAX_HEAD {
            Err(HandshakeError::TooLarge)
        } else {
            Ok(None)
        };
    };
    let head = Head::parse(&buf[..end])?;
    let mut parts = head.start.splitn(3, ' ');
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
        return Err(HandshakeError::Malformed);
    };
    if version != "HTTP/1.1" {
        return Err(HandshakeError::BadVersion);
    }
    let code: u16 = code.parse().map_err(|_| HandshakeError::Malformed)?;
    if code != 101 {
        return Err(HandshakeError::Rejected(code));
    }
    if !head.has_token("upgrade", "websocket") {
        return Err(HandshakeError::NoUpgrade);
    }
    if !head.has_token("connection", "upgrade") {
        return Err(HandshakeError::NoConnectionUpgrade);
    }
    if head.get("sec-websocket-accept") != Some(accept_key(key).as_str()) {
        return Err(HandshakeError::BadAccept);
    }
    Ok(Some(end))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    const RFC_KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

    #[test]
    fn rfc_accept_vector() {
        // RFC 6455 §1.3.
        assert_eq!(accept_key(RFC_KEY), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn rfc_request_parses_and_round_trips() {
        // RFC 6455 §1.2, with the Origin and protocol lines it shows.
        let req = "GET /chat HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                   Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://example.com\r\n\
                   Sec-WebSocket-Protocol: chat, superchat\r\nSec-WebSocket-Version: 13\r\n\r\nrest";
        let (r, n) = parse_request(req.as_bytes()).unwrap().unwrap();
        assert_eq!(
            (r.path.as_str(), r.key.as_str(), &req[n..]),
            ("/chat", RFC_KEY, "rest")
        );
        let resp = response_accept(&r.key);
        assert_eq!(parse_response(&resp, RFC_KEY), Ok(Some(resp.len())));
        assert!(String::from_utf8_lossy(&resp).contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
        let ours = request("h", "/", RFC_KEY);
        assert!(parse_request(&ours).unwrap().is_some());
    }

    #[test]
    fn incomplete_then_complete() {
        let req = request("h", "/", RFC_KEY);
        for cut in 0..req.len() {
            assert_eq!(parse_request(&req[..cut]), Ok(None));
        }
    }

    #[test]
    fn bad_requests() {
        let ok = String::from_utf8(request("h", "/", RFC_KEY)).unwrap();
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
            parse_response(ok.as_bytes(), "AAAAAAAAAAAAAAAAAAAAAA=="),
            Err(HandshakeError::BadAccept)
        );
        let rej = response_reject(&HandshakeError::BadKey);
        assert_eq!(
            parse_response(&rej, RFC_KEY),
            Err(HandshakeError::Rejected(400))
        );
    }
}
