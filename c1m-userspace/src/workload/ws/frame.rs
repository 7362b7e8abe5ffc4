//! Frame headers (RFC 6455 §5.2): decode, encode, masking, close payloads.

use thiserror::Error;

/// Which end of the connection we are: it decides which direction must be masked
/// (§5.1: client-to-server frames are masked, server-to-client frames are not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// We accept connections: frames we send are unmasked, frames we receive must be masked.
    Server,
    /// We open connections: frames we send are masked, frames we receive must not be.
    Client,
}

/// Frame opcodes (§5.2). Reserved values are a protocol error, not a variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opcode {
    /// A later fragment of a fragmented message.
    Continuation = 0x0,
    /// A text message (UTF-8) or its first fragment.
    Text = 0x1,
    /// A binary message or its first fragment.
    Binary = 0x2,
    /// The closing handshake; payload: optional status code and reason.
    Close = 0x8,
    /// A ping, to be answered with a pong of the same payload.
    Ping = 0x9,
    /// A pong: the answer to a ping, or unsolicited as a heartbeat.
    Pong = 0xA,
}

impl Opcode {
    /// The opcode of the low four bits of a frame's first byte; `None` for reserved values.
    pub fn from_u8(v: u8) -> Option<Opcode> {
        Some(match v {
            0x0 => Opcode::Continuation,
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xA => Opcode::Pong,
            _ => return None,
        })
    }

    pub(crate) fn is_control(self) -> bool {
        (self as u8) & 0x8 != 0
    }
}

/// Close status codes this codec sends (§7.4.1).
pub struct CloseCode;

impl CloseCode {
    pub(crate) const PROTOCOL: u16 = 1002;
    pub(crate) const INVALID_DATA: u16 = 1007;
    pub(crate) const TOO_BIG: u16 = 1009;

    /// Codes a peer may put on the wire (§7.4.1, §7.4.2; IANA registry for 1012–1014).
    /// 1004–1006 and 1015 are reserved for local use and must never be sent.
    pub(crate) fn valid_on_wire(code: u16) -> bool {
        matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
    }
}

/// Why a byte stream is not valid WebSocket framing. Each maps to the close code the RFC
/// prescribes, so the engine answers and counts without a second table.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum FrameError {
    /// RSV1–3 set, but no extension was negotiated.
    #[error("reserved bits set without a negotiated extension")]
    ReservedBits,
    /// An opcode the RFC reserves (0x3–0x7, 0xB–0xF).
    #[error("reserved opcode {0:#x}")]
    ReservedOpcode(u8),
    /// A client sent a frame without a mask.
    #[error("unmasked frame from a client")]
    UnmaskedClientFrame,
    /// A server sent a masked frame.
    #[error("masked frame from a server")]
    MaskedServerFrame,
    /// A control frame with a payload over 125 bytes.
    #[error("control frame longer than 125 bytes")]
    ControlTooLong,
    /// A control frame without FIN (control frames cannot be fragmented).
    #[error("fragmented control frame")]
    FragmentedControl,
    /// A 64-bit payload length with its top bit set.
    #[error("64-bit length with the most significant bit set")]
    LengthMsb,
    /// A frame or message longer than the limit; the payload is its length in bytes.
    #[error("message of {0} bytes exceeds the limit")]
    TooBig(u64),
    /// A continuation frame with no fragmented message to continue.
    #[error("continuation frame without a message in progress")]
    UnexpectedContinuation,
    /// A new text or binary frame while a fragmented message is still open.
    #[error("new data frame while a fragmented message is in progress")]
    ExpectedContinuation,
    /// A text message that is not valid UTF-8.
    #[error("text is not valid UTF-8")]
    InvalidUtf8,
    /// A close frame whose payload is a single byte (no room for a status code).
    #[error("close frame with a 1-byte payload")]
    CloseTooShort,
    /// A close status code that must not be sent (reserved, or out of range).
    #[error("close code {0} is not allowed on the wire")]
    InvalidCloseCode(u16),
}

impl FrameError {
    /// The close code §7.4.1 assigns to this failure.
    pub fn close_code(&self) -> u16 {
        match self {
            FrameError::InvalidUtf8 => CloseCode::INVALID_DATA,
            FrameError::TooBig(_) => CloseCode::TOO_BIG,
            _ => CloseCode::PROTOCOL,
        }
    }
}

/// A decoded frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Last frame of its message (FIN bit).
    pub fin: bool,
    /// The frame's opcode.
    pub opcode: Opcode,
    /// The masking key, when the frame is masked.
    pub mask: Option<[u8; 4]>,
    /// Payload length, in bytes.
    pub len: u64,
}

/// Decodes a frame header from the start of `buf`, as received by `role`.
/// `Ok(None)` means more bytes are needed (a header cut by a read is normal, not an error);
/// `max_len` bounds the payload so a hostile length cannot make us buffer gigabytes.
pub fn decode_header(
    buf: &[u8],
    role: Role,
    max_len: u64,
) -> Result<Option<(Header, usize)>, FrameError> {
    let [b0, b1, ..] = *buf else { return Ok(None) };
    if b0 & 0x70 != 0 {
        return Err(FrameError::ReservedBits);
    }
    let opcode = Opcode::from_u8(b0 & 0x0F).ok_or(FrameError::ReservedOpcode(b0 & 0x0F))?;
    let fin = b0 & 0x80 != 0;
    let masked = b1 & 0x80 != 0;
    match (role, masked) {
        (Role::Server, false) => return Err(FrameError::UnmaskedClientFrame),
        (Role::Client, true) => return Err(FrameError::MaskedServerFrame),
        _ => {}
    }
    let short = b1 & 0x7F;
    if opcode.is_control() {
        if short > 125 {
            return Err(FrameError::ControlTooLong);
        }
        if !fin {
            return Err(FrameError::FragmentedControl);
        }
    }
    let (len, mut at) = match short {
        126 => match buf.get(2..4) {
            Some(b) => (u64::from(u16::from_be_bytes([b[0], b[1]])), 4),
            None => return Ok(None),
        },
        127 => match buf.get(2..10) {
            Some(b) => {
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                let len = u64::from_be_bytes(a);
                if len >> 63 != 0 {
                    return Err(FrameError::LengthMsb);
                }
                (len, 10)
            }
            None => return Ok(None),
        },
        n => (u64::from(n), 2),
    };
    if len > max_len {
        return Err(FrameError::TooBig(len));
    }
    let mask = if masked {
        let Some(m) = buf.get(at..at + 4) else {
            return Ok(None);
        };
        at += 4;
        Some([m[0], m[1], m[2], m[3]])
    } else {
        None
    };
    Ok(Some((
        Header {
            fin,
            opcode,
            mask,
            len,
        },
        at,
    )))
}

/// Appends a frame header to `out`, using the shortest length form (§5.2 requires it).
pub fn encode_header(
    out: &mut Vec<u8>,
    fin: bool,
    opcode: Opcode,
    mask: Option<[u8; 4]>,
    len: u64,
) {
    out.push(if fin { 0x80 } else { 0 } | opcode as u8);
    let m = if mask.is_some() { 0x80 } else { 0 };
    if len < 126 {
        out.push(m | len as u8);
    } else if let Ok(l16) = u16::try_from(len) {
        out.push(m | 126);
        out.extend_from_slice(&l16.to_be_bytes());
    } else {
        out.push(m | 127);
        out.extend_from_slice(&len.to_be_bytes());
    }
    if let Some(k) = mask {
        out.extend_from_slice(&k);
    }
}

/// Appends a whole frame. With a mask (client role) the payload is masked as it is copied.
pub fn encode_frame(out: &mut Vec<u8>, opcode: Opcode, payload: &[u8], mask: Option<[u8; 4]>) {
    encode_header(out, true, opcode, mask, payload.len() as u64);
    let start = out.len();
    out.extend_from_slice(payload);
    if let Some(k) = mask {
        apply_mask(&mut out[start..], k, 0);
    }
}

/// XORs `buf` with the masking key, `offset` bytes into the payload (so a payload split over
/// several reads unmasks piecewise).
pub fn apply_mask(buf: &mut [u8], key: [u8; 4], offset: usize) {
    let mut rot = [0u8; 4];
    for (i, r) in rot.iter_mut().enumerate() {
        *r = key[(offset + i) % 4];
    }
    let word = u32::from_ne_bytes(rot);
    let mut chunks = buf.chunks_exact_mut(4);
    for c in &mut chunks {
        let v = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]) ^ word;
        c.copy_from_slice(&v.to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= rot[i];
    }
}

/// The payload of a close frame: code and optional reason.
pub(crate) fn close_payload(code: u16, reason: &str) -> Vec<u8> {
    let mut p = Vec::with_capacity(2 + reason.len());
    p.extend_from_slice(&code.to_be_bytes());
    p.extend_from_slice(reason.as_bytes());
    p
}

/// Validates a received close payload (§5.5.1, §7.4): empty, or a valid code followed by
/// UTF-8. Returns the code if there is one.
pub(crate) fn parse_close_payload(p: &[u8]) -> Result<Option<u16>, FrameError> {
    match p {
        [] => Ok(None),
        [_] => Err(FrameError::CloseTooShort),
        [a, b, reason @ ..] => {
            let code = u16::from_be_bytes([*a, *b]);
            if !CloseCode::valid_on_wire(code) {
                return Err(FrameError::InvalidCloseCode(code));
            }
            std::str::from_utf8(reason).map_err(|_| FrameError::InvalidUtf8)?;
            Ok(Some(code))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    const MAX: u64 = 1 << 20;

    #[test]
    fn rfc_examples_decode() {
        // §5.7: single-frame unmasked text "Hello" (as a client receives it).
        let f = [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
        let (h, n) = decode_header(&f, Role::Client, MAX).unwrap().unwrap();
        assert_eq!(
            (h.fin, h.opcode, h.mask, h.len, n),
            (true, Opcode::Text, None, 5, 2)
        );
        // §5.7: single-frame masked text "Hello" (as a server receives it).
        let mut f = [
            0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
        ];
        let (h, n) = decode_header(&f, Role::Server, MAX).unwrap().unwrap();
        assert_eq!((h.len, n), (5, 6));
        let key = h.mask.unwrap();
        apply_mask(&mut f[6..], key, 0);
        assert_eq!(&f[6..], b"Hello");
        // §5.7: 256-byte and 64 KiB binary headers.
        let (h, n) = decode_header(&[0x82, 0x7E, 0x01, 0x00], Role::Client, MAX)
            .unwrap()
            .unwrap();
        assert_eq!((h.len, n), (256, 4));
        let f = [0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0];
        let (h, n) = decode_header(&f, Role::Client, MAX).unwrap().unwrap();
        assert_eq!((h.len, n), (65536, 10));
    }

    #[test]
    fn truncated_headers_need_more() {
        let f = [0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0];
        for cut in 0..f.len() {
            assert_eq!(
                decode_header(&f[..cut], Role::Client, MAX),
                Ok(None),
                "cut at {cut}"
            );
        }
        let f = [0x81, 0x85, 0x37, 0xfa, 0x21];
        assert_eq!(decode_header(&f, Role::Server, MAX), Ok(None));
    }

    #[test]
    fn violations_map_to_rfc_codes() {
        let cases: &[(&[u8], Role, FrameError, u16)] = &[
            (
                &[0xC1, 0x80, 0, 0, 0, 0],
                Role::Server,
                FrameError::ReservedBits,
                1002,
            ),
            (
                &[0x83, 0x80, 0, 0, 0, 0],
                Role::Server,
                FrameError::ReservedOpcode(3),
                1002,
            ),
            (
                &[0x81, 0x05],
                Role::Server,
                FrameError::UnmaskedClientFrame,
                1002,
            ),
            (
                &[0x81, 0x85, 0, 0, 0, 0],
                Role::Client,
                FrameError::MaskedServerFrame,
                1002,
            ),
            (
                &[0x89, 0xFE, 0, 126],
                Role::Server,
                FrameError::ControlTooLong,
                1002,
            ),
            (
                &[0x09, 0x80, 0, 0, 0, 0],
                Role::Server,
                FrameError::FragmentedControl,
                1002,
            ),
            (
                &[0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0],
                Role::Server,
                FrameError::LengthMsb,
                1002,
            ),
            (
                &[0x82, 0xFF, 0, 0, 0, 0, 0, 0x20, 0, 0],
                Role::Server,
                FrameError::TooBig(0x20_0000),
                1009,
            ),
        ];
        for (bytes, role, err, code) in cases {
            assert_eq!(
                decode_header(bytes, *role, MAX).as_ref(),
                Err(err),
                "{bytes:x?}"
            );
            assert_eq!(err.close_code(), *code);
        }
    }

    #[test]
    fn encode_uses_shortest_length() {
        for (len, hlen) in [(0u64, 2usize), (125, 2), (126, 4), (65535, 4), (65536, 10)] {
            let mut out = Vec::new();
            encode_header(&mut out, true, Opcode::Binary, None, len);
            assert_eq!(out.len(), hlen);
            let (h, n) = decode_header(&out, Role::Client, u64::MAX >> 1)
                .unwrap()
                .unwrap();
            assert_eq!((h.len, n), (len, hlen));
        }
    }

    #[test]
    fn mask_piecewise_equals_whole() {
        let key = [1, 2, 3, 4];
        let data: Vec<u8> = (0..37).collect();
        let mut whole = data.clone();
        apply_mask(&mut whole, key, 0);
        let mut parts = data.clone();
        let (a, b) = parts.split_at_mut(7);
        apply_mask(a, key, 0);
        apply_mask(b, key, 7);
        assert_eq!(whole, parts);
    }

    #[test]
    fn close_payloads() {
        assert_eq!(parse_close_payload(&[]), Ok(None));
        assert_eq!(parse_close_payload(&[3]), Err(FrameError::CloseTooShort));
        assert_eq!(
            parse_close_payload(&close_payload(1000, "bye")),
            Ok(Some(1000))
        );
        assert_eq!(
            parse_close_payload(&[0x03, 0xED]),
            Err(FrameError::InvalidCloseCode(1005))
        );
        assert_eq!(
            parse_close_payload(&[0x03, 0xE8, 0xFF]),
            Err(FrameError::InvalidUtf8)
        );
    }
}
