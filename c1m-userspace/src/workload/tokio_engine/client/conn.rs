//! A client connection's task and its life: its setup (connect, TLS and WebSocket
//! handshakes within the connect timeout, holding an in-flight slot), the open connection
//! with its clocks, and its end (teardown, churn, or its own). What it does with the bytes
//! it reads, and what it sends, is in `input`.
//!
//! The task's future is only the shard and the index of the connection's slot in the
//! shard's slab (`slots`, as the tokio server's), 16 B: tokio's task cell is then 128 B,
//! where a task owning its connection in an `async` block made it 640 B (a 488-B future,
//! rounded up to tokio's 128-B alignment). The setup is a boxed future in the slot that
//! owns the connection until it opens (an open connection keeps none of its state); the
//! open connection is polled by hand ([`Open::poll`]); a goodbye, which waits, is a task of
//! its own.

use std::{
    future::{Future, poll_fn},
    io,
    pin::{Pin, pin},
    rc::Rc,
    sync::atomic::Ordering,
    task::{Context, Poll, ready},
    time::Duration,
};

use bytes::{Buf, BytesMut};
use tokio::{
    io::{Interest, ReadBuf},
    sync::OwnedSemaphorePermit,
    time::Sleep,
};

use super::{Shared, deadlines::Step, goodbye, instant_of, start};
use crate::workload::{
    churn,
    config::Mode,
    engine::client::proto::{CLOSE_STALL_NS, ConnProto, EchoStep, Proto, State},
    stats::counters::Counters,
    sys,
    tokio_engine::{
        Spill,
        stream::{Stream, count_handshake_failure},
    },
};

/// A connection's own state.
pub(super) struct Conn {
    pub(super) p: ConnProto,
    /// Heap only while there is something in it: an idle connection has none.
    pub(super) spill: Option<Box<Spill>>,
}

/// Why a connection's task stopped serving it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    /// It ended by itself (the peer, an error, a failed setup: counted where it ended).
    Life,
    /// The client's teardown.
    Teardown,
    /// `--churn` picked it.
    Churn,
}

/// What a batch of input leaves the connection to do.
#[derive(PartialEq, Eq)]
pub(super) enum Flow {
    Go,
    /// The connection ended (cause counted).
    End,
}

/// Counts what a send wrote, or its error as `fail` classifies it (the connection ends).
pub(super) fn counted(
    c: &mut Counters,
    r: io::Result<u64>,
    fail: fn(&io::Error, &mut Counters),
) -> Flow {
    match r {
        Ok(n) => {
            c.bytes_out += n;
            Flow::Go
        }
        Err(e) => {
            fail(&e, c);
            Flow::End
        }
    }
}

/// A clock's timer, on the heap only while the clock runs.
pub(super) type Timer = Option<Pin<Box<Sleep>>>;

/// An open connection's clocks: the heartbeat's next slot, the next message's timer and
/// instant (`--heartbeat`, `--message-rate`).
#[derive(Default)]
pub(super) struct Clocks {
    pub(super) beat: Timer,
    pub(super) msg: Timer,
    pub(super) msg_at: u64,
}

/// A connection in its slot of the shard's slab.
pub(super) enum Phase {
    /// Connect, TLS and WebSocket handshakes: a future on the heap, owning the connection
    /// until its setup ends.
    Setup(Pin<Box<dyn Future<Output = SetupEnd>>>),
    Open(Open),
}

/// The connection, its stream and how its setup ended.
pub(super) struct SetupEnd {
    conn: Conn,
    stream: Option<Stream>,
    outcome: Outcome,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Open,
    /// It ended (counted where it ended).
    Ended,
    /// The teardown came first.
    TornDown,
}

/// An open connection.
pub(super) struct Open {
    conn: Conn,
    stream: Stream,
    /// `--heartbeat` and `--message-rate`: on the heap (an idle connection without either
    /// keeps 8 bytes for them), rebuilt when a phase switches them (`switched` is the
    /// shard's switch count they were built at; see `switch.rs`).
    clocks: Option<Box<Clocks>>,
    switched: u64,
}

/// Why a setup step stopped waiting.
enum Cut {
    /// Past the connect timeout (see `deadlines`).
    Overdue,
    /// The client's teardown began.
    TornDown,
}

/// `f`, unless the teardown began or the setup step is overdue first: the shard wakes the
/// task for either (its slot's waker; the deadline queue's sweep).
async fn within<T>(sh: &Shared, step: &Step<'_>, f: impl Future<Output = T>) -> Result<T, Cut> {
    let mut f = pin!(f);
    poll_fn(|cx| {
        if sh.closing.get() {
            return Poll::Ready(Err(Cut::TornDown));
        }
        match f.as_mut().poll(cx) {
            Poll::Ready(v) => Poll::Ready(Ok(v)),
            Poll::Pending if step.overdue_else_wait(cx.waker()) => Poll::Ready(Err(Cut::Overdue)),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// A connection's task: its shard and the index of its slot, all a connection keeps in
/// its future (16 B, so tokio's task cell is 128 B: asserted in the tests). Written as a
/// `Future` by hand: an `async` block would add its state and the borrows of what it
/// awaits.
pub(super) struct ConnTask {
    pub(super) sh: Rc<Shared>,
    pub(super) idx: u32,
}

impl Future for ConnTask {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let (sh, idx) = (&self.sh, self.idx);
        let over = {
            let mut slots = sh.conns.borrow_mut();
            let Some(slot) = slots.polled(idx, cx.waker()) else {
                return Poll::Ready(());
            };
            let Some(phase) = slot.conn.as_mut() else {
                return Poll::Ready(());
            };
            ready!(phase.poll(cx, sh))
        };
        let vacated = sh.conns.borrow_mut().vacate(idx);
        let (conn, stream, end) = match (over, vacated) {
            (Over::Setup(e), _) => {
                let end = if e.outcome == Outcome::TornDown {
                    End::Teardown
                } else {
                    End::Life
                };
                (e.conn, e.stream, end)
            }
            (Over::Open(end), Some(Phase::Open(o))) => {
                sh.board.borrow_mut().leave(o.conn.board_place(sh));
                (o.conn, Some(o.stream), end)
            }
            (Over::Open(_), _) => return Poll::Ready(()),
        };
        ended(sh, conn, stream, end);
        Poll::Ready(())
    }
}

/// How a slot's connection ended: in its setup (the connection handed back), or open.
enum Over {
    Setup(SetupEnd),
    Open(End),
}

impl Phase {
    /// Drives the connection: its setup, then the open connection, until it ends.
    fn poll(&mut self, cx: &mut Context<'_>, sh: &Shared) -> Poll<Over> {
        loop {
            match self {
                Phase::Setup(setup) => {
                    let e = ready!(setup.as_mut().poll(cx));
                    let SetupEnd {
                        conn,
                        stream: Some(stream),
                        outcome: Outcome::Open,
                    } = e
                    else {
                        return Poll::Ready(Over::Setup(e));
                    };
                    if sh.p.borrow().cfg.churn.is_some() && !sh.closing.get() {
                        sh.board.borrow_mut().join(conn.board_place(sh));
                    }
                    *self = Phase::Open(Open::new(sh, conn, stream));
                }
                Phase::Open(open) => return open.poll(cx, sh).map(Over::Open),
            }
        }
    }
}

/// The connection's books once it ended. A goodbye that waits for its server (a churn's,
/// a teardown's of an open WebSocket) is a task of its own, as in the tokio server.
fn ended(sh: &Rc<Shared>, mut conn: Conn, mut stream: Option<Stream>, end: End) {
    match end {
        End::Churn => {
            let sh = sh.clone();
            tokio::task::spawn_local(async move { conn.churned(&sh, stream).await });
        }
        End::Teardown if conn.p.state == State::Open && sh.p.borrow().cfg.mode == Mode::Ws => {
            let sh = sh.clone();
            tokio::task::spawn_local(async move {
                let _slot = goodbye::goodbye_slot(&sh).await;
                if conn.finish(&sh, stream.as_mut(), end)
                    && let Some(s) = stream.as_mut()
                {
                    let frames = conn.closing_frames();
                    goodbye::await_server_close(&sh, s, &mut conn.p, frames).await;
                }
                drop(stream);
                sh.task_gone();
            });
        }
        // Nothing to wait for: no goodbye (`finish` says one only for an open WebSocket).
        _ => {
            conn.finish(sh, stream.as_mut(), end);
            drop(stream);
            sh.task_gone();
        }
    }
}

impl Open {
    fn new(sh: &Shared, conn: Conn, stream: Stream) -> Open {
        let mode = sh.p.borrow().cfg.mode;
        Open {
            clocks: conn.clocks(sh, mode, sys::monotonic_ns()),
            switched: sh.switches.get(),
            conn,
            stream,
        }
    }

    /// Serves the open connection until it ends, is torn down or churned; a teardown or a
    /// phase switch is seen at the top of the loop (the shard wakes the task).
    fn poll(&mut self, cx: &mut Context<'_>, sh: &Shared) -> Poll<End> {
        loop {
            if sh.closing.get() {
                return Poll::Ready(End::Teardown);
            }
            if self.switched != sh.switches.get() {
                self.switched = sh.switches.get();
                let mode = sh.p.borrow().cfg.mode;
                self.clocks = self.conn.clocks(sh, mode, sys::monotonic_ns());
            }
            match self.turn(cx, sh) {
                Poll::Ready(Flow::Go) => {}
                Poll::Ready(Flow::End) => return Poll::Ready(End::Life),
                Poll::Pending if self.picked(cx, sh) => return Poll::Ready(End::Churn),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Picked by the churn pump? (If not, the board keeps the waker.) Without a place
    /// taken on the board (no `--churn`) nothing is asked: this runs at every wake.
    fn picked(&self, cx: &Context<'_>, sh: &Shared) -> bool {
        let mut board = sh.board.borrow_mut();
        board.holds_any() && board.picked(self.conn.board_place(sh), cx.waker())
    }

    /// One wake of the connection: output waiting for the socket first (backpressure:
    /// nothing is read meanwhile), else input, then the heartbeat's slot, then a message.
    fn turn(&mut self, cx: &mut Context<'_>, sh: &Shared) -> Poll<Flow> {
        let Open {
            conn,
            stream: s,
            clocks,
            ..
        } = self;
        if conn.pending_out().is_some() || s.tls_pending() {
            let out = conn.pending_out().map_or(&[][..], |o| &o[..]);
            let r = ready!(s.poll_send(cx, out));
            return Poll::Ready(conn.sent(&mut sh.p.borrow_mut(), r));
        }
        if let Poll::Ready(r) = read(cx, sh, s) {
            return Poll::Ready(conn.input(sh, s, r));
        }
        let Some(c) = clocks.as_deref_mut() else {
            return Poll::Pending;
        };
        if let Some(b) = c.beat.as_mut()
            && b.as_mut().poll(cx).is_ready()
        {
            let now = sys::monotonic_ns();
            if conn.beat(&mut sh.p.borrow_mut(), s, now) == Flow::End {
                return Poll::Ready(Flow::End);
            }
            c.beat = conn.next_beat(sh, now + 1);
            return Poll::Ready(Flow::Go);
        }
        if let Some(m) = c.msg.as_mut()
            && m.as_mut().poll(cx).is_ready()
        {
            let now = sys::monotonic_ns();
            let mut p = sh.p.borrow_mut();
            if conn.messages(&mut p, s, &mut c.msg_at, now) == Flow::End {
                return Poll::Ready(Flow::End);
            }
            match c.msg.as_mut() {
                Some(t) if !p.draining => t.as_mut().reset(instant_of(c.msg_at)),
                _ => c.msg = None,
            }
            return Poll::Ready(Flow::Go);
        }
        Poll::Pending
    }
}

/// Reads into the shard's one buffer, borrowed only for the poll (what it read stays
/// there until the caller's next await).
fn read(cx: &mut Context<'_>, sh: &Shared, s: &mut Stream) -> Poll<io::Result<usize>> {
    let mut buf = sh.buf.borrow_mut();
    let mut rb = ReadBuf::new(&mut buf);
    ready!(s.poll_read(cx, &mut rb))?;
    Poll::Ready(Ok(rb.filled().len()))
}

impl Conn {
    /// The connection's setup, the future its slot holds until it ends: the connection and
    /// its stream go back to the task with the outcome. Not an `async fn`: that keeps its
    /// arguments twice in its future (rust-lang/rust#62958).
    #[allow(clippy::manual_async_fn)] // deliberately not an async fn, see above
    pub(super) fn setup_task(
        mut self,
        sh: Rc<Shared>,
        stream: Stream,
        done: bool,
        permit: OwnedSemaphorePermit,
    ) -> impl Future<Output = SetupEnd> {
        async move {
            let mut stream = Some(stream);
            let outcome = self.setup(&sh, &mut stream, done, permit).await;
            SetupEnd {
                conn: self,
                stream,
                outcome,
            }
        }
    }

    /// What [`goodbye::await_server_close`] parses first after our close frame: the
    /// input the last read left unparsed (plaintext under TLS, as every read's).
    fn closing_frames(&mut self) -> Vec<u8> {
        self.spill
            .as_mut()
            .map(|sp| std::mem::take(&mut sp.inbuf).to_vec())
            .unwrap_or_default()
    }

    /// The connection's place on the churn board: its index among the shard's.
    fn board_place(&self, sh: &Shared) -> u32 {
        let p = sh.p.borrow();
        (self.p.g.saturating_sub(p.cfg.first) / p.cfg.stride.max(1)) as u32
    }

    /// `--churn` picked this open connection: it says goodbye as a teardown does (counted
    /// a churn close), its reopen starts at once, and a WebSocket waits for its server to
    /// close (at most [`CLOSE_STALL_NS`]), so the socket closes as at a teardown.
    async fn churned(mut self, sh: &Rc<Shared>, mut stream: Option<Stream>) {
        let g = self.p.g;
        let goodbye = self.finish(sh, stream.as_mut(), End::Churn);
        match sh.reopen_slots.clone().try_acquire_owned() {
            Ok(permit) => start(sh, g, permit, true),
            Err(_) => churn::failed(&mut sh.p.borrow_mut().c.churn),
        }
        if goodbye && let Some(s) = stream.as_mut() {
            let frames = self.closing_frames();
            let waited = tokio::time::timeout(
                Duration::from_nanos(CLOSE_STALL_NS),
                goodbye::await_server_close(sh, s, &mut self.p, frames),
            )
            .await;
            let mut p = sh.p.borrow_mut();
            p.c.churn.closing -= 1;
            if waited.is_err() {
                p.warn_close_unanswered(1);
            }
        }
        // Our FIN (raw modes: first, so TIME_WAIT is ours).
        drop(stream);
        sh.task_gone();
    }

    /// The connection is over: a teardown or a churn says goodbye (under TLS with a
    /// close_notify after it) and is counted; it leaves the open or in-flight count.
    /// True: the close frame went out, wait for the server to close.
    fn finish(&mut self, sh: &Shared, stream: Option<&mut Stream>, end: End) -> bool {
        let mut p = sh.p.borrow_mut();
        p.conn_ends(&mut self.p);
        let mut goodbye = false;
        if end != End::Life {
            if self.p.state == State::Open {
                let ws = p.cfg.mode == Mode::Ws;
                if let Some(s) = stream
                    && (ws || matches!(s, Stream::Tls(_)))
                    && self.pending_out().is_none()
                    && !s.tls_pending()
                {
                    let frame = if ws { p.close_frame() } else { &[] };
                    let len = frame.len();
                    if let Ok(n) = s.write_last(frame, false) {
                        p.c.bytes_out += n as u64;
                        goodbye = ws && n == len;
                    }
                }
                if end == End::Churn {
                    churn::closing(&mut p.c.churn);
                    if goodbye {
                        p.c.churn.closing += 1;
                    }
                } else {
                    p.c.closed.local_close += 1;
                }
            } else {
                p.c.failures.aborted += 1;
            }
        }
        if self.p.state == State::Open {
            p.c.open -= 1;
        } else {
            p.c.in_flight -= 1;
            if self.p.reopen {
                churn::failed(&mut p.c.churn);
            }
        }
        p.open_in_process.fetch_sub(1, Ordering::Relaxed);
        goodbye
    }

    /// Connect, TLS and WebSocket handshakes within the connect timeout, holding an
    /// in-flight slot meanwhile, unless the teardown comes first.
    async fn setup(
        &mut self,
        sh: &Shared,
        stream: &mut Option<Stream>,
        done: bool,
        _slot: OwnedSemaphorePermit,
    ) -> Outcome {
        let Some(s) = stream.as_ref().map(Stream::tcp) else {
            return Outcome::Ended;
        };
        // Timed from `connect()`, as the epoll client times it.
        let mut step = Step::begin(&sh.setups, self.p.t_ns);
        if !done {
            let r = match within(sh, &step, s.ready(Interest::WRITABLE)).await {
                Err(Cut::TornDown) => return Outcome::TornDown,
                Err(Cut::Overdue) => {
                    sh.p.borrow_mut().c.failures.timed_out += 1;
                    return Outcome::Ended;
                }
                // Writable without an error or hang-up (mio's `is_write_closed`: EPOLLHUP,
                // or EPOLLERR) is a connect that succeeded: no SO_ERROR read then, a
                // syscall of ~15 a connection saved, as in the epoll client.
                Ok(Ok(ready)) if !ready.is_write_closed() => Ok(None),
                Ok(r) => r.and_then(|_| s.take_error()),
            };
            let e = match r {
                Ok(None) => None,
                Ok(Some(e)) | Err(e) => Some(e),
            };
            if let Some(e) = e {
                sh.p.borrow_mut().connect_failed(&e, self.p.g);
                return Outcome::Ended;
            }
        }
        let connected_ns = sys::monotonic_ns();
        sh.p.borrow_mut().connected(&self.p, connected_ns);
        // Each step (connect, TLS, upgrade) is timed from its own start, as in the epoll
        // client: a worker starved for 12-20 s at 1.73M saw its connects complete and
        // called the upgrade timed out in the same turn, timed from `connect()`. A reopen
        // (churn) keeps its `connect()` call's deadline, as there.
        self.restart_step(&mut step, connected_ns);
        // With TLS: when its handshake ended, where the WebSocket handshake's time starts
        // (so `tls_handshake` and `ws_handshake` add up, as in the epoll client).
        let mut tls_done_ns = None;
        if let Some((connector, name)) = &sh.tls
            && let Some(Stream::Tcp(s)) = stream.take()
        {
            *stream = {
                // Boxed: a TLS handshake's state (~1.9 KB, rustls's connection inline)
                // made every setup future that size, moved to the heap at each connect.
                let connect = Box::pin(connector.connect(name.clone(), s));
                let r = within(sh, &step, connect).await;
                let mut p = sh.p.borrow_mut();
                match r {
                    Err(Cut::TornDown) => return Outcome::TornDown,
                    Err(Cut::Overdue) => {
                        p.c.failures.tls += 1;
                        p.c.tls_errors.timeout += 1;
                        return Outcome::Ended;
                    }
                    Ok(Err(e)) => {
                        let first = p.c.tls_errors.total() == 0;
                        if let Some(f) = count_handshake_failure(&e, &mut p.c.tls_errors)
                            && first
                        {
                            // The cause in rustls's words, once (as the epoll client).
                            eprintln!(
                                "c1m client: shard {}: a TLS handshake failed: {f} (every failure is counted in tls_errors; only the first is printed)",
                                p.cfg.shard
                            );
                        }
                        p.c.failures.tls += 1;
                        return Outcome::Ended;
                    }
                    Ok(Ok(t)) => {
                        let done = sys::monotonic_ns();
                        p.tls_handshaken(&self.p, connected_ns, done);
                        tls_done_ns = Some(done);
                        self.restart_step(&mut step, done);
                        Some(Stream::tls(t, &mut p.c.tls_handshakes))
                    }
                }
            };
        }
        let Some(s) = stream.as_mut() else {
            return Outcome::Ended;
        };
        let now = tls_done_ns.unwrap_or_else(sys::monotonic_ns);
        if self.begin(&mut sh.p.borrow_mut(), s, now) == Flow::End {
            return Outcome::Ended;
        }
        self.handshake(sh, s, &step).await
    }

    /// The next setup step begins at `now` and is timed from there (a first open only).
    fn restart_step(&self, step: &mut Step<'_>, now: u64) {
        if !self.p.reopen {
            step.restart(now);
        }
    }

    /// Reads and writes within the setup's last step until the connection opens (the
    /// WebSocket upgrade's reply; raw modes are open at once), ends, or the step is cut.
    async fn handshake(&mut self, sh: &Shared, s: &mut Stream, step: &Step<'_>) -> Outcome {
        loop {
            if self.p.state == State::Open {
                return Outcome::Open;
            }
            let flow = if self.pending_out().is_some() || s.tls_pending() {
                let r = {
                    let out = self.pending_out().map_or(&[][..], |o| &o[..]);
                    within(sh, step, poll_fn(|cx| s.poll_send(cx, out))).await
                };
                r.map(|r| self.sent(&mut sh.p.borrow_mut(), r))
            } else {
                // Nothing awaits from the read to `input`: the shared buffer still holds
                // what the read put there.
                let r = within(sh, step, poll_fn(|cx| read(cx, sh, s))).await;
                r.map(|r| self.input(sh, s, r))
            };
            match flow {
                Ok(Flow::Go) => {}
                Ok(Flow::End) => return Outcome::Ended,
                Err(Cut::TornDown) => return Outcome::TornDown,
                Err(Cut::Overdue) => {
                    sh.p.borrow_mut().c.failures.timed_out += 1;
                    return Outcome::Ended;
                }
            }
        }
    }

    /// What a send of pending output did: its bytes counted and gone from the queue, or
    /// the connection ended by its error.
    fn sent(&mut self, p: &mut Proto, r: io::Result<usize>) -> Flow {
        match r {
            Ok(n) => {
                p.c.bytes_out += n as u64;
                if let Some(sp) = self.spill.as_mut() {
                    sp.out.advance(n);
                    if sp.out.is_empty() {
                        sp.out = BytesMut::new();
                    }
                }
                self.shrink();
                Flow::Go
            }
            Err(e) => {
                self.fail_or_close(p, &e);
                Flow::End
            }
        }
    }

    /// What a read into the shard's buffer brought: the end of the stream, an error, or
    /// `n` bytes for the mode's protocol.
    fn input(&mut self, sh: &Shared, s: &mut Stream, r: io::Result<usize>) -> Flow {
        let mut p = sh.p.borrow_mut();
        let n = match r {
            Ok(0) => {
                if self.p.state == State::Open {
                    p.count_peer_eof();
                } else {
                    p.c.failures.reset += 1;
                }
                return Flow::End;
            }
            Ok(n) => n,
            Err(e) => {
                self.fail_or_close(&mut p, &e);
                return Flow::End;
            }
        };
        p.c.bytes_in += n as u64;
        let mut buf = sh.buf.borrow_mut();
        match p.cfg.mode {
            Mode::Hold => Flow::Go,
            Mode::Echo if p.cfg.messages.is_some() => {
                self.raw_messages(&mut p, &buf[..n]);
                Flow::Go
            }
            Mode::Echo => match p.echo_input(&mut self.p, &buf[..n]) {
                EchoStep::Mismatch => {
                    p.c.closed.echo_mismatch += 1;
                    Flow::End
                }
                EchoStep::Partial => Flow::Go,
                EchoStep::RoundTrip => self.echo_next(&mut p, s),
            },
            Mode::Ws => self.ws(&mut p, &mut buf[..n], s),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;
    use crate::workload::tokio_engine::runtime;

    /// A connection's setup is one heap allocation, made at every connect and held by its
    /// slot until the connection opens: keep it small (a TLS handshake inline made it
    /// 2,400 B; boxed apart, 600 B with the connection it owns).
    #[test]
    fn a_setup_future_stays_small() {
        let rt = runtime().unwrap();
        rt.block_on(async {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let tcp = tokio::net::TcpStream::connect(l.local_addr().unwrap())
                .await
                .unwrap();
            let sh = Rc::new(Shared::new(super::super::tests::cfg(), Default::default()).unwrap());
            let permit = sh.slots.clone().try_acquire_owned().unwrap();
            let conn = Conn {
                p: ConnProto::new(0, 0),
                spill: None,
            };
            let size = size_of_val(&conn.setup_task(sh, Stream::Tcp(tcp), true, permit));
            eprintln!("setup future: {size} B");
            assert!(size <= 640, "the setup future grew to {size} B");
        });
    }
}
