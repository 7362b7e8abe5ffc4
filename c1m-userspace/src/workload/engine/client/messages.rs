//! `--message-rate` on the epoll client shard: the sweep that sends each connection's
//! stamped messages from the end of the ramp, and the drain of their echoes at a
//! teardown. What a message is and how it is counted lives in `workload::messages`.

use super::Shard;
use crate::workload::{
    messages,
    sys::{self, Epoll},
};

impl Shard {
    /// Starts the sweep once the ramp is done: the setup's figures are its own.
    pub(super) fn start_messages_at_ramp_end(&mut self, now: u64) {
        if self.msgs.is_none()
            && !self.msgs_switched
            && let Some(m) = self.p.cfg.messages
            && self.ramp_done()
        {
            self.msgs = Some(messages::Sweep::new(&m, now, self.p.cfg.shard));
            self.next_msg = now;
        }
    }

    /// `--message-rate`: the slots whose phase came up since the last step (every missed
    /// cycle included) send their message, stamped with the instant it came up.
    pub(super) fn messages(&mut self, ep: &Epoll, now: u64) {
        let Some((step, sweep)) = self
            .p
            .cfg
            .messages
            .map(|m| m.step_ns())
            .zip(self.msgs.as_mut())
        else {
            return;
        };
        self.next_msg = now + step;
        let slots = self.conns.slot_count();
        let due = sweep.advance(now, slots);
        let sweep = sweep.clone();
        for (r, start) in due {
            for i in r {
                if let Some(tok) = self.conns.token_at(i) {
                    self.message_one(ep, tok, sweep.scheduled(start, i, slots), now);
                }
            }
        }
    }

    pub(super) fn message_one(&mut self, ep: &Epoll, tok: u64, scheduled: u64, now: u64) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        self.p.out.clear();
        if !self.p.message(&mut conn.p, scheduled, now) || self.p.out.is_empty() {
            return;
        }
        self.send_out(ep, tok);
    }

    /// A `Close` with messages out: no more are sent, and the teardown waits (up to
    /// [`messages::MessageConfig::drain`]) for their echoes. False: nothing to wait for.
    pub(super) fn start_drain(&mut self) -> bool {
        let Some(m) = self.p.cfg.messages else {
            return false;
        };
        if self.closing || self.p.c.messages.outstanding == 0 {
            return false;
        }
        self.p.draining = true;
        self.drain_until = Some(sys::monotonic_ns() + m.drain().as_nanos() as u64);
        true
    }

    /// True once a drain begun by [`Shard::start_drain`] is over at `now`: every echo is
    /// in, or the wait ran out (the rest are counted lost at the teardown).
    pub(super) fn drain_over(&mut self, now: u64) -> bool {
        match self.drain_until {
            Some(d) if self.p.c.messages.outstanding == 0 || now >= d => {
                self.drain_until = None;
                true
            }
            _ => false,
        }
    }
}
