//! `cargo xtask test`: every test built once, then run in two lanes, with a summary
//! that names the failures and the slowest tests.
//!
//! The integration tests are one binary (`tests/suite.rs`), a module per former file.
//! The lab lane runs one module at a time, as they were written: its modules start
//! labs, attach the eBPF observer and tune sysctls. The light lane's modules start no
//! lab and attach no observer, and their sockets live in private network namespaces or
//! on root-namespace ports no lab-lane test uses (`tests/suite.rs` lists them): they run
//! beside the lab lane. Measured on this 2-core box (a fresh clone, 2026-12-03): the build
//! ~7.8 min, the lab lane ~6 min, the light lane ~1.2 min beside it.

use std::{
    io::Read,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc,
    thread,
    time::Instant,
};

use anyhow::{Context, Result, bail};

use crate::util;

/// Modules of `tests/suite.rs` that run beside the lab lane. A new module runs in the
/// lab lane until it is shown to share nothing with a lab (root-netns ports, sysctls,
/// the observer's hooks, the state directory). `deploy_podman` stays in the lab lane:
/// its server pod attaches the observer (~25 s).
const LIGHT: &[&str] = &[
    "build_guard",
    "control_endpoint",
    "deploy_kubernetes",
    "docs_readme",
    // report/compare/merge on files in its own scratch folders: no lab, no socket, no
    // state directory (13.6 s off the lab lane).
    "hostile_inputs",
    "layers",
    "live_view_metrics",
    "live_view_tui",
    // Every test enters a private network namespace before it starts a reference server
    // and `c1m client` there: no lab, no observer, no port lock or journal (20 s off the
    // lab lane).
    "reference_servers",
    "report_browser",
    "report_scales",
    "workload_faults",
    "workload_interop",
    "workload_latency",
    "workload_source",
    "workload_tlp",
    "workload_tokio_client",
    "workload_tokio_server",
    "workload_ws_fuzz",
];

/// One test binary from `cargo test --no-run`.
struct Binary {
    /// `suite`, `c1m (lib)`, …
    name: String,
    exe: PathBuf,
    /// The package's folder: where `cargo test` runs a test binary.
    cwd: PathBuf,
}

/// One run of a test binary, or of one module of the suite.
struct Job {
    label: String,
    command: Command,
}

/// What a job printed, read back.
struct Finished {
    label: String,
    success: bool,
    seconds: f64,
    output: String,
}

/// A test's line: `test NAME ... ok <1.234s>`.
struct TestLine {
    name: String,
    verdict: String,
    seconds: Option<f64>,
}

/// Builds every test target once (in [`util::TEST_PROFILE`], as the `c1m` binary the
/// tests start) and lists the executables.
fn build() -> Result<Vec<Binary>> {
    let out = Command::new(util::cargo_bin())
        .current_dir(util::root())
        .args([
            "test",
            "--profile",
            util::TEST_PROFILE,
            "--workspace",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run cargo: is it on PATH?")?;
    if !out.status.success() {
        bail!("building the tests failed (cargo's messages above)");
    }
    let mut binaries = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" || msg["profile"]["test"] != true {
            continue;
        }
        let (Some(exe), Some(manifest), Some(target)) = (
            msg["executable"].as_str(),
            msg["manifest_path"].as_str(),
            msg["target"]["name"].as_str(),
        ) else {
            continue;
        };
        let kind = msg["target"]["kind"][0].as_str().unwrap_or("test");
        let name = if kind == "test" {
            target.to_owned()
        } else {
            format!("{target} ({kind})")
        };
        let cwd = Path::new(manifest)
            .parent()
            .map_or_else(util::root, Path::to_path_buf);
        binaries.push(Binary {
            name,
            exe: PathBuf::from(exe),
            cwd,
        });
    }
    Ok(binaries)
}

/// The modules of the suite binary, in its order.
fn modules(suite: &Binary) -> Result<Vec<String>> {
    let out = Command::new(&suite.exe)
        .current_dir(&suite.cwd)
        .args(["--list", "--format", "terse"])
        .output()
        .with_context(|| format!("cannot list the tests of {}", suite.exe.display()))?;
    let mut modules: Vec<String> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.strip_suffix(": test") else {
            continue;
        };
        let module = name.split("::").next().unwrap_or(name).to_owned();
        if !modules.contains(&module) {
            modules.push(module);
        }
    }
    Ok(modules)
}

fn job(label: String, binary: &Binary, filter: Option<&str>) -> Job {
    let mut command = Command::new(&binary.exe);
    command.current_dir(&binary.cwd);
    if let Some(f) = filter {
        command.arg(f);
    }
    // Per-test seconds for the summary. libtest takes `--report-time` from a stable
    // build only with RUSTC_BOOTSTRAP; no test runs rustc or cargo, so nothing else reads it.
    command
        .args(["-Zunstable-options", "--report-time"])
        .env("RUSTC_BOOTSTRAP", "1");
    Job { label, command }
}

/// Runs a lane's jobs one after another, each output kept whole so the two lanes'
/// lines do not interleave.
fn lane(name: &'static str, jobs: Vec<Job>, done: mpsc::Sender<Finished>) {
    for mut job in jobs {
        eprintln!("xtask: {name} lane: {}", job.label);
        let start = Instant::now();
        let finished = match job
            .command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
        {
            Ok(mut child) => {
                // stderr on a thread of its own: a full pipe must not stall the test.
                let err = child.stderr.take().map(|mut e| {
                    thread::spawn(move || {
                        let mut s = Vec::new();
                        let _ = e.read_to_end(&mut s);
                        s
                    })
                });
                let mut output = Vec::new();
                if let Some(mut o) = child.stdout.take() {
                    let _ = o.read_to_end(&mut output);
                }
                let success = child.wait().is_ok_and(|s| s.success());
                if let Some(Ok(e)) = err.map(thread::JoinHandle::join) {
                    output.extend_from_slice(&e);
                }
                Finished {
                    label: job.label,
                    success,
                    seconds: start.elapsed().as_secs_f64(),
                    output: String::from_utf8_lossy(&output).into_owned(),
                }
            }
            Err(e) => Finished {
                label: job.label,
                success: false,
                seconds: 0.0,
                output: format!("cannot start: {e}\n"),
            },
        };
        if done.send(finished).is_err() {
            return;
        }
    }
}

fn test_lines(output: &str) -> Vec<TestLine> {
    output
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("test ")?;
            let (name, rest) = rest.split_once(" ... ")?;
            let mut words = rest.split_whitespace();
            // "ignored, REASON" for a test ignored with a reason: the verdict is the word.
            let verdict = words.next()?.trim_end_matches(',').to_owned();
            let seconds = words
                .next()
                .and_then(|t| t.strip_prefix('<')?.strip_suffix("s>")?.parse().ok());
            Some(TestLine {
                name: name.to_owned(),
                verdict,
                seconds,
            })
        })
        .collect()
}

/// `cargo xtask test` with no arguments.
pub fn run_all() -> Result<()> {
    let start = Instant::now();
    let binaries = build()?;
    let Some(suite) = binaries.iter().find(|b| b.name == "suite") else {
        bail!("cargo built no `suite` test binary: is tests/suite.rs in c1m-userspace/Cargo.toml?");
    };
    let modules = modules(suite)?;
    // A module is picked by the filter `NAME::`, which would also pick `xNAME::`.
    if let Some((a, b)) = modules
        .iter()
        .flat_map(|a| modules.iter().map(move |b| (a, b)))
        .find(|(a, b)| a != b && b.ends_with(a.as_str()))
    {
        bail!("suite modules `{a}` and `{b}`: the filter `{a}::` picks both; rename one");
    }
    let mut lab = Vec::new();
    let mut light = Vec::new();
    for module in modules {
        let filter = format!("{module}::");
        let j = job(format!("suite {module}"), suite, Some(&filter));
        if LIGHT.contains(&module.as_str()) {
            light.push(j);
        } else {
            lab.push(j);
        }
    }
    for b in binaries.iter().filter(|b| b.name != "suite") {
        light.push(job(b.name.clone(), b, None));
    }
    let mut doc = Command::new(util::cargo_bin());
    doc.current_dir(util::root()).args([
        "test",
        "--profile",
        util::TEST_PROFILE,
        "--workspace",
        "--doc",
    ]);
    light.push(Job {
        label: "doc tests".into(),
        command: doc,
    });

    let (tx, rx) = mpsc::channel();
    let lanes = [("lab", lab), ("light", light)].map(|(name, jobs)| {
        let tx = tx.clone();
        thread::spawn(move || lane(name, jobs, tx))
    });
    drop(tx);
    let mut failed_jobs = Vec::new();
    let mut failed_tests = Vec::new();
    let mut timed = Vec::new();
    let (mut passed, mut ignored) = (0usize, 0usize);
    for f in rx {
        print!("{}", f.output);
        println!("xtask: {} took {:.1} s", f.label, f.seconds);
        for t in test_lines(&f.output) {
            match t.verdict.as_str() {
                "ok" => passed += 1,
                "ignored" => ignored += 1,
                _ => failed_tests.push(t.name.clone()),
            }
            if let Some(s) = t.seconds {
                timed.push((s, t.name));
            }
        }
        if !f.success {
            failed_jobs.push(f.label);
        }
    }
    for l in lanes {
        let _ = l.join();
    }
    timed.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!("\nxtask: the 20 slowest tests");
    for (s, name) in timed.iter().take(20) {
        println!("  {s:7.1} s  {name}");
    }
    println!(
        "xtask: {passed} passed, {} failed, {ignored} ignored in {:.1} min",
        failed_tests.len(),
        start.elapsed().as_secs_f64() / 60.0
    );
    if !failed_jobs.is_empty() {
        for t in &failed_tests {
            println!("  FAILED {t}");
        }
        bail!(
            "{} of the test runs failed: {} (their output is above)",
            failed_jobs.len(),
            failed_jobs.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ignored_test_with_a_reason_is_ignored_not_failed() {
        let out = "test a ... ok <0.1s>\ntest b ... ignored, a measurement: prints bytes\n\
                   test c ... FAILED <2.0s>\ntest d has been running for over 60 seconds\n";
        let v: Vec<(String, String)> = test_lines(out)
            .into_iter()
            .map(|t| (t.name, t.verdict))
            .collect();
        let want = [("a", "ok"), ("b", "ignored"), ("c", "FAILED")];
        assert_eq!(v, want.map(|(n, w)| (n.to_owned(), w.to_owned())).to_vec());
    }
}
