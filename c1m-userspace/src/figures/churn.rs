//! `--churn`'s figures, computed once from a run's record: what the client's churn came
//! to (closed = reopened + failed), the reopens' setup latency, the TIME_WAIT it left
//! (the most at once per side, by phase), the kernel's TIME_WAIT bucket overflows, and
//! the churning phase's CPU per 1,000 churns. The summary and report read them.

use serde::Serialize;

use crate::{
    model::{RunRecord, phase::TimeWaitPeak},
    workload::stats::{
        counters::Churn,
        histograms::{CHURN_SETUP, HIST_NAMES, Percentiles},
    },
};

/// The client's churn over a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct ChurnFigures {
    pub counts: Churn,
    /// Reopens' setup latency (µs), connect() to open.
    pub setup: Option<Percentiles>,
    /// The most TIME_WAIT sockets at once per side over the phase that churned.
    pub time_wait_peak: Option<TimeWaitPeak>,
    /// CPU seconds of server and client over the churning phase per 1,000 churns in it.
    pub cpu_ms_per_churn: Option<f64>,
    /// The phase that churned ("idle" in `c1m run`) and its churns.
    pub phase: Option<(String, u64)>,
    /// `TcpExt TCPTimeWaitOverflow` and `TWRecycled` moved since the observer attached
    /// (the last kernel view's), when read.
    pub time_wait_overflow: Option<u64>,
    pub time_wait_reused: Option<u64>,
}

/// The churn figures, when the client churned.
pub(crate) fn of(run: &RunRecord) -> Option<ChurnFigures> {
    let snap = run.client.as_ref()?;
    let counts = snap.counters.churn;
    if counts.closed == 0 {
        return None;
    }
    let setup = snap
        .histogram(HIST_NAMES[CHURN_SETUP])
        .ok()
        .filter(|h| !h.is_empty())
        .map(|h| Percentiles::of(&h));
    let phase = run
        .phases
        .iter()
        .filter(|p| p.churned > 0)
        .max_by_key(|p| p.churned);
    Some(ChurnFigures {
        counts,
        setup,
        time_wait_peak: phase.and_then(|p| p.time_wait_peak),
        cpu_ms_per_churn: phase.map(|p| {
            let cpu =
                p.server.cpu_user_s + p.server.cpu_sys_s + p.client.cpu_user_s + p.client.cpu_sys_s;
            cpu * 1e3 / p.churned as f64
        }),
        phase: phase.map(|p| (p.name.clone(), p.churned)),
        time_wait_overflow: mib(run).map(|m| m.time_wait_overflow),
        time_wait_reused: mib(run).map(|m| m.time_wait_reused),
    })
}

/// The kernel's counters moved since attach, at the run's last kernel view.
fn mib(run: &RunRecord) -> Option<&crate::observer::mib::MibCounters> {
    run.kernel.as_ref()?.mib.as_ref().map(|m| &m.since_attach)
}
