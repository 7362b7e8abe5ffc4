//! The lab's data model: what a run records, what the live view shows and what the
//! exports are written from. Every figure keeps its unit in its name.

use serde::{Deserialize, Serialize};

use crate::{
    observer::{KernelView, audit::Audit},
    workload::stats::AppSnapshot,
};

/// One point of the per-second time series (`timeseries.csv`, the report's plots and
/// the live view's history).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Sample {
    /// Seconds since the run started.
    pub t_s: f64,
    pub unix_ms: u64,
    pub phase: String,
    // Kernel's view (None when the observer is not running).
    pub kernel_server_established: Option<i64>,
    pub kernel_client_established: Option<i64>,
    pub kernel_server_syn_recv: Option<i64>,
    pub kernel_client_syn_sent: Option<i64>,
    pub kernel_time_wait: Option<i64>,
    pub kernel_accept_queue_depth: Option<u64>,
    pub kernel_accept_queue_overflows: Option<u64>,
    pub kernel_transitions_per_s: Option<f64>,
    pub kernel_established_per_s: Option<f64>,
    pub kernel_socket_bytes: Option<u64>,
    pub kernel_bytes_per_socket: Option<f64>,
    // The application's own counts.
    pub server_open: Option<u64>,
    pub server_accepted: Option<u64>,
    pub client_open: Option<u64>,
    pub client_connected: Option<u64>,
    pub client_failures: Option<u64>,
    /// Client connections established per second over the last interval.
    pub client_connect_per_s: Option<f64>,
    pub server_rss_bytes: Option<u64>,
    pub client_rss_bytes: Option<u64>,
    pub server_rss_per_connection_bytes: Option<f64>,
    pub client_rss_per_connection_bytes: Option<f64>,
    pub server_cpu_s: Option<f64>,
    pub client_cpu_s: Option<f64>,
    pub observer_rss_bytes: Option<u64>,
    pub observer_cpu_s: Option<f64>,
    /// /proc/meminfo MemAvailable.
    pub box_mem_available_bytes: u64,
}

/// CPU and memory of one process group over a phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ProcessUsage {
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    /// At the end of the phase.
    pub rss_bytes: u64,
}

/// The kernel's count next to the application's, and why they differ when they do.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct KernelVsApp {
    pub what: String,
    pub kernel: Option<i64>,
    pub app: Option<i64>,
    pub agree: bool,
    /// e.g. "412 established in the kernel, not yet accepted".
    pub explanation: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Phase {
    /// "setup", "idle", "push", "teardown".
    pub name: String,
    pub started_unix_ms: u64,
    pub ended_unix_ms: u64,
    pub duration_s: f64,
    pub server: ProcessUsage,
    pub client: ProcessUsage,
    pub observer: ProcessUsage,
    /// Kernel bytes of the watched sockets at the end of the phase.
    pub kernel_socket_bytes: Option<u64>,
    pub box_mem_available_bytes: u64,
    /// Counts at the end of the phase.
    pub kernel_vs_app: Vec<KernelVsApp>,
    /// Free-form notes (e.g. "stopped early: Ctrl-C").
    pub notes: Vec<String>,
}

/// Facts about the box the run happened on.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Machine {
    pub hostname: String,
    pub kernel: String,
    pub cpus: u32,
    pub mem_total_bytes: u64,
    pub mem_available_bytes: u64,
    pub nofile_soft: u64,
    pub nofile_hard: u64,
    /// sysctl name -> value, as found before the run (and as used, if tuned).
    pub sysctls: std::collections::BTreeMap<String, String>,
}

/// How the run was asked for (the CLI flags, resolved).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RunConfig {
    pub connections: u64,
    /// Why this many (e.g. "24 GiB free allows ~1.4M; using 1,000,000").
    pub connections_reason: String,
    pub rate_per_s: u64,
    pub mode: String,
    pub ports: String,
    pub server_addrs: String,
    pub sources: String,
    pub idle_s: f64,
    pub push_count: u32,
    /// Server shards writing a push at once (0: all).
    pub push_writers: u64,
    pub observer: bool,
    pub tuned: bool,
    pub command_line: String,
}

/// Everything a run produced: `summary.json` is this struct.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RunRecord {
    pub c1m_version: String,
    pub started_unix_ms: u64,
    pub ended_unix_ms: u64,
    /// "complete", "interrupted" (Ctrl-C/SIGTERM) or "failed: …".
    pub outcome: String,
    pub config: RunConfig,
    pub machine: Machine,
    pub phases: Vec<Phase>,
    pub samples: Vec<Sample>,
    /// Last views of each side (the app snapshots carry the histograms).
    pub kernel: Option<KernelView>,
    pub server: Option<AppSnapshot>,
    pub client: Option<AppSnapshot>,
    /// Per-connection figures at the end of the idle phase.
    pub per_connection: PerConnection,
    /// The last kernel view's figures against the kernel's own counters (observer/audit.rs).
    pub audit: Option<Audit>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct PerConnection {
    pub connections: u64,
    pub server_user_bytes: Option<f64>,
    pub client_user_bytes: Option<f64>,
    /// Kernel bytes per connection (both sockets of it).
    pub kernel_bytes: Option<f64>,
    pub kernel_bytes_per_socket: Option<f64>,
}

/// What the live view draws: the latest of everything plus the history.
#[derive(Debug, Clone, Default)]
pub struct LiveState {
    pub title: String,
    pub phase: String,
    pub target: u64,
    pub elapsed_s: f64,
    pub kernel: Option<KernelView>,
    pub server: Option<AppSnapshot>,
    pub client: Option<AppSnapshot>,
    pub history: Vec<Sample>,
    pub notes: Vec<String>,
}
