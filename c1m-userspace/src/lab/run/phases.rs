//! The decisions of the run's phases (setup, then the phase list or the fixed idle and
//! push, then teardown), as pure functions of the flags, the latest snapshots and the
//! time gone: which phases run in which order, when a phase is done, when its limit has
//! passed, whose count judges a push. The loop that polls and waits is `drive.rs`; here
//! nothing waits, so each decision is tested without sockets.

use std::time::{Duration, Instant};

use super::{
    phase_list::{self, Phase},
    stall::{ServerTime, StallWatch, server_progress},
};
use crate::{
    figures::counts,
    fmt::count,
    model::phase::PhaseKind,
    observer::KernelView,
    workload::{
        churn::ChurnRate, config::Mode, messages::MessageRate, push_trigger::PushTrigger,
        stats::snapshot::AppSnapshot,
    },
};

/// One phase between setup and teardown, as the drive runs it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Step {
    /// Its own name in the run's record ("idle", "hold-2").
    pub name: String,
    pub kind: PhaseKind,
    pub action: Action,
}

/// What a step does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Action {
    /// The connections held for `length`, churned as `churn` says.
    Hold { length: Duration, churn: Churning },
    /// The connections held for `length` while the client does what `switch` says,
    /// then what it sent awaited.
    Switched { length: Duration, switch: Switch },
    /// `count` broadcasts as `how` says, each begun `every` after the one before
    /// (None: each once the one before arrived).
    Push {
        count: u32,
        every: Option<Duration>,
        how: PushPhase,
    },
}

/// Whether a hold churns, and at what rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Churning {
    No,
    /// At the client's `--churn` (the fixed sequence's idle).
    Configured,
    /// At this rate over the client (a churn phase).
    At(ChurnRate),
}

/// What a heartbeat or message phase switches on in the client for its length.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Switch {
    /// A ping per connection every `interval` (`timeout`: the client's default, the
    /// interval, when None).
    Heartbeat {
        interval: Duration,
        timeout: Option<Duration>,
    },
    /// `rate` messages a second per connection of `size` bytes.
    Messages { rate: MessageRate, size: u32 },
}

impl Switch {
    /// The control line that starts it.
    pub(super) fn on(self) -> String {
        let secs = |d: Duration| format!("{}s", d.as_secs_f64());
        match self {
            Switch::Heartbeat {
                interval,
                timeout: Some(t),
            } => format!("heartbeat on {} {}", secs(interval), secs(t)),
            Switch::Heartbeat { interval, .. } => format!("heartbeat on {}", secs(interval)),
            Switch::Messages { rate, size } => format!("messages on {rate} {size}"),
        }
    }

    /// The control line that stops it.
    pub(super) fn off(self) -> &'static str {
        match self {
            Switch::Heartbeat { .. } => "heartbeat off",
            Switch::Messages { .. } => "messages off",
        }
    }

    /// What the phase awaits at its end, in its error.
    pub(super) fn awaited(self) -> &'static str {
        match self {
            Switch::Heartbeat { .. } => "the pongs of the pings out",
            Switch::Messages { .. } => "the echoes of the messages out",
        }
    }

    /// Stopped at `off_unix_ns`: nothing the client sent is still out, in client counts
    /// half a second past the stop (each shard reports at once on the command, then
    /// every 250 ms while anything moves).
    pub(super) fn settled(self, off_unix_ns: u64, c: Option<&AppSnapshot>) -> bool {
        c.is_some_and(|c| {
            c.counts_at_ns() > off_unix_ns.saturating_add(500_000_000)
                && match self {
                    Switch::Heartbeat { .. } => c.counters.heartbeat.outstanding == 0,
                    Switch::Messages { .. } => c.counters.messages.outstanding == 0,
                }
        })
    }
}

impl Churning {
    /// The control line that starts it (None: nothing to start).
    pub(super) fn command(self) -> Option<String> {
        match self {
            Churning::No => None,
            Churning::Configured => Some("churn on".to_owned()),
            Churning::At(r) => Some(format!("churn on {r}")),
        }
    }
}

/// The steps between setup and teardown: the phase list in its order, or without one
/// the fixed sequence (idle, churned with `--churn`; push ×`--pushes` when there is one).
pub(super) fn steps(
    list: &[Phase],
    idle: Duration,
    churn: bool,
    mode: Mode,
    pushes: u32,
    trigger: &PushTrigger,
) -> Vec<Step> {
    if list.is_empty() {
        let mut fixed = vec![Step {
            name: "idle".to_owned(),
            kind: if churn {
                PhaseKind::Churn
            } else {
                PhaseKind::Hold
            },
            action: Action::Hold {
                length: idle,
                churn: if churn {
                    Churning::Configured
                } else {
                    Churning::No
                },
            },
        }];
        let how = push_phase(mode, pushes, trigger);
        if how != PushPhase::Skip {
            fixed.push(Step {
                name: "push".to_owned(),
                kind: PhaseKind::Push,
                action: Action::Push {
                    count: pushes,
                    every: None,
                    how,
                },
            });
        }
        return fixed;
    }
    list.iter()
        .zip(phase_list::names(list))
        .filter_map(|(p, name)| {
            let action = match *p {
                Phase::Hold { length } => Action::Hold {
                    length,
                    churn: Churning::No,
                },
                Phase::Churn { rate, length, .. } => Action::Hold {
                    length,
                    churn: Churning::At(rate),
                },
                Phase::Heartbeat {
                    interval,
                    length,
                    timeout,
                } => Action::Switched {
                    length,
                    switch: Switch::Heartbeat { interval, timeout },
                },
                Phase::Messages { rate, size, length } => Action::Switched {
                    length,
                    switch: Switch::Messages { rate, size },
                },
                Phase::Push { count, every } => {
                    let how = push_phase(mode, count, trigger);
                    // Refused before the run (push phases need ws): nothing to run.
                    if how == PushPhase::Skip {
                        return None;
                    }
                    Action::Push { count, every, how }
                }
            };
            Some(Step {
                name,
                kind: p.kind(),
                action,
            })
        })
        .collect()
}

/// When push `k` (from 1) of a push phase begun at `start` may begin: at once without
/// `every`, else `k - 1` intervals after the start.
pub(super) fn push_due(start: Instant, every: Option<Duration>, k: u32) -> Instant {
    every.map_or(start, |e| start + e * k.saturating_sub(1))
}

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
    /// Connections closed since this many were open (client's and server's counted).
    Closes(u64),
}

impl Progress {
    /// A step forward, as a stalled wait's error names it.
    fn step(self) -> &'static str {
        match self {
            Progress::Connects => "connect finished",
            Progress::Push(_) => "frame arrived",
            Progress::Closes(_) => "connection closed",
        }
    }
}

/// A ramp with no connect finished (connected or failed) for this long is stuck: each
/// connect gives up after 30 s (`--connect-timeout`). A fixed budget from the asked
/// rate failed the largest target: 1,732,000 asked, the box slowed from 10k to ~4k
/// conn/s past 1.5M (3.3M sockets in the 262,144-bucket established hash), and the
/// 3 × ramp + 2 min = 328 s ran out at 1,662,915 with the ramp still moving.
pub(super) const SETUP_STALL: Duration = Duration::from_secs(120);

/// A push with no frame received for this long is stuck. A fixed 120 s failed the
/// largest target: at 1,757,881 connections on a loaded box, 823,411 frames had arrived
/// with the push still moving.
pub(super) const PUSH_STALL: Duration = Duration::from_secs(30);

/// How long c1m's own server may take to say it runs.
pub(super) const SERVER_START: Duration = Duration::from_secs(60);

/// How long kernel and app counts may take to agree after the ramp.
pub(super) const SETTLING: Duration = Duration::from_secs(30);

/// How long the client may take to count frames under a push's id (foreign server).
pub(super) const PUSH_MARK: Duration = Duration::from_secs(10);

/// A teardown with no connection closed for this long is stuck. A total of 180 s cut
/// the seeds' 1M through 68 Node workers at 565,000 closed (~3.5k/s on a loaded box,
/// still moving).
pub(super) const TEARDOWN_STALL: Duration = Duration::from_secs(60);

/// The setup phase's limit: `--setup-timeout` in all, or else a stall of the connects.
pub(super) fn setup_limit(setup_timeout: Option<Duration>) -> Limit {
    setup_timeout.map_or(Limit::Stall(SETUP_STALL, Progress::Connects), Limit::Total)
}

/// Why a wait may not go on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Overrun {
    /// A [`Limit::Total`] passed.
    Total(Duration),
    /// A [`Limit::Stall`]: no step for `limit`, with `so_far` done.
    Stalled {
        limit: Duration,
        step: &'static str,
        so_far: u64,
    },
    /// A [`Limit::Stall`] that could not be judged: the counts that show progress are
    /// `age` old (the workload's processes have not reported).
    Silent { age: Duration },
}

/// How old the counts that judge a stall may grow before the wait gives up. A stall is
/// judged on the counts' own clock: at 1.73M on a box loaded by two builds, the client's
/// reports stopped for 31 s during a push that went on to deliver every frame, and the
/// push was called stalled at 787,215 of 1,728,617 (2026-12-04).
pub(super) const WITNESS_SILENCE: Duration = Duration::from_secs(180);

impl Overrun {
    /// The error of the wait for `what`.
    pub(super) fn message(&self, what: &str) -> String {
        match self {
            Overrun::Total(d) => format!("{what} did not finish within {:.0} s", d.as_secs_f64()),
            Overrun::Stalled {
                limit,
                step,
                so_far,
            } => format!(
                "{what} stalled: no {step} for {:.0} s ({} so far)",
                limit.as_secs_f64(),
                count(*so_far)
            ),
            Overrun::Silent { age } => format!(
                "{what} could not be judged: the counts that show its progress are {:.0} s \
                 old (the workload's processes stopped reporting; see the run's logs)",
                age.as_secs_f64()
            ),
        }
    }
}

/// A wait against its [`Limit`]: when it started, and the most progress seen with the
/// instant it was reached.
#[derive(Debug)]
pub(super) struct LimitWatch {
    limit: Limit,
    started: Instant,
    best: (u64, Instant),
}

impl LimitWatch {
    pub(super) fn new(limit: Limit, now: Instant) -> Self {
        LimitWatch {
            limit,
            started: now,
            best: (0, now),
        }
    }

    /// Checked once a tick at `now`: whether the limit has passed. `progress` says how
    /// far the phase has come and how old the counts saying so are (asked only under a
    /// stall limit): a stall is judged at the instant the counts describe, so a side
    /// that reports late is not taken for one that makes no progress.
    pub(super) fn check(
        &mut self,
        now: Instant,
        progress: impl FnOnce(Progress) -> (u64, Duration),
    ) -> Option<Overrun> {
        match self.limit {
            Limit::Total(d) if now.saturating_duration_since(self.started) > d => {
                Some(Overrun::Total(d))
            }
            Limit::Stall(d, measure) => {
                let (done, age) = progress(measure);
                let as_of = now.checked_sub(age).unwrap_or(now);
                if done > self.best.0 {
                    self.best = (done, as_of.max(self.best.1));
                    None
                } else if age > WITNESS_SILENCE {
                    Some(Overrun::Silent { age })
                } else if as_of.saturating_duration_since(self.best.1) > d {
                    Some(Overrun::Stalled {
                        limit: d,
                        step: measure.step(),
                        so_far: done,
                    })
                } else {
                    None
                }
            }
            Limit::Total(_) => None,
        }
    }
}

/// How far a phase judged by [`Limit::Stall`] has come.
pub(super) fn progress(
    measure: Progress,
    external: bool,
    server: Option<&AppSnapshot>,
    client: Option<&AppSnapshot>,
) -> u64 {
    // External clients: the server's figures are the only word here.
    match (measure, client, server) {
        (Progress::Connects, Some(c), _) => c.counters.connected + c.counters.failures.total(),
        (Progress::Connects, None, Some(s)) => s.counters.accepted,
        (Progress::Connects, None, None) => 0,
        (Progress::Push(id), _, _) => frames(push_witness(external, server, client), id),
        (Progress::Closes(from), _, _) => from.saturating_sub(open_connections(server, client)),
    }
}

/// How old the counts are that [`progress`] reads, at CLOCK_REALTIME `unix_ns_now`:
/// the older side's when both count. A side not heard from, or a snapshot that names no
/// instant, counts as fresh (progress 0 then judges as before).
pub(super) fn progress_age(
    measure: Progress,
    external: bool,
    server: Option<&AppSnapshot>,
    client: Option<&AppSnapshot>,
    unix_ns_now: u64,
) -> Duration {
    // The same witnesses as [`progress`].
    let witnesses = match measure {
        Progress::Connects => [client.or(server), None],
        Progress::Push(_) => [push_witness(external, server, client), None],
        Progress::Closes(_) => [server, client],
    };
    witnesses
        .into_iter()
        .flatten()
        .filter(|s| s.counts_unix_ns > 0)
        .map(|s| Duration::from_nanos(unix_ns_now.saturating_sub(s.counts_unix_ns)))
        .max()
        .unwrap_or(Duration::ZERO)
}

/// Connections open now, the lab's client's and the server's added (a side not heard
/// from counts none).
pub(super) fn open_connections(server: Option<&AppSnapshot>, client: Option<&AppSnapshot>) -> u64 {
    [server, client]
        .into_iter()
        .flatten()
        .map(|s| s.counters.open)
        .sum()
}

/// Every worker of the lab's client has died (a client with no workers yet has not).
pub(super) fn clients_all_dead(client: Option<&AppSnapshot>) -> bool {
    client.is_some_and(|c| c.workers.count > 0 && c.workers.alive == 0)
}

/// c1m's own server says it runs.
pub(super) fn server_started(server: Option<&AppSnapshot>) -> bool {
    server.is_some_and(|s| s.phase == "running")
}

/// Where the ramp of the lab's own client stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Setup {
    Ramping,
    /// Every connection attempted and none in flight, or the client holds.
    Done,
    /// The server stopped completing connections (watched for a foreign server only).
    Stalled,
}

/// The lab's own client's ramp towards `n` connections; `watch` is the stall watch of
/// a foreign server's setup, which also reads the server's CPU (`server`) and the time
/// its processes waited for a CPU (`run_wait_s`).
pub(super) fn local_setup(
    client: Option<&AppSnapshot>,
    server: Option<&AppSnapshot>,
    run_wait_s: Option<f64>,
    n: u64,
    watch: Option<&mut StallWatch>,
    now: Instant,
) -> Setup {
    let Some(c) = client else {
        return Setup::Ramping;
    };
    if c.phase == "hold" || c.counters.attempted >= n && c.counters.in_flight == 0 {
        return Setup::Done;
    }
    let pending = c.counters.connected < n;
    if let Some(w) = watch
        && c.phase == "ramp"
        && w.stalled(
            now,
            server_progress(&c.counters),
            ServerTime {
                cpu_s: server.map(|s| s.cpu_user_s + s.cpu_sys_s),
                run_wait_s,
            },
            pending,
        )
    {
        Setup::Stalled
    } else {
        Setup::Ramping
    }
}

/// Set up, settled: kernel and app agree on the connections (with external clients, on
/// the server's alone).
pub(super) fn settled(
    external: bool,
    s: Option<&AppSnapshot>,
    c: Option<&AppSnapshot>,
    k: Option<&KernelView>,
) -> bool {
    match (s, c) {
        (Some(s), _) if external => counts::server_open_agrees(k, s),
        (Some(s), Some(c)) if !external => counts::open_counts_agree(k, s, c),
        _ => false,
    }
}

/// `--churn` stopped (`off_unix_ns`): every churn finished (closes answered, reopens
/// open or failed) in client counts half a second past the stop (each shard reports at
/// once on `churn off`, then every 250 ms while anything moves), and kernel and app
/// agree.
pub(super) fn churn_settled(
    off_unix_ns: u64,
    s: Option<&AppSnapshot>,
    c: Option<&AppSnapshot>,
    k: Option<&KernelView>,
) -> bool {
    c.is_some_and(|c| {
        let churn = c.counters.churn;
        c.counts_at_ns() > off_unix_ns.saturating_add(500_000_000)
            && churn.closing == 0
            && churn.reopening == 0
    }) && settled(false, s, c, k)
}

/// How the push phase goes, if at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PushPhase {
    /// No push phase: not WebSocket, or no pushes asked for.
    Skip,
    /// c1m's own server, asked through its control endpoint.
    Control,
    /// A server of the user's, by its `--push-trigger` (or on its own with `none`).
    Trigger,
}

pub(super) fn push_phase(mode: Mode, pushes: u32, trigger: &PushTrigger) -> PushPhase {
    if mode == Mode::Ws && pushes > 0 && *trigger != PushTrigger::Control {
        PushPhase::Trigger
    } else if mode == Mode::Ws && pushes > 0 {
        PushPhase::Control
    } else {
        PushPhase::Skip
    }
}

/// The connections a push of c1m's server must reach, as the witness counts them open.
pub(super) fn push_audience(
    external: bool,
    server: Option<&AppSnapshot>,
    client: Option<&AppSnapshot>,
) -> u64 {
    push_witness(external, server, client)
        .map(|x| {
            if external {
                x.counters.ws_open
            } else {
                x.counters.open
            }
        })
        .unwrap_or(0)
}

/// Push `id` has reached `want` frames by its witness's count.
pub(super) fn push_reached(
    external: bool,
    server: Option<&AppSnapshot>,
    client: Option<&AppSnapshot>,
    id: u64,
    want: u64,
) -> bool {
    push_witness(external, server, client)
        .is_some_and(|x| x.pushes.iter().any(|p| p.push_id == id && p.count >= want))
}

/// The frames of push `id` in a snapshot (0 without one).
pub(super) fn frames(snap: Option<&AppSnapshot>, id: u64) -> u64 {
    snap.and_then(|x| x.pushes.iter().find(|p| p.push_id == id))
        .map_or(0, |p| p.count)
}

/// The pushes a foreign server is triggered for: with `none`, one wait for whatever it
/// sends.
pub(super) fn foreign_rounds(trigger: &PushTrigger, pushes: u32) -> u32 {
    if *trigger == PushTrigger::None {
        1
    } else {
        pushes
    }
}

/// The frames a foreign server's push must deliver to `open` connections: with `none`,
/// every connection should get `--pushes` frames in the wait.
pub(super) fn foreign_want(trigger: &PushTrigger, open: u64, pushes: u32) -> u64 {
    if *trigger == PushTrigger::None {
        open * u64::from(pushes)
    } else {
        open
    }
}

/// Every connection closed: the server's, and the lab's client's unless the clients are
/// on other hosts.
pub(super) fn torn_down(
    external: bool,
    server: Option<&AppSnapshot>,
    client: Option<&AppSnapshot>,
) -> bool {
    (external || client.is_some_and(|c| c.counters.open == 0))
        && server.is_some_and(|s| s.counters.open == 0)
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

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use c1m_common::tcp_state::ESTABLISHED;

    use super::*;
    use crate::{
        observer::view::state_key,
        workload::{push_trigger, stats::snapshot::PushSummary},
    };

    fn snap(phase: &str, open: u64) -> AppSnapshot {
        let mut s = AppSnapshot {
            phase: phase.to_owned(),
            ..AppSnapshot::default()
        };
        s.counters.open = open;
        s
    }

    fn with_push(mut s: AppSnapshot, push_id: u64, count: u64) -> AppSnapshot {
        s.pushes.push(PushSummary {
            push_id,
            count,
            ..PushSummary::default()
        });
        s
    }

    fn kernel(server: i64, client: i64) -> KernelView {
        let mut k = KernelView::default();
        k.server.states.insert(state_key(ESTABLISHED), server);
        k.client.states.insert(state_key(ESTABLISHED), client);
        k
    }

    #[test]
    fn without_a_list_the_fixed_sequence_runs_else_the_list_in_order() {
        let s = Duration::from_secs;
        let fixed = steps(&[], s(10), true, Mode::Ws, 2, &PushTrigger::Control);
        assert_eq!(
            fixed,
            [
                Step {
                    name: "idle".into(),
                    kind: PhaseKind::Churn,
                    action: Action::Hold {
                        length: s(10),
                        churn: Churning::Configured
                    }
                },
                Step {
                    name: "push".into(),
                    kind: PhaseKind::Push,
                    action: Action::Push {
                        count: 2,
                        every: None,
                        how: PushPhase::Control
                    }
                }
            ]
        );
        let echo = steps(&[], s(10), false, Mode::Echo, 1, &PushTrigger::Control);
        assert_eq!(echo.len(), 1);
        assert_eq!(echo[0].kind, PhaseKind::Hold);
        let list: Vec<Phase> = ["hold 1s", "push 2 every 5s", "churn 50 for 2s", "hold 3s"]
            .iter()
            .map(|t| phase_list::parse(t).unwrap())
            .collect();
        let got = steps(&list, s(10), false, Mode::Ws, 1, &PushTrigger::Control);
        let names: Vec<&str> = got.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["hold", "push", "churn", "hold-2"]);
        assert_eq!(
            got[1].action,
            Action::Push {
                count: 2,
                every: Some(s(5)),
                how: PushPhase::Control
            }
        );
        assert_eq!(
            got[2].action,
            Action::Hold {
                length: s(2),
                churn: Churning::At(ChurnRate(50.0))
            }
        );
        assert_eq!(
            Churning::At(ChurnRate(50.0)).command().as_deref(),
            Some("churn on 50/s")
        );
        assert_eq!(Churning::No.command(), None);
        let t0 = Instant::now();
        assert_eq!(push_due(t0, None, 3), t0);
        assert_eq!(push_due(t0, Some(s(5)), 1), t0);
        assert_eq!(push_due(t0, Some(s(5)), 3), t0 + s(10));
    }

    #[test]
    fn a_total_limit_passes_after_its_time_only() {
        let t0 = Instant::now();
        let mut w = LimitWatch::new(Limit::Total(Duration::from_secs(30)), t0);
        let never =
            |_: Progress| -> (u64, Duration) { unreachable!("a total limit reads no progress") };
        assert_eq!(w.check(t0 + Duration::from_secs(30), never), None);
        let over = w.check(t0 + Duration::from_secs(31), never).unwrap();
        assert_eq!(over, Overrun::Total(Duration::from_secs(30)));
        assert_eq!(
            over.message("settling"),
            "settling did not finish within 30 s"
        );
    }

    #[test]
    fn a_stall_limit_restarts_on_every_step() {
        let t0 = Instant::now();
        let s = |n| t0 + Duration::from_secs(n);
        let mut w = LimitWatch::new(
            Limit::Stall(Duration::from_secs(10), Progress::Connects),
            t0,
        );
        assert_eq!(w.check(s(5), |_| (100, Duration::ZERO)), None);
        // Flat for 10 s from the last step is still within; more is a stall.
        assert_eq!(w.check(s(15), |_| (100, Duration::ZERO)), None);
        assert_eq!(w.check(s(14), |_| (100, Duration::ZERO)), None);
        let over = w.check(s(16), |_| (100, Duration::ZERO)).unwrap();
        assert_eq!(
            over,
            Overrun::Stalled {
                limit: Duration::from_secs(10),
                step: "connect finished",
                so_far: 100
            }
        );
        assert_eq!(
            over.message("setup"),
            "setup stalled: no connect finished for 10 s (100 so far)"
        );
        // A step, however late, starts the count again.
        assert_eq!(w.check(s(17), |_| (101, Duration::ZERO)), None);
        assert_eq!(w.check(s(27), |_| (101, Duration::ZERO)), None);
        let mut p = LimitWatch::new(Limit::Stall(Duration::from_secs(1), Progress::Push(2)), t0);
        let over = p.check(s(2), |_| (0, Duration::ZERO)).unwrap();
        assert_eq!(
            over.message("push"),
            "push stalled: no frame arrived for 1 s (0 so far)"
        );
    }

    #[test]
    fn a_stall_is_judged_on_the_clock_of_the_counts() {
        let t0 = Instant::now();
        let s = |n| t0 + Duration::from_secs(n);
        let age = Duration::from_secs;
        let mut w = LimitWatch::new(Limit::Stall(Duration::from_secs(30), Progress::Push(1)), t0);
        assert_eq!(w.check(s(1), |_| (500, age(0))), None);
        // 40 s later the counts are 35 s old: they describe 5 s after the last step.
        assert_eq!(w.check(s(41), |_| (500, age(35))), None);
        // Fresh counts with no step: 31 s after the step on their clock is a stall.
        let over = w.check(s(42), |_| (500, age(10))).unwrap();
        assert!(
            matches!(over, Overrun::Stalled { so_far: 500, .. }),
            "{over:?}"
        );
        // Counts that stopped altogether end the wait, named as such.
        let mut w = LimitWatch::new(Limit::Stall(Duration::from_secs(30), Progress::Push(1)), t0);
        assert_eq!(w.check(s(170), |_| (0, age(169))), None);
        let over = w.check(s(200), |_| (0, age(199))).unwrap();
        assert_eq!(over, Overrun::Silent { age: age(199) });
        assert!(
            over.message("push")
                .starts_with("push could not be judged: the counts")
        );
    }

    #[test]
    fn the_age_of_progress_is_its_witness_s() {
        let at = |unix_s: u64| {
            let mut c = snap("ramp", 0);
            c.counts_unix_ns = unix_s * 1_000_000_000;
            c
        };
        let now = 1_000 * 1_000_000_000;
        let (s, c) = (at(990), at(960));
        let age = |m, ext, s, c| progress_age(m, ext, s, c, now).as_secs();
        assert_eq!(age(Progress::Connects, false, Some(&s), Some(&c)), 40);
        assert_eq!(age(Progress::Push(1), true, Some(&s), Some(&c)), 10);
        assert_eq!(age(Progress::Closes(9), false, Some(&s), Some(&c)), 40);
        // Not heard from, or no instant named: fresh.
        assert_eq!(age(Progress::Connects, false, None, None), 0);
        assert_eq!(
            age(Progress::Connects, false, None, Some(&snap("ramp", 0))),
            0
        );
    }

    #[test]
    fn progress_is_the_clients_word_or_the_servers_for_external_clients() {
        let mut c = snap("ramp", 0);
        c.counters.connected = 90;
        c.counters.failures.emfile = 5;
        let mut s = snap("running", 0);
        s.counters.accepted = 70;
        assert_eq!(progress(Progress::Connects, false, Some(&s), Some(&c)), 95);
        assert_eq!(progress(Progress::Connects, true, Some(&s), None), 70);
        assert_eq!(progress(Progress::Connects, true, None, None), 0);
        let c = with_push(c, 1, 40);
        let s = with_push(s, 1, 60);
        assert_eq!(progress(Progress::Push(1), false, Some(&s), Some(&c)), 40);
        assert_eq!(progress(Progress::Push(1), true, Some(&s), Some(&c)), 60);
        assert_eq!(progress(Progress::Push(2), false, Some(&s), Some(&c)), 0);
    }

    #[test]
    fn teardown_progress_is_connections_closed_on_both_sides() {
        let (s, c) = (snap("running", 300), snap("teardown", 500));
        assert_eq!(open_connections(Some(&s), Some(&c)), 800);
        assert_eq!(open_connections(Some(&s), None), 300);
        assert_eq!(
            progress(Progress::Closes(1000), false, Some(&s), Some(&c)),
            200
        );
        // A side that gained connections (it was not heard from at the start) is no step.
        assert_eq!(
            progress(Progress::Closes(500), false, Some(&s), Some(&c)),
            0
        );
        let mut w = LimitWatch::new(
            Limit::Stall(Duration::from_secs(60), Progress::Closes(1000)),
            Instant::now(),
        );
        let over = w
            .check(Instant::now() + Duration::from_secs(61), |_| {
                (0, Duration::ZERO)
            })
            .unwrap();
        assert_eq!(
            over.message("teardown"),
            "teardown stalled: no connection closed for 60 s (0 so far)"
        );
    }

    #[test]
    fn setup_limit_is_the_flag_or_a_stall_of_connects() {
        assert!(matches!(
            setup_limit(None),
            Limit::Stall(SETUP_STALL, Progress::Connects)
        ));
        assert!(matches!(
            setup_limit(Some(Duration::from_secs(5))),
            Limit::Total(d) if d == Duration::from_secs(5)
        ));
    }

    #[test]
    fn server_start_and_dead_clients() {
        assert!(server_started(Some(&snap("running", 0))));
        assert!(!server_started(Some(&snap("starting", 0))));
        assert!(!server_started(None));
        let mut c = snap("ramp", 0);
        assert!(!clients_all_dead(Some(&c)), "no workers yet");
        c.workers.count = 2;
        c.workers.alive = 1;
        assert!(!clients_all_dead(Some(&c)));
        c.workers.alive = 0;
        assert!(clients_all_dead(Some(&c)));
        assert!(!clients_all_dead(None));
    }

    #[test]
    fn a_local_setup_ends_when_held_all_attempted_or_stalled() {
        let t0 = Instant::now();
        assert_eq!(local_setup(None, None, None, 10, None, t0), Setup::Ramping);
        assert_eq!(
            local_setup(Some(&snap("hold", 3)), None, None, 10, None, t0),
            Setup::Done
        );
        let mut c = snap("ramp", 0);
        c.counters.attempted = 10;
        c.counters.in_flight = 1;
        assert_eq!(
            local_setup(Some(&c), None, None, 10, None, t0),
            Setup::Ramping
        );
        c.counters.in_flight = 0;
        assert_eq!(local_setup(Some(&c), None, None, 10, None, t0), Setup::Done);
        // A flat connected count with connects pending: stalled, when watched.
        c.counters.attempted = 8;
        c.counters.connected = 5;
        let mut w = StallWatch::default();
        assert_eq!(
            local_setup(Some(&c), None, None, 10, Some(&mut w), t0),
            Setup::Ramping
        );
        let later = t0 + Duration::from_secs(60);
        assert_eq!(
            local_setup(Some(&c), None, None, 10, None, later),
            Setup::Ramping
        );
        assert_eq!(
            local_setup(Some(&c), None, None, 10, Some(&mut w), later),
            Setup::Stalled
        );
        let mut held = StallWatch::default();
        let mut h = c.clone();
        h.phase = "settle".to_owned();
        assert_eq!(
            local_setup(Some(&h), None, None, 10, Some(&mut held), t0),
            Setup::Ramping
        );
        assert_eq!(
            local_setup(Some(&h), None, None, 10, Some(&mut held), later),
            Setup::Ramping,
            "only a ramp stalls"
        );
    }

    #[test]
    fn a_churn_settles_after_its_stop_once_nothing_is_in_progress() {
        let (s, mut c) = (snap("running", 100), snap("hold", 100));
        c.counts_unix_ns = 2_000_000_000;
        // Counts from before the stop (and half a second for every shard): not yet.
        assert!(!churn_settled(1_600_000_000, Some(&s), Some(&c), None));
        assert!(churn_settled(1_000_000_000, Some(&s), Some(&c), None));
        c.counters.churn.reopening = 1;
        assert!(!churn_settled(1_000_000_000, Some(&s), Some(&c), None));
        c.counters.churn.reopening = 0;
        c.counters.churn.closing = 1;
        assert!(!churn_settled(1_000_000_000, Some(&s), Some(&c), None));
    }

    #[test]
    fn settled_when_kernel_and_apps_agree() {
        let (s, c) = (snap("running", 100), snap("hold", 100));
        assert!(settled(false, Some(&s), Some(&c), Some(&kernel(100, 100))));
        assert!(!settled(false, Some(&s), Some(&c), Some(&kernel(100, 99))));
        assert!(settled(false, Some(&s), Some(&c), None));
        assert!(!settled(false, Some(&s), None, None));
        // External clients: the server's own count against the kernel's server side.
        assert!(settled(true, Some(&s), None, Some(&kernel(100, 0))));
        assert!(!settled(true, Some(&s), None, Some(&kernel(98, 0))));
        assert!(settled(true, Some(&s), None, None));
        assert!(!settled(true, None, None, Some(&kernel(100, 0))));
    }

    #[test]
    fn push_phase_by_mode_count_and_trigger() {
        let signal = push_trigger::parse("signal:USR1").unwrap();
        assert_eq!(
            push_phase(Mode::Ws, 1, &PushTrigger::Control),
            PushPhase::Control
        );
        assert_eq!(push_phase(Mode::Ws, 2, &signal), PushPhase::Trigger);
        assert_eq!(
            push_phase(Mode::Ws, 1, &PushTrigger::None),
            PushPhase::Trigger
        );
        assert_eq!(
            push_phase(Mode::Ws, 0, &PushTrigger::Control),
            PushPhase::Skip
        );
        assert_eq!(
            push_phase(Mode::Echo, 1, &PushTrigger::Control),
            PushPhase::Skip
        );
        assert_eq!(foreign_rounds(&PushTrigger::None, 3), 1);
        assert_eq!(foreign_rounds(&signal, 3), 3);
        assert_eq!(foreign_want(&PushTrigger::None, 100, 3), 300);
        assert_eq!(foreign_want(&signal, 100, 3), 100);
    }

    #[test]
    fn a_push_is_judged_by_its_witness() {
        let mut s = with_push(snap("running", 90), 1, 80);
        s.counters.ws_open = 80;
        let c = with_push(snap("hold", 90), 1, 90);
        assert_eq!(push_audience(false, Some(&s), Some(&c)), 90);
        assert_eq!(push_audience(true, Some(&s), Some(&c)), 80);
        assert_eq!(push_audience(false, Some(&s), None), 0);
        assert!(push_reached(false, Some(&s), Some(&c), 1, 90));
        assert!(!push_reached(true, Some(&s), Some(&c), 1, 90));
        assert!(push_reached(true, Some(&s), Some(&c), 1, 80));
        assert!(!push_reached(false, Some(&s), Some(&c), 2, 0));
        assert_eq!(frames(Some(&c), 1), 90);
        assert_eq!(frames(Some(&c), 2), 0);
        assert_eq!(frames(None, 1), 0);
    }

    #[test]
    fn torn_down_when_every_side_here_is_closed() {
        let (open, closed) = (snap("hold", 1), snap("hold", 0));
        assert!(torn_down(false, Some(&closed), Some(&closed)));
        assert!(!torn_down(false, Some(&closed), Some(&open)));
        assert!(!torn_down(false, Some(&closed), None));
        assert!(torn_down(true, Some(&closed), None));
        assert!(!torn_down(true, Some(&open), None));
        assert!(!torn_down(true, None, None));
    }
}
