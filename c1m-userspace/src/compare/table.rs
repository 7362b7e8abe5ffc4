//! The comparison table: every key figure of every run (export/figures.rs computes them,
//! once), grouped by run name, with each setup's difference from the baseline. Pure:
//! runs in, rows out.
//!
//! A difference is judged twice. First, is it measurable: does the bootstrap interval on
//! the difference of the medians (see [`interval`]) exclude 0? Second, is it larger than
//! the box's own run-to-run spread for that figure (see [`Difference::spread`])? Only the
//! second is a finding to act on: with 3 + 3 repeats of the same setup, the first says
//! "different" for about 1 figure in 10 that varies freely (2 of the 20 ways to split
//! six runs put the ranges apart), the second for about 1 in 70
//! (`tests::same_setup_is_rarely_beyond_its_spread`).

use serde::Serialize;

use super::{
    input::LoadedRun,
    interval::{self, Connections, Redraw, Resampled, RunValue},
};
use crate::report::{
    ExportError,
    figures::{START_GROUP, Unit, key_figures_of},
    fmt::num,
    histograms,
};

/// Runs each setup needs before a difference can be called: with two, a bootstrap
/// interval is just the two values' range and calls 1 in 3 equal setups different.
pub(crate) const MIN_REPEATS: usize = 3;

/// The values one setup (all runs of one name) gave for one figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Spread {
    pub name: String,
    /// Runs that reported the figure.
    pub n: usize,
    pub mean: Option<f64>,
    /// Sample standard deviation (n − 1); absent below two values.
    pub sd: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// What differences are taken between.
    pub median: Option<f64>,
    pub values: Vec<f64>,
    /// Why runs of this setup have no value, where they said (`Figure::why_none`), each
    /// reason once: shown when no run has a value.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub why_none: Vec<String>,
}

impl Spread {
    fn of(name: &str, values: Vec<f64>) -> Spread {
        let n = values.len();
        let mean = (n > 0).then(|| values.iter().sum::<f64>() / n as f64);
        let sd = mean
            .filter(|_| n > 1)
            .map(|m| (values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt());
        Spread {
            name: name.to_owned(),
            n,
            mean,
            sd,
            min: values.iter().copied().reduce(f64::min),
            max: values.iter().copied().reduce(f64::max),
            median: interval::median(&mut values.clone()),
            values,
            why_none: Vec::new(),
        }
    }

    /// max − min over the repeats; absent below two runs.
    pub(crate) fn range(&self) -> Option<f64> {
        Some(self.max? - self.min?).filter(|_| self.n > 1)
    }
}

/// What a setup's difference from the baseline means, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Verdict {
    /// One of the two has no value.
    NoData,
    /// Every run of both gave the same value.
    Same,
    /// One of the two has fewer than [`MIN_REPEATS`] runs. A latency percentile still
    /// gets an interval from its runs' connections, but that says how precisely each run
    /// pins its own percentile, not how far the next run lands: two single runs of the
    /// same server differ by more than that (the box's speed swings by the hour), so no
    /// call is made.
    FewRuns,
    /// The interval contains 0: not measurably different.
    NotDifferent,
    /// The interval excludes 0, but the difference is within the run-to-run spread.
    Different,
    /// The interval excludes 0 and the difference exceeds the run-to-run spread.
    BeyondSpread,
}

impl Verdict {
    /// The name in compare.csv.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Verdict::NoData => "no_data",
            Verdict::Same => "same",
            Verdict::FewRuns => "few_runs",
            Verdict::NotDifferent => "not_different",
            Verdict::Different => "different",
            Verdict::BeyondSpread => "beyond_spread",
        }
    }
}

/// One setup's difference from the baseline on one figure. Percents are of the
/// baseline's median; absent when that median is 0 (then read the unit's values).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Difference {
    pub name: String,
    pub baseline: String,
    /// median(name) − median(baseline), in the figure's unit.
    pub delta: Option<f64>,
    pub delta_pct: Option<f64>,
    /// The [`interval::CONFIDENCE`] bootstrap interval on `delta`.
    pub low: Option<f64>,
    pub high: Option<f64>,
    pub low_pct: Option<f64>,
    pub high_pct: Option<f64>,
    pub resampled: Option<Resampled>,
    /// The run-to-run spread: the two setups' ranges (max − min over their repeats)
    /// added, and at least the figure's resolution. Each median can sit anywhere in its
    /// own range while the box alone moves the runs, so two setups whose ranges could
    /// share a value can have medians this far apart with no difference of their own;
    /// only beyond it are the ranges apart by more than either's own width. Not a pooled
    /// deviation (three runs are too few to set a bar by), and not the wider range alone:
    /// on 6 runs of one server split every way into 3 + 3, the wider range let through
    /// 4% of the figures on average and 24% on one split (this box alternates slow and
    /// fast runs), the sum 0.5% and 2% at most.
    pub spread: Option<f64>,
    pub spread_pct: Option<f64>,
    /// The fewer runs of the two setups.
    pub fewest_runs: usize,
    pub verdict: Verdict,
}

/// No difference under this % of the baseline's median is called beyond the spread.
/// Figures computed exactly repeat to the byte, so their spread is 0: on 15,000
/// connections c1m's kernel bytes per socket (4,091.15) against python's (4,091.57)
/// read "-0.01% BEYOND" without it, which no reader should act on.
pub(crate) const SMALLEST_FINDING_PCT: f64 = 1.0;

impl Difference {
    fn of(
        base: &Spread,
        other: &Spread,
        interval: Option<interval::Interval>,
        resolution: Option<f64>,
    ) -> Difference {
        let mut d = Difference {
            name: other.name.clone(),
            baseline: base.name.clone(),
            delta: None,
            delta_pct: None,
            low: None,
            high: None,
            low_pct: None,
            high_pct: None,
            resampled: None,
            spread: None,
            spread_pct: None,
            fewest_runs: base.n.min(other.n),
            verdict: Verdict::NoData,
        };
        let (Some(b), Some(o)) = (base.median, other.median) else {
            return d;
        };
        let pct = |v: f64| (b != 0.0).then(|| v / b.abs() * 100.0);
        d.delta = Some(o - b);
        d.delta_pct = pct(o - b);
        // Equal up to float rounding (0.03 s of CPU is 0.030000000000000006 once).
        let first = base.values[0];
        let equal = |v: &f64| (v - first).abs() <= 1e-9 * first.abs().max(1.0);
        if base.values.iter().chain(&other.values).all(equal) {
            d.verdict = Verdict::Same;
            return d;
        }
        if let Some(i) = interval {
            (d.low, d.high, d.resampled) = (Some(i.low), Some(i.high), Some(i.resampled));
            (d.low_pct, d.high_pct) = (pct(i.low), pct(i.high));
        }
        d.spread = match (base.range(), other.range()) {
            (Some(x), Some(y)) => Some(
                (x + y)
                    .max(resolution.unwrap_or(0.0))
                    .max(b.abs() * SMALLEST_FINDING_PCT / 100.0),
            ),
            _ => None,
        };
        d.spread_pct = d.spread.and_then(pct);
        d.verdict = match (interval, d.spread) {
            _ if d.fewest_runs < MIN_REPEATS => Verdict::FewRuns,
            (Some(i), Some(spread)) if !i.contains_zero() => {
                if (o - b).abs() > spread {
                    Verdict::BeyondSpread
                } else {
                    Verdict::Different
                }
            }
            (Some(_), _) => Verdict::NotDifferent,
            (None, _) => Verdict::FewRuns,
        };
        d
    }

    /// The difference and its interval, as % of the baseline's median (else in `unit`):
    /// `+12.3% [+8.1, +15.0]`.
    pub(crate) fn show_delta(&self, unit: Unit) -> String {
        if self.verdict == Verdict::NoData {
            return "–".into();
        }
        if self.verdict == Verdict::Same {
            return String::new();
        }
        let (delta, low, high, suffix, fmt): (_, _, _, _, &dyn Fn(f64) -> String) =
            match self.delta_pct {
                Some(p) => (Some(p), self.low_pct, self.high_pct, "%", &signed_pct),
                None => (self.delta, self.low, self.high, "", &|v| signed(unit, v)),
            };
        let Some(delta) = delta else {
            return "–".into();
        };
        match (low, high) {
            (Some(l), Some(h)) => format!("{}{suffix} [{}, {}]", fmt(delta), fmt(l), fmt(h)),
            _ => format!("{}{suffix}", fmt(delta)),
        }
    }

    /// The verdict in a few words: `same`, `1 run`, `unclear`, `within 8.4%`,
    /// `BEYOND 8.4%` (the run-to-run spread the difference is held against).
    pub(crate) fn show_verdict(&self, unit: Unit) -> String {
        let spread = || match (self.spread_pct, self.spread) {
            (Some(p), _) => format!("{}%", plain_pct(p)),
            (None, Some(s)) => unit.show(s),
            (None, None) => String::new(),
        };
        match self.verdict {
            Verdict::NoData => String::new(),
            Verdict::Same => "same".into(),
            Verdict::FewRuns if self.fewest_runs == 1 => "1 run".into(),
            Verdict::FewRuns => format!("{} runs", self.fewest_runs),
            Verdict::NotDifferent => "unclear".into(),
            Verdict::Different => format!("within {}", spread()),
            Verdict::BeyondSpread => format!("BEYOND {}", spread()),
        }
    }
}

/// A percent with a sign, to a precision that shows a small one: +0.12, +1.2, +123;
/// no sign on what rounds to 0.
fn signed_pct(p: f64) -> String {
    let s = plain_pct(p.abs());
    match p {
        _ if s.chars().all(|c| c == '0' || c == '.') => s,
        p if p < 0.0 => format!("-{s}"),
        _ => format!("+{s}"),
    }
}

fn plain_pct(p: f64) -> String {
    let digits = match p.abs() {
        a if a >= 100.0 => 0,
        a if a >= 1.0 => 1,
        _ => 2,
    };
    num(p, digits)
}

/// A difference in the figure's unit, with its sign.
fn signed(unit: Unit, v: f64) -> String {
    format!("{}{}", if v < 0.0 { "-" } else { "+" }, unit.show(v.abs()))
}

/// One figure across every setup.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    pub group: String,
    pub figure: String,
    #[serde(skip)]
    pub(crate) unit: Unit,
    /// `count`, `per_s`, `bytes`, `us`, `s`.
    pub unit_name: &'static str,
    /// One per setup, in the order the names first appear.
    pub cells: Vec<Spread>,
    /// One per setup but the baseline, in the same order.
    pub differences: Vec<Difference>,
    /// The strongest of the differences' verdicts.
    pub verdict: Verdict,
    /// For a figure of the headline table: every pair of names, the earlier name as the
    /// difference's baseline (names 0-1, 0-2, …, 1-2, …); empty for the others.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pairs: Vec<Difference>,
}

impl Row {
    /// A row of `cells`, its unit's name and its strongest verdict derived here, once.
    fn new(
        group: String,
        figure: String,
        unit: Unit,
        cells: Vec<Spread>,
        differences: Vec<Difference>,
        pairs: Vec<Difference>,
    ) -> Row {
        let verdict = differences
            .iter()
            .map(|d| d.verdict)
            .max()
            .unwrap_or(Verdict::NoData);
        Row {
            group,
            figure,
            unit,
            unit_name: unit.name(),
            cells,
            differences,
            verdict,
            pairs,
        }
    }

    /// A latency group ("Latency: client connect_us").
    pub(crate) fn is_latency(&self) -> bool {
        self.group.starts_with(LATENCY_PREFIX)
    }

    /// Setup `name`'s difference from the baseline; `None` for the baseline itself.
    pub(crate) fn difference(&self, name: &str) -> Option<&Difference> {
        self.differences.iter().find(|d| d.name == name)
    }
}

pub(crate) const LATENCY_PREFIX: &str = "Latency: ";

/// The names in the order they first appear on the command line.
pub(crate) fn names(runs: &[LoadedRun]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in runs {
        if !out.contains(&r.spec.name) {
            out.push(r.spec.name.clone());
        }
    }
    out
}

/// Groups titled with a run-specific count ("Memory per connection (2,000 open)")
/// match across runs on the part before the parenthesis.
fn group_key(title: &str) -> String {
    title.split(" (").next().unwrap_or(title).to_owned()
}

/// One run's value of one figure, and where to redraw it from: (run, histogram, quantile).
type Measured = (f64, Option<(usize, usize, f64)>);

/// One figure of every run: (group, figure, unit, resolution, values per name, reasons
/// for no value per name).
type Gathered = (
    String,
    String,
    Unit,
    Option<f64>,
    Vec<Vec<Measured>>,
    Vec<Vec<String>>,
);

/// Every figure any run has, in first-seen order (a figure new with a later run beside
/// its group's others), with its spread per name and each name's difference from
/// `names[baseline]`.
#[cfg(test)]
pub(crate) fn rows(
    runs: &[LoadedRun],
    names: &[String],
    baseline: usize,
) -> Result<Vec<Row>, ExportError> {
    rows_with_pairs(runs, names, baseline, |_, _| false)
}

/// [`rows`], and every pair's difference on the figures `pairwise(group, figure)`
/// picks (the headline table's).
pub(crate) fn rows_with_pairs(
    runs: &[LoadedRun],
    names: &[String],
    baseline: usize,
    pairwise: impl Fn(&str, &str) -> bool,
) -> Result<Vec<Row>, ExportError> {
    // Each run's histograms as connections to redraw from, decoded once.
    let mut connections: Vec<Vec<Option<Connections>>> = Vec::new();
    let mut acc: Vec<Gathered> = Vec::new();
    for (ri, r) in runs.iter().enumerate() {
        let k = names.iter().position(|n| *n == r.spec.name).unwrap_or(0);
        let hists = histograms(&r.run)?;
        connections.push(hists.iter().map(|h| Connections::of(&h.hist)).collect());
        for g in key_figures_of(&r.run, &hists, true) {
            let group = group_key(&g.title);
            for f in g.figures {
                let i = match acc.iter().position(|a| a.0 == group && a.1 == f.label) {
                    Some(i) => i,
                    None => {
                        // Beside its group's rows, so a figure only a later run has (a
                        // phase the first run did not have) is not a group of its own.
                        let at = acc
                            .iter()
                            .rposition(|a| a.0 == group)
                            .map_or(acc.len(), |i| i + 1);
                        acc.insert(
                            at,
                            (
                                group.clone(),
                                f.label.clone(),
                                f.unit,
                                f.resolution,
                                vec![Vec::new(); names.len()],
                                vec![Vec::new(); names.len()],
                            ),
                        );
                        at
                    }
                };
                if let Some(v) = f.value {
                    let redraw = g.hist.zip(f.quantile).map(|(h, q)| (ri, h, q));
                    acc[i].4[k].push((v, redraw));
                } else if let Some(why) = f.why_none
                    && !acc[i].5[k].contains(&why)
                {
                    acc[i].5[k].push(why);
                }
            }
        }
    }
    let run_values = |measured: &[Measured]| -> Vec<RunValue> {
        measured
            .iter()
            .map(|(value, at)| RunValue {
                value: *value,
                redraw: at.and_then(|(r, h, q)| {
                    let c = connections.get(r)?.get(h)?.as_ref()?;
                    Redraw::new(c, q)
                }),
            })
            .collect()
    };
    Ok(acc
        .into_iter()
        .map(|(group, figure, unit, resolution, measured, why_none)| {
            let cells: Vec<Spread> = names
                .iter()
                .zip(&measured)
                .zip(why_none)
                .map(|((n, m), why_none)| Spread {
                    why_none,
                    ..Spread::of(n, m.iter().map(|x| x.0).collect())
                })
                .collect();
            let base_runs = run_values(&measured[baseline]);
            // What the box was like when a run started describes the box, not the
            // server: shown beside the figures, never called a difference between them.
            let context = group == group_key(START_GROUP);
            let differences: Vec<Difference> = (0..names.len())
                .filter(|k| *k != baseline && !context)
                .map(|k| {
                    let seed = interval::seed(&[&group, &figure, &names[baseline], &names[k]]);
                    let iv = interval::difference(&base_runs, &run_values(&measured[k]), seed);
                    Difference::of(&cells[baseline], &cells[k], iv, resolution)
                })
                .collect();
            let pairs: Vec<Difference> = if pairwise(&group, &figure) {
                (0..names.len())
                    .flat_map(|a| ((a + 1)..names.len()).map(move |b| (a, b)))
                    .map(|(a, b)| {
                        let seed = interval::seed(&[&group, &figure, &names[a], &names[b]]);
                        let iv = interval::difference(
                            &run_values(&measured[a]),
                            &run_values(&measured[b]),
                            seed,
                        );
                        Difference::of(&cells[a], &cells[b], iv, resolution)
                    })
                    .collect()
            } else {
                Vec::new()
            };
            Row::new(group, figure, unit, cells, differences, pairs)
        })
        .collect())
}

/// A cell as the text table and the HTML page show it: the value of a single run, or
/// `mean ± sd` over repeats.
pub(crate) fn show(unit: Unit, s: &Spread) -> String {
    match (s.n, s.mean, s.sd) {
        (0, ..) | (_, None, _) if !s.why_none.is_empty() => s.why_none.join("; "),
        (0, ..) | (_, None, _) => "–".to_owned(),
        (1, Some(m), _) | (_, Some(m), None) => unit.show(m),
        // Repeats that agree exactly: the value, not "± 0".
        (_, Some(m), Some(0.0)) => unit.show(m),
        (_, Some(m), Some(sd)) => format!("{} ± {}", unit.show(m), unit.show(sd)),
    }
}

/// Rows made from values, for the unit tests of what reads them.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// A row of `(group, figure)` with each name's runs' `values`, its differences from
    /// the first name, and every pair's.
    pub(crate) fn row(
        (group, figure): (&str, &str),
        unit: Unit,
        names: &[String],
        values: &[&[f64]],
    ) -> Row {
        let cells: Vec<Spread> = names
            .iter()
            .zip(values)
            .map(|(n, v)| Spread::of(n, v.to_vec()))
            .collect();
        let runs = |v: &[f64]| -> Vec<RunValue<'static>> {
            v.iter()
                .map(|value| RunValue {
                    value: *value,
                    redraw: None,
                })
                .collect()
        };
        let diff = |a: usize, b: usize| {
            let seed = interval::seed(&[group, figure, &names[a], &names[b]]);
            let iv = interval::difference(&runs(values[a]), &runs(values[b]), seed);
            Difference::of(&cells[a], &cells[b], iv, None)
        };
        let pairs = (0..names.len())
            .flat_map(|a| ((a + 1)..names.len()).map(move |b| (a, b)))
            .map(|(a, b)| diff(a, b))
            .collect();
        let differences: Vec<Difference> = (1..names.len()).map(|k| diff(0, k)).collect();
        Row::new(
            group.to_owned(),
            figure.to_owned(),
            unit,
            cells,
            differences,
            pairs,
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use rand::{SeedableRng as _, rngs::Xoshiro256PlusPlus};
    use rand_distr::{Distribution as _, Normal};

    use super::*;

    fn verdict_of(base: &[f64], other: &[f64]) -> Difference {
        verdict_at(base, other, None)
    }

    fn verdict_at(base: &[f64], other: &[f64], resolution: Option<f64>) -> Difference {
        let runs = |v: &[f64]| -> Vec<RunValue<'static>> {
            v.iter()
                .map(|value| RunValue {
                    value: *value,
                    redraw: None,
                })
                .collect()
        };
        let iv = interval::difference(&runs(base), &runs(other), 1);
        Difference::of(
            &Spread::of("base", base.to_vec()),
            &Spread::of("other", other.to_vec()),
            iv,
            resolution,
        )
    }

    #[test]
    fn spread_is_mean_sd_min_max_median() {
        let s = Spread::of("go", vec![2.0, 6.0, 4.0]);
        assert_eq!((s.n, s.mean, s.sd), (3, Some(4.0), Some(2.0)));
        assert_eq!((s.min, s.max, s.median), (Some(2.0), Some(6.0), Some(4.0)));
        let one = Spread::of("go", vec![5.0]);
        assert_eq!((one.mean, one.sd, one.range()), (Some(5.0), None, None));
        assert_eq!(show(Unit::Count, &s), "4 ± 2");
        assert_eq!(show(Unit::Count, &one), "5");
        assert_eq!(show(Unit::Count, &Spread::of("x", vec![])), "–");
    }

    #[test]
    fn each_verdict_and_how_it_reads() {
        let d = verdict_of(&[1.0], &[3.47]);
        assert_eq!(
            (d.verdict, d.show_verdict(Unit::Count)),
            (Verdict::FewRuns, "1 run".into())
        );
        assert_eq!(d.show_delta(Unit::Count), "+247%");
        let d = verdict_of(&[1.0, 2.0], &[3.0, 4.0, 5.0]);
        assert_eq!(d.show_verdict(Unit::Count), "2 runs");
        assert!(d.low.is_some(), "an interval, but no call");
        let d = verdict_of(&[2.0, 2.0, 2.0], &[2.0, 2.0, 2.0]);
        assert_eq!(
            (d.verdict, d.show_delta(Unit::Count)),
            (Verdict::Same, String::new())
        );
        assert_eq!(verdict_of(&[2.0], &[]).verdict, Verdict::NoData);
        let d = verdict_of(&[10.0, 12.0, 14.0], &[11.0, 13.0, 15.0]);
        assert_eq!(
            (d.verdict, d.show_verdict(Unit::Count)),
            (Verdict::NotDifferent, "unclear".into())
        );
        assert_eq!(d.show_delta(Unit::Count), "+8.3% [-25.0, +41.7]");
        // Apart, but by less than the two ranges laid end to end (4 + 1).
        let d = verdict_of(&[10.0, 11.0, 14.0], &[14.5, 15.0, 15.5]);
        assert_eq!(d.verdict, Verdict::Different);
        assert_eq!(d.show_verdict(Unit::Count), "within 45.5%");
        // Apart by more than that; % is of the baseline's median (11).
        let d = verdict_of(&[10.0, 11.0, 12.0], &[20.0, 21.0, 22.0]);
        assert_eq!(d.verdict, Verdict::BeyondSpread);
        assert_eq!(
            (d.show_delta(Unit::Count), d.show_verdict(Unit::Count)),
            ("+90.9% [+72.7, +109]".into(), "BEYOND 36.4%".into())
        );
        // Float rounding is no difference; a clock tick is within the resolution.
        assert_eq!(
            verdict_of(&[0.03; 3], &[0.030000000000000006; 3]).verdict,
            Verdict::Same
        );
        let ticks = |a: &[f64], b: &[f64]| verdict_at(a, b, Some(0.02)).verdict;
        assert_eq!(ticks(&[0.02; 3], &[0.03; 3]), Verdict::Different);
        assert_eq!(ticks(&[0.02; 3], &[0.05; 3]), Verdict::BeyondSpread);
        assert_eq!(
            verdict_of(&[20.0, 21.0, 22.0], &[10.0, 11.0, 12.0]).verdict,
            Verdict::BeyondSpread
        );
        assert_eq!(
            (signed_pct(-1e-15), signed_pct(-0.5), signed_pct(1234.5)),
            ("0.00".into(), "-0.50".into(), "+1,234".into())
        );
        // A baseline of 0: the difference in the unit.
        let d = verdict_of(&[0.0, 0.0, 0.0], &[30.0, 37.0, 40.0]);
        assert_eq!((d.delta_pct, d.verdict), (None, Verdict::BeyondSpread));
        assert_eq!(d.show_delta(Unit::Count), "+37 [+30, +40]");
        assert_eq!(d.show_verdict(Unit::Count), "BEYOND 10");
    }

    /// Synthetic repeats: a setup against itself (the same distribution, 3 + 3 runs) is
    /// rarely called beyond its spread; a 2× shift always is.
    #[test]
    fn same_setup_is_rarely_beyond_its_spread() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(42);
        let noise = Normal::new(1000.0, 50.0).unwrap();
        let mut draw =
            |scale: f64| -> Vec<f64> { (0..3).map(|_| scale * noise.sample(&mut rng)).collect() };
        let trials = 1000;
        let (mut different, mut beyond, mut shifted) = (0, 0, 0);
        for _ in 0..trials {
            let (a, b) = (draw(1.0), draw(1.0));
            let v = verdict_of(&a, &b).verdict;
            different += usize::from(v >= Verdict::Different);
            beyond += usize::from(v == Verdict::BeyondSpread);
            let c = draw(2.0);
            shifted += usize::from(verdict_of(&a, &c).verdict == Verdict::BeyondSpread);
        }
        eprintln!(
            "same vs same, {trials} trials: {different} measurably different, {beyond} beyond the spread; 2× shift: {shifted} beyond"
        );
        // The bootstrap alone calls about 1 in 10 (ranges apart by chance) ...
        assert!((60..=140).contains(&different), "{different}");
        // ... the spread rule about 1 in 70.
        assert!(beyond <= 30, "{beyond}");
        assert_eq!(shifted, trials);
    }

    #[test]
    fn rows_group_repeats_by_name_against_the_baseline() {
        let a = crate::report::sample_run();
        let mut b = a.clone();
        b.per_connection.server_user_bytes = Some(1000.0);
        // y's connects took as long as x's connects from their schedule.
        let h = &mut b.client.as_mut().unwrap().histograms;
        let slower = h["connect_from_schedule_us"].clone();
        h.insert("connect_us".into(), slower);
        let run = |name: &str, run: &crate::model::RunRecord| LoadedRun {
            spec: crate::compare::input::RunSpec {
                dir: name.into(),
                name: name.into(),
            },
            run: run.clone(),
        };
        let runs = [run("x", &a), run("y", &b), run("x", &a)];
        let names = names(&runs);
        let rows = rows(&runs, &names, 1).unwrap();
        let row = rows
            .iter()
            .find(|r| r.group == "Memory per connection" && r.figure == "server, user space")
            .unwrap();
        assert_eq!(row.cells.len(), 2);
        assert_eq!((row.cells[0].name.as_str(), row.cells[0].n), ("x", 2));
        assert_eq!(row.cells[1].values, vec![1000.0]);
        let d = row.difference("x").unwrap();
        assert_eq!((d.baseline.as_str(), d.verdict), ("y", Verdict::FewRuns));
        assert!(row.difference("y").is_none());
        // A latency percentile is redrawn from the runs' connections; a count is not.
        let connect = |figure: &str| {
            rows.iter()
                .find(|r| r.group == "Latency: client connect" && r.figure == figure)
                .and_then(|r| r.difference("x"))
                .unwrap()
                .clone()
        };
        let median = connect("median");
        assert_eq!(median.resampled, Some(Resampled::RunsAndConnections));
        assert!(
            median.delta.unwrap() < 0.0 && median.high.unwrap() < 0.0,
            "{median:?}"
        );
        assert_eq!(median.verdict, Verdict::FewRuns);
        let count = connect("count");
        assert_eq!((count.verdict, count.resampled), (Verdict::Same, None));
    }
}
