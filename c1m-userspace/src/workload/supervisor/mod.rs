//! The supervisor: starts the shards, aggregates their reports into one
//! [`AppSnapshot`], serves the control endpoint, prints `connections: N`, handles
//! signals, and runs the client's ramp → hold → close lifecycle. Server and client share
//! it; `Side` decides the few places they differ.
//!
//! This file holds the supervisor's state and its start; its work is in rooms:
//! `lifecycle` (the main loop), `aggregate` (reports in, snapshot out), `merged` (the
//! histograms summed over shards), `pushes` (the push path), `commands` (the control
//! endpoint's commands), `summary` (the exit summary).

mod aggregate;
mod commands;
mod lifecycle;
mod merged;
mod pushes;
mod summary;

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{Arc, atomic::AtomicU64},
    time::{Duration, Instant},
};

use anyhow::Result;
use tokio::sync::mpsc;

use super::{
    config::{Mode, ShardConfig},
    limits::Plan,
    push_trigger::PushTrigger,
    shard::{self, ShardHandle},
    stats::{counters::Counters, report::PushStat, snapshot::AppSnapshot},
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Server,
    Client,
}

/// Everything the supervisor needs besides the shard configs.
pub(crate) struct Options {
    pub side: Side,
    pub mode: Mode,
    pub target: u64,
    pub control: Option<String>,
    /// Require a token on the control endpoint, written here.
    pub control_token_file: Option<PathBuf>,
    /// The run's id, answered with `time` on the control endpoint (server hosts).
    pub run_id: Option<String>,
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
    /// Client `--churn`: when churning begins (None: no churn).
    pub churn: Option<crate::workload::churn::ChurnStart>,
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
    /// The shards' histograms summed, for snapshots.
    sums: merged::Sums,
    timeline: Vec<u64>,
    /// The timeline's peak search, kept between snapshots.
    peak: crate::workload::stats::setup_rate::PeakSearch,
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

/// Runs one side to completion.
pub(crate) async fn run(o: Options, plan: &Plan, configs: Vec<ShardConfig>) -> Result<AppSnapshot> {
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
        sums: merged::Sums::new(),
        timeline: Vec::new(),
        peak: Default::default(),
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

fn side_name(s: Side) -> &'static str {
    match s {
        Side::Server => "server",
        Side::Client => "client",
    }
}
