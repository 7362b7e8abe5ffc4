//! The client shard: paced non-blocking connects from chosen source addresses, then hold,
//! echo (verified byte for byte) or WebSocket (handshake, pushes, echo).
//!
//! [`Proto`] is the part both engines share: a shard's counters, histograms and report
//! state, and what a connection's input means (echo checks, the WebSocket client's frames,
//! push stamps). The epoll [`Shard`] below and the tokio engine's tasks only move bytes.

use std::{
    collections::{BTreeMap, VecDeque},
    mem,
    os::fd::{AsRawFd, OwnedFd},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use anyhow::{Context, Result};

use super::{
    COMMAND_TOKEN, READ_BUF, Sent, ShardIo, Sink, Slab, Spill, closed_by, failure_of, flush,
    interest, pace, rearm, send,
    shard_loop::{self, Engine, Extra, Reporter},
    shrink,
};
use crate::workload::{
    config::{ClientShardConfig, Mode, ShardCommand},
    push_format::{PushFormat, Stamp},
    push_rule::PushInstant,
    sockopt::{self, Connecting},
    stats::{self, Counters, Hists, PushStat, TIMELINE_BIN_MS},
    sys::{self, EPOLLERR, EPOLLHUP, EPOLLIN, EPOLLOUT, Epoll, splitmix64},
    ws::{
        Decoder, Event, Fragment, Opcode, Role,
        frame::encode_frame,
        handshake::{self, HandshakeError},
    },
};

/// Pacing tick while ramping with a target rate: 5 ms keeps bursts small (150 connects at
/// 30k/s) without waking the shard more than 200 times a second.
pub const PACE_NS: u64 = 5_000_000;

/// Where a client connection is in its life.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum State {
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
pub const CLOSE_STALL_NS: u64 = 5_000_000_000;

/// A teardown's watch over the connections still waiting for their server to close, for
/// both engines: stalled once their number has not fallen for [`CLOSE_STALL_NS`].
#[derive(Default)]
pub struct CloseWatch {
    left: u64,
    stall_at: u64,
}

impl CloseWatch {
    pub fn new(left: u64, now_ns: u64) -> CloseWatch {
        CloseWatch {
            left,
            stall_at: now_ns.saturating_add(CLOSE_STALL_NS),
        }
    }

    /// True if `left` connections are still waiting and none finished for
    /// [`CLOSE_STALL_NS`] (the wait then starts over).
    pub fn stalled(&mut self, left: u64, now_ns: u64) -> bool {
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
pub enum WsEnd {
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
    pub fn count(self, c: &mut Counters) {
        match self {
            WsEnd::Rejected => c.failures.handshake_rejected += 1,
            WsEnd::Invalid => c.failures.handshake_invalid += 1,
            WsEnd::PeerClosed => c.closed.peer_closed += 1,
            WsEnd::EchoMismatch => c.closed.echo_mismatch += 1,
            WsEnd::Protocol => c.closed.protocol += 1,
        }
    }

    /// A handshake failure: the connection never opened.
    pub fn failed(self) -> bool {
        matches!(self, WsEnd::Rejected | WsEnd::Invalid)
    }
}

/// What one batch of WebSocket input did. Frames to send back are in [`Proto::out`].
#[derive(Debug)]
pub struct WsStep {
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
pub enum EchoStep {
    /// Bytes that are not the payload sent (or none was expected): close.
    Mismatch,
    /// Correct so far; more of the reply to come.
    Partial,
    /// The reply is complete: send the next request.
    RoundTrip,
}

/// A client connection's protocol position: what [`Proto`] needs to read its input.
#[derive(Clone, Copy, Debug)]
pub struct ConnProto {
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
}

impl ConnProto {
    pub fn new(g: u64, t_ns: u64) -> ConnProto {
        ConnProto {
            state: State::Connecting,
            g,
            t_ns,
            seq: 0,
            got: 0,
        }
    }
}

/// A client shard's protocol and statistics state, shared by both engines.
pub struct Proto {
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
}

impl Proto {
    pub fn new(cfg: ClientShardConfig, open_in_process: Arc<AtomicU64>) -> Result<Proto> {
        let echo_limit = match (cfg.mode, cfg.echo_count) {
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
            cfg,
        })
    }

    /// A `Mark` command: frames without an id belong to push `id` from now on.
    pub fn mark(&mut self, id: u64, started_unix_ns: u64) {
        self.mark = (id, started_unix_ns);
        self.rep.mark = id;
    }

    /// Sends a report if anything changed (or `force`).
    pub fn report(
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
                .changed_blobs(sys::monotonic_ns(), force || ramp_done || closed_all)?,
            timeline: mem::take(&mut self.timeline).into_iter().collect(),
            push_done: None,
        };
        self.rep.send(sink, &self.c, x, force, closed_all)
    }

    /// A teardown gave up waiting for the server to close `n` connections.
    pub fn warn_close_unanswered(&mut self, n: u64) {
        self.warn_once(16, || {
            format!(
                "teardown: the server did not close {n} connection(s) within {} s of our close \
                 frame (RFC 6455 §7.1.1: the server closes first); closed them, and the rest \
                 right after their close frame",
                CLOSE_STALL_NS / 1_000_000_000
            )
        });
    }

    /// One warning line per kind of failure (bit per kind), so a storm of EADDRNOTAVAIL
    /// is one clear message, not a million.
    fn warn_once(&mut self, bit: u32, msg: impl FnOnce() -> String) {
        if self.warned & bit == 0 {
            self.warned |= bit;
            self.rep.warnings.push(msg());
        }
    }

    /// Counts a failed connect (or a failure before the connection opened) and says why once.
    pub fn connect_failed(&mut self, e: &std::io::Error, g: u64) {
        failure_of(e, &mut self.c.failures);
        let (src, dst) = self.cfg.endpoints(g);
        self.warn_failure(e, src, dst);
    }

    fn warn_failure(
        &mut self,
        e: &std::io::Error,
        src: Option<std::net::SocketAddr>,
        dst: std::net::SocketAddr,
    ) {
        let from = src
            .map(|s| s.ip().to_string())
            .unwrap_or_else(|| "the default source".into());
        match sys::errno(e) {
            libc::EMFILE | libc::ENFILE => {
                let open = self.open_in_process.load(Ordering::Relaxed);
                self.warn_once(1, || {
                    format!(
                        "connect: {e} with {open} sockets open in this process (RLIMIT_NOFILE): \
                         the client shards by itself only up to what it was asked for; raise `ulimit -n` \
                         or pass --workers to spread over more processes"
                    )
                })
            }
            libc::EADDRNOTAVAIL | libc::EADDRINUSE => self.warn_once(2, || {
                format!(
                    "connect {from} -> {dst}: {e}: the source address/port space for this destination is \
                     exhausted (one source address gives each server port one ephemeral range, \
                     net.ipv4.ip_local_port_range): add --source addresses (e.g. --source 127.0.0.2-127.0.0.41) \
                     or more server --ports"
                )
            }),
            libc::ECONNREFUSED => self.warn_once(4, || {
                format!("connect {from} -> {dst}: connection refused: is the server listening on every --ports port?")
            }),
            _ => self.warn_once(8, || format!("connect {from} -> {dst}: {e}")),
        }
    }

    /// The TCP connect of `conn` completed at `now`: its latencies.
    pub fn connected(&mut self, conn: &ConnProto, now: u64) {
        self.hists
            .record(stats::CONNECT, now.saturating_sub(conn.t_ns) / 1000);
        if let Some(due) = scheduled(&self.cfg, self.t0_mono, conn.g) {
            self.hists
                .record(stats::CONNECT_FROM_SCHEDULE, now.saturating_sub(due) / 1000);
        }
    }

    /// The WebSocket upgrade request of `conn` (whose connect completed at `now`).
    pub fn handshake_request(&mut self, conn: &mut ConnProto, now: u64) -> &[u8] {
        conn.state = State::Handshake;
        conn.t_ns = now;
        let key = ws_key(self.cfg.seed, conn.g);
        self.out.clear();
        handshake::write_request(&mut self.out, &self.cfg.host, &self.cfg.path, &key);
        &self.out
    }

    /// Bookkeeping when a connection becomes open at the application level.
    pub fn opened(&mut self, conn: &mut ConnProto, now: u64) {
        conn.state = State::Open;
        if self.cfg.mode == Mode::Ws {
            // `t_ns` is still the handshake request's: the echo that resets it comes after.
            self.hists
                .record(stats::WS_HANDSHAKE, now.saturating_sub(conn.t_ns) / 1000);
            if let Some(due) = scheduled(&self.cfg, self.t0_mono, conn.g) {
                self.hists
                    .record(stats::WS_OPEN_FROM_SCHEDULE, now.saturating_sub(due) / 1000);
            }
        }
        self.c.in_flight -= 1;
        self.c.connected += 1;
        self.c.open += 1;
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

    /// The next echo request of an open `conn`, if more are wanted (its send time is now).
    pub fn echo_request(&mut self, conn: &mut ConnProto) -> Option<&[u8]> {
        let wanted = self.echo_limit.is_none_or(|lim| u64::from(conn.seq) < lim);
        if !wanted || conn.state != State::Open {
            return None;
        }
        fill_payload(conn.g, conn.seq, &mut self.payload);
        conn.t_ns = sys::monotonic_ns();
        conn.got = 0;
        if self.cfg.mode == Mode::Ws {
            let key = self.mask_key();
            self.out.clear();
            encode_frame(&mut self.out, Opcode::Binary, &self.payload, Some(key));
            Some(&self.out)
        } else {
            Some(&self.payload)
        }
    }

    /// RFC 6455 §7.1.2: the goodbye of a client teardown, a close frame (1000, normal), so
    /// a peer records a clean close rather than 1006, abnormal.
    pub fn close_frame(&mut self) -> &[u8] {
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

    /// Raw TCP echo: checks the reply against the payload it must equal, piece by piece.
    pub fn echo_input(&mut self, conn: &mut ConnProto, data: &[u8]) -> EchoStep {
        let expecting = self.echo_limit.is_none_or(|lim| u64::from(conn.seq) < lim);
        let at = conn.got as usize;
        let n = data.len();
        let ok = expecting && at + n <= self.payload.len() && {
            fill_payload(conn.g, conn.seq, &mut self.payload);
            self.payload[at..at + n] == *data
        };
        if !ok {
            return EchoStep::Mismatch;
        }
        conn.got += n as u32;
        if conn.got as usize != self.payload.len() {
            return EchoStep::Partial;
        }
        self.hists.record(
            stats::ECHO_RTT,
            sys::monotonic_ns().saturating_sub(conn.t_ns) / 1000,
        );
        conn.seq += 1;
        self.c.echo_round_trips += 1;
        EchoStep::RoundTrip
    }

    /// WebSocket client input: the upgrade response while in handshake, then frames. Pongs,
    /// the close reply and protocol-error closes go to [`Proto::out`] (cleared first).
    /// `conn.state` becomes Open when the handshake completes, but [`Proto::opened`] is the
    /// caller's (after it sent `out`).
    pub fn ws_input(
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
                            None | Some(Event::Pong(_)) => {}
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
                                let expecting =
                                    self.echo_limit.is_none_or(|lim| u64::from(conn.seq) < lim);
                                if !text && expecting && p.len() == self.payload.len() && {
                                    fill_payload(conn.g, conn.seq, &mut self.payload);
                                    p == &self.payload[..]
                                } {
                                    self.hists.record(
                                        stats::ECHO_RTT,
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

    /// A push, timed by the run's rule (workload/push_rule.rs): per message from the
    /// broadcast start or the frame's write (c1m's frame carries both; a foreign frame's
    /// one stamp is what it is), fan-out from the trigger instant the push was marked
    /// with. A c1m frame of a push marked without an instant (clients on other hosts,
    /// or a push nobody here triggered) is timed for fan-out from its broadcast start.
    fn on_push(&mut self, stamp: Stamp) {
        // On the server's clock: its stamps are compared with it.
        let now = sys::realtime_ns().saturating_add_signed(self.cfg.clock_offset_ns);
        let (mark_id, trigger) = self.mark;
        let (id, per_message_from, fanout_from) = match stamp {
            Stamp::C1m {
                id,
                started_unix_ns,
                written_unix_ns,
            } => (
                id,
                match self.cfg.push_latency {
                    PushInstant::Broadcast => started_unix_ns,
                    PushInstant::Write => written_unix_ns,
                },
                if id == mark_id && trigger > 0 {
                    trigger
                } else {
                    started_unix_ns
                },
            ),
            Stamp::At(at) => (mark_id, at, trigger),
        };
        // No trigger: the push is known by its stamp alone.
        let known_from = if fanout_from > 0 {
            fanout_from
        } else {
            per_message_from
        };
        self.c.pushes_received += 1;
        self.hists.record(
            stats::PUSH_MESSAGE,
            now.saturating_sub(per_message_from) / 1000,
        );
        if fanout_from > 0 {
            self.hists
                .record(stats::PUSH_FANOUT, now.saturating_sub(fanout_from) / 1000);
        }
        let e = self.rep.pushes.entry(id).or_insert(PushStat {
            push_id: id,
            started_unix_ns: known_from,
            ..Default::default()
        });
        e.merge(&PushStat {
            push_id: id,
            started_unix_ns: known_from,
            count: 1,
            first_unix_ns: now,
            last_unix_ns: now,
        });
        self.rep.dirty_pushes.insert(id);
    }
}

struct Conn {
    fd: OwnedFd,
    p: ConnProto,
    spill: Option<Box<Spill>>,
}

struct Shard {
    p: Proto,
    conns: Slab<Conn>,
    buf: Vec<u8>,
    /// Next local connection index to start.
    next: u64,
    started: bool,
    closing: bool,
    /// Teardown: the connections in [`State::Closing`].
    close_watch: CloseWatch,
    /// Teardown: open WebSocket connections not yet sent their close frame. At most
    /// `--in-flight` wait in [`State::Closing`] at once, the next going as one ends: all
    /// at once kept the shard writing close frames for tens of seconds at 1.85M while the
    /// servers' FINs waited unread, and 221,128 server sockets outlived `tcp_fin_timeout`
    /// (60 s) in FIN_WAIT2, so the late FIN drew a RST.
    to_close: Vec<u64>,
    /// Connections in [`State::Closing`].
    closes_waiting: u64,
    /// False once the teardown stalled: the rest close right after their close frame.
    close_waits: bool,
    /// Attempts in start order, for the connect/handshake timeout: the sweep looks only at
    /// the front, not at every connection (a full scan cost O(connections) 4× a second).
    pending: VecDeque<(u64, u64)>,
    /// Connects are paced this turn (decided before the wait), and the next pace tick.
    pacing: bool,
    next_pace: u64,
}

/// Runs one client shard: waits for `Start`, ramps, holds until `Close`/`Stop`.
pub fn run(cfg: ClientShardConfig, mut io: ShardIo, open_in_process: Arc<AtomicU64>) -> Result<()> {
    let ep = Epoll::new().context("epoll_create1")?;
    ep.add(io.commands.fd(), EPOLLIN, COMMAND_TOKEN)
        .context("epoll_ctl command source")?;
    let mut s = Shard {
        conns: Slab::with_capacity(cfg.count as usize),
        buf: vec![0; READ_BUF],
        next: 0,
        started: false,
        closing: false,
        close_watch: CloseWatch::default(),
        to_close: Vec::new(),
        closes_waiting: 0,
        close_waits: true,
        pending: VecDeque::new(),
        pacing: false,
        next_pace: 0,
        p: Proto::new(cfg, open_in_process)?,
    };
    shard_loop::run(&mut s, &ep, &mut io)
}

impl Engine for Shard {
    fn wait_ms(&mut self, next_tick: u64) -> i32 {
        self.pacing =
            self.started && !self.closing && self.next < self.p.cfg.count && self.p.cfg.rate > 0.0;
        let deadline = if self.pacing {
            next_tick.min(self.next_pace)
        } else {
            next_tick
        };
        sys::ms_until(sys::monotonic_ns(), deadline)
    }

    #[inline]
    fn event(&mut self, ep: &Epoll, tok: u64, ev: u32) {
        self.conn_event(ep, tok, ev);
    }

    fn after_events(&mut self, ep: &Epoll) {
        self.pump(ep);
        self.close_more();
    }

    fn command(&mut self, ep: &Epoll, c: ShardCommand, sink: &mut Sink) -> Result<()> {
        match c {
            ShardCommand::Start { t0_mono_ns } => {
                self.p.t0_mono = t0_mono_ns;
                self.started = true;
                self.pump(ep);
            }
            ShardCommand::Close => {
                Shard::close_all(self);
                self.report(sink, true, self.conns.is_empty())?;
            }
            ShardCommand::Mark {
                id,
                started_unix_ns,
            } => {
                self.p.mark(id, started_unix_ns);
                // At once: the lab fires the trigger when every shard has said so.
                self.report(sink, true, false)?;
            }
            ShardCommand::Push { .. } | ShardCommand::Stop => {}
        }
        Ok(())
    }

    fn tick(&mut self, ep: &Epoll) -> bool {
        self.sweep_timeouts();
        self.pump(ep);
        if self.closing {
            self.close_stalled();
            self.close_more();
        }
        self.closing && self.conns.is_empty()
    }

    fn turn_end(&mut self, ep: &Epoll, now: u64, _sink: &mut Sink) -> Result<()> {
        if self.pacing && now >= self.next_pace {
            // Missed pace ticks are skipped, not caught up: `pump` works from the rate and
            // the elapsed time, so one call starts everything that is due.
            self.next_pace = now + PACE_NS;
            self.pump(ep);
        }
        Ok(())
    }

    fn close_all(&mut self, _ep: &Epoll) {
        Shard::close_all(self);
        // The shard exits now: every connection still gets its close frame.
        self.close_waits = false;
        self.close_more();
    }

    fn report(&mut self, sink: &mut Sink, force: bool, closed_all: bool) -> Result<()> {
        let ramp_done = self.ramp_done();
        self.p.report(sink, ramp_done, force, closed_all)
    }
}

impl Shard {
    fn ramp_done(&self) -> bool {
        self.started && self.next >= self.p.cfg.count && self.p.c.in_flight == 0
    }

    /// Starts as many connects as the rate and the in-flight bound allow.
    fn pump(&mut self, ep: &Epoll) {
        if !self.started || self.closing {
            return;
        }
        let elapsed = sys::monotonic_ns().saturating_sub(self.p.t0_mono);
        let allowed = pace::due(self.p.cfg.rate, self.p.cfg.count, elapsed);
        while self.next < allowed && self.p.c.in_flight < self.p.cfg.in_flight {
            let g = self.p.cfg.first + self.next * self.p.cfg.stride;
            self.next += 1;
            self.connect(ep, g);
        }
    }

    fn connect(&mut self, ep: &Epoll, g: u64) {
        self.p.c.attempted += 1;
        let (src, dst) = self.p.cfg.endpoints(g);
        let nodelay = self.p.cfg.mode != Mode::Hold;
        let t_ns = sys::monotonic_ns();
        let (fd, done) = match sockopt::connect(src.as_ref(), &dst, nodelay) {
            Ok(Connecting::InProgress(fd)) => (fd, false),
            Ok(Connecting::Done(fd)) => (fd, true),
            Err(e) => {
                self.p.connect_failed(&e, g);
                return;
            }
        };
        let raw = fd.as_raw_fd();
        let tok = self.conns.insert(Conn {
            fd,
            p: ConnProto::new(g, t_ns),
            spill: None,
        });
        self.p.c.in_flight += 1;
        self.pending.push_back((tok, t_ns));
        self.p.open_in_process.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = ep.add(raw, EPOLLOUT, tok) {
            failure_of(&e, &mut self.p.c.failures);
            self.drop_conn(tok);
            return;
        }
        if done {
            self.on_connected(ep, tok);
        }
    }

    /// Removes a connection that never opened (failure already counted).
    fn drop_conn(&mut self, tok: u64) {
        if self.conns.remove(tok).is_some() {
            self.p.c.in_flight -= 1;
            self.p.open_in_process.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Removes an open connection (close cause already counted).
    fn close_open(&mut self, tok: u64) {
        if self.conns.remove(tok).is_some() {
            self.p.c.open -= 1;
            self.p.open_in_process.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Teardown: every open WebSocket connection sends its close frame and waits in
    /// [`State::Closing`] for the server to close, `--in-flight` at a time
    /// ([`Shard::close_more`]); everything else is closed now.
    fn close_all(&mut self) {
        self.closing = true;
        self.pending.clear();
        let ws = self.p.cfg.mode == Mode::Ws;
        self.to_close.clear();
        let (toks, _) = self.conns.tokens_from(0, self.conns.len());
        for tok in toks {
            let Some(conn) = self.conns.get_mut(tok) else {
                continue;
            };
            match conn.p.state {
                State::Open if ws => self.to_close.push(tok),
                State::Open => {
                    self.p.c.closed.local_close += 1;
                    self.close_open(tok);
                }
                // Said goodbye already (`Stop` after `Close`).
                State::Closing => {}
                State::Connecting | State::Handshake => {
                    self.p.c.failures.aborted += 1;
                    self.drop_conn(tok);
                }
            }
        }
        // Popped from the end: oldest connection first.
        self.to_close.reverse();
        self.close_watch = CloseWatch::new(self.conns.len() as u64, sys::monotonic_ns());
        self.close_more();
    }

    /// Sends close frames while fewer than `--in-flight` connections wait for their server
    /// (all of the rest once the teardown stalled).
    fn close_more(&mut self) {
        while !self.close_waits || self.closes_waiting < self.p.cfg.in_flight {
            let Some(tok) = self.to_close.pop() else {
                return;
            };
            self.say_goodbye(tok);
        }
    }

    /// Our close frame on an open WebSocket connection, then [`State::Closing`] (or a
    /// close at once, when the frame cannot go out or the teardown stalled).
    fn say_goodbye(&mut self, tok: u64) {
        // Gone meanwhile (the server closed it first, and that was counted), or already
        // waiting.
        let Some(conn) = self.conns.get_mut(tok).filter(|c| c.p.state == State::Open) else {
            return;
        };
        self.p.c.closed.local_close += 1;
        let mut written = 0;
        let sent = send(
            conn.fd.as_raw_fd(),
            &mut conn.spill,
            self.p.close_frame(),
            &mut written,
        );
        self.p.c.bytes_out += written;
        if matches!(sent, Ok(Sent::All)) && self.close_waits {
            conn.p.state = State::Closing;
            self.p.c.open -= 1;
            self.closes_waiting += 1;
        } else {
            // Output stuck behind a peer that does not read: no goodbye to wait for.
            self.close_open(tok);
        }
    }

    /// A connection in [`State::Closing`] is readable: its server's close reply, then its
    /// FIN (or an error) ends it.
    fn closing_event(&mut self, tok: u64) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        loop {
            match sys::read(conn.fd.as_raw_fd(), &mut self.buf) {
                Ok(0) => break,
                Ok(n) => self.p.c.bytes_in += n as u64,
                Err(e) if sys::would_block(&e) => return,
                Err(_) => break,
            }
        }
        self.end(tok);
    }

    /// Closes the teardown's stragglers once no connection has finished its close for
    /// [`CLOSE_STALL_NS`].
    fn close_stalled(&mut self) {
        let left = self.conns.len() as u64;
        if !self.close_watch.stalled(left, sys::monotonic_ns()) {
            return;
        }
        self.p.warn_close_unanswered(self.closes_waiting);
        self.close_waits = false;
        let (toks, _) = self.conns.tokens_from(0, self.conns.len());
        for tok in toks {
            if self
                .conns
                .get_mut(tok)
                .is_some_and(|c| c.p.state == State::Closing)
            {
                self.end(tok);
            }
        }
    }

    /// Closes the socket of a [`State::Closing`] connection (already out of `open`).
    fn end(&mut self, tok: u64) {
        if self.conns.remove(tok).is_some() {
            self.closes_waiting -= 1;
            self.p.open_in_process.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn sweep_timeouts(&mut self) {
        if self.p.c.in_flight == 0 {
            self.pending.clear();
            return;
        }
        let limit = self.p.cfg.connect_timeout_ms * 1_000_000;
        let now = sys::monotonic_ns();
        // Oldest first: stop at the first attempt still in flight and not yet expired.
        while let Some(&(tok, started)) = self.pending.front() {
            let in_flight = self
                .conns
                .get_mut(tok)
                .is_some_and(|c| c.p.state != State::Open);
            if in_flight && now.saturating_sub(started) <= limit {
                break;
            }
            self.pending.pop_front();
            if in_flight {
                self.p.c.failures.timed_out += 1;
                self.drop_conn(tok);
            }
        }
    }

    fn on_connected(&mut self, ep: &Epoll, tok: u64) {
        let now = sys::monotonic_ns();
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        self.p.connected(&conn.p, now);
        let fd = conn.fd.as_raw_fd();
        if let Err(e) = ep.modify(fd, EPOLLIN, tok) {
            failure_of(&e, &mut self.p.c.failures);
            self.drop_conn(tok);
            return;
        }
        if self.p.cfg.mode == Mode::Ws {
            let req = self.p.handshake_request(&mut conn.p, now);
            let mut sent = 0;
            let r = send(fd, &mut conn.spill, req, &mut sent);
            self.p.c.bytes_out += sent;
            if let Err(e) = r {
                failure_of(&e, &mut self.p.c.failures);
                self.drop_conn(tok);
            }
            return;
        }
        self.opened(tok, now);
        self.echo_next(ep, tok);
    }

    fn opened(&mut self, tok: u64, now: u64) {
        if let Some(conn) = self.conns.get_mut(tok) {
            self.p.opened(&mut conn.p, now);
        }
    }

    /// Sends the next echo request on `tok` if more are wanted.
    fn echo_next(&mut self, ep: &Epoll, tok: u64) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        let Some(bytes) = self.p.echo_request(&mut conn.p) else {
            return;
        };
        let before = interest(&conn.spill);
        let fd = conn.fd.as_raw_fd();
        let mut written = 0;
        let r = send(fd, &mut conn.spill, bytes, &mut written)
            .and_then(|_| rearm(ep, &conn.fd, tok, before, &conn.spill));
        self.p.c.bytes_out += written;
        if let Err(e) = r {
            closed_by(&e, &mut self.p.c.closed);
            self.close_open(tok);
        }
    }

    fn conn_event(&mut self, ep: &Epoll, tok: u64, ev: u32) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        let fd = conn.fd.as_raw_fd();
        if conn.p.state == State::Closing {
            self.closing_event(tok);
            return;
        }
        if conn.p.state == State::Connecting {
            match sockopt::take_error(fd) {
                Ok(None) if ev & (EPOLLOUT | EPOLLIN) != 0 && ev & EPOLLERR == 0 => {
                    self.on_connected(ep, tok)
                }
                Ok(None) => {}
                Ok(Some(e)) | Err(e) => {
                    let g = conn.p.g;
                    self.p.connect_failed(&e, g);
                    self.drop_conn(tok);
                }
            }
            return;
        }
        let before = interest(&conn.spill);
        if before == EPOLLOUT {
            let r = flush(fd, &mut conn.spill, &mut self.p.c.bytes_out)
                .and_then(|_| rearm(ep, &conn.fd, tok, before, &conn.spill));
            if let Err(e) = r {
                self.fail_or_close(tok, &e);
            }
            return;
        }
        if ev & (EPOLLIN | EPOLLHUP | EPOLLERR) == 0 {
            return;
        }
        let n = match sys::read(fd, &mut self.buf) {
            Ok(0) => {
                if conn.p.state == State::Open {
                    self.p.c.closed.peer_closed += 1;
                    self.close_open(tok);
                } else {
                    self.p.c.failures.reset += 1;
                    self.drop_conn(tok);
                }
                return;
            }
            Ok(n) => n,
            Err(e) if sys::would_block(&e) => return,
            Err(e) => {
                self.fail_or_close(tok, &e);
                return;
            }
        };
        self.p.c.bytes_in += n as u64;
        match self.p.cfg.mode {
            Mode::Hold => {}
            Mode::Echo => self.echo_bytes(ep, tok, n),
            Mode::Ws => self.ws_bytes(ep, tok, n),
        }
    }

    fn fail_or_close(&mut self, tok: u64, e: &std::io::Error) {
        match self.conns.get_mut(tok).map(|c| c.p.state) {
            Some(State::Open) => {
                closed_by(e, &mut self.p.c.closed);
                self.close_open(tok);
            }
            Some(_) => {
                failure_of(e, &mut self.p.c.failures);
                self.drop_conn(tok);
            }
            None => {}
        }
    }

    /// Raw TCP echo: checks the reply against the payload it must equal, piece by piece.
    fn echo_bytes(&mut self, ep: &Epoll, tok: u64, n: usize) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        match self.p.echo_input(&mut conn.p, &self.buf[..n]) {
            EchoStep::Mismatch => {
                self.p.c.closed.echo_mismatch += 1;
                self.close_open(tok);
            }
            EchoStep::Partial => {}
            EchoStep::RoundTrip => self.echo_next(ep, tok),
        }
    }

    fn ws_bytes(&mut self, ep: &Epoll, tok: u64, n: usize) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        let mut spill = conn.spill.take();
        let mut inbuf = spill
            .as_mut()
            .map(|s| mem::take(&mut s.inbuf))
            .unwrap_or_default();
        let mut frag = spill.as_mut().and_then(|s| s.frag.take());
        let spilled = !inbuf.is_empty();
        let data: &mut [u8] = if !spilled {
            &mut self.buf[..n]
        } else {
            inbuf.extend_from_slice(&self.buf[..n]);
            &mut inbuf[..]
        };
        let data_len = data.len();
        let step = self.p.ws_input(&mut conn.p, data, &mut frag);
        // Keep an incomplete frame or head, and a fragmented message, for the next read.
        if step.end.is_none() && (step.used < data_len || frag.is_some()) {
            let s = spill.get_or_insert_with(Box::default);
            if !spilled {
                s.inbuf.extend_from_slice(&self.buf[step.used..n]);
            } else {
                inbuf.drain(..step.used);
                s.inbuf = inbuf;
            }
            s.frag = frag;
        }
        let before = interest(&spill);
        let fd = conn.fd.as_raw_fd();
        let sent = if self.p.out.is_empty() {
            Ok(())
        } else {
            send(fd, &mut spill, &self.p.out, &mut self.p.c.bytes_out).map(drop)
        };
        shrink(&mut spill);
        conn.spill = spill;
        let state = conn.p.state;
        if let Some(end) = step.end {
            if end.failed() {
                end.count(&mut self.p.c);
                self.drop_conn(tok);
                return;
            }
            if step.became_open {
                self.opened(tok, sys::monotonic_ns());
            }
            end.count(&mut self.p.c);
            self.close_open(tok);
            return;
        }
        if let Err(e) = sent {
            if step.became_open {
                self.opened(tok, sys::monotonic_ns());
            }
            self.fail_or_close(tok, &e);
            return;
        }
        if let Some(conn) = self.conns.get_mut(tok)
            && let Err(e) = rearm(ep, &conn.fd, tok, before, &conn.spill)
        {
            // Counted as opened first, as above, so `close_open` finds it counted.
            if step.became_open {
                self.opened(tok, sys::monotonic_ns());
            }
            self.fail_or_close(tok, &e);
            return;
        }
        if step.became_open && state == State::Open {
            self.opened(tok, sys::monotonic_ns());
            self.echo_next(ep, tok);
        } else if step.rtt_done {
            self.echo_next(ep, tok);
        }
    }
}

/// Monotonic ns at which the pace scheduled the connect of global index `g` (None: unpaced).
pub fn scheduled(cfg: &ClientShardConfig, t0_mono: u64, g: u64) -> Option<u64> {
    let k = g.saturating_sub(cfg.first) / cfg.stride.max(1);
    pace::scheduled_ns(cfg.rate, k).map(|at| t0_mono.saturating_add(at))
}

/// The Sec-WebSocket-Key of connection `g`: derived, not stored.
pub fn ws_key(seed: u64, g: u64) -> handshake::Key {
    let a = splitmix64(seed ^ g);
    let b = splitmix64(a ^ 0x5eed);
    let mut n = [0u8; 16];
    n[..8].copy_from_slice(&a.to_le_bytes());
    n[8..].copy_from_slice(&b.to_le_bytes());
    handshake::Key::from_nonce(n)
}

/// The echo payload of round trip `seq` on connection `g`: derived, so the reply is checked
/// byte for byte without keeping a copy per connection.
pub fn fill_payload(g: u64, seq: u32, out: &mut [u8]) {
    let base = splitmix64(g.rotate_left(32) ^ u64::from(seq));
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        let w = splitmix64(base ^ i as u64).to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
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
