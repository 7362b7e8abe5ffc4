//! What a client connection's input means, shared by both engines: [`Proto`] holds a
//! shard's counters, histograms and report state; the engines only move bytes.

use std::{
    collections::BTreeMap,
    mem,
    sync::{Arc, atomic::AtomicU64},
};

use anyhow::Result;

mod echo;
mod message_rate;
mod push;
mod server_messages;
mod warnings;

use echo::fill_payload;

use crate::workload::{
    churn,
    config::{ClientShardConfig, Mode},
    engine::{
        Sink, pace,
        shard_loop::{Extra, Reporter},
    },
    heartbeat::{self, Visit},
    messages::{self, ConnMessages},
    push_format::PushFormat,
    stats::{self, counters::Counters, histograms::Hists, setup_rate::TIMELINE_BIN_MS},
    sys::{self, splitmix64},
    ws::{
        Decoder, Event, Fragment, Opcode, Role,
        frame::encode_frame,
        handshake::{self, HandshakeError},
    },
};

/// Where a client connection is in its life.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum State {
    Connecting,
    Handshake,
    Open,
    /// Torn down: our close frame is sent and we read until the server closes the TCP
    /// connection (RFC 6455 §7.1.1: the server closes first). Closing at once instead made
    /// the server's close reply meet a closed socket, which answers with a RST: one per
    /// connection (Tcp EstabResets = connections).
    Closing,
}

/// A teardown waits this long without any connection finishing its close before it closes
/// the rest at once (a server that never answers the close frame).
pub(crate) const CLOSE_STALL_NS: u64 = 5_000_000_000;

/// A teardown's watch over the connections still waiting for their server to close, for
/// both engines: stalled once their number has not fallen for [`CLOSE_STALL_NS`].
#[derive(Default)]
pub(crate) struct CloseWatch {
    left: u64,
    stall_at: u64,
}

impl CloseWatch {
    pub(crate) fn new(left: u64, now_ns: u64) -> CloseWatch {
        CloseWatch {
            left,
            stall_at: now_ns.saturating_add(CLOSE_STALL_NS),
        }
    }

    /// True if `left` connections are still waiting and none finished for
    /// [`CLOSE_STALL_NS`] (the wait then starts over).
    pub(crate) fn stalled(&mut self, left: u64, now_ns: u64) -> bool {
        if left < self.left {
            *self = CloseWatch::new(left, now_ns);
            false
        } else if left > 0 && now_ns >= self.stall_at {
            self.stall_at = now_ns.saturating_add(CLOSE_STALL_NS);
            true
        } else {
            false
        }
    }
}

/// Why WebSocket input ends a connection.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum WsEnd {
    /// The server refused the upgrade (a failure: the connection never opened).
    Rejected,
    /// The server's answer was not a valid upgrade (a failure).
    Invalid,
    /// The server's close frame (answered).
    PeerClosed,
    /// A binary echo reply that was not the payload sent.
    EchoMismatch,
    /// A protocol error (answered with its close code).
    Protocol,
}

impl WsEnd {
    /// Counts the end: a failure if the connection never opened, else a close cause.
    pub(crate) fn count(self, c: &mut Counters) {
        match self {
            WsEnd::Rejected => c.failures.handshake_rejected += 1,
            WsEnd::Invalid => c.failures.handshake_invalid += 1,
            WsEnd::PeerClosed => c.closed.peer_closed += 1,
            WsEnd::EchoMismatch => c.closed.echo_mismatch += 1,
            WsEnd::Protocol => c.closed.protocol += 1,
        }
    }

    /// A handshake failure: the connection never opened.
    pub(crate) fn failed(self) -> bool {
        matches!(self, WsEnd::Rejected | WsEnd::Invalid)
    }
}

/// What one batch of WebSocket input did. Frames to send back are in [`Proto::out`].
#[derive(Debug)]
pub(crate) struct WsStep {
    /// Bytes consumed; the rest is an incomplete head or frame to keep for the next read.
    pub used: usize,
    pub end: Option<WsEnd>,
    /// The handshake completed in this batch.
    pub became_open: bool,
    /// An echo round trip completed: send the next request.
    pub rtt_done: bool,
}

/// What one piece of a raw TCP echo reply did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum EchoStep {
    /// Bytes that are not the payload sent (or none was expected): close.
    Mismatch,
    /// Correct so far; more of the reply to come.
    Partial,
    /// The reply is complete: send the next request.
    RoundTrip,
}

/// A client connection's protocol position: what [`Proto`] needs to read its input.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnProto {
    pub state: State,
    /// Global connection index: derives the endpoints, the WebSocket key and echo payloads,
    /// so none of them is stored.
    pub g: u64,
    /// Monotonic ns: the `connect()` call, then the WebSocket request, then the current
    /// echo's send time. (The instant the pace scheduled the connect is derived from `g`.)
    pub t_ns: u64,
    /// Echo round trips done.
    pub seq: u32,
    /// Bytes of the current echo reply received and checked (raw TCP echo).
    pub got: u32,
    /// `--heartbeat`: when the outstanding ping was sent (monotonic ns, also its
    /// payload), 0 when none is.
    pub ping_ns: u64,
    /// `--churn`: this is the reopen of a churned connection. Until it opens `t_ns`
    /// stays its `connect()` call (the churn setup histogram's start), and the ramp's
    /// histograms and setup timeline do not see it.
    pub reopen: bool,
    /// `--churn`: this connection was churned: its close frame is out and it waits in
    /// [`State::Closing`] for the server to close (counted in `churn.closing`).
    pub churned: bool,
    /// `--message-rate`: messages sent (the next one's sequence) and those still waiting
    /// for their echo; inline, so they fit in the padding after `state` (the struct stays
    /// 40 bytes).
    pub msg_sent: u32,
    pub msg_out: u16,
    /// `c1m server --message-rate`: the number of the server's next message and which of
    /// the 16 before it arrived (`workload::message_order`); in the padding as well.
    pub srv_next: u32,
    pub srv_seen: u16,
}

// Every connection of a client shard holds one: the order check's 6 bytes fit in what
// was padding.
const _: () = assert!(size_of::<ConnProto>() == 48);

impl ConnProto {
    pub(crate) fn new(g: u64, t_ns: u64) -> ConnProto {
        ConnProto {
            state: State::Connecting,
            g,
            t_ns,
            seq: 0,
            got: 0,
            ping_ns: 0,
            reopen: false,
            churned: false,
            msg_sent: 0,
            msg_out: 0,
            srv_next: 0,
            srv_seen: 0,
        }
    }

    /// The reopen of a churned connection `g`, its `connect()` called at `t_ns`.
    pub(crate) fn reopen(g: u64, t_ns: u64) -> ConnProto {
        ConnProto {
            reopen: true,
            ..ConnProto::new(g, t_ns)
        }
    }
}

/// A client shard's protocol and statistics state, shared by both engines.
pub(crate) struct Proto {
    pub cfg: ClientShardConfig,
    pub c: Counters,
    pub hists: Hists,
    dec: Decoder,
    /// Scratch: the expected or next echo payload.
    payload: Vec<u8>,
    /// Scratch: bytes to write (upgrade request, echo request, pong, close).
    pub out: Vec<u8>,
    /// Round trips per connection: None = until teardown; Some(0) = no echo.
    echo_limit: Option<u64>,
    mask_ctr: u64,
    pub timeline: BTreeMap<u32, u32>,
    pub rep: Reporter,
    warned: u32,
    pub open_in_process: Arc<AtomicU64>,
    /// The ramp's epoch (monotonic ns), from `Start`.
    pub t0_mono: u64,
    /// The push marked last (frames without an id belong to it) and the instant its
    /// trigger fired, on this client's clock (0: not known).
    mark: (u64, u64),
    /// Scratch: a message's payload.
    msg_scratch: Vec<u8>,
    /// `--message-rate`: the teardown began; no more messages are sent while the echoes
    /// of those out come back.
    pub draining: bool,
    /// `--message-rate` (tokio engine): the instant the shard's ramp was found done
    /// (monotonic ns, 0: not yet); messages scheduled before it are not sent.
    pub msg_from: u64,
}

impl Proto {
    /// The server's stream ended (EOF) on an open connection. In WebSocket mode a
    /// teardown sends a close frame first (that one ended the connection before its EOF
    /// was read), so an EOF alone is a crash; in the raw TCP modes EOF is the close.
    pub(crate) fn count_peer_eof(&mut self) {
        match self.cfg.mode {
            Mode::Ws => self.c.closed.peer_eof += 1,
            Mode::Hold | Mode::Echo => self.c.closed.peer_closed += 1,
        }
    }

    pub(crate) fn new(cfg: ClientShardConfig, open_in_process: Arc<AtomicU64>) -> Result<Proto> {
        let echo_limit = match (cfg.mode, cfg.echo_count) {
            // Raw messages and raw round trips cannot share one byte stream.
            (Mode::Echo, _) if cfg.messages.is_some() => Some(0),
            (Mode::Echo, 0) => None,
            (Mode::Echo | Mode::Ws, n) => Some(n),
            (Mode::Hold, _) => Some(0),
        };
        Ok(Proto {
            dec: Decoder::new(Role::Client, cfg.max_message),
            payload: vec![0; cfg.payload],
            out: Vec::new(),
            c: Counters::default(),
            hists: Hists::new()?,
            echo_limit,
            mask_ctr: cfg.seed ^ u64::from(cfg.shard).rotate_left(40),
            timeline: BTreeMap::new(),
            rep: Reporter::new(cfg.shard),
            warned: 0,
            open_in_process,
            t0_mono: sys::monotonic_ns(),
            mark: (0, 0),
            msg_scratch: Vec::new(),
            draining: false,
            msg_from: 0,
            cfg,
        })
    }

    /// A `Mark` command: frames without an id belong to push `id` from now on.
    pub(crate) fn mark(&mut self, id: u64, started_unix_ns: u64) {
        self.mark = (id, started_unix_ns);
        self.rep.mark = id;
    }

    /// Sends a report if anything changed (or `force`).
    pub(crate) fn report(
        &mut self,
        sink: &mut Sink,
        ramp_done: bool,
        force: bool,
        closed_all: bool,
    ) -> Result<()> {
        let x = Extra {
            ramp_done,
            hists: self
                .hists
                .take_recorded(sys::monotonic_ns(), force || ramp_done || closed_all),
            timeline: mem::take(&mut self.timeline).into_iter().collect(),
            push_done: None,
        };
        self.rep.send(sink, &self.c, x, force, closed_all)
    }

    /// The TCP connect of `conn` completed at `now`: its latencies.
    pub(crate) fn connected(&mut self, conn: &ConnProto, now: u64) {
        if conn.reopen {
            return;
        }
        self.hists.record(
            stats::histograms::CONNECT,
            now.saturating_sub(conn.t_ns) / 1000,
        );
        if let Some(due) = scheduled(&self.cfg, self.t0_mono, conn.g) {
            self.hists.record(
                stats::histograms::CONNECT_FROM_SCHEDULE,
                now.saturating_sub(due) / 1000,
            );
        }
    }

    /// The TLS handshake of `conn` finished at `done_ns`; it began at `connected_ns`, the
    /// instant the client saw its connect complete and wrote the ClientHello (the instant
    /// given to [`Proto::connected`]). Both engines call this, with the instant of the
    /// read that finished the handshake as `done_ns`, which is also the instant they then
    /// give [`Proto::handshake_request`]: so `tls_handshake` and `ws_handshake` add up.
    pub(crate) fn tls_handshaken(&mut self, conn: &ConnProto, connected_ns: u64, done_ns: u64) {
        if conn.reopen {
            return;
        }
        self.hists.record(
            stats::histograms::TLS_HANDSHAKE,
            done_ns.saturating_sub(connected_ns) / 1000,
        );
        if let Some(due) = scheduled(&self.cfg, self.t0_mono, conn.g) {
            self.hists.record(
                stats::histograms::TLS_OPEN_FROM_SCHEDULE,
                done_ns.saturating_sub(due) / 1000,
            );
        }
    }

    /// The WebSocket upgrade request of `conn` (whose connect, or TLS handshake, completed
    /// at `now`).
    pub(crate) fn handshake_request(&mut self, conn: &mut ConnProto, now: u64) -> &[u8] {
        conn.state = State::Handshake;
        if !conn.reopen {
            conn.t_ns = now;
        }
        let key = ws_key(self.cfg.seed, conn.g);
        self.out.clear();
        handshake::write_request(&mut self.out, &self.cfg.host, &self.cfg.path, &key);
        &self.out
    }

    /// Bookkeeping when a connection becomes open at the application level.
    pub(crate) fn opened(&mut self, conn: &mut ConnProto, now: u64) {
        conn.state = State::Open;
        self.c.in_flight -= 1;
        self.c.connected += 1;
        self.c.open += 1;
        if conn.reopen {
            // From the `connect()` call to open: the whole setup of a reopen.
            self.hists.record(
                stats::histograms::CHURN_SETUP,
                now.saturating_sub(conn.t_ns) / 1000,
            );
            churn::reopened(&mut self.c.churn);
            conn.reopen = false;
            return;
        }
        if self.cfg.mode == Mode::Ws {
            // `t_ns` is still the handshake request's: the echo that resets it comes after.
            self.hists.record(
                stats::histograms::WS_HANDSHAKE,
                now.saturating_sub(conn.t_ns) / 1000,
            );
            if let Some(due) = scheduled(&self.cfg, self.t0_mono, conn.g) {
                self.hists.record(
                    stats::histograms::WS_OPEN_FROM_SCHEDULE,
                    now.saturating_sub(due) / 1000,
                );
            }
        }
        let bin = now.saturating_sub(self.t0_mono) / (TIMELINE_BIN_MS * 1_000_000);
        *self
            .timeline
            .entry(bin.min(u64::from(u32::MAX)) as u32)
            .or_insert(0) += 1;
    }

    fn mask_key(&mut self) -> [u8; 4] {
        self.mask_ctr = self.mask_ctr.wrapping_add(1);
        (splitmix64(self.mask_ctr) as u32).to_ne_bytes()
    }

    /// RFC 6455 §7.1.2: the goodbye of a client teardown, a close frame (1000, normal), so
    /// a peer records a clean close rather than 1006, abnormal.
    pub(crate) fn close_frame(&mut self) -> &[u8] {
        let key = self.mask_key();
        self.out.clear();
        encode_frame(
            &mut self.out,
            Opcode::Close,
            &1000u16.to_be_bytes(),
            Some(key),
        );
        &self.out
    }

    /// WebSocket client input: the upgrade response while in handshake, then frames. Pongs,
    /// the close reply and protocol-error closes go to [`Proto::out`] (cleared first).
    /// `conn.state` becomes Open when the handshake completes, but [`Proto::opened`] is the
    /// caller's (after it sent `out`).
    pub(crate) fn ws_input(
        &mut self,
        conn: &mut ConnProto,
        data: &mut [u8],
        frag: &mut Option<Box<Fragment>>,
    ) -> WsStep {
        let mut off = 0;
        let mut end = None;
        if conn.state == State::Handshake {
            match handshake::parse_response(data, &ws_key(self.cfg.seed, conn.g)) {
                Ok(None) => {}
                Ok(Some(used)) => {
                    off = used;
                    conn.state = State::Open;
                }
                Err(HandshakeError::Rejected(_)) => end = Some(WsEnd::Rejected),
                Err(_) => end = Some(WsEnd::Invalid),
            }
        }
        let became_open = conn.state == State::Open && end.is_none() && off > 0;
        let mut rtt_done = false;
        self.out.clear();
        if conn.state == State::Open && end.is_none() {
            loop {
                match self.dec.decode(&mut data[off..], frag) {
                    Ok(None) => break,
                    Ok(Some((used, ev))) => {
                        off += used;
                        match ev {
                            None => {}
                            Some(Event::Pong(p)) => self.on_pong(conn, p),
                            Some(Event::Ping(p)) => {
                                self.c.ws_pings_in += 1;
                                let key = self.mask_key();
                                encode_frame(&mut self.out, Opcode::Pong, p, Some(key));
                            }
                            Some(Event::Close(code)) => {
                                let payload =
                                    code.map(|c| c.to_be_bytes().to_vec()).unwrap_or_default();
                                encode_frame(&mut self.out, Opcode::Close, &payload, Some([0; 4]));
                                end = Some(WsEnd::PeerClosed);
                                break;
                            }
                            Some(Event::Message { text, payload }) => {
                                let p = payload.as_slice();
                                if !text && let Some(stamp) = messages::decode_server(p) {
                                    // Timed, never echoed back: the server sent it unasked.
                                    self.on_server_message(conn, stamp);
                                    continue;
                                }
                                if !text
                                    && self.cfg.messages.is_some()
                                    && let Some((at, seq)) = messages::decode(p)
                                {
                                    self.on_message(conn, at, seq);
                                    continue;
                                }
                                let expecting =
                                    self.echo_limit.is_none_or(|lim| u64::from(conn.seq) < lim);
                                if !text && expecting && p.len() == self.payload.len() && {
                                    fill_payload(conn.g, conn.seq, &mut self.payload);
                                    p == &self.payload[..]
                                } {
                                    self.hists.record(
                                        stats::histograms::ECHO_RTT,
                                        sys::monotonic_ns().saturating_sub(conn.t_ns) / 1000,
                                    );
                                    self.c.echo_round_trips += 1;
                                    conn.seq += 1;
                                    rtt_done = true;
                                } else if let Some(stamp) = self.cfg.push_format.decode(text, p) {
                                    self.on_push(stamp);
                                } else if expecting && !text {
                                    end = Some(WsEnd::EchoMismatch);
                                    break;
                                } else if self.cfg.push_format != PushFormat::C1m {
                                    self.c.push_undecodable += 1;
                                } else {
                                    self.c.ws_messages_in += 1;
                                }
                            }
                        }
                    }
                    Err(e) => {
                        let code = e.close_code();
                        self.c.protocol_errors.count_close(code);
                        let payload = code.to_be_bytes();
                        encode_frame(&mut self.out, Opcode::Close, &payload, Some([0; 4]));
                        end = Some(WsEnd::Protocol);
                        break;
                    }
                }
            }
        }
        WsStep {
            used: off,
            end,
            became_open,
            rtt_done,
        }
    }

    /// A pong: matched to the outstanding ping by its stamp and timed, else counted as
    /// unsolicited and ignored (RFC 6455 §5.5.3).
    fn on_pong(&mut self, conn: &mut ConnProto, payload: &[u8]) {
        let Some(cfg) = self.cfg.heartbeat else {
            self.c.heartbeat.unsolicited_pongs += 1;
            return;
        };
        let now = sys::monotonic_ns();
        if let Some(us) =
            heartbeat::pong(&mut self.c.heartbeat, &cfg, &mut conn.ping_ns, payload, now)
        {
            self.hists.record(stats::histograms::PONG, us);
        }
    }

    /// `--heartbeat`: the slot of an open `conn` came up at `now`. [`Visit::Ping`]: a
    /// masked ping carrying its stamp is in [`Proto::out`]; [`Visit::Missed`]: a close
    /// frame 1011 is (the caller closes the connection, counted here as
    /// `closed.heartbeat_missed`). None: nothing to do (not open, or no heartbeat).
    pub(crate) fn heartbeat_visit(&mut self, conn: &mut ConnProto, now: u64) -> Option<Visit> {
        let cfg = self.cfg.heartbeat?;
        if conn.state != State::Open || self.cfg.mode != Mode::Ws {
            return None;
        }
        let v = heartbeat::visit(&mut self.c.heartbeat, &cfg, &mut conn.ping_ns, now);
        let key = self.mask_key();
        self.out.clear();
        if v == Visit::Missed {
            self.c.closed.heartbeat_missed += 1;
        }
        heartbeat::encode(&mut self.out, v, conn.ping_ns, Some(key));
        Some(v)
    }

    /// `conn` leaves [`State::Open`] (closed, or its close begun): an outstanding ping
    /// is counted unanswered.
    pub(crate) fn conn_ends(&mut self, conn: &mut ConnProto) {
        heartbeat::ended(&mut self.c.heartbeat, &mut conn.ping_ns);
        messages::ended(&mut self.c.messages, conn_messages(conn));
    }

    /// Every connection of the shard was attempted and none is still in flight.
    pub(crate) fn ramp_finished(&self) -> bool {
        self.c.attempted >= self.cfg.count && self.c.in_flight == 0
    }
}

/// `conn`'s place in its message stream.
fn conn_messages(conn: &mut ConnProto) -> ConnMessages<'_> {
    ConnMessages {
        sent: &mut conn.msg_sent,
        out: &mut conn.msg_out,
    }
}

/// Monotonic ns at which the pace scheduled the connect of global index `g` (None: unpaced).
pub(crate) fn scheduled(cfg: &ClientShardConfig, t0_mono: u64, g: u64) -> Option<u64> {
    let k = g.saturating_sub(cfg.first) / cfg.stride.max(1);
    pace::scheduled_ns(cfg.rate, k).map(|at| t0_mono.saturating_add(at))
}

/// The Sec-WebSocket-Key of connection `g`: derived, not stored.
pub(crate) fn ws_key(seed: u64, g: u64) -> handshake::Key {
    let a = splitmix64(seed ^ g);
    let b = splitmix64(a ^ 0x5eed);
    let mut n = [0u8; 16];
    n[..8].copy_from_slice(&a.to_le_bytes());
    n[8..].copy_from_slice(&b.to_le_bytes());
    handshake::Key::from_nonce(n)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn payloads_differ_per_connection_and_round() {
        let (mut a, mut b, mut c) = ([0u8; 19], [0u8; 19], [0u8; 19]);
        fill_payload(1, 0, &mut a);
        fill_payload(1, 1, &mut b);
        fill_payload(2, 0, &mut c);
        assert!(a != b && a != c);
        let mut again = [0u8; 19];
        fill_payload(1, 0, &mut again);
        assert_eq!(a, again);
    }

    #[test]
    fn a_teardown_stalls_only_without_progress() {
        const S: u64 = 1_000_000_000;
        let mut w = CloseWatch::new(3, 0);
        assert!(!w.stalled(3, S));
        // One finished at 1 s: the wait starts over from there.
        assert!(!w.stalled(2, S));
        assert!(!w.stalled(2, S + CLOSE_STALL_NS - 1));
        assert!(w.stalled(2, S + CLOSE_STALL_NS));
        // Said once per stall, not at every tick after it.
        assert!(!w.stalled(2, S + CLOSE_STALL_NS + 1));
        assert!(!w.stalled(0, 100 * S));
    }

    #[test]
    fn keys_are_valid_and_distinct() {
        let (k1, k2) = (ws_key(7, 1), ws_key(7, 2));
        assert_ne!(k1, k2);
        let mut req = Vec::new();
        handshake::write_request(&mut req, "h", "/", &k1);
        assert!(handshake::parse_request(&req).unwrap().is_some());
    }
}
