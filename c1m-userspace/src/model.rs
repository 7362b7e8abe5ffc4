//! The lab's data model: what a run records, what the live view shows and what the
//! exports are written from. Every figure keeps its unit in its name.

pub mod config;
pub mod kernel_vs_app;
pub mod phase;

use c1m_common::tcp_state;
use serde::{Deserialize, Serialize};

use crate::{
    model::phase::Phase,
    observer::{KernelView, audit::Audit, view::state_key},
    workload::stats::snapshot::AppSnapshot,
};

/// A figure older than this (two ticks of the live view) is stale.
pub(crate) const STALE_AFTER_S: f64 = 1.0;

/// Where a figure comes from; each source has its own instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Counters and gauges of the kernel view (per-CPU maps, listener walk).
    Kernel,
    /// The last full socket walk (kernel memory per socket, TIME_WAIT, request sockets).
    KernelWalk,
    /// The server's app snapshot: c1m's server's own counts, or a foreign server's
    /// processes and the client's view of it.
    Server,
    /// The client's app snapshot: c1m's client's own counts.
    Client,
}

impl Source {
    pub(crate) const ALL: [Source; 4] = [
        Source::Kernel,
        Source::KernelWalk,
        Source::Server,
        Source::Client,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Source::Kernel => "kernel",
            Source::KernelWalk => "kernel_walk",
            Source::Server => "server",
            Source::Client => "client",
        }
    }
}

/// The setup rate to show first: the client's own when there is a c1m client, else what
/// the kernel saw reach ESTABLISHED.
pub(crate) fn headline_rate(client: Option<f64>, kernel: Option<f64>) -> Option<f64> {
    client.or(kernel).filter(|v| v.is_finite() && *v >= 0.0)
}

/// One point of the per-second time series (`timeseries.csv`, the report's plots and
/// the live view's history).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(default)]
pub struct Sample {
    /// Seconds since the run started.
    pub t_s: f64,
    /// The row's instant, ms since the Unix epoch.
    pub unix_ms: u64,
    /// The run phase at that instant ("setup", "idle", "push", "teardown").
    pub phase: String,
    // Kernel's view (None when the observer is not running).
    /// Server-side sockets in ESTABLISHED, as the kernel (eBPF) counts them.
    pub kernel_server_established: Option<i64>,
    /// Client-side sockets in ESTABLISHED, as the kernel (eBPF) counts them.
    pub kernel_client_established: Option<i64>,
    /// Server-side half-open handshakes: SYN_RECV plus request sockets (NEW_SYN_RECV).
    pub kernel_server_syn_recv: Option<i64>,
    /// Client-side sockets in SYN_SENT (connects not yet answered).
    pub kernel_client_syn_sent: Option<i64>,
    /// Sockets in TIME_WAIT, server and client sides summed.
    pub kernel_time_wait: Option<i64>,
    /// Connections waiting in the accept queues, summed over the watched listeners.
    pub kernel_accept_queue_depth: Option<u64>,
    /// Handshakes the kernel dropped since the observer attached (mostly: accept queue full).
    pub kernel_accept_queue_overflows: Option<u64>,
    /// TCP state changes per second on the watched ports, both sides summed (kernel's clock).
    pub kernel_transitions_per_s: Option<f64>,
    /// Connections the kernel saw reach ESTABLISHED per second (kernel's clock).
    pub kernel_established_per_s: Option<f64>,
    /// Kernel memory of all watched sockets, bytes (derived when `kernel_socket_bytes_derived`).
    pub kernel_socket_bytes: Option<u64>,
    /// Kernel bytes per watched socket at the last socket walk (None until a walk saw one).
    pub kernel_bytes_per_socket: Option<f64>,
    // The application's own counts.
    /// Connections the server app holds open now.
    pub server_open: Option<u64>,
    /// Connections the server app has accepted since it started.
    pub server_accepted: Option<u64>,
    /// Connections the client app holds open now.
    pub client_open: Option<u64>,
    /// Connections the client app has established since it started.
    pub client_connected: Option<u64>,
    /// Client connections that never opened, all causes.
    pub client_failures: Option<u64>,
    /// Client connections established per second over the last interval.
    pub client_connect_per_s: Option<f64>,
    /// Resident memory of the server's processes, bytes (None: not measured).
    pub server_rss_bytes: Option<u64>,
    /// Resident memory of the client's processes, bytes (None: not measured).
    pub client_rss_bytes: Option<u64>,
    /// Server (RSS - baseline) / open connections, bytes.
    pub server_rss_per_connection_bytes: Option<f64>,
    /// Client (RSS - baseline) / open connections, bytes.
    pub client_rss_per_connection_bytes: Option<f64>,
    /// Server CPU seconds so far, user plus system.
    pub server_cpu_s: Option<f64>,
    /// Client CPU seconds so far, user plus system.
    pub client_cpu_s: Option<f64>,
    /// The system part of `client_cpu_s` (a client host's phases are cut from it).
    pub client_cpu_sys_s: Option<f64>,
    /// A foreign server's process tree: threads and open fds (None for c1m's own).
    pub server_threads: Option<u64>,
    /// Open fds of a foreign server's process tree (None for c1m's own).
    pub server_open_fds: Option<u64>,
    /// Resident memory of the lab process itself (observer and lab), bytes.
    pub observer_rss_bytes: Option<u64>,
    /// CPU seconds of the lab process itself (observer and lab), user plus system.
    pub observer_cpu_s: Option<f64>,
    /// CPU seconds per second of each side's own clock (1.0 = one core busy).
    pub server_cpu_cores: Option<f64>,
    /// Client CPU seconds per second (1.0 = one core busy).
    pub client_cpu_cores: Option<f64>,
    /// CPU seconds per second of the lab process, observer included (1.0 = one core busy).
    pub observer_cpu_cores: Option<f64>,
    /// /proc/meminfo MemAvailable.
    pub box_mem_available_bytes: u64,
    /// How old each source's figures were at `t_s` (None: no such source). A figure
    /// older than [`STALE_AFTER_S`] is stale: the report
    /// draws it as a ring off its line.
    pub kernel_age_s: Option<f64>,
    /// Age of the socket walk's figures (kernel memory per socket), seconds.
    pub kernel_walk_age_s: Option<f64>,
    /// Age of the server's app snapshot, seconds.
    pub server_age_s: Option<f64>,
    /// Age of the client's app snapshot, seconds.
    pub client_age_s: Option<f64>,
    /// `kernel_socket_bytes` is derived (sockets now × bytes per socket at the last
    /// walk) because the walk is stale.
    pub kernel_socket_bytes_derived: bool,
}

impl Sample {
    /// How old `source`'s figures were in this row.
    pub(crate) fn age_s(&self, source: Source) -> Option<f64> {
        match source {
            Source::Kernel => self.kernel_age_s,
            Source::KernelWalk => self.kernel_walk_age_s,
            Source::Server => self.server_age_s,
            Source::Client => self.client_age_s,
        }
    }

    /// The headline setup rate of this row (see
    /// [`Figures::setup_per_s`](crate::figures::Figures::setup_per_s)).
    pub(crate) fn setup_per_s(&self) -> Option<f64> {
        headline_rate(self.client_connect_per_s, self.kernel_established_per_s)
    }

    /// False when `source` was stale in this row (rows from before ages were recorded
    /// count as fresh).
    pub fn fresh(&self, source: Source) -> bool {
        self.age_s(source).is_none_or(|a| a <= STALE_AFTER_S)
    }
}

/// A `--check` judged at the run's end: what was asked, what was measured, the verdict.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(default)]
pub struct CheckResult {
    /// The check as written: "push.p99 < 50ms".
    pub check: String,
    /// The measured value in the figure's stored unit (µs for latencies, bytes, counts,
    /// per second, seconds); None: the run did not measure it.
    pub measured: Option<f64>,
    /// The measured value as the summary shows it ("172.5 ms"), or why there is none.
    pub shown: String,
    /// Met. A figure the run did not measure fails its check.
    pub passed: bool,
}

/// Facts about the box the run happened on.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(default)]
pub struct Machine {
    /// The box's hostname (/proc/sys/kernel/hostname).
    pub hostname: String,
    /// The kernel release (/proc/sys/kernel/osrelease).
    pub kernel: String,
    /// CPUs available to the lab process.
    pub cpus: u32,
    /// /proc/meminfo MemTotal, bytes.
    pub mem_total_bytes: u64,
    /// /proc/meminfo MemAvailable when the run started, bytes.
    pub mem_available_bytes: u64,
    /// RLIMIT_NOFILE soft limit (open fds per process).
    pub nofile_soft: u64,
    /// RLIMIT_NOFILE hard limit (open fds per process).
    pub nofile_hard: u64,
    /// sysctl name -> value, as found before the run (and as used, if tuned).
    pub sysctls: std::collections::BTreeMap<String, String>,
}

/// The kind of push trigger a run used (`--push-trigger`), as the comparison names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TriggerKind {
    /// `push` on c1m's own server's control socket.
    Control,
    /// A signal to the server's process (the reference servers: SIGUSR1).
    Signal,
    /// An HTTP request.
    Http,
    /// A command.
    Command,
    /// None: the server pushed on its own schedule.
    None,
}

impl TriggerKind {
    /// Its words in the comparison's setup differences.
    pub(crate) fn name(self) -> &'static str {
        match self {
            TriggerKind::Control => "control socket",
            TriggerKind::Signal => "signal",
            TriggerKind::Http => "HTTP request",
            TriggerKind::Command => "command",
            TriggerKind::None => "none (server's own schedule)",
        }
    }
}

/// How a run ended. The JSON names are lower case; each has its exit code.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Still going (a summary.json written mid-run, or left by a killed lab).
    #[default]
    Running,
    /// Every phase done, nothing lost.
    Complete,
    /// Every phase ran, but something was lost or timed out: see `warnings`.
    Degraded,
    /// The run stopped on an error (the first warning says which).
    Failed,
    /// Ctrl-C or SIGTERM.
    Interrupted,
}

impl Outcome {
    /// Every outcome, in the order a run can reach them.
    pub(crate) const ALL: [Outcome; 5] = [
        Outcome::Running,
        Outcome::Complete,
        Outcome::Degraded,
        Outcome::Failed,
        Outcome::Interrupted,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Outcome::Running => "running",
            Outcome::Complete => "complete",
            Outcome::Degraded => "degraded",
            Outcome::Failed => "failed",
            Outcome::Interrupted => "interrupted",
        }
    }

    /// How bad an outcome is: a run of several parts (a `--servers` sequence, a merged
    /// multi-host run) ends as its worst part ([`Outcome::worst`]).
    pub(crate) fn severity(self) -> u8 {
        match self {
            Outcome::Complete => 0,
            Outcome::Degraded => 1,
            Outcome::Running | Outcome::Failed => 2,
            Outcome::Interrupted => 3,
        }
    }

    /// The worse of two outcomes (the first on a tie).
    pub(crate) fn worst(self, o: Outcome) -> Outcome {
        if o.severity() > self.severity() {
            o
        } else {
            self
        }
    }

    /// The exit code of `c1m run` (README, "Exit codes").
    pub(crate) fn exit_code(self) -> i32 {
        match self {
            Outcome::Complete => 0,
            Outcome::Running | Outcome::Failed => 1,
            Outcome::Degraded => 2,
            Outcome::Interrupted => 130,
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Reads the names above, and the `failed: …` strings of runs recorded before the enum.
impl<'de> Deserialize<'de> for Outcome {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(match s.as_str() {
            "running" => Outcome::Running,
            "complete" => Outcome::Complete,
            "degraded" => Outcome::Degraded,
            "interrupted" => Outcome::Interrupted,
            s if s == "failed" || s.starts_with("failed:") => Outcome::Failed,
            other => {
                return Err(serde::de::Error::unknown_variant(
                    other,
                    &["running", "complete", "degraded", "failed", "interrupted"],
                ));
            }
        })
    }
}

/// Which network namespace a run's sockets lived in.
#[derive(
    Debug, Clone, Copy, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq, Eq,
)]
#[serde(rename_all = "snake_case")]
pub enum Netns {
    /// The one `c1m run` was started in, shared with whatever ran there before.
    #[default]
    Inherited,
    /// One made for this run (`--servers --isolation netns`): empty when it started,
    /// gone with its last socket when it ended.
    Fresh,
}

/// What the box and the run's network namespace held when the run started, before any
/// of its processes: a run that inherits a previous run's sockets (5,000 in TIME_WAIT
/// for a minute), conntrack entries or memory measures them too.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(default)]
pub struct StartState {
    /// When it was read, ms since the Unix epoch.
    pub unix_ms: u64,
    /// Which network namespace the run's sockets lived in.
    pub netns: Netns,
    /// TCP sockets of the namespace by state (the kernel's names, lower case).
    pub sockets: std::collections::BTreeMap<String, u64>,
    /// Of those, the ones on the run's ports (local or remote): what a previous run
    /// left. Any but a listener makes the start dirty.
    pub sockets_on_ports: std::collections::BTreeMap<String, u64>,
    /// `nf_conntrack_count` of the namespace; None when conntrack is not loaded.
    pub conntrack_entries: Option<u64>,
    /// /proc/meminfo MemAvailable.
    pub mem_available_bytes: u64,
    /// `--isolation wait`: seconds the run waited for the sockets on its ports to go,
    /// and the most it would wait (`--clean-wait`).
    pub waited_s: Option<f64>,
    /// Most seconds the run would wait (`--clean-wait`).
    pub wait_limit_s: Option<f64>,
}

/// Sockets by state on a run's ports, less the listeners: see [`StartState::leftovers`].
pub(crate) fn leftovers(on_ports: &std::collections::BTreeMap<String, u64>) -> u64 {
    let listen = state_key(tcp_state::LISTEN);
    on_ports
        .iter()
        .filter(|(state, _)| **state != listen)
        .map(|(_, n)| n)
        .sum()
}

impl StartState {
    /// Connections on the run's ports when it started, in any state but LISTEN: what an
    /// earlier run left (a listener there is a `--target` server's own, or one the port
    /// preflight refuses).
    pub fn leftovers(&self) -> u64 {
        leftovers(&self.sockets_on_ports)
    }

    /// Sockets of the whole namespace when it started.
    pub fn in_namespace(&self) -> u64 {
        self.sockets.values().sum()
    }

    /// Started beside connections of an earlier run on its ports.
    pub fn dirty(&self) -> bool {
        self.leftovers() > 0
    }

    /// One line for people, the dirty case first: "started dirty: 5,000 sockets on its
    /// ports (5,000 time_wait) after waiting 70 s; …" or "started clean: …".
    pub fn describe(&self) -> String {
        use crate::fmt::{bytes, count};
        let by_state = |m: &std::collections::BTreeMap<String, u64>| {
            m.iter()
                .filter(|(_, n)| **n > 0)
                .map(|(s, n)| format!("{} {s}", count(*n)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts = vec![if self.dirty() {
            let mut left = self.sockets_on_ports.clone();
            left.remove(&state_key(tcp_state::LISTEN));
            format!(
                "started dirty: {} socket(s) of an earlier run on its ports ({})",
                count(self.leftovers()),
                by_state(&left)
            )
        } else {
            "started clean: no socket on its ports".to_owned()
        }];
        parts.push(match self.netns {
            Netns::Fresh => "a fresh network namespace".to_owned(),
            Netns::Inherited => "the namespace it was started in".to_owned(),
        });
        if let Some(w) = self.waited_s {
            parts.push(match self.wait_limit_s {
                Some(limit) if self.dirty() => {
                    format!("waited {w:.0} s (the --clean-wait bound, {limit:.0} s)")
                }
                _ => format!("waited {w:.0} s"),
            });
        }
        parts.push(match self.in_namespace() {
            0 => "0 TCP sockets in the namespace".to_owned(),
            n => format!(
                "{} TCP socket(s) in the namespace ({})",
                count(n),
                by_state(&self.sockets)
            ),
        });
        parts.push(match self.conntrack_entries {
            Some(n) => format!("{} conntrack entries", count(n)),
            None => "conntrack not loaded".to_owned(),
        });
        parts.push(format!(
            "{} MemAvailable",
            bytes(self.mem_available_bytes as f64)
        ));
        parts.join("; ")
    }
}

/// A program or library at a version, as it said at run time.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq, Eq)]
#[serde(default)]
pub struct Software {
    /// The program or library, e.g. "go" or "gorilla/websocket".
    pub name: String,
    /// Its version as reported, e.g. "1.19.8".
    pub version: String,
}

impl std::fmt::Display for Software {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.name, self.version)
    }
}

/// The server a run measured, named as the comparison names it, with what it runs on.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(default)]
pub struct ServerInfo {
    /// `--server-name` (a `--servers` name such as go or c1m-epoll), else `c1m` for
    /// c1m's own server or the program of `--server-cmd`.
    pub name: String,
    /// c1m's own server: its engine (None: a server c1m did not write).
    pub engine: Option<crate::workload::config::EngineKind>,
    /// Its language runtime, as the server reported it at start (the `version:` line of
    /// reference-servers/PROTOCOL.md); None when it said nothing.
    pub runtime: Option<Software>,
    /// Its WebSocket library, likewise; c1m's own server: c1m at its version.
    pub library: Option<Software>,
    /// Its processes and threads when the setup phase ended (every connection open):
    /// a foreign server's process tree, c1m's own server's shards. None: not recorded.
    pub shape: Option<ServerShape>,
    /// The worker processes a reference server was started with (`--workers K` of
    /// reference-servers/PROTOCOL.md: more connections than one process's fd limit
    /// holds). None: one process, as the server runs unless told otherwise.
    pub workers: Option<u64>,
}

/// How many processes and threads a server ran on.
#[derive(
    Debug, Clone, Copy, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq, Eq,
)]
#[serde(default)]
pub struct ServerShape {
    /// Processes.
    pub processes: u64,
    /// Threads of those processes, summed.
    pub threads: u64,
}

impl ServerShape {
    /// "1 process, 12 threads".
    pub(crate) fn describe(self) -> String {
        let plural = |n: u64, one: &str, many: &str| {
            format!(
                "{} {}",
                crate::fmt::count(n),
                if n == 1 { one } else { many }
            )
        };
        format!(
            "{}, {}",
            plural(self.processes, "process", "processes"),
            plural(self.threads, "thread", "threads")
        )
    }
}

impl ServerInfo {
    /// "go (go 1.19.8, gorilla/websocket 1.5.0)", "c1m-epoll (c1m 0.1.0, epoll
    /// engine)", "my-server (no version reported)", "node (node 20.20.2, ws 8.23.0),
    /// 68 worker processes".
    pub(crate) fn label(&self) -> String {
        let mut about: Vec<String> = [&self.runtime, &self.library]
            .into_iter()
            .flatten()
            .map(ToString::to_string)
            .collect();
        if let Some(e) = self.engine {
            about.push(format!("{} engine", e.name()));
        }
        if about.is_empty() {
            about.push("no version reported".to_owned());
        }
        let workers = self
            .workers
            .map(|k| format!(", {} worker processes", crate::fmt::count(k)))
            .unwrap_or_default();
        format!("{} ({}){workers}", self.name, about.join(", "))
    }
}

/// Everything a run produced: `summary.json` is this struct.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct RunRecord {
    /// The version of c1m that wrote the record.
    pub c1m_version: String,
    /// When the run started, ms since the Unix epoch.
    pub started_unix_ms: u64,
    /// When the run ended, ms since the Unix epoch (0 while it runs).
    pub ended_unix_ms: u64,
    /// How the run ended (`running` while it goes on).
    pub outcome: Outcome,
    /// How the run was asked for.
    pub config: config::RunConfig,
    /// Facts about the box the run happened on.
    pub machine: Machine,
    /// The run's phases in order, each with its cost.
    pub phases: Vec<Phase>,
    /// The per-second time series (`timeseries.csv`).
    pub samples: Vec<Sample>,
    /// Last views of each side (the app snapshots carry the histograms).
    pub kernel: Option<KernelView>,
    /// The server's last app snapshot (None: no stats from the server).
    pub server: Option<AppSnapshot>,
    /// The client's last app snapshot (None: no stats from a c1m client).
    pub client: Option<AppSnapshot>,
    /// Per-connection figures at the end of the idle phase.
    pub per_connection: PerConnection,
    /// The last kernel view's figures against the kernel's own counters (observer/audit.rs).
    pub audit: Option<Audit>,
    /// Warnings raised during the run, in words.
    pub warnings: Vec<String>,
    /// Multi-host runs: the host this folder was written on (None: a one-box run).
    pub host: Option<crate::multihost::model::HostInfo>,
    /// A merged multi-host run (`c1m merge`): the per-host breakdown and clock bound.
    pub multihost: Option<crate::multihost::model::Merged>,
    /// The server measured, and what it runs on (None: a run before this was recorded).
    pub server_info: Option<ServerInfo>,
    /// What the box and the namespace held when the run started (None: likewise).
    pub start: Option<StartState>,
    /// The `--check`s judged at the end, in the order given (empty: none asked).
    pub checks: Vec<CheckResult>,
}

impl RunRecord {
    /// The server's CPU seconds over every phase, (user, system); None without phases.
    /// The report's "server CPU, all phases" and `--hosts`' cost table read it here.
    pub fn server_cpu_s(&self) -> Option<(f64, f64)> {
        (!self.phases.is_empty()).then(|| {
            self.phases.iter().fold((0.0, 0.0), |(u, s), p| {
                (u + p.server.cpu_user_s, s + p.server.cpu_sys_s)
            })
        })
    }

    /// The server it measured and what that runs on, for every run header (summary,
    /// report, comparison): "go (go 1.19.8, gorilla/websocket 1.5.0)". A run recorded
    /// before the server was is named only when its command line shows c1m's own.
    pub fn server_label(&self) -> String {
        match &self.server_info {
            Some(info) => info.label(),
            None if ["--server-cmd", "--target", "--servers"]
                .iter()
                .any(|f| self.config.command_line.contains(f)) =>
            {
                "server not recorded".to_owned()
            }
            None => format!("c1m ({} engine)", self.config.server_engine.name()),
        }
    }

    /// The client it ran: always c1m's own.
    pub(crate) fn client_label(&self) -> String {
        format!("c1m client ({} engine)", self.config.engine.name())
    }

    /// "started clean: …" / "started dirty: …", or None for a run recorded before.
    pub(crate) fn start_line(&self) -> Option<String> {
        self.start.as_ref().map(StartState::describe)
    }
}

/// Per-connection memory at the end of the idle phase, in bytes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(default)]
pub struct PerConnection {
    /// Connections held: the client's open count, else the server's.
    pub connections: u64,
    /// Server (RSS - baseline) / open connections, bytes.
    pub server_user_bytes: Option<f64>,
    /// Client (RSS - baseline) / open connections, bytes.
    pub client_user_bytes: Option<f64>,
    /// Kernel bytes per connection (both sockets of it).
    pub kernel_bytes: Option<f64>,
    /// Kernel bytes per full socket (TIME_WAIT and request sockets left out).
    pub kernel_bytes_per_socket: Option<f64>,
    /// When these figures were true, ms since the Unix epoch: the kernel walk's end, else
    /// the app's counts (0: a run recorded before this was).
    pub at_unix_ms: u64,
}

/// What a run is, fixed when it starts: the labels of Prometheus's `c1m_run_info`, which
/// must not change mid-run (another label set is another series, and a dashboard that
/// joins on it breaks at every change). Empty fields are not known at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunInfo {
    /// The command serving the metrics: "run", "top" or "client".
    pub command: &'static str,
    /// "ws", "echo" or "hold".
    pub mode: String,
    /// The engine of c1m's client.
    pub engine: String,
    /// The server measured: "c1m-epoll" or "c1m-tokio" (c1m's own), a `--server-cmd`'s
    /// program, a `--target`'s address, or the servers a client host connects to.
    pub server: String,
    /// Connections the run aims at (0: not known at start).
    pub target_connections: u64,
    /// How the run measures its pushes (`--push-latency`, the trigger): what the push
    /// histograms are timed from, so a dashboard titles them truly (None: not known).
    pub push: Option<crate::workload::push_rule::PushRule>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_label_names_its_worker_processes_when_it_ran_more_than_one() {
        let node = ServerInfo {
            name: "node".into(),
            runtime: Some(Software {
                name: "node".into(),
                version: "20.20.2".into(),
            }),
            library: Some(Software {
                name: "ws".into(),
                version: "8.23.0".into(),
            }),
            ..ServerInfo::default()
        };
        assert_eq!(node.label(), "node (node 20.20.2, ws 8.23.0)");
        let workers = ServerInfo {
            workers: Some(68),
            ..node
        };
        assert_eq!(
            workers.label(),
            "node (node 20.20.2, ws 8.23.0), 68 worker processes"
        );
    }
}
