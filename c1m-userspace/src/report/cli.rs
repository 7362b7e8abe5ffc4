//! `c1m report RUN_DIR`: read a run folder back and regenerate its derived files
//! (`c1m compare` lives in `compare`).

use std::{io::Write as _, path::PathBuf};

use anyhow::{Result, anyhow};
use clap::Args;

use super::{EXIT_BAD_INPUT, ExportOptions, HgrmUnit, load_run, write_derived_with};

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// Run folder written by `c1m run` (c1m-runs/<timestamp>/, holds summary.json).
    /// report.html, the .hgrm files and summary.schema.json are rewritten from
    /// summary.json (timeseries.csv only if it is gone); summary.json, timeseries.csv and
    /// the .hlog files are left alone. Exit 2, writing nothing, if summary.json is not a
    /// c1m run summary.
    pub run_dir: PathBuf,
    /// Also write every .hgrm in this unit (`ms`: `<side>-<name>_ms.hgrm`, values / 1000,
    /// as wrk2 prints them); the µs files are always written.
    #[arg(long, value_enum)]
    pub unit: Option<HgrmUnit>,
}

/// Regenerates the derived files of a run folder and prints the paths written; the exit
/// code: 0, or [`EXIT_BAD_INPUT`] with one line on stderr when the folder's summary does
/// not read (nothing is written then).
pub(crate) fn main(args: ReportArgs) -> Result<i32> {
    let run = match load_run(&args.run_dir) {
        Ok(run) => run,
        Err(e) => {
            eprintln!("c1m report: {e}");
            return Ok(EXIT_BAD_INPUT);
        }
    };
    let opts = ExportOptions {
        extra_hgrm_units: args.unit.into_iter().collect(),
        keep_timeseries: true,
    };
    let written =
        write_derived_with(&args.run_dir, &run, &opts).map_err(|e| anyhow!("report: {e}"))?;
    let mut out = std::io::stdout().lock();
    for p in &written {
        let _ = writeln!(out, "{}", p.display());
    }
    Ok(0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::report::{fixture, write_run};

    #[test]
    fn report_on_a_missing_folder_is_one_line_with_the_fix() {
        let dir = fixture::test_dir("cli-missing");
        let args = |run_dir: PathBuf| ReportArgs {
            run_dir,
            unit: None,
        };
        assert_eq!(main(args(dir.join("nope"))).unwrap(), EXIT_BAD_INPUT);
        let msg = load_run(&dir.join("nope")).unwrap_err().to_string();
        assert!(!msg.contains('\n'), "{msg}");
        assert!(msg.contains("nope/summary.json not found: pass a run folder written by c1m run (c1m-runs/<timestamp>/)"), "{msg}");
        // Not JSON: names the file and says what to pass; nothing is written.
        std::fs::write(dir.join("summary.json"), "{").unwrap();
        assert_eq!(main(args(dir.to_path_buf())).unwrap(), EXIT_BAD_INPUT);
        let msg = load_run(&dir).unwrap_err().to_string();
        assert!(msg.contains("not a c1m run summary"), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
        assert_eq!(std::fs::read_dir(&*dir).unwrap().count(), 1);
    }

    #[test]
    fn report_regenerates() {
        let dir = fixture::test_dir("cli-report");
        let run = fixture::sample_run();
        write_run(&dir, &run).unwrap();
        std::fs::remove_file(dir.join("report.html")).unwrap();
        let code = main(ReportArgs {
            run_dir: dir.to_path_buf(),
            unit: Some(HgrmUnit::Ms),
        })
        .unwrap();
        assert_eq!(code, 0);
        assert!(dir.join("report.html").exists());
        assert!(dir.join("client-connect_ms.hgrm").exists());
    }
}
