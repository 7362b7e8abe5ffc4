//! `--heartbeat` (issue 35 point 1): pings at an interval, phases spread evenly, pongs
//! counted and timed, connections closed for a missed pong; every ping accounted for
//! exactly: `pings = pongs + late_pongs + missed + unanswered + outstanding`. Against
//! c1m's server (both client engines), the Python `websockets` server (answers pings by
//! itself), a deaf peer (answers nothing) and a slow one (answers late). Ports
//! 23900–23919, control 23940–23949.
#![allow(clippy::unwrap_used)] // panics are the assertions

use std::{
    net::TcpStream,
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use c1m::workload::stats::{counters::Heartbeats, snapshot::AppSnapshot};

use crate::workload_util::{
    Proc, c1m, control, each_engine, require_python_websockets, stop, wait_for, ws_server,
};

const LONG: Duration = Duration::from_secs(60);
const N: u64 = 200;

fn client(port: u16, ctl: &str, extra: &[&str]) -> Proc {
    Proc::spawn(
        "client",
        c1m()
            .args(["client", "--mode", "ws", "--ports", &port.to_string()])
            .args(["--quiet", "--stay", "--control", ctl, "--hold", "forever"])
            .args(["-n", &N.to_string()])
            .args(extra),
    )
}

/// Every ping ended one way or is still outstanding.
fn accounted(hb: &Heartbeats) {
    assert_eq!(hb.unaccounted(), 0, "{hb:?}");
}

/// Ramp, then `idle` of pings at `interval` answered by the server on `port`: every
/// connection pinged about idle/interval times, all answered, none missed; after the
/// teardown nothing is outstanding and the identity still holds.
fn answered(port: u16, cctl: &str, interval_ms: u64, idle: Duration) -> AppSnapshot {
    // A generous timeout: on a loaded box a pong may come late, never missed.
    let every = format!("{interval_ms}ms");
    let cl = client(
        port,
        cctl,
        &["--heartbeat", &every, "--heartbeat-timeout", "2s"],
    );
    let ramped = wait_for(cctl, "ramp", LONG, |s| {
        s.phase == "hold" && s.counters.open == N
    });
    let before = ramped.counters.heartbeat.pings;
    std::thread::sleep(idle);
    let c = stats_now(cctl);
    let hb = c.counters.heartbeat;
    accounted(&hb);
    let cycles = idle.as_millis() as u64 / interval_ms;
    assert!(
        hb.pings - before >= N * cycles - N,
        "{} pings in {idle:?} of {interval_ms} ms slots over {N}: {hb:?}",
        hb.pings - before
    );
    assert_eq!((hb.missed, hb.unsolicited_pongs), (0, 0), "{hb:?}");
    assert_eq!(c.counters.closed.total(), 0, "{:?}", c.counters.closed);
    assert!(
        hb.outstanding <= N,
        "one ping at most per connection: {hb:?}"
    );
    // Answered: all but the ones still in flight.
    assert!(hb.pongs + hb.late_pongs + N >= hb.pings, "{hb:?}");
    assert_eq!(
        c.percentiles["pong_us"].count,
        hb.pongs + hb.late_pongs,
        "one latency per answer"
    );
    control(cctl, "close").unwrap();
    let end = wait_for(cctl, "teardown", LONG, |s| s.phase == "closed");
    let hb = end.counters.heartbeat;
    accounted(&hb);
    assert_eq!(hb.outstanding, 0, "{hb:?}");
    assert_eq!(hb.missed, 0, "{hb:?}");
    stop(cctl, cl);
    end
}

/// A fresh snapshot (the shards report every 250 ms: wait one report out).
fn stats_now(ctl: &str) -> AppSnapshot {
    std::thread::sleep(Duration::from_millis(400));
    crate::workload_util::stats(ctl).unwrap()
}

#[test]
fn against_c1ms_server_every_ping_is_answered_and_accounted_for() {
    each_engine(|_| {
        let (port, sctl, cctl) = (23900, "127.0.0.1:23940", "127.0.0.1:23941");
        let srv = ws_server(port, sctl, &[]);
        let end = answered(port, cctl, 200, Duration::from_secs(2));
        let s = crate::workload_util::stats(sctl).unwrap();
        // The server answered every ping that reached it (those in flight at the close
        // excepted).
        assert!(
            s.counters.ws_pings_in <= end.counters.heartbeat.pings
                && s.counters.ws_pings_in + N >= end.counters.heartbeat.pings,
            "server saw {} pings of {}",
            s.counters.ws_pings_in,
            end.counters.heartbeat.pings
        );
        stop(sctl, srv);
    });
}

#[test]
fn c1ms_server_pings_and_both_client_engines_answer() {
    each_engine(|_| {
        let (port, sctl, cctl) = (23906, "127.0.0.1:23946", "127.0.0.1:23947");
        let srv = Proc::spawn(
            "c1m server",
            c1m()
                .args(["server", "--mode", "ws", "--ports", &port.to_string()])
                .args(["--quiet", "--control", sctl])
                .args(["--heartbeat", "200ms"]),
        );
        wait_for(sctl, "server up", LONG, |s| s.phase == "running");
        let cl = client(port, cctl, &[]);
        wait_for(cctl, "ramp", LONG, |s| {
            s.phase == "hold" && s.counters.open == N
        });
        std::thread::sleep(Duration::from_secs(2));
        let s = stats_now(sctl);
        let hb = s.counters.heartbeat;
        accounted(&hb);
        assert!(hb.pings >= 9 * N, "2 s of 200 ms slots over {N}: {hb:?}");
        assert_eq!((hb.missed, hb.unsolicited_pongs), (0, 0), "{hb:?}");
        assert!(hb.pongs + hb.late_pongs + N >= hb.pings, "{hb:?}");
        // Read between two of the server's: what the client had received is at least
        // what the server had answered before, and at most what it had sent after (one
        // read of each side drew "2536 of 2520" when pings went on between them). A
        // side's counts are as of its shards' last reports (every 250 ms), so the reads
        // are a second apart.
        std::thread::sleep(Duration::from_secs(1));
        let c = crate::workload_util::stats(cctl).unwrap();
        std::thread::sleep(Duration::from_secs(1));
        let after = stats_now(sctl).counters.heartbeat;
        assert!(
            hb.pongs + hb.late_pongs <= c.counters.ws_pings_in
                && c.counters.ws_pings_in <= after.pings,
            "client received {} pings; the server had {} answered before and {} sent after",
            c.counters.ws_pings_in,
            hb.pongs + hb.late_pongs,
            after.pings
        );
        stop(cctl, cl);
        let s = wait_for(sctl, "clients gone", LONG, |s| s.counters.open == 0);
        accounted(&s.counters.heartbeat);
        assert_eq!(s.counters.heartbeat.outstanding, 0);
        stop(sctl, srv);
    });
}

/// A peer that answers each ping 400 ms late, against a 100 ms timeout and 2 s between
/// pings: every answer is a late pong (after the timeout, before the verdict at the next
/// slot), none on time, none missed, each timed.
#[test]
fn a_slow_peers_pongs_all_count_late_and_none_missed() {
    each_engine(|_| {
        let (port, cctl) = (23908, "127.0.0.1:23948");
        let srv = python_server(
            "deaf_ws.py",
            &["--port", &port.to_string(), "--pong-delay", "0.4"],
            port,
        );
        let cl = client(
            port,
            cctl,
            &["--heartbeat", "2s", "--heartbeat-timeout", "100ms"],
        );
        wait_for(cctl, "every connection answered late once", LONG, |s| {
            s.counters.open == N && s.counters.heartbeat.late_pongs >= N
        });
        control(cctl, "close").unwrap();
        let end = wait_for(cctl, "teardown", LONG, |s| s.phase == "closed");
        let hb = end.counters.heartbeat;
        accounted(&hb);
        assert_eq!((hb.pongs, hb.missed, hb.outstanding), (0, 0, 0), "{hb:?}");
        assert_eq!(hb.late_pongs + hb.unanswered, hb.pings, "{hb:?}");
        assert_eq!(end.counters.closed.heartbeat_missed, 0);
        let pong = &end.percentiles["pong_us"];
        assert_eq!(pong.count, hb.late_pongs, "one latency per late pong");
        // The histogram keeps 3 significant digits: near 400 ms its buckets are 256 µs
        // wide and `min` is its bucket's lower bound (a pong 400.1 ms late read 399,872).
        assert!(pong.min >= 399_700, "answered 400 ms late: {pong:?}");
        stop(cctl, cl);
        terminate(srv);
    });
}

fn python_server(script: &str, args: &[&str], port: u16) -> Proc {
    require_python_websockets();
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/servers")
        .join(script);
    let p = Proc::spawn(
        "python server",
        Command::new("python3").arg(path).args(args),
    );
    let deadline = Instant::now() + LONG;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "{script} never listened on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    p
}

fn terminate(p: Proc) -> String {
    let pid = p.child.as_ref().unwrap().id();
    // SAFETY: kill has no memory preconditions; the pid is our own live child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    String::from_utf8_lossy(&p.wait(LONG).stdout).into_owned()
}

#[test]
fn against_the_python_reference_server_pongs_come_by_themselves() {
    each_engine(|_| {
        let port = 23902;
        let srv = python_server("ws_server.py", &["--ports", &port.to_string()], port);
        answered(port, "127.0.0.1:23942", 200, Duration::from_secs(2));
        terminate(srv);
    });
}

#[test]
fn a_deaf_peer_gets_every_connection_closed_as_missed_and_pings_spread_evenly() {
    each_engine(|_| {
        let (port, cctl) = (23904, "127.0.0.1:23944");
        let srv = python_server("deaf_ws.py", &["--port", &port.to_string()], port);
        let cl = client(
            port,
            cctl,
            &["--heartbeat", "500ms", "--heartbeat-timeout", "300ms"],
        );
        let c = wait_for(cctl, "every connection closed as missed", LONG, |s| {
            s.counters.connected == N && s.counters.open == 0
        });
        let hb = c.counters.heartbeat;
        accounted(&hb);
        // One ping each, no pong: closed at the connection's next slot.
        assert_eq!(
            (hb.pings, hb.missed, hb.pongs, hb.late_pongs, hb.outstanding),
            (N, N, 0, 0, 0),
            "{hb:?}"
        );
        assert_eq!(
            c.counters.closed.heartbeat_missed, N,
            "{:?}",
            c.counters.closed
        );
        assert_eq!(c.counters.closed.total(), N, "{:?}", c.counters.closed);
        stop(cctl, cl);
        // No herd: the first pings spread over the interval, ~N/10 per 50 ms.
        let out = terminate(srv);
        let t: Vec<f64> = out
            .lines()
            .filter_map(|l| l.strip_prefix("ping "))
            .map(|v| v.parse().unwrap())
            .collect();
        assert_eq!(t.len() as u64, N, "{out}");
        let first = t.iter().cloned().fold(f64::MAX, f64::min);
        let mut buckets = [0u32; 10];
        for v in &t {
            // A connection that opened after its slot came up is pinged a cycle later,
            // in the same phase.
            let b = (((v - first) % 0.5) / 0.05) as usize;
            buckets[b.min(9)] += 1;
        }
        let most = *buckets.iter().max().unwrap();
        assert!(
            most as u64 <= 3 * N / 10,
            "pings per 50 ms of the 500 ms interval: {buckets:?}"
        );
    });
}
