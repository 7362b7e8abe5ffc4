//! The summary's latency per phase: under the run's latency tables, a row per phase for
//! each histogram whose values fell in more than one phase. Which ones, and their
//! figures, come from `figures::phase_latency`; this file lays them out.

use crate::{
    compare::fit::{Blocks, Line},
    figures::phase_latency,
    fmt::{count, ms},
    model::RunRecord,
    report::figures::hist_title,
};

/// The table, or None when every histogram was recorded within one phase (the default
/// run: its tables above are already each phase's).
pub(super) fn table(run: &RunRecord) -> Option<Blocks> {
    let split = phase_latency::split(&run.phases);
    if split.is_empty() {
        return None;
    }
    let mut lines = Vec::new();
    for s in &split {
        lines.push(Line::Title(hist_title(run, s.side.name(), s.histogram)));
        for (i, l) in &s.phases {
            let name = run.phases.get(*i).map_or("?", |p| p.name.as_str());
            let cells = std::iter::once(count(l.count))
                .chain([l.p50, l.p90, l.p99, l.p999, l.max].map(|us| ms(us as f64)))
                .map(Into::into)
                .collect();
            lines.push(Line::Cells(format!("  {name}"), vec![cells]));
        }
    }
    Some(Blocks {
        head: "latency per phase (ms)".to_owned(),
        groups: vec![
            ["count", "median", "p90", "p99", "p99.9", "max"]
                .map(str::to_owned)
                .to_vec(),
        ],
        lines,
        keep: 0,
    })
}

#[cfg(test)]
mod tests {
    use crate::model::phase::{AppSide, PhaseLatency};

    /// The fixture's run with its client's messages split over idle and push: 200 at
    /// 1 ms in idle, 2,000 at 30 ms in push (percentiles 1×, 2×, … 5× the median).
    fn two_message_phases() -> crate::model::RunRecord {
        let mut run = crate::report::sample_run();
        for (p, (count, p50)) in
            run.phases
                .iter_mut()
                .zip([(0, 0), (200, 1_000), (2_000, 30_000), (0, 0)])
        {
            if count > 0 {
                p.latency.push(PhaseLatency {
                    side: AppSide::Client,
                    histogram: "message_us".into(),
                    count,
                    p50,
                    p90: 2 * p50,
                    p99: 3 * p50,
                    p999: 4 * p50,
                    max: 5 * p50,
                });
            }
        }
        run
    }

    /// `text`'s line starting (after spaces) with `label`, its spaces collapsed.
    fn line(text: &str, label: &str) -> Option<String> {
        text.lines()
            .find(|l| l.trim_start().starts_with(label))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
    }

    #[test]
    fn the_summary_shows_latency_per_phase_only_where_a_histogram_spans_phases() {
        let default = super::super::text_at(&crate::report::sample_run(), 120);
        assert!(!default.contains("latency per phase"), "{default}");
        let run = two_message_phases();
        for width in [120, 80] {
            let text = super::super::text_at(&run, width);
            assert!(
                text.lines().all(|l| l.chars().count() <= width),
                "{width}:\n{text}"
            );
            let at = text.find("latency per phase").unwrap_or(0);
            let text = &text[at..];
            assert_eq!(
                line(text, "latency per phase (ms)").as_deref(),
                Some("latency per phase (ms) count median p90 p99 p99.9 max"),
                "{text}"
            );
            assert!(text.contains("\nclient message, from its"), "{text}");
            assert_eq!(
                line(text, "idle ").as_deref(),
                Some("idle 200 1.000 2.000 3.000 4.000 5.000"),
                "{text}"
            );
            assert_eq!(
                line(text, "push ").as_deref(),
                Some("push 2,000 30.000 60.000 90.000 120.000 150.000"),
                "{text}"
            );
        }
    }
}
