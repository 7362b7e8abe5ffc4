//! What a server connection's input means and what a server writes, shared by both
//! engines: the WebSocket server's answers ([`ws_input`]), push frames and close frames.

use crate::workload::{
    config::Mode,
    heartbeat::{self, HeartbeatConfig},
    stats::counters::{Closed, Counters},
    sys,
    ws::{self, Decoder, Event, Fragment, Opcode, frame::encode_frame, handshake},
};

/// Push frame payload: push id, broadcast start, write time (CLOCK_REALTIME ns), all u64 BE.
pub(crate) const PUSH_PAYLOAD: usize = 24;

/// A push frame: the unmasked binary header and its payload.
pub(crate) type PushFrame = [u8; 2 + PUSH_PAYLOAD];

/// Where a server connection is in the WebSocket protocol.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WsState {
    /// Not WebSocket (hold/echo).
    Raw,
    /// Waiting for the client's upgrade request.
    Handshake,
    /// Past the handshake: frames.
    Open,
    /// The server said goodbye on its own (close frame, close_notify, FIN) and waits for
    /// the peer's end of the stream before it closes the socket: RFC 6455 §7.1.1 has the
    /// server close the TCP connection after both close frames. Closed at once, the
    /// socket answered each peer's close reply with a reset (699,691 of 1M over the
    /// bridge, `TCP_TIMEWAIT_SOCKET`).
    Closing,
}

/// What a connection's input asks of the engine.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Keep the connection open.
    Continue,
    /// Close after writing the output: the peer closed (WebSocket close handshake).
    ClosePeer,
    /// Close after writing the output: protocol violation (already counted).
    CloseProtocol,
}

impl Action {
    /// Counts the close this asks for as its cause (none for [`Action::Continue`]).
    pub(crate) fn count_close(&self, closed: &mut Closed) {
        match self {
            Action::Continue => {}
            Action::ClosePeer => closed.peer_closed += 1,
            Action::CloseProtocol => closed.protocol += 1,
        }
    }
}

/// Server-side WebSocket input processing, without I/O: consumes `data` (handshake head and
/// then frames), appends the answers to `out`, counts into `c`. Returns how many bytes were
/// consumed (the rest is an incomplete frame to keep) and what to do next.
pub fn ws_input(
    dec: &Decoder,
    state: &mut WsState,
    data: &mut [u8],
    frag: &mut Option<Box<Fragment>>,
    out: &mut Vec<u8>,
    c: &mut Counters,
) -> (usize, Action) {
    ws_input_beat(dec, state, data, frag, out, c, None)
}

/// [`ws_input`] with `--heartbeat`: a pong is matched against the connection's
/// outstanding ping (its send instant, 0 for none) and counted.
pub(crate) fn ws_input_beat(
    dec: &Decoder,
    state: &mut WsState,
    data: &mut [u8],
    frag: &mut Option<Box<Fragment>>,
    out: &mut Vec<u8>,
    c: &mut Counters,
    mut beat: Option<(&HeartbeatConfig, &mut u64)>,
) -> (usize, Action) {
    let mut off = 0;
    if *state == WsState::Handshake {
        match handshake::parse_request(data) {
            Ok(None) => return (0, Action::Continue),
            Ok(Some((req, n))) => {
                handshake::write_accept(out, req.key);
                *state = WsState::Open;
                c.ws_open += 1;
                off = n;
            }
            Err(e) => {
                handshake::write_reject(out, &e);
                if e.status() == 426 {
                    c.protocol_errors.http_426 += 1;
                } else {
                    c.protocol_errors.http_400 += 1;
                }
                return (data.len(), Action::CloseProtocol);
            }
        }
    }
    loop {
        match dec.decode(&mut data[off..], frag) {
            Ok(None) => return (off, Action::Continue),
            Ok(Some((n, ev))) => {
                match ev {
                    None => {}
                    Some(Event::Pong(p)) => match beat.as_mut() {
                        // The server keeps no latency histogram: the count is the figure.
                        Some((cfg, ping_ns)) => {
                            let now = sys::monotonic_ns();
                            let _ = heartbeat::pong(&mut c.heartbeat, cfg, ping_ns, p, now);
                        }
                        None => c.heartbeat.unsolicited_pongs += 1,
                    },
                    Some(Event::Message { text, payload }) => {
                        c.ws_messages_in += 1;
                        let op = if text { Opcode::Text } else { Opcode::Binary };
                        encode_frame(out, op, payload.as_slice(), None);
                        c.ws_messages_out += 1;
                        c.echo_round_trips += 1;
                    }
                    Some(Event::Ping(p)) => {
                        c.ws_pings_in += 1;
                        encode_frame(out, Opcode::Pong, p, None);
                    }
                    Some(Event::Close(code)) => {
                        // §5.5.1: answer with a close frame, echoing the status code.
                        let payload = code.map(|c| c.to_be_bytes().to_vec()).unwrap_or_default();
                        encode_frame(out, Opcode::Close, &payload, None);
                        return (off + n, Action::ClosePeer);
                    }
                }
                off += n;
            }
            Err(e) => {
                let code = e.close_code();
                c.protocol_errors.count_close(code);
                encode_frame(
                    out,
                    Opcode::Close,
                    &ws::frame::close_payload(code, ""),
                    None,
                );
                return (data.len(), Action::CloseProtocol);
            }
        }
    }
}

/// The peer closed the stream. A WebSocket connection cut inside its handshake or a frame
/// (`partial`: input kept for a frame to complete, or a fragmented message) is truncated.
pub(crate) fn peer_eof(c: &mut Counters, mode: Mode, ws: WsState, partial: bool) {
    if mode == Mode::Ws && (ws == WsState::Handshake || partial) {
        c.protocol_errors.truncated += 1;
    }
    c.closed.peer_closed += 1;
}

/// A push frame: a binary WebSocket frame whose payload is the push id, the broadcast
/// start and (filled by [`stamp_push`] just before each write) the write time.
pub(crate) fn push_frame(id: u64, started_unix_ns: u64) -> PushFrame {
    let mut frame = [0u8; 2 + PUSH_PAYLOAD];
    frame[0] = 0x80 | Opcode::Binary as u8;
    frame[1] = PUSH_PAYLOAD as u8;
    frame[2..10].copy_from_slice(&id.to_be_bytes());
    frame[10..18].copy_from_slice(&started_unix_ns.to_be_bytes());
    frame
}

/// Stamps a push frame with the write time (CLOCK_REALTIME ns), which it returns.
pub(crate) fn stamp_push(frame: &mut PushFrame) -> u64 {
    let now = sys::realtime_ns();
    frame[18..26].copy_from_slice(&now.to_be_bytes());
    now
}

/// The close frame a server sends when it closes on its own: RFC 6455 §7.4.1, 1001 going
/// away, so clients record a clean close rather than 1006.
pub(crate) fn going_away() -> [u8; 4] {
    [0x80 | Opcode::Close as u8, 2, 0x03, 0xE9]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;
    use crate::workload::ws::{
        Role,
        frame::{close_payload, decode_header},
    };

    fn masked(op: Opcode, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        encode_frame(&mut v, op, payload, Some([1, 2, 3, 4]));
        v
    }

    #[test]
    fn handshake_then_echo_ping_close() {
        let dec = Decoder::new(Role::Server, 1 << 20);
        let mut st = WsState::Handshake;
        let mut frag = None;
        let mut out = Vec::new();
        let mut c = Counters::default();
        let key = handshake::Key::from_nonce(*b"the sample nonce");
        let mut input = Vec::new();
        handshake::write_request(&mut input, "h", "/", &key);
        input.extend(masked(Opcode::Text, b"hi"));
        input.extend(masked(Opcode::Ping, b"p"));
        input.extend(&masked(Opcode::Binary, b"xyz")[..4]); // cut frame: kept for later
        let (used, a) = ws_input(&dec, &mut st, &mut input, &mut frag, &mut out, &mut c);
        assert_eq!(
            (a, st, c.ws_open, c.echo_round_trips, c.ws_pings_in),
            (Action::Continue, WsState::Open, 1, 1, 1)
        );
        assert_eq!(input.len() - used, 4);
        let head = handshake::parse_response(&out, &key).unwrap().unwrap();
        let (h, hl) = decode_header(&out[head..], Role::Client, 100)
            .unwrap()
            .unwrap();
        assert_eq!(
            (h.opcode, &out[head + hl..head + hl + 2]),
            (Opcode::Text, &b"hi"[..])
        );
        out.clear();
        let mut close = masked(Opcode::Close, &close_payload(1000, ""));
        let (_, a) = ws_input(&dec, &mut st, &mut close, &mut frag, &mut out, &mut c);
        assert_eq!(a, Action::ClosePeer);
        assert_eq!(out, [0x88, 0x02, 0x03, 0xE8]);
    }

    #[test]
    fn violations_close_with_rfc_codes() {
        let dec = Decoder::new(Role::Server, 1024);
        let cases: Vec<(Vec<u8>, u16)> = vec![
            (vec![0x81, 0x02, b'h', b'i'], 1002), // unmasked client frame
            (vec![0x83, 0x80, 0, 0, 0, 0], 1002), // reserved opcode
            (vec![0xC2, 0x80, 0, 0, 0, 0], 1002), // reserved bit
            (masked(Opcode::Text, &[0xFF, 0xFE]), 1007), // bad UTF-8
            (vec![0x82, 0xFE, 0x10, 0x00, 0, 0, 0, 0], 1009), // 4 KiB > 1 KiB limit
        ];
        for (mut bytes, code) in cases {
            let (mut st, mut frag, mut out, mut c) =
                (WsState::Open, None, Vec::new(), Counters::default());
            let (_, a) = ws_input(&dec, &mut st, &mut bytes, &mut frag, &mut out, &mut c);
            assert_eq!(a, Action::CloseProtocol);
            assert_eq!(
                out,
                [vec![0x88, 0x02], code.to_be_bytes().to_vec()].concat(),
                "{bytes:x?}"
            );
            assert_eq!(c.protocol_errors.total(), 1);
        }
    }

    #[test]
    fn going_away_is_the_encoded_close_1001() {
        let mut v = Vec::new();
        encode_frame(&mut v, Opcode::Close, &1001u16.to_be_bytes(), None);
        assert_eq!(v, going_away());
        let f = push_frame(7, 9);
        assert_eq!(
            (f[0], f[1], &f[2..10], &f[10..18]),
            (0x82, 24, &7u64.to_be_bytes()[..], &9u64.to_be_bytes()[..])
        );
    }

    #[test]
    fn bad_handshake_gets_400() {
        let dec = Decoder::new(Role::Server, 1024);
        let (mut st, mut frag, mut out, mut c) =
            (WsState::Handshake, None, Vec::new(), Counters::default());
        let mut req = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n".to_vec();
        let (_, a) = ws_input(&dec, &mut st, &mut req, &mut frag, &mut out, &mut c);
        assert_eq!((a, c.protocol_errors.http_400), (Action::CloseProtocol, 1));
        assert!(out.starts_with(b"HTTP/1.1 400"));
    }
}
