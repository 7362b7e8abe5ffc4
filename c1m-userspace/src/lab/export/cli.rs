//! `c1m report RUN_DIR`: read a run folder back and regenerate its derived files
//! (`c1m compare` lives in `lab::compare`).

use std::{io::Write as _, path::PathBuf};

use anyhow::{Result, anyhow};
use clap::Args;

use super::{ExportOptions, HgrmUnit, load_run, write_derived_with};

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// Run folder written by `c1m run` (c1m-runs/<timestamp>/, holds summary.json).
    /// report.html, timeseries.csv, the .hgrm files and summary.schema.json are
    /// rewritten from summary.json; summary.json and the .hlog files are left alone.
    pub run_dir: PathBuf,
    /// Also write every .hgrm in this unit (`ms`: `<side>-<name>_ms.hgrm`, values / 1000,
    /// as wrk2 prints them); the µs files are always written.
    #[arg(long, value_enum)]
    pub unit: Option<HgrmUnit>,
}

/// Regenerates the derived files of a run folder; prints the paths written.
pub fn run_report(args: ReportArgs) -> Result<()> {
    let fail = |e: super::ExportError| anyhow!("report: {e}");
    let run = load_run(&args.run_dir).map_err(fail)?;
    let opts = ExportOptions {
        extra_hgrm_units: args.unit.into_iter().collect(),
    };
    let written = write_derived_with(&args.run_dir, &run, &opts).map_err(fail)?;
    let mut out = std::io::stdout().lock();
    for p in &written {
        let _ = writeln!(out, "{}", p.display());
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::lab::export::{fixture, write_run};

    #[test]
    fn report_on_a_missing_folder_is_one_line_with_the_fix() {
        let dir = fixture::test_dir("cli-missing");
        let err = run_report(ReportArgs {
            run_dir: dir.join("nope"),
            unit: None,
        })
        .unwrap_err();
        let msg = format!("{err:#}");
        assert!(!msg.contains('\n'), "{msg}");
        assert!(msg.starts_with("report: "), "{msg}");
        assert!(msg.contains("nope/summary.json not found: pass a run folder written by c1m run (c1m-runs/<timestamp>/)"), "{msg}");
        // Not JSON: names the file and says what to pass.
        std::fs::write(dir.join("summary.json"), "{").unwrap();
        let err = run_report(ReportArgs {
            run_dir: dir.to_path_buf(),
            unit: None,
        })
        .unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.starts_with("report: ") && msg.contains("not a c1m run summary"),
            "{msg}"
        );
        assert!(!msg.contains('\n'), "{msg}");
    }

    #[test]
    fn report_regenerates() {
        let dir = fixture::test_dir("cli-report");
        let run = fixture::sample_run();
        write_run(&dir, &run).unwrap();
        std::fs::remove_file(dir.join("report.html")).unwrap();
        run_report(ReportArgs {
            run_dir: dir.to_path_buf(),
            unit: Some(HgrmUnit::Ms),
        })
        .unwrap();
        assert!(dir.join("report.html").exists());
        assert!(dir.join("client-connect_ms.hgrm").exists());
    }
}
