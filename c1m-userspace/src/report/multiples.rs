//! The charts of `compare.html`: small multiples. One chart per figure with one line per
//! run, at most [`MAX_SERIES`] lines (more runs are split over several charts, a setup's
//! repeats kept together), each run in its [`RunStyle`] and with its phases as a strip
//! under the axis; latency over time from each run's `.hlog` intervals; latency
//! distributions. Why: the overlay it replaces drew every figure of every run in one
//! chart (4 figures × 6 runs = 24 lines) in colours two of which a reader could not tell
//! apart.

use maud::{Markup, html};

use super::{
    RunHist,
    figures::hist_title,
    hlog::RunLog,
    html::charts::{
        Line, TimeChart, distribution, distribution_note, latency_chart, phase_bands, time_charts,
    },
    palette::RunStyle,
    svg::{Chart, Lane, Marks, Points, Series, Size, XAxis, YScale, YUnit},
};
use crate::model::RunRecord;

/// Lines per chart at most: past eight a reader matches lines to the legend by search.
pub(crate) const MAX_SERIES: usize = 8;

/// The quantiles drawn over time, each its own chart: (id suffix, title, quantile).
const OVER_TIME: [(&str, &str, f64); 2] = [("p50", "median", 0.5), ("p99", "p99", 0.99)];

/// The quantiles of [`OVER_TIME`], in its order: what a run's logs are read at
/// ([`hlog::read_run_logs`](super::hlog::read_run_logs)).
pub(crate) const OVER_TIME_QUANTILES: [f64; 2] = [OVER_TIME[0].2, OVER_TIME[1].2];

/// One run of a comparison, as its charts need it.
pub(crate) struct ComparedRun<'a> {
    /// "go", or "go #2" for a repeat.
    pub label: &'a str,
    /// Index of the run's name among the compared names: runs of one name are repeats.
    pub setup: usize,
    pub style: RunStyle,
    pub run: &'a RunRecord,
    pub hists: &'a [RunHist],
    pub logs: &'a [RunLog],
}

/// The runs in groups of at most [`MAX_SERIES`], in setup order, a setup's repeats in one
/// group where they fit: indices into `runs`.
fn facets(runs: &[ComparedRun]) -> Vec<Vec<usize>> {
    let mut setups: Vec<usize> = runs.iter().map(|r| r.setup).collect();
    setups.sort_unstable();
    setups.dedup();
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut group: Vec<usize> = Vec::new();
    for setup in setups {
        let repeats: Vec<usize> = (0..runs.len())
            .filter(|&i| runs[i].setup == setup)
            .collect();
        for chunk in repeats.chunks(MAX_SERIES) {
            if group.len() + chunk.len() > MAX_SERIES {
                out.push(std::mem::take(&mut group));
            }
            group.extend_from_slice(chunk);
        }
    }
    if !group.is_empty() {
        out.push(group);
    }
    out
}

/// `text` as an id piece: lower case letters and digits, runs of anything else as one '-'.
fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_owned()
}

/// One chart per facet of `runs`: `series` gives each run's line (None: the run has none).
fn faceted(
    runs: &[ComparedRun],
    id: &str,
    title: &str,
    template: &Chart,
    series: impl Fn(&ComparedRun) -> Option<Series>,
) -> Vec<Chart> {
    let groups = facets(runs);
    let parts = groups.len();
    // Every part of a figure on one y scale: each spans the values of all runs.
    let y_include: Vec<f64> = if parts > 1 {
        runs.iter()
            .filter_map(&series)
            .flat_map(|s| s.points.into_iter().filter_map(|p| p.1))
            .collect()
    } else {
        Vec::new()
    };
    groups
        .into_iter()
        .enumerate()
        .filter_map(|(k, group)| {
            let members: Vec<&ComparedRun> = group.iter().map(|&i| &runs[i]).collect();
            let lines: Vec<Series> = members.iter().filter_map(|r| series(r)).collect();
            if lines.is_empty() {
                return None;
            }
            let (id, title) = if parts > 1 {
                (
                    format!("{id}-{}", k + 1),
                    format!("{title} (part {} of {parts})", k + 1),
                )
            } else {
                (id.to_owned(), title.to_owned())
            };
            let lanes = if template.x == XAxis::Seconds {
                members
                    .iter()
                    .map(|r| Lane {
                        label: r.label.to_owned(),
                        color: r.style.color,
                        bands: phase_bands(r.run),
                    })
                    .collect()
            } else {
                Vec::new()
            };
            Some(Chart {
                id,
                title,
                series: lines,
                lanes,
                y_include: y_include.clone(),
                ..template.clone()
            })
        })
        .collect()
}

/// A run's line in its style.
fn styled(r: &ComparedRun, points: Points, stale: Marks) -> Series {
    Series {
        label: r.label.to_owned(),
        color: r.style.color,
        dash: r.style.dash,
        width: 2.0,
        marker: r.style.marker,
        points,
        stale,
    }
}

/// The small multiples of one time chart: one chart per figure.
fn time_multiples(runs: &[ComparedRun], tc: &TimeChart) -> Vec<Chart> {
    tc.lines
        .iter()
        .flat_map(|l: &Line| {
            let template = Chart {
                id: String::new(),
                title: String::new(),
                note: String::new(),
                size: Size::Small,
                x: XAxis::Seconds,
                x_label: "seconds since the run started".to_owned(),
                y: tc.y,
                y_scale: tc.y_scale,
                y_label: tc.y_label.to_owned(),
                series: Vec::new(),
                bands: Vec::new(),
                lanes: Vec::new(),
                y_include: Vec::new(),
            };
            faceted(
                runs,
                &format!("{}-{}", tc.id, slug(l.label)),
                l.label,
                &template,
                |r| {
                    let (points, stale) = l.points(&r.run.samples);
                    Some(styled(r, points, stale))
                },
            )
        })
        .collect()
}

/// `key` as a chart id not yet in `taken` (`key`, then `key-2`, …), now taken: a
/// histogram measured by two rules gets a chart, and an id, per rule.
fn unique_id(taken: &mut Vec<String>, key: String) -> String {
    let n = taken.iter().filter(|t| **t == key).count();
    taken.push(key.clone());
    if n == 0 {
        key
    } else {
        format!("{key}-{}", n + 1)
    }
}

/// The distinct items (e.g. (side, histogram) pairs) any run has, in the runs' order.
fn keys<T: PartialEq>(names: impl Iterator<Item = T>) -> Vec<T> {
    let mut keys = Vec::new();
    for k in names {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys
}

/// Latency over time of one histogram at the `k`-th of [`OVER_TIME_QUANTILES`]: a point
/// per `.hlog` interval, at its end (the values were recorded within it), in ms.
fn over_time(log: &RunLog, k: usize) -> Points {
    log.intervals
        .iter()
        .map(|i| (i.end_s, i.at.get(k).map(|v| *v as f64 / 1000.0)))
        .collect()
}

fn latency_over_time(
    runs: &[ComparedRun],
    side: &str,
    name: &str,
    title: &str,
    id: &str,
) -> Vec<Chart> {
    OVER_TIME
        .iter()
        .enumerate()
        .flat_map(|(k, &(suffix, what, _))| {
            let template = Chart {
                id: String::new(),
                title: String::new(),
                note: format!(
                    "{what} of each interval of the run's {side}-{name}.hlog (the values recorded between two polls), at the interval's end"
                ),
                size: Size::Small,
                x: XAxis::Seconds,
                x_label: "seconds since the run started".to_owned(),
                y: YUnit::Plain,
                y_scale: YScale::Log,
                y_label: format!("{what} latency (ms)"),
                series: Vec::new(),
                bands: Vec::new(),
                lanes: Vec::new(),
                y_include: Vec::new(),
            };
            faceted(
                runs,
                &format!("{id}-{suffix}"),
                &format!("{title}: {what} over time"),
                &template,
                |r| {
                    if hist_title(r.run, side, name) != title {
                        return None;
                    }
                    let log = r.logs.iter().find(|l| l.side == side && l.name == name)?;
                    Some(styled(r, over_time(log, k), Vec::new()))
                },
            )
        })
        .collect()
}

/// The distributions of the histogram titled `title` (side, name and, for a push
/// histogram, its rule): runs measured by different rules never share a chart.
fn latency_distributions(runs: &[ComparedRun], id: &str, title: &str) -> Vec<Chart> {
    let notes: Vec<String> = runs
        .iter()
        .filter_map(|r| {
            let h = r.hists.iter().find(|h| h.title == title)?;
            Some(format!("{}: {}", r.label, distribution_note(&h.hist)))
        })
        .collect();
    let template = latency_chart(
        String::new(),
        title,
        notes.join("; "),
        Vec::new(),
        Size::Small,
    );
    faceted(runs, id, &template.title, &template, |r| {
        let h = r.hists.iter().find(|h| h.title == title)?;
        Some(styled(r, distribution(&h.hist), Vec::new()))
    })
}

fn grid(charts: &[Chart]) -> Markup {
    html! {
        div.multiples { @for c in charts { (c.render()) } }
    }
}

/// The chart sections of compare.html.
pub(crate) fn sections(runs: &[ComparedRun]) -> Markup {
    // Keyed by the histogram's title, as the distributions are: runs measured by
    // different push rules never share a chart.
    let logged = keys(runs.iter().flat_map(|r| {
        r.logs
            .iter()
            .map(|l| (l.side, l.name, hist_title(r.run, l.side, l.name)))
    }));
    let mut ids: Vec<String> = Vec::new();
    let over_time: Vec<(&String, Vec<Chart>)> = logged
        .iter()
        .map(|(side, name, title)| {
            let id = unique_id(&mut ids, format!("chart-latt-{side}-{name}"));
            (title, latency_over_time(runs, side, name, title, &id))
        })
        .collect();
    let mut charts = Vec::new();
    let mut ids: Vec<String> = Vec::new();
    for (side, name, title) in keys(
        runs.iter()
            .flat_map(|r| r.hists.iter().map(|h| (h.side, h.name, h.title.as_str()))),
    ) {
        let id = unique_id(&mut ids, format!("chart-lat-{side}-{name}"));
        charts.extend(latency_distributions(runs, &id, title));
    }
    html! {
        h2 #over-time { "Over time" }
        p.mut {
            "One chart per figure, one line per run (at most 8; more runs are split over several charts). The strips under each chart are each run's phases, from start to end; a ring is a value whose source was stale at that second."
        }
        @for tc in time_charts() {
            h3 { (tc.title) }
            p.mut { (tc.note) }
            (grid(&time_multiples(runs, &tc)))
        }
        h2 #latency-over-time { "Latency over time" }
        @if logged.is_empty() {
            p.mut { "No run folder holds an .hlog interval log." }
        }
        @for (title, charts) in &over_time {
            h3 { (title) }
            (grid(charts))
        }
        h2 #latency-distributions { "Latency distributions" }
        @if charts.is_empty() {
            p.mut { "No latency was recorded in these runs." }
        }
        (grid(&charts))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::report::{
        fixture, histograms,
        hlog::{IntervalRecorder, read_run_logs},
        palette::OKABE_ITO,
    };

    /// A run of the comparison with what its charts borrow.
    struct Owned {
        label: String,
        setup: usize,
        repeat: usize,
        run: RunRecord,
        hists: Vec<RunHist>,
        logs: Vec<RunLog>,
    }

    /// The fixture's run as `c1m run` leaves it, .hlog files included, read back.
    fn fixture_run() -> (RunRecord, Vec<RunLog>) {
        let (run, snaps) = fixture::sample_run_with_snapshots();
        let mut rec = IntervalRecorder::new(run.started_unix_ms);
        for (side, s) in &snaps {
            rec.observe(side, s).unwrap();
        }
        let dir = fixture::test_dir("multiples");
        rec.write(&dir).unwrap();
        let (logs, problems) = read_run_logs(&dir, &OVER_TIME_QUANTILES);
        assert!(problems.is_empty(), "{problems:?}");
        (run, logs)
    }

    /// `(setup, repeat)` runs of the fixture.
    fn owned(shape: &[(usize, usize)]) -> Vec<Owned> {
        let (run, logs) = fixture_run();
        shape
            .iter()
            .map(|&(setup, repeat)| Owned {
                label: format!("s{setup} #{}", repeat + 1),
                setup,
                repeat,
                run: run.clone(),
                hists: histograms(&run).unwrap(),
                logs: logs.clone(),
            })
            .collect()
    }

    fn compared(runs: &[Owned]) -> Vec<ComparedRun<'_>> {
        runs.iter()
            .map(|o| ComparedRun {
                label: &o.label,
                setup: o.setup,
                style: RunStyle::of(o.setup, o.repeat),
                run: &o.run,
                hists: &o.hists,
                logs: &o.logs,
            })
            .collect()
    }

    /// The `<figure>` of chart `id` in `html`.
    fn figure<'a>(html: &'a str, id: &str) -> &'a str {
        let at = html
            .find(&format!("id=\"{id}\""))
            .unwrap_or_else(|| panic!("no chart {id}"));
        let end = at + html[at..].find("</figure>").unwrap();
        &html[at..end]
    }

    fn attr(el: &str, name: &str) -> String {
        el.split(&format!("{name}=\""))
            .nth(1)
            .and_then(|v| v.split('"').next())
            .unwrap()
            .to_owned()
    }

    #[test]
    fn one_chart_per_figure_one_line_per_run_in_the_palette() {
        // Setup 0 twice, setup 1 once.
        let runs = owned(&[(0, 0), (0, 1), (1, 0)]);
        let html = sections(&compared(&runs)).into_string();
        let mut ids = Vec::new();
        for tc in time_charts() {
            for l in &tc.lines {
                ids.push(format!("{}-{}", tc.id, slug(l.label)));
            }
        }
        assert_eq!(ids.len(), 21);
        assert!(
            ids.contains(
                &"chart-conn-client-kernel-time-wait-this-run-s-ports-both-ends".to_owned()
            )
        );
        for id in &ids {
            let el = figure(&html, id);
            // One line per run, in the run's colour and dash; each run's phases in a strip.
            let lines: Vec<&str> = el.split("<path d=\"").skip(1).collect();
            assert_eq!(lines.len(), 3, "{id}");
            for (line, (color, dash)) in lines.iter().rev().zip([
                (OKABE_ITO[0], None),
                (OKABE_ITO[0], Some("6 4")),
                (OKABE_ITO[1], None),
            ]) {
                assert!(
                    line.contains(&format!("stroke=\"{color}\"")),
                    "{id}: {line}"
                );
                assert_eq!(
                    line.contains("stroke-dasharray"),
                    dash.is_some(),
                    "{id}: {line}"
                );
            }
            assert_eq!(el.matches("<rect class=\"lane\"").count(), 3 * 4, "{id}");
            assert!(el.contains("data-phase=\"teardown\""), "{id}");
        }
        // Latency over time: a point per interval of each run's .hlog.
        let intervals = runs[0]
            .logs
            .iter()
            .find(|l| l.side == "client" && l.name == "connect_us")
            .unwrap()
            .intervals
            .len();
        assert!(intervals > 1);
        for q in ["p50", "p99"] {
            let el = figure(&html, &format!("chart-latt-client-connect_us-{q}"));
            assert_eq!(attr(el, "data-points"), (3 * intervals).to_string());
            assert_eq!(el.matches("<rect class=\"lane\"").count(), 3 * 4);
        }
        for name in ["connect_us", "push_message_us"] {
            assert!(html.contains(&format!("id=\"chart-lat-client-{name}\"")));
        }
        // 21 figures, 4 histograms over time at 2 quantiles, 4 distributions.
        assert_eq!(html.matches("<figure class=\"chart\"").count(), 21 + 8 + 4);
    }

    #[test]
    fn more_than_eight_runs_are_split_keeping_repeats_together() {
        let runs = owned(&(0..10).map(|s| (s, 0)).collect::<Vec<_>>());
        let html = sections(&compared(&runs)).into_string();
        let one = figure(&html, "chart-cpu-server-1");
        let two = figure(&html, "chart-cpu-server-2");
        assert_eq!(one.split("<path d=\"").count() - 1, 8);
        assert_eq!(two.split("<path d=\"").count() - 1, 2);
        assert!(one.contains("server (part 1 of 2)"));
        // Setups past the eighth are told apart by markers.
        assert!(!one.contains("class=\"marker\""));
        assert!(two.contains("class=\"marker\""));
        let shape = [
            (0, 0),
            (0, 1),
            (0, 2),
            (1, 0),
            (1, 1),
            (1, 2),
            (2, 0),
            (2, 1),
            (2, 2),
        ];
        let runs = owned(&shape);
        assert_eq!(
            facets(&compared(&runs)),
            [vec![0, 1, 2, 3, 4, 5], vec![6, 7, 8]]
        );
    }
}
