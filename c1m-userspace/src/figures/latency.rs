//! The latencies the live view shows while a run goes on: the client's connect, TLS
//! and WebSocket handshakes during setup, the push per message and its fan-out after a push.
//! Read from the percentiles the client computes of its own histograms, the histograms
//! the run folder's `.hgrm` files and the summary are written from: the last live value
//! is the final one.

use serde::Serialize;

use crate::workload::stats::{
    histograms::{
        CONNECT, HIST_NAMES, PUSH_FANOUT, PUSH_MESSAGE, Percentiles, TLS_HANDSHAKE, WS_HANDSHAKE,
    },
    snapshot::AppSnapshot,
};

/// Each histogram the live view shows, `None` while it holds no value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latencies {
    /// `connect()` to established (`connect_us`).
    pub connect: Option<Percentiles>,
    /// The TLS handshake, from the ClientHello written (the connect completing) to the
    /// handshake done (`tls_handshake_us`; `None` without `--tls`).
    pub tls_handshake: Option<Percentiles>,
    /// WebSocket upgrade request to a valid 101 (`ws_handshake_us`; with TLS the request
    /// goes out as the TLS handshake ends).
    pub ws_handshake: Option<Percentiles>,
    /// Push per message, from the server's stamp the run's rule names (`push_message_us`).
    pub push_message: Option<Percentiles>,
    /// Push fan-out, from the trigger (`push_fanout_us`); its max is the time until the
    /// last connection had the push.
    pub push_fanout: Option<Percentiles>,
}

impl Latencies {
    /// The client's latencies now (none without a client snapshot).
    pub(crate) fn of(client: Option<&AppSnapshot>) -> Latencies {
        let get = |i: usize| {
            client
                .and_then(|c| c.percentiles.get(HIST_NAMES[i]))
                .filter(|p| p.count > 0)
                .copied()
        };
        Latencies {
            connect: get(CONNECT),
            tls_handshake: get(TLS_HANDSHAKE),
            ws_handshake: get(WS_HANDSHAKE),
            push_message: get(PUSH_MESSAGE),
            push_fanout: get(PUSH_FANOUT),
        }
    }
}
