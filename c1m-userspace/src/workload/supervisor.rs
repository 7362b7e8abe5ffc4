//! The supervisor: starts the shards, aggregates their reports into one [`AppSnapshot`],
//! serves the control endpoint, prints `connections: N`, handles signals, and runs the
//! client's ramp → hold → close lifecycle. Server and client share it; `Side` decides
//! the few places they differ.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{Arc, atomic::AtomicU64},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;
use tokio::{
    signal::unix::{SignalKind, signal},
    sync::mpsc,
    time::sleep_until,
};

use super::{
    config::{Mode, ShardCommand, ShardConfig},
    control::{self, Request},
    engine::ShardEvent,
    limits::Plan,
    push_trigger::PushTrigger,
    shard::{self, ShardHandle},
    stats::{
        self,
        counters::Counters,
        histograms::{HIST_NAMES, Percentiles},
        report::{PushStat, WorkerReport},
        snapshot::{AppSnapshot, PushSummary, ShardKind, WorkerInfo, Workers},
    },
    sys,
};
use crate::procstat;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Server,
    Client,
}

/// Everything the supervisor needs besides the shard configs.
pub struct Options {
    pub side: Side,
    pub mode: Mode,
    pub target: u64,
    pub control: Option<String>,
    /// Require a token on the control endpoint, written here.
    pub control_token_file: Option<PathBuf>,
    pub stats_json: Option<PathBuf>,
    pub quiet: bool,
    /// Server: push schedule.
    pub push_every: Option<Duration>,
    /// Server: shards writing a push at once (0: all).
    pub push_writers: usize,
    /// Server: stop after this long. Client: hold this long after the ramp (None: until told).
    pub duration: Option<Duration>,
    /// Client: keep running after teardown until `stop`.
    pub stay: bool,
    /// Setup-rate table step.
    pub step: u64,
    /// Client: `--rate`, conn/s (0: unpaced).
    pub rate: f64,
    /// Client: begin the ramp at this wall-clock instant (CLOCK_REALTIME ns), so the
    /// hosts of a multi-host run ramp together.
    pub start_at_unix_ns: Option<u64>,
    /// Client: end once every connection is closed after the ramp (the server closed
    /// them: a multi-host run's teardown is the server's).
    pub end_when_peer_closes: bool,
    /// A snapshot every second, for a client host's run folder.
    pub samples: Option<mpsc::UnboundedSender<AppSnapshot>>,
    /// Client: fire this push trigger once the ramp is done (a foreign server), at
    /// this server pid for a signal.
    pub push_trigger: Option<PushTrigger>,
    pub server_pid: Option<u32>,
}

/// Client: where the one push of `--push-trigger` stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TriggerStep {
    /// Not yet (ramping), or no trigger.
    Waiting,
    /// Push 1 is marked; the trigger fires when every shard has taken the mark.
    Marked,
    Fired,
}

struct ShardState {
    handle: ShardHandle,
    counters: Counters,
    hists: BTreeMap<String, Histogram<u64>>,
    pushes: BTreeMap<u64, PushStat>,
    alive: bool,
    exit: Option<String>,
    ready: bool,
    ramp_done: bool,
    closed_all: bool,
    cpu: (f64, f64),
    /// When the shard read the counters of its last report (realtime ns).
    reported_unix_ns: u64,
    /// How late this supervisor read that report (realtime ns): a supervisor starved of
    /// CPU reads reports late, and then newer ones may wait unread in the pipe.
    report_lag_ns: u64,
    /// Client: the last push mark the shard took.
    mark: u64,
}

struct Supervisor {
    o: Options,
    split: String,
    shards: Vec<ShardState>,
    timeline: Vec<u64>,
    started: Instant,
    /// Client: when the ramp began, and when it ended.
    ramp: Option<(Instant, Option<Instant>)>,
    rss_baseline: u64,
    phase: &'static str,
    /// Stop was sent: exits are expected.
    stopping: bool,
    next_push: u64,
    /// Shards waiting for a push, in order: (shard, push id, broadcast start).
    push_queue: std::collections::VecDeque<(usize, u64, u64)>,
    /// Shards writing a push now (at most `push_limit`).
    pushing: std::collections::BTreeSet<usize>,
    /// Shards that may write a push at once, as the newest push asked (0: all).
    push_limit: usize,
    /// Client: the `--push-trigger` push.
    trigger: TriggerStep,
    fatal: Option<String>,
    /// Warnings already printed.
    warned: std::collections::HashSet<String>,
}

/// How often `connections: N` is printed (the seed's handler printed every 2 s).
const PRINT_EVERY: Duration = Duration::from_secs(2);

/// How long shards get to start, and to finish after `stop`, before we give up on them.
const SHARD_GRACE: Duration = Duration::from_secs(30);

/// Runs one side to completion.
pub async fn run(o: Options, plan: &Plan, configs: Vec<ShardConfig>) -> Result<AppSnapshot> {
    // The supervisor watches its shards (their reports, the control endpoint); the shards
    // it starts go back to the default weight.
    crate::priority::watcher();
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
    let open = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::with_capacity(configs.len());
    for cfg in configs {
        let h = if plan.processes {
            shard::spawn_process(cfg, ev_tx.clone()).await?
        } else {
            shard::spawn_thread(cfg, ev_tx.clone(), open.clone())?
        };
        handles.push(h);
    }
    drop(ev_tx);
    let mut sup = Supervisor {
        split: plan.line.clone(),
        shards: handles
            .into_iter()
            .map(|handle| ShardState {
                handle,
                counters: Counters::default(),
                hists: BTreeMap::new(),
                pushes: BTreeMap::new(),
                alive: true,
                exit: None,
                ready: false,
                ramp_done: false,
                closed_all: false,
                cpu: (0.0, 0.0),
                reported_unix_ns: 0,
                report_lag_ns: 0,
                mark: 0,
            })
            .collect(),
        timeline: Vec::new(),
        started: Instant::now(),
        ramp: None,
        rss_baseline: 0,
        phase: "starting",
        stopping: false,
        next_push: 1,
        push_queue: Default::default(),
        pushing: Default::default(),
        push_limit: 0,
        trigger: TriggerStep::Waiting,
        fatal: None,
        warned: Default::default(),
        o,
    };
    sup.main(&mut ev_rx).await
}

impl Supervisor {
    fn pids(&self) -> Vec<u32> {
        let mut p = vec![std::process::id()];
        p.extend(
            self.shards
                .iter()
                .filter(|s| s.handle.process && s.alive)
                .map(|s| s.handle.pid),
        );
        p
    }

    fn rss(&self) -> u64 {
        self.pids()
            .iter()
            .filter_map(|&p| procstat::rss_bytes(p))
            .sum()
    }

    fn broadcast(&self, c: ShardCommand) {
        for s in self.shards.iter().filter(|s| s.alive) {
            s.handle.send(c);
        }
    }

    fn on_event(&mut self, ev: ShardEvent) {
        match ev {
            ShardEvent::Report(r) => self.on_report(*r),
            ShardEvent::Exited { shard, why } => {
                let stopping = self.stopping;
                let Some(s) = self.shards.get_mut(shard as usize) else {
                    return;
                };
                if let Some((u, sy)) = s
                    .handle
                    .process
                    .then(|| procstat::cpu_seconds(s.handle.pid))
                    .flatten()
                {
                    s.cpu = (u, sy);
                }
                s.alive = false;
                let lost = s.counters.open;
                if !(stopping && s.closed_all) || why != "stopped" {
                    s.exit = Some(why.clone());
                }
                if lost > 0 || s.counters.in_flight > 0 {
                    s.counters.closed.worker_lost += lost;
                    s.counters.ws_open = 0;
                    s.counters.open = 0;
                    s.counters.failures.aborted += s.counters.in_flight;
                    s.counters.in_flight = 0;
                }
                if !stopping || lost > 0 {
                    let what = if s.handle.process {
                        "worker"
                    } else {
                        "shard thread"
                    };
                    eprintln!(
                        "c1m {}: {what} {shard} (pid {}) ended ({why}); its {lost} open connections are counted as lost",
                        side_name(self.o.side),
                        s.handle.pid
                    );
                }
                // Its turn at a push is over: the next shard waiting may start.
                if self.pushing.remove(&(shard as usize)) {
                    self.dispatch_pushes();
                }
            }
        }
    }

    fn on_report(&mut self, r: WorkerReport) {
        let Some(s) = self.shards.get_mut(r.shard as usize) else {
            return;
        };
        // CPU time is read while the worker is alive: once it exits and is reaped, its
        // /proc entry is gone. Its last report (teardown done, or fatal) comes just
        // before that; the others need no read here, `snapshot` reads live workers when
        // asked (up to 120 workers × 4 reports/s would be 480 /proc reads a second).
        if s.handle.process
            && (r.closed_all || r.fatal.is_some())
            && let Some(c) = procstat::cpu_seconds(s.handle.pid)
        {
            s.cpu = c;
        }
        for w in &r.warnings {
            // Every shard hits the same wall at once: say each thing once (numbers such as
            // ports and counts differ between shards, so they do not make a new message).
            let key: String = w.chars().filter(|c| !c.is_ascii_digit()).collect();
            if self.warned.insert(key) {
                eprintln!("c1m {}: {w}", side_name(self.o.side));
            }
        }
        if let Some(f) = &r.fatal {
            eprintln!(
                "c1m {} shard {}: fatal: {f}",
                side_name(self.o.side),
                r.shard
            );
            self.fatal.get_or_insert_with(|| f.clone());
        }
        s.counters = r.counters;
        s.reported_unix_ns = r.unix_ns;
        s.report_lag_ns = sys::realtime_ns().saturating_sub(r.unix_ns);
        s.ready |= r.ready;
        s.ramp_done = r.ramp_done;
        s.closed_all = r.closed_all;
        s.mark = r.mark;
        for (name, blob) in &r.hists {
            match stats::histograms::decode_hist(blob) {
                Ok(h) => {
                    s.hists.insert(name.clone(), h);
                }
                Err(e) => eprintln!("c1m: shard {}: bad histogram {name}: {e}", r.shard),
            }
        }
        for p in r.pushes {
            s.pushes.insert(p.push_id, p);
        }
        if r.push_done.is_some() && self.pushing.remove(&(r.shard as usize)) {
            self.dispatch_pushes();
        }
        for (bin, n) in r.timeline {
            let bin = bin as usize;
            if self.timeline.len() <= bin {
                self.timeline.resize(bin + 1, 0);
            }
            self.timeline[bin] += u64::from(n);
        }
    }

    fn counters(&self) -> Counters {
        let mut c = Counters::default();
        for s in &self.shards {
            c.add(&s.counters);
        }
        c
    }

    fn snapshot(&mut self) -> AppSnapshot {
        let counters = self.counters();
        let mut hists: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
        for name in HIST_NAMES {
            let Ok(mut merged) = stats::histograms::new_hist() else {
                continue;
            };
            for s in &self.shards {
                if let Some(h) = s.hists.get(name)
                    && let Err(e) = merged.add(h)
                {
                    eprintln!("c1m: merge {name}: {e}");
                }
            }
            hists.insert(name.to_owned(), merged);
        }
        let mut pushes: BTreeMap<u64, PushStat> = BTreeMap::new();
        for s in &self.shards {
            for (id, p) in &s.pushes {
                pushes.entry(*id).or_default().merge(p);
            }
        }
        let (mut cpu_u, mut cpu_s) =
            procstat::cpu_seconds(std::process::id()).unwrap_or((0.0, 0.0));
        for s in self.shards.iter_mut().filter(|s| s.handle.process) {
            if s.alive
                && let Some(c) = procstat::cpu_seconds(s.handle.pid)
            {
                s.cpu = c;
            }
            cpu_u += s.cpu.0;
            cpu_s += s.cpu.1;
        }
        let rss = self.rss();
        let open = counters.open;
        let now_ns = sys::realtime_ns();
        let lost = counters.closed.worker_lost > 0;
        AppSnapshot {
            side: side_name(self.o.side).to_owned(),
            mode: self.o.mode.name().to_owned(),
            unix_ns: now_ns,
            counts_unix_ns: counts_instant(
                now_ns,
                self.shards
                    .iter()
                    .filter(|s| s.alive)
                    .map(|s| (s.reported_unix_ns, s.report_lag_ns)),
            ),
            uptime_s: self.started.elapsed().as_secs_f64(),
            phase: self.phase.to_owned(),
            target: self.o.target,
            split: self.split.clone(),
            counters,
            workers: Workers {
                count: self.shards.len() as u32,
                alive: self.shards.iter().filter(|s| s.alive).count() as u32,
                list: self
                    .shards
                    .iter()
                    .map(|s| WorkerInfo {
                        shard: s.handle.shard,
                        pid: s.handle.pid,
                        kind: if s.handle.process {
                            ShardKind::Process
                        } else {
                            ShardKind::Thread
                        },
                        alive: s.alive,
                        open: s.counters.open,
                        exit: s.exit.clone(),
                    })
                    .collect(),
            },
            setup_steps: stats::setup_rate::setup_steps(&self.timeline, self.o.step),
            setup_rate: self.ramp.map(|(began, ended)| {
                let duration_s = match ended {
                    Some(end) => stats::setup_rate::last_connection_s(&self.timeline)
                        .unwrap_or_else(|| end.duration_since(began).as_secs_f64()),
                    None => began.elapsed().as_secs_f64(),
                };
                stats::setup_rate::SetupRate::of_timeline(
                    self.o.rate,
                    counters.connected,
                    duration_s,
                    &self.timeline,
                )
            }),
            push_mark: self
                .shards
                .iter()
                .filter(|s| s.alive)
                .map(|s| s.mark)
                .min()
                .unwrap_or(0),
            pushes: pushes.into_values().map(PushSummary::from).collect(),
            rss_bytes: rss,
            rss_baseline_bytes: self.rss_baseline,
            // A lost worker took its memory and its share of the baseline with it: no
            // figure is better than a wrong one (it read 0 B).
            rss_per_connection_bytes: (open > 0 && !lost)
                .then(|| rss.saturating_sub(self.rss_baseline) as f64 / open as f64),
            cpu_user_s: cpu_u,
            cpu_sys_s: cpu_s,
            threads: None,
            open_fds: None,
            percentiles: hists
                .iter()
                .map(|(k, h)| (k.clone(), Percentiles::of(h)))
                .collect(),
            histograms: hists
                .iter()
                .filter_map(|(k, h)| Some((k.clone(), stats::histograms::encode_hist(h).ok()?)))
                .collect(),
        }
    }

    fn all_dead(&self) -> bool {
        self.shards.iter().all(|s| !s.alive)
    }

    /// Waits until every shard reported ready (or died).
    async fn wait_ready(&mut self, rx: &mut mpsc::UnboundedReceiver<ShardEvent>) -> Result<()> {
        let deadline = tokio::time::Instant::now() + SHARD_GRACE;
        while self.shards.iter().any(|s| s.alive && !s.ready) {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Some(ev) => self.on_event(ev),
                    None => break,
                },
                _ = sleep_until(deadline) => bail!("shards did not start within {SHARD_GRACE:?}"),
            }
            if let Some(f) = &self.fatal {
                self.stopping = true;
                self.broadcast(ShardCommand::Stop);
                bail!("{f}");
            }
        }
        if self.all_dead() {
            bail!("every shard failed to start");
        }
        Ok(())
    }

    async fn main(&mut self, rx: &mut mpsc::UnboundedReceiver<ShardEvent>) -> Result<AppSnapshot> {
        if !self.o.quiet {
            println!("{}", self.split);
        }
        let (ctl_tx, mut ctl_rx) = mpsc::unbounded_channel::<Request>();
        // Held until this returns: dropping it removes the socket and token files.
        let _control = match &self.o.control {
            Some(ep) => Some(
                control::serve(
                    control::Endpoint::parse(ep),
                    self.o.control_token_file.as_deref(),
                    ctl_tx,
                )
                .await?,
            ),
            None => {
                drop(ctl_tx);
                None
            }
        };
        self.wait_ready(rx).await?;
        // Settle briefly so the baseline includes what start-up touched (listeners, stacks).
        tokio::time::sleep(Duration::from_millis(200)).await;
        self.rss_baseline = self.rss();
        let is_client = self.o.side == Side::Client;
        if is_client && let Some(at) = self.o.start_at_unix_ns {
            let wait = at.saturating_sub(sys::realtime_ns());
            if !self.o.quiet {
                println!("waiting {:.1} s for --start-at", wait as f64 / 1e9);
            }
            tokio::time::sleep(Duration::from_nanos(wait)).await;
        }
        if is_client {
            self.phase = "ramp";
            self.ramp = Some((Instant::now(), None));
            self.broadcast(ShardCommand::Start {
                t0_mono_ns: sys::monotonic_ns(),
            });
        } else {
            self.phase = "running";
        }
        let mut sigint = signal(SignalKind::interrupt()).context("SIGINT handler")?;
        let mut sigterm = signal(SignalKind::terminate()).context("SIGTERM handler")?;
        let mut print = tokio::time::interval(PRINT_EVERY);
        print.tick().await;
        let mut sample = tokio::time::interval(Duration::from_secs(1));
        let far = tokio::time::Instant::now() + Duration::from_secs(86400 * 365);
        let mut push_tick =
            tokio::time::interval(self.o.push_every.unwrap_or(Duration::from_secs(86400)));
        push_tick.tick().await;
        // Server: stop at `duration`. Client: close at `duration` after the ramp.
        let mut deadline = match (self.o.side, self.o.duration) {
            (Side::Server, Some(d)) => tokio::time::Instant::now() + d,
            _ => far,
        };
        let mut stop_deadline = far;
        let mut signals = 0;
        let mut ctl_open = self.o.control.is_some();
        loop {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Some(ev) => {
                        self.on_event(ev);
                        if self.stopping {
                            // Shards are still finishing: give the rest more time.
                            stop_deadline = stop_deadline.max(tokio::time::Instant::now() + SHARD_GRACE);
                        }
                    }
                    None => break,
                },
                req = ctl_rx.recv(), if ctl_open => match req {
                    Some(req) => self.on_control(req),
                    None => ctl_open = false,
                },
                _ = print.tick(), if !self.o.quiet => println!("connections: {}", self.counters().open),
                _ = sample.tick(), if self.o.samples.is_some() => {
                    let snap = self.snapshot();
                    if let Some(tx) = &self.o.samples {
                        let _ = tx.send(snap);
                    }
                }
                _ = push_tick.tick(), if self.o.push_every.is_some() && !self.stopping => {
                    self.push(self.o.push_writers);
                }
                _ = sleep_until(deadline) => {
                    deadline = far;
                    if is_client { self.close() } else { self.stop() }
                }
                _ = sleep_until(stop_deadline) => {
                    eprintln!("c1m {}: shards stopped making progress for {SHARD_GRACE:?}; leaving them", side_name(self.o.side));
                    break;
                }
                _ = sigint.recv() => signals += 1,
                _ = sigterm.recv() => signals += 1,
            }
            if signals == 1 && !self.stopping {
                // First signal: a client tears down (and then exits), a server stops.
                if is_client && matches!(self.phase, "ramp" | "hold") {
                    self.close();
                } else if !(is_client && self.phase == "closing") {
                    self.stop();
                }
            } else if signals >= 2 && !self.stopping {
                self.stop();
            }
            if is_client {
                if self.phase == "ramp"
                    && self.shards.iter().filter(|s| s.alive).all(|s| s.ramp_done)
                {
                    self.phase = "hold";
                    self.end_ramp();
                    if self.o.push_trigger.is_some() {
                        self.broadcast(ShardCommand::Mark {
                            id: 1,
                            started_unix_ns: 0,
                        });
                        self.trigger = TriggerStep::Marked;
                    }
                    if let Some(d) = self.o.duration {
                        deadline = tokio::time::Instant::now() + d;
                    }
                }
                if self.o.end_when_peer_closes && self.phase == "hold" {
                    let c = self.counters();
                    if c.open == 0 && c.in_flight == 0 {
                        // The server closed every connection: nothing left to hold.
                        self.close();
                    }
                }
                if self.trigger == TriggerStep::Marked
                    && self.shards.iter().filter(|s| s.alive).all(|s| s.mark >= 1)
                {
                    self.fire_trigger();
                }
                if self.phase == "closing"
                    && self.shards.iter().filter(|s| s.alive).all(|s| s.closed_all)
                {
                    self.phase = "closed";
                    if !self.o.stay || signals > 0 {
                        self.stop();
                    }
                }
            }
            if self.stopping && stop_deadline == far {
                // Closing is kernel work that all shards share two cores for: ~1 s per
                // 20,000 sockets on this box under load, on top of the base grace.
                let open = self.counters().open + self.counters().in_flight;
                stop_deadline =
                    tokio::time::Instant::now() + SHARD_GRACE + Duration::from_secs(open / 20_000);
            }
            if self.all_dead() {
                break;
            }
        }
        let snap = self.snapshot();
        if let Some(p) = &self.o.stats_json {
            let json = serde_json::to_vec_pretty(&snap)?;
            std::fs::write(p, json).with_context(|| format!("write {}", p.display()))?;
        }
        if !self.o.quiet {
            print!("{}", summary(&snap));
        }
        Ok(snap)
    }

    /// Starts a broadcast; `writers` shards write it at once (0: all), the others wait
    /// their turn. All at once is the fastest fan-out; a few at a time leaves the CPU to
    /// the readers, so a frame waits far less between write and read (measured at 1M on
    /// two cores: all 68 shards 11.9–12.3 s, per-message p99 49–311 ms; 4 at a time
    /// 14.5–15.1 s, p99 under 1 ms).
    fn push(&mut self, writers: usize) -> (u64, u64) {
        let id = self.next_push;
        self.next_push += 1;
        let started = sys::realtime_ns();
        // A newer push supersedes shards' turns at an older one not yet begun, so a
        // `--push-every` shorter than a fan-out cannot grow the queue without bound.
        self.push_queue.clear();
        for (i, _) in self.shards.iter().enumerate().filter(|(_, s)| s.alive) {
            self.push_queue.push_back((i, id, started));
        }
        self.push_limit = writers;
        self.dispatch_pushes();
        (id, started)
    }

    /// Starts queued pushes on shards that are not writing one, up to `push_limit` at once.
    fn dispatch_pushes(&mut self) {
        let max = match self.push_limit {
            0 => usize::MAX,
            n => n,
        };
        let mut i = 0;
        while self.pushing.len() < max && i < self.push_queue.len() {
            let (shard, id, started) = self.push_queue[i];
            if self.pushing.contains(&shard) {
                i += 1;
                continue;
            }
            self.push_queue.remove(i);
            let Some(s) = self.shards.get(shard).filter(|s| s.alive) else {
                continue;
            };
            s.handle.send(ShardCommand::Push {
                id,
                started_unix_ns: started,
            });
            self.pushing.insert(shard);
        }
    }

    /// Client: tells the shards when the push was triggered and triggers it (in a task:
    /// an HTTP or command trigger may take a while); a failure is said on stderr.
    fn fire_trigger(&mut self) {
        self.trigger = TriggerStep::Fired;
        let Some(trigger) = self.o.push_trigger.clone() else {
            return;
        };
        if trigger == PushTrigger::None {
            return;
        }
        self.broadcast(ShardCommand::Mark {
            id: 1,
            started_unix_ns: sys::realtime_ns(),
        });
        let pid = self.o.server_pid;
        tokio::spawn(async move {
            if let Err(e) = trigger.fire(pid).await {
                eprintln!("c1m client: --push-trigger {trigger}: {e:#}");
            }
        });
    }

    /// The ramp's end, once: every connect done, or teardown cut it short.
    fn end_ramp(&mut self) {
        if let Some((_, ended @ None)) = &mut self.ramp {
            *ended = Some(Instant::now());
        }
    }

    fn close(&mut self) {
        self.end_ramp();
        if matches!(self.phase, "ramp" | "hold" | "starting") {
            self.phase = "closing";
            self.broadcast(ShardCommand::Close);
        }
    }

    fn stop(&mut self) {
        if !self.stopping {
            self.stopping = true;
            if self.o.side == Side::Server {
                self.phase = "stopping";
            }
            self.broadcast(ShardCommand::Stop);
        }
    }

    fn on_control(&mut self, req: Request) {
        let side = self.o.side;
        let answer = match (req.line.as_str(), side) {
            ("stats", _) => {
                serde_json::to_string(&self.snapshot()).unwrap_or_else(|e| err_json(&e.to_string()))
            }
            (line, Side::Server) if line == "push" || line.starts_with("push ") => {
                match parse_push(line, self.o.push_writers) {
                    Err(e) => err_json(&e),
                    Ok(_) if self.o.mode != Mode::Ws => err_json("push needs --mode ws"),
                    Ok(writers) => {
                        let (id, started) = self.push(writers);
                        serde_json::json!({"push_id": id, "started_unix_ns": started, "writers": writers})
                            .to_string()
                    }
                }
            }
            (line, Side::Client) if line.starts_with("mark ") => match parse_mark(line) {
                Ok((id, started_unix_ns)) => {
                    self.broadcast(ShardCommand::Mark {
                        id,
                        started_unix_ns,
                    });
                    serde_json::json!({"ok": "marked", "push_id": id}).to_string()
                }
                Err(e) => err_json(&e),
            },
            ("close", Side::Client) => {
                self.close();
                serde_json::json!({"ok": "closing"}).to_string()
            }
            ("close", Side::Server) => {
                // Teardown by the server, for clients on other hosts: every shard
                // closes its connections and keeps reporting.
                self.phase = "closing";
                self.broadcast(ShardCommand::Close);
                serde_json::json!({"ok": "closing"}).to_string()
            }
            ("stop", _) => {
                if side == Side::Client {
                    self.close();
                }
                self.stop();
                serde_json::json!({"ok": "stopping"}).to_string()
            }
            (other, _) => err_json(&format!(
                "unknown command {:?}; {} side knows: stats, {}stop",
                control::line::excerpt(other),
                side_name(side),
                if side == Side::Server {
                    "push [WRITERS], close, time, "
                } else {
                    "close, time, mark ID UNIX_NS, "
                }
            )),
        };
        let _ = req.reply.send(answer);
    }
}

/// `push` or `push WRITERS` (shards writing at once, 0 for all) on the control endpoint.
fn parse_push(line: &str, default: usize) -> Result<usize, String> {
    match line.split_whitespace().collect::<Vec<_>>()[..] {
        ["push"] => Ok(default),
        ["push", n] => n.parse().map_err(|_| {
            format!(
                "push {:?}: WRITERS is how many shards write at once (0 for all), e.g. `push 4`",
                control::line::excerpt(n)
            )
        }),
        _ => Err(format!(
            "{:?}: say `push` or `push WRITERS`",
            control::line::excerpt(line)
        )),
    }
}

/// `mark ID UNIX_NS`: frames without an id that arrive from now on belong to push ID,
/// whose trigger fired at UNIX_NS (0: no trigger).
fn parse_mark(line: &str) -> Result<(u64, u64), String> {
    match line.split_whitespace().collect::<Vec<_>>()[..] {
        ["mark", id, at] => match (id.parse(), at.parse()) {
            (Ok(id), Ok(at)) => Ok((id, at)),
            _ => {
                Err("mark ID UNIX_NS: two whole numbers, e.g. `mark 1 1796000000000000000`".into())
            }
        },
        _ => Err(format!(
            "{:?}: say `mark ID UNIX_NS`",
            control::line::excerpt(line)
        )),
    }
}

fn err_json(msg: &str) -> String {
    serde_json::json!({ "error": msg }).to_string()
}

pub fn side_name(s: Side) -> &'static str {
    match s {
        Side::Server => "server",
        Side::Client => "client",
    }
}

/// The human summary printed at exit.
pub fn summary(s: &AppSnapshot) -> String {
    let c = &s.counters;
    let mut out = String::new();
    let nz = |it: Vec<(&'static str, u64)>| {
        it.into_iter()
            .filter(|(_, v)| *v > 0)
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    out.push_str(&format!(
        "== {} ({}) after {:.1} s: {}\n",
        s.side, s.mode, s.uptime_s, s.split
    ));
    if s.side == "client" {
        out.push_str(&format!(
            "attempted={} connected={} open={} in_flight={}\n",
            c.attempted, c.connected, c.open, c.in_flight
        ));
    } else {
        out.push_str(&format!(
            "accepted={} open={} ws_open={}\n",
            c.accepted, c.open, c.ws_open
        ));
    }
    out.push_str(&format!("closed: {}\n", nz(c.closed.iter().collect())));
    out.push_str(&format!("failures: {}\n", nz(c.failures.iter().collect())));
    out.push_str(&format!(
        "protocol errors: {}\n",
        nz(c.protocol_errors.iter().collect())
    ));
    out.push_str(&format!(
        "bytes in={} out={} echo_round_trips={} pushes sent={} received={}\n",
        c.bytes_in, c.bytes_out, c.echo_round_trips, c.pushes_sent, c.pushes_received
    ));
    if let Some(b) = s.rss_per_connection_bytes {
        out.push_str(&format!(
            "rss {} (baseline {}): {b:.0} bytes per open connection\n",
            crate::fmt::bytes(s.rss_bytes as f64),
            crate::fmt::bytes(s.rss_baseline_bytes as f64)
        ));
    }
    out.push_str(&format!(
        "cpu user {:.2} s, sys {:.2} s\n",
        s.cpu_user_s, s.cpu_sys_s
    ));
    if !s.setup_steps.is_empty() {
        out.push_str("setup: connections  at_s  step_s  conn/s\n");
        for st in &s.setup_steps {
            out.push_str(&format!(
                "       {:>11}  {:>5.2}  {:>6.2}  {:>7.0}\n",
                st.connections, st.at_s, st.step_s, st.rate_per_s
            ));
        }
    }
    for p in &s.pushes {
        out.push_str(&format!(
            "push {}: {} {} , last {:.3} s after {}\n",
            p.push_id,
            p.count,
            if s.side == "server" {
                "written"
            } else {
                "received"
            },
            p.complete_s,
            if s.side == "server" {
                "the broadcast began"
            } else {
                "the push's start (its trigger, when one was marked)"
            }
        ));
    }
    for (name, p) in &s.percentiles {
        if p.count > 0 {
            out.push_str(&p.table(name));
        }
    }
    out
}

/// The instant a sum over shards describes: the mean of each shard's. A shard reports
/// every [`REPORT_EVERY_NS`] when its counters changed, so its counters are true as of its
/// last report, or as of one period ago if it had nothing new to say since, unless this
/// supervisor reads reports late (starved of CPU): then a newer report may be waiting
/// unread, and the period is pushed back by how late the last one was read. Without
/// that, a starved client's rate showed 47,657/s against a pace of 25,000/s at 1M.
fn counts_instant(now_ns: u64, reported: impl Iterator<Item = (u64, u64)>) -> u64 {
    let (sum, n) = reported.fold((0u128, 0u128), |(sum, n), (at, lag)| {
        let floor = now_ns
            .saturating_sub(super::engine::REPORT_EVERY_NS)
            .saturating_sub(lag);
        (sum + u128::from(at.max(floor).min(now_ns)), n + 1)
    });
    sum.checked_div(n)
        .and_then(|mean| u64::try_from(mean).ok())
        .unwrap_or(now_ns)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn counts_describe_the_shards_last_reports() {
        let period = super::super::engine::REPORT_EVERY_NS;
        let now = 10 * period;
        assert_eq!(counts_instant(now, std::iter::empty()), now);
        // Fresh reports count as they are; a quiet shard counts as one period old.
        assert_eq!(
            counts_instant(now, [(now - period / 2, 0), (0, 0)].into_iter()),
            now - period / 4 - period / 2
        );
        assert_eq!(counts_instant(now, [(now, 0)].into_iter()), now);
        // A quiet shard whose last report was read 3 periods late may have newer ones
        // waiting: its counts are as old as its last report, within that lag.
        assert_eq!(
            counts_instant(now, [(now - 5 * period, 3 * period)].into_iter()),
            now - 4 * period
        );
    }

    #[test]
    fn push_command_takes_an_optional_writer_count() {
        assert_eq!(parse_push("push", 0), Ok(0));
        assert_eq!(parse_push("push", 3), Ok(3));
        assert_eq!(parse_push("push 4", 0), Ok(4));
        assert!(
            parse_push("push four", 0)
                .unwrap_err()
                .contains("e.g. `push 4`")
        );
        assert!(parse_push("push 1 2", 0).is_err());
    }
}
