//! What a shard sends its supervisor: a [`WorkerReport`] with its cumulative counters and
//! whatever changed since the last one, pushes as [`PushStat`]s.

use serde::{Deserialize, Serialize};

use super::{counters::Counters, histograms::HistValues};

/// One push as one shard saw it. Server: frames written; client: frames received.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub(crate) struct PushStat {
    pub push_id: u64,
    /// CLOCK_REALTIME ns the push is timed from. Server: when the broadcast began.
    /// Client: when its trigger fired, else the broadcast start in c1m's frame, else the
    /// first stamp (no trigger).
    pub started_unix_ns: u64,
    /// Server: frames written. Client: frames received.
    pub count: u64,
    /// Server: first/last frame written. Client: first/last frame received.
    pub first_unix_ns: u64,
    pub last_unix_ns: u64,
}

impl PushStat {
    pub(crate) fn merge(&mut self, o: &PushStat) {
        if self.count == 0 {
            *self = *o;
            return;
        }
        if o.count == 0 {
            return;
        }
        self.count += o.count;
        self.first_unix_ns = self.first_unix_ns.min(o.first_unix_ns);
        self.last_unix_ns = self.last_unix_ns.max(o.last_unix_ns);
        self.started_unix_ns = self.started_unix_ns.max(o.started_unix_ns);
    }
}

/// What a shard sends its supervisor (a JSON line on a worker's stdout, or a channel
/// message for a thread shard). Counters are cumulative; histograms, timeline and pushes
/// are sent only when they changed.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub(crate) struct WorkerReport {
    pub shard: u32,
    pub pid: u32,
    /// CLOCK_REALTIME ns when the shard read its counters for this report.
    pub unix_ns: u64,
    pub counters: Counters,
    /// Client: every connection of this shard was attempted and none is in flight.
    pub ramp_done: bool,
    /// Teardown (close/stop) finished: nothing open, nothing in flight.
    pub closed_all: bool,
    /// Listeners bound / ready to connect.
    pub ready: bool,
    /// What the shard recorded since its last report, by histogram: (value µs, count)
    /// pairs (see [`Hists`](super::histograms::Hists)).
    pub hists: HistValues,
    /// New connections per timeline bin since the last report: (bin index, count).
    pub timeline: Vec<(u32, u32)>,
    /// Pushes whose numbers changed since the last report (full current values).
    pub pushes: Vec<PushStat>,
    /// Server: the push this shard just finished writing (the supervisor then starts the
    /// push on a shard still waiting for it).
    pub push_done: Option<u64>,
    /// Client: the last push mark this shard took (`mark` on the control endpoint).
    pub mark: u64,
    /// A fatal error: the shard is exiting.
    pub fatal: Option<String>,
    /// One-line warnings (e.g. EMFILE reached), printed once by the supervisor.
    pub warnings: Vec<String>,
}
