//! `c1m report RUN_DIR` and `c1m compare RUN_A RUN_B`: read run folders back and
//! regenerate or compare. The lead's `cli.rs` routes to [`run_report`] and
//! [`run_compare`].

use std::{
    io::Write as _,
    path::{Path, PathBuf},
};

use anyhow::{Result, anyhow};
use clap::Args;

use super::{ExportOptions, HgrmUnit, atomic::write_atomic, compare, load_run, write_derived_with};

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

#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// First run folder (A).
    pub run_a: PathBuf,
    /// Second run folder (B); deltas are B − A, and % change is relative to A.
    pub run_b: PathBuf,
    /// Also write a side-by-side HTML page with both runs' charts overlaid.
    #[arg(long, value_name = "OUT")]
    pub html: Option<PathBuf>,
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

/// Prints two runs side by side; with `--html`, writes the overlay page too.
pub fn run_compare(args: CompareArgs) -> Result<()> {
    let fail = |e: super::ExportError| anyhow!("compare: {e}");
    let a = load_run(&args.run_a).map_err(fail)?;
    let b = load_run(&args.run_b).map_err(fail)?;
    let names = [name(&args.run_a), name(&args.run_b)];
    let names = [names[0].as_str(), names[1].as_str()];
    let text = compare::text(names, &a, &b).map_err(fail)?;
    if let Some(out) = &args.html {
        let page = compare::html(names, &a, &b).map_err(fail)?;
        write_atomic(out, page.as_bytes()).map_err(fail)?;
    }
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    if let Some(out) = &args.html {
        let _ = writeln!(stdout, "\nwrote {}", out.display());
    }
    Ok(())
}

fn name(p: &Path) -> String {
    p.display().to_string()
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
        let err = run_compare(CompareArgs {
            run_a: dir.to_path_buf(),
            run_b: dir.to_path_buf(),
            html: None,
        })
        .unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.starts_with("compare: ") && msg.contains("not a c1m run summary"),
            "{msg}"
        );
        assert!(!msg.contains('\n'), "{msg}");
    }

    #[test]
    fn report_regenerates_and_compare_writes_html() {
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
        let out = dir.join("cmp/compare.html");
        std::fs::create_dir_all(dir.join("cmp")).unwrap();
        run_compare(CompareArgs {
            run_a: dir.to_path_buf(),
            run_b: dir.to_path_buf(),
            html: Some(out.clone()),
        })
        .unwrap();
        assert!(
            std::fs::read_to_string(out)
                .unwrap()
                .contains("chart-conn-server")
        );
    }
}
