//! `--total-message-rate` over several client processes: the rate is the run's total,
//! and each process sends its part. c1m splits a client two ways: worker processes of
//! one `c1m client` (`--workers`, as `c1m run`'s client does past one process's fds),
//! each shard told the total's per-connection rate; and client processes of their own
//! (`--shard I/N`, as `c1m run --hosts` and the Kubernetes Job start them), each taking
//! its connections' part of the total. Exact: every message sent came back, and the
//! server echoed each once. The split, by counts: a connection sends at most one message
//! per interval of its schedule, from its shard's ramp end to its drain, both inside its
//! process's life, so a process sends at most its connections × (rate × life + 1); one
//! that took more than its part (the whole total, or the total over its own connections
//! alone) goes past that bound whenever its life is short against the hold; and since a
//! sender that fell behind catches every missed message up, a process sends at least 70%
//! of its part over the hold, which one that took half of it cannot. Ports 9440–9443.
#![allow(clippy::unwrap_used)] // panics are the assertions

use std::{
    process::Output,
    time::{Duration, Instant},
};

use c1m::workload::stats::snapshot::{AppSnapshot, ShardKind};

use crate::workload_util::{Proc, c1m, control, scratch, wait_for};

const LONG: Duration = Duration::from_secs(90);
/// The hold, seconds: long against a process's start and teardown.
const HOLD: u64 = 3;
/// Messages a second over all connections of the run.
const TOTAL: u64 = 1_010;

/// A `c1m client` run as the test saw it: its final snapshot, how long it lived (from
/// before its spawn to after its exit) and its output.
struct ClientRun {
    snap: AppSnapshot,
    life: Duration,
    out: Output,
}

/// Starts `c1m client` against `port` holding `n` ws connections for [`HOLD`] s at
/// [`TOTAL`] messages a second in all, with `extra`.
fn start(port: u16, n: u64, extra: &[&str]) -> (Proc, Instant, tempfile::TempDir) {
    let dir = scratch("message-rate-processes");
    let began = Instant::now();
    let p = Proc::spawn(
        "client",
        c1m()
            .args(["client", "--mode", "ws", "--ports", &port.to_string()])
            .args([
                "--quiet",
                "--hold",
                &format!("{HOLD}s"),
                "-n",
                &n.to_string(),
            ])
            .args(["--total-message-rate", &TOTAL.to_string()])
            .arg("--stats-json")
            .arg(dir.path().join("client.json"))
            .args(extra),
    );
    (p, began, dir)
}

fn finish((p, began, dir): (Proc, Instant, tempfile::TempDir)) -> ClientRun {
    let out = p.wait(LONG);
    let life = began.elapsed();
    assert!(
        out.status.success(),
        "{}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let snap =
        serde_json::from_slice(&std::fs::read(dir.path().join("client.json")).unwrap()).unwrap();
    ClientRun { snap, life, out }
}

/// Every message of `c` came back, none lost, out or unmatched; and its `sent` is within
/// what `conns` connections at `per_conn` a second can send in its life, and at least
/// 70% of what they send over the hold.
fn exact_and_within_its_part(c: &ClientRun, conns: u64, per_conn: f64) -> u64 {
    let m = c.snap.counters.messages;
    assert_eq!(
        (m.received, m.lost, m.outstanding, m.unmatched, m.capped),
        (m.sent, 0, 0, 0, 0),
        "{m:?}"
    );
    let most = conns * ((per_conn * c.life.as_secs_f64()).floor() as u64 + 1);
    assert!(
        m.sent <= most,
        "{} sent by {conns} connections at {per_conn}/s in a life of {:?}: at most {most}",
        m.sent,
        c.life
    );
    let least = (conns as f64 * per_conn * HOLD as f64 * 0.7) as u64;
    eprintln!(
        "{conns} connections at {per_conn}/s, life {:?}: {} sent, between {least} and {most}",
        c.life, m.sent
    );
    assert!(m.sent >= least, "{} sent, under 70% of its part", m.sent);
    m.sent
}

fn c1m_server(port: u16, ctl: &str) -> Proc {
    let p = Proc::spawn(
        "c1m server",
        c1m()
            .args(["server", "--mode", "ws", "--ports", &port.to_string()])
            .args(["--quiet", "--control", ctl]),
    );
    wait_for(ctl, "server up", LONG, |s| s.phase == "running");
    p
}

/// The server's echoes once every client is gone; then it stops.
fn echoed_then_stop(ctl: &str, p: Proc) -> u64 {
    let s = wait_for(ctl, "clients gone", LONG, |s| {
        s.counters.open == 0 && s.counters.accepted > 0
    });
    control(ctl, "stop").unwrap();
    assert!(p.wait(LONG).status.success());
    s.counters.echo_round_trips
}

#[test]
fn two_worker_processes_share_the_total_and_every_message_comes_back() {
    const N: u64 = 101;
    let (port, ctl) = (9440, "127.0.0.1:9441");
    let srv = c1m_server(port, ctl);
    let c = finish(start(port, N, &["--workers", "2"]));
    let w = &c.snap.workers;
    assert_eq!(w.count, 2, "{w:?}");
    assert!(w.list.iter().all(|x| x.kind == ShardKind::Process), "{w:?}");
    assert_ne!(w.list[0].pid, w.list[1].pid, "{w:?}");
    // 1,010/s over 101 connections: 10/s each, in both workers.
    let sent = exact_and_within_its_part(&c, N, TOTAL as f64 / N as f64);
    assert_eq!(
        echoed_then_stop(ctl, srv),
        sent,
        "the server echoed each once"
    );
}

#[test]
fn two_client_processes_take_their_parts_of_the_total() {
    const N: u64 = 101;
    let (port, ctl) = (9442, "127.0.0.1:9443");
    let srv = c1m_server(port, ctl);
    // Both at once: process 0 holds 51 connections, process 1 holds 50.
    let runs: Vec<ClientRun> = [0, 1]
        .map(|i| start(port, N, &["--shard", &format!("{i}/2")]))
        .into_iter()
        .map(finish)
        .collect();
    let mut sent = 0;
    for (i, (c, conns)) in runs.iter().zip([51u64, 50]).enumerate() {
        // Its part said in words: 1,010/s × 51/101 and × 50/101.
        let part = TOTAL * conns / N;
        let says = format!(
            "c1m client: shard {i}/2: {conns} of {N} connections, 0 conn/s, messages {}/s of \
             1,010/s",
            part
        );
        let stdout = String::from_utf8_lossy(&c.out.stdout);
        assert!(stdout.contains(&says), "{says:?} in {stdout}");
        assert_eq!(c.snap.target, conns);
        // Its part over its connections: the run's 10/s each.
        sent += exact_and_within_its_part(c, conns, part as f64 / conns as f64);
    }
    assert_eq!(
        echoed_then_stop(ctl, srv),
        sent,
        "the server echoed each once"
    );
}
