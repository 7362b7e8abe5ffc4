//! `c1m server --message-rate` over wss: what the server sent is what the clients
//! received, exactly, as over plain ws. A client whose close frame is out goes on
//! opening the server's records until the server's close, so the messages the server
//! wrote before it read that close are counted too (they are in flight, and only the
//! client can count them). Both server engines against both client engines. Ports
//! 9420–9424, control 9430–9434.
#![allow(clippy::unwrap_used)] // panics are the assertions

use std::time::Duration;

use c1m::workload::stats::snapshot::AppSnapshot;

use crate::workload_util::{Proc, c1m, control, scratch, wait_for};

const LONG: Duration = Duration::from_secs(90);
const N: u64 = 100;
/// Per connection: 10 ms apart, so at every teardown some connections have a message
/// on its way when their close frame leaves.
const RATE: u64 = 100;

#[test]
fn over_wss_every_server_message_reaches_its_client_exactly() {
    // With resumption the epoll client keeps rustls's session (its own record layer
    // otherwise): both open what follows the close. 10 in flight, so the waves after
    // the first find tickets.
    for (i, (server, client, resume)) in [
        ("epoll", "epoll", false),
        ("tokio", "tokio", false),
        ("tokio", "epoll", false),
        ("epoll", "tokio", false),
        ("epoll", "epoll", true),
    ]
    .into_iter()
    .enumerate()
    {
        eprintln!("--- server {server}, client {client}, resumption {resume}");
        let resumption: &[&str] = if resume { &["--tls-resumption"] } else { &[] };
        let in_flight: &[&str] = if resume { &["--in-flight", "10"] } else { &[] };
        let port = 9420 + i as u16;
        let ctl = format!("127.0.0.1:{}", 9430 + i);
        let dir = scratch("server-messages-wss");
        let cert = dir.path().join("cert.pem");
        let srv = Proc::spawn(
            "c1m server --tls",
            c1m()
                .args(["server", "--engine", server, "--mode", "ws", "--tls"])
                .args(["--ports", &port.to_string(), "--quiet", "--control", &ctl])
                .args(["--message-rate", &RATE.to_string(), "--message-size", "100"])
                .args(resumption)
                .arg("--tls-cert-out")
                .arg(&cert),
        );
        wait_for(&ctl, "server up", LONG, |s| s.phase == "running");
        let json = dir.path().join("client.json");
        let out = Proc::spawn(
            "c1m client --tls",
            c1m()
                .args(["client", "--engine", client, "--mode", "ws", "-n"])
                .arg(N.to_string())
                .args(["--ports", &port.to_string(), "--quiet", "--hold", "2s"])
                .args(resumption)
                .args(in_flight)
                .arg("--tls-ca")
                .arg(&cert)
                .arg("--stats-json")
                .arg(&json),
        )
        .wait(LONG);
        assert!(
            out.status.success(),
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let c: AppSnapshot = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let s = wait_for(&ctl, "clients gone", LONG, |s| s.counters.open == 0);
        let (sent, got) = (s.counters.server_messages, c.counters.server_messages);
        assert_eq!(
            got.received, sent.sent,
            "{server} → {client}: {sent:?} {got:?}"
        );
        assert_eq!(
            (
                sent.capped,
                got.gaps,
                got.skipped,
                got.out_of_order,
                got.duplicates
            ),
            (0, 0, 0, 0, 0),
            "{sent:?} {got:?}"
        );
        // Most of 100 connections × 100/s × 2 s (a loaded box ramps late).
        assert!(sent.sent >= N * RATE * 2 / 2, "{sent:?}");
        assert_eq!(c.percentiles["server_message_us"].count, got.received);
        // Every connection was TLS and ended by the client's teardown, cleanly on both
        // sides: the server read each close frame, and no record failed to open.
        let h = c.counters.tls_handshakes;
        assert_eq!(h.full + h.resumed, N, "{h:?}");
        assert_eq!(h.resumed > 0, resume, "{h:?}");
        assert_eq!(c.counters.closed.local_close, N, "{:?}", c.counters.closed);
        assert_eq!(c.counters.closed.total(), N, "{:?}", c.counters.closed);
        assert_eq!(s.counters.closed.peer_closed, N, "{:?}", s.counters.closed);
        assert_eq!(
            c.counters.tls_errors.total() + s.counters.tls_errors.total(),
            0,
            "{:?} {:?}",
            c.counters.tls_errors,
            s.counters.tls_errors
        );
        control(&ctl, "stop").unwrap();
        let out = srv.wait(LONG);
        assert!(out.status.success(), "{}", out.status);
    }
}
