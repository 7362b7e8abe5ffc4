//! A setup that stopped moving: the server no longer completes connections while the
//! client still has some to make. A single-process foreign server stops at its
//! RLIMIT_NOFILE (20,000 here); waiting out the setup timeout would say nothing the
//! first seconds of the stall did not, so the lab ends the phase and names the cause.

use std::time::{Duration, Instant};

use crate::figures::counts::Unanswered;

/// How long the client's connected count may stay flat, with connects pending, before
/// the setup counts as stalled. A paced ramp at 100 conn/s moves every 10 ms; a server
/// that pauses accepting on EMFILE (asyncio: 1 s) shows no progress for seconds.
pub(crate) const STALL_AFTER: Duration = Duration::from_secs(3);

/// Watches the client's connected count during the setup.
#[derive(Debug, Default)]
pub(crate) struct StallWatch {
    last: Option<(u64, Instant)>,
}

impl StallWatch {
    /// True when `connected` has not grown for [`STALL_AFTER`] while `pending` (connects
    /// attempted or still to attempt beyond those that completed) is not zero.
    pub(crate) fn stalled(&mut self, now: Instant, connected: u64, pending: bool) -> bool {
        match self.last {
            Some((n, since)) if n == connected => {
                pending && now.duration_since(since) >= STALL_AFTER
            }
            _ => {
                self.last = Some((connected, now));
                false
            }
        }
    }
}

/// What the kernel and the server's log said when the setup stalled.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct StallEvidence {
    pub connected: u64,
    pub attempted: u64,
    pub asked: u64,
    /// Server-side ESTABLISHED in the kernel the client never saw answered, split by
    /// the accept queues (`None`: no kernel view, or nothing unanswered).
    pub unanswered: Option<Unanswered>,
    /// Connections waiting in the server's accept queues now (None: no listener walk).
    pub accept_queue: Option<u64>,
    /// Open fds of the server's processes.
    pub server_fds: Option<u64>,
    pub accept_queue_overflows: Option<u64>,
    /// The soft fd limit the server runs with.
    pub nofile: Option<u64>,
    /// The first line of the server's stderr that says it ran out of fds.
    pub emfile_line: Option<String>,
}

impl StallEvidence {
    /// One line: where it stopped and why, as far as the evidence goes.
    pub(crate) fn describe(&self) -> String {
        let mut s = format!(
            "setup stalled: the server stopped completing connections at {} of {} ({} attempted)",
            crate::fmt::count(self.connected),
            crate::fmt::count(self.asked),
            crate::fmt::count(self.attempted)
        );
        let mut kernel = Vec::new();
        if let Some(u) = self.unanswered {
            match (u.never_accepted, u.accepted_silent, self.accept_queue) {
                (Some(waiting), Some(silent), Some(queued)) => {
                    if silent > 0 {
                        let fds = self
                            .server_fds
                            .map(|f| format!("the server holds {} fds, ", crate::fmt::count(f)))
                            .unwrap_or_default();
                        kernel.push(format!(
                            "{} accepted, never answered ({fds}its accept queues {})",
                            crate::fmt::count(silent),
                            crate::fmt::count(queued)
                        ));
                    }
                    if waiting > 0 {
                        kernel.push(format!(
                            "{} ESTABLISHED in the kernel never accepted (waiting in the accept queues)",
                            crate::fmt::count(waiting)
                        ));
                    }
                }
                _ => kernel.push(format!(
                    "{} ESTABLISHED in the kernel the client never saw answered",
                    crate::fmt::count(u.total)
                )),
            }
        }
        if let Some(n) = self.accept_queue_overflows.filter(|n| *n > 0) {
            kernel.push(format!("{} accept-queue overflows", crate::fmt::count(n)));
        }
        if !kernel.is_empty() {
            s.push_str(&format!("; kernel: {}", kernel.join(", ")));
        }
        match (&self.emfile_line, self.nofile) {
            (Some(line), Some(limit)) => s.push_str(&format!(
                "; cause: out of file descriptors (RLIMIT_NOFILE {limit}), its stderr says {line:?}"
            )),
            (Some(line), None) => s.push_str(&format!(
                "; cause: out of file descriptors, its stderr says {line:?}"
            )),
            (None, Some(limit)) if self.connected + 100 >= limit => s.push_str(&format!(
                "; likely cause: its fd limit (RLIMIT_NOFILE {limit}): one process cannot hold more"
            )),
            _ => s.push_str("; the server's log says nothing about it"),
        }
        s
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn flat_with_connects_pending_is_a_stall_and_progress_resets_it() {
        let t0 = Instant::now();
        let mut w = StallWatch::default();
        assert!(!w.stalled(t0, 100, true));
        assert!(!w.stalled(t0 + Duration::from_secs(2), 100, true));
        assert!(!w.stalled(t0 + Duration::from_secs(2), 101, true));
        assert!(!w.stalled(t0 + Duration::from_secs(4), 101, true));
        assert!(w.stalled(t0 + Duration::from_secs(5), 101, true));
        // Nothing pending: a finished ramp is not a stall.
        assert!(!w.stalled(t0 + Duration::from_secs(9), 101, false));
    }

    #[test]
    fn the_cause_names_the_limit_and_the_log_line() {
        let e = StallEvidence {
            connected: 990,
            attempted: 3000,
            asked: 3000,
            unanswered: Unanswered::split(412, Some(1024)),
            accept_queue: Some(1024),
            server_fds: Some(998),
            accept_queue_overflows: Some(7),
            nofile: Some(1000),
            emfile_line: Some("OSError: [Errno 24] Too many open files".into()),
        };
        let line = e.describe();
        assert!(!line.contains('\n'));
        for part in [
            "at 990 of 3,000",
            "412 ESTABLISHED in the kernel never accepted (waiting in the accept queues)",
            "7 accept-queue overflows",
            "RLIMIT_NOFILE 1000",
            "Too many open files",
        ] {
            assert!(line.contains(part), "{part} in {line}");
        }
        assert!(!line.contains("never answered"), "{line}");
    }

    #[test]
    fn accepted_and_never_answered_is_told_from_never_accepted() {
        let mute = StallEvidence {
            connected: 0,
            attempted: 300,
            asked: 300,
            unanswered: Unanswered::split(300, Some(0)),
            accept_queue: Some(0),
            server_fds: Some(310),
            ..StallEvidence::default()
        };
        let line = mute.describe();
        assert!(
            line.contains(
                "300 accepted, never answered (the server holds 310 fds, its accept queues 0)"
            ),
            "{line}"
        );
        assert!(!line.contains("never accepted"), "{line}");
        // Both at once: the queue's share never accepted, the rest unanswered.
        let both = StallEvidence {
            unanswered: Unanswered::split(300, Some(100)),
            accept_queue: Some(100),
            ..mute
        };
        let line = both.describe();
        assert!(line.contains("200 accepted, never answered"), "{line}");
        assert!(
            line.contains("100 ESTABLISHED in the kernel never accepted"),
            "{line}"
        );
    }
}
