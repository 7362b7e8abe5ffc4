//! Reading the kernel's view: counters summed over CPUs, socket walks on the walker
//! thread, listeners and MIB deltas, into one [`KernelView`] per [`Observer::snapshot`].

use std::{
    collections::BTreeMap,
    os::fd::AsFd,
    time::{Duration, Instant},
};

use aya::maps::{HashMap as BpfHashMap, MapData, PerCpuArray, PerCpuHashMap};
use c1m_common::{
    ClosedListener, EVENT_SLOTS, LOSS_SLOTS, ListenEvents, NO_SOCKET_STATE, RESET_SLOTS,
    RETRANSMIT_SLOTS, TRANSITION_SLOTS, event, event_index, hook, loss_index, reset_cause_parts,
    reset_index, reset_reason, retransmit, retransmit_index, side, tcp_state, transition_index,
};

use super::{
    Counters, Observer, ObserverError, map_err, mib, procfs,
    view::{self, KernelView, ResetCause, ResetSegment, Retransmits, Scope, SideView},
    walk, walker,
};

/// How often a snapshot reads its counters again when the kernel's counters moved
/// during the read.
const MIB_BRACKET_TRIES: usize = 3;

/// How long a socket stays in TIME_WAIT (the kernel's `TCP_TIMEWAIT_LEN`): after a close,
/// the TIME_WAIT gauge moves for this long with no transition, and only walks see it.
pub(super) const TIME_WAIT_LEN: Duration = Duration::from_secs(60);

/// Periodic walks while TIME_WAIT may be moving: their cost as a multiple of the last
/// walk's length (50: ~2% of one core), never older than a minute, so a churn's or a
/// teardown's TIME_WAIT peak is seen.
const WALK_EVERY_CLOSING: (u32, Duration) = (50, Duration::from_secs(60));

/// Periodic walks otherwise (a ramp, an idle hold, a push): the gauges move by the
/// transitions, and kernel memory between walks is sockets × bytes per socket at the
/// last walk, so walks only refresh that ratio: 400× the walk's length (~0.25% of one
/// core) with no upper bound. The 60 s cap alone cost the lab 16.8 s of CPU in a
/// 143-s unpaced ramp to 1.84M connections (walks of 5–8 s each at 2.4–3.7M sockets),
/// 7% of the box's busy CPU; the lab walks afresh at every phase end anyway.
const WALK_EVERY_STEADY: u32 = 400;

/// Whether TIME_WAIT may have moved since a walk that ended `walk_age` ago, the last
/// close seen `since_close` ago: a socket closed then leaves TIME_WAIT up to
/// [`TIME_WAIT_LEN`] later, after that walk or not.
fn time_wait_may_move(since_close: Option<Duration>, walk_age: Duration) -> bool {
    since_close.is_some_and(|c| c < walk_age + TIME_WAIT_LEN)
}

/// Sockets below which a walk's length is mostly its fixed cost (the iterator's setup,
/// the map reset, the reads), not the sockets': a walk of a few sockets takes ~1 ms, a
/// socket ~1-2 µs. Projecting from fewer would scale that fixed cost with the growth.
const PROJECTION_FLOOR: u64 = 10_000;

/// What the next walk will cost: the last one's cost per socket (over at least
/// [`PROJECTION_FLOOR`] sockets) times the namespace's sockets now (sockstat; `at_walk`
/// when the last began), never less than the last. In a ramp the walk's length grows
/// with the time gone, so the back-off by the last walk alone still walked once or twice
/// inside it, 1.3–2.6 s of CPU in a 50-s unpaced ramp to 1M (`bench lab-observer`,
/// 2026-12-04); projected, the next walk waits for the ramp's end, where the lab walks
/// anyway.
fn projected_walk(last: Duration, at_walk: Option<u64>, now: Option<u64>) -> Duration {
    match (at_walk, now) {
        (Some(then), Some(now)) => {
            last.max(last.mul_f64(now as f64 / then.max(PROJECTION_FLOOR) as f64))
        }
        _ => last,
    }
}

/// How long after a walk of `last` the next one is due. A walk costs ~1-2 µs per socket
/// of the namespace (570k sockets in 0.45-0.75 s; 3.7M in 8.3 s on a loaded box): at
/// least every second when cheap. Gauges don't wait for walks (transitions carry them)
/// but for TIME_WAIT, which moves while `closing`.
fn walk_interval(last: Duration, closing: bool) -> Duration {
    let min = Duration::from_secs(1);
    if closing {
        let (times, max) = WALK_EVERY_CLOSING;
        (last * times).clamp(min, max)
    } else {
        (last * WALK_EVERY_STEADY).max(min)
    }
}

impl Observer {
    /// [`Self::snapshot`] after a full socket walk started now, however recent the last
    /// one: for figures that must be of this moment (the end of a lab phase).
    pub fn snapshot_fresh(&mut self) -> Result<KernelView, ObserverError> {
        // A walk under way started before this moment: let it finish, then walk afresh.
        if self.walker.busy() {
            let r = self.walker.wait()?;
            self.apply_walk(r);
        }
        self.walk_now()?;
        self.snapshot()
    }

    /// Reads every counter map and walks the listeners (cheap: they come first and the
    /// walk stops at the first non-listener), and returns the kernel's view now. Never
    /// waits for a socket walk: one that is due is started on the walker thread, and one
    /// that finished re-bases the gauges.
    pub fn snapshot(&mut self) -> Result<KernelView, ObserverError> {
        if let Some(logger) = self.logger.as_mut() {
            logger.flush();
        }
        let closed = self.drain_closed_listeners()?;
        self.listeners.closed(&closed);
        let records = walk::listeners(self.listener_link.as_fd())?;
        self.listeners.observe(&records, false);
        self.learn_listening_ports(&records)?;
        if let Some(r) = self.walker.try_take() {
            self.apply_walk(r?);
        }
        if !self.walker.busy() {
            // Read once: the walk's due time and, if due, its size as it begins.
            let sockets = self.namespace_sockets();
            if self.walk_due(sockets) {
                self.walk_sizes.0 = sockets;
                self.walker.request();
            }
        }
        // The instant the counters describe: the middle of their read. A starved
        // observer (5% of a core, lab_truth) is throttled inside the read for tens of ms;
        // stamping its end made the next interval look short and its rate spike (3,716/s
        // on a 2,000/s ramp).
        let before = Instant::now();
        // The counters bracketed by two equal MIB reads, so the audit compares one
        // moment: under loss, orphaned sockets keep resending FINs after a run's end,
        // and a read preempted between the two files saw 5 of 531 retransmits that
        // the counters, read before, had not (a few tries, then the last read).
        let mut mib = self.read_mib();
        let mut counters = self.read_counters()?;
        for _ in 0..MIB_BRACKET_TRIES {
            let after = self.read_mib();
            let same = match (&mib, &after) {
                (Ok(a), Ok(b)) => a.since_attach == b.since_attach,
                _ => true,
            };
            mib = after;
            if same {
                break;
            }
            counters = self.read_counters()?;
        }
        let now = before + before.elapsed() / 2;
        self.note_closes(&counters, now);
        let mut view = KernelView {
            // The instant the counters (and so the gauges) describe.
            unix_ms: crate::util::unix_ms_now(),
            uptime_s: self.started.elapsed().as_secs_f64(),
            unavailable: self.unavailable.clone(),
            map_errors: self.read_map_errors()?,
            skipped_runs: self.read_skipped_runs(),
            scope: self.scope(),
            ..KernelView::default()
        };
        match mib {
            Ok(delta) => view.mib = Some(delta),
            Err(why) => view
                .unavailable
                .push(format!("the kernel's own counters (audit): {why}")),
        }
        let elapsed = self
            .previous
            .as_ref()
            .map(|(at, _)| now.duration_since(*at).as_secs_f64())
            .unwrap_or(0.0);
        for s in 0..side::COUNT as u32 {
            let previous = self.previous.as_ref().map(|(_, c)| c);
            *view.side_mut(s) = self.side_view(s, &counters, previous, elapsed);
        }
        let listen_events = self.read_listen_events()?;
        let acks = !self.hook_missing(hook::KFREE_SKB);
        let synacks = !self.hook_missing(hook::RETRANSMIT_SYNACK);
        view.listeners = self
            .listeners
            .views(&listen_events, acks, self.rcv_ranges_known, synacks);
        if let Some(walk) = &self.last_walk {
            view.memory = Some(self.memory.compute(&walk.agg));
            view.walk = view::WalkInfo {
                age_s: Some(walk.ended.elapsed().as_secs_f64()),
                ended_unix_ms: walk.ended_unix_ms,
                duration_ms: walk.duration.as_secs_f64() * 1000.0,
                sockets_walked: walk.sockets,
                walks: self.walks,
            };
        }
        if let Some(loss) = &self.config.loss {
            view.loss = Some(self.read_loss(loss)?);
        }
        self.previous = Some((now, counters));
        Ok(view)
    }

    fn scope(&self) -> Scope {
        if self.config.all_netns {
            Scope::AllNamespaces
        } else if self.config.ports.is_empty() && self.config.addrs.is_empty() {
            Scope::Namespace
        } else {
            Scope::WatchedPorts
        }
    }

    /// The MIB's movement since attach, read now in the calling thread's namespace.
    fn read_mib(&self) -> Result<mib::MibDelta, String> {
        let (base, netns) = self.mib_base.as_ref().map_err(Clone::clone)?;
        if procfs::own_netns_inum() != *netns {
            return Err(
                "this snapshot was taken by a thread of another network namespace than the \
                 observer's start"
                    .to_owned(),
            );
        }
        let now = mib::read().map_err(|e| e.to_string())?;
        Ok(mib::MibDelta::new(&now, base))
    }

    fn hook_missing(&self, index: usize) -> bool {
        self.missing_hooks.iter().any(|m| m.hook == index)
    }

    /// Whether a periodic walk is due, the namespace holding `sockets` now.
    fn walk_due(&self, sockets: Option<u64>) -> bool {
        let Some(last) = &self.last_walk else {
            return true;
        };
        let age = last.ended.elapsed();
        let interval = self.config.walk_interval.unwrap_or_else(|| {
            let closing = time_wait_may_move(self.closes.1.map(|at| at.elapsed()), age);
            let next = projected_walk(last.duration, self.walk_sizes.1, sockets);
            walk_interval(next, closing)
        });
        age >= interval
    }

    /// TCP sockets of the walked namespace as sockstat counts them (IPv4 in use and
    /// TIME_WAIT, IPv6 in use): the walk visits these, so its cost follows them. None
    /// when they can't be told: unreadable, every namespace walked (`--all-netns`), or a
    /// calling thread of another namespace than the observer's start (its sockstat is
    /// another's): the projection then keeps the last walk's length.
    fn namespace_sockets(&self) -> Option<u64> {
        let (_, netns) = self.mib_base.as_ref().ok()?;
        if self.config.all_netns || procfs::own_netns_inum() != *netns {
            return None;
        }
        let v4 = procfs::read_sockstat()?;
        Some(v4.inuse + v4.tw + procfs::read_sockstat6_tcp_inuse().unwrap_or(0))
    }

    /// Remembers when a snapshot first saw a new close (any side, any state -> CLOSE).
    fn note_closes(&mut self, counters: &Counters, now: Instant) {
        let closes = (0..side::COUNT as u32)
            .flat_map(|s| {
                (0..tcp_state::COUNT as u32)
                    .map(move |from| transition_index(s, from, tcp_state::CLOSE))
            })
            .filter_map(|i| counters.transitions.get(i as usize))
            .sum::<u64>();
        if closes != self.closes.0 {
            self.closes = (closes, Some(now));
        }
    }

    /// A walk started now, waited for (at attach, and at phase ends).
    pub(super) fn walk_now(&mut self) -> Result<(), ObserverError> {
        if !self.walker.busy() {
            self.walk_sizes.0 = self.namespace_sockets();
        }
        let r = self.walker.wait()?;
        self.apply_walk(r);
        Ok(())
    }

    fn apply_walk(&mut self, r: walker::WalkResult) {
        let walker::WalkResult {
            walk,
            transitions_before,
            transitions_after,
        } = r;
        // A socket that changed state while the walk passed it may be in both the walk
        // and the transitions: only a quiet walk may replace the gauges' base. Between
        // quiet walks the transitions (exact) carry the gauges; the states no
        // transition reaches are taken from every walk.
        if transitions_before == transitions_after || self.last_walk.is_none() {
            self.gauges.rebase(&walk.agg, transitions_before);
        } else {
            self.gauges.refresh_walk_only(&walk.agg);
        }
        self.last_walk = Some(walk);
        self.walk_sizes.1 = self.walk_sizes.0;
        self.walks += 1;
    }

    /// With no ports given, every listening port counts as a server port; the
    /// set-state hook learns new ones at once, this catches those that existed before.
    pub(super) fn learn_listening_ports(
        &mut self,
        records: &[c1m_common::ListenerRecord],
    ) -> Result<(), ObserverError> {
        if !self.config.ports.is_empty() {
            return Ok(());
        }
        // Ports past u16 cannot come from the kernel; skipped rather than truncated.
        let flagged = &self.ports_flagged;
        let new: Vec<u16> = records
            .iter()
            .filter_map(|r| u16::try_from(r.port).ok())
            .filter(|&p| !flagged[usize::from(p)])
            .collect();
        super::load::watch_ports(&mut self.ebpf, new.iter().copied())?;
        for p in new {
            self.ports_flagged[usize::from(p)] = true;
        }
        Ok(())
    }

    fn read_counters(&self) -> Result<Counters, ObserverError> {
        let sum = |name: &str, len: usize| -> Result<Vec<u64>, ObserverError> {
            walker::sum_per_cpu(
                self.ebpf.map(name).ok_or(ObserverError::NoObject)?,
                name,
                len,
            )
        };
        Ok(Counters {
            transitions: sum("TRANSITIONS", TRANSITION_SLOTS)?,
            events: sum("EVENTS", EVENT_SLOTS)?,
            retransmits: sum("RETRANSMITS", RETRANSMIT_SLOTS)?,
            resets: sum("RESETS", RESET_SLOTS)?,
            reset_causes: self.read_reset_causes()?,
        })
    }

    fn read_reset_causes(&self) -> Result<Vec<(u32, u64)>, ObserverError> {
        let name = "RESET_CAUSES";
        let map: PerCpuHashMap<&MapData, u32, u64> =
            PerCpuHashMap::try_from(self.ebpf.map(name).ok_or(ObserverError::NoObject)?)
                .map_err(map_err(name))?;
        map.iter()
            .map(|entry| {
                let (key, values) = entry.map_err(map_err(name))?;
                Ok((key, values.iter().sum()))
            })
            .collect()
    }

    fn drain_closed_listeners(&mut self) -> Result<Vec<(u64, ClosedListener)>, ObserverError> {
        let mut map: BpfHashMap<&mut MapData, u64, ClosedListener> = BpfHashMap::try_from(
            self.ebpf
                .map_mut("LISTEN_CLOSED")
                .ok_or(ObserverError::NoObject)?,
        )
        .map_err(map_err("LISTEN_CLOSED"))?;
        let entries: Vec<(u64, ClosedListener)> = map.iter().filter_map(Result::ok).collect();
        for (sk, _) in &entries {
            // Already gone (LRU eviction) is fine.
            let _ = map.remove(sk);
        }
        Ok(entries)
    }

    /// What the loss injector dropped since attach, per direction and class.
    fn read_loss(&self, loss: &super::LossInjection) -> Result<view::LossDrops, ObserverError> {
        let counts = walker::sum_per_cpu(
            self.ebpf.map("LOSS_DROPS").ok_or(ObserverError::NoObject)?,
            "LOSS_DROPS",
            LOSS_SLOTS,
        )?;
        let direction = |d: u32| {
            let n = |class: u32| counts[loss_index(d, class) as usize];
            view::DroppedSegments {
                syn: n(c1m_common::loss::SYN),
                syn_ack: n(c1m_common::loss::SYN_ACK),
                data: n(c1m_common::loss::DATA),
                pure_ack: n(c1m_common::loss::PURE_ACK),
                fin: n(c1m_common::loss::FIN),
                rst: n(c1m_common::loss::RST),
            }
        };
        Ok(view::LossDrops {
            probability: loss.probability,
            link: loss.link.clone(),
            egress: direction(c1m_common::loss::EGRESS),
            ingress: direction(c1m_common::loss::INGRESS),
        })
    }

    /// Each program's `recursion_misses` (one fdinfo read each, ~15 a snapshot).
    fn read_skipped_runs(&self) -> BTreeMap<String, u64> {
        self.ebpf
            .programs()
            .filter_map(|(name, program)| {
                let misses = procfs::prog_recursion_misses(program.fd().ok()?.as_fd())?;
                (misses > 0).then(|| (name.to_owned(), misses))
            })
            .collect()
    }

    fn read_map_errors(&self) -> Result<u64, ObserverError> {
        let map: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(self.ebpf.map("MAP_ERRORS").ok_or(ObserverError::NoObject)?)
                .map_err(map_err("MAP_ERRORS"))?;
        Ok(map.get(&0, 0).map_err(map_err("MAP_ERRORS"))?.iter().sum())
    }

    fn read_listen_events(&self) -> Result<BTreeMap<u16, ListenEvents>, ObserverError> {
        let map: PerCpuHashMap<&MapData, u32, ListenEvents> = PerCpuHashMap::try_from(
            self.ebpf
                .map("LISTEN_EVENTS")
                .ok_or(ObserverError::NoObject)?,
        )
        .map_err(map_err("LISTEN_EVENTS"))?;
        let mut out = BTreeMap::new();
        for entry in map.iter() {
            let (port, values) = entry.map_err(map_err("LISTEN_EVENTS"))?;
            let mut total = ListenEvents::default();
            for v in values.iter() {
                total.children += v.children;
                total.synack_retransmits += v.synack_retransmits;
                total.overflow_acks += v.overflow_acks;
                total.rcv_discards += v.rcv_discards;
            }
            out.insert(port as u16, total);
        }
        Ok(out)
    }

    fn side_view(
        &self,
        s: u32,
        now: &Counters,
        previous: Option<&Counters>,
        elapsed: f64,
    ) -> SideView {
        let mut v = SideView::default();
        let established = |c: &Counters| -> u64 {
            c.transitions[transition_index(s, tcp_state::SYN_SENT, tcp_state::ESTABLISHED) as usize]
                + c.transitions
                    [transition_index(s, tcp_state::SYN_RECV, tcp_state::ESTABLISHED) as usize]
        };
        let total = |c: &Counters| -> u64 {
            (0..tcp_state::COUNT as u32)
                .flat_map(|o| (0..tcp_state::COUNT as u32).map(move |n| transition_index(s, o, n)))
                .map(|i| c.transitions[i as usize])
                .sum()
        };
        for old in 0..tcp_state::COUNT as u32 {
            for new in 0..tcp_state::COUNT as u32 {
                let n = now.transitions[transition_index(s, old, new) as usize];
                if n > 0 {
                    v.transitions.insert(
                        format!("{}->{}", view::state_key(old), view::state_key(new)),
                        n,
                    );
                }
            }
        }
        v.transitions_total = total(now);
        v.established_total = established(now);
        if let Some(prev) = previous.filter(|_| elapsed > 0.0) {
            v.transitions_per_s = (v.transitions_total - total(prev)) as f64 / elapsed;
            v.established_per_s = (v.established_total - established(prev)) as f64 / elapsed;
        }
        for state in view::GAUGE_STATES {
            v.states.insert(
                view::state_key(state),
                self.gauges.value(s, state, &now.transitions),
            );
        }
        let mut kinds = [0u64; retransmit::COUNT];
        for (kind, slot) in kinds.iter_mut().enumerate() {
            *slot = now.retransmits[retransmit_index(s, kind as u32) as usize];
        }
        v.retransmits = Retransmits::from_kinds(&kinds);
        if !self.event_missing(event::RESET_SENT) {
            for reason in 0..reset_reason::COUNT as u32 {
                let n = now.resets[reset_index(s, reason) as usize];
                if n > 0 {
                    v.resets_sent_by_reason
                        .insert(self.reset_reason_name(reason), n);
                }
            }
            v.resets_sent_by_cause = self.reset_causes(s, &now.reset_causes);
        }
        for (index, name) in event::NAMES.iter().enumerate() {
            // Retransmits live in `v.retransmits` (sock_ops and the tracepoint both).
            if index as u32 != event::RETRANSMIT && !self.event_missing(index as u32) {
                // Resets are counted once, by reason (`RESETS`).
                let n = if index as u32 == event::RESET_SENT {
                    v.resets_sent()
                } else {
                    now.events[event_index(s, index as u32) as usize]
                };
                v.events.insert((*name).to_owned(), n);
            }
        }
        v
    }

    /// The kernel's name of a reset reason (`NO_SOCKET`, …), as its tracepoint prints it.
    /// Side `s`'s resets by what drew them, most first.
    fn reset_causes(&self, s: u32, causes: &[(u32, u64)]) -> Vec<ResetCause> {
        let mut out: Vec<ResetCause> = causes
            .iter()
            .filter_map(|&(key, count)| {
                let (side, reason, segment, state) = reset_cause_parts(key);
                (side == s && count > 0).then(|| ResetCause {
                    reason: self.reset_reason_name(reason),
                    segment: ResetSegment::from_index(segment),
                    state: (state != NO_SOCKET_STATE).then(|| view::state_key(state)),
                    count,
                })
            })
            .collect();
        out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.cmp_key(b)));
        out
    }

    fn reset_reason_name(&self, reason: u32) -> String {
        match self.reset_reasons.get(reason as usize) {
            _ if reason == reset_reason::UNKNOWN => "UNKNOWN".to_owned(),
            Some(name) if !name.is_empty() => name.clone(),
            _ => format!("REASON_{reason}"),
        }
    }

    fn event_missing(&self, event_index: u32) -> bool {
        let hook_index = match event_index {
            event::SYNACK_RETRANSMIT => hook::RETRANSMIT_SYNACK,
            event::RESET_SENT => hook::SEND_RESET,
            event::RESET_RECEIVED => hook::RECEIVE_RESET,
            event::RETRANSMIT => hook::RETRANSMIT_SKB,
            event::EXCEED_BUF_LIMIT => hook::EXCEED_BUF_LIMIT,
            event::ATTEMPT_FAIL => return self.attempt_fails_unknown,
            _ => hook::KFREE_SKB,
        };
        self.hook_missing(hook_index)
    }
}

#[cfg(test)]
mod walk_rule_tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn time_wait_moves_until_a_minute_after_the_last_close_past_the_walk() {
        assert!(!time_wait_may_move(None, S(500)), "no close ever");
        assert!(
            time_wait_may_move(Some(S(30)), S(10)),
            "closed after the walk"
        );
        // Closed 100 s ago: its TIME_WAIT ended 40 s ago, before a walk 10 s ago...
        assert!(!time_wait_may_move(Some(S(100)), S(10)));
        // ...but after a walk 50 s ago, which still counted it.
        assert!(time_wait_may_move(Some(S(100)), S(50)));
    }

    #[test]
    fn the_next_walk_is_projected_from_the_namespace_s_growth() {
        let ms = Duration::from_millis;
        assert_eq!(projected_walk(ms(100), Some(20_000), Some(80_000)), ms(400));
        assert_eq!(
            projected_walk(ms(100), Some(80_000), Some(20_000)),
            ms(100),
            "shrunk"
        );
        assert_eq!(
            projected_walk(ms(100), None, Some(80_000)),
            ms(100),
            "unknown"
        );
        // A walk of a few sockets is its fixed cost: 10,000 connections made after the
        // first walk (20,001 sockets) are walked within a second or two, as before.
        let next = projected_walk(ms(1), Some(5), Some(20_001));
        assert_eq!(walk_interval(next, false), S(1));
        // In a ramp the projection outruns the time gone: walked at 40k sockets in 50 ms,
        // 20 s later at 840k the next is due 400 × 1.05 s = 420 s after.
        let next = projected_walk(ms(50), Some(40_000), Some(840_000));
        assert_eq!(walk_interval(next, false), S(420));
    }

    #[test]
    fn walks_back_off_with_their_cost_and_only_closes_bound_their_age() {
        assert_eq!(walk_interval(Duration::from_millis(1), false), S(1));
        assert_eq!(walk_interval(S(2), false), S(800), "no age limit");
        assert_eq!(walk_interval(S(2), true), S(60), "at most a minute old");
        assert_eq!(walk_interval(Duration::from_millis(100), true), S(5));
    }
}
