//! A client connection's socket events on the epoll shard: its connect done (then TLS, or
//! the upgrade request), its input (echo replies checked, WebSocket frames through
//! [`Proto`](super::proto::Proto)), and what a failed read or write ends.

use std::os::fd::AsFd;

use super::{
    Shard,
    proto::{EchoStep, State},
    send_on,
};
use crate::workload::{
    churn::ChurnOrder,
    config::Mode,
    engine::{
        closed_by, failure_of, flush, interest, joined, keep_input, read_len, rearm, send,
        send_sealed, shrink, take_input, tls_read,
    },
    sockopt,
    sys::{self, EPOLLERR, EPOLLHUP, EPOLLIN, EPOLLOUT, Epoll},
    tls::session::TlsConn,
};

impl Shard {
    pub(super) fn on_connected(&mut self, ep: &Epoll, tok: u64) {
        let now = sys::monotonic_ns();
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        self.p.connected(&conn.p, now);
        let fd = conn.fd.as_fd();
        if let Err(e) = ep.modify(fd, EPOLLIN, tok) {
            failure_of(&e, &mut self.p.c.failures);
            self.drop_conn(tok);
            return;
        }
        if let Some((cfg, name)) = &self.tls {
            // TLS first: the ClientHello now, the rest when the handshake is done
            // ([`Shard::tls_done`]).
            conn.p.state = State::Handshake;
            // The connect's latency is recorded: `t_ns` now holds where the TLS handshake
            // began, for [`Proto::tls_handshaken`] (a reopen keeps its `connect()` call's).
            if !conn.p.reopen {
                conn.p.t_ns = now;
                self.pending.push_back((tok, now));
            }
            self.wire.clear();
            let started = TlsConn::client(cfg, name.clone())
                .map_err(Into::into)
                .and_then(|mut t| t.start(&mut self.wire).map(|()| t));
            match started {
                Ok(t) => conn.tls = Some(Box::new(t)),
                Err(e) => {
                    e.count(&mut self.p.c.tls_errors);
                    self.p.c.failures.tls += 1;
                    self.drop_conn(tok);
                    return;
                }
            }
            let mut sent = 0;
            let r = send(fd, &mut conn.spill, &self.wire, &mut sent);
            self.p.c.bytes_out += sent;
            if let Err(e) = r {
                failure_of(&e, &mut self.p.c.failures);
                self.drop_conn(tok);
            }
            return;
        }
        if self.p.cfg.mode == Mode::Ws {
            let req = self.p.handshake_request(&mut conn.p, now);
            if !conn.p.reopen {
                self.pending.push_back((tok, now));
            }
            let mut sent = 0;
            let r = send(fd, &mut conn.spill, req, &mut sent);
            self.p.c.bytes_out += sent;
            if let Err(e) = r {
                failure_of(&e, &mut self.p.c.failures);
                self.drop_conn(tok);
            }
            return;
        }
        self.opened(tok, now);
        self.echo_next(ep, tok);
    }

    /// The TLS handshake of a raw (hold/echo) connection finished: it is open. (A
    /// WebSocket's upgrade leaves with the handshake's last flight, in `input`.)
    fn tls_done(&mut self, ep: &Epoll, tok: u64) {
        let now = sys::monotonic_ns();
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        self.p.tls_handshaken(&conn.p, conn.p.t_ns, now);
        self.opened(tok, now);
        self.echo_next(ep, tok);
    }

    fn opened(&mut self, tok: u64, now: u64) {
        if let Some(conn) = self.conns.get_mut(tok) {
            self.p.opened(&mut conn.p, now);
            if self
                .p
                .cfg
                .churn
                .is_some_and(|c| c.order == ChurnOrder::Oldest)
            {
                self.open_order.push_back(tok);
            }
        }
    }

    /// Sends the next echo request on `tok` if more are wanted.
    fn echo_next(&mut self, ep: &Epoll, tok: u64) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        let Some(bytes) = self.p.echo_request(&mut conn.p) else {
            return;
        };
        let mut written = 0;
        let r = send_on(ep, tok, conn, &mut self.wire, bytes, &mut written);
        self.sent(tok, written, r);
    }

    pub(super) fn conn_event(&mut self, ep: &Epoll, tok: u64, ev: u32) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        let fd = conn.fd.as_fd();
        if conn.p.state == State::Closing {
            self.closing_event(tok);
            return;
        }
        if conn.p.state == State::Connecting {
            // EPOLLOUT without an error or hang-up is a connect that succeeded (tcp_poll
            // reports no EPOLLOUT in SYN_SENT, and EPOLLERR with any pending error): no
            // SO_ERROR read then, a syscall of ~17 a connection saved.
            if ev & EPOLLOUT != 0 && ev & (EPOLLERR | EPOLLHUP) == 0 {
                self.on_connected(ep, tok);
                return;
            }
            match sockopt::take_error(fd) {
                Ok(None) if ev & (EPOLLOUT | EPOLLIN) != 0 && ev & EPOLLERR == 0 => {
                    self.on_connected(ep, tok)
                }
                Ok(None) => {}
                Ok(Some(e)) | Err(e) => {
                    let g = conn.p.g;
                    self.p.connect_failed(&e, g);
                    self.drop_conn(tok);
                }
            }
            return;
        }
        let before = interest(&conn.spill);
        if before == EPOLLOUT {
            let r = flush(fd, &mut conn.spill, &mut self.p.c.bytes_out)
                .and_then(|_| rearm(ep, &conn.fd, tok, before, &conn.spill));
            if let Err(e) = r {
                self.fail_or_close(tok, &e);
            }
            return;
        }
        if ev & (EPOLLIN | EPOLLHUP | EPOLLERR) == 0 {
            return;
        }
        let n = match sys::read(fd, &mut self.buf[..read_len(conn.tls.is_some())]) {
            Ok(0) if conn.tls_handshaking() => {
                self.p.c.failures.tls += 1;
                self.p.c.tls_errors.truncated += 1;
                self.drop_conn(tok);
                return;
            }
            Ok(0) => {
                if conn.p.state == State::Open {
                    self.p.count_peer_eof();
                    self.close_open(tok);
                } else {
                    self.p.c.failures.reset += 1;
                    self.drop_conn(tok);
                }
                return;
            }
            Ok(n) => n,
            Err(e) if sys::would_block(&e) => return,
            Err(e) => {
                self.fail_or_close(tok, &e);
                return;
            }
        };
        self.p.c.bytes_in += n as u64;
        let n = match conn.tls.as_deref_mut() {
            None => n,
            Some(t) => {
                self.wire.clear();
                let mut r = tls_read(
                    t,
                    &mut conn.spill,
                    &mut self.buf,
                    n,
                    &mut self.plain,
                    &mut self.wire,
                );
                // The handshake's last flight (our Finished) and the upgrade request leave
                // in one segment. Sent apart, the Finished waited alone for the server's
                // delayed ACK (the server has nothing to say to it), and on a loaded
                // server past the tail-loss probe timeout: 463,164 spurious probes in the
                // 1M wss run, 3,414 at 20,000, all in setup; plain ws has none.
                let upgrade = matches!(&r, Ok((_, i)) if i.handshake_done.is_some())
                    && self.p.cfg.mode == Mode::Ws;
                if upgrade {
                    let now = sys::monotonic_ns();
                    self.p.tls_handshaken(&conn.p, conn.p.t_ns, now);
                    let req = self.p.handshake_request(&mut conn.p, now);
                    if let Err(e) = t.seal(req, &mut self.wire) {
                        r = Err(e);
                    }
                    if !conn.p.reopen {
                        self.pending.push_back((tok, now));
                    }
                }
                let sent = if self.wire.is_empty() {
                    Ok(())
                } else {
                    send(fd, &mut conn.spill, &self.wire, &mut self.p.c.bytes_out).map(drop)
                };
                match (r, sent) {
                    (Err(e), _) => {
                        if self.p.c.tls_errors.total() == 0 {
                            // The cause in rustls's words, once: the counts say how many.
                            eprintln!(
                                "c1m client: shard {}: a TLS handshake failed: {e} (every failure is counted in tls_errors; only the first is printed)",
                                self.p.cfg.shard
                            );
                        }
                        e.count(&mut self.p.c.tls_errors);
                        if conn.p.state == State::Open {
                            self.p.c.closed.error += 1;
                            self.close_open(tok);
                        } else {
                            self.p.c.failures.tls += 1;
                            self.drop_conn(tok);
                        }
                        return;
                    }
                    (Ok(_), Err(e)) => {
                        self.fail_or_close(tok, &e);
                        return;
                    }
                    (Ok((m, input)), Ok(())) => {
                        input.count(&mut self.p.c.tls_handshakes);
                        if input.handshake_done.is_some() && !upgrade {
                            self.tls_done(ep, tok);
                        }
                        if m == 0 {
                            if let Some(conn) = self.conns.get_mut(tok)
                                && let Err(e) = rearm(ep, &conn.fd, tok, before, &conn.spill)
                            {
                                self.fail_or_close(tok, &e);
                            }
                            return;
                        }
                        m
                    }
                }
            }
        };
        match self.p.cfg.mode {
            Mode::Hold => {}
            Mode::Echo => self.echo_bytes(ep, tok, n),
            Mode::Ws => self.ws_bytes(ep, tok, n),
        }
    }

    fn fail_or_close(&mut self, tok: u64, e: &std::io::Error) {
        match self.conns.get_mut(tok).map(|c| c.p.state) {
            Some(State::Open) => {
                closed_by(e, &mut self.p.c.closed);
                self.close_open(tok);
            }
            Some(_) => {
                failure_of(e, &mut self.p.c.failures);
                self.drop_conn(tok);
            }
            None => {}
        }
    }

    /// Raw TCP echo: checks the reply against the payload it must equal, piece by piece.
    fn echo_bytes(&mut self, ep: &Epoll, tok: u64, n: usize) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        if self.p.cfg.messages.is_some() {
            // `--message-rate`: whole messages matched, a cut one kept for the next read.
            let mut spill = conn.spill.take();
            let (mut inbuf, frag) = take_input(&mut spill);
            let data = joined(&mut inbuf, &mut self.buf[..n]);
            let len = data.len();
            let used = self.p.message_input(&mut conn.p, data);
            if used < len {
                keep_input(&mut spill, inbuf, &self.buf[..n], used, frag);
            }
            shrink(&mut spill);
            conn.spill = spill;
            return;
        }
        match self.p.echo_input(&mut conn.p, &self.buf[..n]) {
            EchoStep::Mismatch => {
                self.p.c.closed.echo_mismatch += 1;
                self.close_open(tok);
            }
            EchoStep::Partial => {}
            EchoStep::RoundTrip => self.echo_next(ep, tok),
        }
    }

    fn ws_bytes(&mut self, ep: &Epoll, tok: u64, n: usize) {
        let Some(conn) = self.conns.get_mut(tok) else {
            return;
        };
        let mut spill = conn.spill.take();
        let (mut inbuf, mut frag) = take_input(&mut spill);
        let data = joined(&mut inbuf, &mut self.buf[..n]);
        let data_len = data.len();
        let step = self.p.ws_input(&mut conn.p, data, &mut frag);
        // Keep an incomplete frame or head, and a fragmented message, for the next read.
        if step.end.is_none() && (step.used < data_len || frag.is_some()) {
            keep_input(&mut spill, inbuf, &self.buf[..n], step.used, frag);
        }
        let before = interest(&spill);
        let fd = conn.fd.as_fd();
        let sent = if self.p.out.is_empty() {
            Ok(())
        } else {
            send_sealed(
                fd,
                conn.tls.as_deref_mut(),
                &mut self.wire,
                &mut spill,
                &self.p.out,
                &mut self.p.c.bytes_out,
            )
            .map(drop)
        };
        shrink(&mut spill);
        conn.spill = spill;
        let state = conn.p.state;
        if let Some(end) = step.end {
            if end.failed() {
                end.count(&mut self.p.c);
                self.drop_conn(tok);
                return;
            }
            if step.became_open {
                self.opened(tok, sys::monotonic_ns());
            }
            end.count(&mut self.p.c);
            self.close_open(tok);
            return;
        }
        if let Err(e) = sent {
            if step.became_open {
                self.opened(tok, sys::monotonic_ns());
            }
            self.fail_or_close(tok, &e);
            return;
        }
        if let Some(conn) = self.conns.get_mut(tok)
            && let Err(e) = rearm(ep, &conn.fd, tok, before, &conn.spill)
        {
            // Counted as opened first, as above, so `close_open` finds it counted.
            if step.became_open {
                self.opened(tok, sys::monotonic_ns());
            }
            self.fail_or_close(tok, &e);
            return;
        }
        if step.became_open && state == State::Open {
            self.opened(tok, sys::monotonic_ns());
            self.echo_next(ep, tok);
        } else if step.rtt_done {
            self.echo_next(ep, tok);
        }
    }
}
