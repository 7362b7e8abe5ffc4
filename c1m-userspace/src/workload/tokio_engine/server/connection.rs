//! A connection's life in the tokio server: taken at accept, served by its own task
//! (the TLS handshake, reads, echo and WebSocket input, heartbeats and messages,
//! backpressure) from its slot in the shard's slab (`tokio_engine::slots`), and its books
//! at close.
//! Push frames are written by the shard's loop (`Shard::push_chunk`) through
//! [`Conn::push`].

use std::{
    future::Future,
    io,
    pin::{Pin, pin},
    rc::Rc,
    sync::atomic::Ordering,
    task::{Context, Poll, ready},
};

use bytes::Buf;
use tokio::{io::ReadBuf, net::TcpStream, time::Sleep};
use tokio_rustls::server::Accept;

use super::Shard;
use crate::workload::{
    config::Mode,
    engine::{
        MAX_PENDING_OUT, closed_by,
        server::{
            proto::{self, Action, PushFrame, WsState, ws_input_beat},
            warnings,
        },
    },
    heartbeat::{self, Visit},
    messages, sys,
    tokio_engine::{
        Spill,
        stream::{Stream, count_handshake_failure, tls_error},
    },
};

impl Shard {
    /// Takes an accepted connection; `false` if the shard is full (listeners closed).
    pub(super) fn on_accept(self: &Rc<Self>, stream: TcpStream) -> bool {
        if self.open_in_process.load(Ordering::Relaxed) >= self.cfg.cap {
            // Refuse loudly (RST), as the epoll server does.
            let _ = stream.set_zero_linger();
            self.c.borrow_mut().failures.over_capacity += 1;
            if !self.accepting.borrow().is_empty() {
                self.close_listeners();
                self.warn(warnings::cap_warning(self.cfg.shard, self.cfg.cap));
            }
            return false;
        }
        // TCP_NODELAY (but for `hold`) came with the listener's.
        {
            let mut c = self.c.borrow_mut();
            c.accepted += 1;
            c.open += 1;
        }
        self.open_in_process.fetch_add(1, Ordering::Relaxed);
        let hs_seq = self.handshake_deadline();
        let close_gen = self.close_gen.get();
        match &self.tls {
            // Plain TCP: the task is the index of the connection's slot (see `slots.rs`).
            None => {
                let conn = Conn::new(self, Stream::Tcp(stream), close_gen, hs_seq);
                let idx = self.conns.borrow_mut().insert(conn);
                tokio::task::spawn_local(ConnTask {
                    sh: self.clone(),
                    idx,
                });
            }
            // TLS: the handshake's state (a whole rustls session, ~10 KB once used) dwarfs
            // any future; the same task serves the connection once it is done.
            Some(acceptor) => {
                let accept = acceptor.accept(stream);
                tokio::task::spawn_local(tls_connection(self.clone(), accept, close_gen, hs_seq));
            }
        }
        true
    }

    /// The TLS handshake, bounded by the handshake deadline and cut short by a close, its
    /// end counted either way (as the epoll server counts it). None: the connection is
    /// over and its books are done.
    async fn tls_handshake(
        &self,
        accept: Accept<TcpStream>,
        close_gen: u32,
        hs_seq: u64,
    ) -> Option<Stream> {
        // Boxed: a handshake's state (a whole rustls session) must not size the task's
        // future, which an idle connection keeps.
        let mut accept = Box::pin(accept);
        let mut notified = pin!(self.wake.notified());
        notified.as_mut().enable();
        let done = loop {
            if self.close_gen.get() != close_gen {
                self.c.borrow_mut().closed.local_close += 1;
                break None;
            }
            if hs_seq < self.hs_cutoff.get() {
                // Slowloris inside TLS: a TLS failure by its reason, as in epoll.
                let mut c = self.c.borrow_mut();
                c.closed.tls += 1;
                c.tls_errors.timeout += 1;
                break None;
            }
            tokio::select! {
                biased;
                r = &mut accept => break Some(r),
                () = &mut notified => {
                    notified.set(self.wake.notified());
                    notified.as_mut().enable();
                }
            }
        };
        let stream = match done {
            Some(Ok(t)) => Some(Stream::tls(t, &mut self.c.borrow_mut().tls_handshakes)),
            Some(Err(e)) => {
                // tokio-rustls sent rustls's alert for it, if any, before returning.
                let mut c = self.c.borrow_mut();
                count_handshake_failure(&e, &mut c.tls_errors);
                c.closed.tls += 1;
                None
            }
            None => None,
        };
        if stream.is_none() || self.cfg.mode != Mode::Ws {
            self.handshake_over(hs_seq);
        }
        if stream.is_none() {
            self.leave();
        }
        stream
    }

    /// A connection leaves the open counts (its end is counted by the caller).
    fn leave(&self) {
        self.c.borrow_mut().open -= 1;
        self.open_in_process.fetch_sub(1, Ordering::Relaxed);
        if self.stopping.get() && self.open() == 0 {
            self.main_wake.notify_one();
        }
    }

    /// The books of a connection that ends with `end`, then its close.
    pub(super) fn finish(&self, mut conn: Conn, end: End) {
        if let Some(cl) = conn.clocks.as_mut() {
            heartbeat::ended(&mut self.c.borrow_mut().heartbeat, &mut cl.ping_ns);
        }
        let open_ws = conn.ws == WsState::Open;
        let tls = matches!(conn.stream, Stream::Tls(_));
        if conn.ws == WsState::Handshake {
            self.handshake_over(conn.hs_seq);
        }
        {
            let mut c = self.c.borrow_mut();
            match end {
                End::Eof => {
                    let partial = conn
                        .spill
                        .as_ref()
                        .is_some_and(|s| !s.inbuf.is_empty() || s.frag.is_some());
                    proto::peer_eof(&mut c, self.cfg.mode, conn.ws, partial);
                }
                End::Io(e) => match tls_error(&e) {
                    Some(f) => {
                        f.count(&mut c.tls_errors);
                        c.closed.tls += 1;
                    }
                    None => closed_by(&e, &mut c.closed),
                },
                End::Peer => c.closed.peer_closed += 1,
                End::HeartbeatMissed => c.closed.heartbeat_missed += 1,
                End::Protocol => c.closed.protocol += 1,
                End::HandshakeTimeout => c.closed.handshake_timeout += 1,
                End::SaidGoodbye(Goodbye::Unanswered) => c.closed.goodbye_unanswered += 1,
                End::SaidGoodbye(_) => c.closed.local_close += 1,
                End::Local | End::Teardown => {
                    c.closed.local_close += 1;
                    // The goodbye (and under TLS the close_notify) rides with the FIN
                    // (`engine::send_before_close`); behind queued output it is dropped,
                    // as the close discards that too.
                    let goodbye = if open_ws {
                        &proto::going_away()[..]
                    } else {
                        &[]
                    };
                    if (open_ws || tls)
                        && !conn.has_out()
                        && let Ok(n) = conn.stream.write_last(goodbye, true)
                    {
                        c.bytes_out += n as u64;
                    }
                }
            }
            if open_ws {
                c.ws_open -= 1;
            }
        }
        if open_ws && conn.push_gen != self.push_gen.get() {
            self.settle_push(None);
        }
        drop(conn);
        self.leave();
    }
}

pub(super) struct Conn {
    pub(super) stream: Stream,
    pub(super) ws: WsState,
    pub(super) spill: Option<Box<Spill>>,
    /// The shard's generations when this connection last looked (push: when it opened
    /// or the shard's loop last wrote one to it).
    close_gen: u32,
    pub(super) push_gen: u32,
    /// Its handshake's number (see [`Shard::handshake_deadline`]).
    hs_seq: u64,
    /// `--heartbeat` and `--message-rate`: on the heap, once open (8 B of the slot).
    clocks: Option<Box<Clocks>>,
}

/// An open connection's clocks: `--heartbeat`'s outstanding ping (when it was sent, 0:
/// none) and the timer of its next slot, `--message-rate`'s schedule.
struct Clocks {
    ping_ns: u64,
    beat: Option<Pin<Box<Sleep>>>,
    msgs: Option<MessageClock>,
}

/// A connection's `--message-rate` schedule: the timer of its next message, that
/// message's instant (monotonic ns) and sequence.
struct MessageClock {
    timer: Pin<Box<Sleep>>,
    at: u64,
    seq: u32,
}

/// How a goodbye ended.
pub(super) enum Goodbye {
    /// The connection closes now: no goodbye to wait for (mid-handshake, the teardown
    /// stalled, or the shard stops); the caller sends what a close sends.
    CloseNow,
    /// Said; the peer ended its side (or its socket failed), or the shard stopped.
    Answered,
    /// Said; no end of the peer's side within `CLOSE_STALL_NS` (5 s).
    Unanswered,
}

/// Why a connection ends.
pub(super) enum End {
    /// The peer closed the stream.
    Eof,
    /// A read or write failed (or the peer does not read: `MAX_PENDING_OUT`).
    Io(io::Error),
    /// WebSocket close handshake from the peer, answered.
    Peer,
    /// Protocol violation (counted where found), answered.
    Protocol,
    HandshakeTimeout,
    /// `Stop` (or `Close` where no goodbye is awaited): closed at once.
    Local,
    /// `Close`: say goodbye first, see `goodbye`.
    Teardown,
    /// The goodbye said, and the peer's end of the stream seen (or not).
    SaidGoodbye(Goodbye),
    /// `--heartbeat`: no pong by the timeout (our close frame 1011 sent).
    HeartbeatMissed,
}

/// What woke a connection task.
enum Woke {
    Read(usize),
    Eof,
    Writable,
    Err(io::Error),
    /// `--heartbeat`: this connection's slot came up.
    Beat,
    /// `--message-rate`: this connection's next message is due.
    Message,
}

/// A TLS connection's task: the handshake, then the connection served from its slot as a
/// plain one's task serves it.
async fn tls_connection(sh: Rc<Shard>, accept: Accept<TcpStream>, close_gen: u32, hs_seq: u64) {
    let Some(stream) = sh.tls_handshake(accept, close_gen, hs_seq).await else {
        return;
    };
    let conn = Conn::new(&sh, stream, close_gen, hs_seq);
    let idx = sh.conns.borrow_mut().insert(conn);
    ConnTask { sh, idx }.await;
}

/// A connection's task: its shard and the index of its slot, all a waiting connection
/// keeps in its future (16 B, so tokio's task cell is 128 B: asserted in the tests).
/// Written as a `Future` by hand: an `async` block would add its state and the borrows of
/// what it awaits.
struct ConnTask {
    sh: Rc<Shard>,
    idx: u32,
}

impl Future for ConnTask {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let (sh, idx) = (&self.sh, self.idx);
        let end = {
            let mut slots = sh.conns.borrow_mut();
            let Some(slot) = slots.polled(idx, cx.waker()) else {
                return Poll::Ready(());
            };
            match slot.conn.as_mut() {
                // Ended by the shard (a push it could not write): its books are done.
                None => None,
                Some(conn) => Some(ready!(conn.poll_serve(cx, sh))),
            }
        };
        let conn = sh.conns.borrow_mut().vacate(idx);
        match (conn, end) {
            (Some(mut conn), Some(End::Teardown)) => {
                // The goodbye (rare: a teardown) is an async wait of its own; it takes the
                // connection out of the slab with it.
                let sh = sh.clone();
                tokio::task::spawn_local(async move {
                    let end = match conn.goodbye(&sh).await {
                        Goodbye::CloseNow => End::Local,
                        said => End::SaidGoodbye(said),
                    };
                    sh.finish(conn, end);
                });
            }
            (Some(conn), Some(end)) => sh.finish(conn, end),
            _ => {}
        }
        Poll::Ready(())
    }
}

impl Conn {
    fn new(sh: &Shard, stream: Stream, close_gen: u32, hs_seq: u64) -> Conn {
        Conn {
            stream,
            ws: if sh.cfg.mode == Mode::Ws {
                WsState::Handshake
            } else {
                WsState::Raw
            },
            spill: None,
            close_gen,
            push_gen: sh.push_gen.get(),
            hs_seq,
            clocks: None,
        }
    }
}

impl Conn {
    /// Output queued: ours, or records rustls sealed that the socket did not take.
    pub(super) fn has_out(&self) -> bool {
        self.spill.as_ref().is_some_and(|s| !s.out.is_empty()) || self.stream.tls_pending()
    }

    /// Serves the connection until it ends: reads, writes, its clocks; a close or an
    /// overdue handshake is seen at the top of the loop (the shard wakes the task).
    fn poll_serve(&mut self, cx: &mut Context<'_>, sh: &Shard) -> Poll<End> {
        loop {
            if sh.close_gen.get() != self.close_gen {
                return Poll::Ready(if sh.stopping.get() {
                    End::Local
                } else {
                    End::Teardown
                });
            }
            if self.ws == WsState::Handshake && self.hs_seq < sh.hs_cutoff.get() {
                return Poll::Ready(End::HandshakeTimeout);
            }
            if self.ws == WsState::Open
                && self.clocks.is_none()
                && (sh.cfg.heartbeat.is_some() || sh.cfg.messages.is_some())
            {
                let now = sys::monotonic_ns();
                let beat = sh.cfg.heartbeat.map(|cfg| {
                    let phase = weyl_phase(self.hs_seq, cfg.interval_ns);
                    let at = heartbeat::next_slot(&cfg, 0, phase, now);
                    Box::pin(tokio::time::sleep_until(instant_of(at)))
                });
                let msgs = sh.cfg.messages.map(|cfg| {
                    let phase = weyl_phase(self.hs_seq, cfg.interval_ns);
                    let at = messages::next_slot(&cfg, 0, phase, now);
                    MessageClock {
                        timer: Box::pin(tokio::time::sleep_until(instant_of(at))),
                        at,
                        seq: 0,
                    }
                });
                self.clocks = Some(Box::new(Clocks {
                    ping_ns: 0,
                    beat,
                    msgs,
                }));
            }
            let writing = self.has_out();
            let end = match ready!(self.poll_wake(cx, sh, writing)) {
                Woke::Writable => self.flush(sh).err().map(End::Io),
                Woke::Read(n) => self.input(sh, n),
                Woke::Eof => Some(End::Eof),
                Woke::Err(e) => Some(End::Io(e)),
                Woke::Beat => self.beat(sh),
                Woke::Message => self.messages(sh).err().map(End::Io),
            };
            if let Some(end) = end {
                return Poll::Ready(end);
            }
        }
    }

    /// Waits for the socket: writable while output is queued (a peer that does not read
    /// is not read from: backpressure), else readable, then reads into the shard's
    /// buffer. A short read clears tokio's readiness, so a drained socket costs no extra
    /// `read` returning EAGAIN.
    fn poll_wake(&mut self, cx: &mut Context<'_>, sh: &Shard, writing: bool) -> Poll<Woke> {
        if let Some(cl) = self.clocks.as_mut() {
            if let Some(b) = cl.beat.as_mut()
                && b.as_mut().poll(cx).is_ready()
            {
                return Poll::Ready(Woke::Beat);
            }
            if let Some(m) = cl.msgs.as_mut()
                && m.timer.as_mut().poll(cx).is_ready()
            {
                return Poll::Ready(Woke::Message);
            }
        }
        if writing {
            return Poll::Ready(match ready!(self.stream.tcp().poll_write_ready(cx)) {
                Ok(()) => Woke::Writable,
                Err(e) => Woke::Err(e),
            });
        }
        let mut buf = sh.buf.borrow_mut();
        let mut rb = ReadBuf::new(&mut buf);
        Poll::Ready(match ready!(self.stream.poll_read(cx, &mut rb)) {
            Ok(()) if rb.filled().is_empty() => Woke::Eof,
            Ok(()) => Woke::Read(rb.filled().len()),
            Err(e) => Woke::Err(e),
        })
    }

    /// Handles `n` bytes just read into the shard's buffer.
    fn input(&mut self, sh: &Shard, n: usize) -> Option<End> {
        sh.c.borrow_mut().bytes_in += n as u64;
        match sh.cfg.mode {
            Mode::Hold => None,
            Mode::Echo => {
                let buf = sh.buf.borrow();
                let mut c = sh.c.borrow_mut();
                c.echo_round_trips += 1;
                self.send(&buf[..n], &mut c.bytes_out).err().map(End::Io)
            }
            Mode::Ws => self.ws_input(sh, n),
        }
    }

    fn ws_input(&mut self, sh: &Shard, n: usize) -> Option<End> {
        let mut buf = sh.buf.borrow_mut();
        let mut out = sh.out.borrow_mut();
        let mut c = sh.c.borrow_mut();
        out.clear();
        let beat = sh.cfg.heartbeat;
        let was_open = self.ws == WsState::Open;
        let mut spill = self.spill.take();
        let mut frag = spill.as_mut().and_then(|s| s.frag.take());
        let action = match spill.as_mut().filter(|s| !s.inbuf.is_empty()) {
            // A partial frame waits: append, decode from the connection's own buffer.
            Some(s) => {
                s.inbuf.extend_from_slice(&buf[..n]);
                let (used, a) = ws_input_beat(
                    &sh.dec,
                    &mut self.ws,
                    &mut s.inbuf[..],
                    &mut frag,
                    &mut out,
                    &mut c,
                    beat.as_ref()
                        .zip(self.clocks.as_mut().map(|cl| &mut cl.ping_ns)),
                );
                s.inbuf.advance(used);
                a
            }
            // The usual case: decode in place in the shard's buffer, keep only a tail.
            None => {
                let (used, a) = ws_input_beat(
                    &sh.dec,
                    &mut self.ws,
                    &mut buf[..n],
                    &mut frag,
                    &mut out,
                    &mut c,
                    beat.as_ref()
                        .zip(self.clocks.as_mut().map(|cl| &mut cl.ping_ns)),
                );
                if used < n {
                    spill
                        .get_or_insert_with(Box::default)
                        .inbuf
                        .extend_from_slice(&buf[used..n]);
                }
                a
            }
        };
        if frag.is_some() {
            spill.get_or_insert_with(Box::default).frag = frag;
        }
        self.spill = spill;
        if !was_open && self.ws == WsState::Open {
            // Pushes begun before it opened are not its own.
            self.push_gen = sh.push_gen.get();
            sh.handshake_over(self.hs_seq);
        }
        let sent = if out.is_empty() {
            Ok(())
        } else if action == Action::Continue {
            self.send(&out, &mut c.bytes_out)
        } else {
            // The close reply is the last write: with the FIN in one segment (as the
            // epoll engine's), so no tail-loss probe is armed for a lone reply.
            if !self.has_out()
                && let Ok(n) = self.stream.write_last(&out, true)
            {
                c.bytes_out += n as u64;
            }
            Ok(())
        };
        self.shrink();
        match (sent, action) {
            (Err(e), _) => Some(End::Io(e)),
            (Ok(()), Action::Continue) => None,
            (Ok(()), Action::ClosePeer) => Some(End::Peer),
            (Ok(()), Action::CloseProtocol) => Some(End::Protocol),
        }
    }

    /// `--heartbeat`: this connection's slot came up: a ping (unmasked, as a server's),
    /// or the close of one whose ping went unanswered; then the next slot's timer.
    fn beat(&mut self, sh: &Shard) -> Option<End> {
        let cfg = sh.cfg.heartbeat?;
        let now = sys::monotonic_ns();
        let mut c = sh.c.borrow_mut();
        let mut frame = Vec::new();
        let cl = self.clocks.as_mut()?;
        let visit = heartbeat::visit(&mut c.heartbeat, &cfg, &mut cl.ping_ns, now);
        heartbeat::encode(&mut frame, visit, cl.ping_ns, None);
        let end = match visit {
            Visit::Wait => None,
            Visit::Ping => self.send(&frame, &mut c.bytes_out).err().map(End::Io),
            Visit::Missed => {
                if !self.has_out()
                    && let Ok(n) = self.stream.write_last(&frame, true)
                {
                    c.bytes_out += n as u64;
                }
                Some(End::HeartbeatMissed)
            }
        };
        if let Some(b) = self.clocks.as_mut().and_then(|cl| cl.beat.as_mut()) {
            let phase = weyl_phase(self.hs_seq, cfg.interval_ns);
            let at = heartbeat::next_slot(&cfg, 0, phase, now.saturating_add(1));
            b.as_mut().reset(instant_of(at));
        }
        end
    }

    /// `--message-rate`: every message whose instant passed (a task that woke late
    /// catches each missed one up, stamped with its own instant), then the next one's
    /// timer.
    fn messages(&mut self, sh: &Shard) -> io::Result<()> {
        let m = self.clocks.as_mut().and_then(|cl| cl.msgs.take());
        let (Some(cfg), Some(mut m)) = (sh.cfg.messages, m) else {
            return Ok(());
        };
        let now = sys::monotonic_ns();
        let mut frame = Vec::new();
        let mut scratch = Vec::new();
        let mut r = Ok(());
        while m.at <= now && r.is_ok() {
            let queued = self.spill.as_ref().map_or(0, |s| s.out.len());
            let mut c = sh.c.borrow_mut();
            if messages::server_sent(&mut c.server_messages, &cfg, m.at, now, queued) {
                frame.clear();
                messages::encode_server(&mut frame, &mut scratch, &cfg, m.at, m.seq);
                m.seq = m.seq.wrapping_add(1);
                r = self.send(&frame, &mut c.bytes_out);
            }
            m.at = m.at.saturating_add(cfg.interval_ns);
        }
        m.timer.as_mut().reset(instant_of(m.at));
        if let Some(cl) = self.clocks.as_mut() {
            cl.msgs = Some(m);
        }
        r
    }

    /// Writes a push's `frame`, stamped at `now` (the shard's loop, to a connection open
    /// when it began), and settles it with the push. What the socket does not take is
    /// queued; the caller wakes the task to wait for `writable`.
    pub(super) fn push(&mut self, sh: &Shard, frame: &PushFrame, now: u64) -> io::Result<()> {
        self.push_gen = sh.push_gen.get();
        let r = self.send(frame, &mut sh.c.borrow_mut().bytes_out);
        sh.settle_push(r.as_ref().ok().map(|()| now));
        r
    }

    /// Writes `bytes` after anything already queued; queues what the socket does not
    /// take (the task then waits for `writable`). An error is a broken connection.
    pub(super) fn send(&mut self, bytes: &[u8], written: &mut u64) -> io::Result<()> {
        if let Some(s) = self.spill.as_mut().filter(|s| !s.out.is_empty()) {
            if s.out.len() + bytes.len() > MAX_PENDING_OUT {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "peer not reading: output queue full",
                ));
            }
            s.out.extend_from_slice(bytes);
            return Ok(());
        }
        let n = match self.stream.try_write(bytes) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(e),
        };
        *written += n as u64;
        if n < bytes.len() {
            let s = self.spill.get_or_insert_with(Box::default);
            s.out.clear();
            s.out.extend_from_slice(&bytes[n..]);
        }
        Ok(())
    }

    /// Writes queued output as far as the socket takes it.
    fn flush(&mut self, sh: &Shard) -> io::Result<()> {
        // Records rustls sealed go before what is queued behind them.
        if !self.stream.try_flush()? {
            return Ok(());
        }
        if let Some(s) = self.spill.as_mut() {
            while !s.out.is_empty() {
                match self.stream.try_write(&s.out) {
                    Ok(n) => {
                        s.out.advance(n);
                        sh.c.borrow_mut().bytes_out += n as u64;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) => return Err(e),
                }
            }
        }
        self.shrink();
        Ok(())
    }

    /// Drops the spill if it holds nothing, so idle connections return to zero heap.
    fn shrink(&mut self) {
        if self.spill.as_ref().is_some_and(|s| s.is_empty()) {
            self.spill = None;
        }
    }
}

/// A server connection's phase within `interval_ns` (heartbeat or messages): its accept
/// number times the golden ratio, modulo 1, of the interval (a Weyl sequence: any number
/// of connections spreads evenly, with no count known beforehand).
fn weyl_phase(seq: u64, interval_ns: u64) -> u64 {
    const PHI_FRAC: u64 = 0x9E37_79B9_7F4A_7C15;
    let frac = seq.wrapping_mul(PHI_FRAC);
    u64::try_from((u128::from(frac) * u128::from(interval_ns)) >> 64).unwrap_or(0)
}

/// The monotonic instant `at_ns` as a tokio instant (both read CLOCK_MONOTONIC).
fn instant_of(at_ns: u64) -> tokio::time::Instant {
    let (mono, now) = (sys::monotonic_ns(), tokio::time::Instant::now());
    now + std::time::Duration::from_nanos(at_ns.saturating_sub(mono))
}

#[cfg(test)]
mod tests {
    use super::{super::super::slots::Slot, *};

    /// What an idle plain connection keeps in user space besides its socket's
    /// `ScheduledIo` (256 B): its task's cell, which is the future plus tokio's 104 B
    /// (header, scheduler, id, stage tag, trailer) rounded up to 128 B, and its slot.
    /// Measured: a 16-B future (a 128-B cell; 24 B is the most that still fits) and a
    /// 88-B slot, so 128 + 256 + 88 = 472 B a connection, under the 512 B of issue 37.
    #[test]
    fn an_idle_connection_fits_a_128_byte_task_cell_and_a_small_slot() {
        let (task, slot) = (size_of::<ConnTask>(), size_of::<Slot<Conn>>());
        eprintln!("connection task future: {task} B, slot: {slot} B");
        assert!(
            task <= 24,
            "the task's future grew to {task} B: its cell is no longer 128 B"
        );
        assert!(slot <= 88, "a connection's slot grew to {slot} B");
    }
}
