//! The client's connect schedule, as pure arithmetic: a shard paced at `rate` conn/s means
//! its `k`-th connect (k from 0) is due `k / rate` seconds after the ramp began. The pump
//! starts whatever is due (bounded by `--in-flight`); latency measured from the instant a
//! connect was *due* includes the wait for a slot, which latency measured from the
//! `connect()` call hides (coordinated omission, as wrk2 `-R` corrects it for requests).
//!
//! The schedule is derived from the connection's index, so it costs no memory per
//! connection: the engine keeps the global index `g` already, and `k = (g - first) / stride`.

/// Connects due `elapsed_ns` after the ramp began, at most `count`. `rate <= 0`: unpaced,
/// everything is due at once.
pub(crate) fn due(rate: f64, count: u64, elapsed_ns: u64) -> u64 {
    if rate <= 0.0 {
        return count;
    }
    ((rate * elapsed_ns as f64 / 1e9) as u64 + 1).min(count)
}

/// Nanoseconds after the ramp began at which the `k`-th connect is due: the first instant
/// at which [`due`] exceeds `k`. `None` when unpaced: nothing was scheduled, so there is
/// no queueing to measure.
pub(crate) fn scheduled_ns(rate: f64, k: u64) -> Option<u64> {
    (rate > 0.0).then(|| (k as f64 * 1e9 / rate).ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_connect_is_due_at_its_scheduled_instant() {
        // Rates as a 68-way split of 25,000/s gives them, and a slow one.
        for rate in [25_000.0 / 68.0, 3.0, 10_000.0, 1.0] {
            for k in [0u64, 1, 2, 7, 999, 123_456] {
                let at = scheduled_ns(rate, k).unwrap_or(u64::MAX);
                // 1 µs either side of the instant: float rounding may not decide for us.
                assert!(due(rate, u64::MAX, at + 1_000) > k, "rate {rate} k {k}");
                if k > 0 {
                    assert!(due(rate, u64::MAX, at - 1_000) <= k, "rate {rate} k {k}");
                }
            }
        }
    }

    #[test]
    fn schedule_values() {
        assert_eq!(scheduled_ns(1_000.0, 0), Some(0));
        assert_eq!(scheduled_ns(1_000.0, 1), Some(1_000_000));
        assert_eq!(scheduled_ns(4.0, 10), Some(2_500_000_000));
        assert_eq!(scheduled_ns(0.0, 10), None);
        assert_eq!(due(1_000.0, 5, 0), 1);
        assert_eq!(due(1_000.0, 5, 2_000_000), 3);
        assert_eq!(due(1_000.0, 5, 60_000_000_000), 5);
        assert_eq!(due(0.0, 5, 0), 5);
    }
}
