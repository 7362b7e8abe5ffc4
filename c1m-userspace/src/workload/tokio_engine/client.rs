//! The tokio client shard: a task per connection on a `LocalSet`, sharing the shard's
//! [`Proto`] (counters, histograms, WebSocket and echo logic, the same as the epoll
//! engine's) through an `Rc<RefCell<…>>`, since every task runs on the shard's one thread.
//!
//! - A pacing task starts connects on the epoll engine's schedule (`pace`), holding a
//!   `Semaphore` permit per connect-and-handshake in flight (`--in-flight`).
//! - A connection task awaits its connect, then reads with `AsyncRead::poll_read` into the
//!   shard's one read buffer, borrowed only for the duration of a poll: an idle connection
//!   owns no buffer. Partial frames (`BytesMut`) and unsent output own heap until consumed.
//!   `poll_read` rather than `readable()` + `try_read`: tokio clears readiness on a short
//!   read there, saving the `EAGAIN` read per message.
//! - The connect timeout is a boxed `Sleep` dropped once the connection is open, so an
//!   idle task's future does not carry a timer. It bounds the TLS handshake too (with
//!   `--tls`, tokio-rustls's `TlsConnector::connect` on the connected socket), as in the
//!   epoll engine.
//! - Teardown is one `Notify::notify_waiters` that reaches every task's `Notified` (part
//!   of the task, no per-connection channel); the shard waits until the last task is gone.

use std::{
    cell::{Cell, RefCell},
    future::{Future, poll_fn},
    io,
    pin::{Pin, pin},
    rc::Rc,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    task::{Poll, ready},
    time::Duration,
};

use anyhow::{Context, Result};
use bytes::{Buf, BytesMut};
use rustls::pki_types::ServerName;
use tokio::{
    io::ReadBuf,
    net::TcpStream,
    sync::{Notify, OwnedSemaphorePermit, Semaphore},
    task::LocalSet,
    time::{Instant, Sleep},
};
use tokio_rustls::TlsConnector;

mod goodbye;
mod switch;

use super::{
    AsyncCommands, REPORT_EVERY_NS, ShardIo, Sink, Spill,
    churn_board::Board,
    runtime,
    stream::{Stream, count_handshake_failure, tls_error},
};
use crate::workload::{
    churn,
    config::{ClientShardConfig, Mode, ShardCommand},
    engine::{
        MAX_PENDING_OUT, READ_BUF,
        client::{
            PACE_NS,
            proto::{CLOSE_STALL_NS, CloseWatch, ConnProto, EchoStep, Proto, State},
        },
        closed_by, failure_of, pace,
    },
    heartbeat::{self, Visit},
    messages,
    sockopt::{self, Connecting},
    stats::counters::Counters,
    sys,
};

/// What every task of the shard shares.
struct Shared {
    p: RefCell<Proto>,
    /// `--tls`: the connector (built from `tls::config`, as the epoll client's) and the
    /// name every connection asks for and verifies.
    tls: Option<(TlsConnector, ServerName<'static>)>,
    /// The shard's one read buffer, borrowed by a task only while it reads and decodes.
    buf: RefCell<Vec<u8>>,
    /// Client teardown: set once, then `teardown` wakes every task.
    closing: Cell<bool>,
    teardown: Notify,
    /// Connection tasks alive; `gone` wakes the teardown when the last one ends.
    live: Cell<u64>,
    gone: Notify,
    /// Teardown: wakes the tasks still waiting for their server to close, or for a slot to
    /// say goodbye in (the teardown stalled: `CloseWatch`), which then close at once.
    close_stalled: Notify,
    stalled: Cell<bool>,
    started: Cell<bool>,
    /// Next local connection index to start.
    next: Cell<u64>,
    /// Connects and handshakes in flight, then teardown goodbyes waiting for their server
    /// (`--in-flight`: `permits` in all).
    slots: Arc<Semaphore>,
    permits: usize,
    /// `--churn`: the open tasks to pick from, the pump's generation (a `Churn` command
    /// starts a new one; the old pump sees it and ends), and the reopens' slots (they are
    /// not bounded by `--in-flight`: the pace bounds them).
    board: RefCell<Board>,
    churn_gen: Cell<u64>,
    reopen_slots: Arc<Semaphore>,
    /// The heartbeat's and the messages' epochs (monotonic ns) while they run (None:
    /// they do not): from `Start` with `--heartbeat` / `--message-rate`, from a
    /// `Heartbeat` / `Messages` command in a phase (`switch.rs`).
    beat_epoch: Cell<Option<u64>>,
    msg_epoch: Cell<Option<u64>>,
    /// Bumped by each such command, which then wakes every task through `teardown`:
    /// a task whose count differs rebuilds its clocks, and its teardown wait.
    switches: Cell<u64>,
}

/// Runs one client shard: waits for `Start`, ramps, holds until `Close`/`Stop`.
pub(crate) fn run(
    cfg: ClientShardConfig,
    io: ShardIo,
    open_in_process: Arc<AtomicU64>,
) -> Result<()> {
    let rt = runtime()?;
    let ShardIo { commands, mut sink } = io;
    LocalSet::new().block_on(&rt, async move {
        let cmds = AsyncCommands::new(commands).context("shard command source")?;
        shard(cfg, cmds, &mut sink, open_in_process).await
    })
}

async fn shard(
    cfg: ClientShardConfig,
    mut cmds: AsyncCommands,
    sink: &mut Sink,
    open_in_process: Arc<AtomicU64>,
) -> Result<()> {
    let sh = Rc::new(Shared::new(cfg, open_in_process)?);
    sh.report(sink, true, false)?;
    let every = Duration::from_nanos(REPORT_EVERY_NS);
    let mut next_tick = Instant::now() + every;
    let mut got = Vec::new();
    loop {
        // `next` drains into `got` before it waits, so commands are never lost when the
        // tick wins; a closed command source reads as `Stop`.
        tokio::select! {
            r = cmds.next(&mut got) => r.context("shard commands")?,
            () = tokio::time::sleep_until(next_tick) => {}
        }
        for c in got.drain(..) {
            match c {
                ShardCommand::Start { t0_mono_ns } if !sh.started.get() => {
                    let mut p = sh.p.borrow_mut();
                    p.t0_mono = t0_mono_ns;
                    sh.beat_epoch
                        .set(p.cfg.heartbeat.is_some().then_some(t0_mono_ns));
                    sh.msg_epoch
                        .set(p.cfg.messages.is_some().then_some(t0_mono_ns));
                    drop(p);
                    sh.started.set(true);
                    tokio::task::spawn_local(pump(sh.clone()));
                }
                ShardCommand::Churn {
                    on,
                    t0_mono_ns,
                    rate,
                } => {
                    let g = sh.churn_gen.get() + 1;
                    sh.churn_gen.set(g);
                    let per_s = sh.p.borrow().cfg.churn.map(|c| c.per_s_at(rate));
                    if let (true, Some(per_s)) = (on, per_s)
                        && !sh.closing.get()
                    {
                        tokio::task::spawn_local(churn_pump(
                            sh.clone(),
                            g,
                            churn::Pace::new(per_s, t0_mono_ns),
                        ));
                    }
                    sh.report(sink, true, false)?;
                }
                ShardCommand::Heartbeat { cfg, t0_mono_ns } => {
                    sh.switch_heartbeat(cfg, t0_mono_ns);
                    sh.report(sink, true, false)?;
                }
                ShardCommand::Messages { cfg, t0_mono_ns } => {
                    sh.switch_messages(cfg, t0_mono_ns);
                    sh.report(sink, true, false)?;
                }
                ShardCommand::Close => {
                    sh.drain().await;
                    sh.close_all().await;
                    sh.report(sink, true, true)?;
                }
                ShardCommand::Mark {
                    id,
                    started_unix_ns,
                } => {
                    sh.p.borrow_mut().mark(id, started_unix_ns);
                    // At once: the lab fires the trigger when every shard has said so.
                    sh.report(sink, true, false)?;
                }
                ShardCommand::Stop => {
                    sh.close_all().await;
                    return sh.report(sink, true, true);
                }
                ShardCommand::Start { .. } | ShardCommand::Push { .. } => {}
            }
        }
        let now = Instant::now();
        if now >= next_tick {
            next_tick = now + every;
            let closed_all = sh.closing.get() && sh.live.get() == 0;
            sh.report(sink, false, closed_all)?;
        }
    }
}

impl Shared {
    fn new(cfg: ClientShardConfig, open_in_process: Arc<AtomicU64>) -> Result<Shared> {
        let permits = usize::try_from(cfg.in_flight)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        let tls = match &cfg.tls {
            None => None,
            Some(t) => Some((TlsConnector::from(t.config()?), t.name()?)),
        };
        let board = Board::new(
            cfg.churn.map(|c| c.order).unwrap_or_default(),
            cfg.seed ^ u64::from(cfg.shard).rotate_left(17),
        );
        Ok(Shared {
            tls,
            permits,
            board: RefCell::new(board),
            churn_gen: Cell::new(0),
            beat_epoch: Cell::new(None),
            msg_epoch: Cell::new(None),
            switches: Cell::new(1),
            reopen_slots: Arc::new(Semaphore::new(Semaphore::MAX_PERMITS)),
            p: RefCell::new(Proto::new(cfg, open_in_process)?),
            buf: RefCell::new(vec![0; READ_BUF]),
            closing: Cell::new(false),
            teardown: Notify::new(),
            live: Cell::new(0),
            gone: Notify::new(),
            close_stalled: Notify::new(),
            stalled: Cell::new(false),
            started: Cell::new(false),
            next: Cell::new(0),
            slots: Arc::new(Semaphore::new(permits)),
        })
    }

    fn report(&self, sink: &mut Sink, force: bool, closed_all: bool) -> Result<()> {
        let mut p = self.p.borrow_mut();
        // A churn's reopens in flight are not the ramp's.
        let ramp_done = self.started.get()
            && self.next.get() >= p.cfg.count
            && p.c.in_flight == p.c.churn.reopening;
        p.report(sink, ramp_done, force, closed_all)
    }

    /// `--message-rate`: no more messages; waits (at most the drain time) until the
    /// echoes of those out came back, so a clean end counts every one received.
    async fn drain(&self) {
        let until = {
            let mut p = self.p.borrow_mut();
            p.draining = true;
            match p.cfg.messages {
                Some(m) => Instant::now() + m.drain(),
                None => return,
            }
        };
        while self.p.borrow().c.messages.outstanding > 0 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Closes every connection (each task says goodbye, counts itself and waits for its
    /// server to close, as the epoll engine's `State::Closing`) and returns when the last
    /// task is gone. Once the teardown stalls (`CloseWatch`), the rest close at once.
    async fn close_all(&self) {
        self.closing.set(true);
        self.board.borrow_mut().clear();
        self.teardown.notify_waiters();
        let mut watch = CloseWatch::new(self.live.get(), sys::monotonic_ns());
        while self.live.get() > 0 {
            let _ = tokio::time::timeout(Duration::from_millis(250), self.gone.notified()).await;
            let live = self.live.get();
            if watch.stalled(live, sys::monotonic_ns()) {
                self.p
                    .borrow_mut()
                    .warn_close_unanswered(self.goodbyes_waiting());
                self.stalled.set(true);
                self.close_stalled.notify_waiters();
            }
        }
    }
}

impl Shared {
    /// Goodbyes waiting for their server: at teardown the only holders of `slots` (the
    /// connects that held the rest were torn down with their tasks).
    fn goodbyes_waiting(&self) -> u64 {
        (self.permits - self.slots.available_permits()) as u64
    }
}

/// The monotonic instant `mono_ns` as a tokio instant (both read CLOCK_MONOTONIC).
fn instant_of(mono_ns: u64) -> Instant {
    let (now_ns, now) = (sys::monotonic_ns(), Instant::now());
    if mono_ns >= now_ns {
        now + Duration::from_nanos(mono_ns - now_ns)
    } else {
        now.checked_sub(Duration::from_nanos(now_ns - mono_ns))
            .unwrap_or(now)
    }
}

/// Starts connects as the pace allows, each holding an in-flight slot until it opens.
/// Like the epoll engine it wakes at most every [`PACE_NS`] and then starts all that is due.
async fn pump(sh: Rc<Shared>) {
    let mut teardown = pin!(sh.teardown.notified());
    teardown.as_mut().enable();
    let (rate, count, first, stride, t0) = {
        let p = sh.p.borrow();
        (
            p.cfg.rate,
            p.cfg.count,
            p.cfg.first,
            p.cfg.stride,
            p.t0_mono,
        )
    };
    let mut woke = 0u64;
    loop {
        let next = sh.next.get();
        if sh.closing.get() || next >= count {
            return;
        }
        let now = sys::monotonic_ns();
        if next >= pace::due(rate, count, now.saturating_sub(t0)) {
            let due = pace::scheduled_ns(rate, next).map_or(now, |at| t0.saturating_add(at));
            woke = due.max(woke + PACE_NS);
            tokio::select! {
                biased;
                () = &mut teardown => if switch::torn_down(&sh, &mut teardown) {
                    return;
                },
                () = tokio::time::sleep_until(instant_of(woke)) => {}
            }
            continue;
        }
        let permit = match sh.slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => tokio::select! {
                biased;
                () = &mut teardown => if switch::torn_down(&sh, &mut teardown) {
                    return;
                } else {
                    continue;
                },
                p = sh.slots.clone().acquire_owned() => match p {
                    Ok(permit) => permit,
                    Err(_) => return,
                },
            },
        };
        if sh.closing.get() {
            return;
        }
        sh.next.set(next + 1);
        start(&sh, first + next * stride, permit, false);
    }
}

/// `--churn`: flags the tasks due to churn on the pace, each waking at its flag, until the
/// teardown or the next `Churn` command (generation `g` no longer the shard's).
async fn churn_pump(sh: Rc<Shared>, g: u64, mut pace: churn::Pace) {
    let mut teardown = pin!(sh.teardown.notified());
    teardown.as_mut().enable();
    loop {
        if sh.closing.get() || sh.churn_gen.get() != g {
            return;
        }
        let now = sys::monotonic_ns();
        for _ in 0..pace.take(now) {
            // Nothing held to churn: skipped, not caught up.
            if !sh.board.borrow_mut().pick() {
                break;
            }
        }
        let next = pace.next_due_ns().max(now + PACE_NS);
        tokio::select! {
            biased;
            () = &mut teardown => if switch::torn_down(&sh, &mut teardown) {
                return;
            },
            () = tokio::time::sleep_until(instant_of(next)) => {}
        }
    }
}

/// One connect: the socket is made and bound as the epoll engine makes it (`sockopt`), then
/// handed to tokio and to a task of its own. `reopen`: a churned connection's next life.
fn start(sh: &Rc<Shared>, g: u64, permit: OwnedSemaphorePermit, reopen: bool) {
    let mut p = sh.p.borrow_mut();
    p.c.attempted += 1;
    let (src, dst) = p.cfg.endpoints(g);
    let nodelay = p.cfg.mode != Mode::Hold;
    let t_ns = sys::monotonic_ns();
    let (fd, done) = match sockopt::connect(src.as_ref(), &dst, nodelay) {
        Ok(Connecting::InProgress(fd)) => (fd, false),
        Ok(Connecting::Done(fd)) => (fd, true),
        Err(e) => {
            p.connect_failed(&e, g);
            if reopen {
                churn::failed(&mut p.c.churn);
            }
            return;
        }
    };
    let stream = match TcpStream::from_std(std::net::TcpStream::from(fd)) {
        Ok(s) => s,
        Err(e) => {
            failure_of(&e, &mut p.c.failures);
            if reopen {
                churn::failed(&mut p.c.churn);
            }
            return;
        }
    };
    p.c.in_flight += 1;
    p.open_in_process.fetch_add(1, Ordering::Relaxed);
    sh.live.set(sh.live.get() + 1);
    let conn = Conn {
        p: if reopen {
            ConnProto::reopen(g, t_ns)
        } else {
            ConnProto::new(g, t_ns)
        },
        spill: None,
    };
    tokio::task::spawn_local(conn.run(sh.clone(), Some(Stream::Tcp(stream)), done, permit));
}

/// A connection's own state, owned by its task.
struct Conn {
    p: ConnProto,
    /// Heap only while there is something in it: an idle connection has none.
    spill: Option<Box<Spill>>,
}

/// Why a connection's task stopped serving it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    /// It ended by itself (the peer, an error, a failed setup: counted where it ended).
    Life,
    /// The client's teardown.
    Teardown,
    /// `--churn` picked it.
    Churn,
}

/// What a batch of input leaves the connection to do.
#[derive(PartialEq, Eq)]
enum Flow {
    Go,
    /// The connection ended (cause counted).
    End,
}

/// Counts what a send wrote, or its error as `fail` classifies it (the connection ends).
fn counted(c: &mut Counters, r: io::Result<u64>, fail: fn(&io::Error, &mut Counters)) -> Flow {
    match r {
        Ok(n) => {
            c.bytes_out += n;
            Flow::Go
        }
        Err(e) => {
            fail(&e, c);
            Flow::End
        }
    }
}

/// The connect timeout, on the heap only while the connection is not open yet.
type Timer = Option<Pin<Box<Sleep>>>;

/// An open connection's clocks: the heartbeat's next slot, the next message's timer and
/// instant (`--heartbeat`, `--message-rate`).
#[derive(Default)]
struct Clocks {
    beat: Timer,
    msg: Timer,
    msg_at: u64,
}

/// What woke an open connection with clocks.
enum Woke<T> {
    Input(T),
    /// A phase switched the heartbeat or the messages: the clocks are rebuilt.
    Switched,
    Beat,
    Message,
}

/// `f`, unless the timer (if any) fires first (None).
async fn within<T>(timer: &mut Timer, f: impl Future<Output = T>) -> Option<T> {
    match timer {
        None => Some(f.await),
        Some(t) => tokio::select! {
            biased;
            v = f => Some(v),
            () = t.as_mut() => None,
        },
    }
}

impl Conn {
    /// The connection's task. A plain fn around an `async move` block, not an `async fn`:
    /// an async fn keeps its arguments twice in its future (rust-lang/rust#62958), and the
    /// future is most of an idle connection's memory (measured: 528 vs 432 bytes).
    /// `stream` is the one place the stream lives (TCP, then TLS over it; None once a TLS
    /// handshake failed): moved into the setup as well, it was kept three times (568 B).
    #[allow(clippy::manual_async_fn)] // deliberately not an async fn, see above
    fn run(
        mut self,
        sh: Rc<Shared>,
        mut stream: Option<Stream>,
        done: bool,
        permit: OwnedSemaphorePermit,
    ) -> impl Future<Output = ()> {
        async move {
            // `--churn`: the connection's place on the shard's board (taken once open),
            // copied into the poll below only: every byte kept across an await is in every
            // idle task.
            let k = self.board_place(&sh);
            let end = {
                let mut teardown = pin!(sh.teardown.notified());
                let mut life = pin!(async {
                    // The setup (connect wait, timer, in-flight slot, TLS and WebSocket
                    // handshakes) lives on the heap until the connection opens: an idle
                    // task carries only the read loop.
                    if Box::pin(self.setup(&sh, &mut stream, done, permit)).await
                        && let Some(s) = stream.as_mut()
                    {
                        if sh.p.borrow().cfg.churn.is_some() && !sh.closing.get() {
                            sh.board.borrow_mut().join(self.board_place(&sh));
                        }
                        self.serve(&sh, s, &mut None).await;
                    }
                });
                // Like `select!`, but `teardown` is polled only to register the task's waker
                // and once teardown began: each poll of a waiting `Notified` locks the
                // `Notify`, and a task's waker does not change.
                // `registered`: the switch count whose wake the task waits for (0: none
                // yet); a wake for a switch (`switch.rs`) is not the teardown, and a fresh
                // `Notified` waits for the next.
                let mut registered = 0u64;
                let (teardown, life, sh) = (&mut teardown, &mut life, &sh);
                poll_fn(move |cx| {
                    while (registered != sh.switches.get() || sh.closing.get())
                        && teardown.as_mut().poll(cx).is_ready()
                    {
                        if switch::torn_down(sh, teardown) {
                            return Poll::Ready(End::Teardown);
                        }
                    }
                    registered = sh.switches.get();
                    if sh.closing.get() {
                        return Poll::Ready(End::Teardown);
                    }
                    if life.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(End::Life);
                    }
                    // Picked by the churn pump? (If not, the board keeps the waker.)
                    if sh.board.borrow_mut().picked(k, cx.waker()) {
                        Poll::Ready(End::Churn)
                    } else {
                        Poll::Pending
                    }
                })
                .await
            };
            sh.board.borrow_mut().leave(self.board_place(&sh));
            if end == End::Churn {
                Box::pin(self.churned(&sh, stream)).await;
                return;
            }
            let torn_down = end == End::Teardown;
            let says_goodbye =
                torn_down && self.p.state == State::Open && sh.p.borrow().cfg.mode == Mode::Ws;
            let _slot = if says_goodbye {
                goodbye::goodbye_slot(&sh).await
            } else {
                None
            };
            if self.finish(&sh, stream.as_mut(), end)
                && let Some(s) = stream.as_mut()
            {
                let frames = self.closing_frames();
                Box::pin(goodbye::await_server_close(&sh, s, &mut self.p, frames)).await;
            }
            drop(stream);
            sh.live.set(sh.live.get() - 1);
            if sh.live.get() == 0 && sh.closing.get() {
                sh.gone.notify_one();
            }
        }
    }

    /// What [`goodbye::await_server_close`] parses first after our close frame: the
    /// input the last read left unparsed (plaintext under TLS, as every read's).
    fn closing_frames(&mut self) -> Vec<u8> {
        self.spill
            .as_mut()
            .map(|sp| std::mem::take(&mut sp.inbuf).to_vec())
            .unwrap_or_default()
    }

    /// The connection's place on the churn board: its index among the shard's.
    fn board_place(&self, sh: &Shared) -> u32 {
        let p = sh.p.borrow();
        (self.p.g.saturating_sub(p.cfg.first) / p.cfg.stride.max(1)) as u32
    }

    /// `--churn` picked this open connection: it says goodbye as a teardown does (counted
    /// a churn close), its reopen starts at once, and a WebSocket waits for its server to
    /// close (at most [`CLOSE_STALL_NS`]), so the socket closes as at a teardown.
    async fn churned(mut self, sh: &Rc<Shared>, mut stream: Option<Stream>) {
        let g = self.p.g;
        let goodbye = self.finish(sh, stream.as_mut(), End::Churn);
        match sh.reopen_slots.clone().try_acquire_owned() {
            Ok(permit) => start(sh, g, permit, true),
            Err(_) => churn::failed(&mut sh.p.borrow_mut().c.churn),
        }
        if goodbye && let Some(s) = stream.as_mut() {
            let frames = self.closing_frames();
            let waited = tokio::time::timeout(
                Duration::from_nanos(CLOSE_STALL_NS),
                goodbye::await_server_close(sh, s, &mut self.p, frames),
            )
            .await;
            let mut p = sh.p.borrow_mut();
            p.c.churn.closing -= 1;
            if waited.is_err() {
                p.warn_close_unanswered(1);
            }
        }
        // Our FIN (raw modes: first, so TIME_WAIT is ours).
        drop(stream);
        sh.live.set(sh.live.get() - 1);
        if sh.live.get() == 0 && sh.closing.get() {
            sh.gone.notify_one();
        }
    }

    /// The connection is over: a teardown or a churn says goodbye (under TLS with a
    /// close_notify after it) and is counted; it leaves the open or in-flight count.
    /// True: the close frame went out, wait for the server to close.
    fn finish(&mut self, sh: &Shared, stream: Option<&mut Stream>, end: End) -> bool {
        let mut p = sh.p.borrow_mut();
        p.conn_ends(&mut self.p);
        let mut goodbye = false;
        if end != End::Life {
            if self.p.state == State::Open {
                let ws = p.cfg.mode == Mode::Ws;
                if let Some(s) = stream
                    && (ws || matches!(s, Stream::Tls(_)))
                    && self.pending_out().is_none()
                    && !s.tls_pending()
                {
                    let frame = if ws { p.close_frame() } else { &[] };
                    let len = frame.len();
                    if let Ok(n) = s.write_last(frame, false) {
                        p.c.bytes_out += n as u64;
                        goodbye = ws && n == len;
                    }
                }
                if end == End::Churn {
                    churn::closing(&mut p.c.churn);
                    if goodbye {
                        p.c.churn.closing += 1;
                    }
                } else {
                    p.c.closed.local_close += 1;
                }
            } else {
                p.c.failures.aborted += 1;
            }
        }
        if self.p.state == State::Open {
            p.c.open -= 1;
        } else {
            p.c.in_flight -= 1;
            if self.p.reopen {
                churn::failed(&mut p.c.churn);
            }
        }
        p.open_in_process.fetch_sub(1, Ordering::Relaxed);
        goodbye
    }

    /// Connect, TLS and WebSocket handshakes within the connect timeout, holding an
    /// in-flight slot meanwhile. True: the connection is open; false: it ended (counted).
    async fn setup(
        &mut self,
        sh: &Shared,
        stream: &mut Option<Stream>,
        done: bool,
        _slot: OwnedSemaphorePermit,
    ) -> bool {
        let Some(s) = stream.as_ref().map(Stream::tcp) else {
            return false;
        };
        let timeout_ms = sh.p.borrow().cfg.connect_timeout_ms;
        let deadline = self
            .p
            .t_ns
            .saturating_add(timeout_ms.saturating_mul(1_000_000));
        let mut timer: Timer = Some(Box::pin(tokio::time::sleep_until(instant_of(deadline))));
        if !done {
            let r = match within(&mut timer, s.writable()).await {
                None => {
                    sh.p.borrow_mut().c.failures.timed_out += 1;
                    return false;
                }
                Some(r) => r.and_then(|()| s.take_error()),
            };
            let e = match r {
                Ok(None) => None,
                Ok(Some(e)) | Err(e) => Some(e),
            };
            if let Some(e) = e {
                sh.p.borrow_mut().connect_failed(&e, self.p.g);
                return false;
            }
        }
        let connected_ns = sys::monotonic_ns();
        sh.p.borrow_mut().connected(&self.p, connected_ns);
        // With TLS: when its handshake ended, where the WebSocket handshake's time starts
        // (so `tls_handshake` and `ws_handshake` add up, as in the epoll client).
        let mut tls_done_ns = None;
        if let Some((connector, name)) = &sh.tls
            && let Some(Stream::Tcp(s)) = stream.take()
        {
            *stream = {
                let r = within(&mut timer, connector.connect(name.clone(), s)).await;
                let mut p = sh.p.borrow_mut();
                match r {
                    None => {
                        p.c.failures.tls += 1;
                        p.c.tls_errors.timeout += 1;
                        return false;
                    }
                    Some(Err(e)) => {
                        let first = p.c.tls_errors.total() == 0;
                        if let Some(f) = count_handshake_failure(&e, &mut p.c.tls_errors)
                            && first
                        {
                            // The cause in rustls's words, once (as the epoll client).
                            eprintln!(
                                "c1m client: shard {}: a TLS handshake failed: {f} (every failure is counted in tls_errors; only the first is printed)",
                                p.cfg.shard
                            );
                        }
                        p.c.failures.tls += 1;
                        return false;
                    }
                    Some(Ok(t)) => {
                        let done = sys::monotonic_ns();
                        p.tls_handshaken(&self.p, connected_ns, done);
                        tls_done_ns = Some(done);
                        Some(Stream::tls(t, &mut p.c.tls_handshakes))
                    }
                }
            };
        }
        let Some(s) = stream.as_mut() else {
            return false;
        };
        let now = tls_done_ns.unwrap_or_else(sys::monotonic_ns);
        if self.begin(&mut sh.p.borrow_mut(), s, now) == Flow::End {
            return false;
        }
        self.serve(sh, s, &mut timer).await
    }

    /// Reads and writes until the connection ends (false), or, with a timer (during
    /// setup), until it opens (true) or the timer fires (false, counted as timed out).
    async fn serve(&mut self, sh: &Shared, s: &mut Stream, timer: &mut Timer) -> bool {
        let mode = sh.p.borrow().cfg.mode;
        // `--heartbeat` and `--message-rate`, once open: the connection's clocks, on the
        // heap (an idle task without either carries 8 bytes for them), rebuilt when a
        // phase switches them (`switched` is the switch count they were built at).
        let open = timer.is_none();
        let mut switched = sh.switches.get();
        let mut clocks = if open {
            self.clocks(sh, mode, sys::monotonic_ns())
        } else {
            None
        };
        loop {
            if timer.is_some() && self.p.state == State::Open {
                return true;
            }
            if self.pending_out().is_some() || s.tls_pending() {
                // Backpressure: nothing is read while output (ours, or records rustls
                // sealed) waits for the socket.
                let r = {
                    let out = self.pending_out().map_or(&[][..], |o| &o[..]);
                    within(timer, poll_fn(|cx| s.poll_send(cx, out))).await
                };
                let mut p = sh.p.borrow_mut();
                match r {
                    None => {
                        p.c.failures.timed_out += 1;
                        return false;
                    }
                    Some(Ok(n)) => {
                        p.c.bytes_out += n as u64;
                        if let Some(sp) = self.spill.as_mut() {
                            sp.out.advance(n);
                            if sp.out.is_empty() {
                                sp.out = BytesMut::new();
                            }
                        }
                        self.shrink();
                    }
                    Some(Err(e)) => {
                        self.fail_or_close(&mut p, &e);
                        return false;
                    }
                }
                continue;
            }
            let read = poll_fn(|cx| {
                let mut buf = sh.buf.borrow_mut();
                let mut rb = ReadBuf::new(&mut buf);
                ready!(s.poll_read(cx, &mut rb))?;
                Poll::Ready(Ok::<_, io::Error>(rb.filled().len()))
            });
            let r = match clocks.as_deref_mut() {
                None if !open => within(timer, read).await,
                c => {
                    // Input first, then a switch, then the clocks (as a biased `select!`,
                    // in less room). An open connection: no connect timer.
                    let woke = {
                        let mut input = pin!(read);
                        let mut c = c;
                        poll_fn(|cx| {
                            if let Poll::Ready(v) = input.as_mut().poll(cx) {
                                return Poll::Ready(Woke::Input(v));
                            }
                            if sh.switches.get() != switched {
                                return Poll::Ready(Woke::Switched);
                            }
                            let Some(c) = c.as_deref_mut() else {
                                return Poll::Pending;
                            };
                            if let Some(b) = c.beat.as_mut()
                                && b.as_mut().poll(cx).is_ready()
                            {
                                return Poll::Ready(Woke::Beat);
                            }
                            if let Some(m) = c.msg.as_mut()
                                && m.as_mut().poll(cx).is_ready()
                            {
                                return Poll::Ready(Woke::Message);
                            }
                            Poll::Pending
                        })
                        .await
                    };
                    let now = sys::monotonic_ns();
                    match woke {
                        Woke::Input(v) => Some(v),
                        Woke::Switched => {
                            switched = sh.switches.get();
                            clocks = self.clocks(sh, mode, now);
                            continue;
                        }
                        Woke::Beat => {
                            let Some(c) = clocks.as_deref_mut() else {
                                continue;
                            };
                            if self.beat(&mut sh.p.borrow_mut(), s, now) == Flow::End {
                                return false;
                            }
                            c.beat = self.next_beat(sh, now + 1);
                            continue;
                        }
                        Woke::Message => {
                            let Some(c) = clocks.as_deref_mut() else {
                                continue;
                            };
                            let mut p = sh.p.borrow_mut();
                            if self.messages(&mut p, s, &mut c.msg_at, now) == Flow::End {
                                return false;
                            }
                            match c.msg.as_mut() {
                                Some(t) if !p.draining => t.as_mut().reset(instant_of(c.msg_at)),
                                _ => c.msg = None,
                            }
                            continue;
                        }
                    }
                }
            };
            // Nothing awaits from here to the next turn: the shared buffer still holds
            // what this read put there.
            let mut p = sh.p.borrow_mut();
            let n = match r {
                None => {
                    p.c.failures.timed_out += 1;
                    return false;
                }
                Some(Ok(0)) => {
                    if self.p.state == State::Open {
                        p.count_peer_eof();
                    } else {
                        p.c.failures.reset += 1;
                    }
                    return false;
                }
                Some(Ok(n)) => n,
                Some(Err(e)) => {
                    self.fail_or_close(&mut p, &e);
                    return false;
                }
            };
            p.c.bytes_in += n as u64;
            let mut buf = sh.buf.borrow_mut();
            let flow = match mode {
                Mode::Hold => Flow::Go,
                Mode::Echo if p.cfg.messages.is_some() => {
                    self.raw_messages(&mut p, &buf[..n]);
                    Flow::Go
                }
                Mode::Echo => match p.echo_input(&mut self.p, &buf[..n]) {
                    EchoStep::Mismatch => {
                        p.c.closed.echo_mismatch += 1;
                        Flow::End
                    }
                    EchoStep::Partial => Flow::Go,
                    EchoStep::RoundTrip => self.echo_next(&mut p, s),
                },
                Mode::Ws => self.ws(&mut p, &mut buf[..n], s),
            };
            if flow == Flow::End {
                return false;
            }
        }
    }

    /// The connection is set up (TCP, then TLS if any): the WebSocket handshake request,
    /// or open and the first echo.
    fn begin(&mut self, p: &mut Proto, s: &mut Stream, now: u64) -> Flow {
        if p.cfg.mode == Mode::Ws {
            let req = p.handshake_request(&mut self.p, now);
            let r = self.send(s, req);
            return counted(&mut p.c, r, |e, c| failure_of(e, &mut c.failures));
        }
        p.opened(&mut self.p, now);
        self.echo_next(p, s)
    }

    /// Writes what the socket takes now and queues the rest (the read loop flushes it).
    fn send(&mut self, s: &mut Stream, bytes: &[u8]) -> io::Result<u64> {
        if let Some(out) = self.pending_out() {
            if out.len() + bytes.len() > MAX_PENDING_OUT {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "peer not reading: output queue full",
                ));
            }
            self.spill_mut().out.extend_from_slice(bytes);
            return Ok(0);
        }
        let n = match s.try_write(bytes) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(e),
        };
        if n < bytes.len() {
            self.spill_mut().out.extend_from_slice(&bytes[n..]);
        }
        Ok(n as u64)
    }

    /// Output the socket has not taken yet, if any.
    fn pending_out(&self) -> Option<&BytesMut> {
        self.spill
            .as_deref()
            .map(|sp| &sp.out)
            .filter(|o| !o.is_empty())
    }

    fn spill_mut(&mut self) -> &mut Spill {
        self.spill.get_or_insert_with(Box::default)
    }

    /// Drops the spill once it holds nothing, so an idle connection returns to no heap.
    fn shrink(&mut self) {
        if self.spill.as_ref().is_some_and(|sp| sp.is_empty()) {
            self.spill = None;
        }
    }

    /// The clocks of an open connection in `mode` at `now`: its next heartbeat slot and
    /// next message, those that run (None: neither).
    fn clocks(&self, sh: &Shared, mode: Mode, now: u64) -> Option<Box<Clocks>> {
        let mut c = Clocks::default();
        if mode == Mode::Ws {
            c.beat = self.next_beat(sh, now);
        }
        if mode != Mode::Hold {
            c.msg_at = self.first_message(sh, now);
            if c.msg_at > 0 {
                c.msg = Some(Box::pin(tokio::time::sleep_until(instant_of(c.msg_at))));
            }
        }
        (c.beat.is_some() || c.msg.is_some()).then(|| Box::new(c))
    }

    /// `--heartbeat`: the timer of this connection's next slot at or after `now` (None
    /// without heartbeat). The `k`-th connection of the shard's `count` comes up at
    /// `k/count` of the interval, as an epoll shard's slot `k` does.
    fn next_beat(&self, sh: &Shared, now: u64) -> Timer {
        let p = sh.p.borrow();
        let (cfg, epoch) = p.cfg.heartbeat.zip(sh.beat_epoch.get())?;
        let k = self.p.g.saturating_sub(p.cfg.first) / p.cfg.stride.max(1);
        let phase = heartbeat::phase_ns(&cfg, p.cfg.shard, k, p.cfg.count);
        let at = heartbeat::next_slot(&cfg, epoch, phase, now);
        Some(Box::pin(tokio::time::sleep_until(instant_of(at))))
    }

    /// `--heartbeat`: this connection's slot came up: a ping, or the close of one whose
    /// ping went unanswered (counted; the connection ends).
    fn beat(&mut self, p: &mut Proto, s: &mut Stream, now: u64) -> Flow {
        match p.heartbeat_visit(&mut self.p, now) {
            None | Some(Visit::Wait) => Flow::Go,
            Some(Visit::Ping) => {
                let r = self.send(s, &p.out);
                counted(&mut p.c, r, |e, c| closed_by(e, &mut c.closed))
            }
            Some(Visit::Missed) => {
                if let Ok(n) = self.send(s, &p.out) {
                    p.c.bytes_out += n;
                }
                Flow::End
            }
        }
    }

    /// `--message-rate`: the instant of this connection's first message at or after `now`
    /// (0: no message rate). The `k`-th connection of the shard's `count` comes up at
    /// `k/count` of the interval, as an epoll shard's slot `k` does.
    fn first_message(&self, sh: &Shared, now: u64) -> u64 {
        let p = sh.p.borrow();
        let Some((cfg, epoch)) = p.cfg.messages.zip(sh.msg_epoch.get()) else {
            return 0;
        };
        let k = self.p.g.saturating_sub(p.cfg.first) / p.cfg.stride.max(1);
        let phase = messages::phase_ns(&cfg, p.cfg.shard, k, p.cfg.count);
        messages::next_slot(&cfg, epoch, phase, now).max(1)
    }

    /// `--message-rate`: every message whose instant passed by `now` (a task that woke
    /// late catches up, each stamped with its own instant), in one write; `at` becomes
    /// the next one's instant.
    fn messages(&mut self, p: &mut Proto, s: &mut Stream, at: &mut u64, now: u64) -> Flow {
        let Some(cfg) = p.cfg.messages else {
            return Flow::Go;
        };
        p.out.clear();
        if p.msg_from == 0 && p.ramp_finished() {
            // Messages from the end of the ramp, as the epoll engine's: the first task to
            // wake after it says when.
            p.msg_from = now;
        }
        while *at <= now {
            // Slots before the ramp's end pass unsent.
            if p.msg_from > 0 && *at >= p.msg_from && !p.message(&mut self.p, *at, now) {
                break;
            }
            *at = at.saturating_add(cfg.interval_ns);
        }
        if p.out.is_empty() {
            return Flow::Go;
        }
        let r = self.send(s, &p.out);
        counted(&mut p.c, r, |e, c| closed_by(e, &mut c.closed))
    }

    /// Raw echo mode with `--message-rate`: whole messages matched, a cut one kept.
    fn raw_messages(&mut self, p: &mut Proto, buf: &[u8]) {
        let mut sp = self.spill.take();
        let mut inbuf = sp
            .as_mut()
            .map(|sp| std::mem::take(&mut sp.inbuf))
            .unwrap_or_default();
        if inbuf.is_empty() {
            let used = p.message_input(&mut self.p, buf);
            inbuf.extend_from_slice(&buf[used..]);
        } else {
            inbuf.extend_from_slice(buf);
            let used = p.message_input(&mut self.p, &inbuf);
            inbuf.advance(used);
        }
        if !inbuf.is_empty() {
            sp.get_or_insert_with(Box::default).inbuf = inbuf;
        }
        self.spill = sp;
        self.shrink();
    }

    /// Sends the next echo request if more are wanted.
    fn echo_next(&mut self, p: &mut Proto, s: &mut Stream) -> Flow {
        let Some(bytes) = p.echo_request(&mut self.p) else {
            return Flow::Go;
        };
        let r = self.send(s, bytes);
        counted(&mut p.c, r, |e, c| closed_by(e, &mut c.closed))
    }

    fn fail_or_close(&self, p: &mut Proto, e: &io::Error) {
        // A TLS record rustls refused: counted by cause, as the epoll client does.
        if let Some(f) = tls_error(e) {
            f.count(&mut p.c.tls_errors);
            if self.p.state == State::Open {
                p.c.closed.error += 1;
            } else {
                p.c.failures.tls += 1;
            }
            return;
        }
        if self.p.state == State::Open {
            closed_by(e, &mut p.c.closed);
        } else {
            failure_of(e, &mut p.c.failures);
        }
    }

    /// WebSocket input in `buf` (the shared buffer): decoded after any partial frame kept.
    fn ws(&mut self, p: &mut Proto, buf: &mut [u8], s: &mut Stream) -> Flow {
        let mut sp = self.spill.take();
        let mut frag = sp.as_mut().and_then(|sp| sp.frag.take());
        let mut inbuf = sp
            .as_mut()
            .map(|sp| std::mem::take(&mut sp.inbuf))
            .unwrap_or_default();
        let spilled = !inbuf.is_empty();
        if spilled {
            inbuf.extend_from_slice(buf);
        }
        let data: &mut [u8] = if spilled { &mut inbuf } else { buf };
        let len = data.len();
        let step = p.ws_input(&mut self.p, data, &mut frag);
        // Keep an incomplete frame or head for the next read; an idle connection keeps none.
        if step.end.is_none() && step.used < len {
            if spilled {
                inbuf.advance(step.used);
            } else {
                inbuf.extend_from_slice(&buf[step.used..]);
            }
        } else {
            inbuf = BytesMut::new();
        }
        if !inbuf.is_empty() || frag.is_some() {
            let sp = sp.get_or_insert_with(Box::default);
            sp.inbuf = inbuf;
            sp.frag = frag;
        }
        self.spill = sp;
        self.shrink();
        let sent = if p.out.is_empty() {
            Ok(0)
        } else {
            self.send(s, &p.out)
        };
        let now = sys::monotonic_ns();
        if let Some(end) = step.end {
            if step.became_open && !end.failed() {
                p.opened(&mut self.p, now);
            }
            if let Ok(n) = sent {
                p.c.bytes_out += n;
            }
            end.count(&mut p.c);
            return Flow::End;
        }
        let n = match sent {
            Ok(n) => n,
            Err(e) => {
                if step.became_open {
                    p.opened(&mut self.p, now);
                }
                self.fail_or_close(p, &e);
                return Flow::End;
            }
        };
        p.c.bytes_out += n;
        if step.became_open {
            p.opened(&mut self.p, now);
            self.echo_next(p, s)
        } else if step.rtt_done {
            self.echo_next(p, s)
        } else {
            Flow::Go
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;
    use crate::workload::{config::EngineKind, push_format::PushFormat};

    fn cfg() -> ClientShardConfig {
        ClientShardConfig {
            shard: 0,
            engine: EngineKind::Tokio,
            mode: Mode::Ws,
            count: 1,
            first: 0,
            stride: 1,
            targets: vec![([127, 0, 0, 1], 1).into()],
            sources: Vec::new(),
            source_ports: None,
            rate: 0.0,
            in_flight: 1,
            connect_timeout_ms: 1000,
            payload: 16,
            echo_count: 0,
            path: "/".into(),
            host: "h".into(),
            max_message: 1 << 20,
            seed: 1,
            clock_offset_ns: 0,
            push_format: PushFormat::C1m,
            push_latency: Default::default(),
            tls: None,
            heartbeat: None,
            churn: None,
            messages: None,
        }
    }

    /// The connection task's future is most of what an idle connection costs in user
    /// space (with tokio's task header and its I/O registration): keep it small. Measured
    /// 15,000 idle connections: see ARCHITECTURE.md.
    #[test]
    fn a_connection_task_stays_small() {
        let rt = runtime().unwrap();
        LocalSet::new().block_on(&rt, async {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let stream = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
            let sh = Rc::new(Shared::new(cfg(), Arc::default()).unwrap());
            let permit = sh.slots.clone().try_acquire_owned().unwrap();
            let conn = Conn {
                p: ConnProto::new(0, 0),
                spill: None,
            };
            let fut = conn.run(sh, Some(Stream::Tcp(stream)), true, permit);
            let size = size_of_val(&fut);
            eprintln!("connection future: {size} bytes");
            assert!(size <= 512, "connection future grew to {size} bytes");
        });
    }
}
