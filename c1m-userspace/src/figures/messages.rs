//! `--message-rate`'s figures, computed once from a run's record: what the client's
//! messages came to, their latency (from each message's schedule: coordinated omission
//! corrected), the idle phase's (or a message phase's) throughput, and what a message cost there (CPU of server
//! and client per million messages). The summary reads them. `--server-message-rate`'s
//! are beside them: what the server sent unasked and the client received, one way.

use serde::Serialize;

use crate::{
    model::{
        RunRecord,
        phase::{Phase, PhaseKind},
    },
    workload::stats::{
        counters::{Messages, ServerMessages},
        histograms::{HIST_NAMES, MESSAGE, Percentiles, SERVER_MESSAGE},
    },
};

/// The client's messages at the end of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct MessageFigures {
    pub counts: Messages,
    /// Messages the server echoed (its echo count; None: no snapshot of it, or a foreign
    /// server).
    pub echoed: Option<u64>,
    /// Latency (µs) from each message's scheduled instant to its echo read.
    pub latency: Option<Percentiles>,
    /// Bytes of each message's payload.
    pub size: u64,
    /// Echoes received a second over the idle phase, when it had any.
    pub idle_per_s: Option<f64>,
    /// CPU seconds of server and client over the idle phase per 1,000,000 messages sent
    /// in it.
    pub idle_cpu_s_per_million: Option<f64>,
    /// The phase the two above are over, and its own messages sent and received: a
    /// phase list's message phase that sent most, else the held phase.
    pub phase: Option<(String, u64, u64)>,
}

/// The message figures, None when the client sent none.
pub(crate) fn of(run: &RunRecord) -> Option<MessageFigures> {
    let snap = run.client.as_ref()?;
    let counts = snap.counters.messages;
    if counts.sent == 0 {
        return None;
    }
    let latency = snap
        .histogram(HIST_NAMES[MESSAGE])
        .ok()
        .filter(|h| !h.is_empty())
        .map(|h| Percentiles::of(&h));
    let idle = run
        .phases
        .iter()
        .filter(|p| p.kind == Some(PhaseKind::Messages) && p.messages_sent > 0)
        .max_by_key(|p| p.messages_sent)
        .or_else(|| crate::model::phase::held_phase(&run.phases));
    Some(MessageFigures {
        counts,
        echoed: run
            .server
            .as_ref()
            .map(|s| s.counters.echo_round_trips)
            .filter(|&n| n > 0),
        latency,
        size: run.config.message_size,
        idle_per_s: idle
            .filter(|p| p.duration_s > 0.0 && p.messages_received > 0)
            .map(|p| p.messages_received as f64 / p.duration_s),
        idle_cpu_s_per_million: idle.and_then(cpu_per_million_messages),
        phase: idle.map(|p| (p.name.clone(), p.messages_sent, p.messages_received)),
    })
}

/// The server's messages at the end of a run (`--server-message-rate`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct ServerMessageFigures {
    /// The server's `sent`, `late` and `capped`.
    pub server: ServerMessages,
    /// The client's `received`, and the numbers that were not in order: `gaps`,
    /// `skipped`, `out_of_order`, `duplicates` (None: no snapshot of the client).
    pub client: Option<ServerMessages>,
    /// Latency (µs) from each message's scheduled instant to the client's read.
    pub latency: Option<Percentiles>,
    /// Messages the client received a second over the idle phase, when it had any.
    pub idle_per_s: Option<f64>,
}

/// The server-message figures, None when the server sent none.
pub(crate) fn server_of(run: &RunRecord) -> Option<ServerMessageFigures> {
    let server = run.server.as_ref()?.counters.server_messages;
    if server.sent == 0 {
        return None;
    }
    let client = run.client.as_ref();
    let latency = client
        .and_then(|c| c.histogram(HIST_NAMES[SERVER_MESSAGE]).ok())
        .filter(|h| !h.is_empty())
        .map(|h| Percentiles::of(&h));
    let idle = run.phases.iter().find(|p| p.name == "idle");
    Some(ServerMessageFigures {
        server,
        client: client.map(|c| c.counters.server_messages),
        latency,
        idle_per_s: idle
            .filter(|p| p.duration_s > 0.0 && p.server_messages_received > 0)
            .map(|p| p.server_messages_received as f64 / p.duration_s),
    })
}

/// CPU of server and client over `phase` per 1,000,000 messages sent in it.
pub(crate) fn cpu_per_million_messages(phase: &Phase) -> Option<f64> {
    (phase.messages_sent > 0).then(|| {
        let cpu = phase.server.cpu_user_s
            + phase.server.cpu_sys_s
            + phase.client.cpu_user_s
            + phase.client.cpu_sys_s;
        cpu * 1e6 / phase.messages_sent as f64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_per_million_messages_divides_both_sides_cpu() {
        let mut p = Phase::default();
        assert_eq!(cpu_per_million_messages(&p), None);
        p.messages_sent = 2_000_000;
        p.server.cpu_user_s = 1.0;
        p.client.cpu_user_s = 2.0;
        p.client.cpu_sys_s = 1.0;
        assert_eq!(cpu_per_million_messages(&p), Some(2.0));
    }
}
