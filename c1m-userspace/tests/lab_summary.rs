//! What `c1m run` prints at its end and the flags it takes (issue 32, points 4 and 8): the
//! summary of a real small run fits 80 columns, says kernel = app in one line, carries
//! thousands separators on every number and names the empty histograms it wrote no
//! `.hgrm` for; the workload flags of `c1m client` reach the client a run starts; every
//! command's help wraps at 80 columns. Root, in a private network namespace per test,
//! as `lab_run`'s tests.

use std::process::Command;

use c1m::model::RunRecord;
use c1m::report::hgrm;
use lab_util::{c1m_run, fresh_dir, root_or_skip, run_folder};

use crate::lab_util;

/// The end-of-run summary in `stdout`: from its `== c1m run` line to the run folder line.
fn summary_of(stdout: &str) -> &str {
    let start = stdout
        .find("== c1m run:")
        .unwrap_or_else(|| panic!("no summary in:\n{stdout}"));
    let text = &stdout[start..];
    text.rfind("\nrun folder: ")
        .map_or(text, |end| &text[..end])
}

/// `text` with every run of whitespace one space: a phrase the width wrapped reads whole.
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `c1m run --ports 8000-8009 --idle 1s ARGS` at 80 columns, to its successful end: its
/// stdout.
fn run_at_80(out: &std::path::Path, args: &[&str]) -> String {
    let mut all = vec!["--ports", "8000-8009", "--idle", "1s"];
    all.extend_from_slice(args);
    let result = c1m_run(out, &all)
        .env("COLUMNS", "80")
        .output()
        .expect("c1m run");
    let stdout = String::from_utf8_lossy(&result.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(
        result.status.success(),
        "c1m run failed\n{stdout}\n{stderr}"
    );
    stdout
}

#[test]
fn a_small_runs_summary_fits_80_columns_and_writes_no_empty_hgrm() {
    if !root_or_skip("a_small_runs_summary_fits_80_columns_and_writes_no_empty_hgrm") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let out = fresh_dir("summary80");
    let stdout = run_at_80(&out, &["-n", "2000"]);
    let summary = summary_of(&stdout);
    let wide: Vec<&str> = summary.lines().filter(|l| l.chars().count() > 80).collect();
    assert!(
        wide.is_empty(),
        "lines over 80 columns: {wide:#?}\n{summary}"
    );
    assert!(
        summary.contains("kernel = app after every phase: 2,000 connections"),
        "{summary}"
    );
    assert!(!summary.contains("kernel vs app at the end"), "{summary}");
    assert_eq!(
        c1m::report::fixture::unseparated(summary),
        Vec::<String>::new(),
        "{summary}"
    );
    assert!(
        summary.contains("cpu: user/system CPU seconds"),
        "the phase table's headers explained:\n{summary}"
    );

    // ws mode with --echo-count 0: no echo histogram, and the server times nothing.
    let dir = run_folder(&out);
    let mut hgrms: Vec<String> = std::fs::read_dir(&dir)
        .expect("run folder")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".hgrm"))
        .collect();
    hgrms.sort();
    assert_eq!(
        hgrms,
        [
            "client-connect_from_schedule_us.hgrm",
            "client-connect_us.hgrm",
            "client-push_fanout_us.hgrm",
            "client-push_message_us.hgrm",
            "client-ws_handshake_us.hgrm",
            "client-ws_open_from_schedule_us.hgrm",
        ]
    );
    for name in &hgrms {
        let text = std::fs::read_to_string(dir.join(name)).expect("hgrm");
        let parsed = hgrm::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(parsed.total_count, 2000, "{name}");
    }
    assert!(
        flat(summary).contains(
            "empty histograms, no .hgrm written: the server's 7 (c1m's server times nothing: \
             every latency is the client's); client echo_rtt (--mode ws with --echo-count 0)"
        ),
        "{summary}"
    );

    // `c1m report` regenerates the folder without the empty ones, and without failing.
    let report = Command::new(env!("CARGO_BIN_EXE_c1m"))
        .arg("report")
        .arg(&dir)
        .output()
        .expect("c1m report");
    assert!(
        report.status.success(),
        "c1m report: {}",
        String::from_utf8_lossy(&report.stderr)
    );
    let after = std::fs::read_dir(&dir)
        .expect("run folder")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".hgrm"))
        .count();
    assert_eq!(after, hgrms.len());
}

#[test]
fn the_clients_workload_flags_on_run_reach_the_client() {
    if !root_or_skip("the_clients_workload_flags_on_run_reach_the_client") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let out = fresh_dir("workload-flags");
    let stdout = run_at_80(
        &out,
        &[
            "-n",
            "200",
            "--echo-count",
            "3",
            "--payload-size",
            "100",
            "--path",
            "/chat",
        ],
    );
    let dir = run_folder(&out);
    let run: RunRecord = serde_json::from_str(
        &std::fs::read_to_string(dir.join("summary.json")).expect("summary.json"),
    )
    .expect("a RunRecord");
    assert_eq!(
        (
            run.config.payload_size,
            run.config.echo_count,
            run.config.ws_path.as_str()
        ),
        (100, 3, "/chat")
    );
    // Three round trips on each of 200 connections, verified byte for byte by the
    // client, echoed by the server.
    let client = run.client.as_ref().expect("client snapshot");
    let server = run.server.as_ref().expect("server snapshot");
    assert_eq!(client.counters.echo_round_trips, 600);
    assert_eq!(server.counters.echo_round_trips, 600);
    let text = std::fs::read_to_string(dir.join("client-echo_rtt_us.hgrm")).expect("echo hgrm");
    assert_eq!(hgrm::parse(&text).expect("hgrm").total_count, 600);
    // The echo histogram has data now: only the server's are named empty.
    assert!(
        flat(summary_of(&stdout)).contains(
            "no .hgrm written: the server's 7 (c1m's server times nothing: every latency is \
             the client's) retransmits:"
        ),
        "{stdout}"
    );
}

#[test]
fn every_commands_help_fits_80_columns_and_old_flag_names_work() {
    let c1m = env!("CARGO_BIN_EXE_c1m");
    for sub in [
        "run", "report", "compare", "doctor", "top", "observe", "server", "client", "merge",
    ] {
        for help in ["-h", "--help"] {
            let out = Command::new(c1m)
                .args([sub, help])
                .env("COLUMNS", "80")
                .output()
                .expect("c1m help");
            assert!(out.status.success(), "c1m {sub} {help}");
            let text = String::from_utf8_lossy(&out.stdout);
            let wide: Vec<&str> = text.lines().filter(|l| l.chars().count() > 80).collect();
            assert!(wide.is_empty(), "c1m {sub} {help} at 80 columns: {wide:#?}");
        }
    }
    // doctor's --sources, now --source as on run and client, still parses (exit 2 is a
    // refused command line).
    let doctor = Command::new(c1m)
        .args(["doctor", "-n", "1000", "--sources", "4", "--json"])
        .output()
        .expect("c1m doctor");
    assert_ne!(
        doctor.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&doctor.stderr)
    );
    assert!(
        String::from_utf8_lossy(&doctor.stdout).contains("ip_local_port_range"),
        "doctor ran its checks"
    );
}

/// `--check` (issue 35, point 5): judged on the run's own figures, listed last in the
/// summary with the measured value and in summary.json, and one failed check is exit
/// code 3 with a line on stderr; all met is 0. A check c1m cannot read fails before
/// anything starts, in one line.
#[test]
fn checks_gate_the_exit_code_with_the_measured_values() {
    if !root_or_skip("checks_gate_the_exit_code_with_the_measured_values") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let out = fresh_dir("checks");
    let checks = [
        "failures == 0",
        "kernel = app",
        "held >= 300",
        "push.p99 < 1us",
        "mem.kernel < 1MiB",
    ];
    let mut args = vec!["--ports", "8000-8009", "--idle", "1s", "-n", "300"];
    for c in &checks {
        args.extend(["--check", c]);
    }
    let result = c1m_run(&out, &args)
        .env("COLUMNS", "80")
        .output()
        .expect("c1m run");
    let stdout = String::from_utf8_lossy(&result.stdout);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert_eq!(result.status.code(), Some(3), "{stdout}\n{stderr}");
    let run: RunRecord = serde_json::from_str(
        &std::fs::read_to_string(run_folder(&out).join("summary.json")).expect("summary.json"),
    )
    .expect("summary");
    assert_eq!(run.outcome.to_string(), "complete", "{stdout}");
    let got: Vec<(&str, bool)> = run
        .checks
        .iter()
        .map(|c| (c.check.as_str(), c.passed))
        .collect();
    assert_eq!(
        got,
        [
            ("failures == 0", true),
            ("kernel = app", true),
            ("held >= 300", true),
            ("push.p99 < 1us", false),
            ("mem.kernel < 1MiB", true)
        ]
    );
    assert_eq!(run.checks[2].measured, Some(300.0));
    assert!(run.checks[3].measured.is_some_and(|us| us >= 1.0));
    let summary = summary_of(&stdout);
    assert!(
        summary.contains("checks: 1 of 5 FAILED (exit code 3)"),
        "{summary}"
    );
    assert!(summary.contains("\n  pass held >= 300: 300\n"), "{summary}");
    assert!(summary.contains("\n  FAIL push.p99 < 1us: "), "{summary}");
    assert_eq!(
        stderr.matches("check failed: push.p99 < 1us: ").count(),
        1,
        "{stderr}"
    );

    // The same run with the checks it meets ends 0.
    let met = fresh_dir("checks-met");
    let result = c1m_run(
        &met,
        &[
            "--ports",
            "8000-8009",
            "--idle",
            "0s",
            "-n",
            "300",
            "--check",
            "failures == 0",
            "--check",
            "push.p99 < 60s",
        ],
    )
    .output()
    .expect("c1m run");
    assert_eq!(
        result.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );

    // Bad checks: one line, exit 1, no run folder.
    for (check, says) in [
        ("push.p98 < 5ms", "no figure \"push.p98\""),
        ("push.p99 < 5", "needs a time unit"),
        ("failures", "no comparison"),
    ] {
        let bad = fresh_dir("checks-bad");
        let result = c1m_run(&bad, &["-n", "10", "--check", check])
            .output()
            .expect("c1m run");
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert_eq!(result.status.code(), Some(1), "{check}: {stderr}");
        assert!(
            stderr.lines().next().is_some_and(|l| l.contains(says)),
            "{check}: {stderr}"
        );
        assert!(lab_util::run_folders(&bad).is_empty(), "{check}");
    }
}
