//! The frame layer as a stream decoder: bytes in, protocol events out (RFC 6455 §5–§7).
//!
//! The decoder keeps no buffer of its own. The caller hands it whatever bytes it has; a
//! frame cut by a read is reported as "need more" and the caller keeps the tail. The only
//! per-connection state that outlives a read is a [`Fragment`], and only while a
//! fragmented message is in flight, which is why it is boxed behind an `Option`.

use super::frame::{FrameError, Opcode, Role, apply_mask, decode_header, parse_close_payload};

/// Decoding rules for one side of a connection.
#[derive(Clone, Copy, Debug)]
pub struct Decoder {
    /// Which end we are: it decides which frames must be masked.
    pub role: Role,
    /// Largest message (and frame) accepted; larger ones fail with 1009.
    pub max_message: u64,
}

/// A fragmented data message being reassembled (§5.4).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Fragment {
    /// A text message (checked as UTF-8 when complete); else binary.
    pub text: bool,
    /// The payload bytes received so far, unmasked.
    pub data: Vec<u8>,
}

/// A message payload: borrowed from the read buffer when it came in one frame, owned when
/// it was reassembled from fragments.
#[derive(Debug, PartialEq, Eq)]
pub enum Payload<'a> {
    /// A single-frame message, in the read buffer (unmasked in place).
    Borrowed(&'a [u8]),
    /// A message reassembled from fragments.
    Owned(Vec<u8>),
}

impl Payload<'_> {
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Payload::Borrowed(b) => b,
            Payload::Owned(v) => v,
        }
    }
}

/// What a complete frame means to the application.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// A complete data message (text already checked as UTF-8).
    Message {
        /// A text message; else binary.
        text: bool,
        /// The message's bytes.
        payload: Payload<'a>,
    },
    /// A ping with its payload (to be echoed in a pong).
    Ping(&'a [u8]),
    /// A pong with its payload.
    Pong(&'a [u8]),
    /// The peer's close frame, with its status code if it sent one.
    Close(Option<u16>),
}

impl Decoder {
    /// A decoder for `role` accepting messages up to `max_message` bytes.
    pub fn new(role: Role, max_message: u64) -> Decoder {
        Decoder { role, max_message }
    }

    /// Decodes the frame at the start of `buf` (unmasking it in place).
    ///
    /// `Ok(None)`: the frame is incomplete; keep `buf` and call again with more bytes.
    /// `Ok(Some((n, event)))`: `n` bytes were consumed; `event` is `None` for a non-final
    /// fragment (absorbed into `frag`).
    pub fn decode<'a>(
        &self,
        buf: &'a mut [u8],
        frag: &mut Option<Box<Fragment>>,
    ) -> Result<Option<(usize, Option<Event<'a>>)>, FrameError> {
        let Some((h, hlen)) = decode_header(buf, self.role, self.max_message)? else {
            return Ok(None);
        };
        // Bounded by max_message (checked in decode_header), so it fits in usize.
        let len = usize::try_from(h.len).map_err(|_| FrameError::TooBig(h.len))?;
        let total = hlen + len;
        let Some(frame) = buf.get_mut(..total) else {
            return Ok(None);
        };
        let payload: &'a mut [u8] = &mut frame[hlen..];
        if let Some(key) = h.mask {
            apply_mask(payload, key, 0);
        }
        let payload: &'a [u8] = payload;
        let event = match h.opcode {
            Opcode::Ping => Some(Event::Ping(payload)),
            Opcode::Pong => Some(Event::Pong(payload)),
            Opcode::Close => Some(Event::Close(parse_close_payload(payload)?)),
            Opcode::Text | Opcode::Binary => {
                if frag.is_some() {
                    return Err(FrameError::ExpectedContinuation);
                }
                let text = h.opcode == Opcode::Text;
                if h.fin {
                    if text {
                        std::str::from_utf8(payload).map_err(|_| FrameError::InvalidUtf8)?;
                    }
                    Some(Event::Message {
                        text,
                        payload: Payload::Borrowed(payload),
                    })
                } else {
                    *frag = Some(Box::new(Fragment {
                        text,
                        data: payload.to_vec(),
                    }));
                    None
                }
            }
            Opcode::Continuation => {
                let Some(f) = frag.as_mut() else {
                    return Err(FrameError::UnexpectedContinuation);
                };
                let size = (f.data.len() + len) as u64;
                if size > self.max_message {
                    return Err(FrameError::TooBig(size));
                }
                f.data.extend_from_slice(payload);
                if h.fin {
                    let Fragment { text, data } =
                        *frag.take().ok_or(FrameError::UnexpectedContinuation)?;
                    if text {
                        std::str::from_utf8(&data).map_err(|_| FrameError::InvalidUtf8)?;
                    }
                    Some(Event::Message {
                        text,
                        payload: Payload::Owned(data),
                    })
                } else {
                    None
                }
            }
        };
        Ok(Some((total, event)))
    }
}

/// Owned form of an [`Event`], for tests and the fuzzer's comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnedEvent {
    /// [`Event::Message`].
    Message {
        /// A text message; else binary.
        text: bool,
        /// The message's bytes.
        payload: Vec<u8>,
    },
    /// [`Event::Ping`].
    Ping(Vec<u8>),
    /// [`Event::Pong`].
    Pong(Vec<u8>),
    /// [`Event::Close`].
    Close(Option<u16>),
}

impl From<Event<'_>> for OwnedEvent {
    fn from(e: Event<'_>) -> OwnedEvent {
        match e {
            Event::Message { text, payload } => OwnedEvent::Message {
                text,
                payload: payload.as_slice().to_vec(),
            },
            Event::Ping(p) => OwnedEvent::Ping(p.to_vec()),
            Event::Pong(p) => OwnedEvent::Pong(p.to_vec()),
            Event::Close(c) => OwnedEvent::Close(c),
        }
    }
}

/// Feeds `stream` to a decoder in the given chunk sizes (cycled), the way reads would cut
/// it, keeping the unconsumed tail between chunks as an engine does. Returns the events
/// and the first error. Used by tests, the fuzzer and the corpus replay.
pub fn decode_stream(
    dec: &Decoder,
    stream: &[u8],
    chunks: &[usize],
) -> (Vec<OwnedEvent>, Option<FrameError>) {
    let mut events = Vec::new();
    let mut frag = None;
    let mut pending: Vec<u8> = Vec::new();
    let mut at = 0;
    let mut ci = 0;
    while at < stream.len() {
        let step = chunks
            .get(ci % chunks.len().max(1))
            .copied()
            .unwrap_or(stream.len())
            .max(1);
        ci += 1;
        let end = (at + step).min(stream.len());
        pending.extend_from_slice(&stream[at..end]);
        at = end;
        let mut off = 0;
        loop {
            match dec.decode(&mut pending[off..], &mut frag) {
                Ok(None) => break,
                Ok(Some((n, ev))) => {
                    if let Some(ev) = ev {
                        let closing = matches!(ev, Event::Close(_));
                        events.push(OwnedEvent::from(ev));
                        if closing {
                            return (events, None);
                        }
                    }
                    off += n;
                }
                Err(e) => return (events, Some(e)),
            }
        }
        pending.drain(..off);
    }
    (events, None)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::{
        super::frame::{close_payload, encode_frame, encode_header},
        *,
    };

    fn server() -> Decoder {
        Decoder::new(Role::Server, 1 << 16)
    }

    const K: Option<[u8; 4]> = Some([9, 8, 7, 6]);

    #[test]
    fn fragments_reassemble_with_interleaved_ping() {
        let mut s = Vec::new();
        encode_header(&mut s, false, Opcode::Text, K, 3);
        let at = s.len();
        s.extend_from_slice(b"Hel");
        apply_mask(&mut s[at..], [9, 8, 7, 6], 0);
        encode_frame(&mut s, Opcode::Ping, b"p", K);
        encode_header(&mut s, true, Opcode::Continuation, K, 2);
        let at = s.len();
        s.extend_from_slice(b"lo");
        apply_mask(&mut s[at..], [9, 8, 7, 6], 0);
        for chunk in [1, 2, 3, 5, 100] {
            let (ev, err) = decode_stream(&server(), &s, &[chunk]);
            assert_eq!(err, None);
            assert_eq!(
                ev,
                vec![
                    OwnedEvent::Ping(b"p".to_vec()),
                    OwnedEvent::Message {
                        text: true,
                        payload: b"Hello".to_vec()
                    }
                ]
            );
        }
    }

    #[test]
    fn protocol_violations() {
        let d = server();
        let mut s = Vec::new();
        encode_frame(&mut s, Opcode::Continuation, b"x", K);
        assert_eq!(
            decode_stream(&d, &s, &[64]).1,
            Some(FrameError::UnexpectedContinuation)
        );
        let mut s = Vec::new();
        encode_header(&mut s, false, Opcode::Binary, K, 0);
        encode_frame(&mut s, Opcode::Binary, b"x", K);
        assert_eq!(
            decode_stream(&d, &s, &[64]).1,
            Some(FrameError::ExpectedContinuation)
        );
        let mut s = Vec::new();
        encode_frame(&mut s, Opcode::Text, &[0xC3, 0x28], K);
        let err = decode_stream(&d, &s, &[64]).1;
        assert_eq!(err, Some(FrameError::InvalidUtf8));
        assert_eq!(err.map(|e| e.close_code()), Some(1007));
        let mut s = Vec::new();
        encode_header(&mut s, true, Opcode::Binary, K, 1 << 17);
        assert_eq!(
            decode_stream(&d, &s, &[64]).1.map(|e| e.close_code()),
            Some(1009)
        );
    }

    #[test]
    fn close_stops_the_stream() {
        let mut s = Vec::new();
        encode_frame(&mut s, Opcode::Close, &close_payload(1000, "done"), K);
        encode_frame(&mut s, Opcode::Text, b"after", K);
        let (ev, err) = decode_stream(&server(), &s, &[4]);
        assert_eq!((ev, err), (vec![OwnedEvent::Close(Some(1000))], None));
    }
}
