//! `--message-rate` (issue 35 point 3): every held connection sends stamped messages at
//! a rate, the server echoes them, each is timed from its *scheduled* instant (wrk2's
//! coordinated-omission correction), and every message is accounted for exactly:
//! `sent = received + lost + outstanding`, and after a clean end sent = received = what
//! the server echoed. Against c1m's server (both engines, ws and raw echo), a Python
//! `websockets` echo server, a peer that stalls (SIGSTOP) and a sender that stalls.
//! Ports 24100–24119, control 24140–24149.
#![allow(clippy::unwrap_used)] // panics are the assertions

use std::{
    net::TcpStream,
    path::Path,
    process::{Child, Command},
    time::{Duration, Instant},
};

use c1m::workload::stats::{counters::Messages, snapshot::AppSnapshot};

use crate::workload_util::{
    Proc, c1m, control, each_engine, require_python_websockets, run_line_and_record, scratch,
    wait_for,
};

const LONG: Duration = Duration::from_secs(60);
const N: u64 = 100;

/// `c1m client` against `port` until its hold ends, its final snapshot read back from
/// `--stats-json`.
fn client_run(mode: &str, port: u16, hold: &str, extra: &[&str]) -> AppSnapshot {
    let dir = scratch("message-rate");
    let json = dir.path().join("client.json");
    let p = Proc::spawn(
        "client",
        c1m()
            .args(["client", "--mode", mode, "--ports", &port.to_string()])
            .args(["--quiet", "--hold", hold, "-n", &N.to_string()])
            .arg("--stats-json")
            .arg(&json)
            .args(extra),
    );
    let out = p.wait(LONG);
    assert!(
        out.status.success(),
        "{}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap()
}

/// Every message sent came back, in order, and was timed once; nothing lost, nothing
/// outstanding, nothing unmatched, no connection closed but by the teardown.
fn all_received(c: &AppSnapshot) -> Messages {
    let m = c.counters.messages;
    assert_eq!(m.unaccounted(), 0, "{m:?}");
    assert_eq!((m.lost, m.outstanding, m.unmatched), (0, 0, 0), "{m:?}");
    assert_eq!(m.sent, m.received, "{m:?}");
    assert_eq!(
        c.percentiles["message_us"].count, m.received,
        "one latency each"
    );
    assert_eq!(
        c.counters.closed.total(),
        c.counters.closed.local_close,
        "{:?}",
        c.counters.closed
    );
    assert_eq!(c.counters.closed.local_close, N);
    m
}

/// At least most of `rate × seconds` per connection were sent (a loaded box ramps late).
fn about(m: &Messages, rate: u64, secs: u64) {
    assert!(
        m.sent >= N * rate * secs * 7 / 10,
        "{} messages from {N} connections at {rate}/s for {secs} s",
        m.sent
    );
}

fn c1m_server(mode: &str, port: u16, ctl: &str) -> Proc {
    let p = Proc::spawn(
        "c1m server",
        c1m()
            .args(["server", "--mode", mode, "--ports", &port.to_string()])
            .args(["--quiet", "--control", ctl]),
    );
    wait_for(ctl, "server up", LONG, |s| s.phase == "running");
    p
}

fn stop(ctl: &str, p: Proc) {
    control(ctl, "stop").unwrap();
    let out = p.wait(LONG);
    assert!(out.status.success(), "{}", out.status);
}

#[test]
fn against_c1ms_server_every_message_is_echoed_and_counted_exactly() {
    each_engine(|_| {
        let (port, ctl) = (24100, "127.0.0.1:24140");
        let srv = c1m_server("ws", port, ctl);
        let c = client_run(
            "ws",
            port,
            "2s",
            &["--message-rate", "20/s", "--message-size", "100"],
        );
        let m = all_received(&c);
        about(&m, 20, 2);
        // The client sent nothing else: every data message the server saw was one.
        let s = wait_for(ctl, "clients gone", LONG, |s| s.counters.open == 0);
        assert_eq!(s.counters.echo_round_trips, m.sent, "server echoed");
        stop(ctl, srv);
    });
}

#[test]
fn raw_echo_mode_sends_bare_messages_and_counts_them_exactly() {
    each_engine(|_| {
        let (port, ctl) = (24102, "127.0.0.1:24142");
        let srv = c1m_server("echo", port, ctl);
        let c = client_run(
            "echo",
            port,
            "2s",
            &["--total-message-rate", "2000", "--message-size", "48"],
        );
        // 2,000/s over 100 connections: 20/s each.
        let m = all_received(&c);
        about(&m, 20, 2);
        let s = wait_for(ctl, "clients gone", LONG, |s| s.counters.open == 0);
        assert_eq!(
            s.counters.bytes_in,
            m.sent * 48,
            "the server read every byte"
        );
        assert_eq!(s.counters.bytes_out, m.sent * 48, "and wrote it back");
        stop(ctl, srv);
    });
}

/// The Python echo server (tests/servers/echo_ws.py), listening on `port`.
fn python_echo(port: u16, extra: &[&str]) -> Proc {
    require_python_websockets();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/echo_ws.py");
    let p = Proc::spawn(
        "python echo server",
        Command::new("python3")
            .arg(path)
            .args(["--port", &port.to_string()])
            .args(extra),
    );
    let deadline = Instant::now() + LONG;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "never listened on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    p
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill has no memory preconditions; the pid is our own live child.
    let r = unsafe { libc::kill(child.id() as i32, sig) };
    assert_eq!(r, 0, "kill {sig}");
}

fn terminate(p: Proc) -> String {
    signal(p.child.as_ref().unwrap(), libc::SIGTERM);
    String::from_utf8_lossy(&p.wait(LONG).stdout).into_owned()
}

#[test]
fn against_a_python_echo_server_every_message_is_counted_exactly() {
    each_engine(|_| {
        let port = 24104;
        let srv = python_echo(port, &[]);
        let c = client_run("ws", port, "2s", &["--message-rate", "10"]);
        let m = all_received(&c);
        about(&m, 10, 2);
        let out = terminate(srv);
        assert!(
            out.contains(&format!("echoed {}", m.sent)),
            "python echoed: {out}"
        );
        // And raw TCP echo, from a server that knows nothing of messages.
        let port = 24106;
        let srv = python_echo(port, &["--raw"]);
        let c = client_run("echo", port, "3s", &["--message-rate", "0.5/s"]);
        let m = all_received(&c);
        assert!(m.sent >= N, "3 s at 0.5/s: a message each at least: {m:?}");
        terminate(srv);
    });
}

/// How long the peer (or the sender) is stopped.
const STALL: Duration = Duration::from_millis(1500);

/// Asserts the stall shows in the latency: the slowest message waited at least the
/// stall (from its schedule), and more than 1% of them waited half of it (every message
/// scheduled in the stall's first half), so the p99 carries it.
fn stall_shows(c: &AppSnapshot) {
    let p = &c.percentiles["message_us"];
    let stall_us = STALL.as_micros() as u64;
    assert!(
        p.max >= stall_us,
        "max {} µs < the {stall_us} µs stall: {p:?}",
        p.max
    );
    assert!(
        p.p99 >= stall_us / 2,
        "p99 {} µs hides the {stall_us} µs stall: {p:?}",
        p.p99
    );
}

#[test]
fn a_stalled_peer_shows_in_the_latency_from_the_schedule() {
    each_engine(|_| {
        let port = 24108;
        let srv = python_echo(port, &[]);
        let pid = srv.child.as_ref().unwrap();
        let stopper = std::thread::scope(|sc| {
            let t = sc.spawn(|| {
                // The ramp of 100 connections is done well within a second.
                std::thread::sleep(Duration::from_millis(1500));
                signal(pid, libc::SIGSTOP);
                std::thread::sleep(STALL);
                signal(pid, libc::SIGCONT);
            });
            let c = client_run("ws", port, "5s", &["--message-rate", "20"]);
            t.join().unwrap();
            c
        });
        let m = all_received(&stopper);
        about(&m, 20, 5);
        stall_shows(&stopper);
        terminate(srv);
    });
}

#[test]
fn a_stalled_sender_catches_up_and_its_lateness_shows_in_the_latency() {
    each_engine(|_| {
        let (port, ctl, cctl) = (24110, "127.0.0.1:24144", "127.0.0.1:24145");
        let srv = c1m_server("ws", port, ctl);
        let cl = Proc::spawn(
            "client",
            c1m()
                .args(["client", "--mode", "ws", "--ports", &port.to_string()])
                .args(["--quiet", "--stay", "--control", cctl, "--hold", "forever"])
                .args(["-n", &N.to_string(), "--message-rate", "20"]),
        );
        let ramped = wait_for(cctl, "ramp", LONG, |s| {
            s.phase == "hold" && s.counters.open == N
        });
        let before = ramped.counters.messages.sent;
        std::thread::sleep(Duration::from_millis(500));
        // The whole client stops: no message leaves, none is stamped late by a clock that
        // stopped with it. Resumed, it sends every one it missed, each stamped with its
        // schedule.
        signal(cl.child.as_ref().unwrap(), libc::SIGSTOP);
        std::thread::sleep(STALL);
        signal(cl.child.as_ref().unwrap(), libc::SIGCONT);
        std::thread::sleep(Duration::from_secs(1));
        control(cctl, "close").unwrap();
        let end = wait_for(cctl, "teardown", LONG, |s| s.phase == "closed");
        let m = all_received(&end);
        // 3 s of 20/s (0.5 + stall + 1): the missed ones were sent, not skipped.
        assert!(
            m.sent - before >= N * 20 * 3 * 8 / 10,
            "{} sent over 3 s of 20/s with a {STALL:?} stall: {m:?}",
            m.sent - before
        );
        assert!(
            m.late >= N * 20,
            "a 1.5 s stall at 20/s leaves ~30 a connection late: {m:?}"
        );
        stall_shows(&end);
        stop(cctl, cl);
        let s = wait_for(ctl, "clients gone", LONG, |s| s.counters.open == 0);
        assert_eq!(s.counters.echo_round_trips, m.sent, "server echoed");
        stop(ctl, srv);
    });
}

#[test]
fn bad_message_flags_are_refused_with_one_line() {
    for (args, says) in [
        (&["--mode", "ws", "--message-rate", "0"][..], "message rate"),
        (
            &["--mode", "ws", "--message-rate", "fast"],
            "not a message rate",
        ),
        (
            &[
                "--mode",
                "ws",
                "--message-rate",
                "10",
                "--total-message-rate",
                "100",
            ],
            "cannot be used with",
        ),
        (
            &["--mode", "ws", "--message-rate", "1", "--message-size", "8"],
            "16-byte stamp",
        ),
        (&["--message-rate", "10"], "needs --mode ws or --mode echo"),
    ] {
        let out = c1m()
            .args(["client", "-n", "1", "--ports", "24119"])
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        let said: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("error:") || l.starts_with("c1m:"))
            .collect();
        assert_eq!(said.len(), 1, "{args:?}: one line: {err}");
        assert!(said[0].contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // And `c1m run` before it starts anything.
    let out = c1m()
        .args(["run", "-n", "1", "--mode", "hold", "--message-rate", "10"])
        .args(["--ports", "24119", "--no-observer", "--plain"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs --mode ws or --mode echo"), "{err}");
}

#[test]
fn c1m_run_forwards_the_rate_and_sums_the_messages_up() {
    let dir = scratch("message-rate-run");
    let out = c1m()
        .args(["run", "-n", "100", "--mode", "ws", "--ports", "24112-24113"])
        .args([
            "--idle",
            "2s",
            "--message-rate",
            "10/s",
            "--no-observer",
            "--plain",
        ])
        .arg("--out")
        .arg(dir.path())
        .output()
        .unwrap();
    let (line, rec) = run_line_and_record(&out, dir.path(), "messages: ");
    let client = rec.client.as_ref().unwrap();
    let m = client.counters.messages;
    assert_eq!(
        (m.sent, m.lost, m.outstanding, m.unmatched),
        (m.received, 0, 0, 0),
        "{m:?}"
    );
    assert!(m.sent >= 100 * 10 * 2 * 7 / 10, "{m:?}");
    let server = rec.server.as_ref().unwrap();
    assert_eq!(server.counters.echo_round_trips, m.sent);
    assert!(
        line.starts_with(&format!(
            "messages: {} sent, {} received (server echoed {})",
            c1m::fmt::count(m.sent),
            c1m::fmt::count(m.received),
            c1m::fmt::count(m.sent)
        )),
        "{line}"
    );
    assert_eq!(rec.config.message_rate_per_s, 10.0);
    assert_eq!(rec.config.message_size, 64);
    assert_eq!(
        rec.config.server_message_rate_per_s, 0.0,
        "the server sent none"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().any(|l| l
            == "messages asked: the client 10/s per connection (1,000/s in all) of 64 B"),
        "{text}"
    );
    let idle = rec.phases.iter().find(|p| p.name == "idle").unwrap();
    assert!(
        idle.messages_sent > 0 && idle.messages_received > 0,
        "{idle:?}"
    );
}
