//! Application statistics: what each shard counts, what it reports to its supervisor, and
//! [`AppSnapshot`], the one JSON document the control endpoint's `stats` answers and
//! `--stats-json` writes at exit. The lab (issue 4) reads it twice a second.
//!
//! Exactness rules: counters are summed; histograms are merged bucket by bucket after a
//! lossless V2 round trip (never averaged percentiles); the setup timeline is summed per
//! 10 ms bin; so an N-worker run reports the same numbers one process would.

use std::collections::BTreeMap;

use base64::{Engine as _, engine::general_purpose::STANDARD as B64};
use hdrhistogram::{
    Histogram,
    serialization::{Deserializer, Serializer as _, V2DeflateSerializer, V2Serializer},
};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Defines a struct of named u64 counters with `add`, `total` and `iter`, so each cause is a
/// stable JSON key and adding a cause is one line.
macro_rules! counter_set {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $field:ident),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(default)]
        pub struct $name { $($(#[$fm])* pub $field: u64),* }

        impl $name {
            pub fn add(&mut self, o: &$name) { $(self.$field += o.$field;)* }
            pub fn total(&self) -> u64 { 0 $(+ self.$field)* }
            pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$((stringify!($field), self.$field)),*].into_iter()
            }
        }
    };
}

counter_set! {
    /// Why an open connection ended.
    Closed {
        /// The peer closed (read returned 0, or a WebSocket close frame).
        peer_closed,
        /// ECONNRESET / EPIPE on an open connection.
        reset,
        /// We closed it: teardown (`close`, `stop`, end of hold).
        local_close,
        /// We closed it for a protocol violation (WebSocket 1002/1007/1009, bad handshake).
        protocol,
        /// Server: the WebSocket handshake had not completed within `--handshake-timeout`.
        handshake_timeout,
        /// Client only: an echo came back different from what was sent.
        echo_mismatch,
        /// Other I/O errors.
        error,
        /// The worker process holding it died; counted from its last report.
        worker_lost,
    }
}

counter_set! {
    /// Why a connection never became open (client: connect or handshake; server: accept).
    Failures {
        /// ECONNREFUSED: nothing listens there (or the accept queue overflowed with syncookies off).
        refused,
        /// EADDRNOTAVAIL: source address/port space exhausted for that destination.
        addr_not_avail,
        /// ETIMEDOUT or our own `--connect-timeout` / handshake timeout.
        timed_out,
        /// EMFILE/ENFILE: out of file descriptors.
        emfile,
        /// ECONNRESET during connect or handshake.
        reset,
        /// ENETUNREACH/EHOSTUNREACH.
        unreachable,
        /// WebSocket: the server answered, but not 101.
        handshake_rejected,
        /// WebSocket: malformed answer or wrong Sec-WebSocket-Accept.
        handshake_invalid,
        /// Server: accepted but closed at once because the worker was at its fd cap.
        over_capacity,
        /// Client: connect in flight when teardown began.
        aborted,
        /// Anything else (errno kept in the worker's stderr line).
        other,
    }
}

counter_set! {
    /// Protocol violations seen, by the answer the RFC prescribes.
    ProtocolErrors {
        /// Bad handshake answered with HTTP 400.
        http_400,
        /// Unsupported Sec-WebSocket-Version answered with HTTP 426.
        http_426,
        /// Frame-level protocol error, closed with 1002.
        ws_1002,
        /// Invalid UTF-8 in text, closed with 1007.
        ws_1007,
        /// Message too big, closed with 1009.
        ws_1009,
        /// Stream ended inside a frame or a handshake head.
        truncated,
    }
}

impl ProtocolErrors {
    /// Counts a WebSocket close we sent for a protocol violation, by its code.
    pub fn count_close(&mut self, code: u16) {
        match code {
            1007 => self.ws_1007 += 1,
            1009 => self.ws_1009 += 1,
            _ => self.ws_1002 += 1,
        }
    }
}

/// One side's counters. Server and client share the type; fields that do not apply to a
/// side stay 0, so the lab reads one schema.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(default)]
pub struct Counters {
    /// Client: connects started.
    pub attempted: u64,
    /// Client: connections established (WebSocket: after a valid 101).
    pub connected: u64,
    /// Server: connections accepted.
    pub accepted: u64,
    /// Currently open (server: including those still in the handshake).
    pub open: u64,
    /// Client: connects or handshakes not yet finished.
    pub in_flight: u64,
    /// WebSocket connections past the handshake (the ones a push reaches).
    pub ws_open: u64,
    pub closed: Closed,
    pub failures: Failures,
    pub protocol_errors: ProtocolErrors,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Server: push frames written. Client: push frames received.
    pub pushes_sent: u64,
    pub pushes_received: u64,
    /// Client: data frames that did not decode as a push of `--push-format` (and were
    /// no echo reply): a wrong format shows here, not as silence.
    pub push_undecodable: u64,
    /// Client: round trips completed and verified byte for byte. Server: messages echoed.
    pub echo_round_trips: u64,
    /// WebSocket data messages received / sent (echoes, pushes excluded on the client).
    pub ws_messages_in: u64,
    pub ws_messages_out: u64,
    pub ws_pings_in: u64,
}

impl Counters {
    pub fn add(&mut self, o: &Counters) {
        self.attempted += o.attempted;
        self.connected += o.connected;
        self.accepted += o.accepted;
        self.open += o.open;
        self.in_flight += o.in_flight;
        self.ws_open += o.ws_open;
        self.closed.add(&o.closed);
        self.failures.add(&o.failures);
        self.protocol_errors.add(&o.protocol_errors);
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.pushes_sent += o.pushes_sent;
        self.pushes_received += o.pushes_received;
        self.push_undecodable += o.push_undecodable;
        self.echo_round_trips += o.echo_round_trips;
        self.ws_messages_in += o.ws_messages_in;
        self.ws_messages_out += o.ws_messages_out;
        self.ws_pings_in += o.ws_pings_in;
    }
}

/// Histogram names, in µs.
///
/// Connection setup is timed twice, as wrk2 times requests: `connect_us` from the
/// `connect()` call to the socket being established (service time), and
/// `connect_from_schedule_us` from the instant the pace scheduled that connect (see
/// `engine::pace`) to the same moment (response time, including the wait for an
/// in-flight slot when the client falls behind its `--rate`). WebSocket mode does the
/// same for the handshake: `ws_handshake_us` from the request written to a valid 101,
/// `ws_open_from_schedule_us` from the scheduled instant to that 101. The schedule
/// histograms stay empty when no `--rate` was asked (nothing was scheduled).
///
/// `push_message_us`: receive time minus the server's stamp the run's rule names
/// (`--push-latency`: the instant the broadcast began, the seeds' rule, or the instant
/// the server wrote that connection's frame; see `push_rule`). `push_fanout_us`: receive
/// time minus the instant the push was triggered, on the client's clock (its max is the
/// time until the last connection had the push).
pub const HIST_NAMES: [&str; HISTS] = [
    "connect_us",
    "connect_from_schedule_us",
    "ws_handshake_us",
    "ws_open_from_schedule_us",
    "echo_rtt_us",
    "push_message_us",
    "push_fanout_us",
];

/// A histogram of [`HIST_NAMES`] as views name it: without the `_us` of the unit it is
/// stored in, since every view prints it in ms ("connect_us" under an "ms" heading read
/// as two units).
pub fn hist_label(name: &str) -> &str {
    name.strip_suffix("_us").unwrap_or(name)
}

/// The setup latencies timed both ways: (what, from the call, from the schedule). Views
/// show each pair side by side, next to the asked and achieved [`SetupRate`].
pub const SETUP_LATENCY_PAIRS: [(&str, &str, &str); 2] = [
    ("TCP connect", "connect_us", "connect_from_schedule_us"),
    (
        "WebSocket open (call: handshake request → 101)",
        "ws_handshake_us",
        "ws_open_from_schedule_us",
    ),
];

/// How many histograms a client shard keeps.
pub const HISTS: usize = 7;

/// 1 µs to 1 hour at 3 significant digits: covers loopback RTTs and a SYN retransmitted for
/// minutes, at 0.1% resolution, in ~190 KiB per histogram (touched lazily).
const HIST_MAX_US: u64 = 3_600_000_000;

#[derive(Debug, Error)]
pub enum HistError {
    #[error("histogram bounds: {0}")]
    Create(#[from] hdrhistogram::CreationError),
    #[error("base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("histogram V2 deserialize: {0}")]
    Deserialize(#[from] hdrhistogram::serialization::DeserializeError),
    #[error("histogram V2 serialize: {0}")]
    Serialize(#[from] hdrhistogram::serialization::V2DeflateSerializeError),
    #[error("histogram V2 serialize: {0}")]
    SerializePlain(#[from] hdrhistogram::serialization::V2SerializeError),
    #[error("histogram merge: {0}")]
    Add(#[from] hdrhistogram::AdditionError),
    #[error("unknown histogram {0}")]
    Unknown(String),
}

pub fn new_hist() -> Result<Histogram<u64>, HistError> {
    Ok(Histogram::new_with_bounds(1, HIST_MAX_US, 3)?)
}

/// The shard-side histograms timed from the schedule: 2 significant digits (1%), 1/8 of
/// the counts array. Their values spread from µs to minutes when a client falls behind, so
/// a 3-digit histogram ends up touching nearly all its 190 KiB in the shard and again in
/// the supervisor's copy: measured with 15,000 WebSocket connections over two shards,
/// the two schedule histograms at 3 digits cost +50 B per connection (227 → 277).
/// 1% is finer than anything a queueing wait is read for. The supervisor merges them
/// into [`new_hist`] histograms (exact: every recorded value is re-recorded), so views
/// see one kind.
pub fn new_coarse_hist() -> Result<Histogram<u64>, HistError> {
    Ok(Histogram::new_with_bounds(1, HIST_MAX_US, 2)?)
}

/// The histograms of one client shard, indexed by the constants below ([`HIST_NAMES`]
/// order). Each is ~190 KiB of address space but only the pages its values touch are
/// resident.
#[derive(Clone)]
pub struct Hists {
    pub h: [Histogram<u64>; HISTS],
    /// Total counts at the last report, to send only histograms that changed.
    sent_len: [u64; HISTS],
    /// When they were last sent (monotonic ns).
    sent_at_ns: u64,
}

/// How often a ramping shard sends its histograms, against 4 reports a second for its
/// counters. The supervisor decodes each blob into a fresh 190 KiB histogram (zeroed by
/// the allocator): at 1M over 51 client workers that was ~1.5% of the box's CPU at 4 Hz.
/// A shard whose ramp is done, and every forced or final report, sends at once.
pub const HIST_REPORT_EVERY_NS: u64 = 1_000_000_000;

pub const CONNECT: usize = 0;
pub const CONNECT_FROM_SCHEDULE: usize = 1;
pub const WS_HANDSHAKE: usize = 2;
pub const WS_OPEN_FROM_SCHEDULE: usize = 3;
pub const ECHO_RTT: usize = 4;
pub const PUSH_MESSAGE: usize = 5;
pub const PUSH_FANOUT: usize = 6;

impl Hists {
    pub fn new() -> Result<Hists, HistError> {
        // One `new_hist` each, not clones: a fresh histogram's counts are zeroed pages the
        // kernel maps on first touch, a clone would copy (and so touch) all 190 KiB.
        let h = [
            new_hist()?,
            new_coarse_hist()?,
            new_hist()?,
            new_coarse_hist()?,
            new_hist()?,
            new_hist()?,
            new_hist()?,
        ];
        Ok(Hists {
            h,
            sent_len: [0; HISTS],
            sent_at_ns: 0,
        })
    }

    /// Records a value in µs, saturating at the top of the range instead of failing.
    pub fn record(&mut self, which: usize, us: u64) {
        let h = &mut self.h[which];
        h.saturating_record(us.clamp(1, HIST_MAX_US));
    }

    /// Base64 V2 blobs of the histograms that changed since they were last sent: at once,
    /// or at most every [`HIST_REPORT_EVERY_NS`].
    pub fn changed_blobs(
        &mut self,
        now_ns: u64,
        at_once: bool,
    ) -> Result<BTreeMap<String, String>, HistError> {
        let mut out = BTreeMap::new();
        if !at_once && now_ns < self.sent_at_ns.saturating_add(HIST_REPORT_EVERY_NS) {
            return Ok(out);
        }
        self.sent_at_ns = now_ns;
        for ((h, sent), name) in self.h.iter().zip(self.sent_len.iter_mut()).zip(HIST_NAMES) {
            if h.len() != *sent {
                out.insert(name.to_owned(), encode_hist_plain(h)?);
                *sent = h.len();
            }
        }
        Ok(out)
    }
}

pub fn encode_hist(h: &Histogram<u64>) -> Result<String, HistError> {
    let mut buf = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut buf)?;
    Ok(B64.encode(buf))
}

/// A histogram as base64 V2 without deflate, for worker → supervisor reports: a client
/// worker reports its connect histogram 4 times a second while ramping, and deflating it
/// cost 3 µs of CPU per connection at 1M (8% of a 2-core box's budget per connection).
/// [`decode_hist`] reads both forms.
pub fn encode_hist_plain(h: &Histogram<u64>) -> Result<String, HistError> {
    let mut buf = Vec::new();
    V2Serializer::new().serialize(h, &mut buf)?;
    Ok(B64.encode(buf))
}

pub fn decode_hist(s: &str) -> Result<Histogram<u64>, HistError> {
    let raw = B64.decode(s)?;
    Ok(Deserializer::new().deserialize(&mut raw.as_slice())?)
}

/// The seed's latency table (count, min, max, mean, stddev, median, 75%, 95%, 98%, 99%,
/// 99.9%), in µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Percentiles {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    pub stddev: f64,
    pub p50: u64,
    pub p75: u64,
    pub p95: u64,
    pub p98: u64,
    pub p99: u64,
    pub p999: u64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: h.len(),
            min: h.min(),
            max: h.max(),
            mean: h.mean(),
            stddev: h.stdev(),
            p50: h.value_at_quantile(0.50),
            p75: h.value_at_quantile(0.75),
            p95: h.value_at_quantile(0.95),
            p98: h.value_at_quantile(0.98),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
        }
    }

    /// The table as the seed printed it, values converted to ms.
    pub fn table(&self, title: &str) -> String {
        let ms = |v: f64| v / 1000.0;
        format!(
            "{title} (ms)\n  count={}\n  min={:.3}\n  max={:.3}\n  mean={:.3}\n  stddev={:.3}\n  median={:.3}\n  75%={:.3}\n  95%={:.3}\n  98%={:.3}\n  99%={:.3}\n  99.9%={:.3}\n",
            self.count,
            ms(self.min as f64),
            ms(self.max as f64),
            ms(self.mean),
            ms(self.stddev),
            ms(self.p50 as f64),
            ms(self.p75 as f64),
            ms(self.p95 as f64),
            ms(self.p98 as f64),
            ms(self.p99 as f64),
            ms(self.p999 as f64),
        )
    }
}

/// One push as one shard saw it. Server: frames written; client: frames received.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct PushStat {
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
    pub fn merge(&mut self, o: &PushStat) {
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

/// Setup timeline resolution: fine enough for a 10%-step table of a 1,000-connection run,
/// coarse enough that a 40 s ramp is 4,000 bins.
pub const TIMELINE_BIN_MS: u64 = 10;

/// What a shard sends its supervisor (a JSON line on a worker's stdout, or a channel
/// message for a thread shard). Counters are cumulative; histograms, timeline and pushes
/// are sent only when they changed.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct WorkerReport {
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
    /// Changed histograms, base64 V2 (not deflated: see [`encode_hist_plain`]).
    pub hists: BTreeMap<String, String>,
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

/// One row of the setup-rate table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SetupStep {
    /// Connections established at the end of this step (a multiple of the step size).
    pub connections: u64,
    /// Seconds from the start of the ramp to the end of this step.
    pub at_s: f64,
    /// Seconds the step took.
    pub step_s: f64,
    /// Connections per second within the step.
    pub rate_per_s: f64,
}

/// Sums per-bin counts (in bin order) into the step table. `bins[i]` holds the connections
/// established during [i, i+1) × TIMELINE_BIN_MS after the ramp began.
pub fn setup_steps(bins: &[u64], step: u64) -> Vec<SetupStep> {
    let mut out = Vec::new();
    if step == 0 {
        return out;
    }
    let bin_s = TIMELINE_BIN_MS as f64 / 1000.0;
    let mut cum = 0u64;
    let mut next = step;
    let mut last_at = 0.0;
    for (i, &c) in bins.iter().enumerate() {
        cum += c;
        while cum >= next {
            let at_s = (i + 1) as f64 * bin_s;
            let step_s = at_s - last_at;
            out.push(SetupStep {
                connections: next,
                at_s,
                step_s,
                rate_per_s: if step_s > 0.0 {
                    step as f64 / step_s
                } else {
                    0.0
                },
            });
            last_at = at_s;
            next += step;
        }
    }
    out
}

/// A client's setup rate, asked vs achieved: the one definition the summary, the report
/// and `c1m compare` read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct SetupRate {
    /// `--rate`, connections per second (None: unpaced, as fast as `--in-flight` allows).
    pub asked_per_s: Option<f64>,
    /// Connections established by the end of the ramp (or so far, while it runs).
    pub connected: u64,
    /// Seconds from the start of the ramp to the last connection established once the
    /// ramp ended (every connect done or failed, or teardown began), or until now while it
    /// runs.
    pub duration_s: f64,
    /// `connected / duration_s`.
    pub achieved_per_s: Option<f64>,
    /// The busiest stretch of the ramp, from the connections' own instants.
    pub peak: PeakRate,
}

/// The shortest stretch a peak setup rate is taken over: a second, the grain of the
/// time series beside it.
pub const PEAK_WINDOW_MS: u64 = 1000;

/// The highest setup rate of a ramp, from the instants the connections were established
/// (the 10 ms timeline), never from a per-second sampler, which a ramp shorter than its
/// period slips between (issue 20: "peak 3,949/s" beside "achieved 14,706/s" for a
/// 0.34 s ramp).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PeakRate {
    /// Not recorded: a run from before c1m measured it this way.
    #[default]
    NotRecorded,
    /// Merged from client hosts, each with its own timeline: no peak over their sum.
    AcrossHosts,
    /// No connection was established.
    NoConnection,
    /// The densest stretch of at least [`PEAK_WINDOW_MS`]: connections per second over
    /// [`from_s`, `to_s`) after the ramp began. Never below the achieved rate: the whole
    /// ramp is one of the stretches.
    Busiest { per_s: f64, from_s: f64, to_s: f64 },
    /// The ramp ended within [`PEAK_WINDOW_MS`]: the achieved rate is its only rate.
    RampShorter { ramp_s: f64 },
}

impl PeakRate {
    pub fn per_s(self) -> Option<f64> {
        match self {
            PeakRate::Busiest { per_s, .. } => Some(per_s),
            _ => None,
        }
    }

    /// Why there is no value, in a few words (a table cell); None when there is one.
    pub fn why_none(self) -> Option<String> {
        Some(match self {
            PeakRate::Busiest { .. } => return None,
            PeakRate::NotRecorded => "not recorded by this run's c1m".to_owned(),
            PeakRate::AcrossHosts => "not summed across hosts".to_owned(),
            PeakRate::NoConnection => "no connection".to_owned(),
            PeakRate::RampShorter { ramp_s } => format!(
                "ramp {ramp_s:.2} s, shorter than {} s",
                PEAK_WINDOW_MS as f64 / 1000.0
            ),
        })
    }
}

/// Seconds of `bins` timeline bins: one expression for the achieved and the peak rate,
/// so the whole ramp's rate is the same number in both.
fn bins_s(bins: usize) -> f64 {
    bins as f64 * TIMELINE_BIN_MS as f64 / 1000.0
}

/// The densest stretch of at least [`PEAK_WINDOW_MS`] of the ramp in `bins` (bin 0 at
/// its start, to the last bin with a connection). A stretch of 2·W bins or more splits
/// into two of at least W, one as dense as the whole, so stretches shorter than 2·W are
/// all there is to try: O(bins · W), ~1 ms for a 100 s ramp.
pub fn peak_rate(bins: &[u64]) -> PeakRate {
    let Some(last) = bins.iter().rposition(|&c| c > 0) else {
        return PeakRate::NoConnection;
    };
    let ramp = last + 1;
    let w = (PEAK_WINDOW_MS / TIMELINE_BIN_MS) as usize;
    if ramp < w {
        return PeakRate::RampShorter {
            ramp_s: bins_s(ramp),
        };
    }
    let mut prefix = Vec::with_capacity(ramp + 1);
    prefix.push(0u64);
    for &c in &bins[..ramp] {
        prefix.push(prefix[prefix.len() - 1] + c);
    }
    // (connections, bins, first bin) of the densest stretch so far.
    let mut best = (0u64, 1usize, 0usize);
    for start in 0..=ramp - w {
        for len in w..(2 * w).min(ramp - start + 1) {
            let sum = prefix[start + len] - prefix[start];
            if u128::from(sum) * best.1 as u128 > u128::from(best.0) * len as u128 {
                best = (sum, len, start);
            }
        }
    }
    let (sum, len, start) = best;
    PeakRate::Busiest {
        per_s: sum as f64 / bins_s(len),
        from_s: bins_s(start),
        to_s: bins_s(start + len),
    }
}

impl SetupRate {
    pub fn new(asked_per_s: f64, connected: u64, duration_s: f64) -> SetupRate {
        SetupRate {
            asked_per_s: (asked_per_s > 0.0).then_some(asked_per_s),
            connected,
            duration_s,
            achieved_per_s: (duration_s > 0.0).then(|| connected as f64 / duration_s),
            peak: PeakRate::NotRecorded,
        }
    }

    /// The rate of a ramp whose connections were established in `bins`: achieved over
    /// `duration_s`, and the peak from the same bins.
    pub fn of_timeline(
        asked_per_s: f64,
        connected: u64,
        duration_s: f64,
        bins: &[u64],
    ) -> SetupRate {
        SetupRate {
            peak: peak_rate(bins),
            ..SetupRate::new(asked_per_s, connected, duration_s)
        }
    }
}

/// Seconds from the start of the ramp to the end of the timeline bin in which the last
/// connection was established (None: none was). Exact to a bin (10 ms), where the
/// supervisor learns that the ramp ended only at the shards' next report (up to 250 ms).
pub fn last_connection_s(bins: &[u64]) -> Option<f64> {
    let last = bins.iter().rposition(|&c| c > 0)?;
    Some(bins_s(last + 1))
}

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
    pub shard: u32,
    pub pid: u32,
    pub kind: ShardKind,
    pub alive: bool,
    pub open: u64,
    /// Why it ended, if it died.
    pub exit: Option<String>,
}

/// Push summary across all shards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PushSummary {
    pub push_id: u64,
    pub started_unix_ns: u64,
    /// Server: frames written. Client: frames received.
    pub count: u64,
    pub first_unix_ns: u64,
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
    pub uptime_s: f64,
    /// Client: "starting", "ramp", "hold", "closing", "closed". Server: "starting", "running", "stopping".
    pub phase: String,
    /// Client: connections asked for. Server: connections sized for (`--max-conns`).
    pub target: u64,
    /// The start-up line saying how the work was split and why.
    pub split: String,
    pub counters: Counters,
    pub workers: Workers,
    pub setup_steps: Vec<SetupStep>,
    /// Client: asked vs achieved setup rate (None on the server).
    pub setup_rate: Option<SetupRate>,
    pub pushes: Vec<PushSummary>,
    /// Client: the push mark every live shard has taken, so frames of that push are
    /// counted under it (the lab fires a trigger only after this shows its mark).
    pub push_mark: u64,
    /// Sum of VmRSS over the supervisor and all live workers.
    pub rss_bytes: u64,
    /// The same sum measured after start-up, before any connection.
    pub rss_baseline_bytes: u64,
    /// (rss - baseline) / open, when connections are open.
    pub rss_per_connection_bytes: Option<f64>,
    /// CPU seconds of all processes of this side (dead workers: last value seen).
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    /// Threads and open fds of the side's processes, where the lab measures them from
    /// /proc (a foreign server's tree); None for c1m's own sides.
    pub threads: Option<u64>,
    pub open_fds: Option<u64>,
    /// Base64 V2-deflate hdrhistograms, µs, keyed by name (see [`HIST_NAMES`]).
    pub histograms: BTreeMap<String, String>,
    /// Convenience percentiles of the same histograms.
    pub percentiles: BTreeMap<String, Percentiles>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Workers {
    pub count: u32,
    pub alive: u32,
    pub list: Vec<WorkerInfo>,
}

impl AppSnapshot {
    /// The instant the counters describe (`unix_ns` for snapshots that predate it).
    pub fn counts_at_ns(&self) -> u64 {
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

    /// 30,000 values up to `max`, recorded whole and split over three shards.
    fn recorded(
        new: fn() -> Result<Histogram<u64>, HistError>,
        max: u64,
    ) -> (Histogram<u64>, [Histogram<u64>; 3]) {
        let mut whole = new().unwrap();
        let mut parts = [new().unwrap(), new().unwrap(), new().unwrap()];
        for i in 0..30_000u64 {
            let v = 1 + (crate::workload::sys::splitmix64(i) % max);
            whole.record(v).unwrap();
            parts[(i % 3) as usize].record(v).unwrap();
        }
        (whole, parts)
    }

    #[test]
    fn merged_histograms_equal_one_histogram() {
        // Three shards record disjoint slices of one sample set; merging their V2 blobs must
        // give exactly the histogram of the whole set (same counts in every bucket).
        let (whole, parts) = recorded(new_hist, 5_000_000);
        let mut merged = new_hist().unwrap();
        for (i, p) in parts.iter().enumerate() {
            // Worker reports carry plain V2, snapshots V2-deflate: both decode alike.
            let blob = if i == 0 {
                encode_hist_plain(p).unwrap()
            } else {
                encode_hist(p).unwrap()
            };
            merged.add(decode_hist(&blob).unwrap()).unwrap();
        }
        assert_eq!(merged, whole);
        assert_eq!(Percentiles::of(&merged), Percentiles::of(&whole));
    }

    #[test]
    fn coarse_shard_histograms_merge_exactly() {
        // Schedule histograms are 2-digit in the shards and merged into 3-digit ones:
        // three shards merged equal the whole set recorded coarse then merged, count for
        // count, and the percentiles stay within the coarse histogram's 1%.
        let (whole, parts) = recorded(new_coarse_hist, 500_000_000);
        let mut merged = new_hist().unwrap();
        for p in &parts {
            merged
                .add(decode_hist(&encode_hist_plain(p).unwrap()).unwrap())
                .unwrap();
        }
        let mut expected = new_hist().unwrap();
        expected.add(&whole).unwrap();
        assert_eq!(merged, expected);
        assert_eq!(merged.len(), 30_000);
        let (a, b) = (
            merged.value_at_quantile(0.99) as f64,
            whole.value_at_quantile(0.99) as f64,
        );
        assert!((a - b).abs() / b < 0.01, "{a} {b}");
    }

    #[test]
    fn counters_sum_exactly() {
        let mut a = Counters {
            accepted: 5,
            open: 3,
            ..Default::default()
        };
        a.closed.peer_closed = 2;
        let mut b = Counters {
            accepted: 7,
            open: 7,
            ..Default::default()
        };
        b.failures.emfile = 1;
        a.add(&b);
        assert_eq!(
            (a.accepted, a.open, a.closed.total(), a.failures.emfile),
            (12, 10, 2, 1)
        );
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<Counters>(&json).unwrap(), a);
    }

    #[test]
    fn setup_steps_from_bins() {
        // 100 connections per 10 ms bin for 1 s, then 50 per bin: steps of 2,500.
        let mut bins = vec![100u64; 100];
        bins.extend(std::iter::repeat_n(50, 100));
        let steps = setup_steps(&bins, 2500);
        assert_eq!(steps.len(), 6);
        assert_eq!(steps[0].connections, 2500);
        assert!((steps[0].at_s - 0.25).abs() < 1e-9);
        assert!((steps[0].rate_per_s - 10_000.0).abs() < 1e-6);
        assert!((steps[5].rate_per_s - 5_000.0).abs() < 1e-6);
    }

    #[test]
    fn last_connection_is_the_end_of_the_last_busy_bin() {
        assert_eq!(last_connection_s(&[]), None);
        assert_eq!(last_connection_s(&[0, 0]), None);
        assert_eq!(last_connection_s(&[3, 0, 5, 0, 0]), Some(0.03));
        let r = SetupRate::new(500.0, 1000, 2.0);
        assert_eq!(
            (r.asked_per_s, r.achieved_per_s),
            (Some(500.0), Some(500.0))
        );
        let unpaced = SetupRate::new(0.0, 10, 0.0);
        assert_eq!((unpaced.asked_per_s, unpaced.achieved_per_s), (None, None));
    }

    /// The achieved rate as the supervisor computes it once the ramp ended.
    fn achieved(bins: &[u64]) -> f64 {
        let n: u64 = bins.iter().sum();
        SetupRate::new(0.0, n, last_connection_s(bins).unwrap())
            .achieved_per_s
            .unwrap()
    }

    #[test]
    fn a_ramp_shorter_than_the_window_says_so_instead_of_a_lower_peak() {
        // The case: 5,000 connections in 0.34 s, 14,706/s achieved.
        let bins = vec![5000 / 34 + 1; 34];
        let r = peak_rate(&bins);
        assert_eq!(r, PeakRate::RampShorter { ramp_s: 0.34 });
        assert_eq!(r.per_s(), None);
        assert_eq!(r.why_none().unwrap(), "ramp 0.34 s, shorter than 1 s");
        assert_eq!(peak_rate(&[0, 0]), PeakRate::NoConnection);
    }

    #[test]
    fn the_peak_is_the_densest_stretch_of_at_least_a_second() {
        // 10 per bin for 2 s, 30 per bin from 0.50 to 1.70 s.
        let mut bins = vec![10u64; 200];
        for b in &mut bins[50..170] {
            *b = 30;
        }
        assert_eq!(
            peak_rate(&bins),
            PeakRate::Busiest {
                per_s: 3000.0,
                from_s: 0.5,
                to_s: 1.5
            }
        );
        // The whole ramp, exactly a second, uniform: peak and achieved are one number.
        let uniform = vec![7u64; 100];
        assert_eq!(peak_rate(&uniform).per_s(), Some(achieved(&uniform)));
    }

    #[test]
    fn the_peak_is_never_below_the_achieved_rate() {
        // Two bursts 1.5 s apart (a SYN retried after its 1 s timeout): every 1-s window
        // holds one burst, 500/s, under the 662/s achieved; a stretch of at least 1 s
        // holding both is what the peak is.
        let mut bins = vec![0u64; 151];
        bins[0] = 500;
        bins[150] = 500;
        let peak = peak_rate(&bins).per_s().unwrap();
        assert!(peak >= achieved(&bins), "{peak} < {}", achieved(&bins));
        for seed in 0..200u64 {
            let len = 100 + (crate::workload::sys::splitmix64(seed) % 700) as usize;
            let bins: Vec<u64> = (0..len as u64)
                .map(|i| crate::workload::sys::splitmix64(seed * 1000 + i) % 5 * (i % 7))
                .chain([1])
                .collect();
            let peak = peak_rate(&bins).per_s().unwrap();
            assert!(peak >= achieved(&bins), "seed {seed}: {peak}");
        }
    }

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
