//! Per-port accept-queue figures from successive listener walks. `sk_drops` is a
//! per-socket lifetime counter: each listener's value at first sight is its baseline
//! (zero for listeners born after attach), and a listener that goes away keeps its
//! contribution, so totals never run backwards.

use std::collections::{BTreeMap, HashMap};

use c1m_common::{ClosedListener, ListenEvents, ListenerRecord};

use super::view::ListenerView;

struct Live {
    port: u16,
    baseline: u32,
    last: u32,
}

#[derive(Default)]
pub(crate) struct Tracker {
    live: HashMap<u64, Live>,
    retired: BTreeMap<u16, u64>,
    peaks: BTreeMap<u16, u64>,
    current: Vec<ListenerRecord>,
    /// Only these ports are reported (empty: all).
    filter: Vec<u16>,
}

impl Tracker {
    pub(crate) fn with_filter(filter: Vec<u16>) -> Self {
        Self {
            filter,
            ..Self::default()
        }
    }

    /// Listeners that closed since the last walk, with their final `sk_drops`.
    pub(crate) fn closed(&mut self, closed: &[(u64, ClosedListener)]) {
        for (sk, c) in closed {
            let port = c.port as u16;
            let baseline = match self.live.remove(sk) {
                Some(l) if l.port == port => l.baseline,
                Some(l) => {
                    *self.retired.entry(l.port).or_default() +=
                        u64::from(l.last.wrapping_sub(l.baseline));
                    0
                }
                // Born and closed between two walks.
                None => 0,
            };
            *self.retired.entry(port).or_default() += u64::from(c.drops.wrapping_sub(baseline));
        }
    }

    pub(crate) fn observe(&mut self, records: &[ListenerRecord], initial: bool) {
        let mut seen = std::collections::HashSet::new();
        for r in records {
            let port = r.port as u16;
            seen.insert(r.sk);
            let live = self.live.entry(r.sk).or_insert(Live {
                port,
                baseline: if initial { r.drops } else { 0 },
                last: r.drops,
            });
            // Same address, different socket (freed and reused between walks).
            if live.port != port || r.drops < live.last {
                *self.retired.entry(live.port).or_default() +=
                    u64::from(live.last.wrapping_sub(live.baseline));
                *live = Live {
                    port,
                    baseline: 0,
                    last: r.drops,
                };
            }
            live.last = r.drops;
        }
        let gone: Vec<u64> = self
            .live
            .keys()
            .filter(|k| !seen.contains(k))
            .copied()
            .collect();
        for sk in gone {
            if let Some(l) = self.live.remove(&sk) {
                *self.retired.entry(l.port).or_default() +=
                    u64::from(l.last.wrapping_sub(l.baseline));
            }
        }
        let mut depth: BTreeMap<u16, u64> = BTreeMap::new();
        for r in records {
            *depth.entry(r.port as u16).or_default() += u64::from(r.ack_backlog);
        }
        for (port, d) in depth {
            let peak = self.peaks.entry(port).or_default();
            *peak = (*peak).max(d);
        }
        self.current = records.to_vec();
    }

    /// `acks`: the kfree_skb hook runs; `discards`: it also knows where `tcp_v4_rcv`
    /// is (kallsyms), so drops can be made exact; `synacks`: the SYN-ACK hook runs.
    pub(crate) fn views(
        &self,
        events: &BTreeMap<u16, ListenEvents>,
        acks: bool,
        discards: bool,
        synacks: bool,
    ) -> Vec<ListenerView> {
        let mut by_port: BTreeMap<u16, ListenerView> = BTreeMap::new();
        let wanted = |port: u16| self.filter.is_empty() || self.filter.contains(&port);
        for r in &self.current {
            let port = r.port as u16;
            if !wanted(port) {
                continue;
            }
            let v = by_port.entry(port).or_insert_with(|| ListenerView {
                port,
                ..ListenerView::default()
            });
            v.sockets += 1;
            v.queue_depth += u64::from(r.ack_backlog);
            v.queue_limit += u64::from(r.max_ack_backlog);
        }
        for l in self.live.values() {
            if let Some(v) = by_port.get_mut(&l.port) {
                v.sk_drops_delta += u64::from(l.last.wrapping_sub(l.baseline));
            }
        }
        for (&port, &retired) in &self.retired {
            if wanted(port) && retired > 0 {
                by_port
                    .entry(port)
                    .or_insert_with(|| ListenerView {
                        port,
                        ..ListenerView::default()
                    })
                    .sk_drops_delta += retired;
            }
        }
        for v in by_port.values_mut() {
            let e = events.get(&v.port).copied().unwrap_or_default();
            v.queue_peak_sampled = self.peaks.get(&v.port).copied().unwrap_or(0);
            v.children = e.children;
            v.synack_retransmits = synacks.then_some(e.synack_retransmits);
            v.overflow_acks = acks.then_some(e.overflow_acks);
            v.rcv_discards = (acks && discards).then_some(e.rcv_discards);
            v.accept_queue_overflows = v.sk_drops_delta.saturating_sub(if !acks {
                0
            } else if discards {
                e.rcv_discards
            } else {
                // Without the discard count, overflowed final ACKs are the known
                // double count; other discards (rare) stay in.
                e.overflow_acks
            });
        }
        by_port.into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(sk: u64, port: u32, drops: u32, backlog: u32) -> ListenerRecord {
        ListenerRecord {
            kind: c1m_common::RECORD_LISTENER,
            port,
            drops,
            ack_backlog: backlog,
            max_ack_backlog: 8,
            sk,
            ..ListenerRecord::default()
        }
    }

    #[test]
    fn drops_since_attach_survive_listener_changes() {
        let mut t = Tracker::default();
        t.observe(&[rec(1, 8000, 100, 0)], true);
        t.observe(&[rec(1, 8000, 110, 9), rec(2, 8000, 4, 1)], false);
        let mut events = BTreeMap::new();
        let e = ListenEvents {
            children: 5,
            synack_retransmits: 1,
            overflow_acks: 2,
            rcv_discards: 3,
        };
        events.insert(8000, e);
        let v = &t.views(&events, true, true, true)[0];
        assert_eq!((v.sockets, v.queue_depth, v.queue_limit), (2, 10, 16));
        assert_eq!(v.sk_drops_delta, 14);
        assert_eq!(
            v.accept_queue_overflows, 11,
            "tcp_v4_rcv discards count in sk_drops too"
        );
        assert_eq!((v.overflow_acks, v.rcv_discards), (Some(2), Some(3)));
        let no_kallsyms = &t.views(&events, true, false, true)[0];
        assert_eq!(
            no_kallsyms.accept_queue_overflows, 12,
            "falls back to overflowed ACKs"
        );
        // Listener 1 closes after 5 more drops: all 15 are kept.
        t.closed(&[(
            1,
            ClosedListener {
                port: 8000,
                drops: 115,
            },
        )]);
        t.observe(&[rec(2, 8000, 4, 0)], false);
        let v = &t.views(&events, false, false, false)[0];
        assert_eq!(
            (v.sockets, v.sk_drops_delta, v.accept_queue_overflows),
            (1, 19, 19)
        );
        assert_eq!(
            (v.overflow_acks, v.synack_retransmits, v.queue_peak_sampled),
            (None, None, 10)
        );
        // One born and closed between two walks: all its drops count.
        t.closed(&[(
            3,
            ClosedListener {
                port: 8000,
                drops: 7,
            },
        )]);
        assert_eq!(t.views(&events, false, false, false)[0].sk_drops_delta, 26);
    }
}
