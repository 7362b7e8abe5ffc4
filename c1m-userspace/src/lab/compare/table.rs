//! The comparison table: every key figure of every run (export/figures.rs computes them,
//! once), grouped by run name, with the spread across repeats. Pure: runs in, rows out.
//!
//! A difference between two setups counts as a finding only when each has repeats and
//! their ranges (min–max) do not overlap; with single runs the table says so instead of
//! showing a percentage that one noisy run can make (+247% on a p99.9).

use serde::Serialize;

use super::input::LoadedRun;
use crate::lab::export::{
    ExportError,
    figures::{Unit, key_figures},
    fmt::pct_change,
};

/// The values one setup (all runs of one name) gave for one figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    pub name: String,
    /// Runs that reported the figure.
    pub n: usize,
    pub mean: Option<f64>,
    /// Sample standard deviation (n − 1); absent below two values.
    pub sd: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
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
            values,
            why_none: Vec::new(),
        }
    }
}

/// Whether the setups of a row differ beyond their spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// One setup only, or no values: nothing to compare.
    None,
    /// Every setup gave the same value.
    Same,
    /// Some setup has a single run: a difference is not a finding.
    SingleRun,
    /// The ranges of the lowest and highest setup overlap.
    WithinSpread,
    /// The lowest setup's max is below the highest setup's min, over repeats.
    Apart,
}

impl Verdict {
    pub fn show(self) -> &'static str {
        match self {
            Verdict::None => "",
            Verdict::Same => "same",
            Verdict::SingleRun => "single runs",
            Verdict::WithinSpread => "within spread",
            Verdict::Apart => "apart",
        }
    }

    fn of(cells: &[Spread]) -> Verdict {
        let present: Vec<&Spread> = cells.iter().filter(|c| c.n > 0).collect();
        if present.len() < 2 {
            return Verdict::None;
        }
        let all: Vec<f64> = present.iter().flat_map(|c| c.values.clone()).collect();
        if all.iter().all(|v| *v == all[0]) {
            return Verdict::Same;
        }
        if present.iter().any(|c| c.n < 2) {
            return Verdict::SingleRun;
        }
        let by_mean = |a: &&&Spread, b: &&&Spread| {
            a.mean
                .partial_cmp(&b.mean)
                .unwrap_or(std::cmp::Ordering::Equal)
        };
        let (Some(lo), Some(hi)) = (
            present.iter().min_by(by_mean),
            present.iter().max_by(by_mean),
        ) else {
            return Verdict::None;
        };
        match (lo.max, hi.min) {
            (Some(lo_max), Some(hi_min)) if lo_max < hi_min => Verdict::Apart,
            _ => Verdict::WithinSpread,
        }
    }
}

/// One figure across every setup.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub group: String,
    pub figure: String,
    #[serde(skip)]
    pub(crate) unit: Unit,
    /// `count`, `per_s`, `bytes`, `us`, `s`.
    pub unit_name: &'static str,
    /// One per setup, in the order the names first appear.
    pub cells: Vec<Spread>,
    pub verdict: Verdict,
    /// Highest setup's mean over the lowest's, in percent: only when [`Verdict::Apart`].
    pub apart_by_pct: Option<f64>,
}

impl Row {
    /// The spread column: the verdict, with the size of the difference when it is one.
    pub fn spread(&self) -> String {
        match self.apart_by_pct {
            Some(p) => format!("{} ({p:+.1}%)", self.verdict.show()),
            None => self.verdict.show().to_owned(),
        }
    }

    /// A latency group ("Latency: client connect_us").
    pub fn is_latency(&self) -> bool {
        self.group.starts_with(LATENCY_PREFIX)
    }
}

pub const LATENCY_PREFIX: &str = "Latency: ";

/// The names in the order they first appear on the command line.
pub fn names(runs: &[LoadedRun]) -> Vec<String> {
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

/// Every figure any run has, in first-seen order, with its spread per name.
pub fn rows(runs: &[LoadedRun]) -> Result<Vec<Row>, ExportError> {
    let names = names(runs);
    // (group, figure, unit, values per name, reasons for no value per name)
    type Acc = (String, String, Unit, Vec<Vec<f64>>, Vec<Vec<String>>);
    let mut acc: Vec<Acc> = Vec::new();
    for r in runs {
        let k = names.iter().position(|n| *n == r.spec.name).unwrap_or(0);
        for g in key_figures(&r.run, true)? {
            let group = group_key(&g.title);
            for f in g.figures {
                let i = match acc.iter().position(|a| a.0 == group && a.1 == f.label) {
                    Some(i) => i,
                    None => {
                        acc.push((
                            group.clone(),
                            f.label.clone(),
                            f.unit,
                            vec![Vec::new(); names.len()],
                            vec![Vec::new(); names.len()],
                        ));
                        acc.len() - 1
                    }
                };
                if let Some(v) = f.value {
                    acc[i].3[k].push(v);
                } else if let Some(why) = f.why_none
                    && !acc[i].4[k].contains(&why)
                {
                    acc[i].4[k].push(why);
                }
            }
        }
    }
    Ok(acc
        .into_iter()
        .map(|(group, figure, unit, values, why_none)| {
            let cells: Vec<Spread> = names
                .iter()
                .zip(values)
                .zip(why_none)
                .map(|((n, v), why_none)| Spread {
                    why_none,
                    ..Spread::of(n, v)
                })
                .collect();
            let verdict = Verdict::of(&cells);
            let means = cells.iter().filter_map(|c| c.mean);
            let (lo, hi) = (means.clone().reduce(f64::min), means.reduce(f64::max));
            Row {
                group,
                figure,
                unit,
                unit_name: unit.name(),
                apart_by_pct: (verdict == Verdict::Apart)
                    .then(|| pct_change(lo?, hi?))
                    .flatten(),
                verdict,
                cells,
            }
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn spreads(sets: &[&[f64]]) -> Vec<Spread> {
        sets.iter()
            .enumerate()
            .map(|(i, v)| Spread::of(&format!("s{i}"), v.to_vec()))
            .collect()
    }

    #[test]
    fn spread_is_mean_sd_min_max() {
        let s = Spread::of("go", vec![2.0, 4.0, 6.0]);
        assert_eq!((s.n, s.mean, s.sd), (3, Some(4.0), Some(2.0)));
        assert_eq!((s.min, s.max), (Some(2.0), Some(6.0)));
        let one = Spread::of("go", vec![5.0]);
        assert_eq!((one.mean, one.sd), (Some(5.0), None));
        assert_eq!(show(Unit::Count, &s), "4 ± 2");
        assert_eq!(show(Unit::Count, &one), "5");
        assert_eq!(show(Unit::Count, &Spread::of("x", vec![])), "–");
    }

    #[test]
    fn a_single_run_difference_is_not_a_finding() {
        assert_eq!(
            Verdict::of(&spreads(&[&[1.0], &[3.47]])),
            Verdict::SingleRun
        );
        assert_eq!(
            Verdict::of(&spreads(&[&[1.0, 2.0], &[3.0]])),
            Verdict::SingleRun
        );
        assert_eq!(
            Verdict::of(&spreads(&[&[1.0, 3.0], &[2.0, 4.0]])),
            Verdict::WithinSpread
        );
        assert_eq!(
            Verdict::of(&spreads(&[&[1.0, 2.0], &[3.0, 4.0]])),
            Verdict::Apart
        );
        assert_eq!(
            Verdict::of(&spreads(&[&[3.0, 4.0], &[1.0, 2.0]])),
            Verdict::Apart
        );
        assert_eq!(Verdict::of(&spreads(&[&[2.0], &[2.0]])), Verdict::Same);
        assert_eq!(Verdict::of(&spreads(&[&[2.0], &[]])), Verdict::None);
    }

    #[test]
    fn rows_group_repeats_by_name() {
        let a = crate::lab::export::sample_run();
        let mut b = a.clone();
        b.per_connection.server_user_bytes = Some(1000.0);
        let run = |name: &str, run: &crate::lab::model::RunRecord| LoadedRun {
            spec: super::super::input::RunSpec {
                dir: name.into(),
                name: name.into(),
            },
            run: run.clone(),
        };
        let runs = [run("x", &a), run("y", &b), run("x", &a)];
        let rows = rows(&runs).unwrap();
        let row = rows
            .iter()
            .find(|r| r.group == "Memory per connection" && r.figure == "server, user space")
            .unwrap();
        assert_eq!(row.cells.len(), 2);
        assert_eq!((row.cells[0].name.as_str(), row.cells[0].n), ("x", 2));
        assert_eq!(row.cells[1].values, vec![1000.0]);
        assert_eq!(row.verdict, Verdict::SingleRun);
        assert!(rows.iter().any(|r| r.is_latency() && r.figure == "99.9%"));
    }
}
