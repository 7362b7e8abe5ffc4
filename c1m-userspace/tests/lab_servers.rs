//! `c1m run --servers …`: the same phases against each named server in turn, one run
//! folder each under one comparison folder, and the comparison of `c1m compare` there.
//! Root (CI runs as root): each run test runs in a private network namespace. A
//! reference server not built (`cargo xtask reference-servers`, which `cargo xtask test`
//! runs first) is a loud SKIP.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use c1m::lab::{
    export::load_run,
    model::{Outcome, RunRecord},
};
use c1m::workload::config::EngineKind;
use lab_util::{bounded, c1m_run, fresh_dir, root_or_skip, run_folder};

mod lab_util;

/// True when `cargo xtask reference-servers` built `name`; otherwise a loud SKIP.
fn built(test: &str, name: &str) -> bool {
    let run = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/reference-servers")
        .join(name)
        .join("run");
    if !run.exists() {
        eprintln!(
            "SKIP {test}: {} not built; run `cargo xtask reference-servers` (cargo xtask test does)",
            run.display()
        );
    }
    run.exists()
}

/// The run folders in a comparison folder, by name.
fn run_names(cmp: &Path) -> Vec<String> {
    let mut names: Vec<String> = lab_util::run_folders(cmp)
        .iter()
        .filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    names
}

fn record(dir: &Path) -> RunRecord {
    load_run(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

fn compare_json(cmp: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(cmp.join("compare.json")).expect("compare.json"))
        .expect("compare.json is JSON")
}

/// `c1m run --servers SERVERS -n N --idle 1s --tune` in a fresh folder, which must exit
/// 0 within `limit`: its printed output and its comparison folder.
fn run_servers(folder: &str, servers: &str, n: &str, limit: Duration) -> (String, PathBuf) {
    let out_dir = fresh_dir(folder);
    let args = ["--servers", servers, "-n", n, "--idle", "1s", "--tune"];
    let out = bounded(c1m_run(&out_dir, &args), limit);
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        run_folder(&out_dir),
    )
}

/// A run that completed with all `n` connected, none failed, and push 1 received by
/// every one, each frame decoded.
fn complete_and_every_connection_pushed(name: &str, run: &RunRecord, n: u64) {
    assert_eq!(run.outcome, Outcome::Complete, "{name}: {:?}", run.warnings);
    let client = run.client.as_ref().expect("client");
    assert_eq!(client.counters.connected, n, "{name}");
    assert_eq!(client.counters.failures.total(), 0, "{name}");
    assert_eq!(client.counters.push_undecodable, 0, "{name}");
    let push = client
        .pushes
        .iter()
        .find(|p| p.push_id == 1)
        .expect("push 1");
    assert_eq!(push.count, n, "{name}: every connection pushed");
}

#[test]
fn python_and_c1m_epoll_each_get_a_complete_run_and_one_comparison() {
    let test = "python_and_c1m_epoll_each_get_a_complete_run_and_one_comparison";
    if !root_or_skip(test) || !built(test, "python") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let (stdout, cmp) = run_servers(
        "servers-two",
        "python,c1m-epoll",
        "2000",
        Duration::from_secs(90),
    );
    assert!(
        cmp.to_string_lossy().ends_with("-servers"),
        "{}",
        cmp.display()
    );
    assert_eq!(run_names(&cmp), ["c1m-epoll-1", "python-1"]);
    for name in ["python-1", "c1m-epoll-1"] {
        complete_and_every_connection_pushed(name, &record(&cmp.join(name)), 2000);
    }
    // The python run was c1m's run of that server, signalled as its protocol says.
    let python = std::fs::read_to_string(cmp.join("python-1/server.stdout.log"))
        .expect("the python server's stdout");
    assert!(python.contains("listening: "), "{python}");
    let doc = compare_json(&cmp);
    assert_eq!(doc["names"], serde_json::json!(["python", "c1m-epoll"]));
    let runs = doc["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    for (run, name) in runs.iter().zip(["python", "c1m-epoll"]) {
        assert_eq!(run["name"], name);
        assert_eq!(run["connections"], 2000);
        assert_eq!(run["outcome"], "complete");
    }
    for f in ["compare.csv", "compare.html"] {
        assert!(cmp.join(f).exists(), "{f}");
    }
    // The table is printed at the end, latency table and all.
    let table = &stdout[stdout.rfind("Key figures").expect("the comparison table")..];
    assert!(
        table.contains("push_message_us") && table.contains("c1m-epoll"),
        "{table}"
    );
}

/// The proof at its size: every reference server and c1m's own through the whole
/// lab at 15,000 connections (under one process's fd limit, so a single-process server
/// can hold them), in one `--servers` run.
#[test]
fn every_reference_server_holds_15000_pushed_and_measured() {
    let test = "every_reference_server_holds_15000_pushed_and_measured";
    let servers = ["python", "node", "go", "netty"];
    if !root_or_skip(test) || !servers.iter().all(|s| built(test, s)) {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let (_, cmp) = run_servers(
        "servers-all",
        "python,node,go,netty,c1m-epoll,c1m-tokio",
        "15000",
        Duration::from_secs(420),
    );
    for name in ["python", "node", "go", "netty", "c1m-epoll", "c1m-tokio"] {
        let run = record(&cmp.join(format!("{name}-1")));
        complete_and_every_connection_pushed(name, &run, 15_000);
        // Every server meets the same client: only c1m's own server changes engine.
        assert_eq!(run.config.engine, EngineKind::Epoll, "{name}");
        if name == "c1m-tokio" {
            assert_eq!(run.config.server_engine, EngineKind::Tokio);
        }
        let client = run.client.as_ref().expect("client");
        for h in ["push_message_us", "push_fanout_us", "ws_handshake_us"] {
            let hist = client
                .histogram(h)
                .unwrap_or_else(|e| panic!("{name} {h}: {e}"));
            assert_eq!(hist.len(), 15_000, "{name} {h}");
        }
        for what in ["server open", "client open"] {
            let row = lab_util::kernel_vs_app(&run.phases[0], what);
            assert_eq!(
                (row.kernel, row.app),
                (Some(15_000), Some(15_000)),
                "{name}: {row:?}"
            );
        }
        assert!(
            run.per_connection
                .server_user_bytes
                .is_some_and(|b| b > 0.0),
            "{name}: server memory per connection {:?}",
            run.per_connection
        );
    }
    let doc = compare_json(&cmp);
    assert_eq!(
        doc["names"],
        serde_json::json!(["python", "node", "go", "netty", "c1m-epoll", "c1m-tokio"])
    );
    if let Some(out_dir) = cmp.parent() {
        let _ = std::fs::remove_dir_all(out_dir);
    }
}

#[test]
fn ctrl_c_ends_the_sequence_and_compares_what_was_measured() {
    let test = "ctrl_c_ends_the_sequence_and_compares_what_was_measured";
    if !root_or_skip(test) {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let out_dir = fresh_dir("servers-ctrl-c");
    // python is never reached: c1m's own server is interrupted in its idle phase.
    let mut cmd = c1m_run(
        &out_dir,
        &[
            "--servers",
            "c1m-epoll,python",
            "-n",
            "500",
            "--idle",
            "60s",
            "--tune",
        ],
    );
    // A python run script that is never started: the sequence needs no built server.
    let fake = fresh_dir("servers-fake-built");
    std::fs::create_dir_all(fake.join("python")).expect("dir");
    std::fs::write(fake.join("python/run"), "#!/bin/sh\nexit 1\n").expect("run script");
    cmd.env("C1M_REFERENCE_SERVERS", &fake);
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn c1m run");
    let first: PathBuf = {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let found = lab_util::run_folders(&out_dir)
                .first()
                .map(|cmp| cmp.join("c1m-epoll-1"))
                .filter(|d| load_run(d).is_ok_and(|r| !r.phases.is_empty()));
            if let Some(d) = found {
                break d;
            }
            assert!(Instant::now() < until, "the setup phase never ended");
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    // SAFETY: our own child, not yet reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().expect("wait for c1m run");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(130), "{text}");
    let cmp = first.parent().expect("comparison folder").to_owned();
    assert_eq!(run_names(&cmp), ["c1m-epoll-1"], "python never started");
    assert_eq!(record(&first).outcome, Outcome::Interrupted);
    let doc = compare_json(&cmp);
    assert_eq!(doc["names"], serde_json::json!(["c1m-epoll"]));
    assert_eq!(doc["runs"][0]["outcome"], "interrupted");
}

#[test]
fn bad_servers_flags_are_one_line_and_start_nothing() {
    let out_dir = fresh_dir("servers-flags");
    let missing = fresh_dir("servers-not-built");
    // (args, cause in the one line, exit code)
    let cases: [(&[&str], &str, i32); 8] = [
        (
            &["--servers", "python,rust"],
            "unknown server `rust`: pick from python, node, go, netty, c1m-epoll",
            2,
        ),
        (&["--servers", "go,go"], "names `go` twice", 2),
        (
            &["--servers", "netty"],
            "not built: run `cargo xtask reference-servers`",
            2,
        ),
        (
            &["--servers", "c1m-epoll", "--server-cmd", "x"],
            "cannot be used with --server-cmd",
            1,
        ),
        (
            &[
                "--servers",
                "c1m-epoll",
                "--clients",
                "external",
                "--expect",
                "10",
            ],
            "drop --clients external",
            1,
        ),
        (&["--repeat", "2"], "add --servers NAMES", 1),
        (
            &["--servers", "c1m-epoll,c1m-tokio", "--baseline", "go"],
            "--baseline go: not among --servers; pick from c1m-epoll, c1m-tokio",
            2,
        ),
        (
            &["--baseline", "go"],
            "add --servers NAMES, or drop --baseline",
            1,
        ),
    ];
    for (args, cause, code) in cases {
        let out = c1m_run(&out_dir, args)
            .env("C1M_REFERENCE_SERVERS", &missing)
            .output()
            .expect("c1m run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: one line, not {err}");
        assert!(err.contains(cause), "{args:?}: {cause:?} not in {err}");
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(
            String::from_utf8_lossy(&out.stdout).is_empty(),
            "{args:?}: nothing said before the refusal"
        );
    }
    assert!(
        lab_util::run_folders(&out_dir).is_empty(),
        "a refused start writes no folder"
    );
}
