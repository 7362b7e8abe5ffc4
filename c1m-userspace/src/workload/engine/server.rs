//! The server shard: SO_REUSEPORT listeners on every port, a slab of accepted connections,
//! and the hold / echo / WebSocket behaviour, including the broadcast push.

use std::{
    collections::VecDeque,
    mem,
    os::fd::{AsRawFd, OwnedFd},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use anyhow::{Context, Result};

use super::{
    COMMAND_TOKEN, LISTENER_BASE, READ_BUF, ShardIo, Sink, Slab, Spill, closed_by, failure_of,
    flush, interest, rearm, send, send_before_close,
    shard_loop::{self, Engine, Extra, Reporter},
    shrink,
};
use crate::workload::{
    config::{Mode, ServerShardConfig, ShardCommand},
    sockopt,
    stats::{counters::Counters, report::PushStat},
    sys::{self, EPOLLERR, EPOLLHUP, EPOLLIN, EPOLLOUT, Epoll},
    ws::{self, Decoder, Event, Fragment, Opcode, Role, frame::encode_frame, handshake},
};

/// Accepts per listener event: bounded so one busy port cannot starve the others or the
/// connections already open; the level-triggered listener fires again if more wait.
pub const ACCEPT_BURST: usize = 256;

/// Connections written per push step before the loop turns (reads, commands, timers) and
/// yields the CPU. A trade of fan-out time against per-message latency, measured at 1M
/// (`c1m bench push`, two interleaved pairs each, last frame / per-message p99): 64 per
/// step 9.91, 10.24 s / 55, 69 ms; 256: 9.51, 10.13 s / 111 ms; 1024: 9.20, 9.65 s /
/// 200, 183 ms. Minimal C writers (no yield at all) took 9.53 s / 224–235 ms in the same
/// hour: 1024 is the smallest step that keeps the fan-out within 10% of them, and its
/// p99 stays below theirs. `--push-writers` trades back for sub-ms latency.
pub const PUSH_CHUNK: usize = 1024;

/// After EMFILE, leave the listener alone this long instead of spinning on a connection we
/// cannot take.
pub const EMFILE_PAUSE_MS: u64 = 100;

/// A shard that closed its listeners at its cap reopens them below this fill: the
/// hysteresis keeps it from flapping in and out of the reuseport groups.
pub const REOPEN_FILL: f64 = 0.9;

/// Push frame payload: push id, broadcast start, write time (CLOCK_REALTIME ns), all u64 BE.
pub const PUSH_PAYLOAD: usize = 24;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WsState {
    /// Not WebSocket (hold/echo).
    Raw,
    Handshake,
    Open,
}

struct Conn {
    fd: OwnedFd,
    ws: WsState,
    spill: Option<Box<Spill>>,
}

struct PushJob {
    id: u64,
    started_unix_ns: u64,
    next_slot: usize,
}

/// What a connection's input asks of the engine.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    Continue,
    /// Close after writing the output: the peer closed (WebSocket close handshake).
    ClosePeer,
    /// Close after writing the output: protocol violation (already counted).
    CloseProtocol,
}

struct Shard {
    cfg: ServerShardConfig,
    conns: Slab<Conn>,
    /// Empty while the shard is full (see [`Shard::close_listeners`]).
    listeners: Vec<OwnedFd>,
    /// Listeners paused after EMFILE, and when they resume (monotonic ns).
    paused: Vec<Option<u64>>,
    buf: Vec<u8>,
    out: Vec<u8>,
    c: Counters,
    dec: Decoder,
    open_in_process: Arc<AtomicU64>,
    push: Option<PushJob>,
    /// A push finished since the last report.
    push_done: Option<u64>,
    /// WebSocket connections in accept order with their handshake deadlines (monotonic
    /// ns): one deadline for all, so the front is always the next to expire and the sweep
    /// never scans connections that finished their handshake long ago.
    handshakes: VecDeque<(u64, u64)>,
    rep: Reporter,
    warned_emfile: bool,
}

/// Runs one server shard until `Stop` (or its supervisor goes away).
pub fn run(cfg: ServerShardConfig, mut io: ShardIo, open_in_process: Arc<AtomicU64>) -> Result<()> {
    let ep = Epoll::new().context("epoll_create1")?;
    let rep = Reporter::new(cfg.shard);
    let mut listeners = Vec::with_capacity(cfg.listen.len());
    for (i, addr) in cfg.listen.iter().enumerate() {
        let fd = match sockopt::listener(addr, cfg.backlog) {
            Ok(fd) => fd,
            Err(e) => {
                let msg = listen_error(addr, &e);
                rep.fatal(&mut io.sink, msg.clone());
                anyhow::bail!(msg);
            }
        };
        ep.add(fd.as_raw_fd(), EPOLLIN, LISTENER_BASE + i as u64)
            .context("epoll_ctl listener")?;
        listeners.push(fd);
    }
    ep.add(io.commands.fd(), EPOLLIN, COMMAND_TOKEN)
        .context("epoll_ctl command source")?;
    let mut s = Shard {
        dec: Decoder::new(Role::Server, cfg.max_message),
        conns: Slab::with_capacity(cfg.cap as usize),
        paused: vec![None; listeners.len()],
        listeners,
        buf: vec![0; READ_BUF],
        out: Vec::new(),
        c: Counters::default(),
        open_in_process,
        push: None,
        push_done: None,
        handshakes: VecDeque::new(),
        rep,
        warned_emfile: false,
        cfg,
    };
    shard_loop::run(&mut s, &ep, &mut io)
}

impl Engine for Shard {
    fn wait_ms(&mut self, next_tick: u64) -> i32 {
        // While a push is under way the loop never sleeps: it alternates event batches
        // with push chunks.
        if self.push.is_some() {
            0
        } else {
            sys::ms_until(sys::monotonic_ns(), next_tick)
        }
    }

    #[inline]
    fn event(&mut self, ep: &Epoll, tok: u64, ev: u32) {
        if tok >= LISTENER_BASE {
            self.accept_burst(ep, (tok - LISTENER_BASE) as usize);
        } else {
            self.conn_event(ep, tok, ev);
        }
    }

    fn command(&mut self, ep: &Epoll, c: ShardCommand, _sink: &mut Sink) -> Result<()> {
        match c {
            ShardCommand::Push {
                id,
                started_unix_ns,
            } => self.start_push(id, started_unix_ns),
            ShardCommand::Close => self.close_all(ep),
            ShardCommand::Start { .. } | ShardCommand::Mark { .. } | ShardCommand::Stop => {}
        }
        Ok(())
    }

    fn tick(&mut self, ep: &Epoll) -> bool {
        self.sweep_handshakes();
        self.resume_listeners(ep);
        false
    }

    fn turn_end(&mut self, ep: &Epoll, _now: u64, sink: &mut Sink) -> Result<()> {
        if let Some(id) = self.push.as_ref().map(|j| j.id) {
            self.push_step(ep);
            if self.push.is_none() {
                self.push_done = Some(id);
                self.report(sink, true, false)?;
            }
            // Hand the CPU to the readers between chunks (sched_yield): with dozens of
            // writer and reader processes on two cores, frames otherwise wait in socket
            // buffers until the writers' slices end. Measured, 200k connections: fan-out
            // 2.15 s → 1.69 s, per-message p99 70 ms → 9.8 ms.
            std::thread::yield_now();
        }
        Ok(())
    }

    fn close_all(&mut self, ep: &Epoll) {
        Shard::close_all(self, ep);
    }

    fn report(&mut self, sink: &mut Sink, force: bool, closed_all: bool) -> Result<()> {
        let x = Extra {
            push_done: self.push_done.take(),
            ..Default::default()
        };
        self.rep.send(sink, &self.c, x, force, closed_all)
    }
}

impl Shard {
    fn warn(&mut self, msg: String) {
        self.rep.warnings.push(msg);
    }

    fn accept_burst(&mut self, ep: &Epoll, li: usize) {
        let Some(lfd) = self.listeners.get(li).map(|l| l.as_raw_fd()) else {
            return;
        };
        for _ in 0..ACCEPT_BURST {
            match sys::accept(lfd) {
                Ok(fd) => {
                    self.on_accept(ep, fd);
                    if self.listeners.is_empty() {
                        return; // closed at the cap: lfd is gone
                    }
                }
                Err(e) if sys::would_block(&e) => return,
                Err(e) if matches!(sys::errno(&e), libc::ECONNABORTED | libc::EINTR) => continue,
                Err(e) => {
                    failure_of(&e, &mut self.c.failures);
                    if matches!(sys::errno(&e), libc::EMFILE | libc::ENFILE) {
                        let _ = ep.modify(lfd, 0, LISTENER_BASE + li as u64);
                        self.paused[li] = Some(sys::monotonic_ns() + EMFILE_PAUSE_MS * 1_000_000);
                        if !self.warned_emfile {
                            self.warned_emfile = true;
                            let conns = self.open_in_process.load(Ordering::Relaxed);
                            self.warn(emfile_warning(&e, conns, self.cfg.cap));
                        }
                    }
                    return;
                }
            }
        }
    }

    /// At the fd cap: close every listener, so the kernel drops this shard from each port's
    /// SO_REUSEPORT group and sends new connections to the shards with room, instead of this
    /// one rejecting them. Connections already queued here are reset by the close (counted
    /// by the clients). They reopen below [`REOPEN_FILL`] of the cap.
    fn close_listeners(&mut self) {
        if self.listeners.is_empty() {
            return;
        }
        self.listeners.clear();
        self.paused.clear();
        self.warn(cap_warning(self.cfg.shard, self.cfg.cap));
    }

    fn reopen_listeners(&mut self, ep: &Epoll) {
        let open = self.open_in_process.load(Ordering::Relaxed);
        if !self.listeners.is_empty() || (open as f64) >= REOPEN_FILL * self.cfg.cap as f64 {
            return;
        }
        let mut fresh = Vec::with_capacity(self.cfg.listen.len());
        for (i, addr) in self.cfg.listen.iter().enumerate() {
            let fd = match sockopt::listener(addr, self.cfg.backlog) {
                Ok(fd) => fd,
                Err(_) => return, // retried at the next tick
            };
            if ep
                .add(fd.as_raw_fd(), EPOLLIN, LISTENER_BASE + i as u64)
                .is_err()
            {
                return;
            }
            fresh.push(fd);
        }
        self.paused = vec![None; fresh.len()];
        self.listeners = fresh;
    }

    fn resume_listeners(&mut self, ep: &Epoll) {
        self.reopen_listeners(ep);
        let now = sys::monotonic_ns();
        for (i, p) in self.paused.iter_mut().enumerate() {
            if p.is_some_and(|t| now >= t) {
                *p = None;
                let _ = ep.modify(
                    self.listeners[i].as_raw_fd(),
                    EPOLLIN,
                    LISTENER_BASE + i as u64,
                );
            }
        }
    }

    fn on_accept(&mut self, ep: &Epoll, fd: OwnedFd) {
        if self.open_in_process.load(Ordering::Relaxed) >= self.cfg.cap {
            // Refuse loudly (RST) rather than hold a connection past the fd budget, where the
            // next accept would fail with EMFILE and leave clients hanging in the queue.
            let _ = sockopt::set_linger_zero(fd.as_raw_fd());
            self.c.failures.over_capacity += 1;
            self.close_listeners();
            return;
        }
        if self.cfg.mode != Mode::Hold {
            let _ = sockopt::set_nodelay(fd.as_raw_fd());
        }
        let ws = if self.cfg.mode == Mode::Ws {
            WsState::Handshake
        } else {
            WsState::Raw
        };
        let raw = fd.as_raw_fd();
        let tok = self.conns.insert(Conn {
            fd,
            ws,
            spill: None,
        });
        if let Err(e) = ep.add(raw, EPOLLIN, tok) {
            self.conns.remove(tok);
            failure_of(&e, &mut self.c.failures);
            return;
        }
        self.c.accepted += 1;
        self.c.open += 1;
        self.open_in_process.fetch_add(1, Ordering::Relaxed);
        if ws == WsState::Handshake && self.cfg.handshake_timeout_ms > 0 {
            let deadline = sys::monotonic_ns() + self.cfg.handshake_timeout_ms * 1_000_000;
            self.handshakes.push_back((tok, deadline));
        }
    }

    /// Closes connections whose handshake is overdue.
    fn sweep_handshakes(&mut self) {
        let now = sys::monotonic_ns();
        while let Some(&(tok, deadline)) = self.handshakes.front() {
            if deadline > now {
                break;
            }
            self.handshakes.pop_front();
            let overdue = self
                .conns
                .get_mut(tok)
                .is_some_and(|c| c.ws == WsState::Handshake);
            if overdue && self.close(tok) {
                self.c.closed.handshake_timeout += 1;
            }
        }
        if self.handshakes.is_empty() && self.handshakes.capacity() > 1024 {
            // The ramp is over: give back what it needed.
            self.handshakes.shrink_to_fit();
        }
    }

    /// Removes a connection (closing its fd, which also drops it from the epoll set).
    fn close(&mut self, tok: u64) -> bool {
        let Some(conn) = self.conns.remove(tok) else {
            return false;
        };
        if conn.ws == WsState::Open {
            self.c.ws_open -= 1;
        }
        self.c.open -= 1;
        self.open_in_process.fetch_sub(1, Ordering::Relaxed);
        true
    }

    fn close_all(&mut self, _ep: &Epoll) {
        let n = self.conns.len() as u64;
        let goodbye = going_away();
        for conn in self.conns.drain() {
            if conn.ws == WsState::Open {
                self.c.ws_open -= 1;
                // Best effort: the socket is closed right after.
                send_before_close(
                    conn.fd.as_raw_fd(),
                    &conn.spill,
                    &goodbye,
                    &mut self.c.bytes_out,
                );
            }
        }
        self.c.open -= n;
        self.c.closed.local_close += n;
        self.open_in_process.fetch_sub(n, Ordering::Relaxed);
        // A push cut short is still over: the supervisor may start it elsewhere.
        if let Some(job) = self.push.take() {
            self.push_done = Some(job.id);
        }
    }

    fn conn_event(&mut self, ep: &Epoll, tok: u64, ev: u32) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        let before = interest(&conn.spill);
        if before == EPOLLOUT {
            // Only writing while output is queued (backpressure): flush, then resume reading.
            match flush(conn.fd.as_raw_fd(), &mut conn.spill, &mut self.c.bytes_out) {
                Ok(_) => {
                    if let Err(e) = rearm(ep, &conn.fd, tok, before, &conn.spill) {
                        closed_by(&e, &mut self.c.closed);
                        self.close(tok);
                    }
                }
                Err(e) => {
                    closed_by(&e, &mut self.c.closed);
                    self.close(tok);
                }
            }
            return;
        }
        if ev & (EPOLLIN | EPOLLHUP | EPOLLERR) == 0 {
            return;
        }
        let fd = conn.fd.as_raw_fd();
        let n = match sys::read(fd, &mut self.buf) {
            Ok(0) => {
                let partial = conn
                    .spill
                    .as_ref()
                    .is_some_and(|s| !s.inbuf.is_empty() || s.frag.is_some());
                peer_eof(&mut self.c, self.cfg.mode, conn.ws, partial);
                self.close(tok);
                return;
            }
            Ok(n) => n,
            Err(e) if sys::would_block(&e) => return,
            Err(e) => {
                closed_by(&e, &mut self.c.closed);
                self.close(tok);
                return;
            }
        };
        self.c.bytes_in += n as u64;
        let result = match self.cfg.mode {
            Mode::Hold => Ok(Action::Continue),
            Mode::Echo => {
                self.c.echo_round_trips += 1;
                send(fd, &mut conn.spill, &self.buf[..n], &mut self.c.bytes_out)
                    .map(|_| Action::Continue)
            }
            Mode::Ws => {
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
                self.out.clear();
                let (used, action) = ws_input(
                    &self.dec,
                    &mut conn.ws,
                    data,
                    &mut frag,
                    &mut self.out,
                    &mut self.c,
                );
                let rest = &data[used..];
                if !rest.is_empty() || frag.is_some() {
                    let s = spill.get_or_insert_with(Box::default);
                    if !spilled {
                        s.inbuf.extend_from_slice(rest);
                    } else {
                        inbuf.drain(..used);
                        s.inbuf = inbuf;
                    }
                    s.frag = frag;
                }
                let sent = if self.out.is_empty() {
                    Ok(())
                } else if action == Action::Continue {
                    send(fd, &mut spill, &self.out, &mut self.c.bytes_out).map(drop)
                } else {
                    // The close reply is the last write: with the FIN in one segment, as
                    // the server's own goodbye (a lone reply and FIN arm a tail-loss probe).
                    send_before_close(fd, &spill, &self.out, &mut self.c.bytes_out);
                    Ok(())
                };
                shrink(&mut spill);
                conn.spill = spill;
                sent.map(|()| action)
            }
        };
        match result {
            Ok(Action::Continue) => {
                if let Err(e) = rearm(ep, &conn.fd, tok, before, &conn.spill) {
                    closed_by(&e, &mut self.c.closed);
                    self.close(tok);
                }
            }
            Ok(Action::ClosePeer) => {
                self.c.closed.peer_closed += 1;
                self.close(tok);
            }
            Ok(Action::CloseProtocol) => {
                self.c.closed.protocol += 1;
                self.close(tok);
            }
            Err(e) => {
                closed_by(&e, &mut self.c.closed);
                self.close(tok);
            }
        }
    }

    fn start_push(&mut self, id: u64, started_unix_ns: u64) {
        if self.cfg.mode != Mode::Ws {
            self.warn(push_ignored(id));
            self.push_done = Some(id);
            return;
        }
        self.rep.pushes.insert(
            id,
            PushStat {
                push_id: id,
                started_unix_ns,
                ..Default::default()
            },
        );
        self.rep.dirty_pushes.insert(id);
        self.push = Some(PushJob {
            id,
            started_unix_ns,
            next_slot: 0,
        });
    }

    /// Writes the current push to the next chunk of connections.
    fn push_step(&mut self, ep: &Epoll) {
        let Some(job) = self.push.as_mut() else {
            return;
        };
        let (toks, next) = self.conns.tokens_from(job.next_slot, PUSH_CHUNK);
        job.next_slot = next;
        let (id, started) = (job.id, job.started_unix_ns);
        if next >= self.conns.slot_count() {
            self.push = None;
        }
        let mut frame = push_frame(id, started);
        let mut written = 0u64;
        let mut first = 0u64;
        let mut lastw = 0u64;
        for tok in toks {
            let Some(conn) = self.conns.get_mut(tok) else {
                continue;
            };
            if conn.ws != WsState::Open {
                continue;
            }
            let now = stamp_push(&mut frame);
            let before = interest(&conn.spill);
            let r = send(
                conn.fd.as_raw_fd(),
                &mut conn.spill,
                &frame,
                &mut self.c.bytes_out,
            )
            .and_then(|_| rearm(ep, &conn.fd, tok, before, &conn.spill));
            match r {
                Ok(()) => {
                    written += 1;
                    if first == 0 {
                        first = now;
                    }
                    lastw = now;
                }
                Err(e) => {
                    closed_by(&e, &mut self.c.closed);
                    self.close(tok);
                }
            }
        }
        if written > 0 {
            self.c.pushes_sent += written;
            let p = self.rep.pushes.entry(id).or_insert(PushStat {
                push_id: id,
                started_unix_ns: started,
                ..Default::default()
            });
            p.merge(&PushStat {
                push_id: id,
                started_unix_ns: started,
                count: written,
                first_unix_ns: first,
                last_unix_ns: lastw,
            });
            self.rep.dirty_pushes.insert(id);
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
                    None | Some(Event::Pong(_)) => {}
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
pub fn peer_eof(c: &mut Counters, mode: Mode, ws: WsState, partial: bool) {
    if mode == Mode::Ws && (ws == WsState::Handshake || partial) {
        c.protocol_errors.truncated += 1;
    }
    c.closed.peer_closed += 1;
}

/// A push frame: a binary WebSocket frame whose payload is the push id, the broadcast
/// start and (filled by [`stamp_push`] just before each write) the write time.
pub fn push_frame(id: u64, started_unix_ns: u64) -> [u8; 2 + PUSH_PAYLOAD] {
    let mut frame = [0u8; 2 + PUSH_PAYLOAD];
    frame[0] = 0x80 | Opcode::Binary as u8;
    frame[1] = PUSH_PAYLOAD as u8;
    frame[2..10].copy_from_slice(&id.to_be_bytes());
    frame[10..18].copy_from_slice(&started_unix_ns.to_be_bytes());
    frame
}

/// Stamps a push frame with the write time (CLOCK_REALTIME ns), which it returns.
pub fn stamp_push(frame: &mut [u8; 2 + PUSH_PAYLOAD]) -> u64 {
    let now = sys::realtime_ns();
    frame[18..26].copy_from_slice(&now.to_be_bytes());
    now
}

/// The close frame a server sends when it closes on its own: RFC 6455 §7.4.1, 1001 going
/// away, so clients record a clean close rather than 1006.
pub fn going_away() -> [u8; 4] {
    [0x80 | Opcode::Close as u8, 2, 0x03, 0xE9]
}

pub fn listen_error(addr: &std::net::SocketAddr, e: &std::io::Error) -> String {
    format!("cannot listen on {addr}: {e} (is another program on that port? choose --ports)")
}

pub fn cap_warning(shard: u32, cap: u64) -> String {
    format!(
        "shard {shard} reached its cap of {cap} connections per process: it stopped listening, so \
         SO_REUSEPORT spreads new connections over the other workers (a larger --max-conns \
         gives every worker more room)"
    )
}

pub fn push_ignored(id: u64) -> String {
    format!("push {id} ignored: pushes need --mode ws")
}

/// The warning for an accept that ran out of descriptors, naming what holds them. The
/// cap was sized so that `cap` connections plus the reserves fit RLIMIT_NOFILE: running
/// out below it means descriptors that are not data connections took the room.
pub fn emfile_warning(e: &std::io::Error, conns: u64, cap: u64) -> String {
    if conns < cap {
        format!(
            "accept: {e} with only {conns} of this process's {cap} connection slots in use: descriptors \
             that are not data connections (files, pipes or sockets opened beside them) took the room \
             the connections were sized for; a larger --max-conns or `ulimit -n` would not help"
        )
    } else {
        format!(
            "accept: {e} with {conns} connections open in this process (RLIMIT_NOFILE): start the \
             server with a larger --max-conns so it shards over more workers, or raise `ulimit -n`"
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;
    use crate::workload::ws::frame::{close_payload, decode_header};

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
