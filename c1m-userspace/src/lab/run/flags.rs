//! `c1m run`'s flags: the clap definitions of [`RunArgs`] and what they say together
//! (whose server, which push trigger), checked before anything starts. Apart from the
//! run itself so the children's argv builder and the `--servers` sequence read the flags
//! without importing the run.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Result, bail};
use clap::Args;

use super::{
    foreign::{self, TargetAddr},
    isolation,
};
use crate::{
    args::Connections,
    util::PortList,
    workload::{
        cli::WorkloadArgs,
        config::{EngineKind, Mode},
        messages::MessageRate,
        push_format::PushFormat,
        push_rule::{PushInstant, PushRule},
        push_trigger::{self as trigger, PushTrigger},
    },
};

/// `c1m run`'s flags: the workload, the server measured, client hosts, the lab and its output.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Connections to open and hold, at least 1, or `max`: the most free memory allows
    /// (default: 1,000,000, or fewer if memory does not allow it).
    #[arg(value_name = "COUNT", help_heading = "Workload", short = 'n', long)]
    pub connections: Option<TargetArg>,
    /// Target setup rate, connections per second (the seeds ramped at 10,000/s; 0: as
    /// fast as the client's in-flight bound allows).
    #[arg(help_heading = "Workload", long, default_value = "25,000", value_parser = crate::args::parse_number::<u64>)]
    pub rate: u64,
    /// Server ports (the Netty 1M test listened on 100).
    #[arg(help_heading = "Workload", long, default_value = "8000-8099")]
    pub ports: PortList,
    /// Server address(es).
    #[arg(
        value_name = "ADDRS",
        help_heading = "Workload",
        long,
        default_value = "127.0.0.1"
    )]
    pub addr: String,
    /// Client source addresses, e.g. 127.0.0.2-127.0.0.41 (default: as many as the
    /// ephemeral port range needs, from 127.0.0.2 up).
    #[arg(value_name = "ADDRS", help_heading = "Workload", long)]
    pub source: Option<String>,
    /// Workload: hold (TCP), echo, or ws (WebSocket with broadcast push, as the seeds).
    #[arg(help_heading = "Workload", long, value_enum, default_value_t = Mode::Ws)]
    pub mode: Mode,
    /// Payload size, echo count and WebSocket path, handed to the client.
    #[command(flatten, next_help_heading = "Workload")]
    pub workload: WorkloadArgs,
    /// What runs c1m's own server and client: `epoll`, `tokio` or `uring` (an io_uring
    /// server, the epoll client; see `c1m server --help`).
    #[arg(help_heading = "Workload", long, value_enum, env = "C1M_ENGINE", default_value_t = EngineKind::Epoll)]
    pub engine: EngineKind,
    /// c1m's own server on another engine than its client (default: --engine), e.g. a
    /// tokio server met by the epoll client every other server meets.
    #[arg(value_name = "ENGINE", help_heading = "Workload", long, value_enum)]
    pub server_engine: Option<EngineKind>,
    /// c1m's own server pings every connection this often (its --heartbeat; the
    /// client's is --heartbeat), with the client's --heartbeat-timeout.
    #[arg(value_name = "DURATION", help_heading = "Workload", long, value_parser = crate::duration::parse)]
    pub server_heartbeat: Option<Duration>,
    /// c1m's own server sends every open connection this many messages a second (its
    /// --message-rate, of --message-size bytes; ws mode), each timed by the client from
    /// its scheduled instant.
    #[arg(value_name = "RATE", help_heading = "Workload", long, value_parser = crate::workload::messages::parse_rate)]
    pub server_message_rate: Option<MessageRate>,
    /// Length of the idle phase.
    #[arg(value_name = "DURATION", help_heading = "Workload", long, default_value = "10s", value_parser = crate::duration::parse)]
    pub idle: Duration,
    /// Broadcasts in the push phase (ws mode).
    #[arg(
        value_name = "COUNT",
        help_heading = "Workload",
        long,
        default_value_t = 1
    )]
    pub pushes: u32,
    /// A phase between the ramp and the teardown, in the order given (repeat for more):
    /// `hold 60s`, `push 3 every 10s` (or `push 3`: back to back), `churn 5000/s for
    /// 300s` (with `order random`). Replaces the fixed sequence and its --idle, --pushes
    /// and --churn; a plan's `[[phase]]` tables hold the same keys.
    #[arg(value_name = "PHASE", help_heading = "Workload", long = "phase", value_parser = super::phase_list::parse)]
    pub phases: Vec<super::phase_list::Phase>,
    /// Server shards writing a push at once (0: all, the fastest fan-out; a few at a time
    /// leaves CPU to the readers and cuts per-message latency).
    #[arg(
        value_name = "COUNT",
        help_heading = "Workload",
        long,
        default_value_t = 0
    )]
    pub push_writers: usize,
    /// Give up on the setup phase after this long (default: only when no connect has
    /// finished for 2 min, however long the ramp takes).
    #[arg(value_name = "DURATION", help_heading = "Workload", long, value_parser = crate::duration::parse)]
    pub setup_timeout: Option<Duration>,
    /// Give up on a client's connect or handshake step after this long (counted as
    /// timed_out; below the first SYN retransmit, 1 s, a connect sends one SYN). 30 s:
    /// the lab's peers share the box, and a box loaded by other work stalls a
    /// handshake for seconds without losing it (`c1m run -n max` beside two builds:
    /// 846 of 1.56M timed out at 10 s, the kernel resending no SYN).
    #[arg(value_name = "DURATION", help_heading = "Workload", long, default_value = "30s", value_parser = crate::duration::parse)]
    pub connect_timeout: Duration,
    /// wss (and TLS under hold/echo): the certificate, what the client trusts.
    #[command(flatten, next_help_heading = "TLS")]
    pub tls: crate::workload::tls::args::RunTlsArgs,
    /// Connects in flight at once.
    #[arg(
        value_name = "COUNT",
        help_heading = "Workload",
        long,
        default_value = "2,048",
        value_parser = crate::args::parse_number::<u64>
    )]
    pub in_flight: u64,
    /// Apply the sysctls the run needs (somaxconn, port range, …) and restore them after.
    #[arg(help_heading = "Lab and output", long)]
    pub tune: bool,
    /// Run without the kernel observer (no root needed).
    #[arg(help_heading = "Lab and output", long)]
    pub no_observer: bool,
    /// Start even if preflight finds a limit that will make the run fail.
    #[arg(help_heading = "Lab and output", long)]
    pub force: bool,
    /// Parent folder of the run folder.
    #[arg(
        value_name = "DIR",
        help_heading = "Lab and output",
        long,
        default_value = "c1m-runs"
    )]
    pub out: PathBuf,
    /// Serve Prometheus metrics here, e.g. 127.0.0.1:9464 or :9464.
    #[arg(value_name = "HOST:PORT", help_heading = "Lab and output", long, value_parser = crate::args::parse_metrics_addr)]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// How long /metrics stays up after the run, for a final scrape: the run folder is
    /// written first, and Ctrl-C or SIGTERM ends the wait at once without changing the
    /// outcome. The default is two of Prometheus's default 15 s scrape intervals; 0
    /// closes it with the run.
    #[arg(
        help_heading = "Lab and output",
        long,
        value_name = "DURATION",
        default_value = "30s",
        value_parser = crate::duration::parse,
        requires = "metrics_addr"
    )]
    pub metrics_linger: Duration,
    /// The accept-queue metrics one series per listening port (by default one sum over
    /// the ports).
    #[arg(help_heading = "Lab and output", long, requires = "metrics_addr")]
    pub metrics_per_port: bool,
    /// Plain lines instead of the terminal UI, even on a terminal.
    #[arg(help_heading = "Lab and output", long)]
    pub plain: bool,
    /// One JSON object per second (phase and every figure with its age) instead of the
    /// terminal UI, as `c1m observe --json`.
    #[arg(help_heading = "Lab and output", long, conflicts_with = "plain")]
    pub json: bool,
    /// Where the clients run: `local` (this box) or `external` (other hosts running
    /// `c1m client --shard I/N`; this box runs the server and the observer, waits for
    /// --expect connections, pushes and closes them; `c1m merge` joins the folders).
    #[arg(help_heading = "Client hosts", long, value_enum, default_value_t = Clients::Local)]
    pub clients: Clients,
    /// Hosts as network namespaces, from this one command: `1+K` is one server host and
    /// K client hosts (1 to 16) on a bridge, each with its own addresses, MIB, ephemeral
    /// range and TIME_WAIT. The server side runs in one, `c1m client --shard i/K` in each
    /// of the others; the folders are merged into one run folder, the hosts' own kept
    /// inside it. Root only; everything made is removed at the end (and by the next run
    /// after a `kill -9`).
    #[arg(help_heading = "Client hosts", long, value_name = "1+K", value_parser = parse_hosts)]
    pub hosts: Option<HostsShape>,
    /// With --hosts: clients per client host (the seeds ran 10), each a share of the
    /// host's connections over as many worker processes as the fd limit needs for it
    /// (default: one client).
    #[arg(
        value_name = "COUNT",
        help_heading = "Client hosts",
        long,
        requires = "hosts"
    )]
    pub clients_per_host: Option<u64>,
    /// With --hosts: each client host's namespace tracks its connections, as a stateful
    /// firewall on a load generator does (an nftables rule matching `ct state`; without
    /// one a namespace makes no conntrack entry). Its table then holds one entry per
    /// connection, TIME_WAIT ones 120 s, up to `net.netfilter.nf_conntrack_max` (the
    /// box's limit, per namespace): past it new connects are dropped, and the live lines
    /// and the summary say so.
    #[arg(help_heading = "Client hosts", long, requires = "hosts")]
    pub conntrack: bool,

    /// With --hosts: drop this share of the run's TCP segments on every client host's
    /// link, both ways (`1%`, `0.5%` or `0.01`; above 0, at most 50%), with c1m's own
    /// tc-BPF program, which counts what it dropped by kind (SYN, SYN-ACK, data, pure
    /// ACK, FIN, RST); the retransmits that follow are counted by kind and audited
    /// against each host's kernel counters.
    #[arg(
        value_name = "P",
        help_heading = "Client hosts",
        long,
        value_parser = clap::value_parser!(crate::args::LossRate)
    )]
    pub loss: Option<crate::args::LossRate>,
    /// External clients: the connections to wait for (the clients' -n over all hosts;
    /// needed with --clients external).
    #[arg(value_name = "COUNT", help_heading = "Client hosts", long)]
    pub expect: Option<Connections>,
    /// External clients: the server's control endpoint HOST:PORT, which client hosts
    /// name in --clock-from (`time` is open, anything else needs the token the server
    /// writes to the run folder's server.token). Default: the first --addr, port 7999.
    /// (`--control`, as for `c1m server` and `c1m client`; `--control-addr` is its old
    /// name.)
    #[arg(
        value_name = "HOST:PORT",
        help_heading = "Client hosts",
        long = "control",
        alias = "control-addr"
    )]
    pub control_addr: Option<String>,
    /// Your server instead of c1m's: c1m starts "CMD ARGS" (split into words, no shell
    /// unless you write `sh -c "…"`) with the raised fd limit, waits until every --ports
    /// port listens, measures its process tree and stops it at the end (SIGTERM, then
    /// SIGKILL). Its stdout/stderr go to server.stdout.log / server.stderr.log.
    #[arg(
        help_heading = "Your own server",
        long,
        value_name = "CMD",
        conflicts_with = "target"
    )]
    pub server_cmd: Option<String>,
    /// A server already running, here or elsewhere: HOST:PORTS (c1m starts none).
    #[arg(help_heading = "Your own server", long, value_name = "HOST:PORTS", conflicts_with_all = ["addr", "ports"])]
    pub target: Option<TargetAddr>,
    /// The --target server's pid on this box: its process tree's RSS, CPU, threads and
    /// fds are measured, and signal triggers go to it.
    #[arg(
        help_heading = "Your own server",
        long,
        value_name = "PID",
        requires = "target"
    )]
    pub server_pid: Option<u32>,
    /// What makes the server push: control (c1m's server, its default), signal:NAME
    /// (e.g. signal:USR1, to the server's pid), http:URL (a GET), http-post:URL, cmd:"COMMAND", or none
    /// (the server pushes on its own schedule; the default for a foreign server).
    #[arg(help_heading = "Push latency", long, value_name = "TRIGGER", value_parser = trigger::parse)]
    pub push_trigger: Option<PushTrigger>,
    /// How the server stamps its pushes: c1m, u64le-us, u64be-ms, text-ms, text-us or
    /// json:FIELD. Per-message latency is from the stamp; fan-out from the trigger.
    #[arg(help_heading = "Push latency", long, value_name = "FORMAT", default_value = "c1m", value_parser = crate::workload::push_format::parse)]
    pub push_format: PushFormat,
    /// Per-message push latency is measured from: broadcast (the instant the broadcast
    /// began, the seeds' rule) or write (the instant the server wrote that frame), for
    /// every server alike. A server whose stamp cannot follow the rule is marked, not
    /// mixed. Fan-out is always from the trigger instant, on the client's clock.
    #[arg(help_heading = "Push latency", long, value_name = "INSTANT", default_value = "broadcast", value_parser = crate::workload::push_rule::parse)]
    pub push_latency: PushInstant,
    /// The instant a one-stamp --push-format's stamp was taken: broadcast or write
    /// (`--servers` knows the reference servers': broadcast). Unstated, per-message
    /// latency is marked as not comparable.
    #[arg(help_heading = "Push latency", long, value_name = "INSTANT", value_parser = crate::workload::push_rule::parse)]
    pub push_stamp: Option<PushInstant>,
    /// How long a triggered push may go with no frame arriving (a slow server is
    /// measured, not cut); with --push-trigger none, the whole push phase. A server that
    /// never pushes is reported as "no push arrived".
    #[arg(value_name = "DURATION", help_heading = "Push latency", long, default_value = "10s", value_parser = crate::duration::parse)]
    pub push_wait: Duration,
    /// Run the same phases against each of these servers in turn: python, node, go,
    /// netty (built by `cargo xtask reference-servers` into target/reference-servers, or
    /// the folder in $C1M_REFERENCE_SERVERS), c1m-epoll and c1m-tokio (c1m's own, on
    /// each engine, met by the same client). Each
    /// run gets a folder under <out>/<stamp>-servers/, where the comparison of
    /// `c1m compare` is written and then printed.
    #[arg(help_heading = "Comparison (--servers)", long, value_name = "NAMES")]
    pub servers: Option<String>,
    /// With --servers: run each server this many times, in rounds ordered so that each server
    /// runs right after each other one equally often, so the comparison shows the
    /// spread across repeats; at most 1,000 (the sequence prints its estimate before the
    /// first run).
    #[arg(help_heading = "Comparison (--servers)", long, value_name = "COUNT", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=MAX_REPEAT))]
    pub repeat: u32,
    /// With --servers: how runs are kept from inheriting each other's sockets, conntrack
    /// entries and sysctls: netns (each run in a network namespace of its own; the
    /// default as root with loopback addresses) or wait (each run waits, at most
    /// --clean-wait, until no socket of an earlier run is left on its ports). Each run
    /// records what it started from and a dirty start is flagged.
    #[arg(
        help_heading = "Comparison (--servers)",
        long,
        value_enum,
        value_name = "HOW"
    )]
    pub isolation: Option<isolation::Isolation>,
    /// With --isolation wait: the longest a run waits for an earlier run's sockets on its
    /// ports to go (TIME_WAIT lasts 60 s).
    #[arg(help_heading = "Comparison (--servers)", long, value_name = "DURATION", default_value = isolation::CLEAN_WAIT_DEFAULT, value_parser = crate::duration::parse)]
    pub clean_wait: Duration,
    /// The server's name in the run's header and in comparisons (default: c1m for c1m's
    /// own server, else the --server-cmd program's name).
    #[arg(help_heading = "Your own server", long, value_name = "NAME")]
    pub server_name: Option<String>,
    /// The worker processes --servers started a reference server with (its `--workers
    /// K`, already in --server-cmd): recorded, and the one-process fd-limit warning
    /// left out.
    #[arg(long, value_name = "COUNT", hide = true)]
    pub server_workers: Option<u64>,
    /// The run folder itself, instead of a new one under --out (--servers gives each of
    /// its runs one).
    #[arg(long, value_name = "DIR", hide = true)]
    pub into: Option<PathBuf>,
    /// `--metrics-addr` bound before the run moved into a namespace of its own.
    #[arg(skip)]
    pub metrics_listener: Option<std::sync::Arc<std::net::TcpListener>>,
    /// With --servers: the server every other is compared with (default: the first named).
    #[arg(help_heading = "Comparison (--servers)", long, value_name = "NAME")]
    pub baseline: Option<String>,
    /// With --servers: show each run as it goes (live view, summary) and print the
    /// comparison's detail after its answer; else each run's output goes to
    /// `<name>-<k>.stdout.log` and the detail to compare.txt, in the comparison folder.
    #[arg(help_heading = "Comparison (--servers)", long)]
    pub verbose: bool,
    /// A threshold the run must meet, judged at its end, e.g. 'push.p99 < 50ms',
    /// 'failures == 0', 'kernel = app' (repeat for more; with --servers, each run's own).
    /// Listed in the summary and summary.json with the measured value; one that fails
    /// makes the exit code 3. Figures: setup.rate, setup.time, held, failures, overflows,
    /// retransmits, resets, mem.server, mem.client, mem.kernel, cpu.server, warnings,
    /// kernel = app, and latencies NAME.p50/.p99/.p999/.max (NAME: connect,
    /// ws_handshake, push, push_fanout, echo).
    #[arg(value_name = "CHECK", help_heading = "Lab and output", long = "check", value_parser = crate::lab::gate::parse)]
    pub checks: Vec<crate::lab::gate::Check>,
    /// The experiment as a file (TOML): every flag here is a key of the same long name
    /// (`rate = 10000`, `tls = true`, `check = ["push.p99 < 50ms"]`), checked before
    /// anything starts, with errors naming the line. Flags given beside --plan replace the
    /// plan's keys (a --check replaces the plan's checks). As root, the file must be
    /// root's and not writable by group or others. Every run folder holds the run's own
    /// plan.toml, which `c1m run --plan DIR/plan.toml` runs again.
    #[arg(value_name = "FILE", help_heading = "Experiment as a file", long)]
    pub plan: Option<PathBuf>,
    /// Check the plan and the flags beside it, print the experiment they resolve to (as a
    /// plan file) and exit: nothing starts. Without --plan, the flags' own plan.
    #[arg(help_heading = "Experiment as a file", long)]
    pub plan_check: bool,
    /// The effective plan (the plan with the command line's flags over it), written to
    /// the run folder as plan.toml; made by `plan_file::resolve`.
    #[arg(skip)]
    pub effective_plan: Option<String>,
}

impl RunArgs {
    /// The fastest the run's client churns: `--churn`, or its fastest churn phase (what
    /// the client is started able to do, and what the sysctls are sized for).
    pub(crate) fn churn_most(&self) -> Option<crate::workload::churn::ChurnRate> {
        super::phase_list::client_churn(&self.phases)
            .map(|(rate, _)| rate)
            .or(self.workload.churn)
    }
}

/// What one run's flags must say together, checked before anything starts (by the run,
/// and by `--plan-check`, which starts nothing).
pub(crate) fn flags_agree(args: &RunArgs) -> Result<()> {
    // Checked here, not by clap's `required_if`: `--hosts` (which refuses --clients
    // external with its own line) must not be told to add --expect first.
    if args.clients == Clients::External && args.expect.is_none() {
        bail!(
            "--clients external waits for connections from other hosts: add --expect COUNT (their -n over all hosts)"
        );
    }
    if let Some(p) = args.loss
        && args.hosts.is_none()
    {
        bail!(
            "--loss {p} drops packets on the client hosts' links: add --hosts 1+K (a one-box run's loopback is shared by server and client)"
        );
    }
    if args.isolation.is_some() && args.into.is_none() {
        bail!(
            "--isolation keeps the runs of --servers apart: add --servers NAMES, or drop --isolation"
        );
    }
    if let Some(r) = args.workload.churn {
        if args.clients == Clients::External || args.hosts.is_some() {
            bail!(
                "--churn {r}: the lab turns churn on and off with its own client's idle phase; clients on other hosts churn with `c1m client --churn` over their hold"
            );
        }
        crate::workload::churn::check(Some(r.0), u64::MAX, Some(args.idle), "--idle")
            .map_err(anyhow::Error::msg)?;
    }
    if args.mode == Mode::Hold
        && (args.workload.message_rate.is_some() || args.workload.total_message_rate.is_some())
    {
        bail!(
            "--message-rate sends messages for the server to echo: it needs --mode ws or --mode echo"
        );
    }
    if args.server_message_rate.is_some() {
        if args.mode != Mode::Ws {
            bail!("--server-message-rate sends WebSocket messages: it needs --mode ws");
        }
        if args.clients == Clients::External || args.hosts.is_some() {
            bail!(
                "--server-message-rate is timed on one clock (CLOCK_MONOTONIC) at both ends: clients on other hosts do not share it; drop the flag or run the clients here"
            );
        }
    }
    if args.repeat != 1 {
        bail!("--repeat repeats the runs of --servers: add --servers NAMES, or drop --repeat");
    }
    if args.baseline.is_some() {
        bail!(
            "--baseline names the server of --servers the others are compared with: add --servers NAMES, or drop --baseline"
        );
    }
    Ok(())
}

/// The most `--repeat` takes: a thousand rounds of six servers is already weeks.
const MAX_REPEAT: i64 = 1000;

/// Whose server the run measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ServerSpec {
    /// c1m's own `c1m server`.
    Own,
    /// `--server-cmd`, split into words.
    Command(Vec<String>),
    /// `--target`, with `--server-pid` if given.
    Target(TargetAddr, Option<u32>),
}

impl ServerSpec {
    /// The server as `c1m_run_info` names it: `c1m-ENGINE`, the command's program, or
    /// the `--target` address.
    pub(crate) fn name(&self, own_engine: EngineKind) -> String {
        match self {
            ServerSpec::Own => format!("c1m-{}", own_engine.name()),
            ServerSpec::Command(argv) => argv
                .first()
                .map(|p| p.rsplit('/').next().unwrap_or(p).to_owned())
                .unwrap_or_default(),
            ServerSpec::Target(t, _) => t.to_string(),
        }
    }

    /// The server and its push trigger from the flags, or one line saying which flags
    /// contradict each other and what to say instead.
    pub(crate) fn of(args: &RunArgs) -> Result<(ServerSpec, PushTrigger)> {
        let spec = match (&args.server_cmd, &args.target) {
            (Some(cmd), _) => ServerSpec::Command(foreign::split_command(cmd)?),
            (None, Some(t)) => ServerSpec::Target(t.clone(), args.server_pid),
            (None, None) => ServerSpec::Own,
        };
        let own = spec == ServerSpec::Own;
        let trigger = args.push_trigger.clone().unwrap_or(if own {
            PushTrigger::Control
        } else {
            PushTrigger::None
        });
        match (&spec, &trigger) {
            (ServerSpec::Own, PushTrigger::Control) => {}
            (ServerSpec::Own, t) => bail!(
                "--push-trigger {t} is for a server of yours (--server-cmd or --target); c1m's own server pushes on `control`"
            ),
            (_, PushTrigger::Control) => bail!(
                "--push-trigger control needs c1m's own server; yours takes signal:NAME, http:URL, cmd:\"…\" or none"
            ),
            (ServerSpec::Target(_, None), PushTrigger::Signal(s)) => bail!(
                "--push-trigger signal:{} needs the server's pid: add --server-pid PID",
                s.name
            ),
            _ => {}
        }
        if !own && args.server_message_rate.is_some() {
            bail!(
                "--server-message-rate makes c1m's own server send messages; a server of yours (--server-cmd or --target) does not: drop the flag"
            );
        }
        PushRule::check_stamp(&args.push_format, args.push_stamp).map_err(anyhow::Error::msg)?;
        if own && args.push_format != PushFormat::C1m {
            bail!(
                "--push-format {} is for a server of yours (--server-cmd or --target); c1m's own server sends c1m frames",
                args.push_format
            );
        }
        Ok((spec, trigger))
    }

    pub(super) fn foreign(&self) -> bool {
        *self != ServerSpec::Own
    }

    /// The server's name when `--server-name` gives none: c1m, the command's program, or
    /// where the target is.
    pub(super) fn default_name(&self) -> String {
        match self {
            ServerSpec::Own => "c1m".to_owned(),
            ServerSpec::Command(argv) => argv
                .first()
                .map(|p| {
                    Path::new(p)
                        .file_name()
                        .map_or_else(|| p.clone(), |f| f.to_string_lossy().into_owned())
                })
                .unwrap_or_default(),
            ServerSpec::Target(t, _) => format!("the server at {t}"),
        }
    }
}

/// Where a run's clients are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Clients {
    /// `c1m run` starts the client on this box.
    Local,
    /// Client hosts connect from outside; the run waits for them.
    External,
}

/// `--hosts 1+K`: one server host and K client hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostsShape {
    /// Client hosts (K), 1 to [`MAX_CLIENT_HOSTS`].
    pub client_hosts: u32,
}

/// The most client hosts `--hosts` makes: each is a namespace, a veth pair and a client
/// supervisor with its workers on this one box.
pub const MAX_CLIENT_HOSTS: u32 = 16;

/// `1+K`: one server host, K client hosts, 1 ≤ K ≤ [`MAX_CLIENT_HOSTS`].
fn parse_hosts(s: &str) -> Result<HostsShape, String> {
    let fix = format!(
        "write 1+K with one server host and 1 to {MAX_CLIENT_HOSTS} client hosts, e.g. 1+2"
    );
    let (servers, clients) = s
        .trim()
        .split_once('+')
        .ok_or_else(|| format!("not SERVERS+CLIENTS: {fix}"))?;
    match (servers.trim().parse::<u32>(), clients.trim().parse::<u32>()) {
        (Ok(1), Ok(k)) if (1..=MAX_CLIENT_HOSTS).contains(&k) => Ok(HostsShape { client_hosts: k }),
        (Ok(1), Ok(_)) => Err(format!("needs 1 to {MAX_CLIENT_HOSTS} client hosts: {fix}")),
        (Ok(_), Ok(_)) => Err(format!("one server host only: {fix}")),
        _ => Err(format!("not two whole numbers: {fix}")),
    }
}

impl std::fmt::Display for HostsShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "1+{}", self.client_hosts)
    }
}

/// The server's control port for external clients, when --control is not given.
pub(super) const EXTERNAL_CONTROL_PORT: u16 = 7999;

/// What `-n` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetArg {
    /// A number of connections.
    Count(Connections),
    /// The largest target doctor says fits.
    Max,
}

impl std::str::FromStr for TargetArg {
    type Err = String;

    /// A count as every `-n` reads it, or `max`.
    fn from_str(s: &str) -> Result<TargetArg, String> {
        if s.trim() == "max" {
            Ok(TargetArg::Max)
        } else {
            s.parse().map(TargetArg::Count)
        }
    }
}

impl std::fmt::Display for TargetArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetArg::Count(n) => n.fmt(f),
            TargetArg::Max => f.write_str("max"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_take_one_server_and_1_to_16_clients() {
        assert_eq!(parse_hosts("1+2"), Ok(HostsShape { client_hosts: 2 }));
        assert_eq!(parse_hosts("1+16"), Ok(HostsShape { client_hosts: 16 }));
        for (bad, says) in [
            ("2+2", "one server host only"),
            ("1+0", "needs 1 to 16 client hosts"),
            ("1+17", "needs 1 to 16 client hosts"),
            ("3", "not SERVERS+CLIENTS"),
            ("1+x", "not two whole numbers"),
        ] {
            let e = parse_hosts(bad).unwrap_err();
            assert!(e.contains(says) && e.contains("e.g. 1+2"), "{bad}: {e}");
        }
        assert_eq!(HostsShape { client_hosts: 2 }.to_string(), "1+2");
    }

    #[test]
    fn target_is_a_count_or_max() {
        assert_eq!("max".parse(), Ok(TargetArg::Max));
        assert_eq!(
            "25000".parse(),
            Ok(TargetArg::Count(Connections::of(25_000)))
        );
        assert_eq!(
            "1M".parse(),
            Ok(TargetArg::Count(Connections::of(1_000_000)))
        );
        assert!("0".parse::<TargetArg>().is_err());
        assert_eq!(TargetArg::Max.to_string(), "max");
        assert_eq!(TargetArg::Count(Connections::of(7)).to_string(), "7");
    }
}
