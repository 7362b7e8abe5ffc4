//! The `c1m compare` command line: exit 0 with the table printed and the folder
//! written; exit 2 with one line naming the path and the fix when an input is bad.

use std::{io::Write, path::PathBuf};

use anyhow::{Context as _, Result};
use clap::Args;

use super::{Comparison, files, input, text};

/// Exit code for input that is not a set of comparable run folders.
pub const EXIT_BAD_INPUT: i32 = 2;

#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// Run folders written by `c1m run`, each optionally named: `c1m-runs/X=go`. Runs
    /// that share a name are repeats: the table shows mean ± sd and says whether
    /// differences are beyond the spread. Without a name, the folder's own name.
    #[arg(value_name = "RUN_DIR[=NAME]", required = true, value_parser = parse_spec)]
    pub runs: Vec<input::RunSpec>,
    /// Folder for compare.csv, compare.json and compare.html (created if needed).
    #[arg(long, value_name = "DIR", default_value = "c1m-compare")]
    pub out: PathBuf,
}

fn parse_spec(s: &str) -> Result<input::RunSpec, String> {
    s.parse().map_err(|e: input::InputError| e.to_string())
}

/// Prints the comparison and writes its folder; returns the exit code.
pub fn main(args: CompareArgs) -> Result<i32> {
    run(args, &mut std::io::stdout().lock())
}

/// [`main`], printing to `out`.
pub fn run(args: CompareArgs, out: &mut dyn Write) -> Result<i32> {
    let runs = match input::load_all(&args.runs) {
        Ok(runs) => runs,
        Err(e) => {
            eprintln!("c1m compare: {e}");
            return Ok(EXIT_BAD_INPUT);
        }
    };
    let cmp = Comparison::of(runs).context("compare")?;
    let written = files::write(&args.out, &cmp)
        .with_context(|| format!("compare: writing {}", args.out.display()))?;
    let _ = out.write_all(text::render(&cmp).as_bytes());
    let _ = writeln!(out);
    for p in written {
        let _ = writeln!(out, "wrote {}", p.display());
    }
    Ok(0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::lab::export::{fixture, write_run};

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
            },
            &mut text,
        )
        .unwrap();
        assert_eq!(code, 0);
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("  x: 2 runs\n") && text.contains("  y: 1 run\n"),
            "{text}"
        );
        for f in [files::CSV, files::JSON, files::HTML] {
            assert!(out.join(f).exists(), "{f}");
        }
        let html = std::fs::read_to_string(out.join(files::HTML)).unwrap();
        assert!(html.contains("x #2: app open") && html.contains("y: app open"));
        assert!(html.contains("id=\"chart-lat-client-connect_us\""));
        assert!(!html.contains("<script"));
        let code = main(CompareArgs {
            runs: vec![spec(&dir.join("missing"), "x")],
            out,
        })
        .unwrap();
        assert_eq!(code, EXIT_BAD_INPUT);
    }
}
