//! The client shard: paced non-blocking connects from chosen source addresses, then hold,
//! echo (verified byte for byte) or WebSocket (handshake, pushes, echo).

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
    COMMAND_TOKEN, READ_BUF, ShardIo, Sink, Slab, Spill, closed_by, failure_of, flush, interest,
    pace, rearm, send, send_before_close,
    shard_loop::{self, Engine, Extra, Reporter},
    shrink,
};
use crate::workload::{
    config::{ClientShardConfig, Mode, ShardCommand},
    push_format::{PushFormat, Stamp},
    sockopt::{self, Connecting},
    stats::{self, Counters, Hists, PushStat, TIMELINE_BIN_MS},
    sys::{self, EPOLLERR, EPOLLHUP, EPOLLIN, EPOLLOUT, Epoll, splitmix64},
    ws::{
        Decoder, Event, Opcode, Role,
        frame::encode_frame,
        handshake::{self, HandshakeError},
    },
};

/// Pacing tick while ramping with a target rate: 5 ms keeps bursts small (150 connects at
/// 30k/s) without waking the shard more than 200 times a second.
const PACE_NS: u64 = 5_000_000;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Connecting,
    Handshake,
    Open,
}

struct Conn {
    fd: OwnedFd,
    state: State,
    /// Global connection index: derives the endpoints, the WebSocket key and echo payloads,
    /// so none of them is stored.
    g: u64,
    /// Monotonic ns: the `connect()` call, then the WebSocket request, then the current
    /// echo's send time. (The instant the pace scheduled the connect is derived from `g`.)
    t_ns: u64,
    /// Echo round trips done.
    seq: u32,
    /// Bytes of the current echo reply received and checked (raw TCP echo).
    got: u32,
    spill: Option<Box<Spill>>,
}

struct Shard {
    cfg: ClientShardConfig,
    conns: Slab<Conn>,
    buf: Vec<u8>,
    out: Vec<u8>,
    payload: Vec<u8>,
    c: Counters,
    hists: Hists,
    dec: Decoder,
    /// Next local connection index to start.
    next: u64,
    t0_mono: u64,
    started: bool,
    closing: bool,
    /// Round trips per connection: None = until teardown; Some(0) = no echo.
    echo_limit: Option<u64>,
    mask_ctr: u64,
    timeline: BTreeMap<u32, u32>,
    /// Attempts in start order, for the connect/handshake timeout: the sweep looks only at
    /// the front, not at every connection (a full scan cost O(connections) 4× a second).
    pending: VecDeque<(u64, u64)>,
    rep: Reporter,
    warned: u32,
    open_in_process: Arc<AtomicU64>,
    /// Connects are paced this turn (decided before the wait), and the next pace tick.
    pacing: bool,
    next_pace: u64,
    /// The push that frames without an id belong to, and its trigger instant (0: none).
    mark: (u64, u64),
}

/// Runs one client shard: waits for `Start`, ramps, holds until `Close`/`Stop`.
pub fn run(cfg: ClientShardConfig, mut io: ShardIo, open_in_process: Arc<AtomicU64>) -> Result<()> {
    let ep = Epoll::new().context("epoll_create1")?;
    ep.add(io.commands.fd(), EPOLLIN, COMMAND_TOKEN)
        .context("epoll_ctl command source")?;
    let echo_limit = match (cfg.mode, cfg.echo_count) {
        (Mode::Echo, 0) => None,
        (Mode::Echo | Mode::Ws, n) => Some(n),
        (Mode::Hold, _) => Some(0),
    };
    let mut s = Shard {
        dec: Decoder::new(Role::Client, cfg.max_message),
        conns: Slab::with_capacity(cfg.count as usize),
        buf: vec![0; READ_BUF],
        out: Vec::new(),
        payload: vec![0; cfg.payload],
        c: Counters::default(),
        hists: Hists::new()?,
        next: 0,
        t0_mono: sys::monotonic_ns(),
        started: false,
        closing: false,
        echo_limit,
        mask_ctr: cfg.seed ^ u64::from(cfg.shard).rotate_left(40),
        timeline: BTreeMap::new(),
        pending: VecDeque::new(),
        rep: Reporter::new(cfg.shard),
        warned: 0,
        open_in_process,
        pacing: false,
        next_pace: 0,
        mark: (0, 0),
        cfg,
    };
    shard_loop::run(&mut s, &ep, &mut io)
}

impl Engine for Shard {
    fn wait_ms(&mut self, next_tick: u64) -> i32 {
        self.pacing =
            self.started && !self.closing && self.next < self.cfg.count && self.cfg.rate > 0.0;
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
    }

    fn command(&mut self, ep: &Epoll, c: ShardCommand, sink: &mut Sink) -> Result<()> {
        match c {
            ShardCommand::Start { t0_mono_ns } => {
                self.t0_mono = t0_mono_ns;
                self.started = true;
                self.pump(ep);
            }
            ShardCommand::Close => {
                Shard::close_all(self);
                self.report(sink, true, true)?;
            }
            ShardCommand::Mark {
                id,
                started_unix_ns,
            } => {
                self.mark = (id, started_unix_ns);
                self.rep.mark = id;
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
    }

    fn report(&mut self, sink: &mut Sink, force: bool, closed_all: bool) -> Result<()> {
        let x = Extra {
            ramp_done: self.ramp_done(),
            hists: self.hists.changed_blobs()?,
            timeline: mem::take(&mut self.timeline).into_iter().collect(),
            push_done: None,
        };
        self.rep.send(sink, &self.c, x, force, closed_all)
    }
}

impl Shard {
    fn ramp_done(&self) -> bool {
        self.started && self.next >= self.cfg.count && self.c.in_flight == 0
    }

    /// One warning line per kind of failure (bit per kind), so a storm of EADDRNOTAVAIL
    /// is one clear message, not a million.
    fn warn_once(&mut self, bit: u32, msg: impl FnOnce() -> String) {
        if self.warned & bit == 0 {
            self.warned |= bit;
            self.rep.warnings.push(msg());
        }
    }

    /// Starts as many connects as the rate and the in-flight bound allow.
    fn pump(&mut self, ep: &Epoll) {
        if !self.started || self.closing {
            return;
        }
        let elapsed = sys::monotonic_ns().saturating_sub(self.t0_mono);
        let allowed = pace::due(self.cfg.rate, self.cfg.count, elapsed);
        while self.next < allowed && self.c.in_flight < self.cfg.in_flight {
            let g = self.cfg.first + self.next * self.cfg.stride;
            self.next += 1;
            self.connect(ep, g);
        }
    }

    fn connect(&mut self, ep: &Epoll, g: u64) {
        self.c.attempted += 1;
        let (src, dst) = self.cfg.endpoints(g);
        let nodelay = self.cfg.mode != Mode::Hold;
        let t_ns = sys::monotonic_ns();
        let (fd, done) = match sockopt::connect(src.as_ref(), &dst, nodelay) {
            Ok(Connecting::InProgress(fd)) => (fd, false),
            Ok(Connecting::Done(fd)) => (fd, true),
            Err(e) => {
                failure_of(&e, &mut self.c.failures);
                self.warn_failure(&e, src, dst);
                return;
            }
        };
        let raw = fd.as_raw_fd();
        let tok = self.conns.insert(Conn {
            fd,
            state: State::Connecting,
            g,
            t_ns,
            seq: 0,
            got: 0,
            spill: None,
        });
        self.c.in_flight += 1;
        self.pending.push_back((tok, t_ns));
        self.open_in_process.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = ep.add(raw, EPOLLOUT, tok) {
            failure_of(&e, &mut self.c.failures);
            self.drop_conn(tok);
            return;
        }
        if done {
            self.on_connected(ep, tok);
        }
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

    /// Removes a connection that never opened (failure already counted).
    fn drop_conn(&mut self, tok: u64) {
        if self.conns.remove(tok).is_some() {
            self.c.in_flight -= 1;
            self.open_in_process.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Removes an open connection (close cause already counted).
    fn close_open(&mut self, tok: u64) {
        if self.conns.remove(tok).is_some() {
            self.c.open -= 1;
            self.open_in_process.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn close_all(&mut self) {
        self.closing = true;
        self.pending.clear();
        let ws = self.cfg.mode == Mode::Ws;
        for conn in self.conns.drain() {
            if conn.state == State::Open {
                if ws {
                    // RFC 6455 §7.1.2: say goodbye with a close frame (1000, normal), so a
                    // peer records a clean close rather than 1006, abnormal. Best effort:
                    // the socket is closed right after, without waiting for the reply.
                    self.mask_ctr = self.mask_ctr.wrapping_add(1);
                    let key = (splitmix64(self.mask_ctr) as u32).to_ne_bytes();
                    self.out.clear();
                    encode_frame(
                        &mut self.out,
                        Opcode::Close,
                        &1000u16.to_be_bytes(),
                        Some(key),
                    );
                    send_before_close(
                        conn.fd.as_raw_fd(),
                        &conn.spill,
                        &self.out,
                        &mut self.c.bytes_out,
                    );
                }
                self.c.closed.local_close += 1;
            } else {
                self.c.failures.aborted += 1;
            }
            self.open_in_process.fetch_sub(1, Ordering::Relaxed);
        }
        self.c.open = 0;
        self.c.in_flight = 0;
        // Connections never attempted count as neither: `attempted` says how far the ramp got.
    }

    fn sweep_timeouts(&mut self) {
        if self.c.in_flight == 0 {
            self.pending.clear();
            return;
        }
        let limit = self.cfg.connect_timeout_ms * 1_000_000;
        let now = sys::monotonic_ns();
        // Oldest first: stop at the first attempt still in flight and not yet expired.
        while let Some(&(tok, started)) = self.pending.front() {
            let in_flight = self
                .conns
                .get_mut(tok)
                .is_some_and(|c| c.state != State::Open);
            if in_flight && now.saturating_sub(started) <= limit {
                break;
            }
            self.pending.pop_front();
            if in_flight {
                self.c.failures.timed_out += 1;
                self.drop_conn(tok);
            }
        }
    }

    fn on_connected(&mut self, ep: &Epoll, tok: u64) {
        let now = sys::monotonic_ns();
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        self.hists
            .record(stats::CONNECT, now.saturating_sub(conn.t_ns) / 1000);
        if let Some(due) = scheduled(&self.cfg, self.t0_mono, conn.g) {
            self.hists
                .record(stats::CONNECT_FROM_SCHEDULE, now.saturating_sub(due) / 1000);
        }
        let fd = conn.fd.as_raw_fd();
        if let Err(e) = ep.modify(fd, EPOLLIN, tok) {
            failure_of(&e, &mut self.c.failures);
            self.drop_conn(tok);
            return;
        }
        if self.cfg.mode == Mode::Ws {
            conn.state = State::Handshake;
            conn.t_ns = now;
            let key = ws_key(self.cfg.seed, conn.g);
            let req = handshake::request(&self.cfg.host, &self.cfg.path, &key);
            if let Err(e) = send(fd, &mut conn.spill, &req, &mut self.c.bytes_out) {
                failure_of(&e, &mut self.c.failures);
                self.drop_conn(tok);
            }
            return;
        }
        self.opened(tok, now);
        self.echo_next(ep, tok);
    }

    /// Bookkeeping when a connection becomes open at the application level.
    fn opened(&mut self, tok: u64, now: u64) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
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

    /// Sends the next echo request on `tok` if more are wanted.
    fn echo_next(&mut self, ep: &Epoll, tok: u64) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        let wanted = match self.echo_limit {
            None => true,
            Some(n) => u64::from(conn.seq) < n,
        };
        if !wanted || conn.state != State::Open {
            return;
        }
        fill_payload(conn.g, conn.seq, &mut self.payload);
        conn.t_ns = sys::monotonic_ns();
        conn.got = 0;
        let before = interest(&conn.spill);
        let fd = conn.fd.as_raw_fd();
        let bytes: &[u8] = if self.cfg.mode == Mode::Ws {
            self.mask_ctr = self.mask_ctr.wrapping_add(1);
            let key = (splitmix64(self.mask_ctr) as u32).to_ne_bytes();
            self.out.clear();
            encode_frame(&mut self.out, Opcode::Binary, &self.payload, Some(key));
            &self.out
        } else {
            &self.payload
        };
        let r = send(fd, &mut conn.spill, bytes, &mut self.c.bytes_out)
            .and_then(|_| rearm(ep, &conn.fd, tok, before, &conn.spill));
        if let Err(e) = r {
            closed_by(&e, &mut self.c.closed);
            self.close_open(tok);
        }
    }

    fn conn_event(&mut self, ep: &Epoll, tok: u64, ev: u32) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        let fd = conn.fd.as_raw_fd();
        if conn.state == State::Connecting {
            match sockopt::take_error(fd) {
                Ok(None) if ev & (EPOLLOUT | EPOLLIN) != 0 && ev & EPOLLERR == 0 => {
                    self.on_connected(ep, tok)
                }
                Ok(None) => {}
                Ok(Some(e)) | Err(e) => {
                    failure_of(&e, &mut self.c.failures);
                    let (src, dst) = self.cfg.endpoints(conn.g);
                    self.warn_failure(&e, src, dst);
                    self.drop_conn(tok);
                }
            }
            return;
        }
        let before = interest(&conn.spill);
        if before == EPOLLOUT {
            let r = flush(fd, &mut conn.spill, &mut self.c.bytes_out)
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
                if conn.state == State::Open {
                    self.c.closed.peer_closed += 1;
                    self.close_open(tok);
                } else {
                    self.c.failures.reset += 1;
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
        self.c.bytes_in += n as u64;
        match self.cfg.mode {
            Mode::Hold => {}
            Mode::Echo => self.echo_bytes(ep, tok, n),
            Mode::Ws => self.ws_bytes(ep, tok, n),
        }
    }

    fn fail_or_close(&mut self, tok: u64, e: &std::io::Error) {
        match self.conns.get_mut(tok).map(|c| c.state) {
            Some(State::Open) => {
                closed_by(e, &mut self.c.closed);
                self.close_open(tok);
            }
            Some(_) => {
                failure_of(e, &mut self.c.failures);
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
        let expecting = self.echo_limit.is_none_or(|lim| u64::from(conn.seq) < lim);
        let at = conn.got as usize;
        let ok = expecting && at + n <= self.payload.len() && {
            fill_payload(conn.g, conn.seq, &mut self.payload);
            self.payload[at..at + n] == self.buf[..n]
        };
        if !ok {
            self.c.closed.echo_mismatch += 1;
            self.close_open(tok);
            return;
        }
        conn.got += n as u32;
        if conn.got as usize == self.payload.len() {
            self.hists.record(
                stats::ECHO_RTT,
                sys::monotonic_ns().saturating_sub(conn.t_ns) / 1000,
            );
            conn.seq += 1;
            self.c.echo_round_trips += 1;
            self.echo_next(ep, tok);
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
        let mut buf = mem::take(&mut self.buf);
        let spilled = !inbuf.is_empty();
        let data: &mut [u8] = if !spilled {
            &mut buf[..n]
        } else {
            inbuf.extend_from_slice(&buf[..n]);
            &mut inbuf[..]
        };
        let mut off = 0;
        // Outcome: None = keep going; Some(true) = closed (counted); Some(false) = failed in handshake.
        let mut end: Option<&'static str> = None;
        if conn.state == State::Handshake {
            match handshake::parse_response(data, &ws_key(self.cfg.seed, conn.g)) {
                Ok(None) => {}
                Ok(Some(used)) => {
                    off = used;
                    conn.state = State::Open;
                }
                Err(HandshakeError::Rejected(_)) => end = Some("rejected"),
                Err(_) => end = Some("invalid"),
            }
        }
        let became_open = conn.state == State::Open && end.is_none() && off > 0;
        let (g, mut seq, t_ns) = (conn.g, conn.seq, conn.t_ns);
        let mut rtt_done = false;
        self.out.clear();
        if conn.state == State::Open && end.is_none() {
            loop {
                match self.dec.decode(&mut data[off..], &mut frag) {
                    Ok(None) => break,
                    Ok(Some((used, ev))) => {
                        off += used;
                        match ev {
                            None | Some(Event::Pong(_)) => {}
                            Some(Event::Ping(p)) => {
                                self.c.ws_pings_in += 1;
                                self.mask_ctr = self.mask_ctr.wrapping_add(1);
                                let key = (splitmix64(self.mask_ctr) as u32).to_ne_bytes();
                                encode_frame(&mut self.out, Opcode::Pong, p, Some(key));
                            }
                            Some(Event::Close(code)) => {
                                let payload =
                                    code.map(|c| c.to_be_bytes().to_vec()).unwrap_or_default();
                                encode_frame(&mut self.out, Opcode::Close, &payload, Some([0; 4]));
                                end = Some("peer_closed");
                                break;
                            }
                            Some(Event::Message { text, payload }) => {
                                let p = payload.as_slice();
                                let expecting =
                                    self.echo_limit.is_none_or(|lim| u64::from(seq) < lim);
                                if !text && expecting && p.len() == self.payload.len() && {
                                    fill_payload(g, seq, &mut self.payload);
                                    p == &self.payload[..]
                                } {
                                    self.hists.record(
                                        stats::ECHO_RTT,
                                        sys::monotonic_ns().saturating_sub(t_ns) / 1000,
                                    );
                                    self.c.echo_round_trips += 1;
                                    seq += 1;
                                    rtt_done = true;
                                } else if let Some(stamp) = self.cfg.push_format.decode(text, p) {
                                    self.on_push(stamp);
                                } else if expecting && !text {
                                    end = Some("echo_mismatch");
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
                        end = Some("protocol");
                        break;
                    }
                }
            }
        }
        // Keep an incomplete frame or head, and a fragmented message, for the next read.
        let keep = end.is_none() && (off < data.len() || frag.is_some());
        if keep {
            let rest_from = off;
            let s = spill.get_or_insert_with(Box::default);
            if !spilled {
                s.inbuf.extend_from_slice(&buf[rest_from..n]);
            } else {
                inbuf.drain(..rest_from);
                s.inbuf = inbuf;
            }
            s.frag = frag;
        }
        self.buf = buf;
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        conn.seq = seq;
        let before = interest(&spill);
        let fd = conn.fd.as_raw_fd();
        let sent = if self.out.is_empty() {
            Ok(())
        } else {
            send(fd, &mut spill, &self.out, &mut self.c.bytes_out).map(drop)
        };
        shrink(&mut spill);
        conn.spill = spill;
        let state = conn.state;
        match end {
            Some("rejected") => {
                self.c.failures.handshake_rejected += 1;
                self.drop_conn(tok);
                return;
            }
            Some("invalid") => {
                self.c.failures.handshake_invalid += 1;
                self.drop_conn(tok);
                return;
            }
            Some(cause) => {
                if became_open {
                    self.opened(tok, sys::monotonic_ns());
                }
                match cause {
                    "peer_closed" => self.c.closed.peer_closed += 1,
                    "echo_mismatch" => self.c.closed.echo_mismatch += 1,
                    _ => self.c.closed.protocol += 1,
                }
                self.close_open(tok);
                return;
            }
            None => {}
        }
        if let Err(e) = sent {
            if became_open {
                self.opened(tok, sys::monotonic_ns());
            }
            self.fail_or_close(tok, &e);
            return;
        }
        if let Some(conn) = self.conns.get_mut(tok)
            && let Err(e) = rearm(ep, &conn.fd, tok, before, &conn.spill)
        {
            // Counted as opened first, as above, so `close_open` finds it counted.
            if became_open {
                self.opened(tok, sys::monotonic_ns());
            }
            self.fail_or_close(tok, &e);
            return;
        }
        if became_open && state == State::Open {
            self.opened(tok, sys::monotonic_ns());
            self.echo_next(ep, tok);
        } else if rtt_done {
            self.echo_next(ep, tok);
        }
    }

    /// A push: c1m's frame names its push and broadcast start; a foreign stamp belongs
    /// to the push marked last, timed for fan-out from its trigger (if one fired).
    fn on_push(&mut self, stamp: Stamp) {
        // On the server's clock: its stamps are compared with it.
        let now = sys::realtime_ns().saturating_add_signed(self.cfg.clock_offset_ns);
        let (id, started, written) = match stamp {
            Stamp::C1m {
                id,
                started_unix_ns,
                written_unix_ns,
            } => (id, started_unix_ns, written_unix_ns),
            Stamp::At(at) => (self.mark.0, self.mark.1, at),
        };
        // No trigger: the push is known by its stamp alone.
        let known_from = if started > 0 { started } else { written };
        self.c.pushes_received += 1;
        self.hists
            .record(stats::PUSH_MESSAGE, now.saturating_sub(written) / 1000);
        if started > 0 {
            self.hists
                .record(stats::PUSH_FANOUT, now.saturating_sub(started) / 1000);
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

/// Monotonic ns at which the pace scheduled the connect of global index `g` (None: unpaced).
fn scheduled(cfg: &ClientShardConfig, t0_mono: u64, g: u64) -> Option<u64> {
    let k = g.saturating_sub(cfg.first) / cfg.stride.max(1);
    pace::scheduled_ns(cfg.rate, k).map(|at| t0_mono.saturating_add(at))
}

/// The Sec-WebSocket-Key of connection `g`: derived, not stored.
fn ws_key(seed: u64, g: u64) -> String {
    let a = splitmix64(seed ^ g);
    let b = splitmix64(a ^ 0x5eed);
    let mut n = [0u8; 16];
    n[..8].copy_from_slice(&a.to_le_bytes());
    n[8..].copy_from_slice(&b.to_le_bytes());
    handshake::key_from_nonce(n)
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
    fn keys_are_valid_and_distinct() {
        let (k1, k2) = (ws_key(7, 1), ws_key(7, 2));
        assert_ne!(k1, k2);
        let req = handshake::request("h", "/", &k1);
        assert!(handshake::parse_request(&req).unwrap().is_some());
    }
}
