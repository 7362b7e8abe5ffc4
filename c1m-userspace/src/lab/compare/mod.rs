//! `c1m compare RUN_DIR[=NAME]…`: any number of run folders side by side, runs that
//! share a name taken as repeats of one setup and shown with their spread.
//!
//! | module   | concern                                                          |
//! |----------|------------------------------------------------------------------|
//! | `input`  | `RUN_DIR[=NAME]` arguments, reading and checking the run folders  |
//! | `table`  | the figures per name: mean, sd, min, max, and the spread verdict  |
//! | `config` | setup and machine facts that differ between the names            |
//! | `text`   | the terminal table and the seeds' latency table                  |
//! | `files`  | compare.csv, compare.json, compare.html                          |
//! | `cli`    | arguments, exit codes                                            |
//!
//! The figures themselves come from `export::figures::key_figures`, as in the report.

pub mod cli;
mod config;
mod files;
pub mod input;
pub(crate) mod table;
mod text;

pub use files::{CSV, HTML, JSON};

/// Everything the views of a comparison read, computed once.
pub struct Comparison {
    pub runs: Vec<input::LoadedRun>,
    /// Setup names in the order they first appear.
    pub names: Vec<String>,
    /// Setup facts that differ: (key, value per name).
    pub config: Vec<(String, Vec<String>)>,
    pub rows: Vec<table::Row>,
}

/// "2 of 6 runs started dirty (go-1, node-2): …", or None when every run that recorded
/// its start began clean. Said above the figures, since they carry what those runs
/// inherited.
pub fn dirty_starts(runs: &[input::LoadedRun]) -> Option<String> {
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
    pub fn of(runs: Vec<input::LoadedRun>) -> Result<Comparison, crate::lab::export::ExportError> {
        let names = table::names(&runs);
        let rows = table::rows(&runs)?;
        let config = config::differences(&runs, &names);
        Ok(Comparison {
            runs,
            names,
            config,
            rows,
        })
    }
}
