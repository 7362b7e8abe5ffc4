//! The tokio client shard: a task per connection on the shard's `LocalRuntime`, sharing
//! the shard's [`Proto`] (counters, histograms, WebSocket and echo logic, the same as the
//! epoll engine's) through an `Rc<RefCell<…>>`, since every task runs on the shard's one
//! thread.
//!
//! - A pacing task starts connects on the epoll engine's schedule (`pace`), holding a
//!   `Semaphore` permit per connect-and-handshake in flight (`--in-flight`).
//! - A connection's state is in the shard's slab (`slots`), its task's future only the
//!   shard and the slot's index (`conn`): 128 B of task a connection, not 640.
//! - A connection reads with `AsyncRead::poll_read` into the shard's one read buffer,
//!   borrowed only for the duration of a poll: an idle connection owns no buffer. Partial
//!   frames (`BytesMut`) and unsent output own heap until consumed. `poll_read` rather
//!   than `readable()` + `try_read`: tokio clears readiness on a short read there, saving
//!   the `EAGAIN` read per message.
//! - The connect timeout is a shard-level queue of setup steps swept at the report tick
//!   (`deadlines`), as the epoll client's, not a timer per connection. It bounds the TLS
//!   handshake too (with `--tls`, tokio-rustls's `TlsConnector::connect` on the connected
//!   socket), as in the epoll engine.
//! - Teardown and phase switches wake every connection's task through the wakers in its
//!   slot (no `Notified` per task); the shard waits until the last task is gone.

use std::{
    cell::{Cell, RefCell},
    pin::pin,
    rc::Rc,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result};
use rustls::pki_types::ServerName;
use tokio::{
    net::TcpStream,
    sync::{Notify, OwnedSemaphorePermit, Semaphore},
    time::Instant,
};
use tokio_rustls::TlsConnector;

mod conn;
mod deadlines;
mod goodbye;
mod input;
mod switch;

use conn::{Conn, ConnTask, Phase};
use deadlines::Deadlines;

use super::{
    AsyncCommands, REPORT_EVERY_NS, ShardIo, Sink, churn_board::Board, runtime, slots::Slots,
    stream::Stream,
};
use crate::workload::{
    churn,
    config::{ClientShardConfig, Mode, ShardCommand},
    engine::{
        READ_BUF,
        client::{
            PACE_NS,
            proto::{CloseWatch, ConnProto, Proto},
        },
        failure_of, pace,
    },
    sockopt::{self, Connecting},
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
    /// The connections, each its task's slot (see `conn`).
    conns: RefCell<Slots<Phase>>,
    /// Client teardown: set once, then every connection's task is woken (its slot's
    /// waker), and the pacing tasks by `teardown`.
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
    /// The connect timeout of the connections in setup (see `deadlines`).
    setups: RefCell<Deadlines>,
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
    rt.block_on(async move {
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
            let limit = sh.p.borrow().cfg.connect_timeout_ns();
            sh.setups.borrow_mut().sweep(sys::monotonic_ns(), limit);
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
        let room = usize::try_from(cfg.count).unwrap_or(0);
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
            setups: RefCell::default(),
            conns: RefCell::new(Slots::with_room(room)),
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
        self.conns.borrow().wake_all();
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
    /// A connection's task (or its goodbye's) is over; the last one at teardown says so.
    fn task_gone(&self) {
        self.live.set(self.live.get() - 1);
        if self.live.get() == 0 && self.closing.get() {
            self.gone.notify_one();
        }
    }

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
    drop(p);
    let setup = conn.setup_task(sh.clone(), Stream::Tcp(stream), done, permit);
    let idx = sh.conns.borrow_mut().insert(Phase::Setup(Box::pin(setup)));
    tokio::task::spawn_local(ConnTask {
        sh: sh.clone(),
        idx,
    });
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;
    use crate::workload::{config::EngineKind, push_format::PushFormat};

    pub(super) fn cfg() -> ClientShardConfig {
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

    /// A connection's task future is the shard and its slot's index, and the slot holds
    /// the open connection: together most of what an idle connection costs in user space
    /// (with tokio's task header and its I/O registration). Measured at 1M: see
    /// docs/results.md.
    #[test]
    fn a_connection_task_stays_small() {
        let (task, slot) = (
            size_of::<ConnTask>(),
            size_of::<super::super::slots::Slot<Phase>>(),
        );
        eprintln!("connection task future: {task} B, slot: {slot} B");
        assert!(task <= 24, "the connection task grew to {task} B");
        assert!(slot <= 160, "a connection's slot grew to {slot} B");
    }
}
