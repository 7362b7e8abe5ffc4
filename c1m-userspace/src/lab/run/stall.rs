//! A setup that stopped moving: the server no longer completes connections while the
//! client still has some to make. A single-process foreign server stops at its
//! RLIMIT_NOFILE (20,000 here); waiting out the setup timeout would say nothing the
//! first seconds of the stall did not, so the lab ends the phase and names the cause.

use std::time::{Duration, Instant};

use crate::{figures::counts::Unanswered, workload::stats::counters::Counters};

/// How long the client's connected count may stay flat, with connects pending, before
/// the setup counts as stalled. A paced ramp at 100 conn/s moves every 10 ms; a server
/// that pauses accepting on EMFILE (asyncio: 1 s) shows no progress for seconds.
pub(crate) const STALL_AFTER: Duration = Duration::from_secs(3);

/// What the server has done for the client so far: connections set up, and TLS
/// handshakes finished (each one the server's answer to a ClientHello).
pub(crate) fn server_progress(c: &Counters) -> u64 {
    c.connected.saturating_add(c.tls_handshakes.total())
}

/// A server that used at least this share of a core while nothing completed is working
/// through a backlog, not stalled. Measured (Python `websockets` under TLS, 1,024 in
/// flight, 4,000 and 6,000 connections on this box): it works in waves, every TLS
/// handshake of the in-flight connections, then every upgrade, so neither count moved
/// for up to 4.3 s at a time while it used 0.6–0.7 of a core throughout; with the
/// lab's 2,048 in flight the waves are twice as long. The stalls this watch is for use
/// none: a server paused on EMFILE (asyncio retries accept once a second), or one that
/// accepts and answers nothing. Weighed under TLS only: a plain connection costs the
/// server microseconds, so without TLS a busy server whose counts stand still for 3 s is
/// spinning, not working through a backlog (a test's server out of fds retries accept
/// at full speed: `lab_foreign`, 991 of 3,000 and no stall named when it counted).
pub(crate) const BUSY_CORES: f64 = 0.2;

/// A server whose processes waited for a CPU at least this share of the window, and
/// twice as long as they ran, is starved by the box, not stalled: measured in a suite
/// beside a build, Python `websockets` answered 43 of 2,091 accepted connections in 3 s
/// on 0.12 of a core, then all 3,000 once it got the CPU. A server out of fds that
/// spins on accept runs as much as it waits, and one that answers nothing sleeps.
pub(crate) const STARVED_SHARE: f64 = 0.5;

/// What the server has used so far: CPU seconds, and seconds its processes waited for
/// a CPU while runnable (None: unknown).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct ServerTime {
    pub cpu_s: Option<f64>,
    pub run_wait_s: Option<f64>,
}

/// Watches the client's [`server_progress`] and the server's CPU during the setup.
#[derive(Debug, Default)]
pub(crate) struct StallWatch {
    /// The progress last seen to move, when, and the server's times then.
    last: Option<(u64, Instant, ServerTime)>,
    /// The server's CPU counts as work (a TLS run: see [`BUSY_CORES`]).
    weighs_cpu: bool,
}

impl StallWatch {
    /// A watch for a run with or without TLS.
    pub(crate) fn new(tls: bool) -> StallWatch {
        StallWatch {
            last: None,
            weighs_cpu: tls,
        }
    }

    /// True when `progress` ([`server_progress`]) has not grown for [`STALL_AFTER`]
    /// while `pending` (connects attempted or still to attempt beyond those that
    /// completed), and the server (`server`: its times so far) neither used
    /// [`BUSY_CORES`] of a core meanwhile (weighed under TLS) nor was starved of the
    /// CPU ([`STARVED_SHARE`]). A busy or starved server starts a new window: it is
    /// judged again [`STALL_AFTER`] later.
    pub(crate) fn stalled(
        &mut self,
        now: Instant,
        progress: u64,
        server: ServerTime,
        pending: bool,
    ) -> bool {
        match self.last {
            Some((n, since, then)) if n == progress => {
                let waited = now.duration_since(since);
                if !pending || waited < STALL_AFTER {
                    return false;
                }
                let window = waited.as_secs_f64();
                let used = then.cpu_s.zip(server.cpu_s).map(|(a, b)| b - a);
                let busy = self.weighs_cpu && used.is_some_and(|u| u >= BUSY_CORES * window);
                let starved = then
                    .run_wait_s
                    .zip(server.run_wait_s)
                    .map(|(a, b)| b - a)
                    .is_some_and(|w| w >= STARVED_SHARE * window && w >= 2.0 * used.unwrap_or(0.0));
                if busy || starved {
                    self.last = Some((n, now, server));
                }
                !(busy || starved)
            }
            _ => {
                self.last = Some((progress, now, server));
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
    /// The server's processes and the most fds one of them holds (a server of workers).
    pub fds_per_process: Option<(u64, u64)>,
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
            (None, Some(limit)) => match self.fds_per_process {
                // Workers: one at its limit stalls what the kernel hands it.
                Some((processes, most)) if processes > 1 => {
                    if most + 100 >= limit {
                        s.push_str(&format!(
                            "; likely cause: one of its {processes} processes reached its fd limit (RLIMIT_NOFILE {limit}, it holds {})",
                            crate::fmt::count(most)
                        ));
                    } else {
                        s.push_str(&format!(
                            "; not its fd limit: none of its {processes} processes holds more than {} of {} fds; the server's log says nothing about it",
                            crate::fmt::count(most),
                            crate::fmt::count(limit)
                        ));
                    }
                }
                _ if self.connected + 100 >= limit => s.push_str(&format!(
                    "; likely cause: its fd limit (RLIMIT_NOFILE {limit}): one process cannot hold more"
                )),
                _ => s.push_str("; the server's log says nothing about it"),
            },
            _ => s.push_str("; the server's log says nothing about it"),
        }
        s
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    fn cpu(s: f64) -> ServerTime {
        ServerTime {
            cpu_s: Some(s),
            run_wait_s: None,
        }
    }

    fn times(cpu_s: f64, run_wait_s: f64) -> ServerTime {
        ServerTime {
            cpu_s: Some(cpu_s),
            run_wait_s: Some(run_wait_s),
        }
    }

    #[test]
    fn flat_with_connects_pending_is_a_stall_and_progress_resets_it() {
        let t0 = Instant::now();
        let mut w = StallWatch::default();
        assert!(!w.stalled(t0, 100, ServerTime::default(), true));
        assert!(!w.stalled(
            t0 + Duration::from_secs(2),
            100,
            ServerTime::default(),
            true
        ));
        assert!(!w.stalled(
            t0 + Duration::from_secs(2),
            101,
            ServerTime::default(),
            true
        ));
        assert!(!w.stalled(
            t0 + Duration::from_secs(4),
            101,
            ServerTime::default(),
            true
        ));
        assert!(w.stalled(
            t0 + Duration::from_secs(5),
            101,
            ServerTime::default(),
            true
        ));
        // Nothing pending: a finished ramp is not a stall.
        assert!(!w.stalled(
            t0 + Duration::from_secs(9),
            101,
            ServerTime::default(),
            false
        ));
    }

    #[test]
    fn tls_handshakes_finishing_are_progress_a_silent_server_is_not() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut c = Counters::default();
        let mut w = StallWatch::default();
        assert!(!w.stalled(t0, server_progress(&c), ServerTime::default(), true));
        // No connection opens for 6 s, but the server finishes handshakes every second.
        for s in 1..=6 {
            c.tls_handshakes.full += 450;
            assert!(
                !w.stalled(at(s), server_progress(&c), ServerTime::default(), true),
                "{s} s"
            );
        }
        // Then it answers nothing and uses no CPU: stalled 3 s later.
        assert!(!w.stalled(at(8), server_progress(&c), ServerTime::default(), true));
        assert!(w.stalled(at(9), server_progress(&c), ServerTime::default(), true));
    }

    #[test]
    fn a_busy_server_is_slow_not_stalled_until_its_cpu_stops() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut w = StallWatch::new(true);
        // The measured Python server between two waves: nothing completes for 4.3 s
        // and more, at 0.6 of a core.
        assert!(!w.stalled(t0, 1024, cpu(10.0), true));
        assert!(!w.stalled(at(3), 1024, cpu(11.8), true));
        assert!(!w.stalled(at(5), 1024, cpu(13.0), true));
        assert!(!w.stalled(at(6), 1024, cpu(13.6), true));
        // It stops working (0.1 of a core): a stall, once a whole window is idle.
        assert!(!w.stalled(at(8), 1024, cpu(13.8), true));
        assert!(w.stalled(at(9), 1024, cpu(13.9), true));
        // No CPU figure: the counts alone decide, as before.
        let mut blind = StallWatch::new(true);
        assert!(!blind.stalled(t0, 5, ServerTime::default(), true));
        assert!(blind.stalled(at(3), 5, ServerTime::default(), true));
        // Without TLS a busy server that completes nothing is spinning: stalled.
        let mut plain = StallWatch::new(false);
        assert!(!plain.stalled(t0, 5, cpu(10.0), true));
        assert!(plain.stalled(at(3), 5, cpu(13.0), true));
    }

    #[test]
    fn a_starved_server_is_slow_not_stalled_a_spinning_or_sleeping_one_is() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        // The suite's Python server beside a build: 0.12 of a core, waiting for a CPU
        // most of the window. Not a stall, however long, while the box starves it.
        let mut w = StallWatch::new(false);
        assert!(!w.stalled(t0, 43, times(0.3, 1.0), true));
        assert!(!w.stalled(at(3), 43, times(0.66, 3.5), true));
        assert!(!w.stalled(at(6), 43, times(1.0, 6.0), true));
        // Then it gets the CPU and still answers nothing: stalled a window later.
        assert!(!w.stalled(at(8), 43, times(1.0, 6.1), true));
        assert!(w.stalled(at(9), 43, times(1.0, 6.1), true));
        // Out of fds and spinning on accept: it runs as much as it waits.
        let mut spin = StallWatch::new(false);
        assert!(!spin.stalled(t0, 991, times(10.0, 10.0), true));
        assert!(spin.stalled(at(3), 991, times(11.5, 11.5), true));
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
            fds_per_process: None,
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
    fn a_server_of_workers_is_at_its_fd_limit_only_when_one_worker_is() {
        // The seeds' 1M through 68 Node workers stalled at 901,612: far past one
        // process's 20,000, and no worker near it.
        let workers = StallEvidence {
            connected: 901_612,
            attempted: 907_712,
            asked: 1_000_000,
            nofile: Some(20_000),
            fds_per_process: Some((69, 13_400)),
            ..StallEvidence::default()
        };
        let line = workers.describe();
        assert!(
            line.ends_with("; not its fd limit: none of its 69 processes holds more than 13,400 of 20,000 fds; the server's log says nothing about it"),
            "{line}"
        );
        let full = StallEvidence {
            fds_per_process: Some((69, 19_950)),
            ..workers
        };
        let line = full.describe();
        assert!(
            line.ends_with("; likely cause: one of its 69 processes reached its fd limit (RLIMIT_NOFILE 20000, it holds 19,950)"),
            "{line}"
        );
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
