//! The interval on a difference between two setups: a bootstrap over each setup's runs
//! and, for a latency percentile, over each run's connections. Pure and seeded: the same
//! runs give the same interval every time.
//!
//! The statistic is the difference of the two setups' medians over their runs (a median,
//! because one run of three on a box whose speed swings by the hour should not move it).
//! Its percent is taken against the baseline's observed median, a fixed denominator: the
//! interval then excludes 0 exactly when a ratio-of-medians interval would exclude 1, and
//! a baseline of 0 (no overflows) still gets an interval, in the figure's own unit.

use hdrhistogram::Histogram;
use rand::{RngExt as _, SeedableRng as _, rngs::Xoshiro256PlusPlus};
use rand_distr::{Beta, Distribution as _};
use serde::Serialize;

/// Resamples per interval, fixed so intervals are reproducible; with 2,000 the 2.5% and
/// 97.5% points are the 51st and the 1,950th of the sorted differences.
pub(crate) const RESAMPLES: usize = 2000;
/// The interval's confidence: it holds the middle 95% of the resampled differences.
pub(crate) const CONFIDENCE: f64 = 0.95;

/// A run's latency histogram as cumulative counts over its recorded values (a few hundred
/// buckets however many connections): what a resample of its connections draws from.
#[derive(Debug)]
pub(crate) struct Connections {
    /// Each recorded bucket's highest equivalent value, as `value_at_quantile` reports it.
    values: Vec<f64>,
    /// Connections at or below each bucket.
    cumulative: Vec<u64>,
}

impl Connections {
    /// `None` for an empty histogram: no connection to redraw.
    pub(crate) fn of(h: &Histogram<u64>) -> Option<Connections> {
        let mut values = Vec::new();
        let mut cumulative = Vec::new();
        let mut total = 0u64;
        for v in h.iter_recorded() {
            total += v.count_since_last_iteration();
            values.push(h.highest_equivalent(v.value_iterated_to()) as f64);
            cumulative.push(total);
        }
        (total > 0).then_some(Connections { values, cumulative })
    }

    fn total(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }

    /// The value at cumulative fraction `u`: the smallest recorded value with at least
    /// `u · n` connections at or below it.
    fn at(&self, u: f64) -> f64 {
        let target = u * self.total() as f64;
        let i = self.cumulative.partition_point(|c| (*c as f64) < target);
        self.values
            .get(i.min(self.values.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    }
}

/// One run's percentile, redrawn as a resample of its connections would give it. The
/// percentile is the k-th smallest of n values (k = ⌈q·n⌉, as hdrhistogram takes it); the
/// k-th smallest of n draws from a distribution F is F⁻¹ of the k-th smallest of n
/// uniforms, which is Beta(k, n − k + 1). One Beta draw and one binary search therefore
/// replace drawing n values: 15,000 connections cost what 20 do.
#[derive(Debug)]
pub(crate) struct Redraw<'a> {
    connections: &'a Connections,
    order: Beta<f64>,
}

impl<'a> Redraw<'a> {
    pub(crate) fn new(connections: &'a Connections, quantile: f64) -> Option<Redraw<'a>> {
        let n = connections.total();
        let k = ((quantile.clamp(0.0, 1.0) * n as f64).ceil() as u64).clamp(1, n);
        let order = Beta::new(k as f64, (n - k + 1) as f64).ok()?;
        Some(Redraw { connections, order })
    }

    fn draw(&self, rng: &mut Xoshiro256PlusPlus) -> f64 {
        self.connections.at(self.order.sample(rng))
    }
}

/// One run's value of a figure and, for a latency percentile, how to redraw it.
#[derive(Debug)]
pub(crate) struct RunValue<'a> {
    pub value: f64,
    pub redraw: Option<Redraw<'a>>,
}

/// What an interval's resamples drew.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Resampled {
    /// Each setup's runs, with replacement.
    Runs,
    /// Each run's connections (a setup with one run: its percentile's own precision).
    Connections,
    /// Both: the runs, then each drawn run's connections.
    RunsAndConnections,
}

impl Resampled {
    pub(crate) fn key(self) -> &'static str {
        match self {
            Resampled::Runs => "runs",
            Resampled::Connections => "connections",
            Resampled::RunsAndConnections => "runs_and_connections",
        }
    }
}

/// A [`CONFIDENCE`] interval on median(other) − median(base), in the figure's unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Interval {
    pub low: f64,
    pub high: f64,
    pub resampled: Resampled,
}

impl Interval {
    pub(crate) fn contains_zero(&self) -> bool {
        self.low <= 0.0 && 0.0 <= self.high
    }
}

/// The median of a few values (the mean of the middle two for an even count).
pub(crate) fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// The bootstrap interval on the difference of the medians. Each resample draws each
/// setup's runs with replacement and, where a run's value can be redrawn from its
/// connections, redraws it. `None` when there is nothing to resample (one run each and no
/// connections) or a setup has no run. `seed` makes it reproducible.
pub(crate) fn difference(base: &[RunValue], other: &[RunValue], seed: u64) -> Option<Interval> {
    if base.is_empty() || other.is_empty() {
        return None;
    }
    let runs = base.len() > 1 || other.len() > 1;
    let connections = base.iter().chain(other).any(|r| r.redraw.is_some());
    let resampled = match (runs, connections) {
        (false, false) => return None,
        (true, false) => Resampled::Runs,
        (false, true) => Resampled::Connections,
        (true, true) => Resampled::RunsAndConnections,
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut scratch = Vec::with_capacity(base.len().max(other.len()));
    let mut resampled_median = |runs: &[RunValue], rng: &mut Xoshiro256PlusPlus| {
        scratch.clear();
        for _ in 0..runs.len() {
            let r = &runs[rng.random_range(0..runs.len())];
            scratch.push(r.redraw.as_ref().map_or(r.value, |d| d.draw(rng)));
        }
        median(&mut scratch).unwrap_or(0.0)
    };
    let mut diffs: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            let b = resampled_median(base, &mut rng);
            resampled_median(other, &mut rng) - b
        })
        .collect();
    diffs.sort_by(f64::total_cmp);
    let tail = (1.0 - CONFIDENCE) / 2.0;
    let lo = (tail * RESAMPLES as f64).floor() as usize;
    let hi = ((1.0 - tail) * RESAMPLES as f64).ceil() as usize - 1;
    Some(Interval {
        low: diffs[lo],
        high: diffs[hi.min(RESAMPLES - 1)],
        resampled,
    })
}

/// A seed from the row and the two names (FNV-1a: stable across Rust releases, unlike
/// std's hasher), so an interval does not depend on which other rows were compared.
pub(crate) fn seed(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain([0]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn runs(values: &[f64]) -> Vec<RunValue<'static>> {
        values
            .iter()
            .map(|v| RunValue {
                value: *v,
                redraw: None,
            })
            .collect()
    }

    #[test]
    fn medians_and_seeds() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
        assert_eq!(seed(&["a", "bc"]), seed(&["a", "bc"]));
        assert_ne!(seed(&["a", "bc"]), seed(&["ab", "c"]));
    }

    #[test]
    fn the_interval_is_reproducible_and_brackets_the_difference() {
        let (a, b) = (runs(&[10.0, 11.0, 12.0]), runs(&[20.0, 21.0, 22.0]));
        let i = difference(&a, &b, 7).unwrap();
        assert_eq!(i, difference(&a, &b, 7).unwrap());
        assert_eq!(i.resampled, Resampled::Runs);
        // Three runs each: the bootstrap's median of three spans the runs' range.
        assert_eq!((i.low, i.high), (8.0, 12.0));
        assert!(!i.contains_zero());
        assert!(difference(&runs(&[1.0]), &runs(&[2.0]), 7).is_none());
        assert!(difference(&runs(&[]), &b, 7).is_none());
    }

    /// A percentile redrawn from its connections spreads as the order statistic does:
    /// the median of 15,000 connections uniform on 1..=1000 µs moves by about ±1%.
    #[test]
    fn a_percentile_is_redrawn_from_the_connections() {
        let mut h = crate::workload::stats::histograms::new_hist().unwrap();
        for i in 0..15_000u64 {
            h.record(1 + i % 1000).unwrap();
        }
        let c = Connections::of(&h).unwrap();
        assert_eq!(c.total(), 15_000);
        let started = std::time::Instant::now();
        let one = |q: f64| RunValue {
            value: h.value_at_quantile(q) as f64,
            redraw: Redraw::new(&c, q),
        };
        let i = difference(&[one(0.5)], &[one(0.5)], 1).unwrap();
        eprintln!(
            "one 15,000-connection percentile interval: {:?}",
            started.elapsed()
        );
        assert_eq!(i.resampled, Resampled::Connections);
        assert!(i.contains_zero(), "{i:?}");
        assert!(
            i.low > -30.0 && i.high < 30.0 && i.high - i.low > 5.0,
            "{i:?}"
        );
        // The redraw of the max stays at the top; of the min, at the bottom.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        assert_eq!(Redraw::new(&c, 1.0).unwrap().draw(&mut rng), 1000.0);
        assert_eq!(Redraw::new(&c, 0.0).unwrap().draw(&mut rng), 1.0);
    }
}
