//! The walks of the io_uring server shard: `--heartbeat` and `--message-rate` (the
//! epoll shard's schedules from `workload::heartbeat` and `workload::messages`), and
//! the push, whose chunk of [`PUSH_CHUNK`] frames goes to the kernel in one submit.

use anyhow::{Context, Result};

use super::{PushJob, Shard, send_on, write_before_close};
use crate::workload::{
    config::Mode,
    engine::{
        Sink,
        server::{
            PUSH_CHUNK,
            proto::{WsState, push_frame, stamp_push},
            warnings::push_ignored,
        },
    },
    heartbeat::{self, HeartbeatConfig, Visit},
    messages::{self, MessageConfig},
};

/// Frames queued per `io_uring_enter` within a push chunk. A frame is stamped when it is
/// queued and sent at the submit, so the whole chunk in one submit put a chunk's worth of
/// sends between each stamp and its frame (20,000 connections: per-message p50 8.6 ms,
/// p99 46 ms against epoll's 0.7 / 6.4 ms, same fan-out); 128 keeps that wait to 128
/// sends at 1/128 of a syscall per frame.
const PUSH_SUBMIT: u64 = 128;

impl Shard {
    /// Last step of a turn: the walks whose time came, and a push chunk.
    pub(super) fn turn_end(&mut self, now: u64, sink: &mut Sink) -> Result<()> {
        if self.beat.is_some() && now >= self.next_beat {
            self.heartbeat(now);
        }
        if self.msgs.is_some() && now >= self.next_msg {
            self.messages(now);
        }
        if let Some(id) = self.push.as_ref().map(|j| j.id) {
            self.push_step();
            // The chunk's sends go now, before the CPU goes to the readers.
            self.ring.submit().context("io_uring_enter")?;
            if self.push.is_none() {
                self.push_done = Some(id);
                self.report(sink, true, false)?;
            }
            // As the epoll shard: hand the CPU to the readers between chunks.
            std::thread::yield_now();
        }
        Ok(())
    }

    fn heartbeat(&mut self, now: u64) {
        let Some((cfg, sweep)) = self.cfg.heartbeat.zip(self.beat.as_mut()) else {
            return;
        };
        self.next_beat = now + cfg.step_ns();
        for r in sweep.advance(now, self.conns.slot_count()) {
            for i in r {
                if let Some(tok) = self.conns.token_at(i) {
                    self.beat_one(&cfg, tok, now);
                }
            }
        }
    }

    fn beat_one(&mut self, cfg: &HeartbeatConfig, tok: u64, now: u64) {
        let Some(conn) = self.conns.get_mut(tok).filter(|c| c.ws == WsState::Open) else {
            return;
        };
        self.out.clear();
        let visit = heartbeat::visit(&mut self.c.heartbeat, cfg, &mut conn.ping_ns, now);
        heartbeat::encode(&mut self.out, visit, conn.ping_ns, None);
        match visit {
            Visit::Wait => {}
            Visit::Ping => self.send_out(tok),
            Visit::Missed => {
                self.c.closed.heartbeat_missed += 1;
                write_before_close(conn, &self.out, &mut self.c.bytes_out);
                self.close(tok);
            }
        }
    }

    fn messages(&mut self, now: u64) {
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
                    self.message_one(&cfg, tok, sweep.scheduled(start, i, slots), now);
                }
            }
        }
    }

    fn message_one(&mut self, cfg: &MessageConfig, tok: u64, at: u64, now: u64) {
        let Some(conn) = self.conns.get_mut(tok).filter(|c| c.ws == WsState::Open) else {
            return;
        };
        let queued = conn.out.as_ref().map_or(0, |q| q.queued());
        if !messages::server_sent(&mut self.c.server_messages, cfg, at, now, queued) {
            return;
        }
        self.out.clear();
        messages::encode_server(&mut self.out, &mut self.msg_scratch, cfg, at, conn.msg_seq);
        conn.msg_seq = conn.msg_seq.wrapping_add(1);
        self.send_out(tok);
    }

    pub(super) fn start_push(&mut self, id: u64, started_unix_ns: u64) {
        if self.cfg.mode != Mode::Ws {
            self.warn(push_ignored(id));
            self.push_done = Some(id);
            return;
        }
        self.rep.push_started(id, started_unix_ns);
        self.push = Some(PushJob {
            id,
            started_unix_ns,
            next_slot: 0,
        });
    }

    /// Queues the current push's frame for the next chunk of connections, each stamped
    /// with the instant its send was queued.
    fn push_step(&mut self) {
        let Some(job) = self.push.as_mut() else {
            return;
        };
        let (toks, next) = self.conns.tokens_from(job.next_slot, PUSH_CHUNK);
        job.next_slot = next;
        let (id, started) = (job.id, job.started_unix_ns);
        if next >= self.conns.slot_count() {
            self.push = None;
        }
        let mut frame = push_frame(id, started);
        let (mut written, mut first, mut lastw) = (0u64, 0u64, 0u64);
        for tok in toks {
            let Some(conn) = self.conns.get_mut(tok).filter(|c| c.ws == WsState::Open) else {
                continue;
            };
            let now = stamp_push(&mut frame);
            match send_on(&mut self.ring, tok, conn, &frame) {
                Ok(()) => {
                    written += 1;
                    if written.is_multiple_of(PUSH_SUBMIT) {
                        // The frames stamped so far go now (an error shows at the
                        // chunk's own submit).
                        let _ = self.ring.submit();
                    }
                    if first == 0 {
                        first = now;
                    }
                    lastw = now;
                }
                Err(e) => self.failed(tok, &e),
            }
        }
        self.c.pushes_sent += written;
        self.rep.push_written(id, started, written, first, lastw);
    }
}
