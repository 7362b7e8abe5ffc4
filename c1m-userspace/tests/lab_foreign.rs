//! `c1m run` against a server c1m did not write: a small Python `websockets` server
//! (tests/servers/ws_server.py) started by `--server-cmd` or by the test (`--target`).
//! Root (CI runs as root): each test runs in a private network namespace. Without root,
//! or without python3 and its `websockets` package, each test says SKIP loudly.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use c1m::model::{Outcome, RunRecord};
use lab_util::{bounded, c1m_run, fresh_dir, kernel_vs_app, root_or_skip, run_folder};

use crate::lab_util;

fn server_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/ws_server.py")
}

/// Root and python3 with `websockets`, or a loud SKIP.
fn ready(test: &str) -> bool {
    if !root_or_skip(test) {
        return false;
    }
    let ok = Command::new("python3")
        .args(["-c", "import websockets.asyncio.server"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "SKIP {test}: needs python3 with the `websockets` package (pip install websockets)"
        );
    }
    ok
}

/// The server's command line for `--server-cmd`.
fn server_cmd(opts: &str) -> String {
    format!("python3 {} {opts}", server_py().display())
}

/// A run folder, kept until dropped with the fresh folder above it.
struct RunDir {
    path: PathBuf,
    _parent: lab_util::TempDir,
}

impl std::ops::Deref for RunDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

/// `c1m run ARGS --idle 1s --tune` into a fresh folder, bounded: its output, record and
/// folder (removed when the last is dropped, so a test can still read the logs).
fn run_lab(name: &str, args: &[&str], limit: Duration) -> (Output, RunRecord, RunDir) {
    let out_dir = fresh_dir(name);
    let mut all = args.to_vec();
    all.extend(["--idle", "1s", "--tune"]);
    let out = bounded(c1m_run(&out_dir, &all), limit);
    let path = run_folder(&out_dir);
    let run = record(&path);
    (
        out,
        run,
        RunDir {
            path,
            _parent: out_dir,
        },
    )
}

/// `run_lab` against the test server, started by the lab itself (`--server-cmd`) on
/// `ports` (comma-separated, the lab's `--ports` the same) with `opts`, then `args`.
fn run_lab_with_server(
    name: &str,
    ports: &str,
    opts: &str,
    args: &[&str],
    limit: Duration,
) -> (Output, RunRecord, RunDir) {
    let cmd = server_cmd(&format!("--ports {ports} {opts}"));
    let mut all = vec!["--server-cmd", cmd.as_str(), "--ports", ports];
    all.extend_from_slice(args);
    run_lab(name, &all, limit)
}

fn record(dir: &Path) -> RunRecord {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).expect("summary.json"))
        .expect("a RunRecord")
}

fn says(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_python_server_is_measured_end_to_end_with_a_signal_push() {
    if !ready("a_python_server_is_measured_end_to_end_with_a_signal_push") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let (out, run, dir) = run_lab_with_server(
        "foreign-e2e",
        "9000,9001",
        "--on-signal --format u64le-us",
        &[
            "--push-trigger",
            "signal:USR1",
            "--push-format",
            "u64le-us",
            "-n",
            "3000",
            "--rate",
            "3000",
        ],
        Duration::from_secs(120),
    );
    let text = says(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        // Titled by its rule: a stamp of unstated instant (no --push-stamp).
        text.contains("client push_message, from a stamp of unstated instant (ms)")
            && text.contains("99.9%"),
        "latency table: {text}"
    );
    assert_eq!(run.outcome, Outcome::Complete, "{:?}", run.warnings);
    let client = run.client.as_ref().expect("client");
    assert_eq!(client.counters.connected, 3000);
    assert_eq!(client.counters.failures.total(), 0);
    assert_eq!(client.counters.push_undecodable, 0);
    let push = client
        .pushes
        .iter()
        .find(|p| p.push_id == 1)
        .expect("push 1");
    assert_eq!(push.count, 3000, "every connection got the push");
    for name in ["push_message_us", "push_fanout_us"] {
        assert_eq!(
            client.histogram(name).expect(name).len(),
            3000,
            "{name}: one sample per frame"
        );
    }
    // Kernel = the client's app counts, on both sides, once set up.
    let setup = &run.phases[0];
    for what in ["server open", "client open"] {
        let row = kernel_vs_app(setup, what);
        assert_eq!((row.kernel, row.app), (Some(3000), Some(3000)), "{row:?}");
    }
    // The server's process figures, per connection and per phase.
    let server = run.server.as_ref().expect("server snapshot");
    assert!(
        server.split.starts_with("foreign server: python3"),
        "{}",
        server.split
    );
    assert!(server.threads.is_some_and(|t| t >= 1));
    // Held in the idle phase: 3,000 sockets and two listeners at least.
    let idle = &run.phases[1].server;
    assert!(idle.open_fds.is_some_and(|n| n >= 3002), "{idle:?}");
    assert!(
        run.per_connection
            .server_user_bytes
            .is_some_and(|b| b > 0.0),
        "{:?}",
        run.per_connection
    );
    assert!(
        run.phases
            .iter()
            .all(|p| p.server.rss_bytes > 0 && p.server.threads.is_some())
    );
    assert!(run.samples.iter().any(|s| s.server_open_fds.is_some()));
    // Its output is kept, and it is gone.
    let stdout = std::fs::read_to_string(dir.join("server.stdout.log")).expect("stdout log");
    assert!(stdout.contains("connections: "), "{stdout}");
    let journal: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("journal.json")).expect("journal"))
            .expect("journal JSON");
    let pid = journal["children"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["role"] == "server"))
        .and_then(|c| c["pid"].as_u64())
        .expect("the server in the journal") as u32;
    assert!(
        c1m::procstat::start_time(pid).is_none(),
        "the server (pid {pid}) still runs"
    );
}

#[test]
fn push_trigger_none_measures_a_scheduled_server_and_names_a_silent_one() {
    if !ready("push_trigger_none_measures_a_scheduled_server_and_names_a_silent_one") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    // Pushes every second on its own, stamped in text ms.
    let (out, run, _) = run_lab_with_server(
        "foreign-none",
        "9000",
        "--every 1 --format text-ms",
        &["--push-format", "text-ms", "-n", "500", "--rate", "2000"],
        Duration::from_secs(90),
    );
    assert_eq!(out.status.code(), Some(0), "{}", says(&out));

    let client = run.client.as_ref().expect("client");
    let push = client
        .pushes
        .iter()
        .find(|p| p.push_id == 1)
        .expect("push 1");
    assert!(push.count >= 500, "{push:?}");
    assert_eq!(client.counters.push_undecodable, 0);
    assert_eq!(
        client.histogram("push_message_us").expect("hist").len(),
        client.counters.pushes_received
    );

    // Answers the upgrade, never pushes: said, degraded, and no hang.
    let (out, run, _) = run_lab_with_server(
        "foreign-silent",
        "9000",
        "",
        &["--push-format", "text-ms", "--push-wait", "2s", "-n", "200"],
        Duration::from_secs(90),
    );
    assert_eq!(out.status.code(), Some(2), "degraded: {}", says(&out));

    assert_eq!(run.outcome, Outcome::Degraded);
    assert!(
        run.warnings.iter().any(|w| w.contains("no push arrived")),
        "{:?}",
        run.warnings
    );
    assert_eq!(
        run.phases
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>(),
        ["setup", "idle", "push", "teardown"]
    );
}

#[test]
fn a_server_out_of_fds_ends_the_setup_with_the_cause_named() {
    if !ready("a_server_out_of_fds_ends_the_setup_with_the_cause_named") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let (out, run, _) = run_lab_with_server(
        "foreign-emfile",
        "9000",
        "--nofile 1000 --on-signal",
        &[
            "--push-trigger",
            "signal:USR1",
            "--push-format",
            "u64le-us",
            "-n",
            "3000",
            "--rate",
            "3000",
            // Far beyond the stall: the phase must end on the stall, not on this.
            "--setup-timeout",
            "300s",
        ],
        Duration::from_secs(150),
    );
    assert_eq!(out.status.code(), Some(2), "degraded: {}", says(&out));

    assert_eq!(run.outcome, Outcome::Degraded);
    let stall = run
        .warnings
        .iter()
        .find(|w| w.starts_with("setup stalled"))
        .unwrap_or_else(|| panic!("no stall named: {:?}", run.warnings));
    for part in [
        "RLIMIT_NOFILE 1000",
        "Too many open files",
        "never accepted",
    ] {
        assert!(stall.contains(part), "{part} in {stall}");
    }
    let setup = &run.phases[0];
    assert_eq!(setup.name, "setup");
    assert!(setup.notes.iter().any(|n| n.starts_with("setup stalled")));
    assert!(
        setup.duration_s < 300.0,
        "ended by the stall, not the timeout"
    );
    // The connections it did hold went on through the phases and got their push.
    let client = run.client.as_ref().expect("client");
    assert!(client.counters.connected < 1000, "{:?}", client.counters);
    let push = client
        .pushes
        .iter()
        .find(|p| p.push_id == 1)
        .expect("push 1");
    assert_eq!(push.count, client.counters.connected);
}

/// Starts the test's own server and waits until it accepts on `port`.
fn start_own_server(opts: &str, port: u16) -> Child {
    let mut child = Command::new("python3")
        .arg(server_py())
        .args(opts.split_whitespace())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 server");
    let until = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "the test server did not listen");
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "the test server exited"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child
}

#[test]
fn target_measures_a_running_server_and_leaves_it_running() {
    if !ready("target_measures_a_running_server_and_leaves_it_running") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let mut server = start_own_server("--ports 9100 --on-signal --format json", 9100);
    let pid = server.id().to_string();
    let (out, run, _) = run_lab(
        "foreign-target",
        &[
            "--target",
            "127.0.0.1:9100",
            "--server-pid",
            &pid,
            "--push-trigger",
            "signal:USR1",
            "--push-format",
            "json:ts",
            "-n",
            "500",
        ],
        Duration::from_secs(90),
    );
    let alive = server.try_wait().expect("try_wait").is_none();
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(out.status.code(), Some(0), "{}", says(&out));
    assert!(alive, "c1m stopped a server it did not start");

    let client = run.client.as_ref().expect("client");
    assert_eq!(client.counters.connected, 500);
    let push = client
        .pushes
        .iter()
        .find(|p| p.push_id == 1)
        .expect("push 1");
    assert_eq!(push.count, 500);
    assert!(run.per_connection.server_user_bytes.is_some());
}

#[test]
fn bad_server_flags_are_one_line_and_start_nothing() {
    let out_dir = fresh_dir("foreign-flags");
    // A port nothing listens on: bound, then closed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let unreachable = format!("127.0.0.1:{closed}");
    let cases: [(&[&str], &str); 10] = [
        (
            &["--server-cmd", "x", "--push-trigger", "webhook"],
            "unknown push trigger",
        ),
        (
            &["--push-stamp", "write"],
            "is for a one-stamp --push-format: c1m's frame carries both",
        ),
        (
            &["--server-cmd", "x", "--push-latency", "send"],
            "broadcast or write",
        ),
        (
            &["--server-cmd", "x", "--push-format", "u32"],
            "unknown push format",
        ),
        (&["--target", unreachable.as_str()], "nothing answers there"),
        (&["--target", "9000"], "HOST:PORTS"),
        (
            &["--server-cmd", "x", "--target", "127.0.0.1:9000"],
            "cannot be used with",
        ),
        (
            &["--server-cmd", "x", "--push-trigger", "control"],
            "needs c1m's own server",
        ),
        (
            &["--push-format", "text-ms"],
            "c1m's own server sends c1m frames",
        ),
        (
            &[
                "--target",
                unreachable.as_str(),
                "--push-trigger",
                "signal:USR1",
            ],
            "needs the server's pid",
        ),
    ];
    for (args, cause) in cases {
        let out = c1m_run(&out_dir, args).output().expect("c1m run");
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.contains(cause),
            "{args:?}: {cause:?} not in {first:?}\n{err}"
        );
        // Bad flags exit 1, as every refused start of `c1m run` (2 is "degraded").
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    }
    assert!(
        lab_util::run_folders(&out_dir).is_empty(),
        "a refused start writes no run folder"
    );
}

#[test]
fn c1m_client_triggers_and_decodes_a_foreign_push() {
    if !ready("c1m_client_triggers_and_decodes_a_foreign_push") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let mut server = start_own_server("--ports 9200 --on-signal --format u64le-us", 9200);
    let stats_dir = fresh_dir("foreign-client");
    let stats = stats_dir.join("client.json");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_c1m"));
    cmd.args([
        "client",
        "--addr",
        "127.0.0.1",
        "--ports",
        "9200",
        "-n",
        "300",
        "--mode",
        "ws",
        "--hold",
        "2s",
        "--push-trigger",
        "signal:USR1",
        "--server-pid",
        &server.id().to_string(),
        "--push-format",
        "u64le-us",
        "--quiet",
        "--stats-json",
    ])
    .arg(&stats);
    let out = bounded(cmd, Duration::from_secs(60));
    let _ = server.kill();
    let _ = server.wait();
    assert!(out.status.success(), "{}", says(&out));
    let snap: c1m::workload::stats::snapshot::AppSnapshot =
        serde_json::from_str(&std::fs::read_to_string(&stats).expect("stats JSON"))
            .expect("a snapshot");
    assert_eq!(snap.counters.pushes_received, 300);
    assert_eq!(snap.counters.push_undecodable, 0);
    let push = snap.pushes.iter().find(|p| p.push_id == 1).expect("push 1");
    assert_eq!(push.count, 300);
    assert_eq!(
        snap.histogram("push_fanout_us").expect("fan-out").len(),
        300
    );
}

#[test]
fn c1m_client_refuses_triggers_it_cannot_fire() {
    for (args, cause) in [
        (&["--push-trigger", "control"][..], "--push-trigger control"),
        (
            &["--push-trigger", "signal:USR1"][..],
            "needs the server's pid",
        ),
        (&["--push-format", "u32"][..], "unknown push format"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_c1m"))
            .args(["client", "--ports", "9", "-n", "1"])
            .args(args)
            .output()
            .expect("c1m client");
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.contains(cause),
            "{args:?}: {cause:?} not in {first:?}"
        );
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    }
}

/// Processes whose command line holds `needle` (this test's own marker), pids.
fn pids_with(needle: &str) -> Vec<u32> {
    c1m::procstat::all_pids()
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| {
                // Arguments are NUL-separated.
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(needle)
            })
        })
        .collect()
}

#[test]
fn a_server_that_daemonizes_is_measured_and_ended_through_its_cgroup() {
    if !ready("a_server_that_daemonizes_is_measured_and_ended_through_its_cgroup") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    // setsid -f: a fork that leaves the session and the process group, its parent gone
    // at once; the process c1m started waits in `sleep`.
    let marker = format!("--ports 9300 --every {}", 1000 + std::process::id() % 1000);
    let cmd = format!(
        "sh -c 'setsid -f python3 {} {marker}; exec sleep 600'",
        server_py().display()
    );
    let (out, run, _) = run_lab(
        "foreign-daemon",
        &[
            "--server-cmd",
            &cmd,
            "--ports",
            "9300",
            "-n",
            "500",
            "--rate",
            "2000",
            "--pushes",
            "0",
        ],
        Duration::from_secs(120),
    );
    let left = pids_with(&marker);
    for &pid in &left {
        // SAFETY: a process of this test's own server command (unique marker).
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    assert_eq!(out.status.code(), Some(0), "{}", says(&out));
    assert!(
        left.is_empty(),
        "the daemonized server outlived the lab: pids {left:?}"
    );
    assert!(
        !c1m::lab::run::foreign::listening_ports().contains(&9300),
        "something still listens on 9300"
    );
    // Measured as the server it is: the daemon holds every connection.
    let idle = &run.phases[1];
    assert_eq!(idle.name, "idle");
    assert!(
        idle.server.open_fds.is_some_and(|n| n >= 500),
        "the daemon's fds: {:?}",
        idle.server
    );
    let server = run.server.as_ref().expect("server");
    assert!(server.split.contains("cgroup"), "{}", server.split);
    assert!(
        run.per_connection
            .server_user_bytes
            .is_some_and(|b| b > 0.0),
        "{:?}",
        run.per_connection
    );
    let setup_cpu = run.phases[0].server.cpu_user_s + run.phases[0].server.cpu_sys_s;
    assert!(
        setup_cpu > 0.0,
        "the daemon's CPU: {:?}",
        run.phases[0].server
    );
}

#[test]
fn a_chatty_servers_logs_keep_head_and_tail_and_say_what_was_cut() {
    if !ready("a_chatty_servers_logs_keep_head_and_tail_and_say_what_was_cut") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let (out, _, dir) = run_lab_with_server(
        "foreign-chatty",
        "9400",
        "--spam 20",
        &["-n", "100", "--pushes", "0"],
        Duration::from_secs(180),
    );
    assert_eq!(out.status.code(), Some(0), "{}", says(&out));
    for (name, stream) in [
        ("server.stdout.log", "stdout"),
        ("server.stderr.log", "stderr"),
    ] {
        let path = dir.join(name);
        let len = std::fs::metadata(&path).expect(name).len();
        assert!(len <= 4 << 20, "{name} is {len} bytes: not capped");
        let text = std::fs::read_to_string(&path).expect(name);
        assert!(
            text.starts_with(&format!("spam {stream} line            0 of")),
            "{name} keeps its head"
        );
        assert!(
            text.contains(&format!("spam {stream} done")),
            "{name} keeps its tail"
        );
        let cut = text
            .lines()
            .find(|l| l.contains("bytes cut"))
            .unwrap_or_else(|| panic!("{name} says nothing of a cut"));
        assert!(cut.starts_with("[c1m: "), "{cut}");
    }
}

#[test]
fn a_server_that_accepts_and_never_answers_is_told_from_one_that_never_accepts() {
    if !ready("a_server_that_accepts_and_never_answers_is_told_from_one_that_never_accepts") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let (out, run, _) = run_lab_with_server(
        "foreign-mute",
        "9500",
        "--mute",
        &["-n", "300", "--rate", "3000", "--pushes", "0"],
        Duration::from_secs(180),
    );
    assert_eq!(out.status.code(), Some(2), "degraded: {}", says(&out));
    let stall = run
        .warnings
        .iter()
        .find(|w| w.starts_with("setup stalled"))
        .unwrap_or_else(|| panic!("no stall named: {:?}", run.warnings));
    assert!(stall.contains("300 accepted, never answered"), "{stall}");
    assert!(!stall.contains("never accepted"), "{stall}");
    assert!(
        stall.contains("the server holds ") && stall.contains(" fds"),
        "its fds are named: {stall}"
    );
}
