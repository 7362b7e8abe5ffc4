//! `c1m run` end to end at a small scale, and `--tune` restoring what it changed.
//! Root (CI runs as root): each test runs c1m in a private network namespace, whose
//! sysctls and ports are its own. Without root each test says SKIP loudly.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use c1m::model::{Outcome, RunRecord};
use c1m::report::hgrm;
use c1m::workload::config::EngineKind;
use lab_util::{c1m_run, fresh_dir, kernel_vs_app, root_or_skip, run_folder, set_low, sysctl};

use crate::lab_util;

#[test]
fn a_5000_connection_run_exports_everything_and_counts_agree() {
    if !root_or_skip("a_5000_connection_run_exports_everything_and_counts_agree") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    // The lab cannot tell the engines apart except by their figures: the same run, the
    // same assertions, once per engine.
    for engine in [EngineKind::Epoll, EngineKind::Tokio] {
        eprintln!("--- engine {}", engine.name());
        five_thousand_connection_run(engine);
    }
}

fn five_thousand_connection_run(engine: EngineKind) {
    let out = fresh_dir("run");
    let result = c1m_run(
        &out,
        &[
            "--engine",
            engine.name(),
            "--ports",
            "8000-8009",
            "-n",
            "5000",
            "--rate",
            "5000",
            "--idle",
            "1s",
            "--tune",
        ],
    )
    .output()
    .expect("c1m run");
    let stdout = String::from_utf8_lossy(&result.stdout);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(
        result.status.success(),
        "c1m run failed\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("client push_message, from the broadcast start (ms)")
            && stdout.contains("99.9%"),
        "latency table in the seeds' form:\n{stdout}"
    );
    let dir = run_folder(&out);

    for file in [
        "summary.json",
        "summary.schema.json",
        "timeseries.csv",
        "report.html",
    ] {
        assert!(
            dir.join(file).is_file(),
            "{file} missing in {}",
            dir.display()
        );
    }
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("summary.json")).expect("summary.json"),
    )
    .expect("JSON");
    // Against the schema the run wrote beside it.
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("summary.schema.json")).expect("summary.schema.json"),
    )
    .expect("schema JSON");
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
    let errors: Vec<String> = validator
        .iter_errors(&json)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "summary.json against its schema: {errors:#?}"
    );
    let run: RunRecord = serde_json::from_value(json).expect("a RunRecord");
    assert_eq!(run.outcome, Outcome::Complete);
    assert_eq!(run.config.engine, engine);
    // The default sources, said at start and kept: 5,000 over 10 ports is 500 per
    // (source, port) pair, 1.8% of the 28,232-port range, so one source.
    assert_eq!(run.config.sources, "127.0.0.2-127.0.0.2");
    let said = format!("sources: {}", run.config.sources_reason);
    assert!(
        run.config
            .sources_reason
            .starts_with("1 source address (127.0.0.2-127.0.0.2): ≤ 500 ")
            && stdout.contains(&said),
        "{said}\n{stdout}"
    );
    assert_eq!(
        run.phases
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>(),
        ["setup", "idle", "push", "teardown"]
    );
    assert!(run.warnings.is_empty(), "warnings: {:?}", run.warnings);
    // A phase ends when the app answered; the observer's walk for its kernel column comes
    // after, outside its duration, and before the next phase begins.
    for (p, next) in run.phases.iter().zip(run.phases.iter().skip(1)) {
        assert!(p.end_walk_s > 0.0, "{}: no end walk recorded", p.name);
        assert!(
            next.started_unix_ms as f64 >= p.ended_unix_ms as f64 + p.end_walk_s * 1000.0 - 1.0,
            "{} began before {}'s end walk was over: {p:?} {next:?}",
            next.name,
            p.name
        );
    }

    // Kernel and app agree exactly once set up.
    let setup = &run.phases[0];
    for what in ["server open", "client open"] {
        let row = kernel_vs_app(setup, what);
        assert_eq!(
            (row.kernel, row.app),
            (Some(5000), Some(5000)),
            "{what}: {row:?}"
        );
        assert!(row.agree);
    }
    let client = run.client.as_ref().expect("client snapshot");
    assert_eq!(client.counters.connected, 5000);
    assert_eq!(client.counters.failures.total(), 0);
    assert_eq!(client.pushes.len(), 1);
    assert_eq!(
        client.pushes[0].count, 5000,
        "every connection got the push"
    );

    // Histograms parse back with the counts the run recorded.
    for (name, count) in [
        ("connect_us", 5000),
        ("push_message_us", 5000),
        ("push_fanout_us", 5000),
    ] {
        let path = dir.join(format!("client-{name}.hgrm"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("{} missing", path.display()));
        let parsed = hgrm::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(parsed.total_count, count, "{name}");
        assert!(
            dir.join(format!("client-{name}.hlog")).is_file(),
            "{name}.hlog"
        );
    }
    let csv = std::fs::read_to_string(dir.join("timeseries.csv")).expect("csv");
    assert_eq!(
        csv.lines().count(),
        run.samples.len() + 1,
        "header + one row per sample"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn tune_restores_every_sysctl_it_changed_after_sigterm() {
    if !root_or_skip("tune_restores_every_sysctl_it_changed_after_sigterm") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    // Per-namespace sysctls, set low so --tune must raise them.
    let low = [
        ("net/core/somaxconn", "128"),
        ("net/ipv4/tcp_max_syn_backlog", "128"),
        ("net/ipv4/tcp_max_tw_buckets", "128"),
        ("net/ipv4/ip_local_port_range", "40000 40099"),
    ];
    set_low(&low);
    let out = fresh_dir("tune");
    // A slow ramp keeps the run going while we signal it.
    let mut child = c1m_run(
        &out,
        &[
            "--ports",
            "8000-8009",
            "-n",
            "20000",
            "--rate",
            "1000",
            "--tune",
            "--no-observer",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("c1m run");
    let deadline = Instant::now() + Duration::from_secs(30);
    while sysctl("net/core/somaxconn") == "128" {
        assert!(Instant::now() < deadline, "--tune never raised somaxconn");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: signalling the child we started, by its pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130), "an interrupted run exits 130");
    for (name, value) in low {
        assert_eq!(sysctl(name), value, "{name} restored");
    }
    let run: RunRecord = serde_json::from_str(
        &std::fs::read_to_string(run_folder(&out).join("summary.json")).expect("summary"),
    )
    .expect("RunRecord");
    assert_eq!(run.outcome, Outcome::Interrupted);
    assert!(!run.samples.is_empty(), "what was measured is kept");
    // No observer, no walk after a phase.
    assert!(
        run.phases.iter().all(|p| p.end_walk_s == 0.0),
        "{:?}",
        run.phases
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn top_attaches_to_a_running_lab_and_shows_both_views() {
    if !root_or_skip("top_attaches_to_a_running_lab_and_shows_both_views") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let out = fresh_dir("top");
    let mut lab = c1m_run(
        &out,
        &[
            "--ports",
            "8000-8009",
            "-n",
            "2000",
            "--rate",
            "4000",
            "--idle",
            "60s",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("c1m run");
    // Wait for the idle phase: the run folder's summary says so.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let idle = std::fs::read_dir(&out)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .and_then(|e| std::fs::read_to_string(e.path().join("summary.json")).ok())
            .is_some_and(|s| s.contains("\"name\": \"setup\""));
        if idle {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the lab never finished its setup phase"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let top = Command::new(env!("CARGO_BIN_EXE_c1m"))
        .args([
            "top",
            "--plain",
            "--duration",
            "1.5s",
            "--ports",
            "8000-8009",
            "--runs",
        ])
        .arg(&out)
        .output()
        .expect("c1m top");
    // SAFETY: signalling the lab we started, by its pid.
    unsafe { libc::kill(lab.id() as i32, libc::SIGTERM) };
    let _ = lab.wait();
    let stdout = String::from_utf8_lossy(&top.stdout);
    assert!(
        top.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&top.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    for pair in [
        "server_app_open=2000",
        "server_kernel_established=2000",
        "client_app_open=2000",
        "client_kernel_established=2000",
    ] {
        assert!(
            last.split_whitespace().any(|kv| kv == pair),
            "{pair} missing in: {last}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}
