//! The app's latency HdrHistograms (µs, 3 significant digits) as Prometheus histograms:
//! fixed `le` buckets in seconds, so series add up across hosts and runs
//! (`histogram_quantile(0.99, sum by (le) (rate(…_bucket[1m])))`), where the quantiles of
//! a summary cannot be combined at all.

use hdrhistogram::Histogram;

use super::encode::Buckets;
use crate::workload::stats::histograms::HIST_NAMES;

/// The app's latency histograms ([`HIST_NAMES`], µs) and their families (seconds): the
/// family is the histogram's name with `_us` turned into `_seconds`.
pub const LATENCIES: [(&str, &str, &str); HIST_NAMES.len()] = [
    (
        "connect_us",
        "c1m_connect_seconds",
        "TCP connect, from the connect() call to the socket established.",
    ),
    (
        "connect_from_schedule_us",
        "c1m_connect_from_schedule_seconds",
        "TCP connect, from the instant --rate scheduled it (includes waiting for an \
         in-flight slot: no coordinated omission).",
    ),
    (
        "tls_handshake_us",
        "c1m_tls_handshake_seconds",
        "TLS handshake, from the ClientHello written as the connect completed to the \
         handshake done (--tls only).",
    ),
    (
        "tls_open_from_schedule_us",
        "c1m_tls_open_from_schedule_seconds",
        "TLS handshake done, from the instant --rate scheduled the connect (--tls only).",
    ),
    (
        "ws_handshake_us",
        "c1m_ws_handshake_seconds",
        "WebSocket handshake, from the request written (with --tls: as the TLS handshake \
         ended) to a valid 101.",
    ),
    (
        "ws_open_from_schedule_us",
        "c1m_ws_open_from_schedule_seconds",
        "WebSocket open, from the instant --rate scheduled the connect to the 101.",
    ),
    (
        "echo_rtt_us",
        "c1m_echo_rtt_seconds",
        "Echo round-trip time, verified byte for byte.",
    ),
    (
        "push_message_us",
        "c1m_push_message_seconds",
        "Push receive time minus the server instant the run measures from (c1m_run_info's \
         push_latency_from): the broadcast start (--push-latency's default) or that \
         connection's frame's write.",
    ),
    (
        "push_fanout_us",
        "c1m_push_fanout_seconds",
        "Push receive time minus the instant the push was triggered, on the client's clock \
         (c1m_run_info's push_fanout_from: trigger; a client told no trigger instant \
         measures from the broadcast start in c1m's frame, on the server's clock).",
    ),
    (
        "pong_us",
        "c1m_pong_seconds",
        "--heartbeat: a ping's pong, from the ping written to the pong read (matched by \
         the stamp the ping carries; late pongs included).",
    ),
    (
        "churn_setup_us",
        "c1m_churn_setup_seconds",
        "--churn: a reopen's whole setup, from its connect() call to open (TCP, TLS and \
         the WebSocket upgrade as the mode has them).",
    ),
    (
        "message_us",
        "c1m_message_seconds",
        "--message-rate: a message's echo, from the instant the message was scheduled \
         to the echo read (coordinated omission corrected: a sender behind schedule or a \
         stalled peer shows in it).",
    ),
    (
        "server_message_us",
        "c1m_server_message_seconds",
        "c1m server --message-rate: a server's message, one way, from the instant the \
         server scheduled it to the client's read (one monotonic clock on one host; \
         coordinated omission corrected).",
    ),
];

/// Upper bounds of the buckets, µs: steps of 1, 2.5 and 5 from 5 µs (below a loopback
/// round trip) to 100 s (a connect behind SYN retransmits, a fan-out to a million);
/// above the last, only `+Inf`. 23 buckets: per family and side 25 series.
pub const BOUNDS_US: [u64; 23] = [
    5,
    10,
    25,
    50,
    100,
    250,
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
];

/// The histogram in [`BOUNDS_US`] buckets, in seconds. A value counts as at most a bound
/// when the HdrHistogram bucket it fell in starts at or below that bound (the
/// histogram's own `count_between(0, bound)`): exact below 2,048 µs, where each
/// HdrHistogram bucket holds one µs, and within its 0.1% precision above. `_sum` adds
/// each bucket's middle value, as the histogram's own mean does.
pub(super) fn buckets(h: &Histogram<u64>) -> Buckets {
    let mut per_bound = [0u64; BOUNDS_US.len()];
    let mut sum_us = 0.0;
    for v in h.iter_recorded() {
        let top = v.value_iterated_to();
        let n = v.count_at_value();
        let start = h.lowest_equivalent(top);
        sum_us += h.median_equivalent(top) as f64 * n as f64;
        // Above the last bound: only in `+Inf`, which the encoder writes from the count.
        if let Some(i) = BOUNDS_US.iter().position(|&b| start <= b) {
            per_bound[i] += n;
        }
    }
    Buckets {
        bounds: BOUNDS_US
            .iter()
            .zip(per_bound)
            .map(|(&b, n)| (b as f64 / 1e6, n))
            .collect(),
        sum: sum_us / 1e6,
        count: h.len(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;
    use crate::workload::stats::histograms::new_hist;

    #[test]
    fn cumulative_counts_are_the_histograms_own_at_every_bound() {
        let mut h = new_hist().unwrap();
        // Values on, just past and between the bounds, over the whole range.
        for &b in &BOUNDS_US {
            for v in [b.saturating_sub(1).max(1), b, b + 1, b * 2] {
                h.record(v).unwrap();
            }
        }
        h.record_n(3_000_000_000, 7).unwrap(); // 50 min: only +Inf
        for i in 0..10_000u64 {
            h.record(1 + crate::workload::sys::splitmix64(i) % 200_000_000)
                .unwrap();
        }
        let b = buckets(&h);
        assert_eq!(b.count, h.len());
        let mut cumulative = 0;
        for ((le, n), &bound) in b.bounds.iter().zip(&BOUNDS_US) {
            cumulative += n;
            assert_eq!(*le, bound as f64 / 1e6);
            assert_eq!(cumulative, h.count_between(0, bound), "le {le}");
        }
        // Above the last bound: the 50-minute values and the random ones past 100 s.
        assert!(b.count - cumulative >= 7);
        let mean = b.sum / b.count as f64 * 1e6;
        assert!(
            (mean - h.mean()).abs() < 1e-6 * h.mean(),
            "{mean} vs {}",
            h.mean()
        );
    }

    #[test]
    fn below_2048_us_every_bound_is_exact() {
        let mut h = new_hist().unwrap();
        for v in 1..=2_047u64 {
            h.record(v).unwrap();
        }
        let b = buckets(&h);
        let mut cumulative = 0;
        for ((_, n), &bound) in b.bounds.iter().zip(&BOUNDS_US) {
            cumulative += n;
            assert_eq!(cumulative, bound.min(2_047));
        }
        assert_eq!(b.count, 2_047);
        assert_eq!(b.sum, (1..=2_047u64).sum::<u64>() as f64 / 1e6);
    }
}
