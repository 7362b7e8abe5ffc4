//! The README speaks to a stranger (issue 32): its command table names every flag of
//! `c1m run` under the group `c1m run --help` shows it in, so a flag added to the
//! binary and not to the README fails here, not in a user's first hour.

use std::{fs, path::Path, process::Command};

/// `(heading, [[-s, --flag] or [--flag], …])` of `c1m run --help`, in order, without
/// `--help`.
fn run_flag_groups() -> Vec<(String, Vec<Vec<String>>)> {
    let out = Command::new(env!("CARGO_BIN_EXE_c1m"))
        .args(["run", "--help"])
        .env("COLUMNS", "200")
        .output()
        .expect("c1m run --help");
    assert!(out.status.success(), "c1m run --help failed");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut groups: Vec<(String, Vec<Vec<String>>)> = Vec::new();
    for line in text.lines() {
        if !line.starts_with(' ') && line.ends_with(':') && !line.starts_with("Usage") {
            groups.push((line.trim_end_matches(':').to_owned(), Vec::new()));
            continue;
        }
        let t = line.trim_start();
        // A flag's own line: `  -n, --connections <N>` or `      --rate <RATE>`; help
        // text, which may mention flags, is indented further.
        if line.len() - t.len() > 6 || !t.starts_with('-') {
            continue;
        }
        let names: Vec<String> = t
            .split([' ', ','])
            .take_while(|w| w.is_empty() || w.starts_with('-'))
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect();
        if names.iter().all(|n| n != "--help")
            && let Some(g) = groups.last_mut()
        {
            g.1.push(names);
        }
    }
    groups.retain(|(h, flags)| h != "Options" && !flags.is_empty());
    groups
}

#[test]
fn the_readme_names_every_run_flag_under_its_group() {
    let readme = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
        .expect("README.md");
    let row = readme
        .lines()
        .find(|l| l.starts_with("| `c1m run` |"))
        .expect("README's command table has a `c1m run` row");
    let groups = run_flag_groups();
    assert!(groups.len() >= 5, "headings of c1m run --help: {groups:?}");
    let mut missing = Vec::new();
    for (heading, flags) in &groups {
        // "Comparison (--servers)" is "comparison" in the README.
        let name = heading.split(" (").next().unwrap_or(heading).to_lowercase();
        if !row.contains(&format!("**{name}**")) {
            missing.push(format!("group **{name}**"));
        }
        for names in flags {
            if !names.iter().any(|f| row.contains(&format!("`{f}"))) {
                missing.push(format!("{} ({name})", names.join(", ")));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "README's `c1m run` row lacks: {}",
        missing.join(", ")
    );
}

#[test]
fn the_readme_says_what_the_seeds_are_before_it_uses_the_word() {
    let readme = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
        .expect("README.md");
    let defined = readme
        .find("calls \"the seeds\"")
        .expect("README defines \"the seeds\"");
    let first_use = readme.find("seeds").expect("README uses the word");
    assert!(
        first_use >= defined.saturating_sub(80),
        "\"seeds\" used before it is defined"
    );
    assert!(readme.contains(
        "https://colobu.com/2015/07/14/performance-comparison-of-7-websocket-frameworks/"
    ));
}
