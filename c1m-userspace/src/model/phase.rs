//! A run's phases as summary.json records them: what each did (its kind), what it cost
//! each process, the counts it closed with and the latencies measured within it.

use serde::{Deserialize, Serialize};

use super::kernel_vs_app::KernelVsApp;

/// CPU and memory of one process group over a phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(default)]
pub struct ProcessUsage {
    /// CPU seconds in user mode spent during the phase.
    pub cpu_user_s: f64,
    /// CPU seconds in the kernel (system) spent during the phase.
    pub cpu_sys_s: f64,
    /// At the end of the phase.
    pub rss_bytes: u64,
    /// Threads and open fds at the end of the phase, where measured (a foreign server).
    pub threads: Option<u64>,
    /// Open fds at the end of the phase, where measured (a foreign server).
    pub open_fds: Option<u64>,
}

/// What a phase of a run does. Its name says which one it is ("hold-2", the second
/// hold of a phase list); its kind, what it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PhaseKind {
    /// The ramp, then kernel and app agreeing.
    Setup,
    /// The connections held (`--idle`, or a `hold` phase).
    Hold,
    /// Broadcasts to every connection (`--pushes`, or a `push` phase).
    Push,
    /// The connections held while the client closes and reopens them (`--idle` with
    /// `--churn`, or a `churn` phase).
    Churn,
    /// The connections held while the client pings each (a `heartbeat` phase).
    Heartbeat,
    /// The connections held while each sends messages, echoed (a `messages` phase).
    Messages,
    /// Every connection closed.
    Teardown,
}

impl PhaseKind {
    /// The kind as a phase list and summary.json write it.
    pub fn name(self) -> &'static str {
        match self {
            PhaseKind::Setup => "setup",
            PhaseKind::Hold => "hold",
            PhaseKind::Push => "push",
            PhaseKind::Churn => "churn",
            PhaseKind::Heartbeat => "heartbeat",
            PhaseKind::Messages => "messages",
            PhaseKind::Teardown => "teardown",
        }
    }

    /// The kind a phase of the fixed sequence had by its name, for a run recorded
    /// before phases had kinds (`idle` held, unless it churned).
    fn of_fixed_name(name: &str, churned: bool) -> Option<PhaseKind> {
        Some(match name {
            "setup" => PhaseKind::Setup,
            "idle" if churned => PhaseKind::Churn,
            "idle" => PhaseKind::Hold,
            "push" => PhaseKind::Push,
            "teardown" => PhaseKind::Teardown,
            _ => return None,
        })
    }
}

/// Phases named by their kind, numbered from the second of a kind on (`hold`, `push`,
/// `hold-2`): a phase list's names, and the names runs' phases are lined up by.
pub fn kind_names(kinds: impl IntoIterator<Item = PhaseKind>) -> Vec<String> {
    let mut seen: Vec<PhaseKind> = Vec::new();
    kinds
        .into_iter()
        .map(|kind| {
            seen.push(kind);
            match seen.iter().filter(|k| **k == kind).count() {
                1 => kind.name().to_owned(),
                k => format!("{}-{k}", kind.name()),
            }
        })
        .collect()
}

/// The names `c1m compare` lines up the phases of different runs by: each phase by its
/// kind, numbered as [`kind_names`] numbers them, so the fixed sequence's `idle` is
/// `hold`, as a phase list's first hold is (a phase of no known kind keeps its name).
/// For a phase list's phases these are their own names.
pub(crate) fn compared_names(phases: &[Phase]) -> Vec<String> {
    let kinds: Vec<Option<PhaseKind>> = phases
        .iter()
        .map(|p| {
            p.kind
                .or_else(|| PhaseKind::of_fixed_name(&p.name, p.churned > 0))
        })
        .collect();
    let mut named = kind_names(kinds.iter().flatten().copied()).into_iter();
    phases
        .iter()
        .zip(&kinds)
        .map(|(p, k)| match k {
            Some(_) => named.next().unwrap_or_else(|| p.name.clone()),
            None => p.name.clone(),
        })
        .collect()
}

/// The phase whose figures stand for the held connections: `--idle`'s, else a phase
/// list's first hold.
pub fn held_phase(phases: &[Phase]) -> Option<&Phase> {
    phases
        .iter()
        .find(|p| p.name == "idle")
        .or_else(|| phases.iter().find(|p| p.kind == Some(PhaseKind::Hold)))
}

/// One phase of a run (setup, idle, push, teardown; or a phase list's, in its order)
/// and what it cost each process.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(default)]
pub struct Phase {
    /// "setup", "idle", "push", "teardown"; a phase list's are named by their kind,
    /// numbered from the second of a kind on ("hold", "push", "hold-2").
    pub name: String,
    /// What the phase did (None: a run recorded before phases had kinds).
    pub kind: Option<PhaseKind>,
    /// When the phase started, ms since the Unix epoch.
    pub started_unix_ms: u64,
    /// When the phase's work was done (the app's answers were taken then).
    pub ended_unix_ms: u64,
    /// Seconds from start to end of the phase's work (`end_walk_s` not included).
    pub duration_s: f64,
    /// Seconds the lab then spent walking every socket afresh for the phase's kernel
    /// column (0 without the observer). Not part of `duration_s`: the phase was over.
    pub end_walk_s: f64,
    /// CPU and memory of the server's processes over the phase.
    pub server: ProcessUsage,
    /// CPU and memory of the client's processes over the phase.
    pub client: ProcessUsage,
    /// CPU and memory of the lab process itself (observer and lab) over the phase.
    pub observer: ProcessUsage,
    /// Kernel bytes of the watched sockets at the end of the phase.
    pub kernel_socket_bytes: Option<u64>,
    /// /proc/meminfo MemAvailable at the end of the phase, bytes.
    pub box_mem_available_bytes: u64,
    /// Counts at the end of the phase.
    pub kernel_vs_app: Vec<KernelVsApp>,
    /// Free-form notes (e.g. "stopped early: Ctrl-C").
    pub notes: Vec<String>,
    /// `--heartbeat`: pings server and client sent during the phase (their counters at
    /// its end less those at its start).
    pub heartbeat_pings: u64,
    /// `--heartbeat` or a heartbeat phase: pongs within the timeout, server and client,
    /// during the phase (as `heartbeat_pings`).
    pub heartbeat_pongs: u64,
    /// Pongs after the timeout during the phase, both sides.
    pub heartbeat_late_pongs: u64,
    /// Pings unanswered by the timeout during the phase (each closed its connection),
    /// both sides.
    pub heartbeat_missed: u64,
    /// `--churn`: connections the client closed and reopened during the phase (its
    /// `churn.closed` at the end less at the start).
    pub churned: u64,
    /// `--churn`: the most TIME_WAIT sockets the kernel held at once in the phase, per
    /// side (the observer's walks: TIME_WAIT changes only at walks).
    pub time_wait_peak: Option<TimeWaitPeak>,
    /// `--message-rate`: messages the client sent during the phase (its counter at the
    /// phase's end less that at its start).
    pub messages_sent: u64,
    /// `--message-rate`: echoes the client received during the phase.
    pub messages_received: u64,
    /// TCP segments sent in the lab's network namespace during the phase (Tcp OutSegs
    /// at its end less at its start: both sides on one box, and anything else there);
    /// None when the MIB could not be read.
    #[serde(default)]
    pub tcp_out_segs: Option<u64>,
    /// `c1m run --server-message-rate`: the server's messages the client received
    /// during the phase.
    pub server_messages_received: u64,
    /// A client host's path from the run's start to the phase's end: its conntrack
    /// table and drops, veth and softnet drops (None: not read; one-box runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<crate::netpath::PathFigures>,
    /// Every latency histogram that recorded values during the phase, with what it
    /// recorded then (empty: none did, or a run recorded before phases had latencies).
    pub latency: Vec<PhaseLatency>,
}

/// The side whose process timed a latency.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum AppSide {
    /// c1m's client: every latency c1m times today.
    #[default]
    Client,
    /// The server (c1m's own times none).
    Server,
}

impl AppSide {
    /// "client" or "server", as the run's histograms are titled.
    pub fn name(self) -> &'static str {
        match self {
            AppSide::Client => "client",
            AppSide::Server => "server",
        }
    }
}

/// One latency histogram's values recorded during one phase: the side's histogram at
/// the phase's end less the same at its start (`figures::phase_latency`), so the
/// phases' counts add up to the run's. In µs, as the run's histograms.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq, Eq)]
#[serde(default)]
pub struct PhaseLatency {
    /// Whose histogram.
    pub side: AppSide,
    /// Its name, as the run's histograms are named ("message_us", "push_message_us").
    pub histogram: String,
    /// Values recorded during the phase.
    pub count: u64,
    /// Median, µs.
    pub p50: u64,
    /// 90th percentile, µs.
    pub p90: u64,
    /// 99th percentile, µs.
    pub p99: u64,
    /// 99.9th percentile, µs.
    pub p999: u64,
    /// Largest value recorded during the phase, µs.
    pub max: u64,
}

/// The most TIME_WAIT sockets of each side at once over a phase.
#[derive(
    Debug, Clone, Copy, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq, Eq,
)]
pub struct TimeWaitPeak {
    /// Server side (local port watched).
    pub server: i64,
    /// Client side (remote port watched).
    pub client: i64,
}

/// "after each phase, outside its secs: the observer's walk of every socket (setup 2.71 s,
/// …)", or None when no phase had one (no observer). The summary and the report say it.
pub(crate) fn end_walks_line(phases: &[Phase]) -> Option<String> {
    let walks: Vec<String> = phases
        .iter()
        .filter(|p| p.end_walk_s > 0.0)
        .map(|p| format!("{} {:.2} s", p.name, p.end_walk_s))
        .collect();
    (!walks.is_empty()).then(|| {
        format!(
            "after each phase, outside its secs: the observer's walk of every socket ({})",
            walks.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(name: &str, kind: Option<PhaseKind>) -> Phase {
        Phase {
            name: name.into(),
            kind,
            ..Phase::default()
        }
    }

    #[test]
    fn phases_of_either_sequence_line_up_by_kind() {
        use PhaseKind::{Hold, Push, Setup, Teardown};
        let names = |p: &[Phase]| compared_names(p);
        // The fixed sequence's idle is a hold.
        let fixed = [
            phase("setup", Some(Setup)),
            phase("idle", Some(Hold)),
            phase("push", Some(Push)),
            phase("teardown", Some(Teardown)),
        ];
        assert_eq!(names(&fixed), ["setup", "hold", "push", "teardown"]);
        // A phase list's names are their own.
        let list = [
            phase("setup", Some(Setup)),
            phase("hold", Some(Hold)),
            phase("push", Some(Push)),
            phase("hold-2", Some(Hold)),
            phase("teardown", Some(Teardown)),
        ];
        assert_eq!(
            names(&list),
            list.iter().map(|p| p.name.as_str()).collect::<Vec<_>>()
        );
        // A run recorded before kinds: its fixed names say them; others keep theirs.
        let mut old = [
            phase("setup", None),
            phase("idle", None),
            phase("odd", None),
            phase("teardown", None),
        ];
        assert_eq!(names(&old), ["setup", "hold", "odd", "teardown"]);
        old[1].churned = 5;
        assert_eq!(names(&old)[1], "churn");
    }
}
