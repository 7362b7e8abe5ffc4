//! A client connection's task: its setup (connect, TLS and WebSocket handshakes within
//! the connect timeout, holding an in-flight slot), its read loop with the clocks of an
//! open connection, and its end (teardown, churn, or its own). What it does with the
//! bytes it reads, and what it sends, is in `input`.

use std::{
    future::{Future, poll_fn},
    io,
    pin::{Pin, pin},
    rc::Rc,
    sync::atomic::Ordering,
    task::{Poll, ready},
    time::Duration,
};

use bytes::{Buf, BytesMut};
use tokio::{
    io::{Interest, ReadBuf},
    sync::OwnedSemaphorePermit,
    time::Sleep,
};

use super::{Shared, deadlines::Step, goodbye, instant_of, start, switch};
use crate::workload::{
    churn,
    config::Mode,
    engine::client::proto::{CLOSE_STALL_NS, ConnProto, EchoStep, State},
    stats::counters::Counters,
    sys,
    tokio_engine::{
        Spill,
        stream::{Stream, count_handshake_failure},
    },
};

/// A connection's own state, owned by its task.
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

/// What woke an open connection with clocks.
enum Woke<T> {
    Input(T),
    /// A phase switched the heartbeat or the messages: the clocks are rebuilt.
    Switched,
    Beat,
    Message,
}

/// `f`, unless the setup step (if any) is overdue first (None): the shard's sweep wakes
/// the task then (see `deadlines`).
async fn within<T>(step: Option<&Step<'_>>, f: impl Future<Output = T>) -> Option<T> {
    let Some(step) = step else {
        return Some(f.await);
    };
    let mut f = pin!(f);
    poll_fn(|cx| match f.as_mut().poll(cx) {
        Poll::Ready(v) => Poll::Ready(Some(v)),
        Poll::Pending if step.overdue_else_wait(cx.waker()) => Poll::Ready(None),
        Poll::Pending => Poll::Pending,
    })
    .await
}

impl Conn {
    /// The connection's task. A plain fn around an `async move` block, not an `async fn`:
    /// an async fn keeps its arguments twice in its future (rust-lang/rust#62958), and the
    /// future is most of an idle connection's memory (measured: 528 vs 432 bytes).
    /// `stream` is the one place the stream lives (TCP, then TLS over it; None once a TLS
    /// handshake failed): moved into the setup as well, it was kept three times (568 B).
    #[allow(clippy::manual_async_fn)] // deliberately not an async fn, see above
    pub(super) fn run(
        mut self,
        sh: Rc<Shared>,
        mut stream: Option<Stream>,
        done: bool,
        permit: OwnedSemaphorePermit,
    ) -> impl Future<Output = ()> {
        async move {
            // `--churn`: the connection's place on the shard's board (taken once open),
            // copied into the poll below only: every byte kept across an await is in every
            // idle task.
            let k = self.board_place(&sh);
            let end = {
                let mut teardown = pin!(sh.teardown.notified());
                let mut life = pin!(async {
                    // The setup (connect wait, timer, in-flight slot, TLS and WebSocket
                    // handshakes) lives on the heap until the connection opens: an idle
                    // task carries only the read loop.
                    if Box::pin(self.setup(&sh, &mut stream, done, permit)).await
                        && let Some(s) = stream.as_mut()
                    {
                        if sh.p.borrow().cfg.churn.is_some() && !sh.closing.get() {
                            sh.board.borrow_mut().join(self.board_place(&sh));
                        }
                        self.serve(&sh, s, None).await;
                    }
                });
                // Like `select!`, but `teardown` is polled only to register the task's waker
                // and once teardown began: each poll of a waiting `Notified` locks the
                // `Notify`, and a task's waker does not change.
                // `registered`: the switch count whose wake the task waits for (0: none
                // yet); a wake for a switch (`switch.rs`) is not the teardown, and a fresh
                // `Notified` waits for the next.
                let mut registered = 0u64;
                let (teardown, life, sh) = (&mut teardown, &mut life, &sh);
                poll_fn(move |cx| {
                    while (registered != sh.switches.get() || sh.closing.get())
                        && teardown.as_mut().poll(cx).is_ready()
                    {
                        if switch::torn_down(sh, teardown) {
                            return Poll::Ready(End::Teardown);
                        }
                    }
                    registered = sh.switches.get();
                    if sh.closing.get() {
                        return Poll::Ready(End::Teardown);
                    }
                    if life.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(End::Life);
                    }
                    // Picked by the churn pump? (If not, the board keeps the waker.)
                    if sh.board.borrow_mut().picked(k, cx.waker()) {
                        Poll::Ready(End::Churn)
                    } else {
                        Poll::Pending
                    }
                })
                .await
            };
            sh.board.borrow_mut().leave(self.board_place(&sh));
            if end == End::Churn {
                Box::pin(self.churned(&sh, stream)).await;
                return;
            }
            let torn_down = end == End::Teardown;
            let says_goodbye =
                torn_down && self.p.state == State::Open && sh.p.borrow().cfg.mode == Mode::Ws;
            let _slot = if says_goodbye {
                goodbye::goodbye_slot(&sh).await
            } else {
                None
            };
            if self.finish(&sh, stream.as_mut(), end)
                && let Some(s) = stream.as_mut()
            {
                let frames = self.closing_frames();
                Box::pin(goodbye::await_server_close(&sh, s, &mut self.p, frames)).await;
            }
            drop(stream);
            sh.live.set(sh.live.get() - 1);
            if sh.live.get() == 0 && sh.closing.get() {
                sh.gone.notify_one();
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
        sh.live.set(sh.live.get() - 1);
        if sh.live.get() == 0 && sh.closing.get() {
            sh.gone.notify_one();
        }
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
    /// in-flight slot meanwhile. True: the connection is open; false: it ended (counted).
    async fn setup(
        &mut self,
        sh: &Shared,
        stream: &mut Option<Stream>,
        done: bool,
        _slot: OwnedSemaphorePermit,
    ) -> bool {
        let Some(s) = stream.as_ref().map(Stream::tcp) else {
            return false;
        };
        // Timed from `connect()`, as the epoll client times it.
        let mut step = Step::begin(&sh.setups, self.p.t_ns);
        if !done {
            let r = match within(Some(&step), s.ready(Interest::WRITABLE)).await {
                None => {
                    sh.p.borrow_mut().c.failures.timed_out += 1;
                    return false;
                }
                // Writable without an error or hang-up (mio's `is_write_closed`: EPOLLHUP,
                // or EPOLLERR) is a connect that succeeded: no SO_ERROR read then, a
                // syscall of ~15 a connection saved, as in the epoll client.
                Some(Ok(ready)) if !ready.is_write_closed() => Ok(None),
                Some(r) => r.and_then(|_| s.take_error()),
            };
            let e = match r {
                Ok(None) => None,
                Ok(Some(e)) | Err(e) => Some(e),
            };
            if let Some(e) = e {
                sh.p.borrow_mut().connect_failed(&e, self.p.g);
                return false;
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
                let r = within(Some(&step), connect).await;
                let mut p = sh.p.borrow_mut();
                match r {
                    None => {
                        p.c.failures.tls += 1;
                        p.c.tls_errors.timeout += 1;
                        return false;
                    }
                    Some(Err(e)) => {
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
                        return false;
                    }
                    Some(Ok(t)) => {
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
            return false;
        };
        let now = tls_done_ns.unwrap_or_else(sys::monotonic_ns);
        if self.begin(&mut sh.p.borrow_mut(), s, now) == Flow::End {
            return false;
        }
        self.serve(sh, s, Some(&step)).await
    }

    /// The next setup step begins at `now` and is timed from there (a first open only).
    fn restart_step(&self, step: &mut Step<'_>, now: u64) {
        if !self.p.reopen {
            step.restart(now);
        }
    }

    /// Reads and writes until the connection ends (false), or, within a setup step, until
    /// it opens (true) or the step is overdue (false, counted as timed out).
    async fn serve(&mut self, sh: &Shared, s: &mut Stream, step: Option<&Step<'_>>) -> bool {
        let mode = sh.p.borrow().cfg.mode;
        // `--heartbeat` and `--message-rate`, once open: the connection's clocks, on the
        // heap (an idle task without either carries 8 bytes for them), rebuilt when a
        // phase switches them (`switched` is the switch count they were built at).
        let open = step.is_none();
        let mut switched = sh.switches.get();
        let mut clocks = if open {
            self.clocks(sh, mode, sys::monotonic_ns())
        } else {
            None
        };
        loop {
            if !open && self.p.state == State::Open {
                return true;
            }
            if self.pending_out().is_some() || s.tls_pending() {
                // Backpressure: nothing is read while output (ours, or records rustls
                // sealed) waits for the socket.
                let r = {
                    let out = self.pending_out().map_or(&[][..], |o| &o[..]);
                    within(step, poll_fn(|cx| s.poll_send(cx, out))).await
                };
                let mut p = sh.p.borrow_mut();
                match r {
                    None => {
                        p.c.failures.timed_out += 1;
                        return false;
                    }
                    Some(Ok(n)) => {
                        p.c.bytes_out += n as u64;
                        if let Some(sp) = self.spill.as_mut() {
                            sp.out.advance(n);
                            if sp.out.is_empty() {
                                sp.out = BytesMut::new();
                            }
                        }
                        self.shrink();
                    }
                    Some(Err(e)) => {
                        self.fail_or_close(&mut p, &e);
                        return false;
                    }
                }
                continue;
            }
            let read = poll_fn(|cx| {
                let mut buf = sh.buf.borrow_mut();
                let mut rb = ReadBuf::new(&mut buf);
                ready!(s.poll_read(cx, &mut rb))?;
                Poll::Ready(Ok::<_, io::Error>(rb.filled().len()))
            });
            let r = match clocks.as_deref_mut() {
                None if !open => within(step, read).await,
                c => {
                    // Input first, then a switch, then the clocks (as a biased `select!`,
                    // in less room). An open connection: no connect timer.
                    let woke = {
                        let mut input = pin!(read);
                        let mut c = c;
                        poll_fn(|cx| {
                            if let Poll::Ready(v) = input.as_mut().poll(cx) {
                                return Poll::Ready(Woke::Input(v));
                            }
                            if sh.switches.get() != switched {
                                return Poll::Ready(Woke::Switched);
                            }
                            let Some(c) = c.as_deref_mut() else {
                                return Poll::Pending;
                            };
                            if let Some(b) = c.beat.as_mut()
                                && b.as_mut().poll(cx).is_ready()
                            {
                                return Poll::Ready(Woke::Beat);
                            }
                            if let Some(m) = c.msg.as_mut()
                                && m.as_mut().poll(cx).is_ready()
                            {
                                return Poll::Ready(Woke::Message);
                            }
                            Poll::Pending
                        })
                        .await
                    };
                    let now = sys::monotonic_ns();
                    match woke {
                        Woke::Input(v) => Some(v),
                        Woke::Switched => {
                            switched = sh.switches.get();
                            clocks = self.clocks(sh, mode, now);
                            continue;
                        }
                        Woke::Beat => {
                            let Some(c) = clocks.as_deref_mut() else {
                                continue;
                            };
                            if self.beat(&mut sh.p.borrow_mut(), s, now) == Flow::End {
                                return false;
                            }
                            c.beat = self.next_beat(sh, now + 1);
                            continue;
                        }
                        Woke::Message => {
                            let Some(c) = clocks.as_deref_mut() else {
                                continue;
                            };
                            let mut p = sh.p.borrow_mut();
                            if self.messages(&mut p, s, &mut c.msg_at, now) == Flow::End {
                                return false;
                            }
                            match c.msg.as_mut() {
                                Some(t) if !p.draining => t.as_mut().reset(instant_of(c.msg_at)),
                                _ => c.msg = None,
                            }
                            continue;
                        }
                    }
                }
            };
            // Nothing awaits from here to the next turn: the shared buffer still holds
            // what this read put there.
            let mut p = sh.p.borrow_mut();
            let n = match r {
                None => {
                    p.c.failures.timed_out += 1;
                    return false;
                }
                Some(Ok(0)) => {
                    if self.p.state == State::Open {
                        p.count_peer_eof();
                    } else {
                        p.c.failures.reset += 1;
                    }
                    return false;
                }
                Some(Ok(n)) => n,
                Some(Err(e)) => {
                    self.fail_or_close(&mut p, &e);
                    return false;
                }
            };
            p.c.bytes_in += n as u64;
            let mut buf = sh.buf.borrow_mut();
            let flow = match mode {
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
            };
            if flow == Flow::End {
                return false;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;
    use crate::workload::tokio_engine::runtime;

    /// A connection's setup is one heap allocation, made and moved at every connect:
    /// keep it small (a TLS handshake inline made it 2,400 B; boxed apart, 432 B).
    #[test]
    fn a_setup_future_stays_small() {
        let rt = runtime().unwrap();
        rt.block_on(async {
            let sh = Shared::new(super::super::tests::cfg(), Default::default()).unwrap();
            let permit = sh.slots.clone().try_acquire_owned().unwrap();
            let mut conn = Conn {
                p: ConnProto::new(0, 0),
                spill: None,
            };
            let mut stream = None;
            let size = size_of_val(&conn.setup(&sh, &mut stream, true, permit));
            eprintln!("setup future: {size} B");
            assert!(size <= 512, "the setup future grew to {size} B");
        });
    }
}
