//! The tokio server shard: the same listeners, modes, push, caps and reports as the epoll
//! server (`engine::server`), written as a tokio server is written. A current-thread
//! `LocalRuntime` (see `tokio_engine::runtime`): an accept task per listener, a task per
//! connection, and the shard's state in one `Rc<Shard>` the tasks share without atomics
//! (`RefCell`s, never borrowed across an `.await`).
//!
//! Memory: an idle connection owns no buffer. Its task waits in `poll_read` (readiness
//! only: the waker lives in the socket's `ScheduledIo`) and, once readable, reads into
//! the shard's one 64 KiB buffer; the connection owns heap ([`Spill`]) only while it
//! holds a partial frame, a fragment or unsent output, as in the epoll engine. Its state
//! lives in the shard's slab (`tokio_engine::slots`), the task's future is only the shard and the
//! slot's index (16 B): tokio's task cell is the future plus 104 B of its own, aligned to
//! 128 B, so 128 B (it was 512 B with a 312-B future holding the state and a pinned
//! `Notified`). An idle plain connection then costs the cell, the socket's
//! `ScheduledIo` (256 B, also 128-aligned: both from `aligned_alloc`'s pools in the
//! binary, which glibc padded to 256 and 384 B) and its slot (state and waker).
//!
//! Handshake timeout: one sweep per report tick over a queue in accept order, as in the
//! epoll server, not a `tokio::time::timeout` per connection: the timer made the future
//! 432 B and cost 1,289 B per connection. A connection past its deadline hears it through
//! the shard's wake, which the sweep fires only when some handshake is overdue.
//!
//! Broadcast (push, close): no channel per connection and no `Notify` waking every
//! task. A close bumps `close_gen` and wakes each slot's task by its waker (the tasks in
//! a TLS handshake or a goodbye, outside the slab, by the shard's `wake`). A push is
//! written by the shard itself (`push_writer`): a walk of the slots, [`PUSH_CHUNK`] frames
//! at a time with a turn for the tasks between chunks, writing each open WebSocket's frame
//! as its task would (through the epoll server's io_uring batch, `push_batch`, where the
//! connection has no TLS and nothing queued; else [`Conn::push`]), so no task runs for a
//! push at all. A frame
//! the socket does not take whole is queued in the connection's [`Spill`] and only that
//! task is woken, to wait for `writable` instead of `readable` (backpressure stays in one
//! place); a failed write ends the connection there, its task finding its slot empty. The
//! push is done when every connection that was open when it began wrote or closed
//! (`PushJob::pending`). Every [`PUSH_CHUNK`] frames the thread yields the CPU, as the
//! epoll server does, for the readers of other processes on the same cores.
//!
//! Measured against the epoll server, epoll client, interleaved, on a box shared with
//! other loads (rates swing 3× between runs, so the CPU the server spends is the figure):
//! - Echo, 2,000 connections: 3.5–3.9 µs of server CPU per round trip for epoll, 4.0–4.4
//!   µs for tokio (0.88×); round trips/s, client-bound, 0.67–1.07× over 8 pairs. Both
//!   make one `recv` and one `send` per round trip (a short read clears readiness without
//!   an EAGAIN read). Tokio's batches are smaller: the runtime runs 61 tasks
//!   (`event_interval`) before it polls its driver, so an `epoll_wait` returns ~60 events
//!   against ~775 (1,591 calls against 127 in 4 s), and the server sleeps and wakes more
//!   often.
//! - Setup, 19,000 connections: server CPU per connection 5.8–6.3 µs (epoll) against
//!   13.2 µs (tokio) in hold mode, 13.2–14.7 against 17.4–18.4 µs in ws mode. Where the
//!   hold ramp's time goes (perf): the kernel 81% (clearing pages for the larger heap 9%,
//!   slab allocation), `LocalSet::tick` 5%, the driver 3%; and one `recv` per connection
//!   that found nothing, as tokio's `accept` assumes a stream readable (10,000 EAGAIN in
//!   10,000 accepts; gone since the shard accepts itself, see [`accept_loop`]).
//!
//! This file is the shard (listeners, accepts, caps, the push's writer, close broadcasts,
//! reports); a connection's task and books are in `connection`, the teardown's goodbyes
//! in `goodbye` (the slab of connections is the engine's, `tokio_engine::slots`).

mod connection;
mod goodbye;

use std::{
    cell::{Cell, RefCell},
    collections::VecDeque,
    io,
    net::SocketAddr,
    rc::Rc,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context as _, Result};
use rustix::{io::Errno, net::SocketFlags};
use tokio::{
    io::{Interest, unix::AsyncFd},
    net::TcpStream,
    sync::Notify,
    task::AbortHandle,
    time::{Instant, MissedTickBehavior},
};
use tokio_rustls::TlsAcceptor;

use super::slots::Slots;
use connection::{Conn, End};

use super::{AsyncCommands, REPORT_EVERY_NS, Reporter, ShardIo, Sink, runtime};
use crate::workload::{
    config::{Mode, ServerShardConfig, ShardCommand},
    engine::{
        READ_BUF, failure_of,
        server::{
            EMFILE_PAUSE_MS, PUSH_CHUNK, REOPEN_FILL,
            proto::{self, WsState},
            push_batch::PushBatch,
            state::{PUSH_SUBMIT, PushLeft},
            warnings,
        },
        shard_loop::Extra,
    },
    sockopt,
    stats::{counters::Counters, report::PushStat},
    sys,
    ws::{Decoder, Role},
};

/// Runs one server shard until `Stop` (or its supervisor goes away).
pub(crate) fn run(
    cfg: ServerShardConfig,
    io: ShardIo,
    open_in_process: Arc<AtomicU64>,
) -> Result<()> {
    let rt = runtime()?;
    rt.block_on(serve(cfg, io, open_in_process))
}

async fn serve(cfg: ServerShardConfig, io: ShardIo, open_in_process: Arc<AtomicU64>) -> Result<()> {
    let ShardIo { commands, mut sink } = io;
    let rep = Reporter::new(cfg.shard);
    let mut listeners = Vec::with_capacity(cfg.listen.len());
    for addr in &cfg.listen {
        match listen(addr, cfg.backlog, cfg.mode != Mode::Hold) {
            Ok(l) => listeners.push(l),
            Err(e) => {
                let msg = warnings::listen_error(addr, &e);
                rep.fatal(&mut sink, msg.clone());
                anyhow::bail!(msg);
            }
        }
    }
    // One home for the configuration (`tls::config`), as the epoll server builds it.
    let tls = match cfg.tls.as_ref().map(|t| t.config()).transpose() {
        Ok(t) => t.map(TlsAcceptor::from),
        Err(e) => {
            let msg = format!("server shard {}: {e}", cfg.shard);
            rep.fatal(&mut sink, msg.clone());
            anyhow::bail!(msg);
        }
    };
    let mut cmds = AsyncCommands::new(commands).context("command source")?;
    let conns = Slots::with_room(cfg.cap as usize);
    let sh = Rc::new(Shard {
        tls,
        dec: Decoder::new(Role::Server, cfg.max_message),
        cfg,
        open_in_process,
        c: RefCell::default(),
        rep: RefCell::new(rep),
        buf: RefCell::new(vec![0; READ_BUF]),
        out: RefCell::default(),
        conns: RefCell::new(conns),
        wake: Notify::new(),
        close_gen: Cell::new(0),
        push_gen: Cell::new(0),
        push: RefCell::new(None),
        push_batch: RefCell::default(),
        push_writes: Cell::new(0),
        push_done: Cell::new(None),
        main_wake: Notify::new(),
        stopping: Cell::new(false),
        goodbyes: goodbye::window(),
        goodbye_stalled: Cell::new(false),
        accepting: RefCell::default(),
        warned_emfile: Cell::new(false),
        handshakes: RefCell::default(),
        hs_base: Cell::new(0),
        hs_cutoff: Cell::new(0),
    });
    sh.accept_on(listeners);
    sh.report(&mut sink, true, false)?;
    let every = Duration::from_nanos(REPORT_EVERY_NS);
    let mut tick = tokio::time::interval_at(Instant::now() + every, every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut got = Vec::new();
    'run: loop {
        let ticked = tokio::select! {
            biased;
            r = cmds.next(&mut got) => {
                r.context("shard commands")?;
                for c in got.drain(..) {
                    match c {
                        ShardCommand::Stop => break 'run,
                        ShardCommand::Push { id, started_unix_ns } => {
                            sh.start_push(id, started_unix_ns);
                        }
                        ShardCommand::Close => sh.close_all(),
                        ShardCommand::Start { .. }
                        | ShardCommand::Mark { .. }
                        | ShardCommand::Churn { .. }
            | ShardCommand::Heartbeat { .. }
            | ShardCommand::Messages { .. } => {}
                    }
                }
                false
            }
            () = sh.main_wake.notified() => false,
            _ = tick.tick() => true,
        };
        if ticked {
            sh.sweep_handshakes();
            sh.reopen_listeners();
        }
        // A finished push is reported at once, as the epoll server does.
        let done = sh.push_done.get().is_some();
        if ticked || done {
            sh.report(&mut sink, done, false)?;
        }
    }
    sh.stopping.set(true);
    sh.close_listeners();
    sh.close_all();
    // Every connection task sees the close at its next poll, all within one pass of the
    // run queue; the last one to go wakes this task.
    while sh.open() > 0 {
        sh.main_wake.notified().await;
    }
    sh.report(&mut sink, true, true)
}

/// A SO_REUSEPORT listener (see `sockopt::listener`) on the runtime. An `AsyncFd` rather
/// than tokio's `TcpListener`: see [`accept_loop`].
type Listener = AsyncFd<std::net::TcpListener>;

fn listen(addr: &SocketAddr, backlog: i32, nodelay: bool) -> io::Result<Listener> {
    let l = std::net::TcpListener::from(sockopt::listener(addr, backlog, nodelay)?);
    // SAFETY: the listener's fd is owned by the listener, which the `AsyncFd` owns from
    // here on and never replaces: it stays open, the same, for the `AsyncFd`'s life.
    unsafe { AsyncFd::register_with_interest(l, Interest::READABLE) }.map_err(io::Error::from)
}

/// The shard's state, shared by its tasks.
struct Shard {
    cfg: ServerShardConfig,
    /// `--tls`: every accepted connection's handshake starts here.
    tls: Option<TlsAcceptor>,
    dec: Decoder,
    open_in_process: Arc<AtomicU64>,
    c: RefCell<Counters>,
    rep: RefCell<Reporter>,
    /// The one read buffer: a task reads into it and handles what it read before it
    /// next awaits, so no connection keeps a buffer while idle.
    buf: RefCell<Vec<u8>>,
    /// WebSocket replies being assembled (handshake answer, echoes, pongs, close).
    out: RefCell<Vec<u8>>,
    /// The connections being served, each its task's slot (see `slots`).
    conns: RefCell<Slots<Conn>>,
    /// Wakes the tasks in a TLS handshake or a goodbye (not in a slot): `close_gen` moved,
    /// or a handshake is overdue, or the shard stops.
    wake: Notify,
    /// Bumped by `Close` and `Stop`: connections accepted before it close (after their
    /// goodbye on `Close`, at once on `Stop`).
    close_gen: Cell<u32>,
    /// Bumped by each push: connections open at that moment write it.
    push_gen: Cell<u32>,
    push: RefCell<Option<PushJob>>,
    /// A push's frames sent in batches (io_uring), as the epoll server's.
    push_batch: RefCell<PushBatch>,
    /// Push frames written by this shard, for the yield every [`PUSH_CHUNK`].
    push_writes: Cell<u64>,
    /// A push finished since the last report.
    push_done: Cell<Option<u64>>,
    /// Wakes the main task: a push finished, or (stopping) the last connection closed.
    main_wake: Notify,
    stopping: Cell<bool>,
    /// Teardown: the goodbyes out at once, and whether one went unanswered (the rest
    /// then close at once), see `goodbye`.
    goodbyes: tokio::sync::Semaphore,
    goodbye_stalled: Cell<bool>,
    /// The accept tasks; empty while the shard is full (see [`Shard::close_listeners`]).
    accepting: RefCell<Vec<AbortHandle>>,
    warned_emfile: Cell<bool>,
    /// WebSocket handshakes in accept order: their deadline (monotonic ns) and whether
    /// each is still pending. One timeout for all, so the front is always the next due.
    handshakes: RefCell<VecDeque<(u64, bool)>>,
    /// The number of the handshake at the front of `handshakes`.
    hs_base: Cell<u64>,
    /// Handshakes numbered below this that are still pending are overdue.
    hs_cutoff: Cell<u64>,
}

/// The push being written.
#[derive(Debug, PartialEq, Eq)]
struct PushJob {
    id: u64,
    started_unix_ns: u64,
    /// Connections that were open when it began and have neither written it nor closed.
    pending: u64,
    /// The next slot the shard's loop writes it to.
    cursor: u32,
    /// Frames written since the figures last went to the reporter.
    stat: PushStat,
}

impl PushJob {
    fn new(id: u64, started_unix_ns: u64, pending: u64) -> PushJob {
        PushJob {
            id,
            started_unix_ns,
            pending,
            cursor: 0,
            stat: PushStat {
                push_id: id,
                started_unix_ns,
                ..Default::default()
            },
        }
    }

    /// One connection is through with this push: wrote it at `written` (CLOCK_REALTIME
    /// ns), or closed (`None`). Returns whether the push is complete.
    fn settle(&mut self, written: Option<u64>) -> bool {
        if let Some(t) = written {
            self.stat.merge(&PushStat {
                push_id: self.id,
                started_unix_ns: self.started_unix_ns,
                count: 1,
                first_unix_ns: t,
                last_unix_ns: t,
            });
        }
        self.pending = self.pending.saturating_sub(1);
        self.pending == 0
    }

    /// The figures since the last call, to merge into the reporter's.
    fn take_stat(&mut self) -> PushStat {
        std::mem::replace(
            &mut self.stat,
            PushStat {
                push_id: self.id,
                started_unix_ns: self.started_unix_ns,
                ..Default::default()
            },
        )
    }
}

impl Shard {
    fn open(&self) -> u64 {
        self.c.borrow().open
    }

    fn warn(&self, msg: String) {
        self.rep.borrow_mut().warnings.push(msg);
    }

    fn report(&self, sink: &mut Sink, force: bool, closed_all: bool) -> Result<()> {
        if let Some(job) = self.push.borrow_mut().as_mut() {
            self.merge_push(job.take_stat());
        }
        let x = Extra {
            push_done: self.push_done.take(),
            ..Default::default()
        };
        self.rep
            .borrow_mut()
            .send(sink, &self.c.borrow(), x, force, closed_all)
    }

    fn merge_push(&self, stat: PushStat) {
        if stat.count == 0 {
            return;
        }
        let mut rep = self.rep.borrow_mut();
        rep.pushes
            .entry(stat.push_id)
            .or_insert(PushStat {
                push_id: stat.push_id,
                started_unix_ns: stat.started_unix_ns,
                ..Default::default()
            })
            .merge(&stat);
        rep.dirty_pushes.insert(stat.push_id);
    }

    fn accept_on(self: &Rc<Self>, listeners: Vec<Listener>) {
        let mut tasks = self.accepting.borrow_mut();
        for l in listeners {
            tasks.push(tokio::task::spawn_local(accept_loop(self.clone(), l)).abort_handle());
        }
    }

    /// At the fd cap: drop every listener (see `engine::server`: the kernel then sends new
    /// connections to the shards with room). They reopen below [`REOPEN_FILL`] of the cap.
    fn close_listeners(&self) {
        for t in self.accepting.borrow_mut().drain(..) {
            t.abort();
        }
    }

    fn reopen_listeners(self: &Rc<Self>) {
        let open = self.open_in_process.load(Ordering::Relaxed);
        if !self.accepting.borrow().is_empty() || (open as f64) >= REOPEN_FILL * self.cfg.cap as f64
        {
            return;
        }
        let mut fresh = Vec::with_capacity(self.cfg.listen.len());
        for addr in &self.cfg.listen {
            match listen(addr, self.cfg.backlog, self.cfg.mode != Mode::Hold) {
                Ok(l) => fresh.push(l),
                Err(_) => return, // retried at the next tick
            }
        }
        self.accept_on(fresh);
    }

    /// Numbers a new connection's handshake and queues its deadline (`u64::MAX`: no
    /// deadline: neither WebSocket nor TLS, or no timeout). One deadline from accept
    /// covers TLS and then WebSocket, as in the epoll server.
    fn handshake_deadline(&self) -> u64 {
        let shakes = self.cfg.mode == Mode::Ws || self.tls.is_some();
        if !shakes || self.cfg.handshake_timeout_ms == 0 {
            return u64::MAX;
        }
        let mut q = self.handshakes.borrow_mut();
        let seq = self.hs_base.get() + q.len() as u64;
        q.push_back((
            sys::monotonic_ns() + self.cfg.handshake_timeout_ms * 1_000_000,
            true,
        ));
        seq
    }

    /// The handshake numbered `seq` is over (done, or the connection closed).
    fn handshake_over(&self, seq: u64) {
        if let Some(base) = seq.checked_sub(self.hs_base.get())
            && let Some(e) = self.handshakes.borrow_mut().get_mut(base as usize)
        {
            e.1 = false;
        }
    }

    /// At a report tick: any handshake past its deadline and still pending closes. The
    /// connections hear it through the shard's wake, which fires only if one is overdue.
    fn sweep_handshakes(&self) {
        let now = sys::monotonic_ns();
        let mut q = self.handshakes.borrow_mut();
        let mut overdue = false;
        while let Some(&(deadline, pending)) = q.front() {
            if deadline > now {
                break;
            }
            q.pop_front();
            self.hs_base.set(self.hs_base.get() + 1);
            overdue |= pending;
        }
        if q.is_empty() && q.capacity() > 1024 {
            // The ramp is over: give back what it needed.
            q.shrink_to_fit();
        }
        drop(q);
        if overdue {
            self.hs_cutoff.set(self.hs_base.get());
            self.wake_all();
        }
    }

    fn start_push(self: &Rc<Self>, id: u64, started_unix_ns: u64) {
        if self.cfg.mode != Mode::Ws {
            self.warn(warnings::push_ignored(id));
            self.push_done.set(Some(id));
            return;
        }
        {
            let mut rep = self.rep.borrow_mut();
            rep.pushes.insert(
                id,
                PushStat {
                    push_id: id,
                    started_unix_ns,
                    ..Default::default()
                },
            );
            rep.dirty_pushes.insert(id);
        }
        let pending = self.c.borrow().ws_open;
        self.push_gen.set(self.push_gen.get().wrapping_add(1));
        if pending == 0 {
            self.push_done.set(Some(id));
            return;
        }
        *self.push.borrow_mut() = Some(PushJob::new(id, started_unix_ns, pending));
        tokio::task::spawn_local(push_writer(self.clone(), id));
    }

    /// Wakes every connection's task: in its slot, in a TLS handshake or a goodbye.
    fn wake_all(&self) {
        self.conns.borrow().wake_all();
        self.wake.notify_waiters();
    }

    /// Writes the current push to up to [`PUSH_CHUNK`] connections from its cursor, in
    /// slot order; false once every slot was passed (or the push is over). A frame the
    /// socket did not take whole is queued in the connection's spill and its task woken
    /// to wait for `writable`; a connection whose write failed ends here.
    fn push_chunk(&self, id: u64) -> bool {
        let now_gen = self.push_gen.get();
        let (started, mut at) = match self.push.borrow().as_ref() {
            Some(j) if j.id == id => (j.started_unix_ns, j.cursor),
            _ => return false,
        };
        let mut slots = self.conns.borrow_mut();
        let mut batch = self.push_batch.borrow_mut();
        let mut held = Vec::with_capacity(PUSH_SUBMIT);
        // Built once a chunk, stamped per connection, as the epoll server's `push_step`.
        let mut frame = proto::push_frame(id, started);
        let mut written = 0;
        while written < PUSH_CHUNK && (at as usize) < slots.len() {
            let i = at;
            at += 1;
            let Some(slot) = slots.get_mut(i) else {
                continue;
            };
            let Some(conn) = slot
                .conn
                .as_mut()
                .filter(|c| c.ws == WsState::Open && c.push_gen != now_gen)
            else {
                continue;
            };
            written += 1;
            let queued = conn.has_out();
            let now = proto::stamp_push(&mut frame);
            if !queued
                && !conn.stream.is_tls()
                && batch.hold(u64::from(i), conn.stream.tcp(), true, &frame)
            {
                conn.push_gen = now_gen;
                held.push((i, now));
                if held.len() == PUSH_SUBMIT {
                    self.push_flush(&mut batch, &mut held, &mut slots);
                }
                continue;
            }
            match conn.push(self, &frame, now) {
                Ok(()) if !queued && conn.has_out() => {
                    if let Some(w) = &slot.waker {
                        w.wake_by_ref();
                    }
                }
                Ok(()) => {}
                Err(e) => {
                    // Ended here; its task finds the slot empty and is done.
                    if let Some(conn) = slot.conn.take() {
                        self.finish(conn, End::Io(e));
                    }
                    if let Some(w) = &slot.waker {
                        w.wake_by_ref();
                    }
                }
            }
        }
        self.push_flush(&mut batch, &mut held, &mut slots);
        let more = (at as usize) < slots.len();
        match self.push.borrow_mut().as_mut() {
            Some(j) if j.id == id => {
                j.cursor = at;
                more
            }
            _ => false,
        }
    }

    /// Sends the frames `batch` holds (`held`: each one's slot and stamp), then settles
    /// each: what a socket did not take whole is queued as [`Conn::push`] queues it (its
    /// task woken for `writable`), a failed send ends its connection there.
    fn push_flush(
        &self,
        batch: &mut PushBatch,
        held: &mut Vec<(u32, u64)>,
        slots: &mut Slots<Conn>,
    ) {
        if held.is_empty() {
            return;
        }
        let (mut sent, mut left) = (0, Vec::new());
        if let Err(e) = batch.flush(&mut sent, &mut left) {
            // The frames' fate is unknown (they were submitted): counted as written, and
            // the rest of the push goes by `write`.
            self.warn(e.to_string());
        }
        self.c.borrow_mut().bytes_out += sent;
        let mut failed = Vec::new();
        for l in left {
            let (i, e) = match l {
                PushLeft::Rest(i, rest) => {
                    let Some(slot) = slots.get_mut(i as u32) else {
                        continue;
                    };
                    let Some(conn) = slot.conn.as_mut() else {
                        continue;
                    };
                    match conn.send(&rest, &mut self.c.borrow_mut().bytes_out) {
                        Ok(()) => {
                            if let Some(w) = &slot.waker {
                                w.wake_by_ref();
                            }
                            continue;
                        }
                        Err(e) => (i, e),
                    }
                }
                PushLeft::Failed(i, e) => (i, e),
            };
            failed.push(i as u32);
            if let Some(slot) = slots.get_mut(i as u32) {
                if let Some(conn) = slot.conn.take() {
                    self.finish(conn, End::Io(e));
                }
                if let Some(w) = &slot.waker {
                    w.wake_by_ref();
                }
            }
        }
        for (i, now) in held.drain(..) {
            self.settle_push((!failed.contains(&i)).then_some(now));
        }
    }

    /// A connection is through with the current push (see [`PushJob::settle`]).
    fn settle_push(&self, written: Option<u64>) {
        let mut push = self.push.borrow_mut();
        let Some(job) = push.as_mut() else {
            return;
        };
        if written.is_some() {
            self.c.borrow_mut().pushes_sent += 1;
            let n = self.push_writes.get() + 1;
            self.push_writes.set(n);
            if n.is_multiple_of(PUSH_CHUNK as u64) {
                // The CPU to the readers between chunks: see `engine::server`.
                std::thread::yield_now();
            }
        }
        if job.settle(written) {
            let stat = job.take_stat();
            let id = job.id;
            *push = None;
            drop(push);
            self.merge_push(stat);
            self.push_done.set(Some(id));
            self.main_wake.notify_one();
        }
    }

    /// Closes every connection (each task closes its own at its next poll). A push cut
    /// short is still over: the supervisor may start it elsewhere.
    fn close_all(&self) {
        self.close_gen.set(self.close_gen.get().wrapping_add(1));
        let job = self.push.borrow_mut().take();
        if let Some(mut job) = job {
            self.merge_push(job.take_stat());
            self.push_done.set(Some(job.id));
        }
        self.wake_all();
    }
}

/// Writes push `id` a chunk at a time (see [`Shard::push_chunk`]), giving the connections'
/// tasks (and, every chunk, other processes: `settle_push`) a turn between chunks, as the
/// epoll server's loop turns between its chunks.
async fn push_writer(sh: Rc<Shard>, id: u64) {
    while sh.push_chunk(id) {
        tokio::task::yield_now().await;
    }
}

/// Accepts connections, one per readiness poll. Not tokio's `TcpListener::accept`: that
/// marks an accepted stream readable before the kernel said so, and the connection's first
/// `poll_read` then made a `recv` that found nothing (one EAGAIN per accept, 2,000 in
/// 2,000 idle accepts by strace). A stream made with `TcpStream::from_std` waits for the
/// driver's first event, which the kernel reports at once if data came before it.
/// No burst bound of our own: `readable` spends tokio's cooperative budget (128 per
/// poll), so a busy port yields to the other listeners and the connections in turn.
async fn accept_loop(sh: Rc<Shard>, l: Listener) {
    loop {
        let accepted = match l.readable().await {
            Ok(mut ready) => match ready.try_io(|l| {
                rustix::net::accept_with(l.get_ref(), SocketFlags::NONBLOCK | SocketFlags::CLOEXEC)
                    .map_err(io::Error::from)
            }) {
                Ok(r) => r.and_then(|fd| TcpStream::from_std(std::net::TcpStream::from(fd))),
                Err(_would_block) => continue,
            },
            Err(e) => Err(e),
        };
        match accepted {
            Ok(stream) => {
                if !sh.on_accept(stream) {
                    return;
                }
            }
            Err(e) if matches!(sys::errno(&e), Some(Errno::CONNABORTED | Errno::INTR)) => {}
            Err(e) => {
                failure_of(&e, &mut sh.c.borrow_mut().failures);
                if matches!(sys::errno(&e), Some(Errno::MFILE | Errno::NFILE)) {
                    if !sh.warned_emfile.replace(true) {
                        let conns = sh.open_in_process.load(Ordering::Relaxed);
                        sh.warn(warnings::emfile_warning(&e, conns, sh.cfg.cap));
                    }
                    // Leave the port alone instead of spinning on a connection we cannot take.
                    tokio::time::sleep(Duration::from_millis(EMFILE_PAUSE_MS)).await;
                } else {
                    tokio::task::yield_now().await;
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn push_completes_when_every_open_connection_wrote_or_closed() {
        let mut job = PushJob::new(3, 100, 3);
        assert!(!job.settle(Some(150)));
        assert!(!job.settle(None)); // closed before its turn
        assert!(job.settle(Some(120)));
        let s = job.take_stat();
        assert_eq!(
            (
                s.push_id,
                s.started_unix_ns,
                s.count,
                s.first_unix_ns,
                s.last_unix_ns
            ),
            (3, 100, 2, 120, 150)
        );
        // Taken once: the next report carries only what came after.
        assert_eq!(job.take_stat().count, 0);
    }
}
