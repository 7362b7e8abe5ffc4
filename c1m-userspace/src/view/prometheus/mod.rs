//! `--metrics-addr ADDR`: the live state in the Prometheus text exposition format
//! (version 0.0.4), served over HTTP/1.1 by hyper on a tokio listener.
//!
//! Conventions: one prefix `c1m_`; base units (`_seconds`, `_bytes`); `_total` for
//! counters; labels `side` (server, client, other), `source` (kernel, app), `state`,
//! `port` (listeners, with `--metrics-per-port` only: by default one sum over the
//! watched ports), `cause`; never a label per connection, so the number of series is
//! bounded whatever the connection count. A figure whose source is missing is left out
//! (no series), never exported as 0 or `NaN`. Latencies are histograms with fixed
//! buckets in seconds ([`BOUNDS_US`]), read from the app's HdrHistograms, so
//! they add up across client hosts. `c1m_run_info` says what the run is with labels that
//! never change mid-run (what the push histograms are timed from among them); the phase
//! is `c1m_phase`, one series per phase (1: current; `done` after the run), the outcome
//! `c1m_run_outcome`, one series per outcome.
//!
//! A series, once exported, stays until the endpoint closes, at its last value
//! ([`keep`]): a scrape after the run, or one that missed the push, still finds it.
//!
//! Eight files: [`families`] says what is exported, from
//! [`LiveState`](crate::view::live_state::LiveState) and its
//! [`Figures`](crate::figures::Figures); [`latency`] names the latency families and
//! turns histograms into buckets; [`encode`] hands the families to the
//! `prometheus-client` encoder; [`keep`] keeps what earlier scrapes exported;
//! [`check`] is a strict reader tests use; [`http`] binds,
//! serves and answers; [`admit`] caps the connections per peer and in all. This file is
//! the module's surface: what the lab, a client host and the tests reach.

mod admit;
#[cfg(any(test, feature = "testkit"))]
pub mod check;
mod encode;
mod families;
mod http;
mod keep;
mod latency;

pub use self::{
    admit::{PER_PEER, TOTAL},
    families::{Detail, PHASES},
    http::{
        CONN_TIMEOUT, CONTENT_TYPE, FLAG, HEAD_TIMEOUT, PATH, bind, flag_error, respond, serve,
        serve_listener,
    },
    latency::{BOUNDS_US, LATENCIES},
};
