//! How a run was asked for: the flags, resolved, as summary.json's `config` records
//! them.

use serde::{Deserialize, Serialize};

use super::TriggerKind;

/// How the run was asked for (the CLI flags, resolved).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(default)]
pub struct RunConfig {
    /// Connections the run aimed at (`-n`, or `--expect` when clients run on other hosts).
    pub connections: u64,
    /// Why this many (e.g. "24 GiB free allows ~1.4M; using 1,000,000").
    pub connections_reason: String,
    /// Target setup rate, connections per second (`--rate`; 0: as fast as the client can).
    pub rate_per_s: u64,
    /// The workload: "hold", "echo" or "ws".
    pub mode: String,
    /// What ran c1m's own client (and its server, unless `server_engine` says otherwise).
    pub engine: crate::workload::config::EngineKind,
    /// What ran c1m's own server (a foreign server: the field is unused).
    pub server_engine: crate::workload::config::EngineKind,
    /// Server ports (`--ports`), e.g. "8000-8099".
    pub ports: String,
    /// Server address(es) (`--addr`).
    pub server_addrs: String,
    /// Client source addresses used, e.g. "127.0.0.2-127.0.0.41".
    pub sources: String,
    /// Why these sources (the lab's default: how full each (source, server port) pair gets).
    pub sources_reason: String,
    /// Length of the idle phase, seconds (`--idle`).
    pub idle_s: f64,
    /// Broadcasts in the push phase (`--pushes`, ws mode), or over a phase list's push
    /// phases.
    pub push_count: u32,
    /// The phase list between setup and teardown (`--phase`, a plan's `[[phase]]`), as
    /// `--phase` takes each; empty: the fixed sequence (idle, push).
    pub phases: Vec<String>,
    /// Server shards writing a push at once (0: all).
    pub push_writers: u64,
    /// Echo payload size, bytes (`--payload-size`; 0: a run recorded before c1m kept it).
    pub payload_size: u64,
    /// Echo round trips per connection (`--echo-count`; ws mode: 0 = none).
    pub echo_count: u64,
    /// The WebSocket request path the client asked for (`--path`).
    pub ws_path: String,
    /// `--message-rate`: messages a second each connection sent (0: none;
    /// `--total-message-rate` divided by the connections).
    pub message_rate_per_s: f64,
    /// `--message-size`: bytes of each message's payload (0: no messages).
    pub message_size: u64,
    /// `--server-message-rate`: messages a second c1m's server sent each connection
    /// unasked (0: none; a run recorded before c1m kept it reads 0 too).
    pub server_message_rate_per_s: f64,
    /// `--message-size` of the server's messages, bytes (0: no server messages).
    pub server_message_size: u64,
    /// How push latency was measured: the instant per message is timed from, what the
    /// server's frames carry, where fan-out starts (None: a run recorded before c1m
    /// recorded its rule, not comparable with one that did).
    pub push: Option<crate::workload::push_rule::PushRule>,
    /// Whether the eBPF observer was wanted (false with `--no-observer`).
    pub observer: bool,
    /// The value of every sysctl `--tune` manages (`sysctl::TUNABLE`), read as the run
    /// started, after any tuning: what the run had, whoever set it. None: a run recorded
    /// before c1m kept them (its `tuned` was a flag, true when this run changed one,
    /// false in a `--tune` sequence whose sysctls another run had already set).
    #[serde(deserialize_with = "tuned_values")]
    #[schemars(with = "Option<std::collections::BTreeMap<String, String>>")]
    pub tuned: Option<std::collections::BTreeMap<String, String>>,
    /// What made the server push (`--push-trigger`); fan-out is timed from it. None: a
    /// run recorded before c1m kept it.
    pub push_trigger: Option<TriggerKind>,
    /// TLS on every connection (`--tls`: wss in ws mode), with resumption and the
    /// certificate's key; None: plain TCP.
    pub tls: Option<crate::workload::tls::record::TlsRecord>,
    /// The command line c1m was started with.
    pub command_line: String,
}

impl RunConfig {
    /// The protocol in one word as people name it: "wss" (ws over TLS), "ws", "echo
    /// over TLS", "hold" (an older record without a mode: "?").
    pub fn protocol(&self) -> String {
        match (self.mode.as_str(), self.tls.is_some()) {
            ("", _) => "?".to_owned(),
            ("ws", true) => "wss".to_owned(),
            (m, true) => format!("{m} over TLS"),
            (m, false) => m.to_owned(),
        }
    }
}

/// `tuned` as recorded: the sysctl values, or the flag of an older record (read as not
/// recorded: a flag says nothing about the values).
fn tuned_values<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<std::collections::BTreeMap<String, String>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Tuned {
        Values(std::collections::BTreeMap<String, String>),
        // Read only to tell an old record's flag from the values.
        Flag(#[allow(dead_code)] bool),
    }
    Ok(match Option::<Tuned>::deserialize(d)? {
        Some(Tuned::Values(v)) => Some(v),
        Some(Tuned::Flag(_)) | None => None,
    })
}
