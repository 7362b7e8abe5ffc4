//! What a shard counts: connections by outcome, close causes, failures and protocol
//! errors, bytes and messages, one schema for both sides.

use serde::{Deserialize, Serialize};

/// Defines a struct of named u64 counters with `add`, `total` and `iter`, so each cause is a
/// stable JSON key and adding a cause is one line.
macro_rules! counter_set {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $field:ident),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(default)]
        pub struct $name { $($(#[$fm])* pub $field: u64),* }

        impl $name {
            /// Adds `o`'s counts to these, cause by cause.
            pub(crate) fn add(&mut self, o: &$name) { $(self.$field += o.$field;)* }
            /// Every cause summed.
            pub fn total(&self) -> u64 { 0 $(+ self.$field)* }
            /// Adds `o`'s counts to these, or names the first cause whose sum overflows
            /// a u64 (then nothing is added): sums of counts read from files are checked.
            pub(crate) fn checked_add(&mut self, o: &$name) -> Result<(), &'static str> {
                let mut sum = *self;
                $(sum.$field = self.$field.checked_add(o.$field).ok_or(stringify!($field))?;)*
                *self = sum;
                Ok(())
            }
            /// Every cause summed, None when the sum overflows a u64.
            #[allow(dead_code)] // generated for every set; merge reads the failures' only
            pub(crate) fn checked_total(&self) -> Option<u64> {
                Some(0u64) $(.and_then(|t| t.checked_add(self.$field)))*
            }
            /// Each cause as (JSON key, count), in declaration order.
            pub(crate) fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$((stringify!($field), self.$field)),*].into_iter()
            }
        }
    };
}

counter_set! {
    /// Why an open connection ended.
    Closed {
        /// The peer closed: a WebSocket close frame, or (raw TCP modes) EOF.
        peer_closed,
        /// WebSocket: the peer's stream ended (EOF) with no close frame before it, which
        /// every teardown sends first: the peer crashed or was killed.
        peer_eof,
        /// ECONNRESET / EPIPE on an open connection.
        reset,
        /// We closed it: teardown (`close`, `stop`, end of hold).
        local_close,
        /// We closed it for a protocol violation (WebSocket 1002/1007/1009, bad handshake).
        protocol,
        /// Server: the WebSocket handshake had not completed within `--handshake-timeout`.
        handshake_timeout,
        /// Server: the TLS handshake failed (its reason in `tls_errors`).
        tls,
        /// Client only: an echo came back different from what was sent.
        echo_mismatch,
        /// Other I/O errors.
        error,
        /// `--heartbeat`: our ping had no pong by `--heartbeat-timeout`; we closed it
        /// (close frame 1011).
        heartbeat_missed,
        /// The worker process holding it died; counted from its last report.
        worker_lost,
        /// Server teardown: we said goodbye (close frame or close_notify, then FIN) and the
        /// peer did not end its side within 5 s (gone, or not reading): closed without its
        /// answer, which draws a reset if it still answers.
        goodbye_unanswered,
    }
}

counter_set! {
    /// Why a connection never became open (client: connect or handshake; server: accept).
    Failures {
        /// ECONNREFUSED: nothing listens there (or the accept queue overflowed with syncookies off).
        refused,
        /// EADDRNOTAVAIL: source address/port space exhausted for that destination.
        addr_not_avail,
        /// ETIMEDOUT or our own `--connect-timeout` / handshake timeout.
        timed_out,
        /// EMFILE/ENFILE: out of file descriptors.
        emfile,
        /// ECONNRESET during connect or handshake.
        reset,
        /// ENETUNREACH/EHOSTUNREACH.
        unreachable,
        /// WebSocket: the server answered, but not 101.
        handshake_rejected,
        /// WebSocket: malformed answer or wrong Sec-WebSocket-Accept.
        handshake_invalid,
        /// Server: accepted but closed at once because the worker was at its fd cap.
        over_capacity,
        /// Client: connect in flight when teardown began.
        aborted,
        /// Client: the TLS handshake failed (its reason in `tls_errors`).
        tls,
        /// Anything else (errno kept in the worker's stderr line).
        other,
    }
}

counter_set! {
    /// Protocol violations seen, by the answer the RFC prescribes.
    ProtocolErrors {
        /// Bad handshake answered with HTTP 400.
        http_400,
        /// Unsupported Sec-WebSocket-Version answered with HTTP 426.
        http_426,
        /// Frame-level protocol error, closed with 1002.
        ws_1002,
        /// Invalid UTF-8 in text, closed with 1007.
        ws_1007,
        /// Message too big, closed with 1009.
        ws_1009,
        /// Stream ended inside a frame or a handshake head.
        truncated,
    }
}

counter_set! {
    /// Why TLS handshakes failed, on either side: what this side found wrong, or the
    /// alert the peer sent.
    TlsErrors {
        /// The bytes were not TLS records (garbage, or plain HTTP to a TLS port).
        not_tls,
        /// We rejected the peer's certificate: not signed by a CA we trust.
        untrusted_certificate,
        /// We rejected the peer's certificate: expired or not yet valid.
        expired_certificate,
        /// We rejected the peer's certificate: not valid for the name we asked for.
        wrong_name,
        /// Any other certificate we rejected (bad signature, bad encoding, ...).
        bad_certificate,
        /// The peer rejected our certificate (alert unknown_ca, bad_certificate,
        /// certificate_expired, ...).
        peer_rejected_certificate,
        /// No version, cipher suite or key group in common.
        incompatible,
        /// The peer sent another fatal alert.
        peer_alert,
        /// A record failed to decrypt or the handshake broke a rule.
        protocol,
        /// The stream ended or was reset inside the handshake.
        truncated,
        /// The handshake did not finish within `--handshake-timeout` (server) or
        /// `--connect-timeout` (client).
        timeout,
        /// Anything else.
        other,
    }
}

counter_set! {
    /// TLS handshakes completed, by kind.
    TlsHandshakes {
        /// A full handshake (key exchange and certificate).
        full,
        /// Resumed from a session ticket or cache (no certificate, `--tls-resumption`).
        resumed,
    }
}

counter_set! {
    /// `--heartbeat`: the pings this side sent and what became of each. Every ping ends
    /// as exactly one of pong, late pong, missed or unanswered, or is still outstanding:
    /// `pings = pongs + late_pongs + missed + unanswered + outstanding`.
    Heartbeats {
        /// Pings sent (one per held connection per interval, phases spread over it).
        pings,
        /// Pongs that answered the outstanding ping within `--heartbeat-timeout`.
        pongs,
        /// Pongs that answered the outstanding ping after the timeout, before the
        /// connection's next slot (where it would have been closed as missed).
        late_pongs,
        /// Pings with no pong at the connection's first slot past the timeout: the
        /// connection was closed (`closed.heartbeat_missed`).
        missed,
        /// Pings whose connection ended for another reason (teardown, the peer's close,
        /// an error) before their pong.
        unanswered,
        /// Pings still waiting for their pong, on open connections (a gauge; 0 once
        /// every connection closed).
        outstanding,
        /// Pongs that answered no outstanding ping (RFC 6455 §5.5.3 allows them
        /// unsolicited): ignored, counted.
        unsolicited_pongs,
    }
}

counter_set! {
    /// `--churn`: held connections closed cleanly by the client and opened again to the
    /// same target from the same source address. `closed = reopened + failed + reopening`
    /// at every report; at the end `reopening` is 0, so `closed = reopened + failed`, and
    /// the client holds `-n` less `failed`. A churn close is not among the `closed`
    /// causes; a reopen counts in `attempted` and `connected` (the server accepts it),
    /// a failed one also in `failures` by its cause.
    Churn {
        /// Held connections the client closed to churn them (close frame sent, or FIN).
        closed,
        /// Reopens that opened (TCP, TLS and WebSocket handshakes done).
        reopened,
        /// Reopens that failed (cause in `failures`), or were still in flight at the
        /// teardown (`failures.aborted`).
        failed,
        /// Reopens in flight (a gauge).
        reopening,
        /// WebSocket: churned connections whose close frame is sent, waiting for the server
        /// to close (RFC 6455 §7.1.1); still ESTABLISHED in the kernel until it does (a
        /// gauge).
        closing,
    }
}

counter_set! {
    /// `--message-rate`: the messages this client sent and what became of each. Every
    /// message ends as exactly one of received or lost, or is still outstanding:
    /// `sent = received + lost + outstanding`.
    Messages {
        /// Messages sent (each stamped with its scheduled instant and sequence).
        sent,
        /// Echoes received, in order, each matched to its message by the stamp it carries
        /// (latency in `message_us`, from the message's schedule).
        received,
        /// Of `sent`: written more than one interval behind schedule (the sender fell
        /// behind; their latency counts from the schedule, wrk2's correction).
        late,
        /// Messages whose connection ended before their echo came back.
        lost,
        /// Messages waiting for their echo on open connections (a gauge; 0 once every
        /// connection closed).
        outstanding,
        /// Data frames (or raw messages) stamped as ours that are not the echo the
        /// connection waits for next: out of order, repeated or never sent.
        unmatched,
        /// Messages not sent (not in `sent`): 65,535 of their connection's were already
        /// waiting for their echo (a peer that stopped reading).
        capped,
    }
}

counter_set! {
    /// `c1m server --message-rate`: the messages a server sends each open WebSocket
    /// connection unasked. The server counts what it sent, the client what it received;
    /// on one host with nothing lost the client's `received` is the server's `sent`.
    ServerMessages {
        /// Server: messages sent (each stamped with its scheduled instant).
        sent,
        /// Server: of `sent`, written more than one interval behind schedule.
        late,
        /// Server: messages skipped (not in `sent`): their connection had 256 KiB of
        /// output queued already (a client that stopped reading).
        capped,
        /// Client: server messages received (latency in `server_message_us`, from each
        /// message's schedule), whatever their number.
        received,
        /// Client: times a connection's server message carried a number above the one
        /// expected (`workload::message_order`; 0 on a clean run: one TCP stream).
        gaps,
        /// Client: the numbers those gaps jumped over (messages that did not arrive in
        /// their place).
        skipped,
        /// Client: messages numbered below the one expected that had not arrived yet (a
        /// skipped one, late).
        out_of_order,
        /// Client: messages whose number had arrived already.
        duplicates,
    }
}

impl Churn {
    /// Closes less their reopens' endings: 0 when the counts agree.
    pub fn unaccounted(&self) -> i128 {
        i128::from(self.closed)
            - i128::from(self.reopened)
            - i128::from(self.failed)
            - i128::from(self.reopening)
    }
}

impl Messages {
    /// Messages sent less every ending counted: 0 when the counts agree.
    pub fn unaccounted(&self) -> i128 {
        i128::from(self.sent)
            - i128::from(self.received)
            - i128::from(self.lost)
            - i128::from(self.outstanding)
    }
}

impl Heartbeats {
    /// Pings sent less every ending counted: 0 when the counts agree.
    pub fn unaccounted(&self) -> i128 {
        i128::from(self.pings)
            - i128::from(self.pongs)
            - i128::from(self.late_pongs)
            - i128::from(self.missed)
            - i128::from(self.unanswered)
            - i128::from(self.outstanding)
    }
}

impl ProtocolErrors {
    /// Counts a WebSocket close we sent for a protocol violation, by its code.
    pub(crate) fn count_close(&mut self, code: u16) {
        match code {
            1007 => self.ws_1007 += 1,
            1009 => self.ws_1009 += 1,
            _ => self.ws_1002 += 1,
        }
    }
}

/// One side's counters. Server and client share the type; fields that do not apply to a
/// side stay 0, so the lab reads one schema.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(default)]
pub struct Counters {
    /// Client: connects started.
    pub attempted: u64,
    /// Client: connections established (WebSocket: after a valid 101).
    pub connected: u64,
    /// Server: connections accepted.
    pub accepted: u64,
    /// Currently open (server: including those still in the handshake).
    pub open: u64,
    /// Client: connects or handshakes not yet finished.
    pub in_flight: u64,
    /// WebSocket connections past the handshake (the ones a push reaches).
    pub ws_open: u64,
    /// Connections that were open and ended, by cause.
    pub closed: Closed,
    /// Connections that never opened, by cause.
    pub failures: Failures,
    /// Protocol violations by the peer, by the answer sent.
    pub protocol_errors: ProtocolErrors,
    /// TLS handshakes completed (all 0 without `--tls`).
    pub tls_handshakes: TlsHandshakes,
    /// TLS handshakes that failed, by reason.
    pub tls_errors: TlsErrors,
    /// Bytes read from the sockets (handshakes and frames included).
    pub bytes_in: u64,
    /// Bytes written to the sockets (handshakes and frames included).
    pub bytes_out: u64,
    /// Server: push frames written. Client: push frames received.
    pub pushes_sent: u64,
    /// Client: push frames received and decoded as pushes.
    pub pushes_received: u64,
    /// Client: data frames that did not decode as a push of `--push-format` (and were
    /// no echo reply): a wrong format shows here, not as silence.
    pub push_undecodable: u64,
    /// Client: round trips completed and verified byte for byte. Server: messages echoed.
    pub echo_round_trips: u64,
    /// WebSocket data messages received / sent (echoes, pushes excluded on the client).
    pub ws_messages_in: u64,
    /// WebSocket data messages sent (see `ws_messages_in`).
    pub ws_messages_out: u64,
    /// WebSocket pings received from the peer.
    pub ws_pings_in: u64,
    /// `--heartbeat`: pings this side sent and their pongs (all 0 without it).
    pub heartbeat: Heartbeats,
    /// Client `--churn`: connections closed and reopened (all 0 without it).
    #[serde(default)]
    pub churn: Churn,
    #[serde(default)]
    /// `--message-rate`: messages this client sent and their echoes (all 0 without it).
    pub messages: Messages,
    /// `c1m server --message-rate`: messages the server sent unasked, and the client
    /// received (all 0 without it).
    #[serde(default)]
    pub server_messages: ServerMessages,
}

/// `$sum.field = $a.field + $b.field` for each field, `?` with the field's name on overflow.
macro_rules! checked_fields {
    ($sum:ident, $a:ident, $b:ident, $($field:ident),*) => {
        $($sum.$field = $a.$field.checked_add($b.$field).ok_or(stringify!($field))?;)*
    };
}

impl Counters {
    /// Adds `o`'s counts to these, or names the first field whose sum overflows a u64
    /// ("closed.reset"; then nothing is added): `c1m merge` sums counts read from files.
    pub(crate) fn checked_add(&mut self, o: &Counters) -> Result<(), String> {
        // Every field by name: a new one fails to compile here until it is summed below.
        let Counters {
            attempted: _,
            connected: _,
            accepted: _,
            open: _,
            in_flight: _,
            ws_open: _,
            closed: _,
            failures: _,
            protocol_errors: _,
            tls_handshakes: _,
            tls_errors: _,
            bytes_in: _,
            bytes_out: _,
            pushes_sent: _,
            pushes_received: _,
            push_undecodable: _,
            echo_round_trips: _,
            ws_messages_in: _,
            ws_messages_out: _,
            ws_pings_in: _,
            heartbeat: _,
            churn: _,
            messages: _,
            server_messages: _,
        } = *o;
        let a = *self;
        let mut sum = a;
        let plain = |sum: &mut Counters| -> Result<(), &'static str> {
            checked_fields!(
                sum,
                a,
                o,
                attempted,
                connected,
                accepted,
                open,
                in_flight,
                ws_open,
                bytes_in,
                bytes_out,
                pushes_sent,
                pushes_received,
                push_undecodable,
                echo_round_trips,
                ws_messages_in,
                ws_messages_out,
                ws_pings_in
            );
            Ok(())
        };
        plain(&mut sum).map_err(str::to_owned)?;
        let named = |group: &'static str| move |field: &str| format!("{group}.{field}");
        sum.closed.checked_add(&o.closed).map_err(named("closed"))?;
        sum.failures
            .checked_add(&o.failures)
            .map_err(named("failures"))?;
        sum.protocol_errors
            .checked_add(&o.protocol_errors)
            .map_err(named("protocol_errors"))?;
        sum.tls_handshakes
            .checked_add(&o.tls_handshakes)
            .map_err(named("tls_handshakes"))?;
        sum.tls_errors
            .checked_add(&o.tls_errors)
            .map_err(named("tls_errors"))?;
        sum.heartbeat
            .checked_add(&o.heartbeat)
            .map_err(named("heartbeat"))?;
        sum.churn.checked_add(&o.churn).map_err(named("churn"))?;
        sum.messages
            .checked_add(&o.messages)
            .map_err(named("messages"))?;
        sum.server_messages
            .checked_add(&o.server_messages)
            .map_err(named("server_messages"))?;
        *self = sum;
        Ok(())
    }

    pub(crate) fn add(&mut self, o: &Counters) {
        self.attempted += o.attempted;
        self.connected += o.connected;
        self.accepted += o.accepted;
        self.open += o.open;
        self.in_flight += o.in_flight;
        self.ws_open += o.ws_open;
        self.closed.add(&o.closed);
        self.failures.add(&o.failures);
        self.protocol_errors.add(&o.protocol_errors);
        self.tls_handshakes.add(&o.tls_handshakes);
        self.tls_errors.add(&o.tls_errors);
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.pushes_sent += o.pushes_sent;
        self.pushes_received += o.pushes_received;
        self.push_undecodable += o.push_undecodable;
        self.echo_round_trips += o.echo_round_trips;
        self.ws_messages_in += o.ws_messages_in;
        self.ws_messages_out += o.ws_messages_out;
        self.ws_pings_in += o.ws_pings_in;
        self.heartbeat.add(&o.heartbeat);
        self.churn.add(&o.churn);
        self.messages.add(&o.messages);
        self.server_messages.add(&o.server_messages);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn counters_sum_exactly() {
        let mut a = Counters {
            accepted: 5,
            open: 3,
            ..Default::default()
        };
        a.closed.peer_closed = 2;
        let mut b = Counters {
            accepted: 7,
            open: 7,
            ..Default::default()
        };
        b.failures.emfile = 1;
        a.add(&b);
        assert_eq!(
            (a.accepted, a.open, a.closed.total(), a.failures.emfile),
            (12, 10, 2, 1)
        );
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<Counters>(&json).unwrap(), a);
    }

    #[test]
    fn checked_sums_name_the_field_that_overflows_and_add_nothing() {
        let mut a = Counters {
            connected: 2,
            ..Default::default()
        };
        a.closed.reset = u64::MAX;
        let mut b = Counters {
            connected: 3,
            ..Default::default()
        };
        b.closed.reset = 1;
        let before = a;
        assert_eq!(a.checked_add(&b), Err("closed.reset".to_owned()));
        assert_eq!(a, before, "nothing added");
        b.closed.reset = 0;
        b.bytes_in = 7;
        a.checked_add(&b).unwrap();
        assert_eq!((a.connected, a.bytes_in, a.closed.reset), (5, 7, u64::MAX));
        let mut f = Failures {
            refused: u64::MAX,
            ..Default::default()
        };
        assert_eq!(f.checked_total(), Some(u64::MAX));
        f.other = 1;
        assert_eq!(f.checked_total(), None);
        assert_eq!(
            a.checked_add(&Counters {
                bytes_in: u64::MAX,
                ..Default::default()
            }),
            Err("bytes_in".to_owned())
        );
    }
}
