//! `--churn` on the epoll client shard: which open connection goes next, its clean
//! close and its reopen, and churned closes the server never answered. The pace and the
//! counts live in `workload::churn`.

use std::sync::atomic::Ordering;

use super::{
    Conn, PACE_NS, Shard,
    proto::{self, State},
};
use crate::workload::{
    churn::{self, ChurnOrder},
    config::Mode,
    engine::Slab,
    sys::{self, Epoll},
};

impl Shard {
    /// `--churn`: closes and reopens the connections due since the last look.
    pub(super) fn churn(&mut self, ep: &Epoll, now: u64) {
        let Some(pace) = self.churning.as_mut() else {
            return;
        };
        let due = pace.take(now);
        // The next look: at the next churn's instant, at most every pacing tick.
        self.next_churn = pace.next_due_ns().max(now + PACE_NS);
        for _ in 0..due {
            let Some(tok) = self.churn_victim() else {
                // Nothing held to churn: skipped, not caught up.
                break;
            };
            self.churn_one(ep, tok);
        }
    }

    /// The open connection to churn next, by `--churn-order`.
    pub(super) fn churn_victim(&mut self) -> Option<u64> {
        let order = self.p.cfg.churn?.order;
        let open = |conns: &mut Slab<Conn>, tok| {
            conns.get_mut(tok).is_some_and(|c| c.p.state == State::Open)
        };
        match order {
            ChurnOrder::Oldest => {
                while let Some(tok) = self.open_order.pop_front() {
                    if open(&mut self.conns, tok) {
                        return Some(tok);
                    }
                }
                None
            }
            ChurnOrder::Random => {
                let slots = self.conns.slot_count() as u64;
                if slots == 0 || self.p.c.open == 0 {
                    return None;
                }
                // Held connections fill nearly every slot: a few draws find one.
                for _ in 0..64 {
                    self.churn_rng = self.churn_rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
                    let i = (sys::splitmix64(self.churn_rng) % slots) as usize;
                    if let Some(tok) = self.conns.token_at(i)
                        && open(&mut self.conns, tok)
                    {
                        return Some(tok);
                    }
                }
                None
            }
        }
    }

    /// Churns one open connection: closed as a teardown closes it (a close frame, then
    /// the server's close awaited; a FIN in the raw modes), and reopened to the same
    /// target from the same source at once.
    pub(super) fn churn_one(&mut self, ep: &Epoll, tok: u64) {
        let ws = self.p.cfg.mode == Mode::Ws;
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        let g = conn.p.g;
        self.p.conn_ends(&mut conn.p);
        churn::closing(&mut self.p.c.churn);
        self.p.c.open -= 1;
        let waits = ws && self.send_close_frame(tok);
        if waits && let Some(conn) = self.conns.get_mut(tok) {
            conn.p.state = State::Closing;
            conn.p.churned = true;
            self.p.c.churn.closing += 1;
            self.closes_waiting += 1;
            self.churn_closing.push_back((tok, sys::monotonic_ns()));
        } else if self.conns.remove(tok).is_some() {
            // The socket closes here: our FIN first, so TIME_WAIT is ours.
            self.p.open_in_process.fetch_sub(1, Ordering::Relaxed);
        }
        self.connect(ep, g, true);
    }

    /// Churned connections whose server has not closed within
    /// [`proto::CLOSE_STALL_NS`] of our close frame are closed by us.
    pub(super) fn churn_stalled(&mut self) {
        let now = sys::monotonic_ns();
        while let Some(&(tok, since)) = self.churn_closing.front() {
            let waiting = self
                .conns
                .get_mut(tok)
                .is_some_and(|c| c.p.state == State::Closing && c.p.churned);
            if waiting && now.saturating_sub(since) < proto::CLOSE_STALL_NS {
                break;
            }
            self.churn_closing.pop_front();
            if waiting {
                self.p.warn_close_unanswered(1);
                self.end(tok);
            }
        }
    }
}
