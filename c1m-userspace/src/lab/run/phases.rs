//! The decisions of the run's phases (setup, idle, push, teardown), as pure functions of
//! the latest snapshots and the time gone: when a phase is done, when its limit has
//! passed, whose count judges a push. The loop that polls and waits is `drive.rs`; here
//! nothing waits, so each decision is tested without sockets.

use std::time::Duration;

use crate::{observer::KernelView, workload::stats::AppSnapshot};

/// How long a phase may take.
#[derive(Clone, Copy, Debug)]
pub(super) enum Limit {
    /// At most this long in all.
    Total(Duration),
    /// As long as `Progress` keeps growing; fails after this long without a step.
    Stall(Duration, Progress),
}

/// What a phase judged by [`Limit::Stall`] counts as a step forward.
#[derive(Clone, Copy, Debug)]
pub(super) enum Progress {
    /// Connects finished (connected or failed) by the client; the server's accepts
    /// when the clients are on other hosts.
    Connects,
    /// Frames of this push received (the server's frames written, for external clients).
    Push(u64),
}

/// A ramp with no connect finished (connected or failed) for this long is stuck: each
/// connect gives up after 10 s (`--connect-timeout`). A fixed budget from the asked
/// rate failed the largest target: 1,732,000 asked, the box slowed from 10k to ~4k
/// conn/s past 1.5M (3.3M sockets in the 262,144-bucket established hash), and the
/// 3 × ramp + 2 min = 328 s ran out at 1,662,915 with the ramp still moving.
pub(super) const SETUP_STALL: Duration = Duration::from_secs(120);

/// A push with no frame received for this long is stuck. A fixed 120 s failed the
/// largest target: at 1,757,881 connections on a loaded box, 823,411 frames had arrived
/// with the push still moving.
pub(super) const PUSH_STALL: Duration = Duration::from_secs(30);

/// Server-side connections ESTABLISHED in the kernel (the app's open count without
/// the observer).
pub(super) fn server_established(s: Option<&AppSnapshot>, k: Option<&KernelView>) -> u64 {
    use c1m_common::tcp_state::ESTABLISHED;
    match k {
        Some(k) => k.server.state(ESTABLISHED).max(0) as u64,
        None => s.map(|s| s.counters.open).unwrap_or(0),
    }
}

/// External clients: kernel ESTABLISHED equals the server's open count.
pub(super) fn server_counts_agree(s: Option<&AppSnapshot>, k: Option<&KernelView>) -> bool {
    s.is_some_and(|s| server_established(Some(s), k) == s.counters.open)
}

/// Kernel ESTABLISHED equals the app's open count on both sides.
pub(super) fn counts_agree(
    s: Option<&AppSnapshot>,
    c: Option<&AppSnapshot>,
    k: Option<&KernelView>,
) -> bool {
    use c1m_common::tcp_state::ESTABLISHED;
    let (Some(s), Some(c)) = (s, c) else {
        return false;
    };
    match k {
        Some(k) => {
            k.server.state(ESTABLISHED) == s.counters.open as i64
                && k.client.state(ESTABLISHED) == c.counters.open as i64
        }
        None => s.counters.open == c.counters.open,
    }
}

/// Whose count of a push's frames judges it: the lab's client (frames received) or, with
/// external clients, the server (frames written; what each host received is in its own
/// folder, and `c1m merge` checks it). One choice for the wait, its stall limit and its
/// warning.
pub(super) fn push_witness<'a>(
    external: bool,
    server: Option<&'a AppSnapshot>,
    client: Option<&'a AppSnapshot>,
) -> Option<&'a AppSnapshot> {
    if external { server } else { client }
}
