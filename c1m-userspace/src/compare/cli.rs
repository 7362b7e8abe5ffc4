//! The `c1m compare` command line: exit 0 with the table printed and the folder
//! written; exit 2 with one line naming the path and the fix when an input is bad.

use std::{io::Write, path::PathBuf};

use anyhow::{Context as _, Result};
use clap::Args;

use super::{CompareError, Comparison, files, fit, input, text};

/// Exit code for input that is not a set of comparable run folders (report and merge
/// share it).
pub(crate) use crate::report::EXIT_BAD_INPUT;

/// `c1m compare`'s arguments: the run folders, the output folder and the baseline.
#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// Run folders written by `c1m run`, each optionally named: `c1m-runs/X=go`. Runs
    /// that share a name are repeats: the table shows mean ± sd, and each name's
    /// difference from the baseline with its interval and whether it exceeds the
    /// run-to-run spread (3 runs a name at least). Without a name, the folder's own name.
    #[arg(value_name = "RUN_DIR[=NAME]", required = true, value_parser = parse_spec)]
    pub runs: Vec<input::RunSpec>,
    /// Folder for compare.csv, compare.json and compare.html (created if needed).
    #[arg(long, value_name = "DIR", default_value = "c1m-compare")]
    pub out: PathBuf,
    /// The name every other is compared with (default: the first given).
    #[arg(long, value_name = "NAME")]
    pub baseline: Option<String>,
    /// Print the detail after the answer: every run, every figure and its difference
    /// from the baseline (compare.txt holds it either way).
    #[arg(long)]
    pub verbose: bool,
}

fn parse_spec(s: &str) -> Result<input::RunSpec, String> {
    s.parse().map_err(|e: input::InputError| e.to_string())
}

/// Prints the comparison and writes its folder; returns the exit code.
pub(crate) fn main(args: CompareArgs) -> Result<i32> {
    run(args, &mut std::io::stdout().lock())
}

/// [`main`], printing to `out`, each line within $COLUMNS (else the terminal's width,
/// else 120).
pub fn run(args: CompareArgs, out: &mut dyn Write) -> Result<i32> {
    run_within(args, out, fit::width())
}

fn run_within(args: CompareArgs, out: &mut dyn Write, width: usize) -> Result<i32> {
    let runs = match input::load_all(&args.runs) {
        Ok(runs) => runs,
        Err(e) => {
            eprintln!("c1m compare: {e}");
            return Ok(EXIT_BAD_INPUT);
        }
    };
    let cmp = match Comparison::of(runs, args.baseline.as_deref()) {
        Ok(cmp) => cmp,
        Err(e @ CompareError::UnknownBaseline { .. }) => {
            eprintln!("c1m compare: {e}");
            return Ok(EXIT_BAD_INPUT);
        }
        Err(e) => return Err(e).context("compare"),
    };
    let answer = text::answer(&cmp, width);
    let detail = text::render(&cmp, width);
    let written = files::write(&args.out, &cmp, &format!("{answer}\n{detail}"))
        .with_context(|| format!("compare: writing {}", args.out.display()))?;
    let _ = out.write_all(answer.as_bytes());
    if args.verbose {
        let _ = writeln!(out);
        let _ = out.write_all(detail.as_bytes());
    }
    let _ = writeln!(out);
    for p in written {
        let _ = out.write_all(fit::wrap(&format!("wrote {}", p.display()), width, "").as_bytes());
    }
    Ok(0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::report::{fixture, write_run};

    #[test]
    fn compare_writes_the_folder_and_bad_input_exits_2() {
        let dir = fixture::test_dir("compare-cli");
        let sample = fixture::sample_run();
        let (a, b, c) = (dir.join("a"), dir.join("b"), dir.join("c"));
        for d in [&a, &b, &c] {
            write_run(d, &sample).unwrap();
        }
        let out = dir.join("cmp");
        let spec = |p: &std::path::Path, n: &str| input::RunSpec {
            dir: p.to_owned(),
            name: n.into(),
        };
        let mut text = Vec::new();
        let code = run(
            CompareArgs {
                runs: vec![spec(&a, "x"), spec(&b, "x"), spec(&c, "y")],
                out: out.clone(),
                baseline: Some("y".into()),
                verbose: true,
            },
            &mut text,
        )
        .unwrap();
        assert_eq!(code, 0);
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("  x: 2 runs\n") && text.contains("  y: 1 run (baseline)\n"),
            "{text}"
        );
        for f in [files::CSV, files::JSON, files::HTML, files::TXT] {
            assert!(out.join(f).exists(), "{f}");
        }
        let html = std::fs::read_to_string(out.join(files::HTML)).unwrap();
        // One chart per figure, one line per run, named in its legend.
        let chart = html
            .split("id=\"chart-conn-server-app-open\"")
            .nth(1)
            .unwrap();
        let legend = chart.split("</div>").next().unwrap();
        for run in ["x #1", "x #2", "y"] {
            assert!(legend.contains(&format!("</svg>{run}</span>")), "{legend}");
        }
        assert!(html.contains("id=\"chart-lat-client-connect_us\""));
        assert!(!html.contains("<script"));
        let code = main(CompareArgs {
            runs: vec![spec(&dir.join("missing"), "x")],
            out: out.clone(),
            baseline: None,
            verbose: false,
        })
        .unwrap();
        assert_eq!(code, EXIT_BAD_INPUT);
        let code = main(CompareArgs {
            runs: vec![spec(&a, "x"), spec(&b, "y")],
            out,
            baseline: Some("z".into()),
            verbose: false,
        })
        .unwrap();
        assert_eq!(code, EXIT_BAD_INPUT);
    }
}
