//! What a multi-host run adds to a run folder's `summary.json`: whose folder it is, the
//! client host's clock offset, and in a merged folder the per-host breakdown.

use serde::{Deserialize, Serialize};

use crate::workload::control::clock::ClockOffset;

/// Which role a host played.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum HostRole {
    /// The host that ran the server (and the lab, with its kernel view).
    #[default]
    Server,
    /// A client host (`c1m client`): it opened a share of the run's connections.
    Client,
}

/// Where a client host's kernel figures came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KernelSource {
    /// The eBPF observer, scoped to the host's network namespace and the server's ports:
    /// the figures of a one-box run's client side (transitions, retransmits, resets,
    /// socket memory) and its audit against the namespace's MIB.
    Observer,
    /// No observer (no privileges, or it failed to start): ESTABLISHED connections to the
    /// server's ports counted from the namespace's `/proc/net/tcp`, and nothing else.
    ProcNetTcp,
}

impl KernelSource {
    /// How a table names it: "eBPF" or "/proc/net/tcp".
    pub(crate) fn name(self) -> &'static str {
        match self {
            KernelSource::Observer => "eBPF",
            KernelSource::ProcNetTcp => "/proc/net/tcp",
        }
    }
}

/// The host a run folder was written on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct HostInfo {
    /// Whether this host ran the server or a client share.
    pub role: HostRole,
    /// The host's hostname (/proc/sys/kernel/hostname).
    pub hostname: String,
    /// `--host-label`, else the hostname: the name the breakdown shows.
    pub label: String,
    /// Client hosts: this host's shard (index of count) and the run's total connections.
    pub shard_index: Option<u64>,
    /// Client hosts: how many shards the run's connections were split into (None: the only one).
    pub shard_count: Option<u64>,
    /// Client hosts: the run's total connections, over all client hosts.
    pub connections_total: Option<u64>,
    /// Client hosts: offset to the server host's clock at the ramp's start and at the end.
    pub clock: Option<ClockOffset>,
    /// Client hosts: the offset measured again at the end (drift = the change since the start).
    pub clock_end: Option<ClockOffset>,
    /// Client hosts: where the kernel figures came from (None: a folder of an older c1m).
    pub kernel_source: Option<KernelSource>,
    /// Client hosts: why the observer did not run, in one line (None: it ran).
    pub kernel_fallback: Option<String>,
    /// The run this folder belongs to: made by the server host, answered by its control
    /// endpoint's `time`, recorded by each client host; `c1m merge` joins only folders of
    /// one id (None: a folder written before runs had ids, or a client host without
    /// --clock-from).
    pub run_id: Option<String>,
    /// Client hosts: the path of the host's namespace (conntrack, veth, softnet,
    /// neighbours) at the host's first snapshot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_start: Option<crate::netpath::PathReading>,
    /// Client hosts: the same at its last snapshot (what the live line reads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_last: Option<crate::netpath::PathReading>,
}

/// A new run id: 16 hex digits from the kernel's random source (a server host makes one
/// per run; two runs share one with odds of 2^-64).
pub(crate) fn new_run_id() -> String {
    let mut b = [0u8; 8];
    crate::workload::sys::random_bytes(&mut b);
    format!("{:016x}", u64::from_le_bytes(b))
}

impl HostInfo {
    /// The host's path from its first snapshot to its last (None: not read, a folder of
    /// an older c1m or a server host).
    pub fn path(&self) -> Option<crate::netpath::PathFigures> {
        Some(crate::netpath::PathFigures::between(
            self.path_start.as_ref()?,
            self.path_last.as_ref()?,
        ))
    }

    /// The largest uncertainty of this host's offsets (None: never measured).
    pub(crate) fn clock_bound_ns(&self) -> Option<u64> {
        let drift = match (self.clock, self.clock_end) {
            (Some(a), Some(b)) => a.offset_ns.abs_diff(b.offset_ns),
            _ => 0,
        };
        [self.clock, self.clock_end]
            .iter()
            .flatten()
            .map(|c| c.uncertainty_ns)
            .max()
            .map(|u| u + drift)
    }
}

/// One client host in a merged run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct HostBreakdown {
    /// The host's `--host-label`, else its hostname, else the folder's path.
    pub label: String,
    /// The host's hostname.
    pub hostname: String,
    /// The client folder merged.
    pub dir: String,
    /// This host's shard index, from 0 (None: the only client host).
    pub shard_index: Option<u64>,
    /// Connections this host was asked to open.
    pub connections_asked: u64,
    /// Connections this host established since it started (its app's count).
    pub connected: u64,
    /// Every failure kind summed (the folder's summary.json names each).
    pub failures: u64,
    /// Push frames this host's connections received.
    pub pushes_received: u64,
    /// Connections over the host's ramp (its own `setup_rate`).
    pub setup_rate_per_s: Option<f64>,
    /// 99th percentile of TCP connect latency on this host, µs (None: no values).
    pub connect_p99_us: Option<u64>,
    /// 99th percentile of push message latency on this host, µs (None: no values).
    pub push_message_p99_us: Option<u64>,
    /// ESTABLISHED client-side sockets the host's own kernel view counted, at most.
    pub kernel_client_established: Option<i64>,
    /// Where the host's kernel figures came from (None: a folder of an older c1m).
    pub kernel_source: Option<KernelSource>,
    /// The host's kernel figure against its app's `connected`: connections its kernel
    /// saw reach ESTABLISHED since the observer attached (with /proc/net/tcp only, the
    /// most ESTABLISHED at once; None: not read).
    pub kernel_connected: Option<i64>,
    /// Whether `kernel_connected` equals `connected`.
    pub kernel_agrees: bool,
    /// Why they differ, or where the kernel figure came from when not from eBPF.
    pub kernel_explanation: Option<String>,
    /// Segments the host's kernel retransmitted on its connections (observer only).
    pub kernel_retransmits: Option<u64>,
    /// The host's retransmits by kind (observer only): `kernel_retransmits` split.
    pub kernel_retransmit_kinds: Option<crate::observer::Retransmits>,
    /// What `--loss` dropped on the host's link, by direction and kind (None: no loss
    /// injected).
    pub loss: Option<crate::observer::LossDrops>,
    /// The loss and the retransmits in one sentence (observer::loss::explain).
    pub loss_explained: Option<String>,
    /// Resets the host's kernel sent on its connections (observer only).
    pub kernel_resets_sent: Option<u64>,
    /// Kernel memory of the host's sockets at its last socket walk, bytes (observer only).
    pub kernel_socket_bytes: Option<u64>,
    /// CPU seconds this host's client used over the run, user and system.
    pub cpu_user_s: Option<f64>,
    /// The system part.
    pub cpu_sys_s: Option<f64>,
    /// The most resident memory its client processes had at once, bytes.
    pub rss_peak_bytes: Option<u64>,
    /// Its client's (RSS - baseline) per open connection at the run's instant for memory
    /// per connection (the end of idle), else when it held the most.
    pub user_bytes_per_connection: Option<f64>,
    /// Kernel bytes per held socket of this host at that instant (observer only).
    pub kernel_bytes_per_socket: Option<f64>,
    /// Offset to the server host's clock at the ramp's start, ns (add to this host's clock).
    pub clock_offset_ns: Option<i64>,
    /// Uncertainty of the offset plus its drift over the run.
    pub clock_bound_ns: Option<u64>,
    /// The host's path over the run: its conntrack table and drop counters, veth and
    /// softnet drops, neighbours (None: not read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<crate::netpath::PathFigures>,
}

/// What `c1m merge` adds to the merged summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Merged {
    /// The server host's run folder the client folders were merged into.
    pub server_dir: String,
    /// One row per client host merged.
    pub hosts: Vec<HostBreakdown>,
    /// Push latencies were corrected by each host's clock offset; the largest bound of
    /// all hosts (None: some host measured no offset, and latencies assume synchronised
    /// clocks).
    pub clock_bound_ns: Option<u64>,
    /// One sentence for the report on how far the latencies can be trusted.
    pub clock_note: String,
}
