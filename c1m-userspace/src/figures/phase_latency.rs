//! Latency per phase (issue 35): what each latency histogram recorded within one phase,
//! computed once as the phase closes (summary.json keeps it in the phase), and which of
//! those the views show.
//!
//! Why a difference of snapshots, not a histogram per phase in the shards: the lab
//! already asks each side afresh at every phase's end (the next phase starts from that
//! answer), and an answer carries the side's whole histograms, merged bucket by bucket
//! over its shards. The histogram at the phase's end less the one at its start is then
//! exactly what was recorded between them (hdrhistogram's subtract, count for count: a
//! shard whose ramp is done sends its changed histograms with every report, beside the
//! counters of the same instant), and since one phase's end is the next one's start,
//! the phases' counts add up to the run's. The cost is two decodes per histogram that
//! moved, at each phase's end, and nothing at all in the shards.

use crate::{
    model::phase::{AppSide, Phase, PhaseLatency},
    workload::stats::{
        histograms::{HIST_NAMES, HistError},
        snapshot::AppSnapshot,
    },
};

/// What `side`'s histograms recorded between two of its answers, one entry per
/// histogram that recorded a value, in [`HIST_NAMES`] order. `start` None: the side had
/// not answered when the phase began (the setup), so all of `end` is the phase's.
pub(crate) fn between(
    side: AppSide,
    start: Option<&AppSnapshot>,
    end: &AppSnapshot,
) -> Result<Vec<PhaseLatency>, HistError> {
    let mut out = Vec::new();
    for name in HIST_NAMES {
        // A histogram whose count did not move recorded nothing: no decode.
        let count = |s: &AppSnapshot| s.percentiles.get(name).map(|p| p.count);
        if let Some(n) = count(end)
            && start.map_or(Some(0), count) == Some(n)
        {
            continue;
        }
        let mut h = end.histogram(name)?;
        if let Some(s) = start {
            h.subtract(s.histogram(name)?)?;
        }
        if h.is_empty() {
            continue;
        }
        out.push(PhaseLatency {
            side,
            histogram: name.to_owned(),
            count: h.len(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        });
    }
    Ok(out)
}

/// A histogram whose values fell in more than one phase, and each such phase's figures.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Split<'a> {
    pub side: AppSide,
    /// The histogram's name ("message_us").
    pub histogram: &'a str,
    /// Each phase that recorded a value of it, in the run's order: the phase's index in
    /// the run's phases, and what it recorded.
    pub phases: Vec<(usize, &'a PhaseLatency)>,
}

/// The histograms a view shows per phase: those whose values fell in more than one phase,
/// client first, each side in [`HIST_NAMES`] order. A histogram recorded within one
/// phase has that phase's figures as the run's, which every view already shows, so the
/// default run (connects in the setup, pushes in the push phase) shows none; two message
/// or push phases, or pongs through idle and push, show theirs.
pub(crate) fn split(phases: &[Phase]) -> Vec<Split<'_>> {
    let mut out: Vec<Split<'_>> = Vec::new();
    for side in [AppSide::Client, AppSide::Server] {
        for name in HIST_NAMES {
            let mine: Vec<(usize, &PhaseLatency)> = phases
                .iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    p.latency
                        .iter()
                        .find(|l| l.side == side && l.histogram == name && l.count > 0)
                        .map(|l| (i, l))
                })
                .collect();
            if mine.len() > 1 {
                out.push(Split {
                    side,
                    histogram: name,
                    phases: mine,
                });
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use hdrhistogram::Histogram;

    use super::*;
    use crate::workload::stats::histograms::{Percentiles, encode_hist, new_hist};

    /// A client's answer holding `hists` as its histograms, as the supervisor writes one.
    fn answer(hists: &[(&str, &Histogram<u64>)]) -> AppSnapshot {
        AppSnapshot {
            side: "client".into(),
            histograms: hists
                .iter()
                .map(|(n, h)| ((*n).to_owned(), encode_hist(h).unwrap()))
                .collect(),
            percentiles: hists
                .iter()
                .map(|(n, h)| ((*n).to_owned(), Percentiles::of(h)))
                .collect(),
            ..AppSnapshot::default()
        }
    }

    /// `n` values from `lo` up, spread over three decades.
    fn values(n: u64, lo: u64) -> Vec<u64> {
        (0..n).map(|i| lo + (i * 7_919) % (lo * 1_000)).collect()
    }

    #[test]
    fn each_phase_has_exactly_what_was_recorded_in_it_and_the_phases_add_up() {
        // Messages at two rates: fast echoes in the first phase, slow ones in the second,
        // recorded into one growing histogram as a client does.
        let (first, second) = (values(3_000, 50), values(20_000, 2_000));
        let mut run = new_hist().unwrap();
        let start = answer(&[("message_us", &run)]);
        let mut alone = [new_hist().unwrap(), new_hist().unwrap()];
        for v in &first {
            run.record(*v).unwrap();
            alone[0].record(*v).unwrap();
        }
        let middle = answer(&[("message_us", &run)]);
        for v in &second {
            run.record(*v).unwrap();
            alone[1].record(*v).unwrap();
        }
        let end = answer(&[("message_us", &run)]);
        let phases = [
            between(AppSide::Client, Some(&start), &middle).unwrap(),
            between(AppSide::Client, Some(&middle), &end).unwrap(),
        ];
        for (got, alone) in phases.iter().zip(&alone) {
            let [l] = got.as_slice() else {
                panic!("{got:?}")
            };
            assert_eq!(
                (
                    l.histogram.as_str(),
                    l.count,
                    l.p50,
                    l.p90,
                    l.p99,
                    l.p999,
                    l.max
                ),
                (
                    "message_us",
                    alone.len(),
                    alone.value_at_quantile(0.5),
                    alone.value_at_quantile(0.9),
                    alone.value_at_quantile(0.99),
                    alone.value_at_quantile(0.999),
                    alone.max()
                )
            );
        }
        assert_eq!(phases[0][0].count + phases[1][0].count, run.len());
        assert!(phases[0][0].p99 < phases[1][0].p50, "{phases:?}");
        // The setup: no answer before it, so everything in the end's is the phase's.
        let setup = between(AppSide::Client, None, &middle).unwrap();
        assert_eq!(setup[0].count, 3_000);
    }

    #[test]
    fn a_histogram_that_did_not_move_is_left_out_and_one_that_shrank_is_an_error() {
        let mut h = new_hist().unwrap();
        h.record(10).unwrap();
        let before = answer(&[("connect_us", &h), ("pong_us", &h)]);
        let mut pong = h.clone();
        pong.record(20).unwrap();
        let after = answer(&[("connect_us", &h), ("pong_us", &pong)]);
        let got = between(AppSide::Client, Some(&before), &after).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].histogram.as_str(), got[0].count), ("pong_us", 1));
        assert_eq!((got[0].p50, got[0].max), (20, 20));
        // Backwards: the later answer lacks a value the earlier had.
        assert!(between(AppSide::Client, Some(&after), &before).is_err());
    }

    fn phase(name: &str, latency: &[(&str, u64)]) -> Phase {
        Phase {
            name: name.into(),
            latency: latency
                .iter()
                .map(|(h, count)| PhaseLatency {
                    histogram: (*h).to_owned(),
                    count: *count,
                    ..PhaseLatency::default()
                })
                .collect(),
            ..Phase::default()
        }
    }

    #[test]
    fn only_histograms_recorded_in_more_than_one_phase_are_shown_per_phase() {
        // The default run: connects in the setup, pushes in the push phase.
        let default = [
            phase("setup", &[("connect_us", 100), ("ws_handshake_us", 100)]),
            phase("idle", &[]),
            phase("push", &[("push_message_us", 300)]),
            phase("teardown", &[]),
        ];
        assert!(split(&default).is_empty());
        // Two message phases, and pongs from the setup on.
        let list = [
            phase("setup", &[("connect_us", 100), ("pong_us", 3)]),
            phase("messages", &[("message_us", 200), ("pong_us", 50)]),
            phase("messages-2", &[("message_us", 2_000)]),
            phase("teardown", &[]),
        ];
        let got: Vec<(&str, Vec<usize>)> = split(&list)
            .iter()
            .map(|s| (s.histogram, s.phases.iter().map(|p| p.0).collect()))
            .collect();
        assert_eq!(
            got,
            [("pong_us", vec![0, 1]), ("message_us", vec![1, 2])],
            "in HIST_NAMES order"
        );
    }
}
