//! `c1m run --hosts 1+K`: the seeds' topology from one command. c1m makes the bridge,
//! server and client namespaces itself, runs both sides in them, merges the hosts'
//! folders into one run folder and removes everything it made: at the end, and after a
//! `kill -9` of the lab (the next `c1m run --hosts` sweeps what its journal names).

use crate::lab_util;

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    sync::Mutex,
    time::{Duration, Instant},
};

use c1m::{lab::run::journal::Journal, report};
use lab_util::{bounded, fresh_dir, merged_run, printed, root_or_skip, run_folder};

/// The labs of this module one at a time: each makes 4 namespaces and 4,000
/// connections on a 2-core box.
static ONE_LAB: Mutex<()> = Mutex::new(());

fn one_lab() -> std::sync::MutexGuard<'static, ()> {
    ONE_LAB.lock().unwrap_or_else(|e| e.into_inner())
}

/// `c1m run --hosts … --out DIR/runs`, not started yet.
fn hosts_run(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_c1m"));
    cmd.arg("run")
        .args(args)
        .arg("--out")
        .arg(dir.join("runs"))
        .stdin(Stdio::null());
    cmd
}

fn journal_of(folder: &Path) -> Journal {
    let text = std::fs::read_to_string(folder.join("journal.json")).expect("journal.json");
    serde_json::from_str(&text).expect("a journal")
}

/// Names under `ip netns list` and `ip -o link` (the box's own namespace) that start
/// with `prefix`.
fn made_with(prefix: &str) -> Vec<String> {
    let list = |args: &[&str]| {
        let out = Command::new("ip").args(args).output().expect("ip");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let netns = list(&["netns", "list"]);
    let links = list(&["-o", "link"]);
    netns
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .chain(
            links
                .lines()
                .filter_map(|l| l.split(':').nth(1).map(str::trim)),
        )
        .filter(|n| n.starts_with(prefix))
        .map(str::to_owned)
        .collect()
}

/// The one-command lab of the test below: 1+2 hosts, two clients each, 4,000
/// connections.
const ONE_COMMAND: [&str; 12] = [
    "--hosts",
    "1+2",
    "--clients-per-host",
    "2",
    "-n",
    "4000",
    "--mode",
    "ws",
    "--idle",
    "3s",
    "--ports",
    "8000-8003",
];

/// What `c1m run ONE_COMMAND --out dir/runs` must have done: exit 0, its four
/// namespaces and seven links made and removed, its children gone, the merge exact, a
/// row per host.
fn one_command_made_merged_and_removed(dir: &Path, out: &Output) {
    let (folder, run) = merged_run(out, &dir.join("runs"));
    let journal = journal_of(&folder);
    let prefix = format!("c1mh{}-", journal.lab.pid);
    // Bridge, server, two clients; a veth pair per host and the bridge.
    assert_eq!(journal.namespaces.len(), 4, "{:?}", journal.namespaces);
    assert_eq!(journal.links.len(), 7, "{:?}", journal.links);
    assert!(journal.namespaces.iter().all(|n| n.starts_with(&prefix)));
    assert_eq!(made_with(&prefix), Vec::<String>::new(), "left behind");
    // Its children are gone with it.
    assert_eq!(journal.children.len(), 3, "{:?}", journal.children);
    assert!(journal.children.iter().all(|c| !c.proc.alive()));

    // The merged folder is the run's; each host's own is kept inside it.
    let client = run.client.as_ref().expect("merged client side");
    assert_eq!(client.counters.connected, 4000);
    let mh = run.multihost.as_ref().expect("per-host breakdown");
    let labels: Vec<&str> = mh.hosts.iter().map(|h| h.label.as_str()).collect();
    assert_eq!(labels, ["host-0", "host-1"]);
    for h in &mh.hosts {
        assert_eq!((h.connected, h.failures), (2000, 0), "{}", h.label);
        assert_eq!(h.kernel_client_established, Some(2000), "{}", h.label);
        let own = report::load_run(&folder.join("hosts").join(&h.label)).expect("host folder");
        assert_eq!(own.client.expect("client").counters.connected, 2000);
    }
    let idle = run.phases.iter().find(|p| p.name == "idle").expect("idle");
    let open = lab_util::kernel_vs_app(idle, "server open");
    assert_eq!((open.kernel, open.app), (Some(4000), Some(4000)));
    let server = report::load_run(&folder.join("hosts").join("server")).expect("server folder");
    // The server started the teardown and ended every connection on its peer's end of
    // the stream (RFC 6455 §7.1.1): no client's close reply met a closed socket, which
    // answers from TIME_WAIT with a reset (4,016 of 4,000 when it closed at once).
    let kernel = server.kernel.as_ref().expect("server host's kernel view");
    assert_eq!(
        kernel
            .server
            .resets_sent_by_reason
            .get("TCP_TIMEWAIT_SOCKET"),
        None,
        "{:?}",
        kernel.server.resets_sent_by_reason
    );
    let counters = &server.server.as_ref().expect("server").counters;
    assert_eq!(counters.accepted, 4000);
    assert_eq!(counters.closed.local_close, 4000, "{:?}", counters.closed);

    // The summary ends with a row per host: the server's kernel = app, each client
    // host's 2,000 on its own addresses.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let table: Vec<&str> = stdout
        .lines()
        .skip_while(|l| *l != "Per host:")
        .take(5)
        .collect();
    assert_eq!(table.len(), 5, "{stdout}");
    let cells = |l: &str| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
        cells(table[2])[..6],
        [
            "server".to_owned(),
            format!("{prefix}srv"),
            "10.99.0.1".into(),
            "4,000".into(),
            "n/a".into(),
            "4,000".into()
        ]
    );
    for (i, row) in table[3..].iter().enumerate() {
        let c = cells(row);
        assert_eq!(
            c[..2],
            [format!("host-{i}"), format!("{prefix}c{i}")],
            "{row}"
        );
        assert_eq!(c[2], format!("10.99.{}.1", i + 1), "{row}");
        assert_eq!(c[3..8], ["2,000", "0", "2,000", "=", "2,000"], "{row}");
    }
    // What each host cost: every host's CPU, peak RSS and memory per connection.
    let cost: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("What each host cost"))
        .skip(2)
        .take(3)
        .collect();
    assert_eq!(cost.len(), 3, "{stdout}");
    for (row, label) in cost.iter().zip(["server", "host-0", "host-1"]) {
        assert!(row.trim_start().starts_with(label), "{row}");
        assert!(!row.contains("n/a"), "{row}");
    }
    // The client hosts' CPU is in the merged phases; the last phase ends when the last
    // host closed, so its client row is every host's end: none open, in both counts.
    let setup = run
        .phases
        .iter()
        .find(|p| p.name == "setup")
        .expect("setup");
    assert!(
        setup.client.cpu_user_s + setup.client.cpu_sys_s > 0.0,
        "{setup:?}"
    );
    assert!(setup.client.rss_bytes > 0, "{setup:?}");
    let last = run.phases.last().expect("phases");
    let open = lab_util::kernel_vs_app(last, "client open (client hosts, summed)");
    assert_eq!((open.kernel, open.app), (Some(0), Some(0)), "{last:?}");
    assert!(run.per_connection.client_user_bytes.is_some());
}

/// Waits (at most 120 s) until `lab`'s server host is idle (every connection held,
/// every host alive) and returns its run folder under `dir/runs`.
fn until_idle(lab: &mut Child, dir: &Path) -> PathBuf {
    let up = Instant::now();
    loop {
        let log = lab_util::run_folders(&dir.join("runs"))
            .into_iter()
            .next()
            .map(|f| (std::fs::read_to_string(f.join("hosts/server.log")), f));
        if let Some((Ok(text), f)) = log
            && text.contains("phase=idle")
        {
            return f;
        }
        if up.elapsed() > Duration::from_secs(120) || matches!(lab.try_wait(), Ok(Some(_))) {
            let _ = lab.kill();
            panic!("the hosts did not reach idle within 120 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The pids of a journal's children still running as the same processes.
fn alive(journal: &Journal) -> Vec<u32> {
    journal
        .children
        .iter()
        .filter(|c| c.proc.alive())
        .map(|c| c.proc.pid)
        .collect()
}

#[test]
fn the_next_run_removes_what_a_killed_one_left() {
    if !root_or_skip("the_next_run_removes_what_a_killed_one_left") {
        return;
    }
    let _one = one_lab();
    let dir = fresh_dir("hosts-kill");
    let mut lab = hosts_run(
        &dir,
        &[
            "--hosts",
            "1+2",
            "-n",
            "4000",
            "--idle",
            "5m",
            "--ports",
            "8000-8003",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("start c1m run --hosts");
    let folder = until_idle(&mut lab, &dir);
    lab.kill().expect("kill -9 the lab");
    lab.wait().expect("reap the lab");
    let journal = journal_of(&folder);
    let prefix = format!("c1mh{}-", journal.lab.pid);
    assert_eq!(journal.children.len(), 3, "{:?}", journal.children);
    let left = made_with(&prefix);
    assert_eq!(left.len(), 4, "the killed lab's namespaces: {left:?}");

    // The next run sweeps them before it makes its own, and removes its own too.
    let next = bounded(
        hosts_run(
            &dir.join("next"),
            &[
                "--hosts", "1+1", "-n", "10", "--idle", "0s", "--ports", "8000",
            ],
        ),
        Duration::from_secs(180),
    );
    assert_eq!(next.status.code(), Some(0), "{}", printed(&next));
    let stderr = String::from_utf8_lossy(&next.stderr);
    assert!(
        stderr.contains(&format!(
            "swept the hosts of killed lab pid {}",
            journal.lab.pid
        )),
        "{}",
        printed(&next)
    );
    assert_eq!(
        made_with(&prefix),
        Vec::<String>::new(),
        "{}",
        printed(&next)
    );
    assert_eq!(alive(&journal), Vec::<u32>::new());
    // The server host was a lab itself: no journal of it is left behind either.
    for c in &journal.children {
        let left = Path::new("/run/c1m/labs").join(format!("{}.json", c.proc.pid));
        assert!(
            !left.exists(),
            "{} left: {}",
            left.display(),
            printed(&next)
        );
    }
    let again = journal_of(&run_folder(&dir.join("next").join("runs")));
    assert_eq!(
        made_with(&format!("c1mh{}-", again.lab.pid)),
        Vec::<String>::new()
    );
}

#[test]
fn bad_shapes_are_one_line_errors() {
    let dir = fresh_dir("hosts-bad");
    for (args, says) in [
        (&["--hosts", "2+2"][..], "one server host only"),
        (&["--hosts", "1+0"], "needs 1 to 16 client hosts"),
        (&["--hosts", "1+17"], "needs 1 to 16 client hosts"),
        (
            &["--hosts", "1+2", "--clients", "external"],
            "drop --clients external",
        ),
        // --servers ran its sequence on this box and dropped --hosts without a word.
        (
            &["--hosts", "1+2", "--servers", "c1m-epoll,go"],
            "drop --servers or --hosts",
        ),
        // clap names the missing --hosts on its next line.
        (
            &["--clients-per-host", "2"],
            "required arguments were not provided",
        ),
        // More clients than a host has connections, or none.
        (
            &["--hosts", "1+2", "-n", "4000", "--clients-per-host", "0"],
            "give 1 to 2,000",
        ),
        (
            &[
                "--hosts",
                "1+2",
                "-n",
                "4000",
                "--clients-per-host",
                "18446744073709551615",
            ],
            "give 1 to 2,000",
        ),
        // Without --hosts, --clients external still needs its count, in one line.
        (&["--clients", "external"], "add --expect COUNT"),
    ] {
        let out = bounded(hosts_run(&dir, args), Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        let first = stderr.lines().next().unwrap_or_default();
        assert_ne!(out.status.code(), Some(0), "{args:?}: {}", printed(&out));
        assert!(first.contains(says), "{args:?}: {}", printed(&out));
        // clap adds a usage hint under its own errors; c1m's are one line.
        if !first.starts_with("error:") {
            assert_eq!(stderr.lines().count(), 1, "{args:?}: {}", printed(&out));
        }
        assert!(out.stdout.is_empty(), "{args:?}: {}", printed(&out));
    }
    assert!(lab_util::run_folders(&dir.join("runs")).is_empty());
}

#[test]
fn a_user_who_is_not_root_is_told_in_one_line() {
    if !root_or_skip("a_user_who_is_not_root_is_told_in_one_line") {
        return;
    }
    // As nobody, through util-linux's setpriv (root's tests, so it can drop to them).
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_c1m"))
        .args(["run", "--hosts", "1+2", "--out", "/nonexistent/c1m-runs"])
        .stdin(Stdio::null());
    let out = bounded(cmd, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", printed(&out));
    assert_eq!(
        stderr.trim_end(),
        "c1m: --hosts makes network namespaces, which needs root: run it as root (sudo c1m run --hosts 1+2 …)",
        "{}",
        printed(&out)
    );
}

/// Waits (at most 60 s) until `ip netns list` holds every one of `names` at once.
fn until_made(names: &[String], lab: &mut Child) {
    let up = Instant::now();
    loop {
        let now = made_with("c1mh");
        if names.iter().all(|n| now.contains(n)) {
            return;
        }
        if up.elapsed() > Duration::from_secs(60) || matches!(lab.try_wait(), Ok(Some(_))) {
            panic!("not all of {names:?} at once; there: {now:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A small lab: one client host, 1,000 connections.
fn small_lab(dir: &Path, idle: &str) -> Child {
    hosts_run(
        dir,
        &[
            "--hosts", "1+1", "-n", "1000", "--idle", idle, "--ports", "8000",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("start c1m run --hosts")
}

/// `c1m run --hosts` from one command, and a second, smaller one beside it, each into
/// its own folder: the same addresses (10.99.x) in other namespaces, each lab's
/// namespaces named by its own pid, and the second's sweep runs while the first's
/// namespaces are live (a running lab is not a leftover). Both complete with exact
/// counts; nothing of either is left. (One test: the one-command lab is the first of
/// the two, so its setup is not made twice.)
#[test]
fn one_command_makes_the_hosts_and_two_at_once_keep_to_their_own() {
    if !root_or_skip("one_command_makes_the_hosts_and_two_at_once_keep_to_their_own") {
        return;
    }
    let _one = one_lab();
    let dir = fresh_dir("hosts-two");
    let mut first = hosts_run(&dir.join("a"), &ONE_COMMAND)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start c1m run --hosts");
    let ns = |pid: u32, names: &[&str]| -> Vec<String> {
        names.iter().map(|n| format!("c1mh{pid}-{n}")).collect()
    };
    let a = ns(first.id(), &["br", "srv", "c0", "c1"]);
    until_made(&a, &mut first);
    // The second starts (and sweeps) beside the first's live namespaces; both sets are
    // then seen at once, so the first's lived through the second's sweep.
    let mut second = small_lab(&dir.join("b"), "1s");
    let b = ns(second.id(), &["br", "srv", "c0"]);
    let both: Vec<String> = a.iter().chain(&b).cloned().collect();
    until_made(&both, &mut second);

    let pids = [first.id(), second.id()];
    let outs = [
        lab_util::wait_bounded(first, Duration::from_secs(240), "the first --hosts run"),
        lab_util::wait_bounded(second, Duration::from_secs(240), "the second --hosts run"),
    ];
    one_command_made_merged_and_removed(&dir.join("a"), &outs[0]);
    for (i, (out, name)) in outs.iter().zip(["a", "b"]).enumerate() {
        let (me, other) = (pids[i], pids[1 - i]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", printed(out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains(&format!("killed lab pid {other}")),
            "{name} swept the other run: {}",
            printed(out)
        );
        let journal = journal_of(&run_folder(&dir.join(name).join("runs")));
        assert_eq!(journal.lab.pid, me);
        assert_eq!(journal.namespaces, [&a, &b][i][..], "{name}");
        let prefix = format!("c1mh{me}-");
        assert!(
            journal.links.iter().all(|l| l.starts_with(&prefix)),
            "{name}"
        );
        assert_eq!(made_with(&prefix), Vec::<String>::new(), "{name} left");
        assert_eq!(alive(&journal), Vec::<u32>::new(), "{name}");
        for pid in std::iter::once(me).chain(journal.children.iter().map(|c| c.proc.pid)) {
            let left = Path::new("/run/c1m/labs").join(format!("{pid}.json"));
            assert!(!left.exists(), "{name}: {} left", left.display());
        }
    }
    // The second, small one: exact on its own.
    let folder = run_folder(&dir.join("b/runs"));
    assert_eq!(journal_of(&folder).children.len(), 2);
    let run = report::load_run(&folder).expect("merged summary");
    let client = run.client.as_ref().expect("merged client side");
    assert_eq!(client.counters.connected, 1000);
    let mh = run.multihost.as_ref().expect("per-host breakdown");
    assert_eq!(mh.hosts.len(), 1);
    let h = &mh.hosts[0];
    assert_eq!((h.connected, h.failures), (1000, 0));
    assert_eq!(h.kernel_client_established, Some(1000));
    let server = report::load_run(&folder.join("hosts/server")).expect("server folder");
    assert_eq!(server.server.expect("server").counters.accepted, 1000);
}

/// `kill -9` of `c1m run --hosts` mid-idle, then `c1m doctor --restore` (no new run):
/// it names the lab, removes its namespaces in words, ends only the journal's own host
/// processes (or lets them conclude), sweeps the server host's own journal with it, and
/// a second restore finds nothing of it.
#[test]
fn doctor_restore_sweeps_a_killed_hosts_lab() {
    if !root_or_skip("doctor_restore_sweeps_a_killed_hosts_lab") {
        return;
    }
    let _one = one_lab();
    let dir = fresh_dir("hosts-doctor");
    let mut lab = small_lab(&dir, "5m");
    let folder = until_idle(&mut lab, &dir);
    let journal = journal_of(&folder);
    let pid = journal.lab.pid;
    assert_eq!(alive(&journal).len(), 2, "{:?}", journal.children);
    lab.kill().expect("kill -9 the lab");
    lab.wait().expect("reap the lab");
    let prefix = format!("c1mh{pid}-");
    assert_eq!(made_with(&prefix).len(), 3, "the killed lab's namespaces");

    let doctor = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_c1m"));
        cmd.args(["doctor", "--restore"]).stdin(Stdio::null());
        bounded(cmd, Duration::from_secs(120))
    };
    let out = doctor();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", printed(&out));
    assert!(
        stdout.lines().any(|l| l.starts_with(&format!(
            "lab pid {pid} (run folder {}) ended without cleaning up",
            folder.display()
        )) && l.contains(&format!(
            "network namespaces it made: {}",
            journal.namespaces.join(", ")
        ))),
        "{}",
        printed(&out)
    );
    for n in &journal.namespaces {
        assert!(
            stdout
                .lines()
                .any(|l| l == format!("removed network namespace {n}")),
            "{n}: {}",
            printed(&out)
        );
    }
    // Only the journal's own hosts are ended, each by its checked pid.
    let children: Vec<u32> = journal.children.iter().map(|c| c.proc.pid).collect();
    for l in stdout
        .lines()
        .filter(|l| l.contains(&format!("(of {})", folder.display())))
    {
        let ended = l
            .strip_prefix("ended ")
            .and_then(|r| r.split(" pid ").nth(1))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|p| p.parse::<u32>().ok());
        assert!(
            ended.is_some_and(|p| children.contains(&p)),
            "{l}: {}",
            printed(&out)
        );
    }
    assert_eq!(
        made_with(&prefix),
        Vec::<String>::new(),
        "{}",
        printed(&out)
    );
    assert_eq!(alive(&journal), Vec::<u32>::new(), "{}", printed(&out));
    for p in std::iter::once(pid).chain(children.iter().copied()) {
        let left = Path::new("/run/c1m/labs").join(format!("{p}.json"));
        assert!(!left.exists(), "{} left: {}", left.display(), printed(&out));
    }

    let again = doctor();
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert_eq!(again.status.code(), Some(0), "{}", printed(&again));
    for p in std::iter::once(pid).chain(children.iter().copied()) {
        assert!(
            !stdout.contains(&format!("pid {p} ")),
            "found again: {}",
            printed(&again)
        );
    }
    assert!(!stdout.contains(&prefix), "{}", printed(&again));
}

/// A `--hosts 1+2` run of 4,000 connections whose 15 s idle the live lines (every 5 s,
/// read from folders rewritten every 5 s) must cover: its folder and stdout, once it
/// exited 0.
fn live_run(name: &str, extra: &[&str]) -> (lab_util::TempDir, String) {
    let dir = fresh_dir(name);
    let out = bounded(
        hosts_run(
            &dir,
            &[
                &[
                    "--hosts",
                    "1+2",
                    "-n",
                    "4000",
                    "--mode",
                    "ws",
                    "--idle",
                    "15s",
                    "--ports",
                    "8000-8003",
                ],
                extra,
            ]
            .concat(),
        ),
        Duration::from_secs(240),
    );
    assert_eq!(out.status.code(), Some(0), "{}", printed(&out));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (dir, stdout)
}

/// While the hosts run, `--hosts` shows each client host live, every 5 s, read from the
/// folder the host rewrites every 5 s: an idle of 15 s must show each host's whole
/// share, its kernel equal to its app, before the host ends. The server host's own
/// lines claim no client figure: its clients are on other hosts.
#[test]
fn each_client_host_shows_live_with_its_kernel_and_the_server_host_claims_no_client_figure() {
    if !root_or_skip(
        "each_client_host_shows_live_with_its_kernel_and_the_server_host_claims_no_client_figure",
    ) {
        return;
    }
    let _one = one_lab();
    let (dir, stdout) = live_run("hosts-live", &[]);
    let summary_at = stdout.find("== c1m run:").expect("the merged summary");
    for host in ["host-0", "host-1"] {
        let prefix = format!("  {host:<11} | ");
        let lines: Vec<&str> = stdout[..summary_at]
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .collect();
        // The last line is the host's end, the only one that says so.
        let (last, live) = lines.split_last().expect("lines of the host");
        assert!(
            last.starts_with(&format!("{prefix}ended complete · ")),
            "{stdout}"
        );
        assert!(live.iter().all(|l| !l.contains("ended")), "{stdout}");
        // Before it ended: its whole share connected and open, kernel = app.
        let full = live.iter().find(|l| {
            l.contains("· connected 2,000 of 2,000 · open 2,000 · kernel")
                && l.contains(" 2,000 = app 2,000 (")
        });
        assert!(
            full.is_some(),
            "no live line of {host} at its share:\n{stdout}"
        );
        assert!(live.iter().all(|l| !l.contains("kernel 0 ")), "{stdout}");
    }
    // The server host's per-second lines (kept in its log): no client figure of its own.
    let folder = run_folder(&dir.join("runs"));
    let log = std::fs::read_to_string(folder.join("hosts").join("server.log")).expect("log");
    let seconds: Vec<&str> = log.lines().filter(|l| l.starts_with("t_s=")).collect();
    assert!(seconds.len() >= 15, "{log}");
    for key in [
        "client_app_open",
        "client_kernel_established",
        "client_kernel_syn_sent",
        "client_transitions_per_s",
    ] {
        let na = format!(" {key}=n/a ");
        assert!(seconds.iter().all(|l| l.contains(&na)), "{key}: {log}");
    }
    let server = report::load_run(&folder.join("hosts").join("server")).expect("server folder");
    assert!(
        server
            .samples
            .iter()
            .all(|s| s.kernel_client_established.is_none() && s.kernel_client_syn_sent.is_none()),
        "the server host's samples hold a client kernel figure"
    );
    assert!(server.samples.iter().any(|s| s.kernel_time_wait.is_some()));
}

/// `--json`: each client host's live line is a JSON object with its figures, and the
/// server host's per-second objects name their host and hold no client kernel figure.
#[test]
fn with_json_every_host_is_a_json_line_that_names_it() {
    if !root_or_skip("with_json_every_host_is_a_json_line_that_names_it") {
        return;
    }
    let _one = one_lab();
    let (_, stdout) = live_run("hosts-live-json", &["--json"]);
    let objects: Vec<serde_json::Value> = stdout
        .lines()
        .take_while(|l| !l.starts_with("== c1m run:"))
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let of = |host: &str| -> Vec<&serde_json::Value> {
        objects.iter().filter(|o| o["host"] == host).collect()
    };
    let server = of("server");
    assert!(server.len() >= 15, "{stdout}");
    assert!(
        server
            .iter()
            .all(|o| o["figures"]["client"]["kernel_established"].is_null()),
        "{stdout}"
    );
    for host in ["host-0", "host-1"] {
        let lines = of(host);
        let full = lines.iter().find(|o| {
            o["ended"] == false
                && o["share"] == 2000
                && o["connected"] == 2000
                && o["open"] == 2000
                && o["kernel"]["kernel"] == 2000
                && o["kernel"]["agree"] == true
        });
        assert!(
            full.is_some(),
            "no live object of {host} at its share:\n{stdout}"
        );
        let ended: Vec<_> = lines.iter().filter(|o| o["ended"] == true).collect();
        assert_eq!(ended.len(), 1, "{stdout}");
        assert_eq!(ended[0]["outcome"], "complete");
    }
}

/// `--hosts --tls`: the client hosts trust the run's self-signed certificate (the
/// server host's tls-cert.pem) and verify the server host's address, which it names.
/// The server on the epoll engine, the client hosts on tokio: one run covers both.
#[test]
fn tls_reaches_the_client_hosts_and_every_handshake_is_counted_on_both_sides() {
    if !root_or_skip("tls_reaches_the_client_hosts_and_every_handshake_is_counted_on_both_sides") {
        return;
    }
    let _one = one_lab();
    let dir = fresh_dir("hosts-tls");
    let out = bounded(
        hosts_run(
            &dir,
            &[
                "--hosts",
                "1+2",
                "--tls",
                "--engine",
                "tokio",
                "--server-engine",
                "epoll",
                "-n",
                "2000",
                "--mode",
                "ws",
                "--idle",
                "1s",
                "--ports",
                "23446-23449",
            ],
        ),
        Duration::from_secs(240),
    );
    let (folder, run) = merged_run(&out, &dir.join("runs"));
    let c = run.client.expect("merged client side").counters;
    assert_eq!(
        (c.connected, c.tls_handshakes.full, c.tls_errors.total()),
        (2000, 2000, 0),
        "{}",
        printed(&out)
    );
    let server = report::load_run(&folder.join("hosts").join("server")).expect("server folder");
    let s = server.server.expect("server").counters;
    assert_eq!(
        (s.accepted, s.tls_handshakes.full, s.tls_errors.total()),
        (2000, 2000, 0)
    );
    assert!(folder.join("hosts/server/tls-cert.pem").is_file());
}

/// The box's `nf_conntrack_max`, lowered for one test and put back when it ends (a
/// panic included). On 6.18 it is writable only from the box's own namespace, one
/// limit each namespace's table is held to; nothing of the box's own tracks here
/// (its `nf_conntrack_count` is 0), so only the test's client host meets it. The old
/// value is written down first (root's /run, which no other user can write), so a
/// test killed with -9 has it put back by the next one.
struct ConntrackMax(String);

const CONNTRACK_MAX: &str = "/proc/sys/net/netfilter/nf_conntrack_max";
const CONNTRACK_MAX_RECORD: &str = "/run/c1m-test-nf_conntrack_max";

impl ConntrackMax {
    fn set(v: u64) -> Option<ConntrackMax> {
        if let Ok(left) = std::fs::read_to_string(CONNTRACK_MAX_RECORD) {
            // An earlier run was killed before its guard could restore.
            std::fs::write(CONNTRACK_MAX, left.trim()).ok()?;
        }
        let old = std::fs::read_to_string(CONNTRACK_MAX).ok()?;
        std::fs::write(CONNTRACK_MAX_RECORD, old.trim()).ok()?;
        std::fs::write(CONNTRACK_MAX, v.to_string()).ok()?;
        Some(ConntrackMax(old.trim().to_owned()))
    }
}

impl Drop for ConntrackMax {
    fn drop(&mut self) {
        match std::fs::write(CONNTRACK_MAX, &self.0) {
            Ok(()) => {
                let _ = std::fs::remove_file(CONNTRACK_MAX_RECORD);
            }
            Err(e) => eprintln!("could not restore {CONNTRACK_MAX} = {}: {e}", self.0),
        }
    }
}

/// Issue 36: a client host whose conntrack table is too small. `--conntrack` makes the
/// client host's namespace track its connections; with the table held to 500 entries,
/// the connects past it lose their SYN to the table (a connect timeout under the first
/// retransmit, 1 s, sends one SYN): the kernel's `drop` counter over the ramp equals the
/// client's failed connects exactly, the live lines and the per-host summary name the
/// full table, and summary.json carries the host's path.
#[test]
fn a_full_conntrack_table_is_named_as_the_cause_of_the_failed_connects() {
    if !root_or_skip("a_full_conntrack_table_is_named_as_the_cause_of_the_failed_connects") {
        return;
    }
    if std::fs::metadata("/proc/net/stat/nf_conntrack").is_err() {
        eprintln!("SKIP: no conntrack in this kernel");
        return;
    }
    let _one = one_lab();
    let dir = fresh_dir("hosts-conntrack");
    let out = {
        let _max = ConntrackMax::set(500).expect("lowering nf_conntrack_max");
        bounded(
            hosts_run(
                &dir,
                &[
                    "--hosts",
                    "1+1",
                    "--conntrack",
                    // The table is too small on purpose: the preflight would stop the run.
                    "--force",
                    "-n",
                    "1000",
                    "--rate",
                    "500",
                    "--connect-timeout",
                    "500ms",
                    "--setup-timeout",
                    "12s",
                    "--idle",
                    "1s",
                    "--ports",
                    "25300",
                ],
            ),
            Duration::from_secs(180),
        )
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let folder = run_folder(&dir.join("runs"));
    let host = report::load_run(&folder.join("hosts").join("host-0")).expect("host folder");
    let client = host.client.as_ref().expect("client snapshot");
    let failures = client.counters.failures.total();
    assert!(failures > 400, "{failures} failures\n{}", printed(&out));
    eprintln!("{}", printed(&out));
    assert_eq!(
        client.counters.connected + failures,
        1000,
        "{}",
        printed(&out)
    );
    // Over the ramp and the hold nothing but the share's connects met the table.
    let hold = host
        .phases
        .iter()
        .find(|p| p.name == "hold")
        .expect("a hold phase");
    let path = hold.path.as_ref().expect("the hold's path");
    let ct = path.conntrack.expect("conntrack counters");
    assert_eq!(ct.drop, failures, "{path:?}\n{}", printed(&out));
    assert_eq!((ct.insert_failed, ct.early_drop), (0, 0), "{path:?}");
    // Full when the connects came; a closed control connection's entry may have
    // expired since (10 s after a reset), so the hold's end may read 499.
    let entries = path.conntrack_entries.unwrap_or(0);
    assert!((490..=500).contains(&entries), "{path:?}");
    assert_eq!(path.conntrack_max, Some(500), "{path:?}");
    let dropped = format!(
        "{n} connects dropped (insert_failed 0, drop {n}, early_drop 0)",
        n = c1m::fmt::count(failures)
    );
    let words = path.conntrack_text();
    assert!(
        words.starts_with("conntrack table ") && words.contains(&dropped),
        "{words}"
    );
    // The host's summary.json keeps its path, and the merge's row carries it.
    let info = host.host.as_ref().expect("host info");
    assert!(info.path_start.is_some() && info.path_last.is_some());
    let merged = report::load_run(&folder).expect("merged summary");
    let row = &merged.multihost.as_ref().expect("per-host breakdown").hosts[0];
    let drops = row.path.as_ref().and_then(|p| p.conntrack).map(|c| c.drop);
    // The end's clock measurement may lose SYNs to the table too: never fewer.
    assert!(drops.is_some_and(|d| d >= failures), "{row:?}");
    // In words: live, and under the merged summary.
    assert!(
        stdout.lines().any(|l| l.contains("host-0")
            && l.contains("conntrack table ")
            && l.contains(" connects dropped (insert_failed 0, drop ")),
        "{}",
        printed(&out)
    );
    assert!(
        stdout.contains("\nPath per client host:\n  host-0: conntrack table "),
        "{}",
        printed(&out)
    );
    // The box's limit is back.
    assert_ne!(
        std::fs::read_to_string(CONNTRACK_MAX).unwrap().trim(),
        "500"
    );
}
