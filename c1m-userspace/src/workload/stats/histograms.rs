//! The latency histograms: their names, what a shard recorded and how it goes to the
//! supervisor ((value, count) pairs), the lossless V2 encoding of snapshots and run files,
//! and the percentile table views print.

use std::collections::BTreeMap;

use base64::{Engine as _, engine::general_purpose::STANDARD as B64};
use hdrhistogram::{
    Histogram,
    serialization::{Deserializer, Serializer as _, V2DeflateSerializer},
};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Histogram names, in µs.
///
/// Connection setup is timed twice, as wrk2 times requests: `connect_us` from the
/// `connect()` call to the socket being established (service time), and
/// `connect_from_schedule_us` from the instant the pace scheduled that connect (see
/// `engine::pace`) to the same moment (response time, including the wait for an
/// in-flight slot when the client falls behind its `--rate`). With `--tls` the TLS
/// handshake is timed the same two ways: `tls_handshake_us` from the instant the client
/// saw its connect complete (and wrote its ClientHello) to the instant it read the input
/// that finished the handshake (its own Finished then sent), `tls_open_from_schedule_us`
/// from the scheduled instant to that same moment. WebSocket mode does the same for the
/// handshake: `ws_handshake_us` from the upgrade request written (at the connect's
/// completion, or with TLS at the TLS handshake's end) to a valid 101, so connect, TLS
/// and WebSocket handshake add up to the open; `ws_open_from_schedule_us` from the
/// scheduled instant to that 101. The schedule histograms stay empty when no `--rate`
/// was asked (nothing was scheduled); the TLS ones without `--tls`.
///
/// `push_message_us`: receive time minus the server's stamp the run's rule names
/// (`--push-latency`: the instant the broadcast began, the seeds' rule, or the instant
/// the server wrote that connection's frame; see `push_rule`). `push_fanout_us`: receive
/// time minus the instant the push was triggered, on the client's clock (its max is the
/// time until the last connection had the push).
///
/// `pong_us` (`--heartbeat`): from a ping written to its pong read, the pong matched to
/// the ping by the stamp the ping carries; late pongs included.
///
/// `churn_setup_us` (`--churn`): a reopen's whole setup, from its `connect()` call to
/// open (TCP, then TLS, then the WebSocket upgrade, as the mode has them). Reopens have
/// a histogram of their own: they happen while the box holds every connection, and in
/// the ramp's histograms they would change the ramp's figures the seeds compare.
///
/// `message_us` (`--message-rate`): a message's echo, from the instant the message was
/// scheduled to the echo read. `server_message_us` (`c1m server --message-rate`): a
/// server's message, from the instant the server scheduled it to the client's read of
/// it (one way; both read CLOCK_MONOTONIC, one clock on one kernel).
pub const HIST_NAMES: [&str; HISTS] = [
    "connect_us",
    "connect_from_schedule_us",
    "tls_handshake_us",
    "tls_open_from_schedule_us",
    "ws_handshake_us",
    "ws_open_from_schedule_us",
    "echo_rtt_us",
    "push_message_us",
    "push_fanout_us",
    "pong_us",
    "churn_setup_us",
    "message_us",
    "server_message_us",
];

/// A histogram of [`HIST_NAMES`] as views name it: without the `_us` of the unit it is
/// stored in, since every view prints it in ms ("connect_us" under an "ms" heading read
/// as two units).
pub(crate) fn hist_label(name: &str) -> &str {
    name.strip_suffix("_us").unwrap_or(name)
}

/// The setup latencies timed both ways: (what, from the call, from the schedule). Views
/// show each pair side by side, next to the asked and achieved
/// [`SetupRate`](super::setup_rate::SetupRate).
pub const SETUP_LATENCY_PAIRS: [(&str, &str, &str); 3] = [
    ("TCP connect", "connect_us", "connect_from_schedule_us"),
    (
        "TLS handshake (call: ClientHello → handshake done)",
        "tls_handshake_us",
        "tls_open_from_schedule_us",
    ),
    (
        "WebSocket open (call: handshake request → 101)",
        "ws_handshake_us",
        "ws_open_from_schedule_us",
    ),
];

/// How many histograms a client shard keeps.
pub(crate) const HISTS: usize = 13;

/// 1 µs to 1 hour at 3 significant digits: covers loopback RTTs and a SYN retransmitted for
/// minutes, at 0.1% resolution, in ~190 KiB per histogram (touched lazily).
const HIST_MAX_US: u64 = 3_600_000_000;

/// Why a latency histogram could not be made, encoded, decoded or merged.
#[derive(Debug, Error)]
pub enum HistError {
    /// The bounds given to hdrhistogram were invalid.
    #[error("histogram bounds: {0}")]
    Create(#[from] hdrhistogram::CreationError),
    /// A histogram blob that is not valid base64.
    #[error("base64: {0}")]
    Base64(#[from] base64::DecodeError),
    /// A blob that is not a valid HdrHistogram V2 encoding.
    #[error("histogram V2 deserialize: {0}")]
    Deserialize(#[from] hdrhistogram::serialization::DeserializeError),
    /// Encoding a histogram as deflated V2 failed.
    #[error("histogram V2 serialize: {0}")]
    Serialize(#[from] hdrhistogram::serialization::V2DeflateSerializeError),
    /// Merging two histograms failed (a value out of the target's bounds).
    #[error("histogram merge: {0}")]
    Add(#[from] hdrhistogram::AdditionError),
    /// Taking one histogram from another failed (a count the other did not have: the
    /// later histogram of a side was not the earlier one plus what came since).
    #[error("histogram subtract: {0}")]
    Subtract(#[from] hdrhistogram::SubtractionError),
    /// A histogram name not in [`HIST_NAMES`].
    #[error("unknown histogram {0}")]
    Unknown(String),
}

/// An empty histogram for µs latencies: 1 µs to 1 hour at 3 significant digits.
pub fn new_hist() -> Result<Histogram<u64>, HistError> {
    Ok(Histogram::new_with_bounds(1, HIST_MAX_US, 3)?)
}

/// What one client shard recorded since its last report, by histogram ([`HIST_NAMES`]
/// order): the values themselves, sent to the supervisor as (value, count) pairs, which
/// records them into the one histogram per name it keeps. A shard holds no histogram of
/// its own. When shards sent their whole histograms (V2, once a second while ramping),
/// the client supervisor at 1M decoded each into a fresh 190 KiB histogram and took the
/// shard's last one out of its sum again: 1.85 µs of CPU a WebSocket set up, 2.8% of the
/// ramp's, the largest part of c1m's CPU a connection above the C programs' (perf per
/// cgroup, 2026-12-06, docs/results.md). A value is a `Vec` push on the hot path instead
/// of an hdrhistogram record.
pub(crate) struct Hists {
    pending: [Vec<u64>; HISTS],
    /// Buckets values as the supervisor's histograms do, so equal buckets go as one pair
    /// (its counts are calloc'd: untouched, it holds no memory).
    buckets: Histogram<u64>,
    /// When they were last sent (monotonic ns).
    sent_at_ns: u64,
}

/// How often a ramping shard sends what it recorded, against 4 reports a second for its
/// counters: at 1M, 51 client workers. A shard whose ramp is done, and every forced or
/// final report, sends at once.
pub(crate) const HIST_REPORT_EVERY_NS: u64 = 1_000_000_000;

/// A shard keeps at most this many values' capacity a histogram between reports: a push
/// records up to ~20,000 in a second (one a connection), a ramp a few hundred.
const PENDING_KEPT: usize = 4096;

pub(crate) const CONNECT: usize = 0;
pub(crate) const CONNECT_FROM_SCHEDULE: usize = 1;
pub(crate) const TLS_HANDSHAKE: usize = 2;
pub(crate) const TLS_OPEN_FROM_SCHEDULE: usize = 3;
pub(crate) const WS_HANDSHAKE: usize = 4;
pub(crate) const WS_OPEN_FROM_SCHEDULE: usize = 5;
pub(crate) const ECHO_RTT: usize = 6;
pub(crate) const PUSH_MESSAGE: usize = 7;
pub(crate) const PUSH_FANOUT: usize = 8;
pub(crate) const PONG: usize = 9;
pub(crate) const CHURN_SETUP: usize = 10;
pub(crate) const MESSAGE: usize = 11;
pub(crate) const SERVER_MESSAGE: usize = 12;

impl Hists {
    pub(crate) fn new() -> Result<Hists, HistError> {
        Ok(Hists {
            pending: std::array::from_fn(|_| Vec::new()),
            buckets: new_hist()?,
            sent_at_ns: 0,
        })
    }

    /// Records a value in µs, saturating at the top of the range instead of failing.
    pub(crate) fn record(&mut self, which: usize, us: u64) {
        self.pending[which].push(us.clamp(1, HIST_MAX_US));
    }

    /// What was recorded since the last send, by the name of each histogram that has
    /// any: (value, count) pairs, a value the lowest of its bucket. At once, or at most
    /// every [`HIST_REPORT_EVERY_NS`].
    pub(crate) fn take_recorded(&mut self, now_ns: u64, at_once: bool) -> HistValues {
        let mut out = BTreeMap::new();
        if !at_once && now_ns < self.sent_at_ns.saturating_add(HIST_REPORT_EVERY_NS) {
            return out;
        }
        self.sent_at_ns = now_ns;
        for (values, name) in self.pending.iter_mut().zip(HIST_NAMES) {
            if values.is_empty() {
                continue;
            }
            for v in values.iter_mut() {
                *v = self.buckets.lowest_equivalent(*v);
            }
            values.sort_unstable();
            let mut pairs: Vec<(u64, u64)> = Vec::new();
            for &v in values.iter() {
                match pairs.last_mut() {
                    Some((last, n)) if *last == v => *n += 1,
                    _ => pairs.push((v, 1)),
                }
            }
            values.clear();
            values.shrink_to(PENDING_KEPT);
            out.insert(name.to_owned(), pairs);
        }
        out
    }
}

/// Values recorded since a shard's last report, by histogram name: (value µs, count).
pub(crate) type HistValues = BTreeMap<String, Vec<(u64, u64)>>;

/// Records a shard's `pairs` into `h`; the count of values out of `h`'s range (none from
/// c1m's own shards: they clamp), which are left out.
pub(crate) fn record_pairs(h: &mut Histogram<u64>, pairs: &[(u64, u64)]) -> u64 {
    pairs
        .iter()
        .filter(|&&(v, n)| h.record_n(v, n).is_err())
        .map(|&(_, n)| n)
        .sum()
}

/// A histogram as base64 of deflated HdrHistogram V2, as the run files and app
/// snapshots carry it; [`decode_hist`] reads it back.
pub fn encode_hist(h: &Histogram<u64>) -> Result<String, HistError> {
    let mut buf = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut buf)?;
    Ok(B64.encode(buf))
}

pub(crate) fn decode_hist(s: &str) -> Result<Histogram<u64>, HistError> {
    let raw = B64.decode(s)?;
    Ok(Deserializer::new().deserialize(&mut raw.as_slice())?)
}

/// The seed's latency table (count, min, max, mean, stddev, median, 75%, 95%, 98%, 99%,
/// 99.9%), in µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Percentiles {
    /// Values recorded (0: empty histogram, every figure 0).
    pub count: u64,
    /// Smallest value recorded, µs.
    pub min: u64,
    /// Largest value recorded, µs.
    pub max: u64,
    /// Mean, µs.
    pub mean: f64,
    /// Standard deviation, µs.
    pub stddev: f64,
    /// Median, µs.
    pub p50: u64,
    /// 75th percentile, µs.
    pub p75: u64,
    /// 95th percentile, µs.
    pub p95: u64,
    /// 98th percentile, µs.
    pub p98: u64,
    /// 99th percentile, µs.
    pub p99: u64,
    /// 99.9th percentile, µs.
    pub p999: u64,
}

impl Percentiles {
    /// The table of histogram `h` (all zeros when it is empty).
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
        // µs as ms with 3 decimals and thousands separators, as every view prints them.
        let ms = |v: f64| crate::fmt::ms(v);
        format!(
            "{title} (ms)\n  count={}\n  min={}\n  max={}\n  mean={}\n  stddev={}\n  median={}\n  75%={}\n  95%={}\n  98%={}\n  99%={}\n  99.9%={}\n",
            crate::fmt::count(self.count),
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
        for p in &parts {
            merged
                .add(decode_hist(&encode_hist(p).unwrap()).unwrap())
                .unwrap();
        }
        assert_eq!(merged, whole);
        assert_eq!(Percentiles::of(&merged), Percentiles::of(&whole));
    }

    #[test]
    fn shard_values_recorded_by_the_supervisor_equal_one_histogram() {
        // Three shards take the values of one sample set (latencies up to 500 s, so
        // buckets hold several values), and each sends twice; the supervisor's histogram
        // of their pairs is, count for count, the whole set recorded directly.
        let mut whole = new_hist().unwrap();
        let mut shards = [
            Hists::new().unwrap(),
            Hists::new().unwrap(),
            Hists::new().unwrap(),
        ];
        let mut sum = new_hist().unwrap();
        let mut pairs = 0;
        for round in 0..2u64 {
            for i in 0..15_000u64 {
                let v = 1 + (crate::workload::sys::splitmix64(round * 15_000 + i) % 500_000_000);
                whole.record(v).unwrap();
                shards[(i % 3) as usize].record(CONNECT, v);
            }
            for s in &mut shards {
                let sent = s.take_recorded(0, true);
                assert_eq!(sent.keys().collect::<Vec<_>>(), [HIST_NAMES[CONNECT]]);
                let p = &sent[HIST_NAMES[CONNECT]];
                pairs += p.len();
                assert_eq!(record_pairs(&mut sum, p), 0);
                // Sent values are not sent again.
                assert!(s.take_recorded(0, true).is_empty());
            }
        }
        assert_eq!(sum, whole);
        assert_eq!(sum.len(), 30_000);
        assert!(pairs < 30_000, "equal buckets go as one pair: {pairs}");
    }

    #[test]
    fn a_ramping_shard_sends_at_most_once_a_second() {
        let mut h = Hists::new().unwrap();
        h.record(WS_HANDSHAKE, 120);
        assert_eq!(h.take_recorded(5_000_000_000, false).len(), 1);
        h.record(WS_HANDSHAKE, 130);
        assert!(h.take_recorded(5_500_000_000, false).is_empty());
        let later = h.take_recorded(6_000_000_000, false);
        assert_eq!(later[HIST_NAMES[WS_HANDSHAKE]], [(130, 1)]);
    }
}
