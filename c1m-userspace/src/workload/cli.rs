//! `c1m server`, `c1m client` and the hidden `c1m worker`: arguments, and the edge where
//! they become shard configs and a supervisor run. The client's run, which may also write
//! a client host's folder and metrics, is `multihost::client_run`: above the lab.

use std::{
    net::{IpAddr, SocketAddr},
    path::PathBuf,
    time::Duration,
};

use anyhow::{Context, Result, bail};
use clap::Args;

use super::{
    churn::{ChurnOrder, ChurnStart},
    config::{EngineKind, Mode, ServerShardConfig, ShardConfig},
    heartbeat::HeartbeatConfig,
    limits::{self, plan_server},
    messages::{MessageConfig, MessageRate},
    push_format::PushFormat,
    push_rule::PushInstant,
    push_trigger::PushTrigger,
    supervisor::{self, Options, Side},
    tls::args::{ClientTlsArgs, ServerTlsArgs},
};
use crate::args::{Connections, parse_addrs, parse_number, parse_ports, parse_rate};

/// The flags `c1m server` and `c1m client` share, word for word.
#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    /// What runs the connections: `epoll` (a hand-rolled loop per shard), `tokio` (a
    /// runtime per shard, a task per connection) or `uring` (the server on io_uring:
    /// ring-entry accepts, multishot receives, batched sends; its client is the epoll client's
    /// code; no --tls yet).
    #[arg(long, value_enum, env = "C1M_ENGINE", default_value_t = EngineKind::Epoll)]
    pub engine: EngineKind,
    /// Shard threads when one process suffices (default: one per CPU).
    #[arg(value_name = "COUNT", long)]
    pub threads: Option<u64>,
    /// Control endpoint: a unix socket path (created 0600) or HOST:PORT. Only this
    /// user or root may use it; an address other than loopback needs --control-token-file.
    #[arg(value_name = "ENDPOINT", long)]
    pub control: Option<String>,
    /// Write a fresh random token here (0600) and require `auth <token>` as the first line
    /// of every control connection; needed to bind --control to a non-loopback address.
    /// c1m's own calls read it from $C1M_CONTROL_TOKEN_FILE.
    #[arg(value_name = "FILE", long, requires = "control")]
    pub control_token_file: Option<PathBuf>,
    /// Write the final stats snapshot (JSON) here at exit.
    #[arg(value_name = "FILE", long)]
    pub stats_json: Option<PathBuf>,
    /// Do not print `connections: N` every 2 s, nor the summary.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// Addresses to listen on: comma-separated, IPv4 ranges allowed (127.0.0.1-127.0.0.4).
    #[arg(
        value_name = "ADDRS",
        long = "addr",
        default_value = "127.0.0.1",
        value_delimiter = ','
    )]
    pub addrs: Vec<String>,
    /// Ports to listen on: a range (8000-8099), a list (8000,8001) or one port.
    #[arg(long, default_value = "8000-8099")]
    pub ports: String,
    /// What to do with each connection.
    #[arg(long, value_enum, default_value_t = Mode::Hold)]
    pub mode: Mode,
    /// Concurrent connections to size for. Past one process's RLIMIT_NOFILE the server
    /// spreads over worker processes (default: what one process can hold).
    #[arg(value_name = "COUNT", long)]
    pub max_conns: Option<Connections>,
    /// Force this many worker processes (0: decide from --max-conns and the fd limit).
    #[arg(value_name = "COUNT", long, default_value_t = 0)]
    pub workers: u64,
    /// Broadcast a push to every WebSocket connection this often (e.g. 10s).
    #[arg(value_name = "DURATION", long, value_parser = crate::duration::parse)]
    pub push_every: Option<Duration>,
    /// Shards that write a push at once (0: all). All at once is the fastest fan-out; a
    /// few at a time (e.g. 2 per CPU) leaves CPU to the readers on a shared box, so each
    /// frame waits far less between write and read. `push N` on the control endpoint
    /// overrides it per push.
    #[arg(value_name = "COUNT", long, default_value_t = 0)]
    pub push_writers: usize,
    #[command(flatten)]
    pub common: CommonArgs,
    /// Largest WebSocket message accepted (bytes); larger ones are closed with 1009.
    #[arg(value_name = "BYTES", long, default_value = "1,048,576", value_parser = parse_number::<u64>)]
    pub max_message: u64,
    /// WebSocket: close a connection that has not finished its handshake this long after
    /// accept, so silent or stalled peers cannot pin slots (0s: wait forever).
    #[arg(value_name = "DURATION", long, default_value = "10s", value_parser = crate::duration::parse)]
    pub handshake_timeout: Duration,
    /// listen() backlog per socket (the kernel caps it at net.core.somaxconn).
    #[arg(value_name = "COUNT", long, default_value = "65,535", value_parser = parse_number::<i32>)]
    pub backlog: i32,
    /// Stop after this long (default: until `stop` or a signal).
    #[arg(value_name = "DURATION", long, value_parser = crate::duration::parse)]
    pub duration: Option<Duration>,
    /// ws mode: ping every connection this often (e.g. 30s), phases spread evenly over
    /// the interval; pongs, late pongs and misses are counted.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse)]
    pub heartbeat: Option<Duration>,
    /// With --heartbeat: a ping unanswered this long closes its connection (close 1011,
    /// counted heartbeat_missed) at the connection's next slot (default: the interval).
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse, requires = "heartbeat")]
    pub heartbeat_timeout: Option<Duration>,
    /// ws mode: send every open connection this many messages a second (10, 10/s, 0.5)
    /// of --message-size bytes unasked, phases spread evenly; each is stamped with its
    /// scheduled instant, and c1m's client times it from there (coordinated omission
    /// corrected). Per connection: a server does not know how many will come.
    #[arg(long, value_name = "RATE", value_parser = super::messages::parse_rate)]
    pub message_rate: Option<MessageRate>,
    /// With --message-rate: bytes of each message's payload (at least 16, its stamp).
    #[arg(long, value_name = "BYTES", default_value_t = 64, value_parser = super::messages::parse_size)]
    pub message_size: u32,
    /// The run this server belongs to, told with every `time` answer of its control
    /// endpoint (set by `c1m run --clients external`; client hosts record it).
    #[arg(value_name = "NAME", long, hide = true)]
    pub run_id: Option<String>,
    #[command(flatten, next_help_heading = "TLS")]
    pub tls: ServerTlsArgs,
}

/// The workload flags `c1m client` and `c1m run` share, word for word: `c1m run` hands
/// them to the client it starts.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct WorkloadArgs {
    /// Echo payload size in bytes (echo mode, and ws mode's echoes).
    #[arg(long, value_name = "BYTES", default_value_t = 16)]
    pub payload_size: usize,
    /// Echo round trips per connection (echo mode: 0 = until teardown; ws mode: 0 =
    /// none).
    #[arg(long, value_name = "COUNT", default_value_t = 0)]
    pub echo_count: u64,
    /// WebSocket request path (ws mode).
    #[arg(long, value_name = "PATH", default_value = "/")]
    pub path: String,
    /// ws mode: ping every held connection this often (e.g. 30s), phases spread evenly
    /// over the interval; pongs, late pongs and misses are counted, pong latency timed.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse)]
    pub heartbeat: Option<Duration>,
    /// With --heartbeat: a ping unanswered this long closes its connection (close 1011,
    /// counted heartbeat_missed) at the connection's next slot (default: the interval).
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse, requires = "heartbeat")]
    pub heartbeat_timeout: Option<Duration>,
    /// While holding, close this many connections a second cleanly (close frame, or FIN)
    /// and reopen each to the same target from the same source, paced evenly (e.g. 5000
    /// or 5000/s): mobile clients reconnecting. `c1m client`: over the hold; `c1m run`:
    /// over --idle.
    #[arg(long, value_name = "RATE", value_parser = super::churn::parse)]
    pub churn: Option<super::churn::ChurnRate>,
    /// With --churn: which held connection goes next.
    #[arg(long, value_enum, value_name = "ORDER", default_value_t = ChurnOrder::Oldest, requires = "churn")]
    pub churn_order: ChurnOrder,
    /// ws or echo mode: from the end of the ramp, every held connection sends this many
    /// messages a second (10, 10/s, 0.5) of --message-size bytes, phases spread evenly;
    /// the server echoes them, each timed from its scheduled instant (coordinated
    /// omission corrected).
    #[arg(long, value_name = "RATE", value_parser = super::messages::parse_rate, conflicts_with = "total_message_rate")]
    pub message_rate: Option<MessageRate>,
    /// As --message-rate, given over all connections of the run (messages a second in
    /// all, split evenly over the connections).
    #[arg(long, value_name = "RATE", value_parser = super::messages::parse_rate)]
    pub total_message_rate: Option<MessageRate>,
    /// With --message-rate: bytes of each message's payload (at least 16, its stamp).
    #[arg(long, value_name = "BYTES", default_value_t = 64, value_parser = super::messages::parse_size)]
    pub message_size: u32,
}

#[derive(Args, Debug, Clone)]
pub struct ClientArgs {
    /// Server addresses: comma-separated, IPv4 ranges allowed.
    /// (`--addr`, as for `c1m server` and `c1m run`; `--host` is its old name.)
    #[arg(
        value_name = "ADDRS",
        long = "addr",
        alias = "host",
        default_value = "127.0.0.1",
        value_delimiter = ','
    )]
    pub hosts: Vec<String>,
    /// Server ports, used round robin: a range (8000-8099), a list or one port.
    #[arg(long, default_value = "8000-8099")]
    pub ports: String,
    /// Connections to open (at least 1).
    #[arg(value_name = "COUNT", short = 'n', long, default_value_t = Connections::of(1000))]
    pub connections: Connections,
    /// Target setup rate in connections per second (0: as fast as --in-flight allows).
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub rate: f64,
    /// Most connects (and WebSocket handshakes) in flight at once, over all shards; at
    /// teardown, most WebSocket close frames waiting for the server to close.
    #[arg(value_name = "COUNT", long, default_value = "1,024", value_parser = parse_number::<u64>)]
    pub in_flight: u64,
    /// How long to hold the connections after the ramp, then close them ("forever": until
    /// `close`, `stop` or a signal).
    #[arg(value_name = "DURATION", long, default_value = "30s", value_parser = parse_hold)]
    pub hold: Hold,
    /// Source addresses, comma-separated, IPv4 ranges allowed (127.0.0.2-127.0.0.41). Each
    /// (source, server port) pair has its own ephemeral port range.
    #[arg(value_name = "ADDRS", long = "source", value_delimiter = ',')]
    pub sources: Vec<String>,
    /// Bind explicit source ports from this range (default: the kernel picks per 4-tuple).
    #[arg(value_name = "PORTS", long)]
    pub source_ports: Option<String>,
    #[arg(long, value_enum, default_value_t = Mode::Hold)]
    pub mode: Mode,
    /// Payload size, echo count and WebSocket path.
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Give up on a connect or handshake step after this long, each step (connect,
    /// TLS, upgrade) timed from its own start (counted as timed_out).
    #[arg(value_name = "DURATION", long, default_value = "10s", value_parser = crate::duration::parse)]
    pub connect_timeout: Duration,
    /// Force this many worker processes (0: decide from -n and the fd limit).
    #[arg(value_name = "COUNT", long, default_value_t = 0)]
    pub workers: u64,
    #[command(flatten)]
    pub common: CommonArgs,
    /// After teardown, keep answering the control endpoint until `stop`.
    #[arg(long)]
    pub stay: bool,
    /// With --churn: churn over the hold (from the ramp's end), or only between `churn
    /// on` and `churn off` on the control endpoint (`c1m run`'s idle phase).
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ChurnStart::Hold, hide = true)]
    pub churn_start: ChurnStart,
    /// Setup-rate table step (default: 10% of -n, at most 100,000).
    #[arg(value_name = "COUNT", long)]
    pub step: Option<u64>,
    /// Largest WebSocket message accepted (bytes).
    #[arg(value_name = "BYTES", long, default_value = "1,048,576", value_parser = parse_number::<u64>)]
    pub max_message: u64,
    /// How the server stamps its pushes: c1m, u64le-us (8 bytes LE µs since the epoch),
    /// u64be-ms, text-ms, text-us (decimal) or json:FIELD. A data frame that does not
    /// decode is counted as push_undecodable.
    #[arg(value_name = "FORMAT", long, default_value = "c1m", value_parser = super::push_format::parse)]
    pub push_format: PushFormat,
    /// Per-message push latency is measured from: broadcast (the instant the broadcast
    /// began, the seeds' rule) or write (the instant the server wrote that frame). c1m's
    /// frame carries both; a one-stamp --push-format carries what --push-stamp says.
    #[arg(long, value_name = "INSTANT", default_value = "broadcast", value_parser = super::push_rule::parse)]
    pub push_latency: PushInstant,
    /// The instant a one-stamp --push-format's stamp was taken: broadcast or write.
    /// Unstated, a run's per-message latency is marked as not comparable.
    #[arg(long, value_name = "INSTANT", value_parser = super::push_rule::parse)]
    pub push_stamp: Option<PushInstant>,
    /// A server of yours: trigger one push once the ramp is done (signal:NAME, http:URL,
    /// cmd:"COMMAND"; none counts what it sends on its own from then on) and report its
    /// latency. `control` is c1m's own server's: `c1m run` drives that one.
    #[arg(long, value_name = "TRIGGER", value_parser = super::push_trigger::parse)]
    pub push_trigger: Option<PushTrigger>,
    /// The server's pid, for --push-trigger signal:NAME.
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,
    #[command(flatten)]
    pub hosts_run: HostsArgs,
    #[command(flatten, next_help_heading = "TLS")]
    pub tls: ClientTlsArgs,
}

/// A client host of a run spread over several (the server's host runs
/// `c1m run --clients external`; `c1m merge` joins the folders).
#[derive(Args, Debug, Clone, Default)]
pub struct HostsArgs {
    /// This host's share, I/N (0-based): -n, --rate, --in-flight and --source are totals over
    /// all N hosts and this host takes its part. Default: $JOB_COMPLETION_INDEX of
    /// $C1M_SHARDS when the index is set (a Kubernetes Indexed Job). Once sharded, the
    /// client also ends when the server has closed all its connections.
    #[arg(value_name = "I/N", long, value_parser = crate::workload::host_share::parse_shard)]
    pub shard: Option<crate::workload::host_share::ShardOf>,
    /// Begin the ramp at this wall-clock instant (RFC 3339, 2026-11-30T15:00:00Z, or
    /// unix seconds), so every host ramps together and the sum ramps at --rate.
    #[arg(value_name = "TIME", long, value_parser = crate::workload::host_share::parse_start_at)]
    pub start_at: Option<std::time::SystemTime>,
    /// Write this host's run folder here (summary.json, timeseries.csv, .hgrm, .hlog),
    /// for `c1m merge`.
    #[arg(value_name = "DIR", long)]
    pub run_dir: Option<PathBuf>,
    /// The server host's control endpoint (HOST:PORT): the clock offset to it is
    /// measured before and after the run, and push latencies are corrected by it; the
    /// run id it answers is recorded, so `c1m merge` joins only folders of one run.
    #[arg(value_name = "HOST:PORT", long)]
    pub clock_from: Option<String>,
    /// How long to wait for --clock-from's endpoint to accept a connection (the server
    /// host may still be starting); what it waits for is printed every few seconds.
    #[arg(value_name = "DURATION", long, default_value = "120s", value_parser = crate::duration::parse)]
    pub server_wait: Duration,
    /// Name of this host in the merged breakdown (default: the hostname).
    #[arg(value_name = "NAME", long)]
    pub host_label: Option<String>,
    /// Serve this client's Prometheus metrics here (its counters and latency
    /// histograms), e.g. :9464 or 127.0.0.1:9464.
    #[arg(value_name = "HOST:PORT", long, value_parser = crate::args::parse_metrics_addr)]
    pub metrics_addr: Option<SocketAddr>,
    /// Drop this share of the segments to and from the server's ports on --loss-link
    /// (both ways), counted by kind in the run folder: `c1m run --hosts 1+K --loss P`
    /// gives it to each client host. Needs the eBPF observer (root) and --run-dir.
    #[arg(value_name = "P", long, requires_all = ["loss_link", "run_dir"], value_parser = clap::value_parser!(crate::args::LossRate))]
    pub loss: Option<crate::args::LossRate>,
    /// The link of this host's namespace that --loss drops on.
    #[arg(value_name = "IFACE", long, requires = "loss")]
    pub loss_link: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct WorkerArgs {
    /// Shard index (for `ps`; the configuration arrives on stdin).
    #[arg(value_name = "I/N", long, default_value_t = 0)]
    pub shard: u32,
}

/// How long the client holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    For(Duration),
    Forever,
}

fn parse_hold(s: &str) -> Result<Hold, String> {
    if s == "forever" {
        Ok(Hold::Forever)
    } else {
        crate::duration::parse(s).map(Hold::For)
    }
}

fn product(addrs: &[IpAddr], ports: &[u16]) -> Vec<SocketAddr> {
    addrs
        .iter()
        .flat_map(|&a| ports.iter().map(move |&p| SocketAddr::new(a, p)))
        .collect()
}

pub(crate) fn cpus() -> u64 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u64)
        .unwrap_or(1)
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("tokio runtime")
}

impl ServerArgs {
    /// Every (address, port) to listen on: the checks `c1m run` also makes before it
    /// starts anything.
    pub(crate) fn listen(&self) -> Result<Vec<SocketAddr>> {
        let listen = product(&parse_addrs(&self.addrs)?, &parse_ports(&self.ports)?);
        if listen.is_empty() {
            bail!("no --addr to listen on");
        }
        Ok(listen)
    }
}

/// `c1m server`.
pub(crate) fn run_server(a: ServerArgs) -> Result<()> {
    if a.heartbeat.is_some() && a.mode != Mode::Ws {
        bail!("--heartbeat pings WebSocket connections: it needs --mode ws");
    }
    if a.message_rate.is_some() && a.mode != Mode::Ws {
        bail!(
            "--message-rate on the server sends WebSocket messages: it needs --mode ws (a raw \
             byte stream has no frames to tell them from the client's bytes)"
        );
    }
    let messages = MessageConfig::of(a.message_rate, None, 1, a.message_size)
        .map_err(|e| anyhow::anyhow!("--message-rate: {e}"))?;
    let listen = a.listen()?;
    let tls = a.tls.resolve(&listen)?;
    if tls.is_some() && a.common.engine == EngineKind::Uring {
        bail!("{}", super::engine::uring::server::NO_TLS);
    }
    // Before any shard binds, and held until the last one is gone.
    let _ports = super::port_lock::lock(&parse_ports(&a.ports)?, &parse_addrs(&a.addrs)?)?;
    let nofile = limits::raise_nofile().context("RLIMIT_NOFILE")?;
    let listeners = listen.len() as u64;
    let one_process = limits::conn_cap(nofile, listeners, true);
    let expected = a.max_conns.map_or(one_process, Connections::get);
    let plan = plan_server(
        expected,
        listeners,
        nofile,
        a.workers,
        a.common.threads.unwrap_or_else(cpus),
    );
    let configs = (0..plan.per_shard.len() as u32)
        .map(|shard| {
            ShardConfig::Server(ServerShardConfig {
                shard,
                engine: a.common.engine,
                mode: a.mode,
                listen: listen.clone(),
                backlog: a.backlog,
                cap: plan.cap,
                max_message: a.max_message,
                handshake_timeout_ms: a.handshake_timeout.as_millis() as u64,
                tls: tls.clone(),
                heartbeat: HeartbeatConfig::of(a.heartbeat, a.heartbeat_timeout),
                messages,
            })
        })
        .collect();
    let o = Options {
        side: Side::Server,
        mode: a.mode,
        target: expected,
        control: a.common.control,
        control_token_file: a.common.control_token_file,
        run_id: a.run_id,
        stats_json: a.common.stats_json,
        quiet: a.common.quiet,
        push_every: a.push_every,
        push_writers: a.push_writers,
        duration: a.duration,
        stay: false,
        step: default_step(expected),
        rate: 0.0,
        start_at_unix_ns: None,
        end_when_peer_closes: false,
        samples: None,
        push_trigger: None,
        server_pid: None,
        churn: None,
    };
    runtime()?
        .block_on(supervisor::run(o, &plan, configs))
        .map(drop)
}

pub(crate) fn default_step(n: u64) -> u64 {
    n.div_ceil(10).clamp(1, 100_000)
}

/// Where a client connects from and to, checked.
pub(crate) struct ClientEndpoints {
    pub targets: Vec<SocketAddr>,
    pub sources: Vec<IpAddr>,
    pub source_ports: Option<(u16, u16)>,
}

impl ClientArgs {
    /// Targets, sources and source ports: the checks `c1m run` also makes before it
    /// starts anything.
    pub(crate) fn endpoints(&self) -> Result<ClientEndpoints> {
        let targets = product(&parse_addrs(&self.hosts)?, &parse_ports(&self.ports)?);
        if targets.is_empty() {
            bail!("no --addr to connect to");
        }
        let sources = parse_addrs(&self.sources)?;
        if sources.iter().any(|s| s.is_ipv4() != targets[0].is_ipv4()) {
            bail!("--source and --addr must be the same address family");
        }
        let source_ports = match &self.source_ports {
            None => None,
            Some(s) => {
                let p = parse_ports(s)?;
                let (lo, hi) = (
                    p.iter().copied().min().unwrap_or(1),
                    p.iter().copied().max().unwrap_or(1),
                );
                if sources.is_empty() {
                    bail!("--source-ports needs --source addresses to bind");
                }
                let room = sources.len() as u64 * (u64::from(hi - lo) + 1);
                if room < self.connections.get() {
                    bail!(
                        "{} connections need {} (source address, port) pairs but --source × --source-ports gives {room}: \
                         add --source addresses or widen --source-ports",
                        self.connections,
                        self.connections
                    );
                }
                Some((lo, hi))
            }
        };
        Ok(ClientEndpoints {
            targets,
            sources,
            source_ports,
        })
    }
}

/// `c1m worker` (hidden): one shard driven by its supervisor over stdin/stdout.
pub(crate) fn run_worker(_a: WorkerArgs) -> Result<()> {
    super::shard::worker_main()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn ranges_and_lists() {
        let a = parse_addrs(&["127.0.0.2-127.0.0.4,::1".into()]).unwrap();
        assert_eq!(a.len(), 4);
        assert_eq!(a[2], IpAddr::from([127, 0, 0, 4]));
        assert!(parse_addrs(&["127.0.0.5-127.0.0.4".into()]).is_err());
        assert_eq!(
            parse_ports("8000-8002,9000").unwrap(),
            vec![8000, 8001, 8002, 9000]
        );
        assert!(parse_ports("0").is_err());
        assert_eq!(parse_hold("forever").unwrap(), Hold::Forever);
        assert_eq!(
            parse_hold("2m").unwrap(),
            Hold::For(Duration::from_secs(120))
        );
        assert_eq!(default_step(1_000_000), 100_000);
        assert_eq!(default_step(25_000), 2_500);
    }
}
