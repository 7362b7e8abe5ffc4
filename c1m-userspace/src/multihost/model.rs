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
    #[default]
    Server,
    Client,
}

/// The host a run folder was written on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct HostInfo {
    pub role: HostRole,
    pub hostname: String,
    /// `--host-label`, else the hostname: the name the breakdown shows.
    pub label: String,
    /// Client hosts: this host's shard (index of count) and the run's total connections.
    pub shard_index: Option<u64>,
    pub shard_count: Option<u64>,
    pub connections_total: Option<u64>,
    /// Client hosts: offset to the server host's clock at the ramp's start and at the end.
    pub clock: Option<ClockOffset>,
    pub clock_end: Option<ClockOffset>,
}

impl HostInfo {
    /// The largest uncertainty of this host's offsets (None: never measured).
    pub fn clock_bound_ns(&self) -> Option<u64> {
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
    pub label: String,
    pub hostname: String,
    /// The client folder merged.
    pub dir: String,
    pub shard_index: Option<u64>,
    pub connections_asked: u64,
    pub connected: u64,
    /// Every failure kind summed (the folder's summary.json names each).
    pub failures: u64,
    pub pushes_received: u64,
    /// Connections over the host's ramp (its own `setup_rate`).
    pub setup_rate_per_s: Option<f64>,
    pub connect_p99_us: Option<u64>,
    pub push_message_p99_us: Option<u64>,
    /// ESTABLISHED client-side sockets the host's own kernel view counted (root only).
    pub kernel_client_established: Option<i64>,
    pub clock_offset_ns: Option<i64>,
    /// Uncertainty of the offset plus its drift over the run.
    pub clock_bound_ns: Option<u64>,
}

/// What `c1m merge` adds to the merged summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Merged {
    pub server_dir: String,
    pub hosts: Vec<HostBreakdown>,
    /// Push latencies were corrected by each host's clock offset; the largest bound of
    /// all hosts (None: some host measured no offset, and latencies assume synchronised
    /// clocks).
    pub clock_bound_ns: Option<u64>,
    /// One sentence for the report on how far the latencies can be trusted.
    pub clock_note: String,
}
