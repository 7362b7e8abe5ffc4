//! `c1m client --engine tokio` against the epoll server: the counts, histograms, pushes and
//! teardown must be exactly what the epoll client reports. Ports 9300–9309, control
//! 9390–9393.
#![allow(clippy::unwrap_used)] // panics are the assertions

use crate::workload_util::{self, stop};

use std::time::Duration;

use workload_util::{Proc, c1m, control, wait_for};

const LONG: Duration = Duration::from_secs(60);

fn server(mode: &str, ports: &str, ctl: &str) -> Proc {
    let p = Proc::spawn(
        "server",
        c1m().args([
            "server",
            "--mode",
            mode,
            "--ports",
            ports,
            "--quiet",
            "--control",
            ctl,
        ]),
    );
    wait_for(ctl, "server up", LONG, |s| s.phase == "running");
    p
}

fn client(mode: &str, ports: &str, ctl: &str, n: u64, extra: &[&str]) -> Proc {
    Proc::spawn(
        "client",
        c1m()
            .args([
                "client", "--engine", "tokio", "--mode", mode, "--ports", ports,
            ])
            .args(["--quiet", "--stay", "--control", ctl, "--hold", "forever"])
            .args(["-n", &n.to_string(), "--payload-size", "40"])
            .args(extra),
    )
}

#[test]
fn ws_handshake_echo_push_and_close_frames_exact() {
    const N: u64 = 2_000;
    let (sctl, cctl, ports) = ("127.0.0.1:9390", "127.0.0.1:9391", "9300-9303");
    let srv = server("ws", ports, sctl);
    let cl = client("ws", ports, cctl, N, &["--echo-count", "3"]);
    let c = wait_for(cctl, "ramp and echoes", LONG, |s| {
        s.phase == "hold" && s.counters.echo_round_trips == 3 * N
    });
    assert_eq!(
        (c.counters.attempted, c.counters.connected, c.counters.open),
        (N, N, N)
    );
    assert_eq!(c.counters.in_flight, 0);
    assert_eq!(c.counters.failures.total(), 0, "{:?}", c.counters.failures);
    assert_eq!(c.counters.closed.total(), 0, "{:?}", c.counters.closed);
    for (hist, count) in [
        ("connect_us", N),
        ("ws_handshake_us", N),
        ("echo_rtt_us", 3 * N),
    ] {
        assert_eq!(c.percentiles[hist].count, count, "{hist}");
    }
    let setup_total: u64 = c.setup_steps.last().map(|s| s.connections).unwrap_or(0);
    assert_eq!(setup_total, N, "setup steps: {:?}", c.setup_steps);
    let s = wait_for(sctl, "server counts", LONG, |s| {
        s.counters.ws_open == N && s.counters.echo_round_trips == 3 * N
    });
    assert_eq!(s.counters.protocol_errors.total(), 0);

    let answer = control(sctl, "push").unwrap();
    assert!(answer.contains("\"push_id\":1"), "{answer}");
    let c = wait_for(cctl, "push delivered", LONG, |s| {
        s.counters.pushes_received == N
    });
    let pushes: Vec<(u64, u64)> = c.pushes.iter().map(|p| (p.push_id, p.count)).collect();
    assert_eq!(pushes, [(1, N)]);
    for hist in ["push_message_us", "push_fanout_us"] {
        assert_eq!(c.percentiles[hist].count, N, "{hist}");
    }
    assert_eq!(c.counters.push_undecodable, 0);

    // Teardown: every connection says goodbye with a close frame before its FIN.
    control(cctl, "close").unwrap();
    let c = wait_for(cctl, "client closed", LONG, |s| s.phase == "closed");
    assert_eq!((c.counters.open, c.counters.closed.local_close), (0, N));
    let s = wait_for(sctl, "server sees closes", LONG, |s| s.counters.open == 0);
    assert_eq!(s.counters.closed.peer_closed, N, "{:?}", s.counters.closed);
    assert_eq!(s.counters.closed.total(), N);
    assert_eq!(s.counters.protocol_errors.total(), 0);
    stop(cctl, cl);
    stop(sctl, srv);
}

#[test]
fn tcp_echo_from_several_sources_exact() {
    const N: u64 = 1_000;
    let (sctl, cctl, ports) = ("127.0.0.1:9392", "127.0.0.1:9393", "9305-9306");
    let srv = server("echo", ports, sctl);
    let cl = client(
        "echo",
        ports,
        cctl,
        N,
        &["--echo-count", "4", "--source", "127.0.0.2-127.0.0.5"],
    );
    let c = wait_for(cctl, "ramp and echoes", LONG, |s| {
        s.phase == "hold" && s.counters.echo_round_trips == 4 * N
    });
    assert_eq!((c.counters.connected, c.counters.open), (N, N));
    assert_eq!(c.counters.failures.total(), 0, "{:?}", c.counters.failures);
    assert_eq!(c.counters.closed.echo_mismatch, 0);
    assert_eq!(c.counters.bytes_in, 4 * N * 40);
    assert_eq!(c.percentiles["echo_rtt_us"].count, 4 * N);
    control(cctl, "close").unwrap();
    let c = wait_for(cctl, "client closed", LONG, |s| s.phase == "closed");
    assert_eq!((c.counters.open, c.counters.closed.local_close), (0, N));
    let s = wait_for(sctl, "server sees closes", LONG, |s| s.counters.open == 0);
    assert_eq!(s.counters.closed.peer_closed, N);
    stop(cctl, cl);
    stop(sctl, srv);
}
