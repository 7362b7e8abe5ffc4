//! `--heartbeat` on a server shard (ws mode), for both server engines: the sweep that
//! pings each open connection at its phase, unmasked as a server must, and closes the
//! ones whose ping went unanswered. The schedule and the counts live in
//! `workload::heartbeat`.

use super::{
    proto::WsState,
    state::{ServerIo, ServerShardState},
};
use crate::workload::heartbeat::{self, HeartbeatConfig, Visit};

impl<X> ServerShardState<X> {
    /// `--heartbeat`: the slots whose phase came up since the last step ping their
    /// client (unmasked, as a server must), or close when its ping went unanswered.
    pub(super) fn heartbeat(&mut self, io: &mut impl ServerIo<X>, now: u64) {
        let Some((cfg, sweep)) = self.cfg.heartbeat.zip(self.beat.as_mut()) else {
            return;
        };
        self.next_beat = now + cfg.step_ns();
        for r in sweep.advance(now, self.conns.slot_count()) {
            for i in r {
                if let Some(tok) = self.conns.token_at(i) {
                    self.beat_one(io, &cfg, tok, now);
                }
            }
        }
    }

    fn beat_one(&mut self, io: &mut impl ServerIo<X>, cfg: &HeartbeatConfig, tok: u64, now: u64) {
        let Some(conn) = self.conns.get_mut(tok).filter(|c| c.ws == WsState::Open) else {
            return;
        };
        self.out.clear();
        let visit = heartbeat::visit(&mut self.c.heartbeat, cfg, &mut conn.ping_ns, now);
        heartbeat::encode(&mut self.out, visit, conn.ping_ns, None);
        match visit {
            Visit::Wait => {}
            Visit::Ping => {
                if let Err(e) = io.send(tok, conn, &self.out, &mut self.c.bytes_out) {
                    self.failed(io, tok, &e);
                }
            }
            Visit::Missed => {
                self.c.closed.heartbeat_missed += 1;
                io.send_last(conn, &self.out, &mut self.c.bytes_out);
                self.close(io, tok);
            }
        }
    }
}
