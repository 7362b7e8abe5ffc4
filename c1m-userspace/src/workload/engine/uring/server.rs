//! The io_uring server shard: SO_REUSEPORT listeners with accepts armed on each, a
//! slab of accepted connections with a multishot receive each, and the hold / echo /
//! WebSocket behaviour of the epoll shard (`engine::server`), its protocol code shared.
//!
//! A turn: submit what the last turn queued and wait for a completion (or the next
//! deadline) in one `io_uring_enter`, take the commands (before the I/O of the same
//! wait, as the epoll loop), handle every completion, then the timers and a push chunk.
//! Teardown is in `teardown`, the heartbeat, message and push walks in `sweeps`.

mod sweeps;
mod teardown;

use std::{
    collections::{HashMap, VecDeque},
    io,
    os::fd::{AsFd, FromRawFd, OwnedFd},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result};

use super::{
    GEN_MASK, Op, decode,
    outq::{self, OutQ},
    ring::{Completion, Ring},
};
use crate::workload::{
    config::{Mode, ServerShardConfig, ShardCommand},
    engine::{
        READ_BUF, REPORT_EVERY_NS, ShardIo, Sink, Slab, Spill,
        client::proto::CloseWatch,
        closed_by, failure_of, joined, keep_input,
        server::{
            EMFILE_PAUSE_MS, REOPEN_FILL,
            proto::{Action, WsState, peer_eof, ws_input_beat},
            warnings::{cap_warning, emfile_warning, listen_error},
        },
        shard_loop::{Extra, Reporter},
        shrink, take_input,
    },
    heartbeat::Sweep,
    messages::Sweep as MessageSweep,
    sockopt,
    stats::counters::Counters,
    sys,
    ws::{Decoder, Role},
};

/// Accepts armed per listener at once, each one connection. Why not a multishot accept:
/// the kernel runs it over the whole accept queue at once, so a shard near its cap took
/// dozens past it into EMFILE (`tests/workload_faults.rs`, 265 fds); armed accepts are
/// bounded by the room left instead, and 64 per listener keep a turn's accepts batched.
const ACCEPT_DEPTH: u32 = 64;

/// Accepts armed by every uring shard of this process: the cap is the process's, so
/// the room left counts what the other shards may still be handed.
static ACCEPTS_ARMED: AtomicU64 = AtomicU64::new(0);

/// How long the end of a shard waits for the kernel to finish its operations (they are
/// cancelled first; a cancelled receive ends at once).
const QUIESCE: Duration = Duration::from_secs(2);

struct Conn {
    fd: OwnedFd,
    ws: WsState,
    /// `--heartbeat`: when the outstanding ping was sent (monotonic ns), 0 for none.
    ping_ns: u64,
    /// `--message-rate`: messages sent on this connection (the next one's sequence).
    msg_seq: u32,
    /// Input not yet a whole frame or head, and a fragmented message (the epoll
    /// engine's spill; its output fields stay empty here: output is `out`).
    spill: Option<Box<Spill>>,
    /// The send in flight and what waits behind it; `None` while none is in flight.
    out: Option<Box<OutQ>>,
}

struct PushJob {
    id: u64,
    started_unix_ns: u64,
    next_slot: usize,
}

pub(super) struct Shard {
    cfg: ServerShardConfig,
    ring: Ring,
    conns: Slab<Conn>,
    /// Empty while the shard is full (see [`Shard::close_listeners`]).
    listeners: Vec<OwnedFd>,
    /// The listeners' generation: an accept's completion from before a close at the cap
    /// names an older one.
    epoch: u32,
    /// Listeners paused after EMFILE, and when they resume (monotonic ns).
    paused: Vec<Option<u64>>,
    /// Accepts armed per listener of the current generation.
    armed: Vec<u32>,
    /// What one completion received, copied out of its provided buffer (which goes back
    /// to the kernel at once) so the protocol code may unmask it in place.
    buf: Vec<u8>,
    out: Vec<u8>,
    c: Counters,
    dec: Decoder,
    open_in_process: Arc<AtomicU64>,
    push: Option<PushJob>,
    push_done: Option<u64>,
    /// WebSocket connections in accept order with their handshake deadlines.
    handshakes: VecDeque<(u64, u64)>,
    to_goodbye: Vec<u64>,
    goodbyes_waiting: u64,
    goodbye_waits: bool,
    goodbye_watch: CloseWatch,
    rep: Reporter,
    warned_emfile: bool,
    beat: Option<Sweep>,
    next_beat: u64,
    msgs: Option<MessageSweep>,
    next_msg: u64,
    msg_scratch: Vec<u8>,
    /// Sends still in flight on connections already closed, by user data: their bytes
    /// stay until the kernel's completion says it is done with them.
    orphans: HashMap<u64, Box<OutQ>>,
    completions: Vec<Completion>,
}

/// Runs one server shard until `Stop` (or its supervisor goes away).
pub(crate) fn run(
    cfg: ServerShardConfig,
    mut io: ShardIo,
    open_in_process: Arc<AtomicU64>,
) -> Result<()> {
    let rep = Reporter::new(cfg.shard);
    let fatal = |io: &mut ShardIo, msg: String| -> anyhow::Error {
        rep.fatal(&mut io.sink, msg.clone());
        anyhow::anyhow!(msg)
    };
    if cfg.tls.is_some() {
        return Err(fatal(&mut io, NO_TLS.to_string()));
    }
    let mut ring = Ring::new().map_err(|e| fatal(&mut io, e.to_string()))?;
    let mut listeners = Vec::with_capacity(cfg.listen.len());
    for addr in &cfg.listen {
        let fd = listener(&cfg, addr).map_err(|e| fatal(&mut io, listen_error(addr, &e)))?;
        listeners.push(fd);
    }
    ring.poll_in_multi(io.commands.fd(), Op::Command.ud(0))
        .context("io_uring poll on the command source")?;
    let now = sys::monotonic_ns();
    let mut s = Shard {
        dec: Decoder::new(Role::Server, cfg.max_message),
        ring,
        conns: Slab::with_capacity(cfg.cap as usize),
        paused: vec![None; listeners.len()],
        armed: vec![0; listeners.len()],
        listeners,
        epoch: 0,
        buf: vec![0; READ_BUF],
        out: Vec::new(),
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
            .map(|h| Sweep::new(&h, now, cfg.shard)),
        next_beat: 0,
        msgs: cfg
            .messages
            .filter(|_| cfg.mode == Mode::Ws)
            .map(|m| MessageSweep::new(&m, now, cfg.shard)),
        next_msg: 0,
        msg_scratch: Vec::new(),
        orphans: HashMap::new(),
        completions: Vec::new(),
        cfg,
    };
    for i in 0..s.listeners.len() {
        s.arm_accept(i);
    }
    let ran = s.run_loop(&mut io);
    s.close_all();
    if !s.ring.quiesce(Op::Cancel.ud(0), QUIESCE) {
        // The kernel still holds some sends: their bytes must outlive this shard.
        for (_, q) in s.orphans.drain() {
            std::mem::forget(q);
        }
    }
    ran?;
    s.report(&mut io.sink, true, true)
}

/// `--tls` under `--engine uring`, refused by the CLI before any shard starts.
pub(crate) const NO_TLS: &str =
    "--engine uring has no TLS yet: use --engine epoll (or tokio) with --tls";

/// A listener for `addr`; TCP_NODELAY on it is inherited by every accepted socket, which
/// saves the epoll engine's setsockopt per connection.
fn listener(cfg: &ServerShardConfig, addr: &std::net::SocketAddr) -> io::Result<OwnedFd> {
    let fd = sockopt::listener(addr, cfg.backlog)?;
    if cfg.mode != Mode::Hold {
        sockopt::set_nodelay(fd.as_fd())?;
    }
    Ok(fd)
}

/// The user data of listener `i`'s accept in listener generation `epoch`.
fn accept_ud(i: usize, epoch: u32) -> u64 {
    Op::Accept.ud((u64::from(epoch) << 32) | i as u64)
}

impl Shard {
    fn run_loop(&mut self, io: &mut ShardIo) -> Result<()> {
        let mut cmds = Vec::new();
        self.report(&mut io.sink, true, false)?;
        let mut next_tick = sys::monotonic_ns() + REPORT_EVERY_NS;
        // A worker's config line may have arrived with commands behind it: look once.
        let mut commands = true;
        loop {
            let timeout = self.wait(next_tick);
            self.ring
                .submit_and_wait(timeout)
                .context("io_uring_enter")?;
            let mut done = std::mem::take(&mut self.completions);
            done.clear();
            self.ring.completions(&mut done);
            for c in &done {
                if let Some((Op::Command, _, _)) = decode(c.user_data) {
                    commands = true;
                    if !c.more() {
                        self.ring
                            .poll_in_multi(io.commands.fd(), Op::Command.ud(0))
                            .context("io_uring poll on the command source")?;
                    }
                }
            }
            let now = sys::monotonic_ns();
            let tick = now >= next_tick;
            if commands || tick {
                commands = false;
                io.commands.drain(&mut cmds);
                for c in cmds.drain(..) {
                    match c {
                        ShardCommand::Stop => return Ok(()),
                        ShardCommand::Push {
                            id,
                            started_unix_ns,
                        } => self.start_push(id, started_unix_ns),
                        ShardCommand::Close => self.say_goodbye(),
                        ShardCommand::Start { .. }
                        | ShardCommand::Mark { .. }
                        | ShardCommand::Churn { .. }
                        | ShardCommand::Heartbeat { .. }
                        | ShardCommand::Messages { .. } => {}
                    }
                }
            }
            for c in &done {
                self.completion(*c);
            }
            self.completions = done;
            // A goodbye ended in this batch: the next ones may go.
            self.goodbye_more();
            if tick {
                next_tick = now + REPORT_EVERY_NS;
                self.sweep_handshakes();
                self.goodbyes_stalled();
                self.resume_listeners();
                self.report(&mut io.sink, false, false)?;
            }
            self.turn_end(now, &mut io.sink)?;
        }
    }

    /// How long this turn may wait: not at all while a push is under way (the loop
    /// alternates completions with push chunks), else until the next deadline.
    fn wait(&self, next_tick: u64) -> Option<Duration> {
        if self.push.is_some() {
            return None;
        }
        let mut deadline = next_tick;
        if self.beat.is_some() {
            deadline = deadline.min(self.next_beat);
        }
        if self.msgs.is_some() {
            deadline = deadline.min(self.next_msg);
        }
        Some(Duration::from_nanos(
            deadline.saturating_sub(sys::monotonic_ns()),
        ))
    }

    fn report(&mut self, sink: &mut Sink, force: bool, closed_all: bool) -> Result<()> {
        let x = Extra {
            push_done: self.push_done.take(),
            ..Default::default()
        };
        self.rep.send(sink, &self.c, x, force, closed_all)
    }

    fn warn(&mut self, msg: String) {
        self.rep.warnings.push(msg);
    }

    fn completion(&mut self, c: Completion) {
        match decode(c.user_data) {
            Some((Op::Recv, slot, generation)) => self.received(c, slot, generation),
            Some((Op::Send, slot, generation)) => self.sent(c, slot, generation),
            Some((Op::Accept, i, epoch)) => self.accepted(c, i as usize, epoch),
            Some((Op::Command | Op::Cancel, ..)) | None => {
                if let Some(bid) = c.buffer() {
                    self.ring.recycle(bid);
                }
            }
        }
    }

    fn accepted(&mut self, c: Completion, i: usize, epoch: u32) {
        ACCEPTS_ARMED.fetch_sub(1, Ordering::Relaxed);
        let current = epoch == self.epoch & GEN_MASK && i < self.listeners.len();
        if current {
            self.armed[i] = self.armed[i].saturating_sub(1);
        }
        if c.res >= 0 {
            // SAFETY: a successful accept's result is a new descriptor of this process
            // that nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(c.res) };
            self.on_accept(fd);
        }
        let current = current && i < self.listeners.len();
        match -c.res {
            libc::ECANCELED => return,
            e @ (libc::EMFILE | libc::ENFILE) => {
                let err = io::Error::from_raw_os_error(e);
                failure_of(&err, &mut self.c.failures);
                if current {
                    self.paused[i] = Some(sys::monotonic_ns() + EMFILE_PAUSE_MS * 1_000_000);
                }
                if !self.warned_emfile {
                    self.warned_emfile = true;
                    let conns = self.open_in_process.load(Ordering::Relaxed);
                    self.warn(emfile_warning(&err, conns, self.cfg.cap));
                }
                return;
            }
            e if e > 0 && e != libc::ECONNABORTED && e != libc::EINTR => {
                failure_of(&io::Error::from_raw_os_error(e), &mut self.c.failures);
            }
            _ => {}
        }
        if current {
            self.arm_accept(i);
        }
    }

    /// Arms listener `i`'s accepts up to [`ACCEPT_DEPTH`], while this process has room
    /// for every connection they may bring.
    fn arm_accept(&mut self, i: usize) {
        let ud = accept_ud(i, self.epoch);
        while self.paused.get(i).is_some_and(Option::is_none)
            && self.armed.get(i).is_some_and(|&a| a < ACCEPT_DEPTH)
        {
            let open = self.open_in_process.load(Ordering::Relaxed);
            if open + ACCEPTS_ARMED.load(Ordering::Relaxed) >= self.cfg.cap {
                return;
            }
            let Some(l) = self.listeners.get(i) else {
                return;
            };
            if self.ring.accept(l.as_fd(), ud).is_err() {
                // Retried at the next tick, as after EMFILE.
                self.paused[i] = Some(sys::monotonic_ns());
                return;
            }
            self.armed[i] += 1;
            ACCEPTS_ARMED.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn on_accept(&mut self, fd: OwnedFd) {
        if self.open_in_process.load(Ordering::Relaxed) >= self.cfg.cap {
            // Refuse loudly (RST), as the epoll shard: see `engine::server`.
            let _ = sockopt::set_linger_zero(fd.as_fd());
            self.c.failures.over_capacity += 1;
            self.close_listeners();
            return;
        }
        let ws = if self.cfg.mode == Mode::Ws {
            WsState::Handshake
        } else {
            WsState::Raw
        };
        let (tok, conn) = self.conns.insert_get(Conn {
            fd,
            ws,
            ping_ns: 0,
            msg_seq: 0,
            spill: None,
            out: None,
        });
        if let Err(e) = self.ring.recv_multi(conn.fd.as_fd(), Op::Recv.ud(tok)) {
            self.conns.remove(tok);
            failure_of(&e, &mut self.c.failures);
            return;
        }
        self.c.accepted += 1;
        self.c.open += 1;
        let open = self.open_in_process.fetch_add(1, Ordering::Relaxed) + 1;
        if ws == WsState::Handshake && self.cfg.handshake_timeout_ms > 0 {
            let deadline = sys::monotonic_ns() + self.cfg.handshake_timeout_ms * 1_000_000;
            self.handshakes.push_back((tok, deadline));
        }
        if open >= self.cfg.cap {
            // Full: out of the SO_REUSEPORT groups before any connection waits here.
            self.close_listeners();
        }
    }

    /// At the fd cap: close every listener (their accepts cancelled, so the kernel drops
    /// this shard from each port's SO_REUSEPORT group), as the epoll shard does.
    fn close_listeners(&mut self) {
        if self.listeners.is_empty() {
            return;
        }
        for i in 0..self.listeners.len() {
            let _ = self.ring.cancel(accept_ud(i, self.epoch), Op::Cancel.ud(0));
        }
        self.listeners.clear();
        self.paused.clear();
        self.armed.clear();
        self.epoch = self.epoch.wrapping_add(1);
        self.warn(cap_warning(self.cfg.shard, self.cfg.cap));
    }

    fn resume_listeners(&mut self) {
        let open = self.open_in_process.load(Ordering::Relaxed);
        if self.listeners.is_empty() && (open as f64) < REOPEN_FILL * self.cfg.cap as f64 {
            let mut fresh = Vec::with_capacity(self.cfg.listen.len());
            for addr in &self.cfg.listen {
                match listener(&self.cfg, addr) {
                    Ok(fd) => fresh.push(fd),
                    Err(_) => return, // retried at the next tick
                }
            }
            self.paused = vec![None; fresh.len()];
            self.armed = vec![0; fresh.len()];
            self.listeners = fresh;
        }
        let now = sys::monotonic_ns();
        for i in 0..self.paused.len() {
            if self.paused[i].is_some_and(|t| now >= t) {
                self.paused[i] = None;
            }
            // Also where closes made room since the accepts stopped at the cap.
            self.arm_accept(i);
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
            if self
                .conns
                .get_mut(tok)
                .is_some_and(|c| c.ws == WsState::Handshake)
                && self.close(tok)
            {
                self.c.closed.handshake_timeout += 1;
            }
        }
        if self.handshakes.is_empty() && self.handshakes.capacity() > 1024 {
            self.handshakes.shrink_to_fit();
        }
    }

    /// A receive's completion: bytes (copied out, the buffer given back at once), the
    /// end of the stream, or an error.
    fn received(&mut self, c: Completion, slot: u32, generation: u32) {
        let mut n = 0;
        if let Some(bid) = c.buffer() {
            if c.res > 0 {
                let data = self.ring.buffer(bid, c.res as usize);
                n = data.len();
                self.buf[..n].copy_from_slice(data);
            }
            self.ring.recycle(bid);
        }
        let Some(tok) = self.conns.token_masked(slot, generation, GEN_MASK) else {
            return;
        };
        let closing = self
            .conns
            .get_mut(tok)
            .is_some_and(|c| c.ws == WsState::Closing);
        match c.res {
            r if r > 0 => {
                self.c.bytes_in += n as u64;
                if !closing {
                    self.input(tok, n);
                }
            }
            r if r == -libc::ENOBUFS => {}
            r if r == -libc::ECANCELED => return,
            0 if closing => return self.goodbye_end(tok),
            0 => {
                if let Some(conn) = self.conns.get_mut(tok) {
                    let partial = conn
                        .spill
                        .as_ref()
                        .is_some_and(|s| !s.inbuf.is_empty() || s.frag.is_some());
                    peer_eof(&mut self.c, self.cfg.mode, conn.ws, partial);
                }
                self.close(tok);
                return;
            }
            r => return self.failed(tok, &io::Error::from_raw_os_error(-r)),
        }
        if !c.more()
            && let Some(conn) = self.conns.get_mut(tok)
            && let Err(e) = self.ring.recv_multi(conn.fd.as_fd(), Op::Recv.ud(tok))
        {
            self.failed(tok, &e);
        }
    }

    /// What `n` received bytes (in [`Shard::buf`]) mean, answered.
    fn input(&mut self, tok: u64, n: usize) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        let result = match self.cfg.mode {
            Mode::Hold => Ok(Action::Continue),
            Mode::Echo => {
                self.c.echo_round_trips += 1;
                send_on(&mut self.ring, tok, conn, &self.buf[..n]).map(|()| Action::Continue)
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
                shrink(&mut spill);
                conn.spill = spill;
                let sent = if self.out.is_empty() {
                    Ok(())
                } else if action == Action::Continue {
                    send_on(&mut self.ring, tok, conn, &self.out)
                } else {
                    // The close reply is the last write, with the FIN in one segment.
                    write_before_close(conn, &self.out, &mut self.c.bytes_out);
                    Ok(())
                };
                sent.map(|()| action)
            }
        };
        match result {
            Ok(Action::Continue) => {}
            Ok(Action::ClosePeer) => {
                self.c.closed.peer_closed += 1;
                self.close(tok);
            }
            Ok(Action::CloseProtocol) => {
                self.c.closed.protocol += 1;
                self.close(tok);
            }
            Err(e) => self.failed(tok, &e),
        }
    }

    /// A send's completion: the rest of a short send or what queued behind it goes next.
    fn sent(&mut self, c: Completion, slot: u32, generation: u32) {
        if self.orphans.remove(&c.user_data).is_some() {
            return;
        }
        let Some(tok) = self.conns.token_masked(slot, generation, GEN_MASK) else {
            return;
        };
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        if c.res <= 0 {
            // The kernel is done with the bytes either way.
            conn.out = None;
            let e = if c.res == 0 {
                io::Error::from(io::ErrorKind::WriteZero)
            } else {
                io::Error::from_raw_os_error(-c.res)
            };
            return self.failed(tok, &e);
        }
        self.c.bytes_out += c.res as u64;
        if let Some(next) = outq::completed(&mut conn.out, c.res as usize) {
            // SAFETY: `next` points into `conn.out`, which keeps it unchanged until this
            // send's completion (or, once the connection closes, `orphans` does).
            let r = unsafe {
                self.ring
                    .send(conn.fd.as_fd(), next.ptr, next.len, Op::Send.ud(tok))
            };
            if let Err(e) = r {
                conn.out = None;
                self.failed(tok, &e);
            }
        }
    }

    /// Writes [`Shard::out`] on `tok`; an error closes it (cause counted).
    fn send_out(&mut self, tok: u64) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        if let Err(e) = send_on(&mut self.ring, tok, conn, &self.out) {
            self.failed(tok, &e);
        }
    }

    /// A connection's read or write failed: closed, the cause counted (a goodbye that
    /// was waiting ends as the peer's end of the stream would end it).
    fn failed(&mut self, tok: u64, e: &io::Error) {
        if self
            .conns
            .get_mut(tok)
            .is_some_and(|c| c.ws == WsState::Closing)
        {
            return self.goodbye_end(tok);
        }
        if self.close(tok) {
            closed_by(e, &mut self.c.closed);
        }
    }

    /// Removes a connection: its receive (and send) cancelled, its descriptor closed.
    /// The socket itself goes when the kernel drops the operations' references to it,
    /// at the cancel, which the next submit carries.
    fn close(&mut self, tok: u64) -> bool {
        let Some(mut conn) = self.conns.remove(tok) else {
            return false;
        };
        crate::workload::heartbeat::ended(&mut self.c.heartbeat, &mut conn.ping_ns);
        if conn.ws == WsState::Open {
            self.c.ws_open -= 1;
        }
        self.c.open -= 1;
        self.open_in_process.fetch_sub(1, Ordering::Relaxed);
        self.forget(tok, &mut conn);
        true
    }

    /// Cancels `conn`'s operations; a send in flight keeps its bytes in `orphans`.
    fn forget(&mut self, tok: u64, conn: &mut Conn) {
        let _ = self.ring.cancel(Op::Recv.ud(tok), Op::Cancel.ud(0));
        if let Some(q) = conn.out.take() {
            let ud = Op::Send.ud(tok);
            let _ = self.ring.cancel(ud, Op::Cancel.ud(0));
            self.orphans.insert(ud, q);
        }
    }
}

/// Queues `bytes` on `conn`: a send entry now if none is in flight, else behind it.
fn send_on(ring: &mut Ring, tok: u64, conn: &mut Conn, bytes: &[u8]) -> io::Result<()> {
    match outq::write(&mut conn.out, bytes) {
        Err(outq::Full) => Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "peer not reading: output queue full",
        )),
        Ok(None) => Ok(()),
        Ok(Some(s)) => {
            // SAFETY: `s` points into `conn.out`, unchanged until this send's completion
            // (kept in `orphans` if the connection closes first).
            let r = unsafe { ring.send(conn.fd.as_fd(), s.ptr, s.len, Op::Send.ud(tok)) };
            if r.is_err() {
                // Not queued: nothing in flight.
                conn.out = None;
            }
            r
        }
    }
}

/// A last write before the close, in one segment with the FIN
/// ([`sys::write_before_close`], a direct syscall: it is not on a hot path). Best
/// effort: behind a send in flight it is dropped, as the epoll shard drops it behind
/// queued output.
fn write_before_close(conn: &Conn, bytes: &[u8], written: &mut u64) {
    if conn.out.is_some() {
        return;
    }
    if let Ok(n) = sys::write_before_close(conn.fd.as_fd(), bytes) {
        *written += n as u64;
    }
}
