//! `c1m compare RUN_DIR[=NAME]…`: any number of run folders side by side, runs that
//! share a name taken as repeats of one setup, each setup's difference from a baseline
//! given with its interval and whether it exceeds the box's own run-to-run spread.
//!
//! | module     | concern                                                             |
//! |------------|---------------------------------------------------------------------|
//! | `input`    | `RUN_DIR[=NAME]` arguments, reading and checking the run folders     |
//! | `headline` | the answer first: a row per name, the best marked, pairs in words    |
//! | `table`    | the figures per name: mean, sd, min, max, median; the verdicts       |
//! | `interval` | the seeded bootstrap interval on a difference of medians             |
//! | `config`   | setup and machine facts that differ between the names               |
//! | `fit`      | tables and prose that fit the terminal's width                      |
//! | `text`     | the terminal view                                                   |
//! | `files`    | compare.csv, compare.json, compare.html                             |
//! | `cli`      | arguments, exit codes                                               |
//!
//! The figures themselves come from `report::figures::key_figures_of`, as in the report.

pub mod cli;
mod config;
mod files;
pub(crate) mod fit;
pub(crate) mod headline;
pub mod input;
mod interval;
pub(crate) mod table;
mod text;

use thiserror::Error;

pub use files::{CSV, HTML, JSON, TXT};

use crate::report::ExportError;

#[derive(Debug, Error)]
pub(crate) enum CompareError {
    #[error("--baseline {given}: no run is named so; pick from {}", choices.join(", "))]
    UnknownBaseline { given: String, choices: Vec<String> },
    #[error(transparent)]
    Export(#[from] ExportError),
}

/// Everything the views of a comparison read, computed once.
pub(crate) struct Comparison {
    pub runs: Vec<input::LoadedRun>,
    /// Setup names in the order they first appear.
    pub names: Vec<String>,
    /// The name every other is compared with: its index in `names`.
    pub baseline: usize,
    /// Setup facts that differ: (key, value per name).
    pub config: Vec<(String, Vec<String>)>,
    pub rows: Vec<table::Row>,
    /// The answer it leads with: the table, every pair's verdicts, who is better at what.
    pub headline: headline::Headline,
}

/// "2 of 6 runs started dirty (go-1, node-2): …", or None when every run that recorded
/// its start began clean. Said above the figures, since they carry what those runs
/// inherited.
pub(crate) fn dirty_starts(runs: &[input::LoadedRun]) -> Option<String> {
    let dirty: Vec<String> = runs
        .iter()
        .filter(|r| r.run.start.as_ref().is_some_and(|s| s.dirty()))
        .map(|r| {
            r.spec
                .dir
                .file_name()
                .map_or_else(|| r.spec.name.clone(), |f| f.to_string_lossy().into_owned())
        })
        .collect();
    (!dirty.is_empty()).then(|| {
        format!(
            "{} of {} runs started dirty ({}): their figures include sockets an earlier run left on their ports",
            dirty.len(),
            runs.len(),
            dirty.join(", ")
        )
    })
}

impl Comparison {
    /// `baseline`: a name among the runs' (default: the first).
    pub(crate) fn of(
        runs: Vec<input::LoadedRun>,
        baseline: Option<&str>,
    ) -> Result<Comparison, CompareError> {
        let names = table::names(&runs);
        let baseline =
            match baseline {
                None => 0,
                Some(b) => names.iter().position(|n| n == b).ok_or_else(|| {
                    CompareError::UnknownBaseline {
                        given: b.to_owned(),
                        choices: names.clone(),
                    }
                })?,
            };
        let rows = table::rows_with_pairs(&runs, &names, baseline, headline::pairwise)?;
        let config = config::differences(&runs, &names);
        let headline = headline::of(&rows, &names);
        Ok(Comparison {
            headline,
            runs,
            names,
            baseline,
            config,
            rows,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::{input::LoadedRun, table};
    use crate::{
        model::RunRecord,
        workload::{
            push_rule::{FrameStamps, PushInstant, PushRule},
            stats::setup_rate::PeakRate,
        },
    };

    fn loaded(name: &str, run: RunRecord) -> LoadedRun {
        LoadedRun::named(name, run)
    }

    /// Issue 20: a server whose stamp cannot follow the rule asked is not mixed with one
    /// that does; a figure that could not be measured says why in its cell.
    #[test]
    fn runs_measured_by_different_rules_never_share_a_row() {
        let own = crate::report::sample_run();
        let mut foreign = own.clone();
        let write = PushRule {
            latency_from: PushInstant::Write,
            ..PushRule::default()
        };
        let mut own_write = own.clone();
        own_write.config.push = Some(write);
        foreign.config.push = Some(PushRule {
            stamps: FrameStamps::Broadcast,
            ..write
        });
        if let Some(r) = foreign.client.as_mut().and_then(|c| c.setup_rate.as_mut()) {
            r.peak = PeakRate::RampShorter { ramp_s: 0.34 };
        }
        let names = ["c1m".to_owned(), "go".to_owned()];
        let runs = [loaded("c1m", own_write), loaded("go", foreign)];
        let rows = table::rows(&runs, &names, 0).unwrap();
        let counts = |group: &str| {
            let row = rows
                .iter()
                .find(|r| {
                    r.group == format!("Latency: client push_message{group}") && r.figure == "count"
                })
                .unwrap_or_else(|| panic!("no {group} row"));
            row.cells.iter().map(|c| c.n).collect::<Vec<_>>()
        };
        assert_eq!(counts(", from the frame's write"), [1, 0]);
        assert_eq!(
            counts(", from the broadcast start, cannot follow write"),
            [0, 1]
        );
        let peak = rows
            .iter()
            .find(|r| r.figure == "peak rate (busiest ≥ 1 s)")
            .unwrap();
        assert_eq!(table::show(peak.unit, &peak.cells[0]), "51,230/s");
        assert_eq!(
            table::show(peak.unit, &peak.cells[1]),
            "ramp 0.34 s, shorter than 1 s"
        );
    }
}
