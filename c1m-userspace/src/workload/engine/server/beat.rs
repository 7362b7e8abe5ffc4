//! `--heartbeat` on the epoll server shard (ws mode): the sweep that pings each open
//! connection at its phase, unmasked as a server must, and closes the ones whose ping
//! went unanswered. The schedule and the counts live in `workload::heartbeat`.

use std::os::fd::AsFd;

use super::Shard;
use super::proto::WsState;
use crate::workload::{
    engine::send_sealed_before_close,
    heartbeat::{self, HeartbeatConfig, Visit},
    sys::Epoll,
};

impl Shard {
    /// `--heartbeat`: the slots whose phase came up since the last step ping their
    /// client (unmasked, as a server must), or close when its ping went unanswered.
    pub(super) fn heartbeat(&mut self, ep: &Epoll, now: u64) {
        let Some((cfg, sweep)) = self.cfg.heartbeat.zip(self.beat.as_mut()) else {
            return;
        };
        self.next_beat = now + cfg.step_ns();
        for r in sweep.advance(now, self.conns.slot_count()) {
            for i in r {
                if let Some(tok) = self.conns.token_at(i) {
                    self.beat_one(ep, &cfg, tok, now);
                }
            }
        }
    }

    pub(super) fn beat_one(&mut self, ep: &Epoll, cfg: &HeartbeatConfig, tok: u64, now: u64) {
        let Some(conn) = self.conns.get_mut(tok).filter(|c| c.ws == WsState::Open) else {
            return;
        };
        self.out.clear();
        let visit = heartbeat::visit(&mut self.c.heartbeat, cfg, &mut conn.ping_ns, now);
        heartbeat::encode(&mut self.out, visit, conn.ping_ns, None);
        match visit {
            Visit::Wait => {}
            Visit::Ping => self.send_out(ep, tok),
            Visit::Missed => {
                self.c.closed.heartbeat_missed += 1;
                send_sealed_before_close(
                    conn.fd.as_fd(),
                    conn.tls.as_deref_mut(),
                    &mut self.wire,
                    &conn.spill,
                    &self.out,
                    &mut self.c.bytes_out,
                );
                self.close(tok);
            }
        }
    }
}
