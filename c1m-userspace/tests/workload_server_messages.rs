//! `c1m server --message-rate` (issue 35 point 3, the server's direction): the server
//! sends every open WebSocket connection stamped messages at a rate, and c1m's client
//! times each from its scheduled instant on arrival (one way, on the one monotonic clock
//! of the box) and echoes none back. Exact count: what the server sent is what the
//! clients received, messages written after a client's close frame included (the client
//! reads them until the server's close). Both server engines against both client
//! engines, the flags refused in one line, and `c1m run --server-message-rate`.
//! Ports 24200–24219, control 24240–24249.
#![allow(clippy::unwrap_used)] // panics are the assertions

use std::time::Duration;

use c1m::workload::stats::snapshot::AppSnapshot;

use crate::{
    lab_util::root_or_skip,
    workload_util::{Proc, c1m, control, run_line_and_record, scratch, wait_for},
};

const LONG: Duration = Duration::from_secs(60);
const N: u64 = 100;

/// `c1m client` on `engine` holding N WebSocket connections to `port` for 2 s, its final
/// snapshot read back from `--stats-json`.
fn client_run(engine: &str, port: u16) -> AppSnapshot {
    let dir = scratch("server-messages");
    let json = dir.path().join("client.json");
    let p = Proc::spawn(
        "client",
        c1m()
            .args(["client", "--engine", engine, "--mode", "ws"])
            .args(["--ports", &port.to_string(), "--quiet", "--hold", "2s"])
            .args(["-n", &N.to_string()])
            .arg("--stats-json")
            .arg(&json),
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

#[test]
fn every_server_message_reaches_its_client_and_is_timed_once() {
    // Both engines on each side at least once, and both crossings; the io_uring server
    // (its client is the epoll client) against both.
    for (i, (server, client)) in [
        ("epoll", "epoll"),
        ("tokio", "tokio"),
        ("tokio", "epoll"),
        ("epoll", "tokio"),
        ("uring", "epoll"),
        ("uring", "tokio"),
    ]
    .into_iter()
    .enumerate()
    {
        eprintln!("--- server {server}, client {client}");
        let port = 24200 + i as u16;
        let ctl = format!("127.0.0.1:{}", 24240 + i);
        let srv = Proc::spawn(
            "c1m server",
            c1m()
                .args(["server", "--engine", server, "--mode", "ws"])
                .args(["--ports", &port.to_string(), "--quiet", "--control", &ctl])
                .args(["--message-rate", "20/s", "--message-size", "100"]),
        );
        wait_for(&ctl, "server up", LONG, |s| s.phase == "running");
        let c = client_run(client, port);
        let s = wait_for(&ctl, "clients gone", LONG, |s| s.counters.open == 0);
        let (sent, got) = (s.counters.server_messages, c.counters.server_messages);
        assert_eq!(
            got.received, sent.sent,
            "{server} → {client}: {sent:?} {got:?}"
        );
        assert_eq!(sent.capped, 0, "{sent:?}");
        // One TCP stream per connection: every number in its place.
        assert_eq!(
            (got.gaps, got.skipped, got.out_of_order, got.duplicates),
            (0, 0, 0, 0),
            "{server} → {client}: {got:?}"
        );
        // 100 connections at 20/s for about 2 s: most of 4,000 (a loaded box ramps late).
        assert!(sent.sent >= N * 20 * 2 / 2, "{sent:?}");
        assert_eq!(
            c.percentiles["server_message_us"].count, got.received,
            "one latency each"
        );
        // Nothing echoed back, nothing taken for an echo or a push, and the connections
        // ended by the client's teardown alone.
        assert_eq!(s.counters.echo_round_trips, 0, "the client echoed");
        assert_eq!(c.counters.messages, Default::default());
        assert_eq!(
            (c.counters.ws_messages_in, c.counters.pushes_received),
            (0, 0)
        );
        assert_eq!(c.counters.closed.total(), N, "{:?}", c.counters.closed);
        assert_eq!(c.counters.closed.local_close, N, "{:?}", c.counters.closed);
        control(&ctl, "stop").unwrap();
        let out = srv.wait(LONG);
        assert!(out.status.success(), "{}", out.status);
    }
}

#[test]
fn server_message_flags_are_refused_with_one_line() {
    for (args, says) in [
        (
            &["server", "--mode", "hold", "--message-rate", "10"][..],
            "needs --mode ws",
        ),
        (
            &["server", "--mode", "ws", "--message-rate", "0"],
            "message rate",
        ),
        (
            &[
                "server",
                "--mode",
                "ws",
                "--message-rate",
                "1",
                "--message-size",
                "8",
            ],
            "16-byte stamp",
        ),
        (
            &[
                "run",
                "-n",
                "1",
                "--server-message-rate",
                "10",
                "--server-cmd",
                "python3 server.py --port $PORT",
            ],
            "--server-message-rate",
        ),
        (
            &[
                "run",
                "-n",
                "1",
                "--mode",
                "echo",
                "--server-message-rate",
                "10",
            ],
            "needs --mode ws",
        ),
    ] {
        let out = c1m()
            .args(args)
            .args(["--ports", "24219"])
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
}

#[test]
fn c1m_run_passes_the_rate_to_its_server_and_sums_the_messages_up() {
    if !root_or_skip("c1m_run_passes_the_rate_to_its_server_and_sums_the_messages_up") {
        return;
    }
    let dir = scratch("server-messages-run");
    let out = c1m()
        .args(["run", "-n", "100", "--mode", "ws", "--ports", "24210-24211"])
        .args(["--idle", "2s", "--server-message-rate", "10/s"])
        .args(["--message-size", "32", "--no-observer", "--plain"])
        .arg("--out")
        .arg(dir.path())
        .output()
        .unwrap();
    let (line, rec) = run_line_and_record(&out, dir.path(), "server messages: ");
    let sent = rec.server.as_ref().unwrap().counters.server_messages;
    let got = rec.client.as_ref().unwrap().counters.server_messages;
    assert_eq!(got.received, sent.sent, "{sent:?} {got:?}");
    assert_eq!(got.gaps + got.out_of_order + got.duplicates, 0, "{got:?}");
    assert!(sent.sent >= 100 * 10 * 2 / 2, "{sent:?}");
    assert!(
        line.starts_with(&format!(
            "server messages: {} sent, {} received, each connection's in the server's order",
            c1m::fmt::count(sent.sent),
            c1m::fmt::count(got.received)
        )),
        "{line}"
    );
    let idle = rec.phases.iter().find(|p| p.name == "idle").unwrap();
    assert!(idle.server_messages_received > 0, "{idle:?}");
    // What was asked is recorded where the client's rate is, and said in the summary's
    // header and the report's.
    let c = &rec.config;
    assert_eq!(
        (
            c.server_message_rate_per_s,
            c.server_message_size,
            c.message_rate_per_s
        ),
        (10.0, 32, 0.0)
    );
    let asked = "messages asked: the server 10/s per connection of 32 B";
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().filter(|l| *l == asked).count(), 1, "{text}");
    let folder = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("report.html").exists())
        .unwrap();
    let html = std::fs::read_to_string(folder.join("report.html")).unwrap();
    assert!(html.contains(asked), "report.html");
}
