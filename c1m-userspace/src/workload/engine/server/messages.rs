//! `--message-rate` on a server shard (ws mode), for both server engines: the sweep that
//! sends each open connection its stamped messages unasked, slot `i` of `n` at `i/n` of
//! the interval, every missed cycle caught up (stamped with its own instant, counted
//! late). What a message is and how it is counted lives in `workload::messages`.

use super::{
    proto::WsState,
    state::{ServerIo, ServerShardState},
};
use crate::workload::messages::{self, MessageConfig};

impl<X> ServerShardState<X> {
    /// The slots whose phase came up since the last step send their message (every
    /// missed cycle included), stamped with the instant it came up.
    pub(super) fn messages(&mut self, io: &mut impl ServerIo<X>, now: u64) {
        let Some((cfg, sweep)) = self.cfg.messages.zip(self.msgs.as_mut()) else {
            return;
        };
        self.next_msg = now + cfg.step_ns();
        let slots = self.conns.slot_count();
        let due = sweep.advance(now, slots);
        let sweep = sweep.clone();
        for (r, start) in due {
            for i in r {
                if let Some(tok) = self.conns.token_at(i) {
                    self.message_one(io, &cfg, tok, sweep.scheduled(start, i, slots), now);
                }
            }
        }
    }

    fn message_one(
        &mut self,
        io: &mut impl ServerIo<X>,
        cfg: &MessageConfig,
        tok: u64,
        at: u64,
        now: u64,
    ) {
        let Some(conn) = self.conns.get_mut(tok).filter(|c| c.ws == WsState::Open) else {
            return;
        };
        if !messages::server_sent(&mut self.c.server_messages, cfg, at, now, io.queued(conn)) {
            return;
        }
        self.out.clear();
        messages::encode_server(&mut self.out, &mut self.msg_scratch, cfg, at, conn.msg_seq);
        conn.msg_seq = conn.msg_seq.wrapping_add(1);
        if let Err(e) = io.send(tok, conn, &self.out, &mut self.c.bytes_out) {
            self.failed(io, tok, &e);
        }
    }
}
