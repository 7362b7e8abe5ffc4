//! A many-host run tried as a hostile user would (issue 33, point 4): a server host
//! killed during idle, client folders of another run, counters at u64::MAX, and a
//! `--clock-from` that is nonsense, refused or not c1m. Each must end as what it is
//! (`degraded`, refused, failed), in one line, never as a silent success.

use std::{
    io::{Read, Write},
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command},
    time::{Duration, Instant},
};

use c1m::{model::Outcome, report};

use crate::{
    hostile_inputs::{
        Scratch, c1m, client_folder_at, client_run, refused, server_folder, server_folder_of,
    },
    lab_util::{self, root_or_skip},
    multihost_netns::{c1m_in, fresh_ns, strings, wait, wait_listening},
};

const RUN_A: &str = "00000000000000aa";
const RUN_B: &str = "00000000000000bb";

/// A client host's record of shard `index` of 2, of run `run_id`, complete.
fn client_record(index: u64, run_id: Option<&str>) -> c1m::model::RunRecord {
    let mut run = client_run(index);
    let host = run.host.as_mut().expect("host");
    host.shard_count = Some(2);
    host.label = format!("client-{index}");
    host.run_id = run_id.map(str::to_owned);
    run.warnings.clear();
    run
}

/// [`client_record`] written as the folder `dir/client-<index>`.
fn client_of(dir: &Path, index: u64, run_id: Option<&str>) -> PathBuf {
    client_folder_at(
        dir,
        &format!("client-{index}"),
        &client_record(index, run_id),
    )
}

/// `merge` took client folders of another run ("complete", "4000 connected" for a 2,000
/// run). A folder whose run id is not the server's is refused in one line naming the
/// folder and both ids; folders without ids (before this change) are merged, marked.
#[test]
fn merge_refuses_a_client_folder_of_another_run() {
    let dir = Scratch::new("merge-run-id");
    let srv = server_folder_of(&dir, Some(RUN_A));
    let ours = client_of(&dir, 0, Some(RUN_A));
    let theirs = client_of(&dir, 1, Some(RUN_B));
    let merged = dir.join("merged");
    let ran = c1m(&dir, &[&"merge", &srv, &ours, &theirs, &"--out", &merged]);
    refused(&ran, "merge", &theirs, &format!("of run {RUN_B}"));
    assert!(
        ran.stderr.contains(&format!("is of run {RUN_A}"))
            && ran.stderr.contains(&*srv.display().to_string()),
        "{}",
        ran.stderr
    );
    assert!(!merged.exists(), "a refused merge leaves no folder");

    // Same id: merged, complete.
    let both = client_of(&dir, 1, Some(RUN_A));
    let ran = c1m(&dir, &[&"merge", &srv, &ours, &both, &"--out", &merged]);
    assert_eq!(ran.code, Some(0), "{}{}", ran.stdout, ran.stderr);
    let run = report::load_run(&merged).expect("merged");
    assert!(
        run.warnings.iter().all(|w| !w.contains("unchecked")),
        "{:?}",
        run.warnings
    );

    // A client folder without an id: merged, and the run says it was not checked.
    let old = dir.join("old");
    std::fs::create_dir_all(&old).expect("dir");
    let no_id = client_of(&old, 1, None);
    let out = dir.join("merged-old");
    let ran = c1m(&dir, &[&"merge", &srv, &ours, &no_id, &"--out", &out]);
    assert_eq!(ran.code, Some(0), "{}{}", ran.stdout, ran.stderr);
    let run = report::load_run(&out).expect("merged");
    let unchecked: Vec<&String> = run
        .warnings
        .iter()
        .filter(|w| w.starts_with("unchecked: ") && w.contains(&*no_id.display().to_string()))
        .collect();
    assert_eq!(unchecked.len(), 1, "{:?}", run.warnings);
    assert_eq!(run.outcome, Outcome::Degraded);
    assert!(ran.stdout.contains("degraded"), "{}", ran.stdout);

    // A server folder without an id: one warning for the whole merge.
    let srv_old = server_folder(&old);
    let out = dir.join("merged-old-server");
    let ran = c1m(&dir, &[&"merge", &srv_old, &ours, &both, &"--out", &out]);
    assert_eq!(ran.code, Some(0), "{}{}", ran.stdout, ran.stderr);
    let run = report::load_run(&out).expect("merged");
    let unchecked = run
        .warnings
        .iter()
        .filter(|w| w.starts_with("unchecked: "))
        .count();
    assert_eq!(unchecked, 1, "{:?}", run.warnings);
}

/// `merge` wrapped a u64::MAX counter to 999. Every sum is checked: an overflow is one
/// line naming the folder and the field, and no folder is written.
#[test]
fn merge_refuses_a_sum_that_overflows() {
    let dir = Scratch::new("merge-overflow");
    let srv = server_folder_of(&dir, Some(RUN_A));
    let first = {
        let mut run = client_record(0, Some(RUN_A));
        run.client.as_mut().expect("client").counters.bytes_in = u64::MAX;
        client_folder_at(&dir, "client-0", &run)
    };
    let second = {
        let mut run = client_record(1, Some(RUN_A));
        run.client.as_mut().expect("client").counters.bytes_in = 1_000;
        client_folder_at(&dir, "client-1", &run)
    };
    let merged = dir.join("merged");
    let ran = c1m(&dir, &[&"merge", &srv, &first, &second, &"--out", &merged]);
    refused(&ran, "merge", &second, "counters.bytes_in overflows");
    assert!(!merged.exists(), "a refused merge leaves no folder");

    // A failure kind at u64::MAX with another one: the host's total overflows.
    let third = {
        let mut run = client_record(1, Some(RUN_A));
        let f = &mut run.client.as_mut().expect("client").counters.failures;
        f.refused = u64::MAX;
        f.other = 1;
        client_folder_at(&dir, "client-2", &run)
    };
    let ours = client_of(&dir, 0, Some(RUN_A));
    let ran = c1m(&dir, &[&"merge", &srv, &ours, &third, &"--out", &merged]);
    refused(&ran, "merge", &third, "counters.failures");
    assert!(!merged.exists(), "a refused merge leaves no folder");
}

/// The merged run ends as its worst host, and lists each host's reason.
#[test]
fn a_merged_run_is_as_bad_as_its_worst_host() {
    let dir = Scratch::new("merge-worst");
    let srv = server_folder_of(&dir, Some(RUN_A));
    let ok = client_of(&dir, 0, Some(RUN_A));
    let crashed = {
        let mut run = client_record(1, Some(RUN_A));
        run.outcome = Outcome::Failed;
        run.warnings = vec!["--clock-from 10.0.0.1:7999: connection refused".to_owned()];
        client_folder_at(&dir, "client-1", &run)
    };
    let merged = dir.join("merged");
    let ran = c1m(&dir, &[&"merge", &srv, &ok, &crashed, &"--out", &merged]);
    assert_eq!(ran.code, Some(0), "{}{}", ran.stdout, ran.stderr);
    let run = report::load_run(&merged).expect("merged");
    assert_eq!(run.outcome, Outcome::Failed, "{:?}", run.warnings);
    assert!(
        run.warnings
            .contains(&"client-1: the client host's run ended failed:".to_owned())
            && run
                .warnings
                .contains(&"client-1: --clock-from 10.0.0.1:7999: connection refused".to_owned()),
        "{:?}",
        run.warnings
    );
    assert!(
        ran.stdout.contains("failed") && ran.stdout.contains("connection refused"),
        "{}",
        ran.stdout
    );
}

/// `c1m client` as a client host of 10 connections at `clock_from`, into `dir/name`.
fn client_at(
    dir: &Path,
    name: &str,
    clock_from: &str,
    extra: &[&str],
) -> (crate::hostile_inputs::Ran, PathBuf) {
    let run_dir = dir.join(name);
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![
        &"client",
        &"--shard",
        &"0/1",
        &"-n",
        &"10",
        &"--ports",
        &"26290",
        &"--mode",
        &"ws",
        &"--quiet",
        &"--run-dir",
        &run_dir,
        &"--clock-from",
        &clock_from,
    ];
    for e in extra {
        args.push(e);
    }
    (c1m(dir, &args), run_dir)
}

/// The folder a failed client host wrote: outcome failed, the reason its first warning.
fn failed_with(run_dir: &Path, what: &str) {
    let run = report::load_run(run_dir).expect("the client host's folder");
    assert_eq!(run.outcome, Outcome::Failed, "{:?}", run.warnings);
    assert!(
        run.warnings.first().is_some_and(|w| w.contains(what)),
        "wanted {what:?} in {:?}",
        run.warnings
    );
}

/// One line on stderr, exit 1 (a failed run, as `c1m run`'s).
fn one_line(ran: &crate::hostile_inputs::Ran, what: &str) {
    assert_eq!(ran.code, Some(1), "{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.stderr.lines().count(), 1, "one line: {}", ran.stderr);
    assert!(
        ran.stderr.contains(what),
        "wanted {what:?} in {}",
        ran.stderr
    );
}

/// A listener on loopback that serves `n` connections with `serve`, then stops.
fn peer(n: usize, serve: fn(std::net::TcpStream)) -> (String, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr").to_string();
    let t = std::thread::spawn(move || {
        for s in l.incoming().take(n) {
            match s {
                Ok(s) => serve(s),
                Err(_) => return,
            }
        }
    });
    (addr, t)
}

/// `--clock-from` a silent port, a non-c1m server or `nonsense` retried silently for
/// 120 s and wrote no run folder. Now: `nonsense` is refused at once naming the flag and
/// HOST:PORT; a peer that accepts but is not c1m fails at its first answer; a refused
/// port is waited for, saying so, up to --server-wait. Each is one line, exit 1, and a
/// run folder `failed` with the reason.
#[test]
fn a_wrong_clock_endpoint_fails_in_one_line_and_leaves_a_failed_folder() {
    let dir = Scratch::new("clock-from");
    let (ran, run_dir) = client_at(&dir, "nonsense", "nonsense", &[]);
    one_line(&ran, "--clock-from \"nonsense\": not HOST:PORT");
    failed_with(&run_dir, "not HOST:PORT");

    // A plain TCP server that closes at once.
    let (addr, t) = peer(1, drop);
    let (ran, run_dir) = client_at(&dir, "closes", &addr, &[]);
    one_line(&ran, &format!("{addr} is not c1m's control endpoint"));
    failed_with(&run_dir, "is not c1m's control endpoint");
    t.join().expect("peer");

    // An HTTP server: it answers, but not a time.
    let (addr, t) = peer(1, |mut s| {
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf);
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    });
    let (ran, run_dir) = client_at(&dir, "http", &addr, &[]);
    one_line(&ran, "answered \"HTTP/1.1 400 Bad Request\" to `time`");
    failed_with(&run_dir, "not c1m's control endpoint");
    t.join().expect("peer");

    // Nothing listens: waited for (the server host may be starting), then given up.
    let refused_addr = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").to_string()
    };
    let (ran, run_dir) = client_at(&dir, "refused", &refused_addr, &["--server-wait", "3s"]);
    one_line(
        &ran,
        "did not accept a connection within 3.0 s (--server-wait)",
    );
    assert!(
        ran.stdout.contains(&format!(
            "waiting for the server host's control endpoint ({refused_addr}: Connection refused"
        )),
        "{}",
        ran.stdout
    );
    failed_with(&run_dir, "--server-wait");
}

/// The processes of this test's namespace, dropped (a panic too): killed by pid, then
/// the namespace deleted.
struct Host {
    ns: String,
    children: Vec<Child>,
}

impl Drop for Host {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

/// Every descendant of `pid` (children first found, then theirs), from /proc.
fn descendants(pid: u32) -> Vec<u32> {
    let parent_of = |p: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        let after = stat.rsplit_once(')')?.1;
        after.split_whitespace().nth(1)?.parse().ok()
    };
    let all: Vec<u32> = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(all.iter().filter(|&&c| parent_of(c) == Some(p)));
        i += 1;
    }
    found.remove(0);
    found
}

const PER_HOST: u64 = 1_000;

/// A server host killed (`kill -9`) during idle: both client hosts exited 0 `complete`.
/// No close frame came (a teardown sends one on each): each client host (one per engine)
/// ends `degraded`, exit 2 as a degraded `c1m run`, with the reason on stdout and in its
/// folder, having counted every connection as ended by EOF without a close frame; each
/// recorded the run id the server host answered.
#[test]
fn a_server_host_killed_during_idle_is_a_crash_not_a_teardown() {
    if !root_or_skip("a_server_host_killed_during_idle_is_a_crash_not_a_teardown") {
        return;
    }
    let dir = lab_util::fresh_dir("mh-crash");
    let ns = format!("c1mcrash-{:x}", std::process::id());
    fresh_ns(&ns);
    let mut host = Host {
        ns: ns.clone(),
        children: Vec::new(),
    };
    let runs = dir.join("server-runs");
    let total = (2 * PER_HOST).to_string();
    let server_log = dir.join("server.out");
    let runs_s = runs.to_str().expect("utf-8");
    host.children.push(c1m_in(
        &ns,
        &strings(&[
            "run",
            "--clients",
            "external",
            "--expect",
            &total,
            "--ports",
            "26200-26203",
            "--mode",
            "ws",
            "--idle",
            "300s",
            "--setup-timeout",
            "100s",
            "--plain",
            "--out",
            runs_s,
        ]),
        &server_log,
    ));
    let mut client_dirs = Vec::new();
    for (i, engine) in ["epoll", "tokio"].iter().enumerate() {
        let run_dir = dir.join(format!("client-{i}"));
        let log = dir.join(format!("client-{i}.out"));
        let shard = format!("{i}/2");
        host.children.push(c1m_in(
            &ns,
            &strings(&[
                "client",
                "--shard",
                &shard,
                "-n",
                &total,
                "--ports",
                "26200-26203",
                "--mode",
                "ws",
                "--engine",
                engine,
                "--hold",
                "forever",
                "--rate",
                "2000",
                "--run-dir",
                run_dir.to_str().expect("utf-8"),
                "--clock-from",
                "127.0.0.1:7999",
                "--host-label",
                &format!("client-{i}"),
                "--quiet",
            ]),
            &log,
        ));
        client_dirs.push((run_dir, log));
    }
    // Idle: every connection of both hosts open, as their folders say.
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        let open: Vec<u64> = client_dirs
            .iter()
            .map(|(d, _)| {
                report::load_run(d)
                    .ok()
                    .and_then(|r| r.client)
                    .map(|c| c.counters.open)
                    .unwrap_or(0)
            })
            .collect();
        if open == [PER_HOST, PER_HOST] {
            break;
        }
        assert!(
            Instant::now() < until,
            "not all open within 120 s ({open:?}):\n{}",
            std::fs::read_to_string(&server_log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // The server host dies: the lab and every process under it, by pid.
    let lab = host.children[0].id();
    let tree = descendants(lab);
    for pid in std::iter::once(lab).chain(tree) {
        // SAFETY: kill(2) on a pid this test started (or one its child started).
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    let _ = host.children[0].wait();
    let server_dir = lab_util::run_folder(&runs);
    let server_run = report::load_run(&server_dir).expect("the server host's summary");
    let run_id = server_run
        .host
        .as_ref()
        .and_then(|h| h.run_id.clone())
        .expect("the server host's run id");
    for (i, (run_dir, log)) in client_dirs.iter().enumerate() {
        let code = wait(
            &mut host.children[i + 1],
            Duration::from_secs(120),
            &format!("client {i}"),
            log,
        );
        let out = std::fs::read_to_string(log).unwrap_or_default();
        assert_eq!(code, 2, "client {i} exits as a degraded run:\n{out}");
        eprintln!("client {i}:\n{out}");
        let reason = "the server closed 1,000 connections without a close frame during idle (peer reset 0, EOF 1,000)";
        assert!(
            out.contains(&format!("c1m client: degraded: {reason}")),
            "client {i}:\n{out}"
        );
        let run = report::load_run(run_dir).expect("client folder");
        assert_eq!(run.outcome, Outcome::Degraded, "client {i}");
        assert!(
            run.warnings.iter().any(|w| w.starts_with(reason)),
            "client {i}: {:?}",
            run.warnings
        );
        let c = run.client.as_ref().expect("client side").counters;
        assert_eq!(
            (
                c.connected,
                c.closed.peer_eof,
                c.closed.reset,
                c.closed.peer_closed
            ),
            (PER_HOST, PER_HOST, 0, 0),
            "client {i}"
        );
        assert_eq!(
            run.host.as_ref().and_then(|h| h.run_id.as_deref()),
            Some(run_id.as_str()),
            "client {i} recorded the server host's run"
        );
    }
    // Merged, the run is as bad as its worst host and says why each ended so.
    let merged = dir.join("merged");
    let out = Command::new(env!("CARGO_BIN_EXE_c1m"))
        .arg("merge")
        .arg(&server_dir)
        .args(client_dirs.iter().map(|(d, _)| d))
        .arg("--out")
        .arg(&merged)
        .output()
        .expect("c1m merge");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "merge: {}{}",
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("c1m merge:\n{text}");
    let run = report::load_run(&merged).expect("merged");
    // The server host's lab never wrote its end: the merged run failed, and says so.
    assert_eq!(run.outcome, Outcome::Failed, "{:?}", run.warnings);
    assert!(
        run.warnings
            .iter()
            .any(|w| w.starts_with("the server host's run never ended")),
        "{:?}",
        run.warnings
    );
    for i in 0..2 {
        assert!(
            run.warnings.iter().any(|w| w.starts_with(&format!(
                "client-{i}: the server closed 1,000 connections without a close frame"
            ))),
            "{:?}",
            run.warnings
        );
    }
    drop(host);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A client host that stops reading before the server's teardown (SIGSTOP: its kernel
/// still acknowledges, it never answers the goodbye): the server waits 5 s for an end of
/// stream that never comes, closes those connections unanswered, counts them, and the run
/// is `degraded` (exit 2) with the reason, not `complete` as before (the stall only reached
/// the server's stderr). Every connection is closed and counted once.
#[test]
fn a_client_host_that_stops_reading_at_teardown_degrades_the_run() {
    deaf_at_teardown("epoll", "26210-26213");
}

/// The same with the tokio server, which closed every connection at once at a teardown.
#[test]
fn a_client_host_that_stops_reading_at_teardown_degrades_the_run_tokio() {
    deaf_at_teardown("tokio", "26214-26217");
}

fn deaf_at_teardown(engine: &str, ports: &str) {
    if !root_or_skip(&format!(
        "a_client_host_that_stops_reading_at_teardown ({engine})"
    )) {
        return;
    }
    let dir = lab_util::fresh_dir(&format!("mh-deaf-{engine}"));
    let ns = format!("c1mdeaf{engine}-{:x}", std::process::id());
    fresh_ns(&ns);
    let mut host = Host {
        ns: ns.clone(),
        children: Vec::new(),
    };
    let runs = dir.join("server-runs");
    let total = (2 * PER_HOST).to_string();
    let server_log = dir.join("server.out");
    let runs_s = runs.to_str().expect("utf-8");
    host.children.push(c1m_in(
        &ns,
        &strings(&[
            "run",
            "--clients",
            "external",
            "--expect",
            &total,
            "--ports",
            ports,
            "--server-engine",
            engine,
            "--mode",
            "ws",
            "--idle",
            "5s",
            "--setup-timeout",
            "100s",
            "--plain",
            "--out",
            runs_s,
        ]),
        &server_log,
    ));
    // A client started before every port listens is refused (the run then fails setup).
    let (first, last) = ports.split_once('-').expect("a port range");
    let (first, last): (u16, u16) = (first.parse().expect("port"), last.parse().expect("port"));
    for port in first..=last {
        wait_listening(&ns, &port.to_string(), &server_log);
    }
    for i in 0..2 {
        let log = dir.join(format!("client-{i}.out"));
        let run_dir = dir.join(format!("client-{i}"));
        host.children.push(c1m_in(
            &ns,
            &strings(&[
                "client",
                "--shard",
                &format!("{i}/2"),
                "-n",
                &total,
                "--ports",
                ports,
                "--mode",
                "ws",
                "--hold",
                "forever",
                "--rate",
                "2000",
                "--run-dir",
                run_dir.to_str().expect("utf-8"),
                "--host-label",
                &format!("client-{i}"),
                "--quiet",
            ]),
            &log,
        ));
    }
    // Client 1 stops once both shares are open (the server idles 5 s from then on).
    let logs = || -> String {
        (0..2)
            .map(|i| {
                std::fs::read_to_string(dir.join(format!("client-{i}.out"))).unwrap_or_default()
            })
            .chain([std::fs::read_to_string(&server_log).unwrap_or_default()])
            .collect::<Vec<_>>()
            .join("\n----\n")
    };
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        let open: Vec<u64> = (0..2)
            .map(|i| {
                report::load_run(&dir.join(format!("client-{i}")))
                    .ok()
                    .and_then(|r| r.client)
                    .map_or(0, |c| c.counters.open)
            })
            .collect();
        if open == [PER_HOST, PER_HOST] {
            break;
        }
        assert!(
            Instant::now() < until,
            "not all open within 120 s ({open:?}):\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let deaf = host.children[2].id();
    let stopped: Vec<u32> = std::iter::once(deaf).chain(descendants(deaf)).collect();
    for &pid in &stopped {
        // SAFETY: kill(2) on a pid this test started (or one its child started).
        unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
    }
    let code = wait(
        &mut host.children[0],
        Duration::from_secs(120),
        "the server host",
        &server_log,
    );
    for &pid in &stopped {
        // SAFETY: as above; killed for good by `Host`'s drop.
        unsafe { libc::kill(pid as i32, libc::SIGCONT) };
    }
    assert_eq!(code, 2, "a degraded run:\n{}", logs());
    let run = report::load_run(&lab_util::run_folder(&runs)).expect("the server's folder");
    assert_eq!(run.outcome, Outcome::Degraded, "{:?}", run.warnings);
    let closed = run.server.as_ref().expect("server side").counters.closed;
    assert!(
        (1..=PER_HOST).contains(&closed.goodbye_unanswered),
        "{closed:?}\n{}",
        logs()
    );
    assert_eq!(
        closed.goodbye_unanswered + closed.local_close,
        2 * PER_HOST,
        "{closed:?}"
    );
    let said = format!(
        "server: {} peers did not end their side within 5 s of the teardown's goodbye",
        c1m::fmt::count(closed.goodbye_unanswered)
    );
    assert!(
        run.warnings.iter().any(|w| w.starts_with(&said)),
        "{:?}",
        run.warnings
    );
    drop(host);
    let _ = std::fs::remove_dir_all(&dir);
}
