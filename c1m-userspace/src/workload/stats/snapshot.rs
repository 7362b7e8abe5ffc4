//! [`AppSnapshot`], everything one side knows aggregated over its shards: the one JSON
//! document the control endpoint's `stats` answers and `--stats-json` writes.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{
    counters::Counters,
    histograms::{HIST_NAMES, HistError, Percentiles, decode_hist, new_hist},
    report::PushStat,
    setup_rate::{SetupRate, SetupStep},
};

/// How a shard runs.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ShardKind {
    /// A re-exec'd worker process (past one process's RLIMIT_NOFILE).
    Process,
    /// A thread of the supervisor's process (one shard per core).
    #[default]
    Thread,
}

/// A worker as the supervisor sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorkerInfo {
    /// The shard's index, from 0.
    pub shard: u32,
    /// The worker's process id (a thread shard: the supervisor's).
    pub pid: u32,
    /// Worker process or thread of the supervisor.
    pub kind: ShardKind,
    /// False once the shard has exited.
    pub alive: bool,
    /// Connections the shard held open at its last report.
    pub open: u64,
    /// Why it ended, if it died.
    pub exit: Option<String>,
}

/// Push summary across all shards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PushSummary {
    /// The push's number, as the server numbered it.
    pub push_id: u64,
    /// CLOCK_REALTIME ns the push is timed from: the broadcast start (server), the trigger
    /// or the frame's stamp (client).
    pub started_unix_ns: u64,
    /// Server: frames written. Client: frames received.
    pub count: u64,
    /// CLOCK_REALTIME ns of the first frame written (server) or received (client).
    pub first_unix_ns: u64,
    /// CLOCK_REALTIME ns of the last frame written (server) or received (client).
    pub last_unix_ns: u64,
    /// Seconds from `started_unix_ns` to the last frame written (server) / received
    /// (client): on the client, the time until the last connection had the push.
    pub complete_s: f64,
}

impl From<PushStat> for PushSummary {
    fn from(p: PushStat) -> PushSummary {
        let complete_s = p.last_unix_ns.saturating_sub(p.started_unix_ns) as f64 / 1e9;
        PushSummary {
            push_id: p.push_id,
            started_unix_ns: p.started_unix_ns,
            count: p.count,
            first_unix_ns: p.first_unix_ns,
            last_unix_ns: p.last_unix_ns,
            complete_s,
        }
    }
}

/// Everything one side of the workload knows, aggregated over all its shards.
///
/// Stable JSON shape (one line on the control endpoint):
/// `{"side":"server","mode":"ws","unix_ns":…,"uptime_s":…,"phase":"hold","target":1000000,
///   "split":"server: 57 workers × …","counters":{…Counters…},
///   "workers":{"count":57,"alive":57,"list":[{"shard":0,"pid":…,"kind":"process","alive":true,"open":…,"exit":null},…]},
///   "setup_steps":[{"connections":100000,"at_s":3.4,"step_s":3.4,"rate_per_s":29411.7},…],
///   "setup_rate":{"asked_per_s":25000.0,"connected":1000000,"duration_s":128.7,"achieved_per_s":7772.0},
///   "pushes":[{"push_id":1,"started_unix_ns":…,"count":…,"first_unix_ns":…,"last_unix_ns":…,"complete_s":…}],
///   "rss_bytes":…,"rss_baseline_bytes":…,"rss_per_connection_bytes":…,"cpu_user_s":…,"cpu_sys_s":…,
///   "histograms":{"connect_us":"HISTFAAA…",…},"percentiles":{"connect_us":{"count":…,"p99":…},…}}`
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct AppSnapshot {
    /// "server" or "client".
    pub side: String,
    /// "hold", "echo" or "ws".
    pub mode: String,
    /// CLOCK_REALTIME ns when the snapshot was taken.
    pub unix_ns: u64,
    /// CLOCK_REALTIME ns of the instant the counters describe: shards report every
    /// 250 ms, so the sums are older than `unix_ns` (the mean over the live shards of
    /// their last report, or of `unix_ns` - 250 ms for a shard with nothing new to say).
    /// Rates and kernel-vs-app comparisons use this, not `unix_ns`.
    pub counts_unix_ns: u64,
    /// Seconds since the side's supervisor started.
    pub uptime_s: f64,
    /// Client: "starting", "ramp", "hold", "closing", "closed". Server: "starting", "running", "stopping".
    pub phase: String,
    /// Client: connections asked for. Server: connections sized for (`--max-conns`).
    pub target: u64,
    /// The start-up line saying how the work was split and why.
    pub split: String,
    /// The side's connection and failure counts, summed over its shards.
    pub counters: Counters,
    /// The side's shards (worker processes or threads) and their state.
    pub workers: Workers,
    /// The setup-rate table: one row per step of connections established.
    pub setup_steps: Vec<SetupStep>,
    /// Client: asked vs achieved setup rate (None on the server).
    pub setup_rate: Option<SetupRate>,
    /// One entry per push, counts summed over the shards.
    pub pushes: Vec<PushSummary>,
    /// Client: the push mark every live shard has taken, so frames of that push are
    /// counted under it (the lab fires a trigger only after this shows its mark).
    pub push_mark: u64,
    /// Resident anonymous memory (RssAnon) summed over the supervisor and all live
    /// workers: what they allocated, not the code and files they mapped.
    pub rss_bytes: u64,
    /// The same sum measured after start-up, before any connection.
    pub rss_baseline_bytes: u64,
    /// (rss - baseline) / open, when connections are open.
    pub rss_per_connection_bytes: Option<f64>,
    /// CPU seconds of all processes of this side (dead workers: last value seen).
    pub cpu_user_s: f64,
    /// CPU seconds in the kernel (system), same processes.
    pub cpu_sys_s: f64,
    /// Threads and open fds of the side's processes, where the lab measures them from
    /// /proc (a foreign server's tree); None for c1m's own sides.
    pub threads: Option<u64>,
    /// Open fds of the side's processes; None for c1m's own sides.
    pub open_fds: Option<u64>,
    /// Base64 V2-deflate hdrhistograms, µs, keyed by name (see [`HIST_NAMES`]).
    pub histograms: BTreeMap<String, String>,
    /// Convenience percentiles of the same histograms.
    pub percentiles: BTreeMap<String, Percentiles>,
}

/// The shards of one side, as the supervisor sees them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Workers {
    /// Shards started.
    pub count: u32,
    /// Shards still running.
    pub alive: u32,
    /// One entry per shard.
    pub list: Vec<WorkerInfo>,
}

impl AppSnapshot {
    /// The instant the counters describe (`unix_ns` for snapshots that predate it).
    pub(crate) fn counts_at_ns(&self) -> u64 {
        if self.counts_unix_ns == 0 {
            self.unix_ns
        } else {
            self.counts_unix_ns
        }
    }

    /// Decodes one of the histograms.
    pub fn histogram(&self, name: &str) -> Result<Histogram<u64>, HistError> {
        match self.histograms.get(name) {
            Some(s) => decode_hist(s),
            None if HIST_NAMES.contains(&name) => new_hist(),
            None => Err(HistError::Unknown(name.to_owned())),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn push_stats_merge() {
        let mut a = PushStat {
            push_id: 1,
            started_unix_ns: 10,
            count: 3,
            first_unix_ns: 12,
            last_unix_ns: 20,
        };
        a.merge(&PushStat {
            push_id: 1,
            started_unix_ns: 10,
            count: 2,
            first_unix_ns: 11,
            last_unix_ns: 30,
        });
        assert_eq!((a.count, a.first_unix_ns, a.last_unix_ns), (5, 11, 30));
        assert!((PushSummary::from(a).complete_s - 20e-9).abs() < 1e-12);
    }
}
