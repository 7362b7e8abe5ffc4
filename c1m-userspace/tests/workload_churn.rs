//! `--churn R` (issue 35 point 2): held connections closed cleanly and reopened, R a
//! second, paced evenly. Exact counts: `churn.closed = reopened + failed` once the churn
//! stops, the client holds -n again, c1m's server accepted -n + reopened and saw every
//! churned connection close; each reopen's setup is timed once. Both client engines
//! against c1m's server (ws and hold, oldest and random), against the Python
//! `websockets` server, `c1m run --churn` end to end (root: kernel = app after the
//! churning phase), a client killed mid-churn, and the refusals. Ports 24000–24019,
//! control 24040–24049.
#![allow(clippy::unwrap_used)] // panics are the assertions

use std::{
    net::TcpStream,
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use c1m::model::RunRecord;
use c1m::workload::stats::{counters::Churn, snapshot::AppSnapshot};

use crate::lab_util::{c1m_run, fresh_dir, root_or_skip, run_folder};
use crate::workload_util::{
    Proc, c1m, control, each_engine, require_python_websockets, stop, wait_for,
};

const LONG: Duration = Duration::from_secs(60);
const N: u64 = 200;
/// Churns a second, and how many the tests wait for: 3 s of them.
const RATE: u64 = 100;
const CHURNS: u64 = 3 * RATE;

fn client(mode: &str, port: u16, ctl: &str, extra: &[&str]) -> Proc {
    Proc::spawn(
        "client",
        c1m()
            .args(["client", "--mode", mode, "--ports", &port.to_string()])
            .args(["--quiet", "--stay", "--control", ctl, "--hold", "forever"])
            .args(["-n", &N.to_string(), "--churn", &format!("{RATE}/s")])
            .args(extra),
    )
}

fn accounted(c: &Churn) {
    assert_eq!(
        c.unaccounted(),
        0,
        "closed = reopened + failed + reopening: {c:?}"
    );
}

/// Ramp, churn until `CHURNS` closed (the churn began by itself at the hold), then
/// `churn off` and every churn finished: the client's own counts, exact.
fn churn_then_stop(cctl: &str) -> AppSnapshot {
    wait_for(cctl, "ramp", LONG, |s| {
        s.phase == "hold" && s.counters.open == N
    });
    let first = wait_for(cctl, "churning", LONG, |s| s.counters.churn.closed > 0);
    let mid = wait_for(cctl, "churns", LONG, |s| {
        accounted(&s.counters.churn);
        // Held all along but for the reopens in flight and closes not yet answered.
        assert!(
            s.counters.open + s.counters.churn.reopening >= N - s.counters.churn.failed,
            "{:?}",
            s.counters
        );
        s.counters.churn.closed >= CHURNS
    });
    // Paced: what came between two reports is about the rate (not a burst).
    let secs = (mid.counts_unix_ns - first.counts_unix_ns) as f64 / 1e9;
    let per_s = (mid.counters.churn.closed - first.counters.churn.closed) as f64 / secs;
    assert!(
        per_s > RATE as f64 * 0.5 && per_s < RATE as f64 * 1.5,
        "{per_s:.0} churns/s over {secs:.1} s at --churn {RATE}/s"
    );
    let answer = control(cctl, "churn off").unwrap();
    assert!(answer.contains("holding"), "{answer}");
    // Half a second past the stop: every shard has reported since (each reports at
    // once on `churn off`, then every 250 ms while anything moves).
    let off = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        + 500_000_000;
    let c = wait_for(cctl, "every churn finished", LONG, |s| {
        let ch = s.counters.churn;
        s.counts_unix_ns > off && ch.reopening == 0 && ch.closing == 0
    });
    let ch = c.counters.churn;
    accounted(&ch);
    assert_eq!(ch.failed, 0, "{:?}", c.counters.failures);
    assert_eq!(ch.closed, ch.reopened, "{ch:?}");
    assert!(ch.closed >= CHURNS, "{ch:?}");
    assert_eq!(c.counters.open, N, "held -n again: {:?}", c.counters);
    // A reopen counts as a connect; its setup is timed once, in its own histogram.
    assert_eq!(c.counters.connected, N + ch.reopened, "{:?}", c.counters);
    assert_eq!(c.percentiles["churn_setup_us"].count, ch.reopened);
    assert_eq!(c.percentiles["connect_us"].count, N, "the ramp's alone");
    // And the setup rate is the ramp's: -n connected, not the reopens after it.
    assert_eq!(c.setup_rate.as_ref().map(|r| r.connected), Some(N));
    // And stopped: no churn after `churn off`.
    let later = wait_for(cctl, "a later report", LONG, |s| {
        s.counts_unix_ns > c.counts_unix_ns + 300_000_000
    });
    assert_eq!(later.counters.churn, ch);
    c
}

/// Against c1m's server on `port`: the server accepted -n + reopened, holds -n, and
/// after the teardown saw every connection it accepted close.
fn against_c1m(mode: &str, port: u16, sctl: &str, cctl: &str, extra: &[&str]) {
    let srv = Proc::spawn(
        "c1m server",
        c1m()
            .args(["server", "--mode", mode, "--ports", &port.to_string()])
            .args(["--quiet", "--control", sctl]),
    );
    wait_for(sctl, "server up", LONG, |s| s.phase == "running");
    let cl = client(mode, port, cctl, extra);
    let c = churn_then_stop(cctl);
    let reopened = c.counters.churn.reopened;
    let s = wait_for(sctl, "server: every reopen accepted, -n held", LONG, |s| {
        s.counters.accepted == N + reopened && s.counters.open == N
    });
    // The churned connections closed by the client, cleanly: a close frame answered
    // (ws) or a FIN (hold); no resets, no errors.
    assert_eq!(
        s.counters.closed.total(),
        reopened,
        "{:?}",
        s.counters.closed
    );
    assert_eq!(
        s.counters.closed.peer_closed, reopened,
        "{:?}",
        s.counters.closed
    );
    control(cctl, "close").unwrap();
    let end = wait_for(cctl, "teardown", LONG, |s| s.phase == "closed");
    accounted(&end.counters.churn);
    assert_eq!(end.counters.churn, c.counters.churn);
    let s = wait_for(sctl, "server: all closed", LONG, |s| s.counters.open == 0);
    assert_eq!(s.counters.accepted, N + reopened);
    assert_eq!(
        s.counters.closed.total(),
        N + reopened,
        "{:?}",
        s.counters.closed
    );
    stop(cctl, cl);
    control(sctl, "stop").unwrap();
    srv.wait(LONG);
}

#[test]
fn against_c1ms_server_closed_equals_reopened_and_the_server_accepted_each() {
    each_engine(|_| {
        against_c1m("ws", 24000, "127.0.0.1:24040", "127.0.0.1:24041", &[]);
    });
}

#[test]
fn raw_tcp_random_order_closes_with_a_fin_and_reopens_each() {
    each_engine(|_| {
        against_c1m(
            "hold",
            24002,
            "127.0.0.1:24042",
            "127.0.0.1:24043",
            &["--churn-order", "random"],
        );
    });
}

fn python_server(port: u16) -> Proc {
    require_python_websockets();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/ws_server.py");
    let p = Proc::spawn(
        "python server",
        Command::new("python3")
            .arg(path)
            .args(["--ports", &port.to_string()]),
    );
    let deadline = Instant::now() + LONG;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "ws_server.py never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    p
}

#[test]
fn against_the_python_reference_server_every_churn_reopens() {
    each_engine(|_| {
        let (port, cctl) = (24004, "127.0.0.1:24044");
        let srv = python_server(port);
        let cl = client("ws", port, cctl, &[]);
        let c = churn_then_stop(cctl);
        control(cctl, "close").unwrap();
        let end = wait_for(cctl, "teardown", LONG, |s| s.phase == "closed");
        assert_eq!(end.counters.churn, c.counters.churn);
        assert_eq!(end.counters.closed.total(), N, "{:?}", end.counters.closed);
        stop(cctl, cl);
        drop(srv);
    });
}

/// `c1m` with `args`: exit code and stderr.
fn refused(args: &[&str]) -> String {
    let out = c1m().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} ran: {err}");
    err
}

#[test]
fn absurd_churns_are_refused_in_one_line() {
    let client = ["client", "--ports", "24006", "-n", "200", "--quiet"];
    for (extra, says) in [
        (&["--churn", "500/s"][..], "at most -n"),
        (&["--churn", "0"][..], "more than 0"),
        (&["--churn", "lots"][..], "not a churn rate"),
        (&["--churn", "10", "--hold", "0s"][..], "--hold is 0"),
        (&["--churn-order", "random"][..], "required arguments"),
    ] {
        let err = refused(&[&client[..], extra].concat());
        assert!(err.contains(says), "{extra:?}: {err}");
        let lines: Vec<&str> = err.lines().filter(|l| l.contains(says)).collect();
        assert_eq!(lines.len(), 1, "{extra:?}: {err}");
    }
    // `c1m run` refuses before it starts anything.
    let out = fresh_dir("churn-refused");
    for (extra, says) in [
        (&["--churn", "10", "--idle", "0s"][..], "--idle is 0"),
        (&["--churn", "500"][..], "at most -n"),
        (
            &["--churn", "10", "--clients", "external", "--expect", "100"][..],
            "idle phase",
        ),
    ] {
        let o = c1m_run(
            out.path(),
            &[
                &["-n", "100", "--no-observer", "--ports", "24008"][..],
                extra,
            ]
            .concat(),
        )
        .output()
        .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains(says),
            "{extra:?}: {err}"
        );
    }
}

#[test]
fn c1m_run_churns_over_idle_and_the_kernel_agrees_after_it() {
    if !root_or_skip("c1m_run_churns_over_idle_and_the_kernel_agrees_after_it") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    for engine in ["epoll", "tokio", "uring"] {
        eprintln!("--- engine {engine}");
        let out = fresh_dir("churn-run");
        let o = c1m_run(
            out.path(),
            &[
                "--engine",
                engine,
                "--ports",
                "24010-24011",
                "-n",
                "1000",
                "--rate",
                "2000",
                "--churn",
                "200/s",
                "--idle",
                "3s",
                "--pushes",
                "1",
            ],
        )
        .output()
        .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(stdout.contains("churn: "), "{stdout}");
        assert!(
            stdout.contains("kernel = app after every phase"),
            "{stdout}"
        );
        let dir = run_folder(out.path());
        let run: RunRecord =
            serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap())
                .unwrap();
        let client = run.client.as_ref().unwrap();
        let server = run.server.as_ref().unwrap();
        let ch = client.counters.churn;
        accounted(&ch);
        assert_eq!((ch.failed, ch.reopening, ch.closing), (0, 0, 0), "{ch:?}");
        let idle = run.phases.iter().find(|p| p.name == "idle").unwrap();
        // Every churn in the idle phase, about 3 s of 200/s.
        assert_eq!(idle.churned, ch.closed);
        assert!(ch.closed >= 500 && ch.closed <= 700, "{ch:?}");
        assert_eq!(server.counters.accepted, 1000 + ch.reopened);
        for r in &idle.kernel_vs_app {
            assert!(r.agree, "idle: {r:?}");
        }
        // In ws mode the server closes the TCP connection first (RFC 6455 §7.1.1: the
        // client's close frame, then the server's FIN), so the churn's TIME_WAIT is the
        // server's; in the raw modes our FIN goes first and it is the client's.
        let tw = idle.time_wait_peak.unwrap();
        assert!(tw.server > 0, "{tw:?}");
    }
}

/// `kill -9` of a client mid-churn (closes and reopens in flight): c1m's server sees
/// every connection it accepted end, holds nothing, and takes a fresh client whole.
#[test]
fn a_churning_client_killed_leaves_the_server_whole() {
    each_engine(|_| {
        let (port, sctl, cctl) = (24012, "127.0.0.1:24046", "127.0.0.1:24047");
        let srv = Proc::spawn(
            "c1m server",
            c1m()
                .args(["server", "--mode", "ws", "--ports", &port.to_string()])
                .args(["--quiet", "--control", sctl]),
        );
        wait_for(sctl, "server up", LONG, |s| s.phase == "running");
        let mut cl = client("ws", port, cctl, &[]);
        wait_for(cctl, "churning", LONG, |s| {
            s.counters.open + s.counters.churn.reopening >= N && s.counters.churn.closed >= RATE
        });
        let mut child = cl.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        let s = wait_for(sctl, "every accepted connection ended", LONG, |s| {
            s.counters.open == 0 && s.counters.closed.total() == s.counters.accepted
        });
        assert!(
            s.counters.accepted > N,
            "reopens were accepted: {:?}",
            s.counters
        );
        // Still serving: a fresh client's -n all held.
        let fresh = Proc::spawn(
            "client",
            c1m()
                .args(["client", "--mode", "ws", "--ports", &port.to_string()])
                .args(["--quiet", "--stay", "--control", cctl, "--hold", "forever"])
                .args(["-n", &N.to_string()]),
        );
        wait_for(sctl, "the fresh client held", LONG, |s| {
            s.counters.open == N
        });
        stop(cctl, fresh);
        wait_for(sctl, "all closed", LONG, |s| s.counters.open == 0);
        control(sctl, "stop").unwrap();
        srv.wait(LONG);
    });
}
