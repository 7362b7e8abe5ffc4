//! The client shard: paced non-blocking connects from chosen source addresses, then hold,
//! echo (verified byte for byte) or WebSocket (handshake, pushes, echo).
//!
//! [`proto::Proto`] is the part both engines share: a shard's counters, histograms and
//! report state, and what a connection's input means (echo checks, the WebSocket client's
//! frames, push stamps). The epoll [`Shard`] below and the tokio engine's tasks only move
//! bytes.

mod churn;
mod events;
mod messages;
pub(crate) mod proto;
mod switch;
mod teardown;

use std::{
    collections::VecDeque,
    os::fd::{AsFd, OwnedFd},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use anyhow::{Context, Result};

use self::proto::{CloseWatch, ConnProto, Proto, State};
use super::{
    COMMAND_TOKEN, READ_BUF, ShardIo, Sink, Slab, Spill, closed_by, failure_of, interest, pace,
    rearm, send_sealed,
    shard_loop::{self, Engine},
};
use crate::workload::{
    churn as churn_pace,
    heartbeat::{Sweep, Visit},
    messages::Sweep as MessageSweep,
};
use crate::workload::{
    config::{ClientShardConfig, Mode, ShardCommand},
    sockopt::{self, Connecting},
    sys::{self, EPOLLIN, EPOLLOUT, Epoll},
    tls::session::TlsConn,
};

/// Pacing tick while ramping with a target rate: 5 ms keeps bursts small (150 connects at
/// 30k/s) without waking the shard more than 200 times a second.
pub(crate) const PACE_NS: u64 = 5_000_000;

struct Conn {
    fd: OwnedFd,
    p: ConnProto,
    spill: Option<Box<Spill>>,
    /// With `--tls`: the session (keys and record state; the buffers are the shard's).
    tls: Option<Box<TlsConn>>,
}

impl Conn {
    fn tls_handshaking(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.handshaking())
    }
}

struct Shard {
    p: Proto,
    conns: Slab<Conn>,
    buf: Vec<u8>,
    /// TLS: the plaintext of one read, and the records to send (the shard's, reused).
    plain: Vec<u8>,
    wire: Vec<u8>,
    tls: Option<(
        Arc<rustls::ClientConfig>,
        rustls::pki_types::ServerName<'static>,
    )>,
    /// Next local connection index to start.
    next: u64,
    started: bool,
    closing: bool,
    /// Teardown: the connections in [`State::Closing`].
    close_watch: CloseWatch,
    /// Teardown: open WebSocket connections not yet sent their close frame. At most
    /// `--in-flight` wait in [`State::Closing`] at once, the next going as one ends: all
    /// at once kept the shard writing close frames for tens of seconds at 1.85M while the
    /// servers' FINs waited unread, and 221,128 server sockets outlived `tcp_fin_timeout`
    /// (60 s) in FIN_WAIT2, so the late FIN drew a RST.
    to_close: Vec<u64>,
    /// Connections in [`State::Closing`].
    closes_waiting: u64,
    /// False once the teardown stalled: the rest close right after their close frame.
    close_waits: bool,
    /// Attempts' steps in start order, for the connect/handshake timeout: the sweep looks
    /// only at the front, not at every connection (a full scan cost O(connections) 4× a
    /// second). Each step (connect, TLS, upgrade) gets its own entry, stamped as the
    /// connection's `t_ns`; an entry whose stamp is no longer its connection's is spent.
    pending: VecDeque<(u64, u64)>,
    /// Connects are paced this turn (decided before the wait), and the next pace tick.
    pacing: bool,
    next_pace: u64,
    /// `--heartbeat`: the walk over the slots (from `Start`) and its next step.
    beat: Option<Sweep>,
    next_beat: u64,
    /// `--churn`: the pace while churning (from `Churn { on }` to off or the teardown),
    /// and the next instant to look at it.
    churning: Option<churn_pace::Pace>,
    next_churn: u64,
    /// `--churn oldest`: open connections' tokens in the order they opened (stale tokens
    /// of connections gone meanwhile are skipped when they come up).
    open_order: VecDeque<u64>,
    /// Churned WebSocket connections waiting for their server to close, oldest first:
    /// one not closed within [`proto::CLOSE_STALL_NS`] is closed by us.
    churn_closing: VecDeque<(u64, u64)>,
    /// `--churn random`: the draw.
    churn_rng: u64,
    /// `--message-rate`: the walk over the slots (from `Start`) and its next step.
    msgs: Option<MessageSweep>,
    next_msg: u64,
    /// A message phase switched the sweep at run time: the ramp's end starts none.
    msgs_switched: bool,
    /// `--message-rate`: a `Close` waits until this instant (monotonic ns) for the
    /// echoes of the messages still out, then tears down.
    drain_until: Option<u64>,
}

/// Runs one client shard: waits for `Start`, ramps, holds until `Close`/`Stop`.
pub(crate) fn run(
    cfg: ClientShardConfig,
    mut io: ShardIo,
    open_in_process: Arc<AtomicU64>,
) -> Result<()> {
    let ep = Epoll::new().context("epoll_create1")?;
    ep.add(io.commands.fd(), EPOLLIN, COMMAND_TOKEN)
        .context("epoll_ctl command source")?;
    let tls = match &cfg.tls {
        None => None,
        Some(t) => Some((t.config()?, t.name()?)),
    };
    let mut s = Shard {
        conns: Slab::with_capacity(cfg.count as usize),
        buf: vec![0; READ_BUF],
        plain: Vec::new(),
        wire: Vec::new(),
        tls,
        next: 0,
        started: false,
        closing: false,
        close_watch: CloseWatch::default(),
        to_close: Vec::new(),
        closes_waiting: 0,
        close_waits: true,
        pending: VecDeque::new(),
        pacing: false,
        next_pace: 0,
        beat: None,
        next_beat: 0,
        churning: None,
        next_churn: 0,
        open_order: VecDeque::new(),
        churn_closing: VecDeque::new(),
        churn_rng: cfg.seed ^ u64::from(cfg.shard).rotate_left(17),
        msgs: None,
        next_msg: 0,
        msgs_switched: false,
        drain_until: None,
        p: Proto::new(cfg, open_in_process)?,
    };
    shard_loop::run(&mut s, &ep, &mut io)
}

/// Sends `bytes` on `conn` (sealed under TLS; what the socket does not take is queued and
/// `EPOLLOUT` armed for it), adding what went out to `written`.
fn send_on(
    ep: &Epoll,
    tok: u64,
    conn: &mut Conn,
    wire: &mut Vec<u8>,
    bytes: &[u8],
    written: &mut u64,
) -> std::io::Result<()> {
    let before = interest(&conn.spill);
    send_sealed(
        conn.fd.as_fd(),
        conn.tls.as_deref_mut(),
        wire,
        &mut conn.spill,
        bytes,
        written,
    )
    .and_then(|_| rearm(ep, &conn.fd, tok, before, &conn.spill))
}

impl Engine for Shard {
    fn wait_ms(&mut self, next_tick: u64) -> i32 {
        self.pacing =
            self.started && !self.closing && self.next < self.p.cfg.count && self.p.cfg.rate > 0.0;
        let mut deadline = if self.pacing {
            next_tick.min(self.next_pace)
        } else {
            next_tick
        };
        if self.beat.is_some() && !self.closing {
            deadline = deadline.min(self.next_beat);
        }
        if self.churning.is_some() && !self.closing {
            deadline = deadline.min(self.next_churn);
        }
        if self.msgs.is_some() && !self.closing && !self.p.draining {
            deadline = deadline.min(self.next_msg);
        }
        if let Some(d) = self.drain_until {
            deadline = deadline.min(d);
        }
        sys::ms_until(sys::monotonic_ns(), deadline)
    }

    #[inline]
    fn event(&mut self, ep: &Epoll, tok: u64, ev: u32) {
        self.conn_event(ep, tok, ev);
    }

    fn after_events(&mut self, ep: &Epoll) {
        self.pump(ep);
        self.close_more();
    }

    fn command(&mut self, ep: &Epoll, c: ShardCommand, sink: &mut Sink) -> Result<()> {
        match c {
            ShardCommand::Start { t0_mono_ns } => {
                self.p.t0_mono = t0_mono_ns;
                self.started = true;
                if let Some(hb) = self.p.cfg.heartbeat {
                    self.beat = Some(Sweep::new(&hb, t0_mono_ns, self.p.cfg.shard));
                    self.next_beat = t0_mono_ns;
                }
                self.pump(ep);
            }
            ShardCommand::Churn {
                on,
                t0_mono_ns,
                rate,
            } => {
                self.churning = match (on, self.p.cfg.churn) {
                    (true, Some(c)) if !self.closing => {
                        Some(churn_pace::Pace::new(c.per_s_at(rate), t0_mono_ns))
                    }
                    _ => None,
                };
                self.next_churn = t0_mono_ns;
                self.report(sink, true, false)?;
            }
            ShardCommand::Heartbeat { cfg, t0_mono_ns } => {
                self.switch_heartbeat(cfg, t0_mono_ns);
                self.report(sink, true, false)?;
            }
            ShardCommand::Messages { cfg, t0_mono_ns } => {
                self.switch_messages(cfg, t0_mono_ns);
                self.report(sink, true, false)?;
            }
            // Draining already: the teardown follows when the echoes are in.
            ShardCommand::Close if self.drain_until.is_some() => {}
            ShardCommand::Close => {
                if self.start_drain() {
                    // No more messages; the teardown waits for the echoes of those out.
                    return Ok(());
                }
                self.p.draining = true;
                Shard::close_all(self);
                self.report(sink, true, self.conns.is_empty())?;
            }
            ShardCommand::Mark {
                id,
                started_unix_ns,
            } => {
                self.p.mark(id, started_unix_ns);
                // At once: the lab fires the trigger when every shard has said so.
                self.report(sink, true, false)?;
            }
            ShardCommand::Push { .. } | ShardCommand::Stop => {}
        }
        Ok(())
    }

    fn tick(&mut self, ep: &Epoll) -> bool {
        self.sweep_timeouts();
        self.churn_stalled();
        self.pump(ep);
        if self.closing {
            self.close_stalled();
            self.close_more();
        }
        self.closing && self.conns.is_empty()
    }

    fn turn_end(&mut self, ep: &Epoll, now: u64, sink: &mut Sink) -> Result<()> {
        if self.pacing && now >= self.next_pace {
            // Missed pace ticks are skipped, not caught up: `pump` works from the rate and
            // the elapsed time, so one call starts everything that is due.
            self.next_pace = now + PACE_NS;
            self.pump(ep);
        }
        if !self.closing && now >= self.next_beat && self.beat.is_some() {
            self.heartbeat(ep, now);
        }
        if !self.closing && now >= self.next_churn && self.churning.is_some() {
            self.churn(ep, now);
        }
        self.start_messages_at_ramp_end(now);
        if !self.closing && !self.p.draining && now >= self.next_msg && self.msgs.is_some() {
            self.messages(ep, now);
        }
        if self.drain_over(now) {
            Shard::close_all(self);
            self.report(sink, true, self.conns.is_empty())?;
        }
        Ok(())
    }

    fn close_all(&mut self, _ep: &Epoll) {
        self.drain_until = None;
        self.p.draining = true;
        Shard::close_all(self);
        // The shard exits now: every connection still gets its close frame.
        self.close_waits = false;
        self.close_more();
    }

    fn report(&mut self, sink: &mut Sink, force: bool, closed_all: bool) -> Result<()> {
        let ramp_done = self.ramp_done();
        self.p.report(sink, ramp_done, force, closed_all)
    }
}

impl Shard {
    fn ramp_done(&self) -> bool {
        // A churn's reopens in flight are not the ramp's.
        self.started
            && self.next >= self.p.cfg.count
            && self.p.c.in_flight == self.p.c.churn.reopening
    }

    /// Starts as many connects as the rate and the in-flight bound allow.
    fn pump(&mut self, ep: &Epoll) {
        if !self.started || self.closing {
            return;
        }
        let elapsed = sys::monotonic_ns().saturating_sub(self.p.t0_mono);
        let allowed = pace::due(self.p.cfg.rate, self.p.cfg.count, elapsed);
        while self.next < allowed && self.p.c.in_flight < self.p.cfg.in_flight {
            let g = self.p.cfg.first + self.next * self.p.cfg.stride;
            self.next += 1;
            self.connect(ep, g, false);
        }
    }

    /// Connects `g` (`reopen`: again, as a churned connection's next life).
    fn connect(&mut self, ep: &Epoll, g: u64, reopen: bool) {
        self.p.c.attempted += 1;
        let (src, dst) = self.p.cfg.endpoints(g);
        let nodelay = self.p.cfg.mode != Mode::Hold;
        let t_ns = sys::monotonic_ns();
        let (fd, done) = match sockopt::connect(src.as_ref(), &dst, nodelay) {
            Ok(Connecting::InProgress(fd)) => (fd, false),
            Ok(Connecting::Done(fd)) => (fd, true),
            Err(e) => {
                self.p.connect_failed(&e, g);
                if reopen {
                    churn_pace::failed(&mut self.p.c.churn);
                }
                return;
            }
        };
        let (tok, conn) = self.conns.insert_get(Conn {
            fd,
            p: if reopen {
                ConnProto::reopen(g, t_ns)
            } else {
                ConnProto::new(g, t_ns)
            },
            spill: None,
            tls: None,
        });
        let added = ep.add(conn.fd.as_fd(), EPOLLOUT, tok);
        self.p.c.in_flight += 1;
        self.pending.push_back((tok, t_ns));
        self.p.open_in_process.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = added {
            failure_of(&e, &mut self.p.c.failures);
            self.drop_conn(tok);
            return;
        }
        if done {
            self.on_connected(ep, tok);
        }
    }

    /// Removes a connection that never opened (failure already counted).
    fn drop_conn(&mut self, tok: u64) {
        if let Some(conn) = self.conns.remove(tok) {
            if conn.p.reopen {
                churn_pace::failed(&mut self.p.c.churn);
            }
            self.p.c.in_flight -= 1;
            self.p.open_in_process.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// `--heartbeat`: the slots whose phase came up since the last step ping, or close
    /// when their ping went unanswered past the timeout.
    fn heartbeat(&mut self, ep: &Epoll, now: u64) {
        let Some((step, sweep)) = self
            .p
            .cfg
            .heartbeat
            .map(|h| h.step_ns())
            .zip(self.beat.as_mut())
        else {
            return;
        };
        self.next_beat = now + step;
        for r in sweep.advance(now, self.conns.slot_count()) {
            for i in r {
                if let Some(tok) = self.conns.token_at(i) {
                    self.beat_one(ep, tok, now);
                }
            }
        }
    }

    fn beat_one(&mut self, ep: &Epoll, tok: u64, now: u64) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        match self.p.heartbeat_visit(&mut conn.p, now) {
            None | Some(Visit::Wait) => {}
            Some(Visit::Ping) => self.send_out(ep, tok),
            Some(Visit::Missed) => {
                let mut written = 0;
                let _ = send_sealed(
                    conn.fd.as_fd(),
                    conn.tls.as_deref_mut(),
                    &mut self.wire,
                    &mut conn.spill,
                    &self.p.out,
                    &mut written,
                );
                self.p.c.bytes_out += written;
                // Counted (`closed.heartbeat_missed`); the peer answers nothing, so no
                // wait for its close reply.
                self.close_open(tok);
            }
        }
    }

    /// Removes an open connection (close cause already counted).
    fn close_open(&mut self, tok: u64) {
        if let Some(mut conn) = self.conns.remove(tok) {
            self.p.conn_ends(&mut conn.p);
            self.p.c.open -= 1;
            self.p.open_in_process.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Writes [`Proto::out`] on an open `tok`; an error closes it (cause counted).
    fn send_out(&mut self, ep: &Epoll, tok: u64) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        let mut written = 0;
        let r = send_on(ep, tok, conn, &mut self.wire, &self.p.out, &mut written);
        self.sent(tok, written, r);
    }

    /// Counts what a send on an open `tok` wrote; its error closes it (cause counted).
    fn sent(&mut self, tok: u64, written: u64, r: std::io::Result<()>) {
        self.p.c.bytes_out += written;
        if let Err(e) = r {
            closed_by(&e, &mut self.p.c.closed);
            self.close_open(tok);
        }
    }

    fn sweep_timeouts(&mut self) {
        if self.p.c.in_flight == 0 {
            self.pending.clear();
            return;
        }
        let limit = self.p.cfg.connect_timeout_ns();
        let now = sys::monotonic_ns();
        // Oldest first: stop at the first attempt still in flight and not yet expired.
        // In flight is before open: a connection that opened and is now closing (churned,
        // or torn down: our close frame out, the server's awaited) keeps its token, and
        // its attempt's entry here was read as a connect that timed out: a failure
        // counted, `in_flight` below zero, the socket closed unread (a RST) — at 1M with
        // --churn 5000, 852,439 reopens "timed out".
        while let Some(&(tok, started)) = self.pending.front() {
            // The step this entry timed is still the connection's (a later step, or a
            // new connection under a reused token, has its own entry behind). Each step
            // is timed from its own start: a worker that got no CPU for 12 s at 1.73M
            // on a loaded box saw its connects complete, wrote their upgrade requests and
            // then called them timed out at once, timed from `connect()` (1,372 of the
            // run's 1,383 timeouts; the kernel resent no SYN).
            let in_flight = self.conns.get_mut(tok).is_some_and(|c| {
                matches!(c.p.state, State::Connecting | State::Handshake) && c.p.t_ns == started
            });
            if in_flight && now.saturating_sub(started) <= limit {
                break;
            }
            self.pending.pop_front();
            if in_flight {
                if self.conns.get_mut(tok).is_some_and(|c| c.tls_handshaking()) {
                    self.p.c.failures.tls += 1;
                    self.p.c.tls_errors.timeout += 1;
                } else {
                    self.p.c.failures.timed_out += 1;
                }
                self.drop_conn(tok);
            }
        }
    }
}
