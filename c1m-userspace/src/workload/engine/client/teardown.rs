//! The epoll client shard's teardown: every open WebSocket connection sends its close
//! frame, `--in-flight` at a time, and waits in [`State::Closing`] for its server to
//! close first (RFC 6455 §7.1.1), reading what the server wrote before it read our close
//! meanwhile; a teardown that stops moving for [`super::proto::CLOSE_STALL_NS`] closes
//! the rest at once.

use std::{collections::VecDeque, os::fd::AsFd, sync::atomic::Ordering};

use super::{
    Shard,
    proto::{CloseWatch, State},
};
use crate::workload::{
    config::Mode,
    engine::{Sent, joined, keep_input, read_len, send_sealed, shrink, take_input, tls_read},
    sys,
};

impl Shard {
    /// Teardown: every open WebSocket connection sends its close frame and waits in
    /// [`State::Closing`] for the server to close, `--in-flight` at a time
    /// ([`Shard::close_more`]); everything else is closed now.
    pub(super) fn close_all(&mut self) {
        self.closing = true;
        self.churning = None;
        self.open_order = VecDeque::new();
        self.pending.clear();
        let ws = self.p.cfg.mode == Mode::Ws;
        self.to_close.clear();
        let (toks, _) = self.conns.tokens_from(0, self.conns.len());
        for tok in toks {
            let Some(conn) = self.conns.get_mut(tok) else {
                continue;
            };
            match conn.p.state {
                State::Open if ws => self.to_close.push(tok),
                State::Open => {
                    self.p.c.closed.local_close += 1;
                    self.close_open(tok);
                }
                // Said goodbye already (`Stop` after `Close`).
                State::Closing => {}
                State::Connecting | State::Handshake => {
                    self.p.c.failures.aborted += 1;
                    self.drop_conn(tok);
                }
            }
        }
        // Popped from the end: oldest connection first.
        self.to_close.reverse();
        self.close_watch = CloseWatch::new(self.conns.len() as u64, sys::monotonic_ns());
        self.close_more();
    }

    /// Sends close frames while fewer than `--in-flight` connections wait for their server
    /// (all of the rest once the teardown stalled).
    pub(super) fn close_more(&mut self) {
        while !self.close_waits || self.closes_waiting < self.p.cfg.in_flight {
            let Some(tok) = self.to_close.pop() else {
                return;
            };
            self.say_goodbye(tok);
        }
    }

    /// Our close frame on an open WebSocket connection, then [`State::Closing`] (or a
    /// close at once, when the frame cannot go out or the teardown stalled).
    fn say_goodbye(&mut self, tok: u64) {
        // Gone meanwhile (the server closed it first, and that was counted), or already
        // waiting.
        if !self
            .conns
            .get_mut(tok)
            .is_some_and(|c| c.p.state == State::Open)
        {
            return;
        }
        self.p.c.closed.local_close += 1;
        let sent = self.send_close_frame(tok);
        match self.conns.get_mut(tok) {
            Some(conn) if sent && self.close_waits => {
                self.p.conn_ends(&mut conn.p);
                conn.p.state = State::Closing;
                self.p.c.open -= 1;
                self.closes_waiting += 1;
            }
            // Output stuck behind a peer that does not read: no goodbye to wait for.
            _ => self.close_open(tok),
        }
    }

    /// Writes our close frame on `tok`: true if it all went out (then the server's close
    /// is worth waiting for).
    pub(super) fn send_close_frame(&mut self, tok: u64) -> bool {
        let Some(conn) = self.conns.get_mut(tok) else {
            return false;
        };
        let mut written = 0;
        let sent = send_sealed(
            conn.fd.as_fd(),
            conn.tls.as_deref_mut(),
            &mut self.wire,
            &mut conn.spill,
            self.p.close_frame(),
            &mut written,
        );
        self.p.c.bytes_out += written;
        matches!(sent, Ok(Sent::All))
    }

    /// A connection in [`State::Closing`] is readable: the server's messages written
    /// before it read our close frame (counted: under TLS their records are opened as
    /// before the close, so the server's `sent` is our `received` over wss too), then
    /// its close reply and its FIN (or an error) end it.
    pub(super) fn closing_event(&mut self, tok: u64) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        let frames = self.p.cfg.mode == Mode::Ws;
        let len = read_len(conn.tls.is_some());
        loop {
            let n = match sys::read(conn.fd.as_fd(), &mut self.buf[..len]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if sys::would_block(&e) => return,
                Err(_) => break,
            };
            self.p.c.bytes_in += n as u64;
            let n = match conn.tls.as_deref_mut() {
                None => n,
                Some(t) => {
                    // Nothing goes out any more: what opening asks to send (an alert)
                    // is dropped with the connection.
                    self.wire.clear();
                    let opened = tls_read(
                        t,
                        &mut conn.spill,
                        &mut self.buf,
                        n,
                        &mut self.plain,
                        &mut self.wire,
                    );
                    match opened {
                        Ok((m, _)) => m,
                        // A record that does not open: nothing after it can be counted.
                        Err(_) => break,
                    }
                }
            };
            if frames && n > 0 {
                let mut spill = conn.spill.take();
                let (mut inbuf, mut frag) = take_input(&mut spill);
                let data = joined(&mut inbuf, &mut self.buf[..n]);
                let len = data.len();
                let used = self.p.closing_input(&mut conn.p, data, &mut frag);
                if used < len || frag.is_some() {
                    keep_input(&mut spill, inbuf, &self.buf[..n], used, frag);
                }
                shrink(&mut spill);
                conn.spill = spill;
            }
        }
        self.end(tok);
    }

    /// Closes the teardown's stragglers once no connection has finished its close for
    /// [`proto::CLOSE_STALL_NS`].
    pub(super) fn close_stalled(&mut self) {
        let left = self.conns.len() as u64;
        if !self.close_watch.stalled(left, sys::monotonic_ns()) {
            return;
        }
        self.p.warn_close_unanswered(self.closes_waiting);
        self.close_waits = false;
        let (toks, _) = self.conns.tokens_from(0, self.conns.len());
        for tok in toks {
            if self
                .conns
                .get_mut(tok)
                .is_some_and(|c| c.p.state == State::Closing)
            {
                self.end(tok);
            }
        }
    }

    /// Closes the socket of a [`State::Closing`] connection (already out of `open`).
    pub(super) fn end(&mut self, tok: u64) {
        if let Some(conn) = self.conns.remove(tok) {
            if conn.p.churned {
                self.p.c.churn.closing -= 1;
            }
            self.closes_waiting -= 1;
            self.p.open_in_process.fetch_sub(1, Ordering::Relaxed);
        }
    }
}
