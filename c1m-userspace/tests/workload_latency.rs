//! Setup latency timed from the `connect()` call and from the pace's schedule (coordinated
//! omission): a client that cannot keep up with `--rate` must show it in the schedule-based
//! histograms only, one that keeps up must show both close, and both histograms of a pair
//! must count exactly the same connections. Ports 22000–22009, control 22900–22909.
#![allow(clippy::unwrap_used)] // panics are the assertions

use crate::workload_util;

use std::time::Duration;

use c1m::workload::stats::{
    histograms::{Percentiles, SETUP_LATENCY_PAIRS},
    snapshot::AppSnapshot,
};
use workload_util::{Proc, c1m, each_engine, wait_for, ws_server};

const LONG: Duration = Duration::from_secs(90);

fn client(port: u16, ctl: &str, n: u64, extra: &[&str]) -> Proc {
    Proc::spawn(
        "c1m client",
        c1m()
            .args(["client", "--ports", &port.to_string(), "--quiet", "--stay"])
            .args(["--control", ctl, "--hold", "forever", "-n", &n.to_string()])
            .args(extra),
    )
}

fn held(ctl: &str, n: u64) -> AppSnapshot {
    let c = wait_for(ctl, "client ramp", LONG, |s| s.phase == "hold");
    assert_eq!(
        (c.counters.connected, c.counters.failures.total()),
        (n, 0),
        "{:?}",
        c.counters.failures
    );
    c
}

fn pct(c: &AppSnapshot, name: &str) -> Percentiles {
    c.percentiles.get(name).copied().unwrap_or_default()
}

fn show(what: &str, c: &AppSnapshot) {
    let r = c.setup_rate.unwrap_or_default();
    eprintln!(
        "{what}: asked {:?}/s, achieved {:.0}/s over {:.3} s",
        r.asked_per_s,
        r.achieved_per_s.unwrap_or(0.0),
        r.duration_s
    );
    for name in SETUP_LATENCY_PAIRS.iter().flat_map(|(_, a, b)| [*a, *b]) {
        let p = pct(c, name);
        eprintln!(
            "  {name:<26} count {:>5} median {:>9} µs p99 {:>9} µs max {:>9} µs",
            p.count, p.p50, p.p99, p.max
        );
    }
}

/// Runs a WebSocket server on `port` and a client of `n` connections, waits for the ramp
/// to end, and returns the client's snapshot with each setup latency pair (call-based,
/// schedule-based) after checking both count exactly `n`.
fn ramp(
    port: u16,
    n: u64,
    extra: &[&str],
    what: &str,
) -> (AppSnapshot, Vec<(Percentiles, Percentiles)>) {
    let ctl = |k: u16| format!("127.0.0.1:{}", 22900 + 2 * (port - 22000) + k);
    let _server = ws_server(port, &ctl(0), &[]);
    let _client = client(port, &ctl(1), n, &[&["--mode", "ws"], extra].concat());
    let c = held(&ctl(1), n);
    show(what, &c);
    let pairs = SETUP_LATENCY_PAIRS
        .iter()
        // Plain ws: no TLS handshake to time (lab_tls_figures times it).
        .filter(|(_, call, _)| !call.starts_with("tls_"))
        .map(|(_, call, sched)| {
            let (a, b) = (pct(&c, call), pct(&c, sched));
            assert_eq!((a.count, b.count), (n, n), "{call} / {sched}");
            (a, b)
        })
        .collect();
    (c, pairs)
}

#[test]
fn a_client_behind_its_pace_shows_the_wait_only_from_the_schedule() {
    each_engine(|_| {
        // One shard, one connect or handshake in flight, asked for a million a second: every
        // WebSocket opens after the previous one, so the k-th waits for k - 1 whole opens
        // that its call-based latency never sees.
        const N: u64 = 3_000;
        let extra = ["--rate", "1000000", "--in-flight", "1", "--threads", "1"];
        let (c, pairs) = ramp(22000, N, &extra, "behind the pace");
        for (call, sched) in pairs {
            assert!(
                sched.p50 > 10 * call.p50.max(1),
                "median from the schedule {} µs should dwarf the one from the call, {} µs",
                sched.p50,
                call.p50
            );
        }
        let r = c.setup_rate.unwrap();
        assert_eq!((r.asked_per_s, r.connected), (Some(1e6), N));
        assert!(r.achieved_per_s.unwrap() < 1e5, "{r:?}");
    });
}

#[test]
fn a_client_that_keeps_up_shows_both_latencies_close() {
    each_engine(|_| {
        // 1,000 WebSocket connections at 500/s over 2 s: always a slot free, so a connect
        // starts within a pace tick (5 ms) of its schedule.
        const N: u64 = 1_000;
        let extra = ["--rate", "500", "--in-flight", "100"];
        let (c, pairs) = ramp(22001, N, &extra, "keeping up");
        for (call, sched) in pairs {
            // The pace tick plus slack for a shared two-core box, where the behind-the-pace
            // case above is hundreds of ms.
            assert!(
                sched.p50 < call.p50 + 50_000,
                "median from the schedule {} µs vs from the call {} µs",
                sched.p50,
                call.p50
            );
        }
        let r = c.setup_rate.unwrap();
        assert_eq!((r.asked_per_s, r.connected), (Some(500.0), N));
        let achieved = r.achieved_per_s.unwrap();
        assert!((450.0..=510.0).contains(&achieved), "{r:?}");
    });
}

#[test]
fn an_unpaced_client_has_no_schedule() {
    each_engine(|_| {
        const N: u64 = 200;
        let _server = ws_server(22002, "127.0.0.1:22904", &[]);
        let _client = client(22002, "127.0.0.1:22905", N, &["--mode", "hold"]);
        let c = held("127.0.0.1:22905", N);
        assert_eq!(pct(&c, "connect_us").count, N);
        assert_eq!(pct(&c, "connect_from_schedule_us").count, 0);
        assert_eq!(pct(&c, "ws_handshake_us").count, 0);
        let r = c.setup_rate.unwrap();
        assert_eq!((r.asked_per_s, r.connected), (None, N));
    });
}
