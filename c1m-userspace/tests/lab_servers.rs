//! `c1m run --servers …`: the same phases against each named server in turn, one run
//! folder each under one comparison folder, and the comparison of `c1m compare` there.
//! Root (CI runs as root): each run test runs in a private network namespace. A
//! reference server not built (`cargo xtask reference-servers`, which `cargo xtask test`
//! runs first) is a loud SKIP.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use c1m::model::{Netns, Outcome, RunRecord};
use c1m::report::load_run;
use c1m::workload::config::EngineKind;
use lab_util::{built, c1m_run, fresh_dir, root_or_skip, run_servers, run_servers_with};

use crate::lab_util;

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
    let (stdout, cmp, _dir) = run_servers(
        "servers-two",
        "python,c1m-epoll",
        "2000",
        &[],
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
    // Without --verbose: the answer alone on stdout (each run's own output in a file
    // beside it), its table first, each pair in words; the detail in compare.txt.
    assert!(
        stdout.starts_with("Comparison of 2 names over 2 runs\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("Key figures"), "{stdout}");
    assert!(
        stdout.contains("python vs c1m-epoll push p99: no call (python has 1 run and c1m-epoll has 1 run, 3 needed; measured: "),
        "{stdout}"
    );
    for name in ["python-1", "c1m-epoll-1"] {
        let log = std::fs::read_to_string(cmp.join(format!("{name}.stdout.log")))
            .unwrap_or_else(|e| panic!("{name}.stdout.log: {e}"));
        assert!(log.contains("connections"), "{name}: {log}");
    }
    let detail = std::fs::read_to_string(cmp.join("compare.txt")).expect("compare.txt");
    let table = &detail[detail.rfind("Key figures").expect("the comparison table")..];
    assert!(
        table.contains("client push_message") && table.contains("c1m-epoll"),
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
    let (_, cmp, _dir) = run_servers(
        "servers-all",
        "python,node,go,netty,c1m-epoll,c1m-tokio",
        "15000",
        &[],
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

/// The run folders of a comparison folder in the order they ran.
fn in_run_order(cmp: &Path) -> Vec<(String, RunRecord)> {
    let mut runs: Vec<(String, RunRecord)> = run_names(cmp)
        .into_iter()
        .map(|n| {
            let r = record(&cmp.join(&n));
            (n, r)
        })
        .collect();
    runs.sort_by_key(|(_, r)| r.started_unix_ms);
    runs
}

/// A runtime's own word on its version: the last whitespace-separated word of
/// `program args…`'s output matching `pick`.
fn reported(program: &str, args: &[&str], pick: impl Fn(&str) -> Option<String>) -> String {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.split_whitespace()
        .find_map(pick)
        .unwrap_or_else(|| panic!("{program} {args:?} said no version: {text}"))
}

/// The sequence, isolated: each run in a namespace of its own starts from nothing
/// (0 sockets, 0 conntrack entries), and the second run of a server holds exactly what
/// the first held (no TIME_WAIT inherited, the kernel's ESTABLISHED exactly n per side
/// through the idle phase). The go runs name Go's and gorilla/websocket's versions as
/// the toolchain and the package manager report them, in summary.json, the run's printed
/// header and the comparison's run list.
#[test]
fn isolated_runs_start_clean_and_repeat_exact_counts() {
    let test = "isolated_runs_start_clean_and_repeat_exact_counts";
    if !root_or_skip(test) || !built(test, "go") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    const N: i64 = 2000;
    let (text, cmp, _dir) = run_servers_with(
        "servers-isolated",
        "c1m-epoll,go",
        "2000",
        // The runs' own headers and the comparison's run list: --verbose prints them.
        &["--repeat", "2", "--idle", "2s", "--verbose"],
        Duration::from_secs(240),
    );
    assert!(
        text.contains("each run in a network namespace of its own (the default as root)"),
        "{text}"
    );
    let runs = in_run_order(&cmp);
    let order: Vec<&str> = runs.iter().map(|(n, _)| n.as_str()).collect();
    // The Williams order for two servers: the second round starts with the other one.
    assert_eq!(order, ["c1m-epoll-1", "go-1", "go-2", "c1m-epoll-2"]);
    for (name, run) in &runs {
        complete_and_every_connection_pushed(name, run, N as u64);
        let start = run.start.as_ref().expect("start state");
        assert_eq!(start.netns, Netns::Fresh, "{name}");
        assert_eq!(start.in_namespace(), 0, "{name}: {start:?}");
        assert_eq!(start.leftovers(), 0, "{name}: {start:?}");
        assert!(!start.dirty(), "{name}");
        assert_eq!(start.conntrack_entries.unwrap_or(0), 0, "{name}: {start:?}");
        assert!(start.mem_available_bytes > 0, "{name}");
        // Every second of the idle phase: exactly the run's own connections.
        let idle: Vec<_> = run.samples.iter().filter(|s| s.phase == "idle").collect();
        assert!(!idle.is_empty(), "{name}: no idle sample");
        for s in idle {
            assert_eq!(
                (
                    s.kernel_server_established,
                    s.kernel_client_established,
                    s.kernel_time_wait
                ),
                (Some(N), Some(N), Some(0)),
                "{name} at {} s",
                s.t_s
            );
        }
        // The same kernel bytes per socket in either round: nothing else was counted.
        let peak = run
            .samples
            .iter()
            .filter_map(|s| s.kernel_socket_bytes)
            .max()
            .expect("kernel socket bytes");
        assert!(peak > 0, "{name}");
    }
    let go = runs
        .iter()
        .find(|(n, _)| n == "go-1")
        .map(|(_, r)| r)
        .expect("go-1");
    let info = go.server_info.as_ref().expect("server info");
    let go_version = reported("go", &["version"], |w| {
        w.strip_prefix("go1.").map(|v| format!("1.{v}"))
    });
    let gorilla = reported(
        "dpkg-query",
        &["-W", "-f=${Version}", "golang-github-gorilla-websocket-dev"],
        |w| w.split('-').next().map(str::to_owned),
    );
    assert_eq!((info.name.as_str(), info.engine), ("go", None), "{info:?}");
    let runtime = info.runtime.as_ref().expect("runtime");
    let library = info.library.as_ref().expect("library");
    assert_eq!(
        (runtime.name.as_str(), runtime.version.as_str()),
        ("go", go_version.as_str())
    );
    assert_eq!(
        (library.name.as_str(), library.version.as_str()),
        ("gorilla/websocket", gorilla.as_str())
    );
    let label = format!("go (go {go_version}, gorilla/websocket {gorilla})");
    assert_eq!(go.server_label(), label);
    let own = runs
        .iter()
        .find(|(n, _)| n == "c1m-epoll-1")
        .map(|(_, r)| r)
        .expect("c1m");
    assert_eq!(
        own.server_label(),
        format!(
            "c1m-epoll (c1m {}, epoll engine)",
            env!("CARGO_PKG_VERSION")
        )
    );
    // The run's own header and the comparison's run list name them; no run is called
    // an "epoll engine" server unless it is one.
    assert!(
        text.contains(&format!(
            "server: {label}; client: c1m client (epoll engine)"
        )),
        "{text}"
    );
    // "Runs, in <folder>", wrapped to the terminal: read with its whitespace collapsed.
    let list = &text[text.rfind("\nRuns").expect("the comparison's run list")..];
    let list = &list[..list.find("Setup differences").expect("end of the run list")];
    let list = list.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(list.matches(&label).count(), 2, "{list}");
    assert_eq!(
        list.matches("started clean: no socket on its ports; a fresh network namespace")
            .count(),
        4,
        "{list}"
    );
    assert!(!list.contains("started dirty"), "{list}");
    let doc = compare_json(&cmp);
    for run in doc["runs"].as_array().expect("runs") {
        assert_eq!(run["started_dirty"], false, "{run}");
        assert_eq!(run["start"]["netns"], "fresh", "{run}");
    }
}

/// Without a namespace of its own and no wait (`--isolation wait --clean-wait 0s`), the
/// second run starts beside the first one's TIME_WAIT sockets: its start records exactly
/// them, and the run's summary, the comparison and compare.json flag it in words.
#[test]
fn a_run_that_starts_beside_an_earlier_runs_sockets_is_flagged_dirty() {
    let test = "a_run_that_starts_beside_an_earlier_runs_sockets_is_flagged_dirty";
    if !root_or_skip(test) {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let (text, cmp, _dir) = run_servers_with(
        "servers-dirty",
        "c1m-epoll,c1m-tokio",
        "2000",
        &[
            "--idle",
            "1s",
            "--isolation",
            "wait",
            "--clean-wait",
            "0s",
            "--verbose",
        ],
        Duration::from_secs(120),
    );
    assert!(text.contains("each run waits until the sockets an earlier run left on its ports are gone (--isolation)"), "{text}");
    let runs = in_run_order(&cmp);
    let [(first, a), (second, b)] = &runs[..] else {
        panic!("two runs: {runs:?}");
    };
    assert_eq!(
        (first.as_str(), second.as_str()),
        ("c1m-epoll-1", "c1m-tokio-1")
    );
    let a_start = a.start.as_ref().expect("start");
    assert_eq!(
        (a_start.netns, a_start.leftovers()),
        (Netns::Inherited, 0),
        "{a_start:?}"
    );
    assert_eq!(a_start.wait_limit_s, Some(0.0));
    // The first run's 2,000 connections each left a closing socket on its ports (a
    // TIME_WAIT on the side that closed first; under load a few close with a reset and
    // leave none): the count the second run recorded is the one every view shows.
    let b_start = b.start.as_ref().expect("start");
    let left = b_start.leftovers();
    assert!((1_900..=4_000).contains(&left), "{b_start:?}");
    let closing = [
        "time_wait",
        "fin_wait1",
        "fin_wait2",
        "closing",
        "last_ack",
        "close_wait",
    ];
    assert!(
        b_start
            .sockets_on_ports
            .keys()
            .all(|s| closing.contains(&s.as_str())),
        "{b_start:?}"
    );
    assert!(b_start.dirty());
    let by_state: Vec<String> = b_start
        .sockets_on_ports
        .iter()
        .map(|(s, n)| format!("{} {s}", c1m::fmt::count(*n)))
        .collect();
    let flagged = format!(
        "started dirty: {} socket(s) of an earlier run on its ports ({})",
        c1m::fmt::count(left),
        by_state.join(", ")
    );
    assert!(
        b_start.describe().starts_with(&flagged),
        "{}",
        b_start.describe()
    );
    assert!(text.contains(&format!("start: {flagged}")), "{text}");
    assert!(
        text.contains("1 of 2 runs started dirty (c1m-tokio-1): their figures include sockets an earlier run left on their ports"),
        "{text}"
    );
    let doc = compare_json(&cmp);
    let dirty: Vec<bool> = doc["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["started_dirty"].as_bool().expect("started_dirty"))
        .collect();
    // compare.json lists the runs by name: c1m-epoll, then c1m-tokio.
    assert_eq!(dirty, [false, true]);
    let csv = std::fs::read_to_string(cmp.join("compare.csv")).expect("compare.csv");
    assert!(
        csv.lines().any(|l| l.starts_with(&format!(
            "Start,sockets an earlier run left on its ports,count,c1m-tokio,1,{left},"
        ))),
        "{csv}"
    );
}

/// A `kill -9` of the sequence leaves nothing running: the run under way (a `c1m run`
/// process of its own, in a namespace of its own) dies with it, and its server and client
/// with the run.
#[test]
fn kill_9_of_the_sequence_ends_the_run_under_way() {
    let test = "kill_9_of_the_sequence_ends_the_run_under_way";
    if !root_or_skip(test) {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let out_dir = fresh_dir("servers-kill9");
    let args = [
        "--servers",
        "c1m-epoll",
        "-n",
        "500",
        "--idle",
        "120s",
        "--tune",
    ];
    let mut sequence = c1m_run(&out_dir, &args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn c1m run");
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let idle = lab_util::run_folders(&out_dir)
            .first()
            .map(|cmp| cmp.join("c1m-epoll-1"))
            .is_some_and(|d| load_run(&d).is_ok_and(|r| !r.phases.is_empty()));
        if idle {
            break;
        }
        assert!(Instant::now() < until, "the setup phase never ended");
        std::thread::sleep(Duration::from_millis(200));
    }
    // The sequence, its run, the run's server and client (and their workers, if any).
    let tree: Vec<(u32, u64)> = c1m::lab::run::foreign::tree(sequence.id())
        .into_iter()
        .filter_map(|p| Some((p, c1m::procstat::start_time(p)?)))
        .collect();
    assert!(tree.len() >= 4, "sequence, run, server, client: {tree:?}");
    sequence.kill().expect("kill -9");
    sequence.wait().expect("reap");
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let alive: Vec<u32> = tree
            .iter()
            .filter(|(p, t)| c1m::procstat::start_time(*p) == Some(*t))
            .map(|(p, _)| *p)
            .collect();
        if alive.is_empty() {
            break;
        }
        assert!(
            Instant::now() < until,
            "still running 10 s after the kill: {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The killed run's --tune record names a namespace that died with it: dropped here,
    // as the message every later run prints says, rather than left to them.
    let restore = std::process::Command::new(env!("CARGO_BIN_EXE_c1m"))
        .args(["doctor", "--restore"])
        .output()
        .expect("c1m doctor --restore");
    assert!(restore.status.success(), "{restore:?}");
}

/// A rebuild beside a sequence (cargo replaces the binary on disk) lost the runs that
/// started after it: each was spawned from "…/c1m (deleted)" and failed with ENOENT.
/// Every run of a sequence is the c1m that started it, whatever happens to its file.
#[test]
fn a_sequence_outlives_its_binary_being_replaced() {
    let test = "a_sequence_outlives_its_binary_being_replaced";
    if !root_or_skip(test) {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let out_dir = fresh_dir("servers-replaced-binary");
    let bin_dir = fresh_dir("servers-replaced-binary-bin");
    let copy = bin_dir.join("c1m");
    std::fs::copy(env!("CARGO_BIN_EXE_c1m"), &copy).expect("copy the binary");
    let cmd = c1m_run(
        &out_dir,
        &[
            "--servers",
            "c1m-epoll,c1m-tokio",
            "-n",
            "300",
            "--idle",
            "1s",
        ],
    );
    let argv: Vec<_> = cmd.get_args().map(ToOwned::to_owned).collect();
    let mut cmd = std::process::Command::new(&copy);
    cmd.args(argv);
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn c1m run");
    let until = Instant::now() + Duration::from_secs(90);
    while !lab_util::run_folders(&out_dir)
        .first()
        .is_some_and(|cmp| load_run(&cmp.join("c1m-epoll-1")).is_ok_and(|r| !r.phases.is_empty()))
    {
        assert!(Instant::now() < until, "the first run's setup never ended");
        std::thread::sleep(Duration::from_millis(100));
    }
    // What a rebuild does: a new file under the old name, the old one unlinked.
    std::fs::remove_file(&copy).expect("remove the binary");
    std::fs::write(&copy, b"#!/bin/sh\nexit 99\n").expect("a different file in its place");
    let out = child.wait_with_output().expect("wait for the sequence");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    let cmp = lab_util::run_folder(&out_dir);
    assert_eq!(run_names(&cmp), ["c1m-epoll-1", "c1m-tokio-1"]);
    for name in ["c1m-epoll-1", "c1m-tokio-1"] {
        complete_and_every_connection_pushed(name, &record(&cmp.join(name)), 300);
    }
}

/// Past one process's fd limit (RLIMIT_NOFILE 20,000 on this box) `--servers` starts a
/// reference server as worker processes (reference-servers/PROTOCOL.md, `workers`) as
/// many as c1m's own server would run: 25,000 WebSockets held and pushed by node's two
/// workers, measured over its process tree and recorded as such. Before, every
/// reference server stopped at 19,880.
#[test]
fn a_reference_server_past_one_process_fd_limit_runs_as_workers() {
    let test = "a_reference_server_past_one_process_fd_limit_runs_as_workers";
    if !root_or_skip(test) || !built(test, "node") {
        return;
    }
    let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .maximum
        .unwrap_or(u64::MAX);
    if hard > 30_000 {
        eprintln!("SKIP {test}: RLIMIT_NOFILE {hard}: one process holds 25,000 here");
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let built_dir = lab_util::reference_servers_dir();
    let out_dir = fresh_dir("servers-workers");
    let mut cmd = c1m_run(
        &out_dir,
        &[
            "--servers",
            "node",
            "-n",
            "25000",
            "--ports",
            "24400-24499",
            "--idle",
            "1s",
            "--tune",
        ],
    );
    // The servers this test checks, wherever CARGO_TARGET_DIR put the binary.
    cmd.env("C1M_REFERENCE_SERVERS", &built_dir);
    let out = lab_util::bounded(cmd, Duration::from_secs(300));
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    let cmp = lab_util::run_folder(&out_dir);
    let run = record(&cmp.join("node-1"));
    complete_and_every_connection_pushed("node", &run, 25_000);
    let info = run.server_info.as_ref().expect("server info");
    assert_eq!(info.workers, Some(2), "{info:?}");
    // The primary and its two workers, each measured.
    assert_eq!(info.shape.map(|s| s.processes), Some(3), "{info:?}");
    assert!(
        run.server_label().ends_with("), 2 worker processes"),
        "{}",
        run.server_label()
    );
    let log = std::fs::read_to_string(cmp.join("node-1.stdout.log")).unwrap_or_default();
    assert!(log.contains(", 2 worker processes"), "{log}");
    let server_cmd = &run.config.command_line;
    assert!(server_cmd.contains("--workers 2"), "{server_cmd}");
    // No warning that a single-process server stops at its fd limit.
    assert!(!text.contains("single-process server"), "{text}");
}
