//! What a shard is told to do: built by the supervisor, sent to a worker process as one JSON
//! line on its stdin (or handed to a thread), so a worker needs no command line of its own.

use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};

use super::{
    churn::ChurnConfig,
    heartbeat::HeartbeatConfig,
    messages::MessageConfig,
    push_format::PushFormat,
    push_rule::PushInstant,
    tls::config::{ClientTls, ServerTls},
};

/// The application protocol on every connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Connect and hold; nothing is sent.
    Hold,
    /// Raw TCP: the server writes back what arrives; the client does request/response.
    Echo,
    /// RFC 6455 WebSocket: handshake, ping/pong, echo, broadcast push.
    Ws,
}

impl Mode {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Hold => "hold",
            Mode::Echo => "echo",
            Mode::Ws => "ws",
        }
    }
}

/// What runs a shard's connections. Both engines run the same protocol, sharding, stats
/// and control endpoint; only their figures differ.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// One `epoll_wait` loop per shard over a slab of compact connection states.
    #[default]
    Epoll,
    /// A tokio runtime per shard: a task per connection on `tokio::net` sockets.
    Tokio,
    /// The server on io_uring (a ring per shard: ring-entry accepts, multishot recv, batched
    /// sends); the client runs the epoll engine's code.
    Uring,
}

impl EngineKind {
    /// The engine's name as the CLI and the JSON write it ("epoll", "tokio", "uring").
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Epoll => "epoll",
            EngineKind::Tokio => "tokio",
            EngineKind::Uring => "uring",
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ServerShardConfig {
    pub shard: u32,
    #[serde(default)]
    pub engine: EngineKind,
    pub mode: Mode,
    /// Every (address, port) to listen on; every shard binds all of them (SO_REUSEPORT).
    pub listen: Vec<SocketAddr>,
    pub backlog: i32,
    /// Most connections this shard's process may hold (its fd limit minus a reserve).
    pub cap: u64,
    pub max_message: u64,
    /// WebSocket: close a connection whose handshake has not completed this long after
    /// accept (0: never).
    #[serde(default)]
    pub handshake_timeout_ms: u64,
    /// `--tls`: every connection speaks TLS first.
    #[serde(default)]
    pub tls: Option<ServerTls>,
    /// `--heartbeat`: ping every WebSocket connection this often (None: never).
    #[serde(default)]
    pub heartbeat: Option<HeartbeatConfig>,
    /// `--message-rate`: send every open WebSocket connection stamped messages on this
    /// schedule (None: never).
    #[serde(default)]
    pub messages: Option<MessageConfig>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ClientShardConfig {
    pub shard: u32,
    #[serde(default)]
    pub engine: EngineKind,
    pub mode: Mode,
    /// This shard opens connections with global indices `first + k * stride`, k < `count`:
    /// striding keeps every shard spread over all targets and sources.
    pub count: u64,
    pub first: u64,
    pub stride: u64,
    pub targets: Vec<SocketAddr>,
    /// Source addresses (empty: let the kernel choose).
    pub sources: Vec<IpAddr>,
    /// Explicit source ports (inclusive range); `None`: the kernel picks per 4-tuple.
    pub source_ports: Option<(u16, u16)>,
    /// This shard's share of the setup rate, conn/s (0: unlimited).
    pub rate: f64,
    /// This shard's share of the connects-in-flight bound.
    pub in_flight: u64,
    pub connect_timeout_ms: u64,
    /// Echo payload size in bytes.
    pub payload: usize,
    /// Round trips per connection (0: until teardown).
    pub echo_count: u64,
    /// WebSocket request path and Host header.
    pub path: String,
    pub host: String,
    pub max_message: u64,
    /// Seed for WebSocket keys and masks (per run, so keys differ between runs).
    pub seed: u64,
    /// The server host's clock minus this one's (multihost/clock.rs): push latencies
    /// compare the server's stamp with this host's clock, corrected by it.
    #[serde(default)]
    pub clock_offset_ns: i64,
    /// How the server stamps its pushes (c1m's frame unless told otherwise).
    #[serde(default)]
    pub push_format: PushFormat,
    /// The instant c1m's frames are timed from per message (`--push-latency`); a
    /// foreign frame's one stamp is what it is.
    #[serde(default)]
    pub push_latency: PushInstant,
    /// `--tls`: every connection speaks TLS first.
    #[serde(default)]
    pub tls: Option<ClientTls>,
    /// `--heartbeat`: ping every held WebSocket connection this often (None: never).
    #[serde(default)]
    pub heartbeat: Option<HeartbeatConfig>,
    /// `--churn`: this shard's share, and the order (None: hold without churn).
    #[serde(default)]
    pub churn: Option<ChurnConfig>,
    /// `--message-rate`: every held connection sends stamped messages on this schedule
    /// (None: never).
    #[serde(default)]
    pub messages: Option<MessageConfig>,
}

impl ClientShardConfig {
    /// `--connect-timeout`, each setup step's limit, in ns (both clients' sweeps).
    pub(crate) fn connect_timeout_ns(&self) -> u64 {
        self.connect_timeout_ms.saturating_mul(1_000_000)
    }

    /// Source and destination of the connection with global index `g`.
    ///
    /// Destinations rotate fastest, then sources, so the N connections are spread evenly
    /// over all (source, destination) pairs: each pair has its own ephemeral-port space.
    /// With explicit source ports, `g` maps to a unique (address, port) pair instead.
    pub(crate) fn endpoints(&self, g: u64) -> (Option<SocketAddr>, SocketAddr) {
        let t = self.targets.len().max(1) as u64;
        let dst = self.targets[(g % t) as usize];
        if self.sources.is_empty() {
            return (None, dst);
        }
        let s = self.sources.len() as u64;
        match self.source_ports {
            None => (
                Some(SocketAddr::new(self.sources[((g / t) % s) as usize], 0)),
                dst,
            ),
            Some((lo, hi)) => {
                let p = u64::from(hi - lo) + 1;
                let port = lo as u64 + (g / s) % p;
                (
                    Some(SocketAddr::new(self.sources[(g % s) as usize], port as u16)),
                    dst,
                )
            }
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum ShardConfig {
    Server(ServerShardConfig),
    Client(ClientShardConfig),
}

/// Supervisor → shard commands (a JSON line on a worker's stdin).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum ShardCommand {
    /// Client: begin the ramp; `t0_mono_ns` is the common epoch of the setup timeline.
    Start { t0_mono_ns: u64 },
    /// Server: write one push frame to every open WebSocket connection.
    Push { id: u64, started_unix_ns: u64 },
    /// Client: pushes arriving from now on belong to push `id`; `started_unix_ns` is
    /// the instant its trigger fired (0: no trigger, the server pushes on its own
    /// schedule, so there is no fan-out to time). For servers whose frames carry no id.
    Mark { id: u64, started_unix_ns: u64 },
    /// Client `--churn`: begin churning at `t0_mono_ns` (the pace's epoch), at `rate`
    /// over the whole client (None: the configured `--churn`), or stop.
    Churn {
        on: bool,
        t0_mono_ns: u64,
        rate: Option<crate::workload::churn::ChurnRate>,
    },
    /// Client, a heartbeat phase: ping every open WebSocket connection as `cfg` says,
    /// the sweep's epoch `t0_mono_ns` (spread over the interval from now), or (None) send
    /// no more pings; pongs of the pings out are still matched and counted.
    Heartbeat {
        cfg: Option<HeartbeatConfig>,
        t0_mono_ns: u64,
    },
    /// Client, a message phase: every open connection sends messages as `cfg` says from
    /// `t0_mono_ns` (spread over the interval from now), or (None) sends no more; echoes
    /// of the messages out are still matched and counted.
    Messages {
        cfg: Option<MessageConfig>,
        t0_mono_ns: u64,
    },
    /// Close every connection (client teardown), keep reporting.
    Close,
    /// Close everything, send a last report, exit.
    Stop,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    fn cfg(sources: usize, ports: Option<(u16, u16)>) -> ClientShardConfig {
        ClientShardConfig {
            shard: 0,
            engine: EngineKind::Epoll,
            mode: Mode::Hold,
            count: 0,
            first: 0,
            stride: 1,
            targets: (0..3)
                .map(|i| SocketAddr::from(([127, 0, 0, 1], 8000 + i)))
                .collect(),
            sources: (0..sources)
                .map(|i| IpAddr::from([127, 0, 0, 2 + i as u8]))
                .collect(),
            source_ports: ports,
            rate: 0.0,
            in_flight: 1,
            connect_timeout_ms: 1,
            payload: 1,
            echo_count: 0,
            path: "/".into(),
            host: "h".into(),
            max_message: 1,
            seed: 0,
            clock_offset_ns: 0,
            push_format: PushFormat::C1m,
            push_latency: Default::default(),
            tls: None,
            heartbeat: None,
            churn: None,
            messages: None,
        }
    }

    #[test]
    fn endpoints_cover_every_pair_evenly() {
        let c = cfg(2, None);
        let mut seen = std::collections::HashMap::new();
        for g in 0..600 {
            *seen.entry(c.endpoints(g)).or_insert(0) += 1;
        }
        assert_eq!(seen.len(), 6);
        assert!(seen.values().all(|&v| v == 100));
    }

    #[test]
    fn explicit_ports_are_unique() {
        let c = cfg(2, Some((40000, 40099)));
        let all: std::collections::HashSet<_> = (0..200).map(|g| c.endpoints(g).0).collect();
        assert_eq!(all.len(), 200);
    }
}
