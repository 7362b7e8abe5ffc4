//! `--heartbeat`: a ping per held WebSocket connection every interval, its pong matched by
//! the stamp the ping carries, and a connection with no pong by the timeout closed. Pure:
//! both engines and both sides give it the instant and the connection's one word of state
//! (the outstanding ping's send instant, 0 for none), and do the I/O.
//!
//! The phases are spread evenly without a timer per connection: a [`Sweep`] walks the
//! shard's connection slots once per interval, slot `i` of `n` at `i/n` of it, so an
//! epoll shard pings the few slots each step passed (no herd, O(1) state per shard). The
//! tokio engine's tasks derive their own phase from their index ([`phase_ns`]).

use std::{ops::Range, time::Duration};

use serde::{Deserialize, Serialize};

use crate::workload::{
    stats::counters::Heartbeats,
    sys::splitmix64,
    ws::frame::{Opcode, close_payload, encode_frame},
};

/// What a shard is told: ping every `interval_ns`, close when no pong came within
/// `timeout_ns` of the ping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HeartbeatConfig {
    pub interval_ns: u64,
    pub timeout_ns: u64,
}

impl HeartbeatConfig {
    /// `--heartbeat` and `--heartbeat-timeout` (default: the interval); None without
    /// `--heartbeat`.
    pub(crate) fn of(interval: Option<Duration>, timeout: Option<Duration>) -> Option<Self> {
        let interval_ns = u64::try_from(interval?.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        let timeout_ns = timeout
            .map(|t| u64::try_from(t.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(interval_ns)
            .max(1);
        Some(HeartbeatConfig {
            interval_ns,
            timeout_ns,
        })
    }

    /// How often a shard's sweep steps: 1/200 of the interval, between 1 and 20 ms (at
    /// 1M connections and 30 s, one shard of 20,000 pings ~13 per 20 ms step).
    pub(crate) fn step_ns(&self) -> u64 {
        (self.interval_ns / 200).clamp(1_000_000, 20_000_000)
    }
}

/// What a connection's slot asks for when the sweep reaches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Visit {
    /// Send a ping carrying [`ping_payload`] of the instant given (now its `ping_ns`).
    Ping,
    /// The outstanding ping had no pong by the timeout: close the connection (counted
    /// missed; the caller counts the close cause).
    Missed,
    /// A ping is outstanding and not yet due (a timeout longer than the interval).
    Wait,
}

/// The connection's slot came up at `now`: a ping, or the verdict on the outstanding one.
pub(crate) fn visit(
    hb: &mut Heartbeats,
    cfg: &HeartbeatConfig,
    ping_ns: &mut u64,
    now: u64,
) -> Visit {
    if *ping_ns == 0 {
        hb.pings += 1;
        hb.outstanding += 1;
        *ping_ns = now.max(1);
        return Visit::Ping;
    }
    if now.saturating_sub(*ping_ns) >= cfg.timeout_ns {
        hb.missed += 1;
        hb.outstanding -= 1;
        *ping_ns = 0;
        Visit::Missed
    } else {
        Visit::Wait
    }
}

/// The payload of the ping sent at `ping_ns`: the instant, 8 bytes big-endian, which the
/// pong must echo (RFC 6455 §5.5.3).
pub(crate) fn ping_payload(ping_ns: u64) -> [u8; 8] {
    ping_ns.to_be_bytes()
}

/// The frame a slot's visit sends, at the end of `out`: the ping carrying its stamp, or
/// the close (1011) of a connection whose ping went unanswered; nothing while it waits.
/// `mask`: a client's key (a server's frames go unmasked).
pub(crate) fn encode(out: &mut Vec<u8>, visit: Visit, ping_ns: u64, mask: Option<[u8; 4]>) {
    match visit {
        Visit::Ping => encode_frame(out, Opcode::Ping, &ping_payload(ping_ns), mask),
        Visit::Missed => encode_frame(
            out,
            Opcode::Close,
            &close_payload(1011, "heartbeat: no pong"),
            mask,
        ),
        Visit::Wait => {}
    }
}

/// A pong arrived at `now`: the latency in µs if it answers the outstanding ping (counted
/// as pong or late pong), None if unsolicited (counted, ignored).
pub(crate) fn pong(
    hb: &mut Heartbeats,
    cfg: &HeartbeatConfig,
    ping_ns: &mut u64,
    payload: &[u8],
    now: u64,
) -> Option<u64> {
    if *ping_ns == 0 || payload != ping_payload(*ping_ns) {
        hb.unsolicited_pongs += 1;
        return None;
    }
    let took = now.saturating_sub(*ping_ns);
    if took > cfg.timeout_ns {
        hb.late_pongs += 1;
    } else {
        hb.pongs += 1;
    }
    hb.outstanding -= 1;
    *ping_ns = 0;
    Some(took / 1000)
}

/// The connection ended (or began its close) with its ping, if any, unanswered.
pub(crate) fn ended(hb: &mut Heartbeats, ping_ns: &mut u64) {
    if *ping_ns != 0 {
        hb.unanswered += 1;
        hb.outstanding -= 1;
        *ping_ns = 0;
    }
}

/// A shard's walk over its connection slots, once per interval: slot `i` of `n` comes up
/// at `epoch + (c + i/n) × interval` in cycle `c`. A slot count that grows during the
/// ramp moves later slots' phases a little within the cycle; none is visited twice in
/// one cycle, and a shard that fell behind by more than a cycle skips the missed ones.
#[derive(Clone, Debug)]
pub(crate) struct Sweep {
    interval_ns: u64,
    epoch_ns: u64,
    cycle: u64,
    /// Next slot to visit in `cycle`.
    next: usize,
}

impl Sweep {
    /// A sweep from `t0_ns`, shifted by a fraction of the interval drawn from `shard`, so
    /// the shards' first slots do not all come up at the same instant.
    pub(crate) fn new(cfg: &HeartbeatConfig, t0_ns: u64, shard: u32) -> Sweep {
        Sweep {
            interval_ns: cfg.interval_ns,
            epoch_ns: t0_ns.saturating_add(splitmix64(u64::from(shard)) % cfg.interval_ns),
            cycle: 0,
            next: 0,
        }
    }

    /// The slots that came up since the last call, of `slots` in all (at most two ranges:
    /// the end of the last cycle and the start of this one).
    pub(crate) fn advance(&mut self, now: u64, slots: usize) -> [Range<usize>; 2] {
        if now < self.epoch_ns || slots == 0 {
            return [0..0, 0..0];
        }
        let since = u128::from(now - self.epoch_ns);
        let interval = u128::from(self.interval_ns);
        let cycle = u64::try_from(since / interval).unwrap_or(u64::MAX);
        let upto = usize::try_from((since % interval) * slots as u128 / interval)
            .unwrap_or(slots)
            .min(slots);
        if cycle == self.cycle {
            let from = self.next.min(upto);
            self.next = upto;
            return [from..upto, 0..0];
        }
        let rest = if cycle == self.cycle + 1 {
            self.next.min(slots)..slots
        } else {
            0..0
        };
        self.cycle = cycle;
        self.next = upto;
        [rest, 0..upto]
    }
}

/// The tokio engine's phase of a connection: the `k`-th of `count` comes up at `k/count`
/// of the interval (plus the shard's shift), as a slot does in a [`Sweep`].
pub(crate) fn phase_ns(cfg: &HeartbeatConfig, shard: u32, k: u64, count: u64) -> u64 {
    phase_in(cfg.interval_ns, splitmix64(u64::from(shard)), k, count)
}

/// The `k`-th of `count` phases of an interval, shifted by `shift` (a shard's draw): the
/// tokio tasks' spread for every periodic workload (heartbeats, messages).
pub(crate) fn phase_in(interval_ns: u64, shift: u64, k: u64, count: u64) -> u64 {
    let shift = shift % interval_ns.max(1);
    let at = u128::from(k % count.max(1)) * u128::from(interval_ns) / u128::from(count.max(1));
    (shift + u64::try_from(at).unwrap_or(0)) % interval_ns.max(1)
}

/// The first slot instant of a connection with phase `phase` at or after `now`, the sweep
/// having begun at `t0_ns`.
pub(crate) fn next_slot(cfg: &HeartbeatConfig, t0_ns: u64, phase: u64, now: u64) -> u64 {
    next_in(cfg.interval_ns, t0_ns, phase, now)
}

/// The first instant of phase `phase` of an interval at or after `now`, from `t0_ns`.
pub(crate) fn next_in(interval_ns: u64, t0_ns: u64, phase: u64, now: u64) -> u64 {
    let first = t0_ns.saturating_add(phase);
    if now <= first {
        return first;
    }
    let cycles = (now - first).div_ceil(interval_ns.max(1));
    first.saturating_add(cycles.saturating_mul(interval_ns))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn cfg(interval_ms: u64, timeout_ms: u64) -> HeartbeatConfig {
        HeartbeatConfig {
            interval_ns: interval_ms * MS,
            timeout_ns: timeout_ms * MS,
        }
    }

    #[test]
    fn every_ping_ends_exactly_once() {
        let c = cfg(100, 100);
        let mut hb = Heartbeats::default();
        let (mut a, mut b, mut d, mut e) = (0, 0, 0, 0);
        assert_eq!(visit(&mut hb, &c, &mut a, 10 * MS), Visit::Ping);
        assert_eq!(visit(&mut hb, &c, &mut b, 10 * MS), Visit::Ping);
        assert_eq!(visit(&mut hb, &c, &mut d, 10 * MS), Visit::Ping);
        assert_eq!(visit(&mut hb, &c, &mut e, 10 * MS), Visit::Ping);
        // a: answered in 2 ms; a wrong stamp first is unsolicited.
        assert_eq!(pong(&mut hb, &c, &mut a, &[0; 8], 11 * MS), None);
        assert_eq!(
            pong(&mut hb, &c, &mut a, &ping_payload(10 * MS), 12 * MS),
            Some(2000)
        );
        assert_eq!(
            pong(&mut hb, &c, &mut a, &ping_payload(10 * MS), 13 * MS),
            None
        );
        // b: answered after the timeout, before its next slot.
        assert_eq!(
            pong(&mut hb, &c, &mut b, &ping_payload(10 * MS), 115 * MS),
            Some(105_000)
        );
        // d: never answered.
        assert_eq!(visit(&mut hb, &c, &mut d, 110 * MS), Visit::Missed);
        // e: its connection ended first.
        ended(&mut hb, &mut e);
        ended(&mut hb, &mut e);
        assert_eq!(
            (
                hb.pings,
                hb.pongs,
                hb.late_pongs,
                hb.missed,
                hb.unanswered,
                hb.outstanding,
                hb.unsolicited_pongs
            ),
            (4, 1, 1, 1, 1, 0, 2)
        );
        assert_eq!(hb.unaccounted(), 0);
    }

    #[test]
    fn a_timeout_longer_than_the_interval_waits_a_slot() {
        let c = cfg(100, 250);
        let mut hb = Heartbeats::default();
        let mut p = 0;
        assert_eq!(visit(&mut hb, &c, &mut p, MS), Visit::Ping);
        assert_eq!(visit(&mut hb, &c, &mut p, 101 * MS), Visit::Wait);
        assert_eq!(visit(&mut hb, &c, &mut p, 201 * MS), Visit::Wait);
        assert_eq!(visit(&mut hb, &c, &mut p, 301 * MS), Visit::Missed);
        assert_eq!((hb.pings, hb.missed, hb.outstanding), (1, 1, 0));
    }

    #[test]
    fn a_sweep_visits_every_slot_once_per_cycle_spread_evenly() {
        let c = cfg(100, 100);
        let mut s = Sweep::new(&c, 0, 0);
        let start = s.epoch_ns;
        let mut seen = vec![0u32; 1000];
        let mut per_step = Vec::new();
        // 1 ms steps over 3 cycles.
        for t in 0..=300 {
            let mut n = 0;
            for r in s.advance(start + t * MS, 1000) {
                for i in r {
                    seen[i] += 1;
                    n += 1;
                }
            }
            per_step.push(n);
        }
        assert!(seen.iter().all(|&v| v == 3), "each slot thrice");
        // 1000 slots over 100 steps: 10 a step, never a herd.
        assert!(per_step.iter().all(|&n| n <= 10), "{per_step:?}");
    }

    #[test]
    fn a_sweep_that_fell_behind_finishes_its_cycle_and_skips_the_missed_ones() {
        let c = cfg(100, 100);
        let mut s = Sweep::new(&c, 0, 0);
        let e = s.epoch_ns;
        let count = |r: [Range<usize>; 2]| r.iter().map(|r| r.len()).sum::<usize>();
        assert_eq!(count(s.advance(e + 50 * MS, 10)), 5);
        assert_eq!(count(s.advance(e + 150 * MS, 10)), 10, "5 left + 5 new");
        assert_eq!(count(s.advance(e + 450 * MS, 10)), 5, "only this cycle's");
        assert_eq!(count(s.advance(e.saturating_sub(1), 10)), 0);
    }

    #[test]
    fn phases_spread_over_the_interval_and_slots_follow_them() {
        let c = cfg(100, 100);
        let ph: Vec<u64> = (0..4).map(|k| phase_ns(&c, 3, k, 4)).collect();
        let shift = ph[0];
        for (k, p) in ph.iter().enumerate() {
            assert_eq!(*p, (shift + k as u64 * 25 * MS) % (100 * MS));
        }
        assert_eq!(next_slot(&c, 1000, 5, 0), 1005);
        assert_eq!(next_slot(&c, 1000, 5, 1005), 1005);
        assert_eq!(next_slot(&c, 1000, 5, 1006), 1005 + 100 * MS);
    }
}
