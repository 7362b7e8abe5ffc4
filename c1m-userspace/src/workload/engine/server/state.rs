//! What a server shard keeps whatever its syscall layer: the connections' slab, the
//! counters, the WebSocket decoder, the push under way, the handshake deadlines, a
//! teardown's goodbyes, the heartbeat and message walks and the reporter; and the work on
//! them that does not depend on how bytes move (the sweeps here, the goodbyes in
//! `goodbye`, the walks in `beat`, `messages` and `push`).
//!
//! The epoll shard (`engine::server`) and the io_uring shard (`engine::uring::server`)
//! each own one and hand it their own writes and close as a [`ServerIo`]. Both are
//! generic parameters, not trait objects: every call is monomorphized, so the push
//! fan-out and the reads gain no indirection.

use std::{
    collections::VecDeque,
    io,
    os::fd::OwnedFd,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use anyhow::Result;

use super::{
    proto::{Action, PushFrame, WsState, going_away, peer_eof, ws_input_beat},
    warnings::emfile_warning,
};
use crate::workload::{
    config::{Mode, ServerShardConfig, ShardCommand},
    engine::{
        READ_BUF, Sink, Slab, Spill,
        client::proto::CloseWatch,
        closed_by, joined, keep_input,
        shard_loop::{Extra, Reporter},
        take_input,
    },
    heartbeat::{self, HeartbeatConfig, Sweep},
    messages::Sweep as MessageSweep,
    stats::counters::Counters,
    sys,
    ws::{Decoder, Role},
};

/// A server connection: what both engines keep, and what only one does.
pub(crate) struct Conn<X> {
    pub fd: OwnedFd,
    pub ws: WsState,
    /// `--heartbeat`: when the outstanding ping was sent (monotonic ns), 0 for none.
    pub ping_ns: u64,
    /// `--message-rate`: messages sent on this connection (the next one's sequence).
    pub msg_seq: u32,
    /// Input not yet a whole frame or head, a fragmented message, and (epoll) output the
    /// peer has not taken yet: heap only while there is some.
    pub spill: Option<Box<Spill>>,
    /// What only the engine keeps: the TLS session (epoll), the send in flight and what
    /// waits behind it (io_uring).
    pub io: X,
}

impl<X> Conn<X> {
    #[inline]
    pub(crate) fn new(fd: OwnedFd, ws: WsState, io: X) -> Conn<X> {
        Conn {
            fd,
            ws,
            ping_ns: 0,
            msg_seq: 0,
            spill: None,
            io,
        }
    }

    /// The peer ended its stream: counted by what it cut short (a frame or a fragmented
    /// message, or nothing), as [`peer_eof`] says.
    pub(crate) fn peer_ended(&self, c: &mut Counters, mode: Mode) {
        let partial = self
            .spill
            .as_ref()
            .is_some_and(|s| !s.inbuf.is_empty() || s.frag.is_some());
        peer_eof(c, mode, self.ws, partial);
    }
}

/// What reading a connection's WebSocket input takes besides the connection: the
/// decoder, and `--heartbeat` (a pong ends the outstanding ping).
pub(crate) struct WsReader {
    dec: Decoder,
    beat: Option<HeartbeatConfig>,
}

impl WsReader {
    /// One read (`buf`) after what `conn`'s spill kept, answered into `out`; an
    /// incomplete frame or a fragmented message stays in the spill. Returns the spill,
    /// taken from the connection (the engine writes the answer, then puts it back), and
    /// what the input asks.
    #[inline]
    pub(crate) fn read<X>(
        &self,
        conn: &mut Conn<X>,
        buf: &mut [u8],
        out: &mut Vec<u8>,
        c: &mut Counters,
    ) -> (Option<Box<Spill>>, Action) {
        let mut spill = conn.spill.take();
        let (mut inbuf, mut frag) = take_input(&mut spill);
        let data = joined(&mut inbuf, buf);
        out.clear();
        let (used, action) = ws_input_beat(
            &self.dec,
            &mut conn.ws,
            data,
            &mut frag,
            out,
            c,
            self.beat.as_ref().map(|h| (h, &mut conn.ping_ns)),
        );
        if used < data.len() || frag.is_some() {
            keep_input(&mut spill, inbuf, buf, used, frag);
        }
        (spill, action)
    }
}

/// How an engine moves bytes on a connection and lets go of it: the only parts of the
/// shared work that differ between a readiness loop and a completion ring.
pub(crate) trait ServerIo<X> {
    /// Writes `bytes` on `conn` (token `tok`) behind what is queued, adding what the kernel
    /// took at once to `sent`. An error means the connection must close.
    fn send(
        &mut self,
        tok: u64,
        conn: &mut Conn<X>,
        bytes: &[u8],
        sent: &mut u64,
    ) -> io::Result<()>;
    /// The last write before a close (best effort), in one segment with the FIN where it
    /// can be; under TLS the close_notify goes too, even with `bytes` empty.
    fn send_last(&mut self, conn: &mut Conn<X>, bytes: &[u8], written: &mut u64);
    /// A teardown's goodbye went on `conn`: end this side of the stream and keep reading
    /// until the peer ends its side. False if that could not be set up.
    fn half_close(&mut self, tok: u64, conn: &mut Conn<X>) -> bool;
    /// `conn` was removed from the slab: its operations let go of (its descriptor closes
    /// when it drops).
    fn forget(&mut self, _tok: u64, _conn: &mut Conn<X>) {}
    /// Writes push frame `frame` on `conn` (token `tok`). An engine may hold it to send
    /// with others at [`ServerIo::push_flush`]; what the kernel took is then added there.
    #[inline]
    fn push_send(
        &mut self,
        tok: u64,
        conn: &mut Conn<X>,
        frame: &PushFrame,
        sent: &mut u64,
    ) -> io::Result<()> {
        self.send(tok, conn, frame, sent)
    }
    /// The push frames written so far go now (every [`PUSH_SUBMIT`] frames and at the end
    /// of a chunk). A held frame its socket did not take whole, or refused, goes to `left`
    /// for the usual path.
    fn push_flush(&mut self, _sent: &mut u64, _left: &mut Vec<PushLeft>) -> Result<()> {
        Ok(())
    }
    /// Output bytes on `conn` waiting behind what the kernel took (a peer not reading).
    fn queued(&self, conn: &Conn<X>) -> usize;
    /// A TLS handshake still under way on `conn` (never, without TLS).
    fn tls_handshaking(&self, _conn: &Conn<X>) -> bool {
        false
    }
}

/// Push frames written between two [`ServerIo::push_flush`]es. A frame is stamped when it
/// is written and may go only at the flush: more in one flush put a batch's worth of sends
/// between each stamp and its frame (io_uring, 20,000 connections, a whole chunk of 1024 a
/// submit: per-message p50 8.6 ms, p99 46 ms against 0.7 / 6.4 ms a write each, same
/// fan-out); 128 keeps that wait to 128 sends at 1/128 of a syscall per frame.
pub(crate) const PUSH_SUBMIT: usize = 128;

/// What a push frame an engine held came to at its flush, other than all sent.
#[derive(Debug)]
pub(crate) enum PushLeft {
    /// The socket took less than the frame (a full send buffer): the rest goes the usual
    /// way, behind nothing (nothing else was written on it since).
    Rest(u64, Vec<u8>),
    /// The send failed: the connection closes.
    Failed(u64, io::Error),
}

/// A push under way: the next slot its chunk starts at.
pub(super) struct PushJob {
    pub id: u64,
    pub started_unix_ns: u64,
    pub next_slot: usize,
}

/// A server shard's state, generic over what its engine keeps per connection.
pub(crate) struct ServerShardState<X> {
    pub cfg: ServerShardConfig,
    pub conns: Slab<Conn<X>>,
    /// One read's bytes (the shard's, reused).
    pub buf: Vec<u8>,
    /// What the shard writes next (frames built here, then sent).
    pub out: Vec<u8>,
    pub c: Counters,
    pub ws: WsReader,
    /// Connections open in this process, over all its shards (the cap is the process's).
    pub open_in_process: Arc<AtomicU64>,
    pub(super) push: Option<PushJob>,
    /// A push finished since the last report.
    pub(super) push_done: Option<u64>,
    /// WebSocket (and TLS) connections in accept order with their handshake deadlines
    /// (monotonic ns): one deadline for all, so the front is always the next to expire
    /// and the sweep never scans connections that finished their handshake long ago.
    handshakes: VecDeque<(u64, u64)>,
    /// Server teardown: connections still to say goodbye to (popped from the end: oldest
    /// first), how many wait in [`WsState::Closing`], whether they still wait (not once
    /// the teardown stalled), and the watch that tells.
    pub(super) to_goodbye: Vec<u64>,
    pub(super) goodbyes_waiting: u64,
    pub(super) goodbye_waits: bool,
    pub(super) goodbye_watch: CloseWatch,
    pub rep: Reporter,
    warned_emfile: bool,
    /// `--heartbeat` (ws mode): the walk over the slots and its next step.
    pub(super) beat: Option<Sweep>,
    pub(super) next_beat: u64,
    /// `--message-rate` (ws mode): the walk over the slots, its next step, and the
    /// scratch a message's payload is built in.
    pub(super) msgs: Option<MessageSweep>,
    pub(super) next_msg: u64,
    pub(super) msg_scratch: Vec<u8>,
}

impl<X> ServerShardState<X> {
    pub(crate) fn new(
        cfg: ServerShardConfig,
        open_in_process: Arc<AtomicU64>,
        rep: Reporter,
    ) -> ServerShardState<X> {
        let now = sys::monotonic_ns();
        ServerShardState {
            ws: WsReader {
                dec: Decoder::new(Role::Server, cfg.max_message),
                beat: cfg.heartbeat,
            },
            conns: Slab::with_capacity(cfg.cap as usize),
            buf: vec![0; READ_BUF],
            out: Vec::new(),
            c: Counters::default(),
            open_in_process,
            push: None,
            push_done: None,
            handshakes: VecDeque::new(),
            to_goodbye: Vec::new(),
            goodbyes_waiting: 0,
            goodbye_waits: true,
            goodbye_watch: CloseWatch::default(),
            rep,
            warned_emfile: false,
            beat: cfg
                .heartbeat
                .filter(|_| cfg.mode == Mode::Ws)
                .map(|h| Sweep::new(&h, now, cfg.shard)),
            next_beat: 0,
            msgs: cfg
                .messages
                .filter(|_| cfg.mode == Mode::Ws)
                .map(|m| MessageSweep::new(&m, now, cfg.shard)),
            next_msg: 0,
            msg_scratch: Vec::new(),
            cfg,
        }
    }

    /// When the next wait must end at the latest (monotonic ns), given the next report
    /// tick; none while a push is under way: the loop then never sleeps, it alternates
    /// its I/O with push chunks.
    pub(crate) fn wake_at(&self, next_tick: u64) -> Option<u64> {
        if self.push.is_some() {
            return None;
        }
        let mut deadline = next_tick;
        if self.beat.is_some() {
            deadline = deadline.min(self.next_beat);
        }
        if self.msgs.is_some() {
            deadline = deadline.min(self.next_msg);
        }
        Some(deadline)
    }

    pub(crate) fn report(&mut self, sink: &mut Sink, force: bool, closed_all: bool) -> Result<()> {
        let x = Extra {
            push_done: self.push_done.take(),
            ..Default::default()
        };
        self.rep.send(sink, &self.c, x, force, closed_all)
    }

    pub(crate) fn warn(&mut self, msg: String) {
        self.rep.warnings.push(msg);
    }

    /// An accept ran out of descriptors: said once per shard, naming what holds them.
    pub(crate) fn emfile(&mut self, e: &io::Error) {
        if !self.warned_emfile {
            self.warned_emfile = true;
            let conns = self.open_in_process.load(Ordering::Relaxed);
            self.warn(emfile_warning(e, conns, self.cfg.cap));
        }
    }

    /// A connection was accepted into the slab: counted; returns this process's open
    /// connections with it.
    #[inline]
    pub(crate) fn opened(&mut self) -> u64 {
        self.c.accepted += 1;
        self.c.open += 1;
        self.open_in_process.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// `tok`, accepted at `now` (monotonic ns), must finish its handshake within
    /// `--handshake-timeout` (if there is one).
    #[inline]
    pub(crate) fn time_handshake(&mut self, tok: u64, now: u64) {
        if self.cfg.handshake_timeout_ms > 0 {
            let deadline = now + self.cfg.handshake_timeout_ms * 1_000_000;
            self.handshakes.push_back((tok, deadline));
        }
    }

    /// A command other than `Stop`.
    pub(crate) fn command(&mut self, io: &mut impl ServerIo<X>, c: ShardCommand) {
        match c {
            ShardCommand::Push {
                id,
                started_unix_ns,
            } => self.start_push(id, started_unix_ns),
            ShardCommand::Close => self.say_goodbye(io),
            ShardCommand::Start { .. }
            | ShardCommand::Mark { .. }
            | ShardCommand::Churn { .. }
            | ShardCommand::Heartbeat { .. }
            | ShardCommand::Messages { .. }
            | ShardCommand::Stop => {}
        }
    }

    /// Housekeeping at a report tick: overdue handshakes, a stalled teardown.
    pub(crate) fn tick(&mut self, io: &mut impl ServerIo<X>) {
        self.sweep_handshakes(io);
        self.goodbyes_stalled(io);
    }

    /// Takes a connection out of the slab, its counts ended; the engine lets go of it.
    #[inline]
    pub(crate) fn remove(&mut self, tok: u64) -> Option<Conn<X>> {
        let mut conn = self.conns.remove(tok)?;
        heartbeat::ended(&mut self.c.heartbeat, &mut conn.ping_ns);
        if conn.ws == WsState::Open {
            self.c.ws_open -= 1;
        }
        self.c.open -= 1;
        self.open_in_process.fetch_sub(1, Ordering::Relaxed);
        Some(conn)
    }

    /// Removes a connection and lets go of it; false if it was gone already.
    pub(crate) fn close(&mut self, io: &mut impl ServerIo<X>, tok: u64) -> bool {
        let Some(mut conn) = self.remove(tok) else {
            return false;
        };
        io.forget(tok, &mut conn);
        true
    }

    /// Closes a connection this end ended.
    pub(crate) fn close_local(&mut self, io: &mut impl ServerIo<X>, tok: u64) {
        if self.close(io, tok) {
            self.c.closed.local_close += 1;
        }
    }

    /// A connection's read or write failed: closed, the cause counted (a goodbye that
    /// was waiting ends as the peer's end of the stream would end it).
    pub(crate) fn failed(&mut self, io: &mut impl ServerIo<X>, tok: u64, e: &io::Error) {
        if self
            .conns
            .get_mut(tok)
            .is_some_and(|c| c.ws == WsState::Closing)
        {
            return self.goodbye_end(io, tok);
        }
        if self.close(io, tok) {
            closed_by(e, &mut self.c.closed);
        }
    }

    /// At `Stop`: every connection closed, a WebSocket's close frame first (best effort).
    pub(crate) fn close_all(&mut self, io: &mut impl ServerIo<X>) {
        let toks = self.conns.tokens_from(0, usize::MAX).0;
        let n = toks.len() as u64;
        let goodbye = going_away();
        for tok in toks {
            let Some(mut conn) = self.conns.remove(tok) else {
                continue;
            };
            heartbeat::ended(&mut self.c.heartbeat, &mut conn.ping_ns);
            let open = conn.ws == WsState::Open;
            if open {
                self.c.ws_open -= 1;
            }
            let last: &[u8] = if open { &goodbye } else { &[] };
            io.send_last(&mut conn, last, &mut self.c.bytes_out);
            io.forget(tok, &mut conn);
        }
        self.c.open -= n;
        self.c.closed.local_close += n;
        self.open_in_process.fetch_sub(n, Ordering::Relaxed);
        // A push cut short is still over: the supervisor may start it elsewhere.
        if let Some(job) = self.push.take() {
            self.push_done = Some(job.id);
        }
    }

    /// Closes connections whose handshake is overdue.
    fn sweep_handshakes(&mut self, io: &mut impl ServerIo<X>) {
        let now = sys::monotonic_ns();
        while let Some(&(tok, deadline)) = self.handshakes.front() {
            if deadline > now {
                break;
            }
            self.handshakes.pop_front();
            let Some(conn) = self.conns.get_mut(tok) else {
                continue;
            };
            if io.tls_handshaking(conn) {
                // Slowloris inside TLS: counted as a TLS failure by its reason.
                if self.close(io, tok) {
                    self.c.closed.tls += 1;
                    self.c.tls_errors.timeout += 1;
                }
            } else if conn.ws == WsState::Handshake && self.close(io, tok) {
                self.c.closed.handshake_timeout += 1;
            }
        }
        if self.handshakes.is_empty() && self.handshakes.capacity() > 1024 {
            // The ramp is over: give back what it needed.
            self.handshakes.shrink_to_fit();
        }
    }
}
