//! Connection setup over time: the 10 ms timeline shards count into, the step table, and
//! the asked, achieved and peak setup rates computed from it.

use serde::{Deserialize, Serialize};

/// Setup timeline resolution: fine enough for a 10%-step table of a 1,000-connection run,
/// coarse enough that a 40 s ramp is 4,000 bins.
pub(crate) const TIMELINE_BIN_MS: u64 = 10;

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
pub(crate) fn setup_steps(bins: &[u64], step: u64) -> Vec<SetupStep> {
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
pub(crate) const PEAK_WINDOW_MS: u64 = 1000;

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
    Busiest {
        /// Connections established per second over the stretch.
        per_s: f64,
        /// Start of the stretch, seconds after the ramp began.
        from_s: f64,
        /// End of the stretch (exclusive), seconds after the ramp began.
        to_s: f64,
    },
    /// The ramp ended within [`PEAK_WINDOW_MS`]: the achieved rate is its only rate.
    RampShorter {
        /// The ramp's length, seconds.
        ramp_s: f64,
    },
}

impl PeakRate {
    pub(crate) fn per_s(self) -> Option<f64> {
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

/// Bins in [`PEAK_WINDOW_MS`].
const W: usize = (PEAK_WINDOW_MS / TIMELINE_BIN_MS) as usize;

/// A stretch: its connections, its bins and its first bin.
type Stretch = (u64, usize, usize);

/// The densest stretch of at least [`PEAK_WINDOW_MS`] of a ramp's timeline (bin 0 at its
/// start, to the last bin with a connection), searched over a timeline that grows and
/// kept between searches. A stretch of 2·W
/// bins or more splits into two of at least W, one as dense as the whole, so stretches
/// shorter than 2·W are all there is to try: O(W) per bin. Searched afresh for each
/// stats answer that was O(bins · W), ~1 ms for a 60 s ramp and growing with it (0.23%
/// of a 1M ramp's CPU, in a supervisor); kept, an answer searches only the stretches
/// ending in the bins that changed since the last (a ramp's reports land in its last
/// few hundred ms).
#[derive(Default)]
pub(crate) struct PeakSearch {
    /// Connections in the bins before each index: `prefix[i]` sums `bins[..i]`.
    prefix: Vec<u64>,
    /// `best[k]`: the densest stretch ending (exclusive) at bin W + k or before; ties go
    /// to the earliest start, then the shortest.
    best: Vec<Stretch>,
}

impl PeakSearch {
    /// Bin `bin` changed since the last search: what was kept from it on goes.
    pub(crate) fn changed(&mut self, bin: usize) {
        // prefix[..=bin] sums bins before `bin`; stretches ending at `bin` or before
        // do not hold it.
        self.prefix.truncate(bin + 1);
        self.best.truncate((bin + 1).saturating_sub(W));
    }

    /// The peak of `bins`, which changed since the last search only where
    /// [`PeakSearch::changed`] was told.
    pub(crate) fn peak(&mut self, bins: &[u64]) -> PeakRate {
        let ramp = match ramp_of(bins) {
            Ok(r) => r,
            Err(none) => return none,
        };
        // A ramp only grows (bins only gain connections); should one seem shorter,
        // nothing past it is kept.
        self.changed(ramp);
        if self.prefix.is_empty() {
            self.prefix.push(0);
        }
        while self.prefix.len() <= ramp {
            let i = self.prefix.len() - 1;
            self.prefix.push(self.prefix[i] + bins[i]);
        }
        while self.best.len() + W <= ramp {
            let end = self.best.len() + W;
            let mut best = self.best.last().copied().unwrap_or((0, 1, 0));
            for len in W..(2 * W).min(end + 1) {
                let start = end - len;
                let s = (self.prefix[end] - self.prefix[start], len, start);
                if denser(s, best) {
                    best = s;
                }
            }
            self.best.push(best);
        }
        let (sum, len, start) = self.best[ramp - W];
        PeakRate::Busiest {
            per_s: sum as f64 / bins_s(len),
            from_s: bins_s(start),
            to_s: bins_s(start + len),
        }
    }
}

/// The ramp's length in bins (to its last bin with a connection), or the peak it has
/// when none can be searched: no connection, or a ramp shorter than [`PEAK_WINDOW_MS`].
fn ramp_of(bins: &[u64]) -> Result<usize, PeakRate> {
    let Some(last) = bins.iter().rposition(|&c| c > 0) else {
        return Err(PeakRate::NoConnection);
    };
    let ramp = last + 1;
    if ramp < W {
        return Err(PeakRate::RampShorter {
            ramp_s: bins_s(ramp),
        });
    }
    Ok(ramp)
}

/// `a` is denser than `b`, or as dense and earlier (then shorter).
fn denser(a: Stretch, b: Stretch) -> bool {
    let (da, db) = (u128::from(a.0) * b.1 as u128, u128::from(b.0) * a.1 as u128);
    da > db || (da == db && (a.2, a.1) < (b.2, b.1))
}

impl SetupRate {
    pub(crate) fn new(asked_per_s: f64, connected: u64, duration_s: f64) -> SetupRate {
        SetupRate {
            asked_per_s: (asked_per_s > 0.0).then_some(asked_per_s),
            connected,
            duration_s,
            achieved_per_s: (duration_s > 0.0).then(|| connected as f64 / duration_s),
            peak: PeakRate::NotRecorded,
        }
    }

    /// The rate of a ramp: achieved over `duration_s`, and its `peak` (from the bins its
    /// connections were established in: [`PeakSearch`]).
    pub(crate) fn with_peak(
        asked_per_s: f64,
        connected: u64,
        duration_s: f64,
        peak: PeakRate,
    ) -> SetupRate {
        SetupRate {
            peak,
            ..SetupRate::new(asked_per_s, connected, duration_s)
        }
    }
}

/// Seconds from the start of the ramp to the end of the timeline bin in which the last
/// connection was established (None: none was). Exact to a bin (10 ms), where the
/// supervisor learns that the ramp ended only at the shards' next report (up to 250 ms).
pub(crate) fn last_connection_s(bins: &[u64]) -> Option<f64> {
    let last = bins.iter().rposition(|&c| c > 0)?;
    Some(bins_s(last + 1))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    fn peak_rate(bins: &[u64]) -> PeakRate {
        PeakSearch::default().peak(bins)
    }

    /// Every stretch of W to 2·W − 1 bins tried, the first densest kept: what the kept
    /// search must equal.
    fn brute_force(bins: &[u64]) -> PeakRate {
        let ramp = match ramp_of(bins) {
            Ok(r) => r,
            Err(none) => return none,
        };
        let mut best = (0u64, 1usize, 0usize);
        for start in 0..=ramp - W {
            for len in W..(2 * W).min(ramp - start + 1) {
                let sum: u64 = bins[start..start + len].iter().sum();
                if u128::from(sum) * best.1 as u128 > u128::from(best.0) * len as u128 {
                    best = (sum, len, start);
                }
            }
        }
        PeakRate::Busiest {
            per_s: best.0 as f64 / bins_s(best.1),
            from_s: bins_s(best.2),
            to_s: bins_s(best.2 + best.1),
        }
    }

    /// A timeline that grows as a supervisor's does (reports adding to its last bins, a
    /// late one to older bins, runs of equal bins for ties), searched after each report.
    #[test]
    fn the_kept_search_equals_a_fresh_one_after_every_report() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for _ in 0..8 {
            let (mut bins, mut search) = (Vec::<u64>::new(), PeakSearch::default());
            for _ in 0..100 {
                let end = bins.len() + next(40) as usize;
                let late = next(4) == 0;
                for _ in 0..next(30) {
                    let back = if late { next(300) } else { next(30) } as usize;
                    let bin = end.saturating_sub(back);
                    if bins.len() <= bin {
                        bins.resize(bin + 1, 0);
                    }
                    // Small counts: equal stretches (ties) are common.
                    bins[bin] += next(3);
                    search.changed(bin);
                }
                assert_eq!(search.peak(&bins), brute_force(&bins), "{bins:?}");
            }
        }
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
}
