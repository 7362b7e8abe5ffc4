//! The server's messages on a client connection (`c1m server --message-rate`), for both
//! engines: each timed one way from its schedule, its number checked against the
//! connection's (`workload::message_order`), and what a wrong number means said once in
//! words; also while our close frame is out, so the server's `sent` is our `received`.

use super::{ConnProto, Proto};
use crate::workload::{
    message_order::{self, Arrival, Order},
    messages, stats, sys,
    ws::{Event, Fragment},
};

/// [`Proto`]'s warning bits for the three ways a number can be wrong.
const WARN_GAP: u32 = 1 << 5;
const WARN_OUT_OF_ORDER: u32 = 1 << 6;
const WARN_DUPLICATE: u32 = 1 << 7;

impl Proto {
    /// A server's message on `conn` with its stamp (scheduled instant, sequence): counted,
    /// timed from its schedule (server and client share CLOCK_MONOTONIC: one clock for
    /// every process and network namespace on one kernel) and its number checked.
    pub(super) fn on_server_message(&mut self, conn: &mut ConnProto, (at, seq): (u64, u32)) {
        let sm = &mut self.c.server_messages;
        let us = messages::server_received(sm, at, sys::monotonic_ns());
        self.hists.record(stats::histograms::SERVER_MESSAGE, us);
        let order = Order {
            next: &mut conn.srv_next,
            seen: &mut conn.srv_seen,
        };
        let arrival = message_order::arrived(sm, order, seq);
        let (g, n) = (conn.g, seq & !(1 << 31));
        // The digits differ between connections; the supervisor prints each kind once.
        match arrival {
            Arrival::InOrder => {}
            Arrival::Gap { expected, skipped } => self.warn_once(WARN_GAP, || {
                format!(
                    "the server's messages have a gap: connection {g} got message {n} where \
                     {expected} was next, so {skipped} did not arrive in their place (one TCP \
                     stream cannot lose them: the server skipped them); counted in \
                     server_messages.gaps and .skipped"
                )
            }),
            Arrival::OutOfOrder { expected } => self.warn_once(WARN_OUT_OF_ORDER, || {
                format!(
                    "the server's messages came out of order: connection {g} got message {n} \
                     after later ones (message {expected} was next); counted in \
                     server_messages.out_of_order"
                )
            }),
            Arrival::Duplicate => self.warn_once(WARN_DUPLICATE, || {
                format!(
                    "the server sent a message twice: connection {g} got message {n} again; \
                     counted in server_messages.duplicates"
                )
            }),
        }
    }

    /// WebSocket input on `conn` once its close frame is out ([`super::State::Closing`]):
    /// the server's messages written before it read our close still arrive, and are
    /// counted and checked (so the server's `sent` and our `received` agree); the rest
    /// (its close reply, anything else) is dropped. Returns the bytes used: the rest is
    /// the start of a frame, for the next read. After the server's close, or input that
    /// is not a frame, everything is used.
    pub(crate) fn closing_input(
        &mut self,
        conn: &mut ConnProto,
        data: &mut [u8],
        frag: &mut Option<Box<Fragment>>,
    ) -> usize {
        let mut off = 0;
        loop {
            match self.dec.decode(&mut data[off..], frag) {
                Ok(None) => return off,
                Ok(Some((used, ev))) => {
                    off += used;
                    match ev {
                        Some(Event::Message {
                            text: false,
                            payload,
                        }) => {
                            if let Some(stamp) = messages::decode_server(payload.as_slice()) {
                                self.on_server_message(conn, stamp);
                            }
                        }
                        Some(Event::Close(_)) => return data.len(),
                        _ => {}
                    }
                }
                Err(_) => return data.len(),
            }
        }
    }
}
