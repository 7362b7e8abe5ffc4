//! The server shard: SO_REUSEPORT listeners on every port, a slab of accepted connections,
//! and the hold / echo / WebSocket behaviour, including the broadcast push.
//!
//! What a connection's input means and the frames a server writes are in `proto`, the
//! warnings in `warnings`: the tokio engine's server shares both. What a shard keeps and
//! does whatever its syscall layer (sweeps, goodbyes, the heartbeat, message and push
//! walks) is in `state` and the files beside it: the io_uring server shares those.

mod beat;
mod goodbye;
mod messages;
pub mod proto;
mod push;
pub(crate) mod push_batch;
pub(crate) mod state;
pub(crate) mod warnings;

use std::{
    io,
    os::fd::{AsFd, OwnedFd},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use anyhow::{Context, Result};
use rustix::io::Errno;

use self::{
    proto::{Action, PushFrame, WsState},
    push_batch::PushBatch,
    state::{PushLeft, ServerIo, ServerShardState},
    warnings::{cap_warning, listen_error},
};
use super::{
    COMMAND_TOKEN, LISTENER_BASE, ShardIo, Sink, closed_by, failure_of, flush, interest, read_len,
    rearm, send_before_close, send_sealed, send_sealed_before_close,
    shard_loop::{self, Engine, Reporter},
    shrink, tls_read,
};
use crate::workload::{
    config::{Mode, ServerShardConfig, ShardCommand},
    sockopt,
    sys::{self, EPOLLERR, EPOLLHUP, EPOLLIN, EPOLLOUT, Epoll},
    tls::session::TlsConn,
};

/// Accepts per listener event: bounded so one busy port cannot starve the others or the
/// connections already open; the level-triggered listener fires again if more wait.
pub(crate) const ACCEPT_BURST: usize = 256;

/// Connections written per push step before the loop turns (reads, commands, timers) and
/// yields the CPU. A trade of fan-out time against per-message latency, measured at 1M
/// (the `push` bench scenario, two interleaved pairs each, last frame / per-message p99): 64 per
/// step 9.91, 10.24 s / 55, 69 ms; 256: 9.51, 10.13 s / 111 ms; 1024: 9.20, 9.65 s /
/// 200, 183 ms. Minimal C writers (no yield at all) took 9.53 s / 224–235 ms in the same
/// hour: 1024 was the smallest step that kept the fan-out within 10% of them. Since the
/// frames go 128 to an `io_uring_enter` (`push_batch`) the writer is faster than theirs
/// (last frame 0.87–0.99× at 1024) and its tail longer (p99 0.58–1.08×, p99.9 to 1.56×):
/// 512 gives the readers the CPU twice as often (1M, two runs of 3 rounds: last frame
/// 0.79–1.03× theirs, p99 0.42–0.89×). `--push-writers` trades back for sub-ms latency.
pub(crate) const PUSH_CHUNK: usize = 512;

/// After EMFILE, leave the listener alone this long instead of spinning on a connection we
/// cannot take.
pub(crate) const EMFILE_PAUSE_MS: u64 = 100;

/// A shard that closed its listeners at its cap reopens them below this fill: the
/// hysteresis keeps it from flapping in and out of the reuseport groups.
pub(crate) const REOPEN_FILL: f64 = 0.9;

/// Goodbyes a shard has out at once at a server teardown, each waiting for its peer's end
/// of the stream. Measured at 1M over the bridge (56 server shards, 60 client processes):
/// all at once held a close frame in every socket on both sides past `tcp_mem` (762,541
/// `sock_exceed_buf_limit`, 50,784 client tail-loss probes, teardown past 180 s); 1024 a
/// shard left shards waiting > 5 s for one answer, so they gave up and closed at once
/// (460,452 resets, teardown 119 s); 64: 0 server resets, 7 client retransmits, teardown
/// 137 s (closing at once: 56 s and 701,155 resets).
pub(crate) const GOODBYE_WINDOW: u64 = 64;

/// With `--tls`: a connection's session (keys and record state; the buffers are the
/// shard's).
type Tls = Option<Box<TlsConn>>;

type Conn = state::Conn<Tls>;

impl Conn {
    fn tls_handshaking(&self) -> bool {
        self.io.as_ref().is_some_and(|t| t.handshaking())
    }
}

struct Shard {
    st: ServerShardState<Tls>,
    /// Empty while the shard is full (see [`Shard::close_listeners`]).
    listeners: Vec<OwnedFd>,
    /// Listeners paused after EMFILE, and when they resume (monotonic ns).
    paused: Vec<Option<u64>>,
    /// TLS: the plaintext of one read, and the records to send (the shard's, reused).
    plain: Vec<u8>,
    wire: Vec<u8>,
    tls: Option<Arc<rustls::ServerConfig>>,
    /// A push's frames sent in batches (io_uring), made at the first push.
    push: PushBatch,
}

/// The epoll shard's writes for the shared server code: sealed under TLS, output a peer
/// does not take kept in its spill with the connection armed for `EPOLLOUT`.
struct EpollIo<'a> {
    ep: &'a Epoll,
    wire: &'a mut Vec<u8>,
    batch: &'a mut PushBatch,
}

impl ServerIo<Tls> for EpollIo<'_> {
    #[inline]
    fn send(&mut self, tok: u64, conn: &mut Conn, bytes: &[u8], sent: &mut u64) -> io::Result<()> {
        let before = interest(&conn.spill);
        send_sealed(
            conn.fd.as_fd(),
            conn.io.as_deref_mut(),
            self.wire,
            &mut conn.spill,
            bytes,
            sent,
        )
        .and_then(|_| rearm(self.ep, &conn.fd, tok, before, &conn.spill))
    }

    #[inline]
    fn push_send(
        &mut self,
        tok: u64,
        conn: &mut Conn,
        frame: &PushFrame,
        sent: &mut u64,
    ) -> io::Result<()> {
        let bare = conn.io.is_none() && !conn.spill.as_ref().is_some_and(|s| s.has_out());
        if self.batch.hold(tok, &conn.fd, bare, frame) {
            return Ok(());
        }
        self.send(tok, conn, frame, sent)
    }

    fn push_flush(&mut self, sent: &mut u64, left: &mut Vec<PushLeft>) -> Result<()> {
        Ok(self.batch.flush(sent, left)?)
    }

    fn send_last(&mut self, conn: &mut Conn, bytes: &[u8], written: &mut u64) {
        // Under TLS the close_notify goes too (after the close frame on a WebSocket).
        if !bytes.is_empty() || conn.io.is_some() {
            send_sealed_before_close(
                conn.fd.as_fd(),
                conn.io.as_deref_mut(),
                self.wire,
                &conn.spill,
                bytes,
                written,
            );
        }
    }

    fn half_close(&mut self, tok: u64, conn: &mut Conn) -> bool {
        // Output still queued is given up, as a close would: only the peer's end of the
        // stream is awaited now.
        conn.spill = None;
        sys::shutdown_write(conn.fd.as_fd())
            .and_then(|()| self.ep.modify(conn.fd.as_fd(), EPOLLIN, tok))
            .is_ok()
    }

    fn queued(&self, conn: &Conn) -> usize {
        conn.spill.as_ref().map_or(0, |s| s.out.len() - s.out_off)
    }

    fn tls_handshaking(&self, conn: &Conn) -> bool {
        conn.tls_handshaking()
    }
}

/// Runs one server shard until `Stop` (or its supervisor goes away).
pub(crate) fn run(
    cfg: ServerShardConfig,
    mut io: ShardIo,
    open_in_process: Arc<AtomicU64>,
) -> Result<()> {
    let ep = Epoll::new().context("epoll_create1")?;
    let rep = Reporter::new(cfg.shard);
    let mut listeners = Vec::with_capacity(cfg.listen.len());
    for (i, addr) in cfg.listen.iter().enumerate() {
        let fd = match sockopt::listener(addr, cfg.backlog, cfg.mode != Mode::Hold) {
            Ok(fd) => fd,
            Err(e) => {
                let msg = listen_error(addr, &e);
                rep.fatal(&mut io.sink, msg.clone());
                anyhow::bail!(msg);
            }
        };
        ep.add(fd.as_fd(), EPOLLIN, LISTENER_BASE + i as u64)
            .context("epoll_ctl listener")?;
        listeners.push(fd);
    }
    ep.add(io.commands.fd(), EPOLLIN, COMMAND_TOKEN)
        .context("epoll_ctl command source")?;
    let tls = match cfg.tls.as_ref().map(|t| t.config()).transpose() {
        Ok(t) => t,
        Err(e) => {
            let msg = format!("server shard {}: {e}", cfg.shard);
            rep.fatal(&mut io.sink, msg.clone());
            anyhow::bail!(msg);
        }
    };
    let mut s = Shard {
        paused: vec![None; listeners.len()],
        listeners,
        plain: Vec::new(),
        wire: Vec::new(),
        tls,
        push: PushBatch::default(),
        st: ServerShardState::new(cfg, open_in_process, rep),
    };
    shard_loop::run(&mut s, &ep, &mut io)
}

impl Engine for Shard {
    fn wait_ms(&mut self, next_tick: u64) -> i32 {
        match self.st.wake_at(next_tick) {
            Some(deadline) => sys::ms_until(sys::monotonic_ns(), deadline),
            None => 0,
        }
    }

    fn after_events(&mut self, ep: &Epoll) {
        // A goodbye ended in this batch: the next ones may go.
        let (st, mut io) = self.split(ep);
        st.goodbye_more(&mut io);
    }

    #[inline]
    fn event(&mut self, ep: &Epoll, tok: u64, ev: u32) {
        if tok >= LISTENER_BASE {
            self.accept_burst(ep, (tok - LISTENER_BASE) as usize);
        } else {
            self.conn_event(ep, tok, ev);
        }
    }

    fn command(&mut self, ep: &Epoll, c: ShardCommand, _sink: &mut Sink) -> Result<()> {
        let (st, mut io) = self.split(ep);
        st.command(&mut io, c);
        Ok(())
    }

    fn tick(&mut self, ep: &Epoll) -> bool {
        let (st, mut io) = self.split(ep);
        st.tick(&mut io);
        self.resume_listeners(ep);
        false
    }

    fn turn_end(&mut self, ep: &Epoll, now: u64, sink: &mut Sink) -> Result<()> {
        let (st, mut io) = self.split(ep);
        st.turn_end(&mut io, now, sink)
    }

    fn close_all(&mut self, ep: &Epoll) {
        let (st, mut io) = self.split(ep);
        st.close_all(&mut io);
    }

    fn report(&mut self, sink: &mut Sink, force: bool, closed_all: bool) -> Result<()> {
        self.st.report(sink, force, closed_all)
    }
}

impl Shard {
    /// The shared state, and the writes it is handed.
    #[inline]
    fn split<'a>(&'a mut self, ep: &'a Epoll) -> (&'a mut ServerShardState<Tls>, EpollIo<'a>) {
        let io = EpollIo {
            ep,
            wire: &mut self.wire,
            batch: &mut self.push,
        };
        (&mut self.st, io)
    }

    fn accept_burst(&mut self, ep: &Epoll, li: usize) {
        // One clock read a burst, not one an accept (0.02 µs a connection, perf 1M): a
        // burst lasts about a millisecond at most, a handshake deadline seconds.
        let now = sys::monotonic_ns();
        for _ in 0..ACCEPT_BURST {
            // Looked up each turn: an accept at the cap closes every listener.
            let Some(lfd) = self.listeners.get(li) else {
                return;
            };
            match sys::accept(lfd.as_fd()) {
                Ok(fd) => self.on_accept(ep, fd, now),
                Err(e) if sys::would_block(&e) => return,
                Err(e) if matches!(sys::errno(&e), Some(Errno::CONNABORTED | Errno::INTR)) => {
                    continue;
                }
                Err(e) => {
                    failure_of(&e, &mut self.st.c.failures);
                    if matches!(sys::errno(&e), Some(Errno::MFILE | Errno::NFILE)) {
                        let _ = ep.modify(lfd.as_fd(), 0, LISTENER_BASE + li as u64);
                        self.paused[li] = Some(sys::monotonic_ns() + EMFILE_PAUSE_MS * 1_000_000);
                        self.st.emfile(&e);
                    }
                    return;
                }
            }
        }
    }

    /// At the fd cap: close every listener, so the kernel drops this shard from each port's
    /// SO_REUSEPORT group and sends new connections to the shards with room, instead of this
    /// one rejecting them. Connections already queued here are reset by the close (counted
    /// by the clients). They reopen below [`REOPEN_FILL`] of the cap.
    fn close_listeners(&mut self) {
        if self.listeners.is_empty() {
            return;
        }
        self.listeners.clear();
        self.paused.clear();
        self.st
            .warn(cap_warning(self.st.cfg.shard, self.st.cfg.cap));
    }

    fn reopen_listeners(&mut self, ep: &Epoll) {
        let open = self.st.open_in_process.load(Ordering::Relaxed);
        if !self.listeners.is_empty() || (open as f64) >= REOPEN_FILL * self.st.cfg.cap as f64 {
            return;
        }
        let mut fresh = Vec::with_capacity(self.st.cfg.listen.len());
        for (i, addr) in self.st.cfg.listen.iter().enumerate() {
            let fd = match sockopt::listener(
                addr,
                self.st.cfg.backlog,
                self.st.cfg.mode != Mode::Hold,
            ) {
                Ok(fd) => fd,
                Err(_) => return, // retried at the next tick
            };
            if ep
                .add(fd.as_fd(), EPOLLIN, LISTENER_BASE + i as u64)
                .is_err()
            {
                return;
            }
            fresh.push(fd);
        }
        self.paused = vec![None; fresh.len()];
        self.listeners = fresh;
    }

    fn resume_listeners(&mut self, ep: &Epoll) {
        self.reopen_listeners(ep);
        let now = sys::monotonic_ns();
        for (i, p) in self.paused.iter_mut().enumerate() {
            if p.is_some_and(|t| now >= t) {
                *p = None;
                let _ = ep.modify(self.listeners[i].as_fd(), EPOLLIN, LISTENER_BASE + i as u64);
            }
        }
    }

    fn on_accept(&mut self, ep: &Epoll, fd: OwnedFd, now: u64) {
        if self.st.open_in_process.load(Ordering::Relaxed) >= self.st.cfg.cap {
            // Refuse loudly (RST) rather than hold a connection past the fd budget, where the
            // next accept would fail with EMFILE and leave clients hanging in the queue.
            let _ = sockopt::set_linger_zero(fd.as_fd());
            self.st.c.failures.over_capacity += 1;
            self.close_listeners();
            return;
        }
        // TCP_NODELAY (but for `hold`) came with the listener's.
        let ws = if self.st.cfg.mode == Mode::Ws {
            WsState::Handshake
        } else {
            WsState::Raw
        };
        let tls = match self.tls.as_ref().map(TlsConn::server).transpose() {
            Ok(t) => t.map(Box::new),
            Err(e) => {
                self.st.warn(format!("TLS session: {e}"));
                self.st.c.failures.other += 1;
                return;
            }
        };
        let timed = ws == WsState::Handshake || tls.is_some();
        let (tok, conn) = self.st.conns.insert_get(Conn::new(fd, ws, tls));
        if let Err(e) = ep.add(conn.fd.as_fd(), EPOLLIN, tok) {
            self.st.conns.remove(tok);
            failure_of(&e, &mut self.st.c.failures);
            return;
        }
        self.st.opened();
        if timed {
            self.st.time_handshake(tok, now);
        }
    }

    /// A connection the server said goodbye to is readable: the peer's close reply (read
    /// and dropped) or its end of the stream, which ends the connection.
    fn goodbye_input(&mut self, ep: &Epoll, tok: u64) {
        let Some(conn) = self.st.conns.get_mut(tok) else {
            return;
        };
        loop {
            match sys::read(conn.fd.as_fd(), &mut self.st.buf) {
                Ok(0) => break,
                Ok(n) => self.st.c.bytes_in += n as u64,
                Err(e) if sys::would_block(&e) => return,
                Err(_) => break,
            }
        }
        let (st, mut io) = self.split(ep);
        st.goodbye_end(&mut io, tok);
    }

    /// Removes a connection (closing its fd, which also drops it from the epoll set).
    #[inline]
    fn close(&mut self, tok: u64) -> bool {
        self.st.remove(tok).is_some()
    }

    fn conn_event(&mut self, ep: &Epoll, tok: u64, ev: u32) {
        let Some(conn) = self.st.conns.get_mut(tok) else {
            return;
        };
        if conn.ws == WsState::Closing {
            self.goodbye_input(ep, tok);
            return;
        }
        let before = interest(&conn.spill);
        if before == EPOLLOUT {
            // Only writing while output is queued (backpressure): flush, then resume reading.
            match flush(conn.fd.as_fd(), &mut conn.spill, &mut self.st.c.bytes_out) {
                Ok(_) => {
                    if let Err(e) = rearm(ep, &conn.fd, tok, before, &conn.spill) {
                        closed_by(&e, &mut self.st.c.closed);
                        self.close(tok);
                    }
                }
                Err(e) => {
                    closed_by(&e, &mut self.st.c.closed);
                    self.close(tok);
                }
            }
            return;
        }
        if ev & (EPOLLIN | EPOLLHUP | EPOLLERR) == 0 {
            return;
        }
        let fd = conn.fd.as_fd();
        let n = match sys::read(fd, &mut self.st.buf[..read_len(conn.io.is_some())]) {
            Ok(0) if conn.tls_handshaking() => {
                self.st.c.closed.tls += 1;
                self.st.c.tls_errors.truncated += 1;
                self.close(tok);
                return;
            }
            Ok(0) => {
                conn.peer_ended(&mut self.st.c, self.st.cfg.mode);
                self.close(tok);
                return;
            }
            Ok(n) => n,
            Err(e) if sys::would_block(&e) => return,
            Err(e) => {
                if conn.tls_handshaking() {
                    self.st.c.closed.tls += 1;
                    self.st.c.tls_errors.truncated += 1;
                } else {
                    closed_by(&e, &mut self.st.c.closed);
                }
                self.close(tok);
                return;
            }
        };
        self.st.c.bytes_in += n as u64;
        let n = match conn.io.as_deref_mut() {
            None => n,
            Some(t) => {
                self.wire.clear();
                let r = tls_read(
                    t,
                    &mut conn.spill,
                    &mut self.st.buf,
                    n,
                    &mut self.plain,
                    &mut self.wire,
                );
                // Handshake records and alerts first, before any answer to the plaintext.
                let sent = if self.wire.is_empty() {
                    Ok(())
                } else if r.is_err() {
                    send_before_close(fd, &conn.spill, &self.wire, &mut self.st.c.bytes_out);
                    Ok(())
                } else {
                    super::send(fd, &mut conn.spill, &self.wire, &mut self.st.c.bytes_out).map(drop)
                };
                match (r, sent) {
                    (Err(e), _) => {
                        e.count(&mut self.st.c.tls_errors);
                        self.st.c.closed.tls += 1;
                        self.close(tok);
                        return;
                    }
                    (Ok(_), Err(e)) => {
                        closed_by(&e, &mut self.st.c.closed);
                        self.close(tok);
                        return;
                    }
                    (Ok((m, input)), Ok(())) => {
                        input.count(&mut self.st.c.tls_handshakes);
                        if m == 0 {
                            if let Err(e) = rearm(ep, &conn.fd, tok, before, &conn.spill) {
                                closed_by(&e, &mut self.st.c.closed);
                                self.close(tok);
                            }
                            return;
                        }
                        m
                    }
                }
            }
        };
        let result = match self.st.cfg.mode {
            Mode::Hold => Ok(Action::Continue),
            Mode::Echo => {
                self.st.c.echo_round_trips += 1;
                send_sealed(
                    fd,
                    conn.io.as_deref_mut(),
                    &mut self.wire,
                    &mut conn.spill,
                    &self.st.buf[..n],
                    &mut self.st.c.bytes_out,
                )
                .map(|_| Action::Continue)
            }
            Mode::Ws => {
                let (mut spill, action) = self.st.ws.read(
                    conn,
                    &mut self.st.buf[..n],
                    &mut self.st.out,
                    &mut self.st.c,
                );
                // The read took the whole connection: its descriptor again, to answer.
                let fd = conn.fd.as_fd();
                let sent = if self.st.out.is_empty() {
                    Ok(())
                } else if action == Action::Continue {
                    send_sealed(
                        fd,
                        conn.io.as_deref_mut(),
                        &mut self.wire,
                        &mut spill,
                        &self.st.out,
                        &mut self.st.c.bytes_out,
                    )
                    .map(drop)
                } else {
                    // The close reply is the last write: with the FIN in one segment, as
                    // the server's own goodbye (a lone reply and FIN arm a tail-loss probe).
                    send_sealed_before_close(
                        fd,
                        conn.io.as_deref_mut(),
                        &mut self.wire,
                        &spill,
                        &self.st.out,
                        &mut self.st.c.bytes_out,
                    );
                    Ok(())
                };
                shrink(&mut spill);
                conn.spill = spill;
                sent.map(|()| action)
            }
        };
        match result {
            Ok(Action::Continue) => {
                if let Err(e) = rearm(ep, &conn.fd, tok, before, &conn.spill) {
                    closed_by(&e, &mut self.st.c.closed);
                    self.close(tok);
                }
            }
            Ok(end) => {
                end.count_close(&mut self.st.c.closed);
                self.close(tok);
            }
            Err(e) => {
                closed_by(&e, &mut self.st.c.closed);
                self.close(tok);
            }
        }
    }
}
