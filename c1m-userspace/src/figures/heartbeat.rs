//! `--heartbeat`'s figures, computed once from a run's record: what each side's pings
//! came to, the pong latency, and what keepalive cost over the idle phase, or a phase
//! list's heartbeat phase (CPU of server and client per million pings). The summary, report and exports read them.

use serde::Serialize;

use crate::{
    model::{
        RunRecord,
        phase::{Phase, PhaseKind},
    },
    workload::stats::{
        counters::Heartbeats,
        histograms::{HIST_NAMES, PONG, Percentiles},
        snapshot::AppSnapshot,
    },
};

/// One side's heartbeat at the end of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct HeartbeatFigures {
    /// "client" or "server": the side that sent the pings.
    pub side: &'static str,
    pub counts: Heartbeats,
    /// The pongs' latency (µs), where the side times them (the client).
    pub pong: Option<Percentiles>,
    /// CPU seconds of server and client over the idle phase per 1,000,000 pings sent in
    /// it (both sides' pings), when the idle phase had any.
    pub idle_cpu_s_per_million: Option<f64>,
    /// TCP segments sent in the idle phase (both sides) per ping sent in it: a ping, its
    /// pong and the ACKs the two draw.
    pub idle_segments_per_ping: Option<f64>,
    /// The phase the two above are over: a phase list's heartbeat phase that pinged most,
    /// else the held phase (`idle`, or the first hold).
    pub phase: Option<PhaseBeats>,
}

/// One phase's heartbeat (both sides: its counters at the phase's end less at its
/// start), named.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct PhaseBeats {
    pub name: String,
    /// A heartbeat phase (its counts are the phase's own), not the held phase.
    pub switched: bool,
    pub pings: u64,
    pub pongs: u64,
    pub late_pongs: u64,
    pub missed: u64,
}

/// The phase a run's per-phase heartbeat figures are over: its heartbeat phase that
/// pinged most, else its held phase.
pub(crate) fn phase_of(phases: &[Phase]) -> Option<&Phase> {
    phases
        .iter()
        .filter(|p| p.kind == Some(PhaseKind::Heartbeat) && p.heartbeat_pings > 0)
        .max_by_key(|p| p.heartbeat_pings)
        .or_else(|| crate::model::phase::held_phase(phases))
}

/// The heartbeat figures of each side that sent pings (client first).
pub(crate) fn of(run: &RunRecord) -> Vec<HeartbeatFigures> {
    let idle = phase_of(&run.phases);
    [("client", &run.client), ("server", &run.server)]
        .into_iter()
        .filter_map(|(side, snap)| side_of(side, snap.as_ref()?, idle))
        .collect()
}

fn side_of(
    side: &'static str,
    snap: &AppSnapshot,
    idle: Option<&Phase>,
) -> Option<HeartbeatFigures> {
    let counts = snap.counters.heartbeat;
    if counts.pings == 0 {
        return None;
    }
    let pong = snap
        .histogram(HIST_NAMES[PONG])
        .ok()
        .filter(|h| !h.is_empty())
        .map(|h| Percentiles::of(&h));
    Some(HeartbeatFigures {
        side,
        counts,
        pong,
        idle_cpu_s_per_million: idle.and_then(cpu_per_million_pings),
        idle_segments_per_ping: idle.and_then(segments_per_ping),
        phase: idle.map(|p| PhaseBeats {
            name: p.name.clone(),
            switched: p.kind == Some(PhaseKind::Heartbeat),
            pings: p.heartbeat_pings,
            pongs: p.heartbeat_pongs,
            late_pongs: p.heartbeat_late_pongs,
            missed: p.heartbeat_missed,
        }),
    })
}

/// CPU of server and client over `phase` per 1,000,000 pings sent in it.
pub(crate) fn cpu_per_million_pings(phase: &Phase) -> Option<f64> {
    (phase.heartbeat_pings > 0).then(|| {
        let cpu = phase.server.cpu_user_s
            + phase.server.cpu_sys_s
            + phase.client.cpu_user_s
            + phase.client.cpu_sys_s;
        cpu * 1e6 / phase.heartbeat_pings as f64
    })
}

/// TCP segments sent over `phase` per ping sent in it.
pub(crate) fn segments_per_ping(phase: &Phase) -> Option<f64> {
    let segs = phase.tcp_out_segs?;
    (phase.heartbeat_pings > 0).then(|| segs as f64 / phase.heartbeat_pings as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_per_million_pings_divides_both_sides_cpu() {
        let mut p = Phase::default();
        assert_eq!(cpu_per_million_pings(&p), None);
        p.heartbeat_pings = 500_000;
        p.server.cpu_user_s = 0.5;
        p.client.cpu_sys_s = 0.25;
        p.client.cpu_user_s = 0.25;
        assert_eq!(cpu_per_million_pings(&p), Some(2.0));
        assert_eq!(segments_per_ping(&p), None);
        p.tcp_out_segs = Some(1_500_000);
        assert_eq!(segments_per_ping(&p), Some(3.0));
    }
}
