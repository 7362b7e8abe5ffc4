//! What went wrong in a run, as one warning line each: the lab adds them to the run's
//! `warnings` (summary.json, the live view's notes, the report's top line, stderr), and
//! any warning makes the outcome "degraded". Pure functions of the snapshots, and the
//! outcome they make.

use crate::{model::Outcome, workload::stats::snapshot::AppSnapshot};

/// A worker process of `side` that died before teardown (its connections went with it).
pub(crate) fn worker_deaths(side: &str, snap: &AppSnapshot) -> Vec<String> {
    snap.workers
        .list
        .iter()
        .filter(|w| w.kind == crate::workload::stats::snapshot::ShardKind::Process && !w.alive)
        .filter_map(|w| {
            let why = w.exit.as_deref()?;
            Some(format!(
                "{side} worker {} (pid {}) died ({why}); its connections are lost (see {side}.log)",
                w.shard, w.pid
            ))
        })
        .collect()
}

/// The run's losses at its end: connections that were never established, or that
/// went with a dead worker.
pub(crate) fn losses(
    n: u64,
    server: Option<&AppSnapshot>,
    client: Option<&AppSnapshot>,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(c) = client {
        let k = &c.counters;
        if k.connected < n {
            let mut failures = k.failures;
            // Connects cut short by our own teardown are not failures of the ramp.
            failures.aborted = 0;
            let why: Vec<String> = failures
                .iter()
                .filter(|(_, v)| *v > 0)
                .map(|(name, v)| format!("{name}={v}"))
                .collect();
            out.push(format!(
                "only {} of {n} connections were established{}",
                k.connected,
                if why.is_empty() {
                    String::new()
                } else {
                    format!(" (failures: {})", why.join(" "))
                }
            ));
        }
    }
    let unanswered = server.map_or(0, |s| s.counters.closed.goodbye_unanswered);
    if unanswered > 0 {
        out.push(format!(
            "server: {} peers did not end their side within 5 s of the teardown's \
             goodbye (client host gone, or not reading): closed without their answer",
            crate::fmt::count(unanswered)
        ));
    }
    for (side, snap) in [("server", server), ("client", client)] {
        let lost = snap.map(|s| s.counters.closed.worker_lost).unwrap_or(0);
        if lost > 0 {
            out.push(format!(
                "{side}: {lost} connections lost with workers that died; per-connection {side} \
                 memory is left out (see {side}.log)"
            ));
        }
    }
    out
}

/// The run's outcome: failed on an error, else interrupted by the user, degraded by any
/// warning, or complete.
pub(crate) fn outcome(failed: bool, interrupted: bool, warned: bool) -> Outcome {
    if failed {
        Outcome::Failed
    } else if interrupted {
        Outcome::Interrupted
    } else if warned {
        Outcome::Degraded
    } else {
        Outcome::Complete
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::stats::snapshot::WorkerInfo;

    #[test]
    fn an_error_outranks_an_interruption_which_outranks_a_warning() {
        assert_eq!(outcome(true, true, true), Outcome::Failed);
        assert_eq!(outcome(false, true, true), Outcome::Interrupted);
        assert_eq!(outcome(false, false, true), Outcome::Degraded);
        assert_eq!(outcome(false, false, false), Outcome::Complete);
    }

    fn snap(connected: u64, lost: u64) -> AppSnapshot {
        let mut s = AppSnapshot::default();
        s.counters.connected = connected;
        s.counters.closed.worker_lost = lost;
        s.workers.list = vec![
            WorkerInfo {
                shard: 0,
                pid: 10,
                kind: crate::workload::stats::snapshot::ShardKind::Process,
                alive: true,
                open: 5,
                exit: None,
            },
            WorkerInfo {
                shard: 1,
                pid: 11,
                kind: crate::workload::stats::snapshot::ShardKind::Process,
                alive: false,
                open: 0,
                exit: Some("signal: 9 (SIGKILL)".into()),
            },
        ];
        s
    }

    #[test]
    fn a_dead_worker_and_its_connections_are_named() {
        let s = snap(0, 10_217);
        let d = worker_deaths("server", &s);
        assert_eq!(d.len(), 1);
        assert!(
            d[0].starts_with("server worker 1 (pid 11) died (signal: 9"),
            "{d:?}"
        );
        let c = snap(3000, 0);
        let l = losses(3000, Some(&s), Some(&c));
        assert_eq!(l.len(), 1, "{l:?}");
        assert!(l[0].starts_with("server: 10217 connections lost"), "{l:?}");
    }

    #[test]
    fn connections_never_established_are_counted_with_their_causes() {
        let mut c = snap(2990, 0);
        c.counters.failures.refused = 10;
        c.counters.failures.aborted = 3;
        let l = losses(3000, None, Some(&c));
        assert_eq!(
            l,
            ["only 2990 of 3000 connections were established (failures: refused=10)"]
        );
        assert!(losses(2990, None, Some(&c)).is_empty());
    }
}
