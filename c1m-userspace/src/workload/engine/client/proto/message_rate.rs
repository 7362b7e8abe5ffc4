//! `--message-rate`: the client's own stamped messages, sent on a schedule and timed when
//! their echo comes back, for both engines.

use super::{ConnProto, Proto, State, conn_messages};
use crate::workload::{config::Mode, messages, stats, sys};

impl Proto {
    /// `--message-rate`: appends to [`Proto::out`] the message of an open `conn` scheduled
    /// at `scheduled_ns`, sent at `now` (counted; nothing appended when the connection has
    /// too many out, counted capped). False: none (not open, no message rate, or the
    /// teardown is draining).
    pub(crate) fn message(&mut self, conn: &mut ConnProto, scheduled_ns: u64, now: u64) -> bool {
        let Some(cfg) = self.cfg.messages else {
            return false;
        };
        if conn.state != State::Open || self.draining || self.cfg.mode == Mode::Hold {
            return false;
        }
        let Some(seq) = messages::sent(
            &mut self.c.messages,
            &cfg,
            conn_messages(conn),
            scheduled_ns,
            now,
        ) else {
            // Capped (counted): this one is skipped, the schedule goes on.
            return true;
        };
        let ws = self.cfg.mode == Mode::Ws;
        let mask = ws.then(|| self.mask_key());
        messages::encode(
            &mut self.out,
            &mut self.msg_scratch,
            &cfg,
            scheduled_ns,
            seq,
            ws,
            mask,
        );
        true
    }

    /// An echo of one of our messages, stamped (`scheduled_ns`, `seq`): timed from its
    /// schedule if it is the one `conn` waits for, else counted unmatched.
    pub(super) fn on_message(&mut self, conn: &mut ConnProto, scheduled_ns: u64, seq: u32) {
        let now = sys::monotonic_ns();
        if let Some(us) = messages::received(
            &mut self.c.messages,
            conn_messages(conn),
            scheduled_ns,
            seq,
            now,
        ) {
            self.hists.record(stats::histograms::MESSAGE, us);
        }
    }

    /// Raw echo mode with `--message-rate`: the whole messages at the start of `data`
    /// matched (a stamp that is not ours counts unmatched); returns the bytes used (the
    /// rest is the start of a message, for the next read).
    pub(crate) fn message_input(&mut self, conn: &mut ConnProto, data: &[u8]) -> usize {
        let Some(cfg) = self.cfg.messages else {
            return data.len();
        };
        let size = cfg.size as usize;
        let mut used = 0;
        while data.len() - used >= size {
            match messages::decode(&data[used..used + size]) {
                Some((at, seq)) => self.on_message(conn, at, seq),
                None => self.c.messages.unmatched += 1,
            }
            used += size;
        }
        used
    }
}
