//! Teardown on the io_uring server shard, as the epoll shard's: a server-side goodbye
//! (close frame and FIN in one segment, then the peer's end of the stream awaited,
//! [`GOODBYE_WINDOW`] at a time), its stall, and the close of everything at `Stop`.

use std::os::fd::AsFd;

use super::{Shard, write_before_close};
use crate::workload::{
    engine::{
        client::proto::{CLOSE_STALL_NS, CloseWatch},
        server::{
            GOODBYE_WINDOW,
            proto::{WsState, going_away},
            warnings::goodbye_unanswered,
        },
    },
    heartbeat, sys,
};

impl Shard {
    /// Teardown by the server: each connection past its handshake gets the goodbye and
    /// stays readable until its peer ends its side; the rest close now.
    pub(super) fn say_goodbye(&mut self) {
        self.to_goodbye.clear();
        for tok in self.conns.tokens_from(0, usize::MAX).0 {
            let Some(conn) = self.conns.get_mut(tok) else {
                continue;
            };
            match conn.ws {
                WsState::Closing => {}
                WsState::Handshake => self.close_local(tok),
                _ => self.to_goodbye.push(tok),
            }
        }
        self.to_goodbye.reverse();
        let left = self.goodbyes_waiting + self.to_goodbye.len() as u64;
        self.goodbye_watch = CloseWatch::new(left, sys::monotonic_ns());
        if let Some(job) = self.push.take() {
            self.push_done = Some(job.id);
        }
        self.goodbye_more();
    }

    /// Says goodbye while fewer than [`GOODBYE_WINDOW`] wait (to all of the rest, closing
    /// at once, once the teardown stalled).
    pub(super) fn goodbye_more(&mut self) {
        while !self.goodbye_waits || self.goodbyes_waiting < GOODBYE_WINDOW {
            let Some(tok) = self.to_goodbye.pop() else {
                return;
            };
            self.goodbye(tok);
        }
    }

    fn goodbye(&mut self, tok: u64) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        heartbeat::ended(&mut self.c.heartbeat, &mut conn.ping_ns);
        if conn.ws == WsState::Open {
            self.c.ws_open -= 1;
            write_before_close(conn, &going_away(), &mut self.c.bytes_out);
        }
        conn.ws = WsState::Closing;
        // The receive stays armed: the peer's close reply is read and dropped, its end of
        // the stream ends the connection (`goodbye_end`).
        let waits = self.goodbye_waits && sys::shutdown_write(conn.fd.as_fd()).is_ok();
        if waits {
            self.goodbyes_waiting += 1;
        } else {
            self.close_local(tok);
        }
    }

    /// A connection the server said goodbye to ended (its peer's end of the stream, or
    /// an error).
    pub(super) fn goodbye_end(&mut self, tok: u64) {
        if self.conns.get_mut(tok).is_some() {
            self.goodbyes_waiting = self.goodbyes_waiting.saturating_sub(1);
            self.close_local(tok);
        }
    }

    /// Closes the goodbyes still waiting once no peer ended its side for
    /// [`CLOSE_STALL_NS`].
    pub(super) fn goodbyes_stalled(&mut self) {
        let left = self.goodbyes_waiting + self.to_goodbye.len() as u64;
        if !self.goodbye_waits || !self.goodbye_watch.stalled(left, sys::monotonic_ns()) {
            return;
        }
        self.warn(goodbye_unanswered(self.goodbyes_waiting, CLOSE_STALL_NS));
        self.goodbye_waits = false;
        for tok in self.conns.tokens_from(0, usize::MAX).0 {
            if self
                .conns
                .get_mut(tok)
                .is_some_and(|c| c.ws == WsState::Closing)
                && self.close(tok)
            {
                self.c.closed.goodbye_unanswered += 1;
            }
        }
        self.goodbyes_waiting = 0;
        self.goodbye_more();
    }

    /// Closes a connection this end ended.
    pub(super) fn close_local(&mut self, tok: u64) {
        if self.close(tok) {
            self.c.closed.local_close += 1;
        }
    }

    /// At `Stop`: every connection closed, a WebSocket's close frame first (best effort).
    /// Their operations end in the ring's quiesce that follows.
    pub(super) fn close_all(&mut self) {
        let toks = self.conns.tokens_from(0, usize::MAX).0;
        let n = toks.len() as u64;
        let goodbye = going_away();
        for tok in toks {
            let Some(mut conn) = self.conns.remove(tok) else {
                continue;
            };
            heartbeat::ended(&mut self.c.heartbeat, &mut conn.ping_ns);
            if conn.ws == WsState::Open {
                self.c.ws_open -= 1;
                write_before_close(&conn, &goodbye, &mut self.c.bytes_out);
            }
            self.forget(tok, &mut conn);
        }
        self.c.open -= n;
        self.c.closed.local_close += n;
        self.open_in_process
            .fetch_sub(n, std::sync::atomic::Ordering::Relaxed);
        if let Some(job) = self.push.take() {
            self.push_done = Some(job.id);
        }
    }
}
