//! `--message-rate` (tcpkali's): from the end of its shard's ramp (the setup's figures
//! stay its own), every held connection sends M messages a second of S bytes, the
//! server echoes them, and each is timed from the instant it was *scheduled*,
//! not the instant it was written (coordinated omission corrected as wrk2 does: a sender
//! or a peer that stalls shows the stall in the latency instead of skipping it).
//!
//! A message's payload carries its schedule and its place in its connection's stream:
//! `[scheduled ns, 8 bytes BE][sequence, 4 bytes BE]["c1mM"][zeros up to S]`, so the echo
//! is matched without keeping a copy, and a connection keeps two words (sent, received).
//! Pure: the engines give it the instants and the connection's two words, and do the I/O.
//!
//! The schedule is spread without a timer per connection: a [`Sweep`] walks the shard's
//! connection slots once per interval as the heartbeat's does, slot `i` of `n` at `i/n` of
//! it, but a shard that fell behind catches every missed cycle up, each message stamped
//! with its own scheduled instant (wrk2: the load that should have been offered is, late,
//! and its latency says so). The tokio engine's tasks derive their own phase from their
//! index ([`phase_ns`]) and send every message whose instant passed when they wake.
//!
//! `c1m server --message-rate` is the other direction: the server sends each open
//! WebSocket connection M messages a second with the same stamp and the same schedule,
//! the top bit of the sequence set to say a server sent it and the 31 below it
//! numbering the connection's messages from 0 (a skipped message is not numbered), and
//! the client times each from its stamp on arrival and checks the numbers
//! (`workload::message_order`). Server and client read one clock: CLOCK_MONOTONIC is one
//! clock for every process and network namespace on one kernel (so the two only agree
//! on one host, which is where c1m's own server and client meet).

use std::{ops::Range, time::Duration};

use serde::{Deserialize, Serialize};

use crate::workload::{
    heartbeat,
    stats::counters::{Messages, ServerMessages},
    sys::splitmix64,
    ws::frame::{Opcode, encode_frame},
};

/// The stamp at the head of every message: scheduled ns, sequence, magic.
pub(crate) const HEADER: usize = 16;
const MAGIC: &[u8; 4] = b"c1mM";
/// The sequence's top bit: set on a server's message, so a client that sends its own
/// (and waits for their echoes) tells the two apart; a client's sequence keeps 31 bits.
const FROM_SERVER: u32 = 1 << 31;
/// A server connection with this much output still queued skips its message (counted
/// capped): its client stopped reading, and the queue would only grow.
pub(crate) const SERVER_QUEUE_CAP: usize = 256 * 1024;
/// Fastest per-connection rate accepted: one message every 10 µs.
const MAX_RATE: f64 = 100_000.0;

/// `--message-rate` or `--total-message-rate`: messages per second, `10`, `10/s` or `0.5`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MessageRate(pub f64);

impl Eq for MessageRate {}

impl std::fmt::Display for MessageRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/s", self.0)
    }
}

/// Parses a rate in messages per second: `10`, `10/s`, `0.5`, `1,000/s`.
pub(crate) fn parse_rate(s: &str) -> Result<MessageRate, String> {
    let t = s.trim();
    let t = t.strip_suffix("/s").unwrap_or(t);
    let t: String = t.chars().filter(|c| *c != ',' && *c != '_').collect();
    match t.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(MessageRate(r)),
        Ok(_) => Err(format!(
            "{s:?}: a message rate is more than 0 messages per second (e.g. 10, 10/s or 0.5)"
        )),
        Err(_) => Err(format!(
            "not a message rate: {s:?} (messages per second, e.g. 10, 10/s or 0.5)"
        )),
    }
}

/// `--message-size`: bytes of payload, at least the stamp.
pub(crate) fn parse_size(s: &str) -> Result<u32, String> {
    let n = crate::args::parse_number::<u32>(s)?;
    if (n as usize) < HEADER {
        return Err(format!(
            "--message-size {n}: a message carries a {HEADER}-byte stamp (scheduled instant, \
             sequence, magic); give at least {HEADER}"
        ));
    }
    Ok(n)
}

/// What the run records of `--message-rate` / `--total-message-rate` over `connections`
/// and `--message-size`: (messages a second per connection, bytes each), zeros without
/// either.
pub(crate) fn recorded(
    per_conn: Option<MessageRate>,
    total: Option<MessageRate>,
    connections: u64,
    size: u32,
) -> (f64, u64) {
    match MessageConfig::of(per_conn, total, connections, size) {
        Ok(Some(c)) => (c.rate(), u64::from(c.size)),
        _ => (0.0, 0),
    }
}

/// What a client shard is told: every connection sends a message of `size` bytes every
/// `interval_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MessageConfig {
    pub interval_ns: u64,
    pub size: u32,
}

impl MessageConfig {
    /// The per-connection schedule of `--message-rate` (per connection) or
    /// `--total-message-rate` (over `connections`); None with neither.
    pub(crate) fn of(
        per_conn: Option<MessageRate>,
        total: Option<MessageRate>,
        connections: u64,
        size: u32,
    ) -> Result<Option<MessageConfig>, String> {
        let rate = match (per_conn, total) {
            (None, None) => return Ok(None),
            (Some(r), _) => r.0,
            (None, Some(t)) => t.0 / connections.max(1) as f64,
        };
        if rate > MAX_RATE {
            return Err(format!(
                "{rate} messages a second per connection: at most {MAX_RATE} (one every 10 µs)"
            ));
        }
        let interval_ns = (1e9 / rate).round();
        if !(1.0..1e18).contains(&interval_ns) {
            return Err(format!(
                "{rate} messages a second per connection is too slow (one in {} s)",
                interval_ns / 1e9
            ));
        }
        Ok(Some(MessageConfig {
            interval_ns: interval_ns as u64,
            size: size.max(HEADER as u32),
        }))
    }

    /// Messages a second per connection.
    pub(crate) fn rate(&self) -> f64 {
        1e9 / self.interval_ns as f64
    }

    /// How often a shard's sweep steps: 1/200 of the interval, between 1 and 20 ms.
    pub(crate) fn step_ns(&self) -> u64 {
        (self.interval_ns / 200).clamp(1_000_000, 20_000_000)
    }

    /// How long a teardown waits for the echoes of the messages still out before it says
    /// goodbye (then they are counted lost).
    pub(crate) fn drain(&self) -> Duration {
        Duration::from_secs(3)
    }
}

/// A connection's place in its message stream: messages sent (the next one's sequence)
/// and those still waiting for their echo (echoes come back in order: one TCP stream each
/// way, so the next echo awaited is `sent - out`). Borrowed from the connection's state,
/// where they fill padding.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ConnMessages<'a> {
    pub sent: &'a mut u32,
    pub out: &'a mut u16,
}

/// The message `seq` scheduled at `scheduled_ns`, at the end of `out`: a binary frame
/// (`ws`, masked with `mask` for a client) or the raw bytes.
pub(crate) fn encode(
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    cfg: &MessageConfig,
    scheduled_ns: u64,
    seq: u32,
    ws: bool,
    mask: Option<[u8; 4]>,
) {
    scratch.clear();
    scratch.extend_from_slice(&scheduled_ns.to_be_bytes());
    scratch.extend_from_slice(&seq.to_be_bytes());
    scratch.extend_from_slice(MAGIC);
    scratch.resize(cfg.size as usize, 0);
    if ws {
        encode_frame(out, Opcode::Binary, scratch, mask);
    } else {
        out.extend_from_slice(scratch);
    }
}

/// A payload's stamp (scheduled ns, sequence), None if it is not a message of ours or
/// if a server sent it ([`decode_server`]).
pub(crate) fn decode(p: &[u8]) -> Option<(u64, u32)> {
    decode_any(p).filter(|(_, seq)| seq & FROM_SERVER == 0)
}

/// A server's message's stamp (scheduled instant in monotonic ns, sequence: the top bit
/// set, its number in its connection's stream below), None for anything else.
pub(crate) fn decode_server(p: &[u8]) -> Option<(u64, u32)> {
    decode_any(p).filter(|(_, seq)| seq & FROM_SERVER != 0)
}

fn decode_any(p: &[u8]) -> Option<(u64, u32)> {
    if p.len() < HEADER || &p[12..16] != MAGIC {
        return None;
    }
    let at = u64::from_be_bytes(p[..8].try_into().ok()?);
    let seq = u32::from_be_bytes(p[8..12].try_into().ok()?);
    Some((at, seq))
}

/// The server's message `seq` (of its connection) scheduled at `scheduled_ns`, at the
/// end of `out`: an unmasked binary frame, as a server's are.
pub(crate) fn encode_server(
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    cfg: &MessageConfig,
    scheduled_ns: u64,
    seq: u32,
) {
    encode(
        out,
        scratch,
        cfg,
        scheduled_ns,
        seq | FROM_SERVER,
        true,
        None,
    );
}

/// A server's message scheduled at `scheduled_ns` comes up at `now` on a connection with
/// `queued` bytes of output not yet taken by the socket: true if it is to be sent
/// (counted sent, and late when more than an interval behind), false if skipped (counted
/// capped: the client stopped reading).
pub(crate) fn server_sent(
    m: &mut ServerMessages,
    cfg: &MessageConfig,
    scheduled_ns: u64,
    now: u64,
    queued: usize,
) -> bool {
    if queued >= SERVER_QUEUE_CAP {
        m.capped += 1;
        return false;
    }
    m.sent += 1;
    if now.saturating_sub(scheduled_ns) > cfg.interval_ns {
        m.late += 1;
    }
    true
}

/// A server's message scheduled at `scheduled_ns` arrived at `now`: counted, and its
/// latency in µs from its schedule (on the one monotonic clock server and client share).
pub(crate) fn server_received(m: &mut ServerMessages, scheduled_ns: u64, now: u64) -> u64 {
    m.received += 1;
    now.saturating_sub(scheduled_ns) / 1000
}

/// A message scheduled at `scheduled_ns` leaves now (`now`): counted sent and
/// outstanding, late when the sender was more than an interval behind its schedule. Its
/// sequence is the one returned; None (counted `capped`, not sent) when 65,535 of the
/// connection's messages are already waiting for their echo.
pub(crate) fn sent(
    m: &mut Messages,
    cfg: &MessageConfig,
    conn: ConnMessages<'_>,
    scheduled_ns: u64,
    now: u64,
) -> Option<u32> {
    if *conn.out == u16::MAX {
        m.capped += 1;
        return None;
    }
    m.sent += 1;
    m.outstanding += 1;
    if now.saturating_sub(scheduled_ns) > cfg.interval_ns {
        m.late += 1;
    }
    let seq = *conn.sent & !FROM_SERVER;
    *conn.sent = conn.sent.wrapping_add(1);
    *conn.out += 1;
    Some(seq)
}

/// An echo with stamp (`scheduled_ns`, `seq`) arrived at `now`: its latency in µs from
/// its schedule if it is the next one this connection waits for, else None (counted
/// unmatched).
pub(crate) fn received(
    m: &mut Messages,
    conn: ConnMessages<'_>,
    scheduled_ns: u64,
    seq: u32,
    now: u64,
) -> Option<u64> {
    if *conn.out == 0 || seq != conn.sent.wrapping_sub(u32::from(*conn.out)) & !FROM_SERVER {
        m.unmatched += 1;
        return None;
    }
    *conn.out -= 1;
    m.received += 1;
    m.outstanding -= 1;
    Some(now.saturating_sub(scheduled_ns) / 1000)
}

/// The connection ended (or began its close): the messages still out are lost.
pub(crate) fn ended(m: &mut Messages, conn: ConnMessages<'_>) {
    let out = u64::from(*conn.out);
    m.lost += out;
    m.outstanding -= out;
    *conn.out = 0;
}

/// A shard's walk over its connection slots, once per interval: slot `i` of `n` comes up
/// at `epoch + (c + i/n) × interval` in cycle `c`, which is the scheduled instant of the
/// message it sends then. Unlike the heartbeat's sweep, one that fell behind by cycles
/// catches every one of them up (each slot a message per missed cycle, scheduled in it).
#[derive(Clone, Debug)]
pub(crate) struct Sweep {
    interval_ns: u64,
    epoch_ns: u64,
    cycle: u64,
    /// Next slot to visit in `cycle`.
    next: usize,
}

impl Sweep {
    /// A sweep from `t0_ns`, shifted by a fraction of the interval drawn from `shard`.
    pub(crate) fn new(cfg: &MessageConfig, t0_ns: u64, shard: u32) -> Sweep {
        Sweep {
            interval_ns: cfg.interval_ns,
            epoch_ns: t0_ns.saturating_add(splitmix64(u64::from(shard) ^ 0x6d73) % cfg.interval_ns),
            cycle: 0,
            next: 0,
        }
    }

    /// Every (slot range, cycle start) that came up since the last call, of `slots` in
    /// all, oldest first: the rest of the last cycle visited, every whole cycle missed,
    /// then the start of the current one. Slot `i` of a range came up at
    /// [`Sweep::scheduled`]`(start, i, slots)`.
    pub(crate) fn advance(&mut self, now: u64, slots: usize) -> Vec<(Range<usize>, u64)> {
        let mut out = Vec::new();
        if now < self.epoch_ns || slots == 0 {
            return out;
        }
        let since = u128::from(now - self.epoch_ns);
        let interval = u128::from(self.interval_ns);
        let cycle = u64::try_from(since / interval).unwrap_or(u64::MAX);
        let upto = usize::try_from((since % interval) * slots as u128 / interval)
            .unwrap_or(slots)
            .min(slots);
        let start = |c: u64| {
            self.epoch_ns
                .saturating_add(c.saturating_mul(self.interval_ns))
        };
        if cycle == self.cycle {
            let from = self.next.min(upto);
            if from < upto {
                out.push((from..upto, start(cycle)));
            }
            self.next = upto;
            return out;
        }
        if self.next < slots {
            out.push((self.next..slots, start(self.cycle)));
        }
        for c in self.cycle + 1..cycle {
            out.push((0..slots, start(c)));
        }
        if upto > 0 {
            out.push((0..upto, start(cycle)));
        }
        self.cycle = cycle;
        self.next = upto;
        out
    }

    /// The instant slot `i` of `slots` came up in the cycle that began at `start`.
    pub(crate) fn scheduled(&self, start: u64, i: usize, slots: usize) -> u64 {
        let at = u128::from(self.interval_ns) * i as u128 / slots.max(1) as u128;
        start.saturating_add(u64::try_from(at).unwrap_or(0))
    }
}

/// The tokio engine's phase of a connection: the `k`-th of `count` comes up at `k/count`
/// of the interval (plus the shard's shift), as a slot does in a [`Sweep`].
pub(crate) fn phase_ns(cfg: &MessageConfig, shard: u32, k: u64, count: u64) -> u64 {
    heartbeat::phase_in(
        cfg.interval_ns,
        splitmix64(u64::from(shard) ^ 0x6d73),
        k,
        count,
    )
}

/// The first instant of phase `phase` at or after `now`, the schedule having begun at
/// `t0_ns`.
pub(crate) fn next_slot(cfg: &MessageConfig, t0_ns: u64, phase: u64, now: u64) -> u64 {
    heartbeat::next_in(cfg.interval_ns, t0_ns, phase, now)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn cfg(interval_ms: u64) -> MessageConfig {
        MessageConfig {
            interval_ns: interval_ms * MS,
            size: 64,
        }
    }

    #[test]
    fn rates_parse_with_or_without_per_second() {
        assert_eq!(parse_rate("10").unwrap(), MessageRate(10.0));
        assert_eq!(parse_rate("10/s").unwrap(), MessageRate(10.0));
        assert_eq!(parse_rate("0.5").unwrap(), MessageRate(0.5));
        assert_eq!(parse_rate("1,000/s").unwrap(), MessageRate(1000.0));
        for bad in ["0", "-1", "x", "10/m", "inf", "NaN"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        assert!(parse_size("15").is_err());
        assert_eq!(parse_size("64").unwrap(), 64);
        let c = MessageConfig::of(None, Some(MessageRate(1000.0)), 100, 64)
            .unwrap()
            .unwrap();
        assert_eq!(c.interval_ns, 100 * MS);
        assert_eq!(
            MessageConfig::of(Some(MessageRate(0.5)), None, 1, 64)
                .unwrap()
                .unwrap()
                .interval_ns,
            2_000 * MS
        );
        assert!(MessageConfig::of(Some(MessageRate(1e6)), None, 1, 64).is_err());
    }

    #[test]
    fn a_message_round_trips_its_stamp() {
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        encode(&mut out, &mut scratch, &cfg(100), 12_345, 7, false, None);
        assert_eq!(out.len(), 64);
        assert_eq!(decode(&out), Some((12_345, 7)));
        assert_eq!(decode(&out[..15]), None);
        assert_eq!(decode(&[0; 64]), None);
    }

    #[test]
    fn a_servers_message_is_told_from_a_clients_echo() {
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        encode_server(&mut out, &mut scratch, &cfg(100), 12_345, 7);
        // An unmasked binary frame: 2 bytes of head, then the payload.
        assert_eq!(out[0], 0x82);
        assert_eq!(decode_server(&out[2..]), Some((12_345, 7 | FROM_SERVER)));
        assert_eq!(decode(&out[2..]), None, "not an echo of ours");
        let mut client = Vec::new();
        encode(&mut client, &mut scratch, &cfg(100), 5, 1, false, None);
        assert_eq!(decode_server(&client), None);
        let mut m = ServerMessages::default();
        assert!(server_sent(&mut m, &cfg(100), 10 * MS, 10 * MS, 0));
        assert!(server_sent(&mut m, &cfg(100), 10 * MS, 200 * MS, 0));
        assert!(!server_sent(
            &mut m,
            &cfg(100),
            10 * MS,
            10 * MS,
            SERVER_QUEUE_CAP
        ));
        assert_eq!(server_received(&mut m, 10 * MS, 12 * MS), 2000);
        assert_eq!((m.sent, m.late, m.capped, m.received), (2, 1, 1, 1));
    }

    #[test]
    fn every_message_ends_exactly_once() {
        let c = cfg(100);
        let mut m = Messages::default();
        let (mut s, mut o) = (0, 0);
        macro_rules! a {
            () => {
                ConnMessages {
                    sent: &mut s,
                    out: &mut o,
                }
            };
        }
        assert_eq!(sent(&mut m, &c, a!(), 10 * MS, 10 * MS), Some(0));
        assert_eq!(sent(&mut m, &c, a!(), 110 * MS, 300 * MS), Some(1));
        // Out of order, or a sequence never sent: unmatched.
        assert_eq!(received(&mut m, a!(), 110 * MS, 1, 301 * MS), None);
        assert_eq!(
            received(&mut m, a!(), 10 * MS, 0, 12 * MS),
            Some(2000),
            "from its schedule"
        );
        // Sent 190 ms behind schedule: its latency counts them.
        assert_eq!(received(&mut m, a!(), 110 * MS, 1, 301 * MS), Some(191_000));
        assert_eq!(received(&mut m, a!(), 110 * MS, 2, 302 * MS), None);
        let (mut s2, mut o2) = (0, 0);
        macro_rules! b {
            () => {
                ConnMessages {
                    sent: &mut s2,
                    out: &mut o2,
                }
            };
        }
        sent(&mut m, &c, b!(), 0, 0);
        ended(&mut m, b!());
        ended(&mut m, b!());
        // A connection with 65,535 out sends no more until an echo comes back.
        o2 = u16::MAX;
        assert_eq!(sent(&mut m, &c, b!(), 0, 0), None);
        o2 = 0;
        assert_eq!(
            (
                m.sent,
                m.received,
                m.late,
                m.lost,
                m.outstanding,
                m.unmatched,
                m.capped
            ),
            (3, 2, 1, 1, 0, 2, 1)
        );
        assert_eq!(m.unaccounted(), 0);
        let _ = (s, o, s2, o2);
    }

    #[test]
    fn a_sweep_visits_every_slot_once_per_cycle_and_catches_missed_cycles_up() {
        let c = cfg(100);
        let mut s = Sweep::new(&c, 0, 0);
        let e = s.epoch_ns;
        let mut seen = vec![Vec::new(); 10];
        let mut visit = |s: &mut Sweep, now: u64| {
            for (r, start) in s.advance(now, 10) {
                for i in r {
                    let at = s.scheduled(start, i, 10);
                    assert!(at <= now, "scheduled {at} after {now}");
                    seen[i].push(at);
                }
            }
        };
        for t in 0..=100 {
            visit(&mut s, e + t * MS);
        }
        // Stalled from 100 ms to 450 ms: every missed cycle is sent, each at its instant.
        visit(&mut s, e + 450 * MS);
        for (i, at) in seen.iter().enumerate() {
            let want: Vec<u64> = (0..5)
                .map(|c| e + c * 100 * MS + i as u64 * 10 * MS)
                .filter(|&a| a < e + 450 * MS)
                .collect();
            assert_eq!(at, &want, "slot {i}");
        }
        assert!(s.advance(e.saturating_sub(1), 10).is_empty());
    }

    #[test]
    fn phases_spread_over_the_interval_and_slots_follow_them() {
        let c = cfg(100);
        let ph: Vec<u64> = (0..4).map(|k| phase_ns(&c, 3, k, 4)).collect();
        for (k, p) in ph.iter().enumerate() {
            assert_eq!(*p, (ph[0] + k as u64 * 25 * MS) % (100 * MS));
        }
        assert_eq!(next_slot(&c, 1000, 5, 0), 1005);
        assert_eq!(next_slot(&c, 1000, 5, 1006), 1005 + 100 * MS);
    }
}
