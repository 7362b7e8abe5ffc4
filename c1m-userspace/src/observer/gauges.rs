//! Live per-state socket gauges: the exact counts of the last socket walk, moved by
//! the transitions counted since the walk began. Between walks this is exact for
//! every state the kernel reports transitions into; a socket that changes state while
//! the walk passes it may be off by one until the next walk.

use c1m_common::{SockAgg, side, sock_agg_index, tcp_state, transition_index};

#[derive(Default)]
pub(crate) struct Gauges {
    base: Vec<i64>,
    transitions_at_walk: Vec<u64>,
}

impl Gauges {
    pub(crate) fn rebase(&mut self, agg: &[SockAgg], transitions: Vec<u64>) {
        self.base = agg.iter().map(|a| a.sockets as i64).collect();
        self.transitions_at_walk = transitions;
    }

    /// TIME_WAIT and request sockets get no transitions: every walk is their truth.
    pub(crate) fn refresh_walk_only(&mut self, agg: &[SockAgg]) {
        for s in 0..side::COUNT as u32 {
            for state in [tcp_state::TIME_WAIT, tcp_state::NEW_SYN_RECV] {
                let i = sock_agg_index(s, state) as usize;
                if let (Some(slot), Some(a)) = (self.base.get_mut(i), agg.get(i)) {
                    *slot = a.sockets as i64;
                }
            }
        }
    }

    pub(crate) fn value(&self, s: u32, state: u32, transitions: &[u64]) -> i64 {
        let mut v = self
            .base
            .get(sock_agg_index(s, state) as usize)
            .copied()
            .unwrap_or(0);
        if self.transitions_at_walk.len() != transitions.len() || s as usize >= side::COUNT {
            return v;
        }
        for other in 0..tcp_state::COUNT as u32 {
            let into = transition_index(s, other, state) as usize;
            v += transitions[into].saturating_sub(self.transitions_at_walk[into]) as i64;
            // A child is cloned from its listener and born "LISTEN -> SYN_RECV": the
            // listener does not leave LISTEN.
            let is_birth = state == tcp_state::LISTEN && other == tcp_state::SYN_RECV;
            if !is_birth {
                let out = transition_index(s, state, other) as usize;
                v -= transitions[out].saturating_sub(self.transitions_at_walk[out]) as i64;
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use c1m_common::{SOCK_AGG_SLOTS, TRANSITION_SLOTS};

    use super::*;

    #[test]
    fn walk_plus_transitions() {
        let mut agg = vec![SockAgg::default(); SOCK_AGG_SLOTS];
        agg[sock_agg_index(side::SERVER, tcp_state::LISTEN) as usize].sockets = 1;
        agg[sock_agg_index(side::SERVER, tcp_state::ESTABLISHED) as usize].sockets = 5;
        let mut g = Gauges::default();
        g.rebase(&agg, vec![0; TRANSITION_SLOTS]);
        let mut t = vec![0u64; TRANSITION_SLOTS];
        let s = side::SERVER;
        t[transition_index(s, tcp_state::LISTEN, tcp_state::SYN_RECV) as usize] = 3;
        t[transition_index(s, tcp_state::SYN_RECV, tcp_state::ESTABLISHED) as usize] = 3;
        t[transition_index(s, tcp_state::ESTABLISHED, tcp_state::CLOSE_WAIT) as usize] = 2;
        assert_eq!(
            g.value(s, tcp_state::LISTEN, &t),
            1,
            "children don't leave LISTEN"
        );
        assert_eq!(g.value(s, tcp_state::SYN_RECV, &t), 0);
        assert_eq!(g.value(s, tcp_state::ESTABLISHED, &t), 6);
        assert_eq!(g.value(s, tcp_state::CLOSE_WAIT, &t), 2);
        assert_eq!(g.value(side::CLIENT, tcp_state::ESTABLISHED, &t), 0);
    }
}
