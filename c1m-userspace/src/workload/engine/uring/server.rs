//! The io_uring server shard: SO_REUSEPORT listeners with accepts armed on each, a
//! slab of accepted connections with a multishot receive each, and the hold / echo /
//! WebSocket behaviour of the epoll shard (`engine::server`), its protocol code shared.
//!
//! A turn: submit what the last turn queued and wait for a completion (or the next
//! deadline) in one `io_uring_enter`, take the commands (before the I/O of the same
//! wait, as the epoll loop), handle every completion, then the timers and a push chunk.
//! The turn runs in `shard_loop`'s frame; what the shard keeps and its sweeps, goodbyes
//! and walks are the epoll shard's (`engine::server::state`), handed this shard's writes
//! and close from `ring_io`.

mod ring_io;

use std::{
    collections::HashMap,
    io,
    os::fd::{AsFd, FromRawFd, OwnedFd},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result};

use self::ring_io::{Conn, RingIo, Sends, send_on, write_before_close};
use super::{
    GEN_MASK, Op, decode, outq,
    ring::{Completion, Ring},
};
use crate::workload::{
    config::{Mode, ServerShardConfig, ShardCommand},
    engine::{
        ShardIo, Sink, failure_of,
        server::{
            EMFILE_PAUSE_MS, REOPEN_FILL,
            proto::{Action, WsState},
            state::ServerShardState,
            warnings::{cap_warning, listen_error},
        },
        shard_loop::{self, Reporter, Turns},
        shrink,
    },
    sockopt, sys,
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

struct Shard {
    st: ServerShardState<Sends>,
    io: RingIo,
    /// Empty while the shard is full (see [`Shard::close_listeners`]).
    listeners: Vec<OwnedFd>,
    /// The listeners' generation: an accept's completion from before a close at the cap
    /// names an older one.
    epoch: u32,
    /// Listeners paused after EMFILE, and when they resume (monotonic ns).
    paused: Vec<Option<u64>>,
    /// Accepts armed per listener of the current generation.
    armed: Vec<u32>,
    /// The last wait's completions (the shard's, reused).
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
    let mut s = Shard {
        io: RingIo {
            ring,
            orphans: HashMap::new(),
        },
        paused: vec![None; listeners.len()],
        armed: vec![0; listeners.len()],
        listeners,
        epoch: 0,
        completions: Vec::new(),
        st: ServerShardState::new(cfg, open_in_process, rep),
    };
    for i in 0..s.listeners.len() {
        s.arm_accept(i);
    }
    let ran = shard_loop::turns(&mut s, &mut io);
    // At `Stop` every connection closes; their operations end in the quiesce.
    s.st.close_all(&mut s.io);
    if !s.io.ring.quiesce(Op::Cancel.ud(0), QUIESCE) {
        // The kernel still holds some sends: their bytes must outlive this shard.
        for (_, q) in s.io.orphans.drain() {
            std::mem::forget(q);
        }
    }
    ran?;
    s.st.report(&mut io.sink, true, true)
}

/// `--tls` under `--engine uring`, refused by the CLI before any shard starts.
pub(crate) const NO_TLS: &str =
    "--engine uring has no TLS yet: use --engine epoll (or tokio) with --tls";

/// A listener for `addr` (TCP_NODELAY on it, inherited by every accepted socket, but
/// for `hold`).
fn listener(cfg: &ServerShardConfig, addr: &std::net::SocketAddr) -> io::Result<OwnedFd> {
    sockopt::listener(addr, cfg.backlog, cfg.mode != Mode::Hold)
}

/// The user data of listener `i`'s accept in listener generation `epoch`.
fn accept_ud(i: usize, epoch: u32) -> u64 {
    Op::Accept.ud((u64::from(epoch) << 32) | i as u64)
}

/// A turn: submit what the last turn queued and wait for a completion (or the next
/// deadline) in one `io_uring_enter`, then the frame's commands, the completions, the
/// timers and a push chunk.
impl Turns for Shard {
    fn wait(&mut self, next_tick: u64, io: &ShardIo) -> Result<bool> {
        let timeout = self
            .st
            .wake_at(next_tick)
            .map(|deadline| Duration::from_nanos(deadline.saturating_sub(sys::monotonic_ns())));
        self.io
            .ring
            .submit_and_wait(timeout)
            .context("io_uring_enter")?;
        self.completions.clear();
        self.io.ring.completions(&mut self.completions);
        let mut commands = false;
        for c in &self.completions {
            if let Some((Op::Command, _, _)) = decode(c.user_data) {
                commands = true;
                if !c.more() {
                    self.io
                        .ring
                        .poll_in_multi(io.commands.fd(), Op::Command.ud(0))
                        .context("io_uring poll on the command source")?;
                }
            }
        }
        Ok(commands)
    }

    fn command(&mut self, c: ShardCommand, _sink: &mut Sink) -> Result<()> {
        self.st.command(&mut self.io, c);
        Ok(())
    }

    #[inline]
    fn events(&mut self) {
        let done = std::mem::take(&mut self.completions);
        for c in &done {
            self.completion(*c);
        }
        self.completions = done;
        // A goodbye ended in this batch: the next ones may go.
        self.st.goodbye_more(&mut self.io);
    }

    fn tick(&mut self) -> bool {
        self.st.tick(&mut self.io);
        self.resume_listeners();
        false
    }

    fn turn_end(&mut self, now: u64, sink: &mut Sink) -> Result<()> {
        self.st.turn_end(&mut self.io, now, sink)
    }

    fn report(&mut self, sink: &mut Sink, force: bool, closed_all: bool) -> Result<()> {
        self.st.report(sink, force, closed_all)
    }
}

impl Shard {
    fn completion(&mut self, c: Completion) {
        match decode(c.user_data) {
            Some((Op::Recv, slot, generation)) => self.received(c, slot, generation),
            Some((Op::Send, slot, generation)) => self.sent(c, slot, generation),
            Some((Op::Accept, i, epoch)) => self.accepted(c, i as usize, epoch),
            Some((Op::Command | Op::Cancel, ..)) | None => {
                if let Some(bid) = c.buffer() {
                    self.io.ring.recycle(bid);
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
                failure_of(&err, &mut self.st.c.failures);
                if current {
                    self.paused[i] = Some(sys::monotonic_ns() + EMFILE_PAUSE_MS * 1_000_000);
                }
                self.st.emfile(&err);
                return;
            }
            e if e > 0 && e != libc::ECONNABORTED && e != libc::EINTR => {
                failure_of(&io::Error::from_raw_os_error(e), &mut self.st.c.failures);
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
            let open = self.st.open_in_process.load(Ordering::Relaxed);
            if open + ACCEPTS_ARMED.load(Ordering::Relaxed) >= self.st.cfg.cap {
                return;
            }
            let Some(l) = self.listeners.get(i) else {
                return;
            };
            if self.io.ring.accept(l.as_fd(), ud).is_err() {
                // Retried at the next tick, as after EMFILE.
                self.paused[i] = Some(sys::monotonic_ns());
                return;
            }
            self.armed[i] += 1;
            ACCEPTS_ARMED.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn on_accept(&mut self, fd: OwnedFd) {
        if self.st.open_in_process.load(Ordering::Relaxed) >= self.st.cfg.cap {
            // Refuse loudly (RST), as the epoll shard: see `engine::server`.
            let _ = sockopt::set_linger_zero(fd.as_fd());
            self.st.c.failures.over_capacity += 1;
            self.close_listeners();
            return;
        }
        let ws = if self.st.cfg.mode == Mode::Ws {
            WsState::Handshake
        } else {
            WsState::Raw
        };
        let (tok, conn) = self.st.conns.insert_get(Conn::new(fd, ws, None));
        if let Err(e) = self.io.ring.recv_multi(conn.fd.as_fd(), Op::Recv.ud(tok)) {
            self.st.conns.remove(tok);
            failure_of(&e, &mut self.st.c.failures);
            return;
        }
        let open = self.st.opened();
        if ws == WsState::Handshake {
            self.st.time_handshake(tok, sys::monotonic_ns());
        }
        if open >= self.st.cfg.cap {
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
            let _ = self
                .io
                .ring
                .cancel(accept_ud(i, self.epoch), Op::Cancel.ud(0));
        }
        self.listeners.clear();
        self.paused.clear();
        self.armed.clear();
        self.epoch = self.epoch.wrapping_add(1);
        self.st
            .warn(cap_warning(self.st.cfg.shard, self.st.cfg.cap));
    }

    fn resume_listeners(&mut self) {
        let open = self.st.open_in_process.load(Ordering::Relaxed);
        if self.listeners.is_empty() && (open as f64) < REOPEN_FILL * self.st.cfg.cap as f64 {
            let mut fresh = Vec::with_capacity(self.st.cfg.listen.len());
            for addr in &self.st.cfg.listen {
                match listener(&self.st.cfg, addr) {
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

    /// A receive's completion: bytes (copied out, the buffer given back at once), the
    /// end of the stream, or an error.
    fn received(&mut self, c: Completion, slot: u32, generation: u32) {
        let mut n = 0;
        if let Some(bid) = c.buffer() {
            if c.res > 0 {
                let data = self.io.ring.buffer(bid, c.res as usize);
                n = data.len();
                self.st.buf[..n].copy_from_slice(data);
            }
            self.io.ring.recycle(bid);
        }
        let Some(tok) = self.st.conns.token_masked(slot, generation, GEN_MASK) else {
            return;
        };
        let closing = self
            .st
            .conns
            .get_mut(tok)
            .is_some_and(|c| c.ws == WsState::Closing);
        match c.res {
            r if r > 0 => {
                self.st.c.bytes_in += n as u64;
                if !closing {
                    self.input(tok, n);
                }
            }
            r if r == -libc::ENOBUFS => {}
            r if r == -libc::ECANCELED => return,
            0 if closing => return self.st.goodbye_end(&mut self.io, tok),
            0 => {
                if let Some(conn) = self.st.conns.get_mut(tok) {
                    conn.peer_ended(&mut self.st.c, self.st.cfg.mode);
                }
                self.close(tok);
                return;
            }
            r => return self.failed(tok, &io::Error::from_raw_os_error(-r)),
        }
        if !c.more()
            && let Some(conn) = self.st.conns.get_mut(tok)
            && let Err(e) = self.io.ring.recv_multi(conn.fd.as_fd(), Op::Recv.ud(tok))
        {
            self.failed(tok, &e);
        }
    }

    /// What `n` received bytes (in [`ServerShardState::buf`]) mean, answered.
    fn input(&mut self, tok: u64, n: usize) {
        let Some(conn) = self.st.conns.get_mut(tok) else {
            return;
        };
        if conn.io.as_ref().is_some_and(|q| q.closing()) {
            return; // it said its last and closes once that is out
        }
        let result = match self.st.cfg.mode {
            Mode::Hold => Ok(Action::Continue),
            Mode::Echo => {
                self.st.c.echo_round_trips += 1;
                send_on(&mut self.io.ring, tok, conn, &self.st.buf[..n]).map(|()| Action::Continue)
            }
            Mode::Ws => {
                let (mut spill, action) = self.st.ws.read(
                    conn,
                    &mut self.st.buf[..n],
                    &mut self.st.out,
                    &mut self.st.c,
                );
                shrink(&mut spill);
                conn.spill = spill;
                let sent = if self.st.out.is_empty() {
                    Ok(())
                } else if action == Action::Continue {
                    send_on(&mut self.io.ring, tok, conn, &self.st.out)
                } else if conn.io.is_some() {
                    // A send in flight (the 101, read in the same turn as a bad frame
                    // under load): the close reply queues behind it and the connection
                    // closes once both are out. Dropped, as before, the close went with
                    // the 101's send still unsubmitted, and the peer got neither.
                    match send_on(&mut self.io.ring, tok, conn, &self.st.out) {
                        Ok(()) => match outq::close_when_out(&mut conn.io, action) {
                            Ok(()) => return,
                            Err(action) => return self.close_for(tok, action),
                        },
                        Err(e) => Err(e),
                    }
                } else {
                    // The close reply is the last write, with the FIN in one segment.
                    write_before_close(conn, &self.st.out, &mut self.st.c.bytes_out);
                    Ok(())
                };
                sent.map(|()| action)
            }
        };
        match result {
            Ok(Action::Continue) => {}
            Ok(end) => self.close_for(tok, end),
            Err(e) => self.failed(tok, &e),
        }
    }

    /// Closes a connection as its input asked, the cause counted.
    fn close_for(&mut self, tok: u64, action: Action) {
        action.count_close(&mut self.st.c.closed);
        self.close(tok);
    }

    /// A send's completion: the rest of a short send or what queued behind it goes next.
    fn sent(&mut self, c: Completion, slot: u32, generation: u32) {
        if self.io.orphans.remove(&c.user_data).is_some() {
            return;
        }
        let Some(tok) = self.st.conns.token_masked(slot, generation, GEN_MASK) else {
            return;
        };
        let Some(conn) = self.st.conns.get_mut(tok) else {
            return;
        };
        if c.res <= 0 {
            // The kernel is done with the bytes either way.
            conn.io = None;
            let e = if c.res == 0 {
                io::Error::from(io::ErrorKind::WriteZero)
            } else {
                io::Error::from_raw_os_error(-c.res)
            };
            return self.failed(tok, &e);
        }
        self.st.c.bytes_out += c.res as u64;
        let (next, close) = outq::completed_closing(&mut conn.io, c.res as usize);
        if let Some(action) = close {
            // Its last write is out: the close its input asked for.
            return self.close_for(tok, action);
        }
        if let Some(next) = next {
            // SAFETY: `next` points into `conn.io`, which keeps it unchanged until this
            // send's completion (or, once the connection closes, `orphans` does).
            let r = unsafe {
                self.io
                    .ring
                    .send(conn.fd.as_fd(), next.ptr, next.len, Op::Send.ud(tok))
            };
            if let Err(e) = r {
                conn.io = None;
                self.failed(tok, &e);
            }
        }
    }

    /// A connection's read or write failed: see [`ServerShardState::failed`].
    fn failed(&mut self, tok: u64, e: &io::Error) {
        self.st.failed(&mut self.io, tok, e);
    }

    /// Removes a connection: its receive (and send) cancelled, its descriptor closed.
    fn close(&mut self, tok: u64) -> bool {
        self.st.close(&mut self.io, tok)
    }
}
