//! `c1m compare RUN_DIR[=NAME]…`: any number of run folders side by side, runs that
//! share a name taken as repeats of one setup, each setup's difference from a baseline
//! given with its interval and whether it exceeds the box's own run-to-run spread.
//!
//! | module     | concern                                                             |
//! |------------|---------------------------------------------------------------------|
//! | `input`    | `RUN_DIR[=NAME]` arguments, reading and checking the run folders     |
//! | `table`    | the figures per name: mean, sd, min, max, median; the verdicts       |
//! | `interval` | the seeded bootstrap interval on a difference of medians             |
//! | `config`   | setup and machine facts that differ between the names               |
//! | `fit`      | tables and prose that fit the terminal's width                      |
//! | `text`     | the terminal view                                                   |
//! | `files`    | compare.csv, compare.json, compare.html                             |
//! | `cli`      | arguments, exit codes                                               |
//!
//! The figures themselves come from `export::figures::key_figures_of`, as in the report.

pub mod cli;
mod config;
mod files;
mod fit;
pub mod input;
mod interval;
pub(crate) mod table;
mod text;

use thiserror::Error;

pub use files::{CSV, HTML, JSON};

use crate::lab::export::ExportError;

#[derive(Debug, Error)]
pub enum CompareError {
    #[error("--baseline {given}: no run is named so; pick from {}", choices.join(", "))]
    UnknownBaseline { given: String, choices: Vec<String> },
    #[error(transparent)]
    Export(#[from] ExportError),
}

/// Everything the views of a comparison read, computed once.
pub struct Comparison {
    pub runs: Vec<input::LoadedRun>,
    /// Setup names in the order they first appear.
    pub names: Vec<String>,
    /// The name every other is compared with: its index in `names`.
    pub baseline: usize,
    /// Setup facts that differ: (key, value per name).
    pub config: Vec<(String, Vec<String>)>,
    pub rows: Vec<table::Row>,
}

impl Comparison {
    /// `baseline`: a name among the runs' (default: the first).
    pub fn of(
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
        let rows = table::rows(&runs, &names, baseline)?;
        let config = config::differences(&runs, &names);
        Ok(Comparison {
            runs,
            names,
            baseline,
            config,
            rows,
        })
    }
}
