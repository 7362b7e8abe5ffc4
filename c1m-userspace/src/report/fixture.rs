//! A realistic, deterministic run for tests (here and in the lead's end-to-end test): a
//! 1,000,000-connection WebSocket run on a 2-core box — 20 s setup at 50k/s, 30 s idle,
//! 3 pushes, 10 s teardown — with every `Option` set, so schema checks see every field.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use hdrhistogram::Histogram;

use crate::{
    model::{
        Machine, PerConnection, RunRecord, Sample,
        config::RunConfig,
        kernel_vs_app::KernelVsApp,
        phase::{Phase, ProcessUsage},
    },
    observer::{
        mib::{MibCounters, MibDelta},
        view::{
            KernelMemory, KernelView, ListenerView, Retransmits, Scope, SideMemory, SideView,
            WalkInfo, state_key,
        },
    },
    workload::{
        stats::{
            counters::Counters,
            histograms::{Percentiles, encode_hist, new_hist},
            setup_rate::{PeakRate, SetupRate, SetupStep},
            snapshot::{AppSnapshot, PushSummary, WorkerInfo, Workers},
        },
        sys::splitmix64,
    },
};

/// 2026-01-01T00:00:00Z.
pub(crate) const START_UNIX_MS: u64 = 1_767_225_600_000;
const CONNS: u64 = 1_000_000;
const RATE: u64 = 50_000;

/// (phase, first second, end second)
const PHASES: [(&str, u64, u64); 4] = [
    ("setup", 1, 21),
    ("idle", 21, 51),
    ("push", 51, 61),
    ("teardown", 61, 71),
];
const END_S: u64 = 72;
const PUSH_AT_S: [u64; 3] = [52, 55, 58];

/// The charts the fixture's report must show (every one with points).
pub const FIXTURE_CHARTS: [&str; 11] = [
    "chart-conn-server",
    "chart-conn-client",
    "chart-handshakes",
    "chart-setup-rate",
    "chart-mem-per-conn",
    "chart-memory",
    "chart-cpu",
    "chart-lat-client-connect_us",
    "chart-lat-client-connect_from_schedule_us",
    "chart-lat-client-push_message_us",
    "chart-lat-client-push_fanout_us",
];

/// Runs of four or more digits that are not the decimals of a number: a count or a size
/// printed without its thousands separators.
pub fn unseparated(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut run = String::new();
    let mut after_point = false;
    let mut prev = ' ';
    for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
        if c.is_ascii_digit() {
            if run.is_empty() {
                // A port number has none: "port 8001".
                after_point = prev == '.' || text[..i].ends_with("port ");
            }
            run.push(c);
        } else {
            if run.len() >= 4 && !after_point {
                found.push(run.clone());
            }
            run.clear();
        }
        prev = c;
    }
    found
}

/// The run as `c1m run` would leave it.
pub fn sample_run() -> RunRecord {
    build(false).0
}

/// The run plus the cumulative snapshots the lab would have polled, once a second per
/// side, in order (feed them to [`IntervalRecorder`](super::IntervalRecorder)); the last
/// client snapshot is `run.client`.
pub fn sample_run_with_snapshots() -> (RunRecord, Vec<(String, AppSnapshot)>) {
    build(true)
}

/// A fresh, empty folder under the system temp dir, removed when dropped unless the
/// test is failing (its files are then left to look at) or `C1M_KEEP_TEST_DIRS` is set
/// (e.g. to keep the browser test's screenshots).
pub fn test_dir(name: &str) -> TestDir {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let dir =
        std::env::temp_dir().join(format!("c1m-export-{name}-{}-{nanos}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    TestDir(dir)
}

/// See [`test_dir`].
#[derive(Debug)]
pub struct TestDir(PathBuf);

impl std::ops::Deref for TestDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TestDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if !std::thread::panicking() && std::env::var_os("C1M_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A uniform deterministic number in [0, 1).
fn unit(seed: u64) -> f64 {
    (splitmix64(seed) >> 11) as f64 / (1u64 << 53) as f64
}

fn phase_at(t: u64) -> &'static str {
    PHASES
        .iter()
        .find(|(_, a, b)| (*a..*b).contains(&t))
        .map(|p| p.0)
        .unwrap_or(if t == 0 { "starting" } else { "done" })
}

/// Client connections open at the end of second `t`.
fn open_at(t: u64) -> u64 {
    match t {
        0 => 0,
        1..=20 => (RATE * t).min(CONNS) - if t < 20 { 1_800 } else { 0 },
        21..=60 => CONNS,
        61..=70 => CONNS.saturating_sub((t - 60) * 100_000),
        _ => 0,
    }
}

/// Latency histograms filled second by second: connect times during setup, the
/// per-message and fan-out latencies of each push.
struct Hists {
    connect: Histogram<u64>,
    connect_from_schedule: Histogram<u64>,
    push_message: Histogram<u64>,
    push_fanout: Histogram<u64>,
}

impl Hists {
    fn new() -> Hists {
        let h = || new_hist().expect("constant histogram bounds");
        Hists {
            connect: h(),
            connect_from_schedule: h(),
            push_message: h(),
            push_fanout: h(),
        }
    }

    /// Records what happened during second `t`.
    fn second(&mut self, t: u64) {
        let new = open_at(t).saturating_sub(open_at(t.saturating_sub(1)));
        if phase_at(t) == "setup" {
            for i in 0..new {
                let seed = t << 32 | i;
                // log-normal-ish around 0.9 ms, a slow tail, and SYN retransmits at 1 s.
                let base = 400.0 + 900.0 * (-unit(seed).ln());
                let tail = if unit(seed ^ 0xA5) < 0.002 {
                    1_000_000.0
                } else {
                    0.0
                };
                let connect = (base * (1.0 + 4.0 * unit(seed ^ 7).powi(8)) + tail) as u64;
                self.connect.saturating_record(connect);
                // Keeping up with the pace: a connect waits at most a few ms for a slot.
                let queued = (3_000.0 * unit(seed ^ 11).powi(4)) as u64;
                self.connect_from_schedule
                    .saturating_record(connect + queued);
            }
        }
        if PUSH_AT_S.contains(&t) {
            for i in 0..CONNS {
                let seed = (t << 40) ^ i ^ 0x5eed;
                // Frames go out over ~1.8 s on 2 cores: fan-out grows with the position.
                let pos = i as f64 / CONNS as f64;
                let fanout = 300.0 + 1_800_000.0 * pos + 20_000.0 * unit(seed);
                let msg =
                    150.0 + 2_000.0 * (-unit(seed ^ 3).ln()) + 60_000.0 * unit(seed ^ 9).powi(40);
                self.push_fanout.saturating_record(fanout as u64);
                self.push_message.saturating_record(msg as u64);
            }
        }
    }

    fn blobs(&self) -> (BTreeMap<String, String>, BTreeMap<String, Percentiles>) {
        let mut blobs = BTreeMap::new();
        let mut pct = BTreeMap::new();
        for (name, h) in [
            ("connect_us", &self.connect),
            ("connect_from_schedule_us", &self.connect_from_schedule),
            ("push_message_us", &self.push_message),
            ("push_fanout_us", &self.push_fanout),
        ] {
            if h.is_empty() {
                continue;
            }
            if let Ok(b) = encode_hist(h) {
                blobs.insert(name.to_owned(), b);
                pct.insert(name.to_owned(), Percentiles::of(h));
            }
        }
        (blobs, pct)
    }
}

struct Cpu {
    server: f64,
    client: f64,
    observer: f64,
}

/// CPU cores busy per phase (server, client, observer).
fn cores(phase: &str) -> (f64, f64, f64) {
    match phase {
        "setup" => (0.55, 0.72, 0.06),
        "idle" => (0.01, 0.02, 0.01),
        "push" => (0.38, 0.45, 0.02),
        "teardown" => (0.41, 0.36, 0.05),
        _ => (0.0, 0.0, 0.005),
    }
}

const SERVER_BASE: u64 = 12 << 20;
const CLIENT_BASE: u64 = 14 << 20;
const OBSERVER_RSS: u64 = 41 << 20;
const MEM_TOTAL: u64 = 24 << 30;
const SERVER_PER_CONN: f64 = 2_350.4;
const CLIENT_PER_CONN: f64 = 3_102.7;
const KERNEL_PER_SOCKET: f64 = 3_712.0;

fn build(with_snapshots: bool) -> (RunRecord, Vec<(String, AppSnapshot)>) {
    let mut hists = Hists::new();
    let mut cpu = Cpu {
        server: 0.0,
        client: 0.0,
        observer: 0.0,
    };
    let mut samples = Vec::new();
    let mut snaps = Vec::new();
    let mut overflows = 0u64;
    let mut connected = 0u64;
    for t in 0..=END_S {
        let phase = phase_at(t);
        hists.second(t);
        let (s, c, o) = cores(phase);
        cpu.server += s;
        cpu.client += c;
        cpu.observer += o;
        let open = open_at(t);
        let prev = open_at(t.saturating_sub(1));
        let setup = phase == "setup";
        connected += open.saturating_sub(prev);
        // The kernel has established what the server has not accepted yet.
        let backlog = match (setup, t) {
            (true, 20) => 412,
            (true, _) => 412 + (unit(t) * 300.0) as u64,
            _ => 0,
        };
        let in_flight = if setup { 1_800 } else { 0 };
        if t == 9 {
            overflows = 37;
        }
        let server_open = open.saturating_sub(backlog);
        let time_wait = if t > 60 { CONNS - open } else { 0 };
        let sockets = 2 * open + time_wait;
        let kernel_bytes =
            (sockets as f64 * KERNEL_PER_SOCKET * if time_wait > 0 { 0.7 } else { 1.0 }) as u64;
        let server_rss = SERVER_BASE + (server_open as f64 * SERVER_PER_CONN) as u64;
        let client_rss = CLIENT_BASE + (open as f64 * CLIENT_PER_CONN) as u64;
        let rate = if setup {
            RATE as f64 * (0.97 + 0.06 * unit(t ^ 77))
        } else {
            open.saturating_sub(prev) as f64
        };
        let avail = MEM_TOTAL - (1 << 30) - server_rss - client_rss - OBSERVER_RSS - kernel_bytes;
        // Rows are a second apart: CPU seconds gained since the last row are cores busy.
        let cores = |now: f64, get: fn(&Sample) -> Option<f64>| {
            samples.last().and_then(get).map(|before| now - before)
        };
        let (server_cores, client_cores, observer_cores) = (
            cores(cpu.server, |s| s.server_cpu_s),
            cores(cpu.client, |s| s.client_cpu_s),
            cores(cpu.observer, |s| s.observer_cpu_s),
        );
        samples.push(Sample {
            t_s: t as f64,
            unix_ms: START_UNIX_MS + t * 1000,
            phase: phase.to_owned(),
            kernel_server_established: Some(open as i64),
            kernel_client_established: Some((open + in_flight / 2) as i64),
            kernel_server_syn_recv: Some(if setup { 96 } else { 0 }),
            kernel_client_syn_sent: Some(if setup { 310 } else { 0 }),
            kernel_time_wait: Some(time_wait as i64),
            kernel_accept_queue_depth: Some(backlog),
            kernel_accept_queue_overflows: Some(overflows),
            kernel_transitions_per_s: Some(rate * 4.0),
            kernel_established_per_s: Some(rate),
            kernel_socket_bytes: Some(kernel_bytes),
            kernel_bytes_per_socket: (sockets > 0).then(|| kernel_bytes as f64 / sockets as f64),
            server_open: Some(server_open),
            server_accepted: Some(connected.saturating_sub(backlog)),
            client_open: Some(open),
            client_connected: Some(connected),
            client_failures: Some(0),
            client_connect_per_s: Some(rate),
            server_rss_bytes: Some(server_rss),
            client_rss_bytes: Some(client_rss),
            server_rss_per_connection_bytes: (server_open > 0)
                .then(|| (server_rss - SERVER_BASE) as f64 / server_open as f64),
            client_rss_per_connection_bytes: (open > 0)
                .then(|| (client_rss - CLIENT_BASE) as f64 / open as f64),
            server_cpu_s: Some(cpu.server),
            client_cpu_s: Some(cpu.client),
            client_cpu_sys_s: Some(cpu.client * 0.65),
            server_threads: None,
            server_open_fds: None,
            observer_rss_bytes: Some(OBSERVER_RSS),
            observer_cpu_s: Some(cpu.observer),
            server_cpu_cores: server_cores,
            client_cpu_cores: client_cores,
            observer_cpu_cores: observer_cores,
            box_mem_available_bytes: avail,
            kernel_age_s: Some(0.3),
            kernel_walk_age_s: Some(0.7),
            server_age_s: Some(0.2),
            client_age_s: Some(0.2),
            kernel_socket_bytes_derived: false,
        });
        if with_snapshots || t == END_S {
            let unix_ns = (START_UNIX_MS + t * 1000) * 1_000_000;
            let (blobs, pct) = hists.blobs();
            let last = samples.last().cloned().unwrap_or_default();
            let server = app_snapshot(
                "server",
                unix_ns,
                t,
                &last,
                &cpu,
                BTreeMap::new(),
                BTreeMap::new(),
            );
            let client = app_snapshot("client", unix_ns, t, &last, &cpu, blobs, pct);
            snaps.push(("server".to_owned(), server));
            snaps.push(("client".to_owned(), client));
        }
    }
    let mut snaps_out = snaps;
    let client = snaps_out
        .iter()
        .rev()
        .find(|(s, _)| s == "client")
        .map(|(_, a)| a.clone());
    let server = snaps_out
        .iter()
        .rev()
        .find(|(s, _)| s == "server")
        .map(|(_, a)| a.clone());
    if !with_snapshots {
        snaps_out.clear();
    }
    let run = RunRecord {
        c1m_version: env!("CARGO_PKG_VERSION").to_owned(),
        started_unix_ms: START_UNIX_MS,
        ended_unix_ms: START_UNIX_MS + END_S * 1000 + 420,
        outcome: crate::model::Outcome::Complete,
        config: config(),
        machine: machine(),
        phases: phases(&samples),
        kernel: Some(kernel_view(&samples)),
        audit: Some(crate::observer::audit::audit(&kernel_view(&samples))),
        server,
        client,
        per_connection: PerConnection {
            connections: CONNS,
            server_user_bytes: Some(SERVER_PER_CONN),
            client_user_bytes: Some(CLIENT_PER_CONN),
            kernel_bytes: Some(2.0 * KERNEL_PER_SOCKET),
            kernel_bytes_per_socket: Some(KERNEL_PER_SOCKET),
            ..PerConnection::default()
        },
        warnings: vec![
            "port 8001: the accept queue overflowed 37 times during setup (backlog 4,096): raise --backlog or lower --rate".to_owned(),
            "client: 1,812 connect() calls took over 1 s (SYN retransmitted): see connect_us above 1,000 ms".to_owned(),
        ],
        samples,
        host: None,
        multihost: None,
        server_info: Some(crate::model::ServerInfo {
            name: "c1m-epoll".into(),
            engine: Some(crate::workload::config::EngineKind::Epoll),
            runtime: None,
            library: Some(crate::model::Software {
                name: "c1m".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            }),
            shape: Some(crate::model::ServerShape {
                processes: 1,
                threads: 3,
            }),
            workers: None,
        }),
        start: Some(crate::model::StartState {
            unix_ms: START_UNIX_MS - 20,
            netns: crate::model::Netns::Fresh,
            sockets: Default::default(),
            sockets_on_ports: Default::default(),
            conntrack_entries: Some(0),
            mem_available_bytes: 20 << 30,
            waited_s: Some(0.0),
            wait_limit_s: Some(70.0),
        }),
        checks: Vec::new(),
    };
    (run, snaps_out)
}

fn app_snapshot(
    side: &str,
    unix_ns: u64,
    t: u64,
    s: &Sample,
    cpu: &Cpu,
    histograms: BTreeMap<String, String>,
    percentiles: BTreeMap<String, Percentiles>,
) -> AppSnapshot {
    let client = side == "client";
    let open = if client { s.client_open } else { s.server_open }.unwrap_or(0);
    let mut counters = Counters {
        open,
        ws_open: open,
        ..Counters::default()
    };
    if client {
        counters.attempted = s.client_connected.unwrap_or(0);
        counters.connected = s.client_connected.unwrap_or(0);
        counters.pushes_received = PUSH_AT_S.iter().filter(|p| **p <= t).count() as u64 * CONNS;
    } else {
        counters.accepted = s.server_accepted.unwrap_or(0);
        counters.pushes_sent = PUSH_AT_S.iter().filter(|p| **p <= t).count() as u64 * CONNS;
    }
    counters.closed.local_close = CONNS.saturating_sub(open) * u64::from(t > 60);
    let rss = if client {
        s.client_rss_bytes
    } else {
        s.server_rss_bytes
    }
    .unwrap_or(0);
    let (cpu_s, base) = if client {
        (cpu.client, CLIENT_BASE)
    } else {
        (cpu.server, SERVER_BASE)
    };
    let workers = Workers {
        count: 2,
        alive: 2,
        list: (0..2)
            .map(|i| WorkerInfo {
                shard: i,
                pid: 4100 + i + if client { 10 } else { 0 },
                kind: crate::workload::stats::snapshot::ShardKind::Process,
                alive: true,
                open: open / 2,
                exit: None,
            })
            .collect(),
    };
    let steps = if client && t >= 20 {
        (1..=10)
            .map(|k| SetupStep {
                connections: k * 100_000,
                at_s: 2.0 * k as f64 + 0.03 * unit(k),
                step_s: 2.0,
                rate_per_s: 100_000.0 / (2.0 + 0.06 * (unit(k) - 0.5)),
            })
            .collect()
    } else {
        Vec::new()
    };
    let pushes = PUSH_AT_S
        .iter()
        .enumerate()
        .filter(|(_, p)| **p <= t)
        .map(|(i, p)| {
            let started = (START_UNIX_MS + p * 1000) * 1_000_000;
            PushSummary {
                push_id: i as u64 + 1,
                started_unix_ns: started,
                count: CONNS,
                first_unix_ns: started + 300_000,
                last_unix_ns: started + 1_820_000_000,
                complete_s: 1.82,
            }
        })
        .collect();
    AppSnapshot {
        side: side.to_owned(),
        mode: "ws".to_owned(),
        unix_ns,
        counts_unix_ns: unix_ns,
        uptime_s: t as f64 + 0.5,
        phase: match (client, phase_at(t)) {
            (true, "setup") => "ramp",
            (true, "teardown") => "closing",
            (true, "done") => "closed",
            (true, _) => "hold",
            (false, "done") => "stopping",
            (false, _) => "running",
        }
        .to_owned(),
        target: CONNS,
        split: format!("{side}: 2 workers × 500,000 connections (2 cores)"),
        counters,
        workers,
        setup_steps: steps,
        // The ramp ends at 20 s (21 s after the run started).
        setup_rate: (client && t >= 1).then(|| SetupRate {
            peak: PeakRate::Busiest {
                per_s: 51_230.0,
                from_s: 4.0,
                to_s: 5.0,
            },
            ..SetupRate::new(RATE as f64, counters.connected, (t.min(21) - 1) as f64)
        }),
        pushes,
        rss_bytes: rss,
        rss_baseline_bytes: base,
        rss_per_connection_bytes: if client {
            s.client_rss_per_connection_bytes
        } else {
            s.server_rss_per_connection_bytes
        }
        .or(Some(0.0)),
        cpu_user_s: cpu_s * 0.35,
        cpu_sys_s: cpu_s * 0.65,
        push_mark: 0,
        threads: None,
        open_fds: None,
        histograms,
        percentiles,
    }
}

fn config() -> RunConfig {
    RunConfig {
        connections: CONNS,
        connections_reason: "22.9 GiB free allows ~2.9M; using 1,000,000".to_owned(),
        rate_per_s: RATE,
        mode: "ws".to_owned(),
        engine: crate::workload::config::EngineKind::Epoll,
        server_engine: crate::workload::config::EngineKind::Epoll,
        ports: "8000-8003".to_owned(),
        server_addrs: "127.0.0.1".to_owned(),
        sources: "127.0.0.2-127.0.0.17".to_owned(),
        sources_reason: "--source".to_owned(),
        idle_s: 30.0,
        push_count: 3,
        phases: Vec::new(),
        push_writers: 0,
        payload_size: 16,
        echo_count: 0,
        ws_path: "/".to_owned(),
        message_rate_per_s: 0.0,
        message_size: 0,
        server_message_rate_per_s: 0.0,
        server_message_size: 0,
        push: Some(crate::workload::push_rule::PushRule::default()),
        observer: true,
        tuned: Some(
            [
                ("net.core.somaxconn", "65535"),
                ("fs.file-max", "9223372036854775807"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        ),
        push_trigger: Some(crate::model::TriggerKind::Control),
        tls: None,
        command_line: "c1m run --connections 1000000 --rate 50000 --push 3 --tune".to_owned(),
    }
}

fn machine() -> Machine {
    let sysctls = [
        ("fs.file-max", "9223372036854775807"),
        ("fs.nr_open", "1048576"),
        ("net.core.somaxconn", "65535"),
        ("net.ipv4.ip_local_port_range", "1024\t65535"),
        ("net.ipv4.tcp_max_syn_backlog", "65535"),
    ];
    Machine {
        hostname: "c1m-lab".to_owned(),
        kernel: "6.18.0-1-amd64".to_owned(),
        cpus: 2,
        mem_total_bytes: MEM_TOTAL,
        mem_available_bytes: MEM_TOTAL - (1 << 30) - (1 << 27),
        nofile_soft: 1_048_576,
        nofile_hard: 1_048_576,
        sysctls: sysctls
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

fn phases(samples: &[Sample]) -> Vec<Phase> {
    PHASES
        .iter()
        .map(|(name, a, b)| {
            let end = samples
                .iter()
                .rev()
                .find(|s| s.t_s < *b as f64)
                .cloned()
                .unwrap_or_default();
            let usage = |cpu: Option<f64>, rss: Option<u64>, prev: Option<f64>| ProcessUsage {
                cpu_user_s: (cpu.unwrap_or(0.0) - prev.unwrap_or(0.0)) * 0.35,
                cpu_sys_s: (cpu.unwrap_or(0.0) - prev.unwrap_or(0.0)) * 0.65,
                rss_bytes: rss.unwrap_or(0),
                ..ProcessUsage::default()
            };
            let start = samples
                .iter()
                .find(|s| s.t_s >= (*a as f64) - 1.0)
                .cloned()
                .unwrap_or_default();
            let (ks, ss) = (
                end.kernel_server_established,
                end.server_open.map(|v| v as i64),
            );
            let mut kva = vec![
                KernelVsApp {
                    what: "server connections (kernel ESTABLISHED vs app open)".to_owned(),
                    kernel: ks,
                    app: ss,
                    agree: ks == ss,
                    explanation: (ks != ss).then(|| {
                        format!(
                            "{} established in the kernel, not yet accepted",
                            ks.unwrap_or(0) - ss.unwrap_or(0)
                        )
                    }),
                },
                KernelVsApp {
                    what: "client connections (kernel ESTABLISHED vs app open)".to_owned(),
                    kernel: end.kernel_client_established,
                    app: end.client_open.map(|v| v as i64),
                    agree: end.kernel_client_established == end.client_open.map(|v| v as i64),
                    explanation: (end.kernel_client_established
                        != end.client_open.map(|v| v as i64))
                    .then(|| {
                        "900 connected in the kernel, WebSocket handshake in flight".to_owned()
                    }),
                },
            ];
            if *name == "teardown" {
                kva.push(KernelVsApp {
                    what: "client TIME_WAIT (kernel) vs closed by us (app)".to_owned(),
                    kernel: end.kernel_time_wait,
                    app: Some(CONNS as i64),
                    agree: true,
                    explanation: Some(
                        "the side that closes first keeps TIME_WAIT for 60 s".to_owned(),
                    ),
                });
            }
            Phase {
                name: name.to_string(),
                // As a run recorded before phases had kinds: the goldens stay as written.
                kind: None,
                started_unix_ms: START_UNIX_MS + a * 1000,
                ended_unix_ms: START_UNIX_MS + b * 1000,
                duration_s: (b - a) as f64,
                end_walk_s: 0.0,
                server: usage(end.server_cpu_s, end.server_rss_bytes, start.server_cpu_s),
                client: usage(end.client_cpu_s, end.client_rss_bytes, start.client_cpu_s),
                observer: usage(
                    end.observer_cpu_s,
                    end.observer_rss_bytes,
                    start.observer_cpu_s,
                ),
                kernel_socket_bytes: end.kernel_socket_bytes,
                box_mem_available_bytes: end.box_mem_available_bytes,
                kernel_vs_app: kva,
                notes: if *name == "push" {
                    vec!["3 pushes, each reached all 1,000,000 connections in 1.82 s".to_owned()]
                } else {
                    Vec::new()
                },
                time_wait_peak: Some(crate::model::phase::TimeWaitPeak {
                    server: 0,
                    client: 3,
                }),
                ..Phase::default()
            }
        })
        .collect()
}

fn side_view(established: i64, time_wait: i64, est_total: u64) -> SideView {
    let mut states = BTreeMap::new();
    states.insert(state_key(c1m_common::tcp_state::ESTABLISHED), established);
    states.insert(state_key(c1m_common::tcp_state::TIME_WAIT), time_wait);
    let transitions: BTreeMap<String, u64> = [
        ("SYN_SENT->ESTABLISHED".to_owned(), est_total),
        ("ESTABLISHED->FIN_WAIT1".to_owned(), est_total),
    ]
    .into();
    SideView {
        states,
        transitions,
        transitions_total: 4 * est_total,
        transitions_per_s: 0.0,
        established_total: est_total,
        established_per_s: 0.0,
        events: [("synack_retransmit".to_owned(), 1_812)].into(),
        retransmits: Retransmits {
            total: est_total / 100,
            tail_loss_probes: est_total / 200,
            timeouts: est_total / 400,
            syn: 0,
            slow_start: 0,
            fast: est_total / 400,
            other: 0,
            spurious_dsack: est_total / 200,
        },
        resets_sent_by_reason: BTreeMap::new(),
        resets_sent_by_cause: Vec::new(),
    }
}

fn side_memory(sockets: u64, tw: u64) -> SideMemory {
    let full = sockets - tw;
    let slab = full * 3_200 + tw * 256;
    SideMemory {
        sockets,
        ipv6_sockets: 0,
        full_sockets: full,
        time_wait_sockets: tw,
        request_sockets: 0,
        with_file: full,
        in_epoll: full,
        slab_bytes_derived: slab,
        buffer_bytes: full * 512,
        rmem_alloc: 0,
        wmem_queued: 0,
        forward_alloc: full * 512,
        total_bytes: slab + full * 512,
        bytes_per_socket: if sockets > 0 {
            (slab + full * 512) as f64 / sockets as f64
        } else {
            0.0
        },
    }
}

fn kernel_view(samples: &[Sample]) -> KernelView {
    let last = samples.last().cloned().unwrap_or_default();
    let tw = last.kernel_time_wait.unwrap_or(0) as u64;
    let client_mem = side_memory(tw, tw);
    let server_mem = side_memory(0, 0);
    let mut total = client_mem.clone();
    total.bytes_per_socket = client_mem.bytes_per_socket;
    KernelView {
        unix_ms: last.unix_ms,
        uptime_s: last.t_s + 0.8,
        server: side_view(0, 0, CONNS),
        client: side_view(0, tw as i64, CONNS),
        other: SideView::default(),
        listeners: (8000..8004)
            .map(|port| ListenerView {
                port,
                sockets: 2,
                queue_depth: 0,
                queue_limit: 2 * 4096,
                queue_peak_sampled: if port == 8001 { 8192 } else { 1_310 },
                accept_queue_overflows: if port == 8001 { 37 } else { 0 },
                overflow_acks: Some(if port == 8001 { 37 } else { 0 }),
                rcv_discards: Some(0),
                sk_drops_delta: if port == 8001 { 37 } else { 0 },
                children: CONNS / 4,
                synack_retransmits: Some(453),
            })
            .collect(),
        memory: Some(KernelMemory {
            server: server_mem,
            client: client_mem,
            other: SideMemory::default(),
            total,
            slab_object_bytes: [("TCP".to_owned(), 2_432), ("tw_sock_TCP".to_owned(), 256)].into(),
            slab_bytes_by_cache: [("tw_sock_TCP".to_owned(), tw * 256)].into(),
        }),
        walk: WalkInfo {
            age_s: Some(0.4),
            duration_ms: 310.5,
            sockets_walked: tw,
            walks: 36,
            ..WalkInfo::default()
        },
        unavailable: vec!["skb:kfree_skb: no such tracepoint on this kernel".to_owned()],
        map_errors: 0,
        skipped_runs: Default::default(),
        scope: Scope::WatchedPorts,
        mib: Some(MibDelta {
            unix_ms: last.unix_ms,
            since_attach: MibCounters {
                active_opens: CONNS + 12,
                passive_opens: CONNS + 12,
                estab_resets: 40,
                out_rsts: 45,
                retrans_segs: CONNS / 50 + 2 * 1_812,
                loss_probes: CONNS / 100,
                timeouts: CONNS / 200 + 2 * 1_812,
                fast_retrans: CONNS / 200,
                syn_retrans: 2 * 1_812,
                listen_overflows: 37,
                listen_drops: 37,
                ..MibCounters::default()
            },
        }),
        loss: None,
    }
}
