//! Teardown by the server (clients on other hosts), for both server engines: each
//! connection past its handshake gets the goodbye (close frame on a WebSocket,
//! close_notify under TLS) and the FIN in one segment, and stays readable until the peer
//! ends its side, [`GOODBYE_WINDOW`] at a time; the rest close now. A teardown whose
//! peers stop answering for [`CLOSE_STALL_NS`] closes what is left.

use super::{
    GOODBYE_WINDOW,
    proto::{WsState, going_away},
    state::{ServerIo, ServerShardState},
    warnings::goodbye_unanswered,
};
use crate::workload::{
    engine::client::proto::{CLOSE_STALL_NS, CloseWatch},
    heartbeat, sys,
};

impl<X> ServerShardState<X> {
    /// The supervisor's `Close`: the goodbyes begin, oldest connection first.
    pub(super) fn say_goodbye(&mut self, io: &mut impl ServerIo<X>) {
        self.to_goodbye.clear();
        for tok in self.conns.tokens_from(0, usize::MAX).0 {
            let Some(conn) = self.conns.get_mut(tok) else {
                continue;
            };
            match conn.ws {
                WsState::Closing => {}
                WsState::Handshake => self.close_local(io, tok),
                _ if io.tls_handshaking(conn) => self.close_local(io, tok),
                _ => self.to_goodbye.push(tok),
            }
        }
        self.to_goodbye.reverse();
        let left = self.goodbyes_waiting + self.to_goodbye.len() as u64;
        self.goodbye_watch = CloseWatch::new(left, sys::monotonic_ns());
        if let Some(job) = self.push.take() {
            self.push_done = Some(job.id);
        }
        self.goodbye_more(io);
    }

    /// Says goodbye while fewer than [`GOODBYE_WINDOW`] wait (to all of the rest, closing
    /// at once, once the teardown stalled). Called after every batch of I/O: a goodbye
    /// that ended in it lets the next one go.
    #[inline]
    pub(crate) fn goodbye_more(&mut self, io: &mut impl ServerIo<X>) {
        while !self.goodbye_waits || self.goodbyes_waiting < GOODBYE_WINDOW {
            let Some(tok) = self.to_goodbye.pop() else {
                return;
            };
            self.goodbye(io, tok);
        }
    }

    fn goodbye(&mut self, io: &mut impl ServerIo<X>, tok: u64) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        heartbeat::ended(&mut self.c.heartbeat, &mut conn.ping_ns);
        let open = conn.ws == WsState::Open;
        if open {
            self.c.ws_open -= 1;
        }
        let bye = going_away();
        let last: &[u8] = if open { &bye } else { &[] };
        io.send_last(conn, last, &mut self.c.bytes_out);
        conn.ws = WsState::Closing;
        let waits = self.goodbye_waits && io.half_close(tok, conn);
        if waits {
            self.goodbyes_waiting += 1;
        } else {
            self.close_local(io, tok);
        }
    }

    /// A connection the server said goodbye to ended (its peer's end of the stream, or
    /// an error).
    pub(crate) fn goodbye_end(&mut self, io: &mut impl ServerIo<X>, tok: u64) {
        if self.conns.get_mut(tok).is_some() {
            self.goodbyes_waiting = self.goodbyes_waiting.saturating_sub(1);
            self.close_local(io, tok);
        }
    }

    /// Closes the goodbyes still waiting, and the rest right after theirs, once no peer
    /// ended its side for [`CLOSE_STALL_NS`] (peers gone, or not reading).
    pub(super) fn goodbyes_stalled(&mut self, io: &mut impl ServerIo<X>) {
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
                && self.close(io, tok)
            {
                self.c.closed.goodbye_unanswered += 1;
            }
        }
        self.goodbyes_waiting = 0;
        self.goodbye_more(io);
    }
}
