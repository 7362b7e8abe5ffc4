//! The server's teardown (`Close`, clients on other hosts), as the epoll server does it:
//! each connection sends its goodbye (close frame; close_notify under TLS) with the FIN
//! and stays readable until the peer ends its side (RFC 6455 §7.1.1: the server closes
//! after the client), [`GOODBYE_WINDOW`] a shard at a time. Closing at once left every
//! client's answer to meet an orphaned socket: a reset per connection over a bridge.
//! A peer that does not end its side within [`CLOSE_STALL_NS`] is closed unanswered
//! (counted), and the connections still to go close right after their goodbye.

use std::{io, os::fd::AsFd, pin::pin, time::Duration};

use super::{
    Shard,
    connection::{Conn, Goodbye},
};
use crate::workload::{
    engine::{
        client::proto::CLOSE_STALL_NS,
        server::{
            GOODBYE_WINDOW,
            proto::{self, WsState},
            warnings::goodbye_unanswered,
        },
    },
    sys,
};

/// The permits of a shard's goodbye window.
pub(super) fn window() -> tokio::sync::Semaphore {
    tokio::sync::Semaphore::new(GOODBYE_WINDOW as usize)
}

impl Shard {
    /// Returns once the shard stops (`Stop`), whatever woke its tasks meanwhile.
    async fn stopped(&self) {
        loop {
            let mut woken = pin!(self.wake.notified());
            woken.as_mut().enable();
            if self.stopping.get() {
                return;
            }
            woken.await;
        }
    }

    /// A goodbye went unanswered: the rest close at once, said once per shard.
    fn goodbyes_stalled(&self) {
        if !self.goodbye_stalled.replace(true) {
            let waiting = GOODBYE_WINDOW - self.goodbyes.available_permits() as u64;
            self.warn(goodbye_unanswered(waiting, CLOSE_STALL_NS));
        }
    }
}

impl Conn {
    /// Says goodbye and waits for the peer's end of the stream.
    pub(super) async fn goodbye(&mut self, sh: &Shard) -> Goodbye {
        if self.ws == WsState::Handshake || sh.goodbye_stalled.get() {
            return Goodbye::CloseNow;
        }
        let _permit = tokio::select! {
            p = sh.goodbyes.acquire() => p,
            () = sh.stopped() => return Goodbye::CloseNow,
        };
        if sh.goodbye_stalled.get() {
            return Goodbye::CloseNow;
        }
        let open_ws = self.ws == WsState::Open;
        let bye = proto::going_away();
        {
            let mut c = sh.c.borrow_mut();
            if open_ws {
                c.ws_open -= 1;
            }
            // Behind queued output the goodbye is dropped with it, as a close would.
            if (open_ws || self.stream.is_tls())
                && !self.has_out()
                && let Ok(n) = self
                    .stream
                    .write_last(if open_ws { &bye } else { &[] }, true)
            {
                c.bytes_out += n as u64;
            }
        }
        self.ws = WsState::Closing;
        self.spill = None;
        if sys::shutdown_write(self.stream.tcp().as_fd()).is_err() {
            return Goodbye::Answered;
        }
        let mut stall = pin!(tokio::time::sleep(Duration::from_nanos(CLOSE_STALL_NS)));
        loop {
            tokio::select! {
                r = self.stream.tcp().readable() => {
                    if r.is_err() || self.drained(sh) {
                        return Goodbye::Answered;
                    }
                }
                () = &mut stall => {
                    sh.goodbyes_stalled();
                    return Goodbye::Unanswered;
                }
                () = sh.stopped() => return Goodbye::Answered,
            }
        }
    }

    /// Reads and drops the peer's answer (ciphertext under TLS: nothing in it is
    /// needed); true at its end of the stream (or a failed socket).
    fn drained(&self, sh: &Shard) -> bool {
        let mut buf = sh.buf.borrow_mut();
        loop {
            match self.stream.tcp().try_read(&mut buf) {
                Ok(0) => return true,
                Ok(n) => sh.c.borrow_mut().bytes_in += n as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(_) => return true,
            }
        }
    }
}
