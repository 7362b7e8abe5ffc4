//! What a client connection does with what it reads (echo checks, WebSocket frames,
//! messages) and sends (handshake request, echoes, pings, messages), through the shard's
//! [`Proto`], which the epoll engine's connections share; its spill (partial input,
//! unsent output) and its clocks' timers.

use std::io;

use bytes::{Buf, BytesMut};

use super::{
    Shared,
    conn::{Clocks, Conn, Flow, Timer, counted},
    instant_of,
};
use crate::workload::{
    config::Mode,
    engine::{
        MAX_PENDING_OUT,
        client::proto::{Proto, State},
        closed_by, failure_of,
    },
    heartbeat::{self, Visit},
    messages, sys,
    tokio_engine::{
        Spill,
        stream::{Stream, tls_error},
    },
};

impl Conn {
    /// The connection is set up (TCP, then TLS if any): the WebSocket handshake request,
    /// or open and the first echo.
    pub(super) fn begin(&mut self, p: &mut Proto, s: &mut Stream, now: u64) -> Flow {
        if p.cfg.mode == Mode::Ws {
            let req = p.handshake_request(&mut self.p, now);
            let r = self.send(s, req);
            return counted(&mut p.c, r, |e, c| failure_of(e, &mut c.failures));
        }
        p.opened(&mut self.p, now);
        self.echo_next(p, s)
    }

    /// Writes what the socket takes now and queues the rest (the read loop flushes it).
    pub(super) fn send(&mut self, s: &mut Stream, bytes: &[u8]) -> io::Result<u64> {
        if let Some(out) = self.pending_out() {
            if out.len() + bytes.len() > MAX_PENDING_OUT {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "peer not reading: output queue full",
                ));
            }
            self.spill_mut().out.extend_from_slice(bytes);
            return Ok(0);
        }
        let n = match s.try_write(bytes) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(e),
        };
        if n < bytes.len() {
            self.spill_mut().out.extend_from_slice(&bytes[n..]);
        }
        Ok(n as u64)
    }

    /// Output the socket has not taken yet, if any.
    pub(super) fn pending_out(&self) -> Option<&BytesMut> {
        self.spill
            .as_deref()
            .map(|sp| &sp.out)
            .filter(|o| !o.is_empty())
    }

    pub(super) fn spill_mut(&mut self) -> &mut Spill {
        self.spill.get_or_insert_with(Box::default)
    }

    /// Drops the spill once it holds nothing, so an idle connection returns to no heap.
    pub(super) fn shrink(&mut self) {
        if self.spill.as_ref().is_some_and(|sp| sp.is_empty()) {
            self.spill = None;
        }
    }

    /// The clocks of an open connection in `mode` at `now`: its next heartbeat slot and
    /// next message, those that run (None: neither).
    pub(super) fn clocks(&self, sh: &Shared, mode: Mode, now: u64) -> Option<Box<Clocks>> {
        let mut c = Clocks::default();
        if mode == Mode::Ws {
            c.beat = self.next_beat(sh, now);
        }
        if mode != Mode::Hold {
            c.msg_at = self.first_message(sh, now);
            if c.msg_at > 0 {
                c.msg = Some(Box::pin(tokio::time::sleep_until(instant_of(c.msg_at))));
            }
        }
        (c.beat.is_some() || c.msg.is_some()).then(|| Box::new(c))
    }

    /// `--heartbeat`: the timer of this connection's next slot at or after `now` (None
    /// without heartbeat). The `k`-th connection of the shard's `count` comes up at
    /// `k/count` of the interval, as an epoll shard's slot `k` does.
    pub(super) fn next_beat(&self, sh: &Shared, now: u64) -> Timer {
        let p = sh.p.borrow();
        let (cfg, epoch) = p.cfg.heartbeat.zip(sh.beat_epoch.get())?;
        let k = self.p.g.saturating_sub(p.cfg.first) / p.cfg.stride.max(1);
        let phase = heartbeat::phase_ns(&cfg, p.cfg.shard, k, p.cfg.count);
        let at = heartbeat::next_slot(&cfg, epoch, phase, now);
        Some(Box::pin(tokio::time::sleep_until(instant_of(at))))
    }

    /// `--heartbeat`: this connection's slot came up: a ping, or the close of one whose
    /// ping went unanswered (counted; the connection ends).
    pub(super) fn beat(&mut self, p: &mut Proto, s: &mut Stream, now: u64) -> Flow {
        match p.heartbeat_visit(&mut self.p, now) {
            None | Some(Visit::Wait) => Flow::Go,
            Some(Visit::Ping) => {
                let r = self.send(s, &p.out);
                counted(&mut p.c, r, |e, c| closed_by(e, &mut c.closed))
            }
            Some(Visit::Missed) => {
                if let Ok(n) = self.send(s, &p.out) {
                    p.c.bytes_out += n;
                }
                Flow::End
            }
        }
    }

    /// `--message-rate`: the instant of this connection's first message at or after `now`
    /// (0: no message rate). The `k`-th connection of the shard's `count` comes up at
    /// `k/count` of the interval, as an epoll shard's slot `k` does.
    pub(super) fn first_message(&self, sh: &Shared, now: u64) -> u64 {
        let p = sh.p.borrow();
        let Some((cfg, epoch)) = p.cfg.messages.zip(sh.msg_epoch.get()) else {
            return 0;
        };
        let k = self.p.g.saturating_sub(p.cfg.first) / p.cfg.stride.max(1);
        let phase = messages::phase_ns(&cfg, p.cfg.shard, k, p.cfg.count);
        messages::next_slot(&cfg, epoch, phase, now).max(1)
    }

    /// `--message-rate`: every message whose instant passed by `now` (a task that woke
    /// late catches up, each stamped with its own instant), in one write; `at` becomes
    /// the next one's instant.
    pub(super) fn messages(
        &mut self,
        p: &mut Proto,
        s: &mut Stream,
        at: &mut u64,
        now: u64,
    ) -> Flow {
        let Some(cfg) = p.cfg.messages else {
            return Flow::Go;
        };
        p.out.clear();
        if p.msg_from == 0 && p.ramp_finished() {
            // Messages from the end of the ramp, as the epoll engine's: the first task to
            // wake after it says when.
            p.msg_from = now;
        }
        while *at <= now {
            // Slots before the ramp's end pass unsent.
            if p.msg_from > 0 && *at >= p.msg_from && !p.message(&mut self.p, *at, now) {
                break;
            }
            *at = at.saturating_add(cfg.interval_ns);
        }
        if p.out.is_empty() {
            return Flow::Go;
        }
        let r = self.send(s, &p.out);
        counted(&mut p.c, r, |e, c| closed_by(e, &mut c.closed))
    }

    /// Raw echo mode with `--message-rate`: whole messages matched, a cut one kept.
    pub(super) fn raw_messages(&mut self, p: &mut Proto, buf: &[u8]) {
        let mut sp = self.spill.take();
        let mut inbuf = sp
            .as_mut()
            .map(|sp| std::mem::take(&mut sp.inbuf))
            .unwrap_or_default();
        if inbuf.is_empty() {
            let used = p.message_input(&mut self.p, buf);
            inbuf.extend_from_slice(&buf[used..]);
        } else {
            inbuf.extend_from_slice(buf);
            let used = p.message_input(&mut self.p, &inbuf);
            inbuf.advance(used);
        }
        if !inbuf.is_empty() {
            sp.get_or_insert_with(Box::default).inbuf = inbuf;
        }
        self.spill = sp;
        self.shrink();
    }

    /// Sends the next echo request if more are wanted.
    pub(super) fn echo_next(&mut self, p: &mut Proto, s: &mut Stream) -> Flow {
        let Some(bytes) = p.echo_request(&mut self.p) else {
            return Flow::Go;
        };
        let r = self.send(s, bytes);
        counted(&mut p.c, r, |e, c| closed_by(e, &mut c.closed))
    }

    pub(super) fn fail_or_close(&self, p: &mut Proto, e: &io::Error) {
        // A TLS record rustls refused: counted by cause, as the epoll client does.
        if let Some(f) = tls_error(e) {
            f.count(&mut p.c.tls_errors);
            if self.p.state == State::Open {
                p.c.closed.error += 1;
            } else {
                p.c.failures.tls += 1;
            }
            return;
        }
        if self.p.state == State::Open {
            closed_by(e, &mut p.c.closed);
        } else {
            failure_of(e, &mut p.c.failures);
        }
    }

    /// WebSocket input in `buf` (the shared buffer): decoded after any partial frame kept.
    pub(super) fn ws(&mut self, p: &mut Proto, buf: &mut [u8], s: &mut Stream) -> Flow {
        let mut sp = self.spill.take();
        let mut frag = sp.as_mut().and_then(|sp| sp.frag.take());
        let mut inbuf = sp
            .as_mut()
            .map(|sp| std::mem::take(&mut sp.inbuf))
            .unwrap_or_default();
        let spilled = !inbuf.is_empty();
        if spilled {
            inbuf.extend_from_slice(buf);
        }
        let data: &mut [u8] = if spilled { &mut inbuf } else { buf };
        let len = data.len();
        let step = p.ws_input(&mut self.p, data, &mut frag);
        // Keep an incomplete frame or head for the next read; an idle connection keeps none.
        if step.end.is_none() && step.used < len {
            if spilled {
                inbuf.advance(step.used);
            } else {
                inbuf.extend_from_slice(&buf[step.used..]);
            }
        } else {
            inbuf = BytesMut::new();
        }
        if !inbuf.is_empty() || frag.is_some() {
            let sp = sp.get_or_insert_with(Box::default);
            sp.inbuf = inbuf;
            sp.frag = frag;
        }
        self.spill = sp;
        self.shrink();
        let sent = if p.out.is_empty() {
            Ok(0)
        } else {
            self.send(s, &p.out)
        };
        let now = sys::monotonic_ns();
        if let Some(end) = step.end {
            if step.became_open && !end.failed() {
                p.opened(&mut self.p, now);
            }
            if let Ok(n) = sent {
                p.c.bytes_out += n;
            }
            end.count(&mut p.c);
            return Flow::End;
        }
        let n = match sent {
            Ok(n) => n,
            Err(e) => {
                if step.became_open {
                    p.opened(&mut self.p, now);
                }
                self.fail_or_close(p, &e);
                return Flow::End;
            }
        };
        p.c.bytes_out += n;
        if step.became_open {
            p.opened(&mut self.p, now);
            self.echo_next(p, s)
        } else if step.rtt_done {
            self.echo_next(p, s)
        } else {
            Flow::Go
        }
    }
}
