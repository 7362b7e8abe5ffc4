//! The server shard: SO_REUSEPORT listeners on every port, a slab of accepted connections,
//! and the hold / echo / WebSocket behaviour, including the broadcast push.
//!
//! What a connection's input means and the frames a server writes are in `proto`, the
//! warnings in `warnings`: the tokio engine's server shares both.

mod beat;
mod messages;
pub mod proto;
pub(crate) mod warnings;

use std::{
    collections::VecDeque,
    os::fd::{AsFd, OwnedFd},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use anyhow::{Context, Result};
use rustix::io::Errno;

use self::{
    proto::{Action, WsState, going_away, peer_eof, push_frame, stamp_push, ws_input_beat},
    warnings::{cap_warning, emfile_warning, goodbye_unanswered, listen_error, push_ignored},
};
use super::{
    COMMAND_TOKEN, LISTENER_BASE, READ_BUF, ShardIo, Sink, Slab, Spill,
    client::proto::{CLOSE_STALL_NS, CloseWatch},
    closed_by, failure_of, flush, interest, joined, keep_input, read_len, rearm, send_before_close,
    send_sealed, send_sealed_before_close,
    shard_loop::{self, Engine, Extra, Reporter},
    shrink, take_input, tls_read,
};
use crate::workload::{
    config::{Mode, ServerShardConfig, ShardCommand},
    heartbeat::{self, Sweep},
    messages::Sweep as MessageSweep,
    sockopt,
    stats::counters::Counters,
    sys::{self, EPOLLERR, EPOLLHUP, EPOLLIN, EPOLLOUT, Epoll},
    tls::session::TlsConn,
    ws::{Decoder, Role},
};

/// Accepts per listener event: bounded so one busy port cannot starve the others or the
/// connections already open; the level-triggered listener fires again if more wait.
pub(crate) const ACCEPT_BURST: usize = 256;

/// Connections written per push step before the loop turns (reads, commands, timers) and
/// yields the CPU. A trade of fan-out time against per-message latency, measured at 1M
/// (the `push` bench scenario, two interleaved pairs each, last frame / per-message p99): 64 per
/// step 9.91, 10.24 s / 55, 69 ms; 256: 9.51, 10.13 s / 111 ms; 1024: 9.20, 9.65 s /
/// 200, 183 ms. Minimal C writers (no yield at all) took 9.53 s / 224–235 ms in the same
/// hour: 1024 is the smallest step that keeps the fan-out within 10% of them, and its
/// p99 stays below theirs. `--push-writers` trades back for sub-ms latency.
pub(crate) const PUSH_CHUNK: usize = 1024;

/// After EMFILE, leave the listener alone this long instead of spinning on a connection we
/// cannot take.
pub(crate) const EMFILE_PAUSE_MS: u64 = 100;

/// A shard that closed its listeners at its cap reopens them below this fill: the
/// hysteresis keeps it from flapping in and out of the reuseport groups.
pub(crate) const REOPEN_FILL: f64 = 0.9;

/// Goodbyes a shard has out at once at a server teardown, each waiting for its peer's end
/// of the stream. Measured at 1M over the bridge (56 server shards, 60 client processes):
/// all at once held a close frame in every socket on both sides past `tcp_mem` (762,541
/// `sock_exceed_buf_limit`, 50,784 client tail-loss probes, teardown past 180 s); 1024 a
/// shard left shards waiting > 5 s for one answer, so they gave up and closed at once
/// (460,452 resets, teardown 119 s); 64: 0 server resets, 7 client retransmits, teardown
/// 137 s (closing at once: 56 s and 701,155 resets).
pub(crate) const GOODBYE_WINDOW: u64 = 64;

struct Conn {
    fd: OwnedFd,
    ws: WsState,
    /// `--heartbeat`: when the outstanding ping was sent (monotonic ns), 0 for none.
    ping_ns: u64,
    /// `--message-rate`: messages sent on this connection (the next one's sequence).
    msg_seq: u32,
    spill: Option<Box<Spill>>,
    /// With `--tls`: the session (keys and record state; the buffers are the shard's).
    tls: Option<Box<TlsConn>>,
}

impl Conn {
    fn tls_handshaking(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.handshaking())
    }
}

struct PushJob {
    id: u64,
    started_unix_ns: u64,
    next_slot: usize,
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
    /// TLS: the plaintext of one read, and the records to send (the shard's, reused).
    plain: Vec<u8>,
    wire: Vec<u8>,
    tls: Option<Arc<rustls::ServerConfig>>,
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
    /// Server teardown: connections still to say goodbye to (popped from the end: oldest
    /// first), how many wait in [`WsState::Closing`], whether they still wait (not once the
    /// teardown stalled), and the watch that tells.
    to_goodbye: Vec<u64>,
    goodbyes_waiting: u64,
    goodbye_waits: bool,
    goodbye_watch: CloseWatch,
    rep: Reporter,
    warned_emfile: bool,
    /// `--heartbeat` (ws mode): the walk over the slots and its next step.
    beat: Option<Sweep>,
    next_beat: u64,
    /// `--message-rate` (ws mode): the walk over the slots, its next step, and the
    /// scratch a message's payload is built in.
    msgs: Option<MessageSweep>,
    next_msg: u64,
    msg_scratch: Vec<u8>,
}

/// Runs one server shard until `Stop` (or its supervisor goes away).
pub(crate) fn run(
    cfg: ServerShardConfig,
    mut io: ShardIo,
    open_in_process: Arc<AtomicU64>,
) -> Result<()> {
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
        ep.add(fd.as_fd(), EPOLLIN, LISTENER_BASE + i as u64)
            .context("epoll_ctl listener")?;
        listeners.push(fd);
    }
    ep.add(io.commands.fd(), EPOLLIN, COMMAND_TOKEN)
        .context("epoll_ctl command source")?;
    let tls = match cfg.tls.as_ref().map(|t| t.config()).transpose() {
        Ok(t) => t,
        Err(e) => {
            let msg = format!("server shard {}: {e}", cfg.shard);
            rep.fatal(&mut io.sink, msg.clone());
            anyhow::bail!(msg);
        }
    };
    let mut s = Shard {
        dec: Decoder::new(Role::Server, cfg.max_message),
        conns: Slab::with_capacity(cfg.cap as usize),
        paused: vec![None; listeners.len()],
        listeners,
        buf: vec![0; READ_BUF],
        out: Vec::new(),
        plain: Vec::new(),
        wire: Vec::new(),
        tls,
        c: Counters::default(),
        open_in_process,
        push: None,
        push_done: None,
        handshakes: VecDeque::new(),
        to_goodbye: Vec::new(),
        goodbyes_waiting: 0,
        goodbye_waits: true,
        goodbye_watch: CloseWatch::default(),
        rep,
        warned_emfile: false,
        beat: cfg
            .heartbeat
            .filter(|_| cfg.mode == Mode::Ws)
            .map(|h| Sweep::new(&h, sys::monotonic_ns(), cfg.shard)),
        next_beat: 0,
        msgs: cfg
            .messages
            .filter(|_| cfg.mode == Mode::Ws)
            .map(|m| MessageSweep::new(&m, sys::monotonic_ns(), cfg.shard)),
        next_msg: 0,
        msg_scratch: Vec::new(),
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
            let mut deadline = next_tick;
            if self.beat.is_some() {
                deadline = deadline.min(self.next_beat);
            }
            if self.msgs.is_some() {
                deadline = deadline.min(self.next_msg);
            }
            sys::ms_until(sys::monotonic_ns(), deadline)
        }
    }

    fn after_events(&mut self, ep: &Epoll) {
        // A goodbye ended in this batch: the next ones may go.
        if !self.to_goodbye.is_empty() && self.goodbyes_waiting < GOODBYE_WINDOW {
            self.goodbye_more(ep);
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
            ShardCommand::Close => self.say_goodbye(ep),
            ShardCommand::Start { .. }
            | ShardCommand::Mark { .. }
            | ShardCommand::Churn { .. }
            | ShardCommand::Heartbeat { .. }
            | ShardCommand::Messages { .. }
            | ShardCommand::Stop => {}
        }
        Ok(())
    }

    fn tick(&mut self, ep: &Epoll) -> bool {
        self.sweep_handshakes();
        self.goodbyes_stalled(ep);
        self.resume_listeners(ep);
        false
    }

    fn turn_end(&mut self, ep: &Epoll, now: u64, sink: &mut Sink) -> Result<()> {
        if self.beat.is_some() && now >= self.next_beat {
            self.heartbeat(ep, now);
        }
        if self.msgs.is_some() && now >= self.next_msg {
            self.messages(ep, now);
        }
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
    /// Writes [`Shard::out`] on `tok`; an error closes it (cause counted).
    fn send_out(&mut self, ep: &Epoll, tok: u64) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        let before = interest(&conn.spill);
        let r = send_sealed(
            conn.fd.as_fd(),
            conn.tls.as_deref_mut(),
            &mut self.wire,
            &mut conn.spill,
            &self.out,
            &mut self.c.bytes_out,
        )
        .and_then(|_| rearm(ep, &conn.fd, tok, before, &conn.spill));
        if let Err(e) = r {
            closed_by(&e, &mut self.c.closed);
            self.close(tok);
        }
    }

    fn warn(&mut self, msg: String) {
        self.rep.warnings.push(msg);
    }

    fn accept_burst(&mut self, ep: &Epoll, li: usize) {
        for _ in 0..ACCEPT_BURST {
            // Looked up each turn: an accept at the cap closes every listener.
            let Some(lfd) = self.listeners.get(li) else {
                return;
            };
            match sys::accept(lfd.as_fd()) {
                Ok(fd) => self.on_accept(ep, fd),
                Err(e) if sys::would_block(&e) => return,
                Err(e) if matches!(sys::errno(&e), Some(Errno::CONNABORTED | Errno::INTR)) => {
                    continue;
                }
                Err(e) => {
                    failure_of(&e, &mut self.c.failures);
                    if matches!(sys::errno(&e), Some(Errno::MFILE | Errno::NFILE)) {
                        let _ = ep.modify(lfd.as_fd(), 0, LISTENER_BASE + li as u64);
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
                .add(fd.as_fd(), EPOLLIN, LISTENER_BASE + i as u64)
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
                let _ = ep.modify(self.listeners[i].as_fd(), EPOLLIN, LISTENER_BASE + i as u64);
            }
        }
    }

    fn on_accept(&mut self, ep: &Epoll, fd: OwnedFd) {
        if self.open_in_process.load(Ordering::Relaxed) >= self.cfg.cap {
            // Refuse loudly (RST) rather than hold a connection past the fd budget, where the
            // next accept would fail with EMFILE and leave clients hanging in the queue.
            let _ = sockopt::set_linger_zero(fd.as_fd());
            self.c.failures.over_capacity += 1;
            self.close_listeners();
            return;
        }
        if self.cfg.mode != Mode::Hold {
            let _ = sockopt::set_nodelay(fd.as_fd());
        }
        let ws = if self.cfg.mode == Mode::Ws {
            WsState::Handshake
        } else {
            WsState::Raw
        };
        let tls = match self.tls.as_ref().map(TlsConn::server).transpose() {
            Ok(t) => t.map(Box::new),
            Err(e) => {
                self.warn(format!("TLS session: {e}"));
                self.c.failures.other += 1;
                return;
            }
        };
        let timed = ws == WsState::Handshake || tls.is_some();
        let (tok, conn) = self.conns.insert_get(Conn {
            fd,
            ws,
            ping_ns: 0,
            msg_seq: 0,
            spill: None,
            tls,
        });
        if let Err(e) = ep.add(conn.fd.as_fd(), EPOLLIN, tok) {
            self.conns.remove(tok);
            failure_of(&e, &mut self.c.failures);
            return;
        }
        self.c.accepted += 1;
        self.c.open += 1;
        self.open_in_process.fetch_add(1, Ordering::Relaxed);
        if timed && self.cfg.handshake_timeout_ms > 0 {
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
            let Some(conn) = self.conns.get_mut(tok) else {
                continue;
            };
            if conn.tls_handshaking() {
                // Slowloris inside TLS: counted as a TLS failure by its reason.
                if self.close(tok) {
                    self.c.closed.tls += 1;
                    self.c.tls_errors.timeout += 1;
                }
            } else if conn.ws == WsState::Handshake && self.close(tok) {
                self.c.closed.handshake_timeout += 1;
            }
        }
        if self.handshakes.is_empty() && self.handshakes.capacity() > 1024 {
            // The ramp is over: give back what it needed.
            self.handshakes.shrink_to_fit();
        }
    }

    /// Teardown by the server (clients on other hosts): each connection past its
    /// handshake gets the goodbye (close frame on a WebSocket, close_notify under TLS) and
    /// the FIN in one segment, and stays readable until the peer ends its side,
    /// [`GOODBYE_WINDOW`] at a time; the rest close now.
    fn say_goodbye(&mut self, ep: &Epoll) {
        self.to_goodbye.clear();
        for tok in self.conns.tokens_from(0, usize::MAX).0 {
            let Some(conn) = self.conns.get_mut(tok) else {
                continue;
            };
            match conn.ws {
                WsState::Closing => {}
                WsState::Handshake => self.close_local(tok),
                _ if conn.tls_handshaking() => self.close_local(tok),
                _ => self.to_goodbye.push(tok),
            }
        }
        self.to_goodbye.reverse();
        let left = self.goodbyes_waiting + self.to_goodbye.len() as u64;
        self.goodbye_watch = CloseWatch::new(left, sys::monotonic_ns());
        if let Some(job) = self.push.take() {
            self.push_done = Some(job.id);
        }
        self.goodbye_more(ep);
    }

    /// Says goodbye while fewer than [`GOODBYE_WINDOW`] wait (to all of the rest, closing
    /// at once, once the teardown stalled).
    fn goodbye_more(&mut self, ep: &Epoll) {
        while !self.goodbye_waits || self.goodbyes_waiting < GOODBYE_WINDOW {
            let Some(tok) = self.to_goodbye.pop() else {
                return;
            };
            self.goodbye(ep, tok);
        }
    }

    fn goodbye(&mut self, ep: &Epoll, tok: u64) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        heartbeat::ended(&mut self.c.heartbeat, &mut conn.ping_ns);
        let open = conn.ws == WsState::Open;
        if open {
            self.c.ws_open -= 1;
        }
        if open || conn.tls.is_some() {
            let bye = going_away();
            send_sealed_before_close(
                conn.fd.as_fd(),
                conn.tls.as_deref_mut(),
                &mut self.wire,
                &conn.spill,
                if open { &bye } else { &[] },
                &mut self.c.bytes_out,
            );
        }
        conn.ws = WsState::Closing;
        // Output still queued is given up, as a close would: only the peer's end of the
        // stream is awaited now.
        conn.spill = None;
        let waits = self.goodbye_waits
            && sys::shutdown_write(conn.fd.as_fd())
                .and_then(|()| ep.modify(conn.fd.as_fd(), EPOLLIN, tok))
                .is_ok();
        if waits {
            self.goodbyes_waiting += 1;
        } else {
            self.close_local(tok);
        }
    }

    /// A connection the server said goodbye to is readable: the peer's close reply (read
    /// and dropped) or its end of the stream, which ends the connection.
    fn goodbye_input(&mut self, tok: u64) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        loop {
            match sys::read(conn.fd.as_fd(), &mut self.buf) {
                Ok(0) => break,
                Ok(n) => self.c.bytes_in += n as u64,
                Err(e) if sys::would_block(&e) => return,
                Err(_) => break,
            }
        }
        self.goodbyes_waiting -= 1;
        self.close_local(tok);
    }

    /// Closes the goodbyes still waiting, and the rest right after theirs, once no peer
    /// ended its side for [`CLOSE_STALL_NS`] (peers gone, or not reading).
    fn goodbyes_stalled(&mut self, ep: &Epoll) {
        let left = self.goodbyes_waiting + self.to_goodbye.len() as u64;
        if !self.goodbye_waits || !self.goodbye_watch.stalled(left, sys::monotonic_ns()) {
            return;
        }
        self.warn(goodbye_unanswered(self.goodbyes_waiting, CLOSE_STALL_NS));
        self.goodbye_waits = false;
        for tok in self.conns.tokens_from(0, usize::MAX).0 {
            if self
                .conns
                .get_mut(tok)
                .is_some_and(|c| c.ws == WsState::Closing)
                && self.close(tok)
            {
                self.c.closed.goodbye_unanswered += 1;
            }
        }
        self.goodbyes_waiting = 0;
        self.goodbye_more(ep);
    }

    /// Closes a connection this end ended.
    fn close_local(&mut self, tok: u64) {
        if self.close(tok) {
            self.c.closed.local_close += 1;
        }
    }

    /// Removes a connection (closing its fd, which also drops it from the epoll set).
    fn close(&mut self, tok: u64) -> bool {
        let Some(mut conn) = self.conns.remove(tok) else {
            return false;
        };
        heartbeat::ended(&mut self.c.heartbeat, &mut conn.ping_ns);
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
        for mut conn in self.conns.drain() {
            heartbeat::ended(&mut self.c.heartbeat, &mut conn.ping_ns);
            let open = conn.ws == WsState::Open;
            if open {
                self.c.ws_open -= 1;
            }
            // Best effort: the socket is closed right after. Under TLS the close_notify
            // goes too (after the close frame on a WebSocket).
            if open || conn.tls.is_some() {
                send_sealed_before_close(
                    conn.fd.as_fd(),
                    conn.tls.as_deref_mut(),
                    &mut self.wire,
                    &conn.spill,
                    if open { &goodbye } else { &[] },
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
        if conn.ws == WsState::Closing {
            self.goodbye_input(tok);
            return;
        }
        let before = interest(&conn.spill);
        if before == EPOLLOUT {
            // Only writing while output is queued (backpressure): flush, then resume reading.
            match flush(conn.fd.as_fd(), &mut conn.spill, &mut self.c.bytes_out) {
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
        let fd = conn.fd.as_fd();
        let n = match sys::read(fd, &mut self.buf[..read_len(conn.tls.is_some())]) {
            Ok(0) if conn.tls_handshaking() => {
                self.c.closed.tls += 1;
                self.c.tls_errors.truncated += 1;
                self.close(tok);
                return;
            }
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
                if conn.tls_handshaking() {
                    self.c.closed.tls += 1;
                    self.c.tls_errors.truncated += 1;
                } else {
                    closed_by(&e, &mut self.c.closed);
                }
                self.close(tok);
                return;
            }
        };
        self.c.bytes_in += n as u64;
        let n = match conn.tls.as_deref_mut() {
            None => n,
            Some(t) => {
                self.wire.clear();
                let r = tls_read(
                    t,
                    &mut conn.spill,
                    &mut self.buf,
                    n,
                    &mut self.plain,
                    &mut self.wire,
                );
                // Handshake records and alerts first, before any answer to the plaintext.
                let sent = if self.wire.is_empty() {
                    Ok(())
                } else if r.is_err() {
                    send_before_close(fd, &conn.spill, &self.wire, &mut self.c.bytes_out);
                    Ok(())
                } else {
                    super::send(fd, &mut conn.spill, &self.wire, &mut self.c.bytes_out).map(drop)
                };
                match (r, sent) {
                    (Err(e), _) => {
                        e.count(&mut self.c.tls_errors);
                        self.c.closed.tls += 1;
                        self.close(tok);
                        return;
                    }
                    (Ok(_), Err(e)) => {
                        closed_by(&e, &mut self.c.closed);
                        self.close(tok);
                        return;
                    }
                    (Ok((m, input)), Ok(())) => {
                        input.count(&mut self.c.tls_handshakes);
                        if m == 0 {
                            if let Err(e) = rearm(ep, &conn.fd, tok, before, &conn.spill) {
                                closed_by(&e, &mut self.c.closed);
                                self.close(tok);
                            }
                            return;
                        }
                        m
                    }
                }
            }
        };
        let result = match self.cfg.mode {
            Mode::Hold => Ok(Action::Continue),
            Mode::Echo => {
                self.c.echo_round_trips += 1;
                send_sealed(
                    fd,
                    conn.tls.as_deref_mut(),
                    &mut self.wire,
                    &mut conn.spill,
                    &self.buf[..n],
                    &mut self.c.bytes_out,
                )
                .map(|_| Action::Continue)
            }
            Mode::Ws => {
                let mut spill = conn.spill.take();
                let (mut inbuf, mut frag) = take_input(&mut spill);
                let data = joined(&mut inbuf, &mut self.buf[..n]);
                self.out.clear();
                let beat = self.cfg.heartbeat;
                let (used, action) = ws_input_beat(
                    &self.dec,
                    &mut conn.ws,
                    data,
                    &mut frag,
                    &mut self.out,
                    &mut self.c,
                    beat.as_ref().map(|h| (h, &mut conn.ping_ns)),
                );
                if used < data.len() || frag.is_some() {
                    keep_input(&mut spill, inbuf, &self.buf[..n], used, frag);
                }
                let sent = if self.out.is_empty() {
                    Ok(())
                } else if action == Action::Continue {
                    send_sealed(
                        fd,
                        conn.tls.as_deref_mut(),
                        &mut self.wire,
                        &mut spill,
                        &self.out,
                        &mut self.c.bytes_out,
                    )
                    .map(drop)
                } else {
                    // The close reply is the last write: with the FIN in one segment, as
                    // the server's own goodbye (a lone reply and FIN arm a tail-loss probe).
                    send_sealed_before_close(
                        fd,
                        conn.tls.as_deref_mut(),
                        &mut self.wire,
                        &spill,
                        &self.out,
                        &mut self.c.bytes_out,
                    );
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
        self.rep.push_started(id, started_unix_ns);
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
            let r = send_sealed(
                conn.fd.as_fd(),
                conn.tls.as_deref_mut(),
                &mut self.wire,
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
        self.c.pushes_sent += written;
        self.rep.push_written(id, started, written, first, lastw);
    }
}
