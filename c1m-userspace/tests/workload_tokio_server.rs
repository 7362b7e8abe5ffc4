//! The tokio server engine against the epoll client, WebSocket mode: peers that never
//! shake hands are closed at the handshake timeout and the others never are; every
//! connection opens, echoes, gets exactly one push frame, and every close is counted on
//! both sides, first when the client closes, then when the server stops (its 1001 goodbye
//! must read as a clean close). Ports 23100–23109, control 23190–23191.
#![allow(clippy::unwrap_used)] // panics are the assertions

use crate::workload_util;

use std::time::Duration;

use workload_util::{Proc, c1m, control, scratch, wait_for};

const N: u64 = 3_000;
const LONG: Duration = Duration::from_secs(60);
const PORTS: &str = "23100-23109";

fn server(ctl: &str, json: &std::path::Path) -> Proc {
    let server = Proc::spawn(
        "tokio server",
        c1m()
            .args([
                "server", "--engine", "tokio", "--mode", "ws", "--ports", PORTS,
            ])
            .args(["--quiet", "--control", ctl, "--handshake-timeout", "1s"])
            .arg("--stats-json")
            .arg(json),
    );
    wait_for(ctl, "server up", LONG, |s| s.phase == "running");
    server
}

fn client(ctl: &str) -> Proc {
    let client = Proc::spawn(
        "epoll client",
        c1m()
            .args([
                "client", "--engine", "epoll", "--mode", "ws", "--ports", PORTS,
            ])
            .args(["--quiet", "--stay", "--control", ctl, "--hold", "forever"])
            .args(["-n", &N.to_string(), "--echo-count", "2"]),
    );
    wait_for(ctl, "client ramp + echoes", LONG, |s| {
        s.phase == "hold" && s.counters.echo_round_trips == 2 * N
    });
    client
}

#[test]
fn tokio_server_ws_push_and_closes_exact() {
    let (sctl, cctl) = ("127.0.0.1:23190", "127.0.0.1:23191");
    let scratch = scratch("tokio-server");
    let dir = scratch.path();
    let json = dir.join("server.json");
    let server = server(sctl, &json);
    let silent: Vec<std::net::TcpStream> = (0..4)
        .map(|_| std::net::TcpStream::connect("127.0.0.1:23100").unwrap())
        .collect();
    wait_for(sctl, "silent peers timed out", LONG, |s| {
        s.counters.closed.handshake_timeout == 4 && s.counters.open == 0
    });
    drop(silent);

    // Round 1: the client opens, echoes, receives one push, and closes.
    let c1 = client(cctl);
    let s = wait_for(sctl, "server counts", LONG, |s| {
        s.counters.ws_open == N && s.counters.echo_round_trips == 2 * N
    });
    assert_eq!((s.counters.accepted, s.counters.open), (N + 4, N));
    assert_eq!(s.counters.protocol_errors.total(), 0);
    // Past every open connection's handshake deadline: none of them is cut.
    std::thread::sleep(Duration::from_millis(1500));
    let ack: serde_json::Value = serde_json::from_str(&control(sctl, "push").unwrap()).unwrap();
    assert_eq!(ack["push_id"], 1);
    let c = wait_for(cctl, "push delivered", LONG, |s| {
        s.counters.pushes_received == N
    });
    assert_eq!((c.pushes.len(), c.pushes[0].count), (1, N));
    assert_eq!(c.percentiles["push_message_us"].count, N);
    assert_eq!(c.counters.push_undecodable, 0);
    let s = wait_for(sctl, "push written", LONG, |s| {
        s.counters.pushes_sent == N && s.pushes.first().is_some_and(|p| p.count == N)
    });
    assert_eq!(s.pushes.len(), 1);
    control(cctl, "close").unwrap();
    let c = wait_for(cctl, "client closed", LONG, |s| s.phase == "closed");
    assert_eq!((c.counters.open, c.counters.closed.local_close), (0, N));
    let s = wait_for(sctl, "server sees closes", LONG, |s| s.counters.open == 0);
    assert_eq!(
        (s.counters.closed.peer_closed, s.counters.closed.total()),
        (N, N + 4)
    );
    assert_eq!(s.counters.closed.handshake_timeout, 4);
    assert_eq!(
        (s.counters.ws_open, s.counters.protocol_errors.total()),
        (0, 0)
    );
    control(cctl, "stop").unwrap();
    assert!(c1.wait(LONG).status.success());

    // Round 2: the server stops with N open; each connection gets its 1001 close.
    let c2 = client(cctl);
    wait_for(sctl, "server holds round 2", LONG, |s| {
        s.counters.ws_open == N
    });
    control(sctl, "stop").unwrap();
    let out = server.wait(LONG);
    assert!(
        out.status.success(),
        "server failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = wait_for(cctl, "client sees the server go", LONG, |s| {
        s.counters.open == 0
    });
    assert_eq!(c.counters.closed.peer_closed, N, "{:?}", c.counters.closed);
    assert_eq!(c.counters.closed.total(), N);
    assert_eq!(c.counters.protocol_errors.total(), 0);
    assert_eq!(c.counters.failures.total(), 0);
    let fin: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let counters = &fin["counters"];
    assert_eq!(counters["accepted"], 2 * N + 4, "{fin}");
    assert_eq!(counters["open"], 0);
    assert_eq!(counters["closed"]["local_close"], N);
    assert_eq!(counters["closed"]["peer_closed"], N);
    control(cctl, "stop").unwrap();
    assert!(c2.wait(LONG).status.success());
}
