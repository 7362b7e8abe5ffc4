//! `c1m run`: the lab. Preflight (and `--tune`), then a `c1m server`, a `c1m client`
//! and the kernel observer on this box, through the phases of the seeds' framework
//! comparison: setup (paced ramp), idle (hold), push (broadcast a timestamp to every
//! connection), teardown. Live view while it runs; a run folder with every export
//! after it, rewritten as it goes so Ctrl-C or a crash loses nothing measured.

mod capped_log;
pub mod cgroup;
pub mod child_args;
mod ctl;
pub mod folder;
pub mod foreign;
pub mod isolation;
pub mod journal;
mod ports;
pub(crate) mod preflight;
pub mod sources;
pub mod stall;
mod verdict;

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, Result, bail};
use clap::Args;
use tokio::process::Child;

use self::{
    child_args::ChildPlan,
    ctl::Ctl,
    foreign::{ForeignServer, TargetAddr},
    journal::{JournalFile, Role},
    stall::{StallEvidence, StallWatch},
};
use super::{
    doctor::{self, Status, Target},
    figures::{Figures, FiguresBuilder, Rows},
    live::{Live, LiveOutput, MetricsAt},
    model::{
        Machine, Netns, Outcome, PerConnection, Phase, ProcessUsage, RunConfig, RunInfo, RunRecord,
        ServerInfo, Software,
    },
    tuning::{self, Sweep, Tuning},
};
use crate::fmt::count;
use crate::{
    observer::{KernelView, ObserverHandle},
    util::PortList,
    workload::{
        config::{EngineKind, Mode},
        push_format::PushFormat,
        push_rule::{PushInstant, PushRule},
        push_trigger::{self as trigger, PushTrigger},
        stats::snapshot::AppSnapshot,
    },
};

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Connections to open and hold, at least 1, or `max`: the most free memory allows
    /// (default: 1,000,000, or fewer if memory does not allow it).
    #[arg(help_heading = "Workload", short = 'n', long, value_parser = parse_target)]
    pub connections: Option<TargetArg>,
    /// Target setup rate, connections per second (the seeds ramped at 10,000/s; 0: as
    /// fast as the client's in-flight bound allows).
    #[arg(help_heading = "Workload", long, default_value_t = 25_000)]
    pub rate: u64,
    /// Server ports (the Netty 1M test listened on 100).
    #[arg(help_heading = "Workload", long, default_value = "8000-8099")]
    pub ports: PortList,
    /// Server address(es).
    #[arg(help_heading = "Workload", long, default_value = "127.0.0.1")]
    pub addr: String,
    /// Client source addresses, e.g. 127.0.0.2-127.0.0.41 (default: as many as the
    /// ephemeral port range needs, from 127.0.0.2 up).
    #[arg(help_heading = "Workload", long)]
    pub source: Option<String>,
    /// Workload: hold (TCP), echo, or ws (WebSocket with broadcast push, as the seeds).
    #[arg(help_heading = "Workload", long, value_enum, default_value_t = Mode::Ws)]
    pub mode: Mode,
    /// What runs c1m's own server and client: `epoll` or `tokio` (see `c1m server --help`).
    #[arg(help_heading = "Workload", long, value_enum, env = "C1M_ENGINE", default_value_t = EngineKind::Epoll)]
    pub engine: EngineKind,
    /// c1m's own server on another engine than its client (default: --engine), e.g. a
    /// tokio server met by the epoll client every other server meets.
    #[arg(help_heading = "Workload", long, value_enum)]
    pub server_engine: Option<EngineKind>,
    /// Length of the idle phase.
    #[arg(help_heading = "Workload", long, default_value = "10s", value_parser = crate::duration::parse)]
    pub idle: Duration,
    /// Broadcasts in the push phase (ws mode).
    #[arg(help_heading = "Workload", long, default_value_t = 1)]
    pub pushes: u32,
    /// Server shards writing a push at once (0: all, the fastest fan-out; a few at a time
    /// leaves CPU to the readers and cuts per-message latency).
    #[arg(help_heading = "Workload", long, default_value_t = 0)]
    pub push_writers: usize,
    /// Give up on the setup phase after this long (default: only when no connect has
    /// finished for 2 min, however long the ramp takes).
    #[arg(help_heading = "Workload", long, value_parser = crate::duration::parse)]
    pub setup_timeout: Option<Duration>,
    /// Connects in flight at once.
    #[arg(help_heading = "Workload", long, default_value_t = 2048)]
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
    #[arg(help_heading = "Lab and output", long, default_value = "c1m-runs")]
    pub out: PathBuf,
    /// Serve Prometheus metrics here, e.g. 127.0.0.1:9464 or :9464.
    #[arg(help_heading = "Lab and output", long, value_parser = crate::args::parse_metrics_addr)]
    pub metrics_addr: Option<std::net::SocketAddr>,
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
    /// External clients: the connections to wait for (the clients' -n over all hosts).
    #[arg(help_heading = "Client hosts", long, required_if_eq("clients", "external"), value_parser = crate::args::parse_connections)]
    pub expect: Option<u64>,
    /// External clients: the server's control endpoint HOST:PORT, which client hosts
    /// name in --clock-from (`time` is open, anything else needs the token the server
    /// writes to the run folder's server.token). Default: the first --addr, port 7999.
    /// (`--control`, as for `c1m server` and `c1m client`; `--control-addr` is its old
    /// name.)
    #[arg(
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
    /// How long to wait for pushes: with --push-trigger none, the whole push phase; a
    /// server that never pushes is reported as "no push arrived".
    #[arg(help_heading = "Push latency", long, default_value = "10s", value_parser = crate::duration::parse)]
    pub push_wait: Duration,
    /// Run the same phases against each of these servers in turn: python, node, go,
    /// netty (built by `cargo xtask reference-servers` into target/reference-servers, or
    /// the folder in $C1M_REFERENCE_SERVERS), c1m-epoll and c1m-tokio (c1m's own, on
    /// each engine, met by the same client). Each
    /// run gets a folder under <out>/<stamp>-servers/, where the comparison of
    /// `c1m compare` is written and then printed.
    #[arg(help_heading = "Comparison (--servers)", long, value_name = "NAMES")]
    pub servers: Option<String>,
    /// With --servers: run each server K times, in rounds ordered so that each server
    /// runs right after each other one equally often, so the comparison shows the
    /// spread across repeats; at most 1,000 (the sequence prints its estimate before the
    /// first run).
    #[arg(help_heading = "Comparison (--servers)", long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=MAX_REPEAT))]
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
}

/// The most `--repeat` takes: a thousand rounds of six servers is already weeks.
pub const MAX_REPEAT: i64 = 1000;

/// Whose server the run measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerSpec {
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
    pub fn name(&self, own_engine: EngineKind) -> String {
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
    pub fn of(args: &RunArgs) -> Result<(ServerSpec, PushTrigger)> {
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
        PushRule::check_stamp(&args.push_format, args.push_stamp).map_err(anyhow::Error::msg)?;
        if own && args.push_format != PushFormat::C1m {
            bail!(
                "--push-format {} is for a server of yours (--server-cmd or --target); c1m's own server sends c1m frames",
                args.push_format
            );
        }
        Ok((spec, trigger))
    }

    fn foreign(&self) -> bool {
        *self != ServerSpec::Own
    }

    /// The server's name when `--server-name` gives none: c1m, the command's program, or
    /// where the target is.
    fn default_name(&self) -> String {
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

/// The server's control port for external clients, when --control is not given.
pub const EXTERNAL_CONTROL_PORT: u16 = 7999;

/// A line for the user: stdout, or stderr when stdout carries `--json` lines.
macro_rules! say {
    ($json:expr, $($arg:tt)*) => {
        if $json { eprintln!($($arg)*) } else { println!($($arg)*) }
    };
}

/// [`say!`] without the newline.
macro_rules! say_raw {
    ($json:expr, $($arg:tt)*) => {
        if $json { eprint!($($arg)*) } else { print!($($arg)*) }
    };
}

pub fn main(mut args: RunArgs) -> Result<i32> {
    // SIGINT, SIGTERM and SIGHUP end a run as `interrupted`, whenever they come: handled
    // before the first sysctl is touched (a SIGTERM between --tune and the live view
    // ended the process with 143, the kernel tuned and the summary `running`). A
    // sequence of --servers passes them on to its runs itself.
    if args.servers.is_none() {
        crate::util::shutdown_flag().context("installing signal handlers")?;
    }
    if args.isolation.is_some() && args.servers.is_none() && args.into.is_none() {
        bail!(
            "--isolation keeps the runs of --servers apart: add --servers NAMES, or drop --isolation"
        );
    }
    // One run of a `--servers` sequence in a namespace of its own: before the first
    // thread, so every thread and child lives there.
    let carry_failed = match (args.servers.is_none(), args.isolation) {
        (true, Some(isolation::Isolation::Netns)) => {
            // The endpoint answers where the user started the sequence, not in the
            // run's namespace, which has nothing but its own lo.
            if let Some(addr) = args.metrics_addr {
                let bound = std::net::TcpListener::bind(addr)
                    .map_err(|e| super::view::prometheus::flag_error(addr, &e))?;
                args.metrics_listener = Some(std::sync::Arc::new(bound));
            }
            isolation::enter_fresh_netns(&RECORDED_SYSCTLS)?
        }
        _ => Vec::new(),
    };
    for f in carry_failed {
        eprintln!("c1m: the run's namespace keeps its default for {f}");
    }
    // The lab draws the view and polls both sides: like the observer, it must keep up
    // with the load it watches (its children are put back to the default weight).
    crate::priority::watcher();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(crate::priority::watcher)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    if args.servers.is_some() {
        return runtime.block_on(super::servers::run_all(args));
    }
    if args.repeat != 1 {
        bail!("--repeat repeats the runs of --servers: add --servers NAMES, or drop --repeat");
    }
    if args.baseline.is_some() {
        bail!(
            "--baseline names the server of --servers the others are compared with: add --servers NAMES, or drop --baseline"
        );
    }
    let into = args.into.clone();
    let result = runtime.block_on(run(args, into.clone()));
    // A run of a sequence that stopped on an error says so in its own folder: only
    // once it is its own (a --into folder that existed is another lab's).
    if let (Err(e), Some(dir)) = (&result, &into)
        && !folder::Taken::is(e)
    {
        record_failure(dir, e)?;
    }
    result
}

/// A run that stopped on an error before the lab could conclude it: its folder says
/// `failed` and why, so a comparison lists it beside the others.
pub(crate) fn record_failure(dir: &Path, error: &anyhow::Error) -> Result<()> {
    let mut record = super::export::load_run(dir).unwrap_or_else(|_| RunRecord {
        c1m_version: env!("CARGO_PKG_VERSION").to_owned(),
        started_unix_ms: now_ms(),
        ..RunRecord::default()
    });
    if record.outcome == Outcome::Running {
        record.outcome = Outcome::Failed;
        record.ended_unix_ms = now_ms();
        record
            .warnings
            .insert(0, format!("the run failed: {error:#}"));
    }
    super::export::write_run(dir, &record).with_context(|| format!("writing {}", dir.display()))?;
    Ok(())
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// What `-n` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetArg {
    Count(u64),
    /// The largest target doctor says fits.
    Max,
}

fn parse_target(s: &str) -> Result<TargetArg, String> {
    if s.trim() == "max" {
        Ok(TargetArg::Max)
    } else {
        crate::args::parse_connections(s).map(TargetArg::Count)
    }
}

/// The connections to aim for and why.
pub(crate) fn resolve_target(asked: Option<TargetArg>) -> (u64, String) {
    let available = doctor::mem_available();
    let fit = doctor::connections_that_fit(available);
    let gib = available as f64 / (1u64 << 30) as f64;
    match asked {
        Some(TargetArg::Max) => {
            // 2% under and rounded down to 10,000: free memory moves between this read
            // and the preflight's, which refused a target rounded only to 1,000.
            let n = (fit / 100 * 98 / 10_000 * 10_000).max(1000);
            (
                n,
                format!(
                    "max: {gib:.1} GiB free allows ~{} at {} B per connection",
                    count(fit),
                    count(doctor::bytes_per_connection())
                ),
            )
        }
        Some(TargetArg::Count(n)) => (
            n,
            format!(
                "asked for {}; {gib:.1} GiB free allows ~{}",
                count(n),
                count(fit)
            ),
        ),
        None if fit >= 1_000_000 => (
            1_000_000,
            format!("{gib:.1} GiB free allows ~{}; using 1,000,000", count(fit)),
        ),
        None => {
            // Round down to a readable number.
            let n = (fit / 1000 * 1000).max(1000);
            (
                n,
                format!(
                    "{gib:.1} GiB free allows ~{}; using {} (not 1,000,000)",
                    count(fit),
                    count(n)
                ),
            )
        }
    }
}

/// The sysctls every run records (`machine.sysctls`); the per-namespace ones among them
/// are carried into a run's fresh namespace.
pub const RECORDED_SYSCTLS: [&str; 8] = [
    "fs.file-max",
    "fs.nr_open",
    "net.core.somaxconn",
    "net.ipv4.tcp_max_syn_backlog",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_abort_on_overflow",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.tcp_max_tw_buckets",
];

pub(crate) fn machine() -> Machine {
    let (soft, hard) = doctor::nofile_limits();
    let mut sysctls = std::collections::BTreeMap::new();
    for name in RECORDED_SYSCTLS {
        if let Some(v) = doctor::read_sysctl(name) {
            sysctls.insert(name.to_owned(), v);
        }
    }
    Machine {
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap_or_default()
            .trim()
            .to_owned(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_owned(),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1),
        mem_total_bytes: doctor::mem_total(),
        mem_available_bytes: doctor::mem_available(),
        nofile_soft: soft,
        nofile_hard: hard,
        sysctls,
    }
}

/// How long a phase may take.
#[derive(Clone, Copy, Debug)]
enum Limit {
    /// At most this long in all.
    Total(Duration),
    /// As long as `Progress` keeps growing; fails after this long without a step.
    Stall(Duration, Progress),
}

/// What a phase judged by [`Limit::Stall`] counts as a step forward.
#[derive(Clone, Copy, Debug)]
enum Progress {
    /// Connects finished (connected or failed) by the client; the server's accepts
    /// when the clients are on other hosts.
    Connects,
    /// Frames of this push received (the server's frames written, for external clients).
    Push(u64),
}

/// A ramp with no connect finished (connected or failed) for this long is stuck: each
/// connect gives up after 10 s (`--connect-timeout`). A fixed budget from the asked
/// rate failed the largest target: 1,732,000 asked, the box slowed from 10k to ~4k
/// conn/s past 1.5M (3.3M sockets in the 262,144-bucket established hash), and the
/// 3 × ramp + 2 min = 328 s ran out at 1,662,915 with the ramp still moving.
const SETUP_STALL: Duration = Duration::from_secs(120);

/// A push with no frame received for this long is stuck. A fixed 120 s failed the
/// largest target: at 1,757,881 connections on a loaded box, 823,411 frames had arrived
/// with the push still moving.
const PUSH_STALL: Duration = Duration::from_secs(30);

/// The child processes of the run, killed if still alive when dropped.
struct Children {
    /// c1m's own server (a foreign one is the lab's [`ForeignServer`]).
    server: Option<Child>,
    client: Option<Child>,
}

impl Drop for Children {
    fn drop(&mut self) {
        if let Some(s) = self.server.as_mut() {
            let _ = s.start_kill();
        }
        if let Some(c) = self.client.as_mut() {
            let _ = c.start_kill();
        }
    }
}

/// Starts `c1m ARGV…` with its output in `log`. Called from the lab's main thread (the
/// `block_on` of [`main`]), which lives as long as the lab: the child's death signal
/// is tied to the thread that forked it.
fn spawn_c1m(argv: &[std::ffi::OsString], log: &Path) -> Result<Child> {
    let exe = std::env::current_exe().context("locating the c1m binary")?;
    let log = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args(argv)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true);
    let lab = std::process::id();
    // SAFETY: setpriority, prctl and getppid are async-signal-safe and touch no memory;
    // the workload runs at the default weight, not the lab's raised one, and dies with
    // the lab (a `kill -9` of the lab left server, client and workers running).
    unsafe {
        cmd.pre_exec(move || {
            crate::priority::load();
            crate::util::die_with_parent(lab)
        });
    }
    cmd.spawn().context("starting a c1m child process")
}

async fn stats(ctl: &Ctl) -> Option<AppSnapshot> {
    stats_within(ctl, Duration::from_secs(5)).await
}

async fn stats_within(ctl: &Ctl, limit: Duration) -> Option<AppSnapshot> {
    let line = tokio::time::timeout(limit, ctl.call("stats"))
        .await
        .ok()?
        .ok()?;
    serde_json::from_str(&line).ok()
}

/// One run into `dir`, or into a new `<out>/<stamp>` folder; its exit code.
pub(crate) async fn run(mut args: RunArgs, dir: Option<PathBuf>) -> Result<i32> {
    // Everything the user said is checked before anything starts or is written.
    let (spec, trigger) = ServerSpec::of(&args)?;
    let external = args.clients == Clients::External;
    if external && spec.foreign() {
        bail!(
            "--clients external runs c1m's own server for now: drop --server-cmd/--target, or run your server with clients on this box"
        );
    }
    if let ServerSpec::Target(t, _) = &spec {
        args.addr = t.host.clone();
        args.ports = t.ports.clone();
        t.reachable().await?;
    }
    let (connections, reason) = match args.expect {
        Some(n) if external => (n, "--expect: clients on other hosts".to_owned()),
        _ => resolve_target(args.connections),
    };
    if !external {
        preflight::memory_first(connections, args.force)?;
    }
    let server_ports = args.ports.0.len() as u64;
    let (sources, source_count, sources_reason) = match &args.source {
        Some(s) => (
            s.clone(),
            crate::args::parse_addrs(std::slice::from_ref(s))?.len() as u64,
            "--source".to_owned(),
        ),
        None => {
            let c = sources::choose(
                connections,
                server_ports,
                crate::workload::limits::ephemeral_ports().unwrap_or(28_232),
            );
            (c.range(), c.count, c.reason())
        }
    };
    let started_ms = now_ms();
    let stamp = crate::fmt::stamp(started_ms);
    // Checked now with the folder the run would get; made (never shared) after preflight.
    let wanted = dir.clone().unwrap_or_else(|| args.out.join(&stamp));
    let (mut plan, mut server_token) = plan_into(&args, connections, &sources, &wanted, external)?;
    let listen_addrs = crate::args::parse_addrs(&plan.server.addrs)?;
    // What the run starts from, after the wait for an earlier run's sockets when asked.
    let wait = match args.isolation {
        Some(isolation::Isolation::Wait) => {
            let waited = isolation::wait_for_clean_ports(&args.ports.0, args.clean_wait).await;
            Some((waited, args.clean_wait))
        }
        _ => None,
    };
    let netns = match args.isolation {
        Some(isolation::Isolation::Netns) => Netns::Fresh,
        _ => Netns::Inherited,
    };
    let start = isolation::start_state(&args.ports.0, netns, wait);
    let mut server_info = ServerInfo {
        name: args
            .server_name
            .clone()
            .unwrap_or_else(|| spec.default_name()),
        ..ServerInfo::default()
    };
    if spec == ServerSpec::Own {
        server_info.engine = Some(args.server_engine.unwrap_or(args.engine));
        server_info.library = Some(Software {
            name: "c1m".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        });
    }
    // A --target listens there already, by design.
    if !matches!(spec, ServerSpec::Target(..)) {
        ports::preflight(&args.ports.0, &listen_addrs)?;
    }
    let observer_wanted = !args.no_observer;
    say!(
        args.json,
        "c1m run: {} connections ({reason}), {}, mode {}",
        count(connections),
        crate::fmt::pace(args.rate),
        args.mode.name()
    );
    say!(args.json, "sources: {sources_reason}");
    say!(args.json, "start: {}", start.describe());

    // Preflight.
    // Not this run's problem (and not root's business to fail a user's run over).
    match tuning::restore_orphans(Sweep::Run) {
        Ok(swept) => {
            for (c, ns) in &swept.restored {
                let there = ns
                    .map(|n| format!(" in network namespace net:[{n}]"))
                    .unwrap_or_default();
                eprintln!(
                    "c1m: restored {} = {} (was {}){there}, left by a killed tuned run",
                    c.name, c.old, c.new
                );
            }
            for l in &swept.left {
                eprintln!("c1m: sysctls left by a killed tuned run stay as they are: {l}");
            }
            for l in &swept.ignored {
                eprintln!("c1m: {l}");
            }
        }
        Err(e) => eprintln!(
            "c1m: sysctls left by a killed tuned run stay as they are ({e}); fix: sudo c1m doctor --restore"
        ),
    }
    for l in journal::leftover_lines() {
        eprintln!("c1m: {l}");
    }
    let target = Target {
        connections,
        server_ports,
        // External clients bring their own addresses and ports.
        sources: if external { 0 } else { source_count },
        observer: observer_wanted,
        foreign_server: spec.foreign(),
    };
    let mut checks = doctor::checks(&target);
    let tuning = if args.tune {
        let t = Tuning::apply(&checks).context("--tune")?;
        for c in &t.changed {
            say!(args.json, "tune: {} {} -> {}", c.name, c.old, c.new);
        }
        for c in &t.held {
            say!(
                args.json,
                "tune: {} stays {}: another tuned lab set it; the last of us restores {}",
                c.name,
                c.new,
                c.old
            );
        }
        checks = doctor::checks(&target);
        Some(t)
    } else {
        None
    };
    let problems: Vec<&doctor::Check> = checks.iter().filter(|c| c.status != Status::Ok).collect();
    if !problems.is_empty() {
        say_raw!(
            args.json,
            "{}",
            doctor::table(&problems.iter().map(|c| (*c).clone()).collect::<Vec<_>>())
        );
    }
    let failed: Vec<&doctor::Check> = checks.iter().filter(|c| c.status == Status::Fail).collect();
    if !failed.is_empty() && !args.force {
        bail!("{}", doctor::failure_line(&failed));
    }

    let dir = match dir {
        Some(d) => folder::create_given(&d).map(|()| d),
        None => folder::create_unique(&args.out, &stamp),
    }
    .with_context(|| format!("creating the run folder {}", wanted.display()))?;
    if dir != wanted {
        // Another lab took the name this second: the children write here instead.
        (plan, server_token) = plan_into(&args, connections, &sources, &dir, external)?;
    }
    say!(args.json, "run folder: {}", dir.display());
    // Before any child: what a `kill -9` of this process would leave, and where.
    let mut journal = JournalFile::create(
        &dir,
        tuning.as_ref().map(|t| t.changed.as_slice()).unwrap_or(&[]),
    )
    .with_context(|| format!("writing the journal in {}", dir.display()))?;

    let mut record = RunRecord {
        c1m_version: env!("CARGO_PKG_VERSION").to_owned(),
        started_unix_ms: started_ms,
        outcome: Outcome::Running,
        config: RunConfig {
            connections,
            connections_reason: reason,
            rate_per_s: args.rate,
            mode: args.mode.name().to_owned(),
            engine: args.engine,
            server_engine: args.server_engine.unwrap_or(args.engine),
            ports: args.ports.to_string(),
            server_addrs: args.addr.clone(),
            sources: sources.clone(),
            sources_reason: sources_reason.clone(),
            idle_s: args.idle.as_secs_f64(),
            push_count: args.pushes,
            push_writers: args.push_writers as u64,
            // The lab tells its own client each trigger's instant; clients on other
            // hosts are told none.
            push: Some(PushRule::new(
                args.push_latency,
                &args.push_format,
                args.push_stamp,
                !external && trigger != PushTrigger::None,
            )),
            observer: observer_wanted,
            tuned: tuning.as_ref().is_some_and(|t| !t.changed.is_empty()),
            command_line: crate::util::command_line(),
        },
        machine: machine(),
        host: external.then(|| crate::multihost::model::HostInfo {
            role: crate::multihost::model::HostRole::Server,
            hostname: machine().hostname,
            label: machine().hostname,
            ..Default::default()
        }),
        server_info: Some(server_info),
        start: Some(start),
        ..RunRecord::default()
    };
    // A summary from the first second: even a `kill -9` leaves a parseable one.
    if let Err(e) = super::export::write_run(&dir, &record)
        .with_context(|| format!("writing the run folder {}", dir.display()))
    {
        fail_in_place(&dir, &mut record, &e);
        return Err(e);
    }

    let observer = if observer_wanted {
        match ObserverHandle::start(args.ports.0.clone()) {
            Ok(handle) => Some(handle),
            Err(e) => {
                let w = format!("kernel observer unavailable: {e:#}");
                eprintln!("c1m: {w}");
                record.warnings.push(w);
                None
            }
        }
    } else {
        None
    };

    let title = format!(
        "c1m run: {} {} connections · {}",
        args.mode.name(),
        count(connections),
        record
            .server_info
            .as_ref()
            .map_or("c1m", |i| i.name.as_str())
    );
    // Before the server: a bad --metrics-addr fails the command before anything starts.
    let live = Live::new(
        LiveOutput::choose(args.plain, args.json),
        match args.metrics_listener.take() {
            Some(bound) => Some(MetricsAt::Bound(bound.try_clone()?)),
            None => args.metrics_addr.map(MetricsAt::Addr),
        },
        &title,
        RunInfo {
            command: "run",
            mode: args.mode.name().to_owned(),
            engine: args.engine.name().to_owned(),
            // A reference server's command is `…/<name>/run`: its name, not "run".
            server: args
                .server_name
                .clone()
                .unwrap_or_else(|| spec.name(args.server_engine.unwrap_or(args.engine))),
            target_connections: connections,
        },
        started_ms,
    )
    .await?;
    let server_ctl = Ctl::new(
        plan.server.common.control.clone().unwrap_or_default(),
        server_token,
    );
    let client_ctl =
        (!external).then(|| Ctl::new(plan.client.common.control.clone().unwrap_or_default(), None));
    let (server, foreign) = match &spec {
        ServerSpec::Own => (
            Some(spawn_c1m(&plan.server_argv()?, &dir.join("server.log"))?),
            None,
        ),
        ServerSpec::Command(argv) => (None, Some(ForeignServer::start(argv, &dir)?)),
        ServerSpec::Target(_, Some(pid)) => (None, Some(ForeignServer::attach(*pid, &dir))),
        ServerSpec::Target(t, None) => (None, Some(ForeignServer::remote(&t.to_string(), &dir))),
    };
    if let Some(pid) = server.as_ref().and_then(Child::id) {
        journal.add(Role::Server, pid)?;
    }
    if let Some(f) = foreign.as_ref().filter(|f| f.owned()) {
        journal.add(Role::Server, f.pid)?;
        if let Some(c) = f.cgroup() {
            journal.add_cgroup(c.path())?;
        }
        // A note, not a warning: without root (or a delegated cgroup) every run would be
        // degraded for what only a server that leaves its tree makes true.
        if let Some(w) = f.unwatched() {
            eprintln!("c1m: note: {w}");
        }
    }
    let children = Children {
        server,
        client: None,
    };

    let mut lab = Lab {
        record,
        dir: dir.clone(),
        observer,
        kernel: None,
        live,
        figures: FiguresBuilder::new(),
        rows: Rows::new(started_ms),
        server_ctl: server_ctl.clone(),
        client_ctl: client_ctl.clone(),
        last_server: None,
        last_client: None,
        server_poll: Pending::new(),
        client_poll: Pending::new(),
        peers: Pending::new(),
        peers_at: None,
        ports: args.ports.0.clone(),
        peers_line: None,
        kernel_poll: Pending::new(),
        phase_start: None,
        interrupted: false,
        last_write: Instant::now(),
        children: Some(children),
        journal: Some(journal),
        foreign,
        trigger,
        push_format: args.push_format.clone(),
        mode: args.mode,
        target: connections,
    };

    let result = lab.drive(&args, connections, &plan).await;
    // Teardown whatever is still up, whatever happened.
    if let Some(c) = &client_ctl {
        let _ = c.call("stop").await;
    }
    if lab.foreign.is_none() {
        let _ = server_ctl.call("stop").await;
    }
    let mut children = lab.children.take();
    if let Some(c) = children.as_mut().and_then(|c| c.client.as_mut()) {
        let _ = tokio::time::timeout(Duration::from_secs(10), c.wait()).await;
    }
    if let Some(s) = children.as_mut().and_then(|c| c.server.as_mut()) {
        let _ = tokio::time::timeout(Duration::from_secs(10), s.wait()).await;
    }
    drop(children);
    if let Some(f) = lab.foreign.as_mut() {
        f.stop(foreign::STOP_GRACE).await;
    }
    // A server that printed its versions late (or had to be waited for) is named now.
    lab.record_versions();
    lab.observer = None;
    lab.live.stop();

    lab.record.ended_unix_ms = now_ms();
    // The last kernel view (the teardown's end, taken afresh) against the kernel's counters.
    lab.record.audit = lab
        .kernel_view()
        .as_ref()
        .map(crate::observer::audit::audit);
    if result.is_ok() && !lab.interrupted {
        lab.conclude(connections);
    }
    lab.record.outcome = match &result {
        Err(e) => {
            lab.record
                .warnings
                .insert(0, format!("the run failed: {e:#}"));
            Outcome::Failed
        }
        Ok(()) if lab.interrupted => Outcome::Interrupted,
        Ok(()) if !lab.record.warnings.is_empty() => Outcome::Degraded,
        Ok(()) => Outcome::Complete,
    };
    let written = lab.write_exports();
    if let Err(e) = &written {
        fail_in_place(&lab.dir, &mut lab.record, e);
    }
    if let Some(mut t) = tuning {
        let restore = t.restore();
        for f in restore.failed {
            eprintln!("c1m: could not restore sysctl {f}");
        }
        for (c, pid) in restore.left_to {
            say!(
                args.json,
                "tune: {} stays {}: tuned lab pid {pid} still runs, and restores {} when it ends",
                c.name,
                c.new,
                c.old
            );
        }
    }
    drop(lab.journal.take());
    written?;
    say_raw!(args.json, "{}", super::summary::text(&lab.record));
    say!(args.json, "run folder: {}", dir.display());
    // Bad news on stderr too, where scripts and CI look for it.
    for w in &lab.record.warnings {
        eprintln!("c1m run: warning: {w}");
    }
    if lab.record.outcome != Outcome::Complete {
        eprintln!("c1m run: {}", lab.record.outcome);
    }
    Ok(lab.record.outcome.exit_code())
}

/// The run folder did not take the exports (full, say): summary.json must not keep
/// saying `running`. It says `failed` with the reason, written alone after the files
/// `c1m report` rebuilds from it are removed to make room, or it is removed. Measured
/// before: a full 64 KiB tmpfs left `running` and exit 1.
fn fail_in_place(dir: &Path, record: &mut RunRecord, e: &anyhow::Error) {
    use super::export::{REPORT, SCHEMA, SUMMARY, TIMESERIES};
    match record.warnings.first() {
        Some(w) if w.starts_with("the run failed:") => {}
        _ => record.warnings.insert(0, format!("the run failed: {e:#}")),
    }
    record.outcome = Outcome::Failed;
    if record.ended_unix_ms == 0 {
        record.ended_unix_ms = now_ms();
    }
    for name in [REPORT, TIMESERIES, SCHEMA] {
        let _ = std::fs::remove_file(dir.join(name));
    }
    let summary = dir.join(SUMMARY);
    let written = serde_json::to_vec_pretty(&*record)
        .map_err(|e| e.to_string())
        .and_then(|json| {
            super::export::atomic::write_atomic(&summary, &json).map_err(|e| e.to_string())
        });
    if written.is_err() {
        let _ = std::fs::remove_file(&summary);
    }
}

/// The children's plan for a run into `dir`: their arguments and, with external clients,
/// the server's control endpoint and the token file it writes (the lab reads it).
fn plan_into(
    args: &RunArgs,
    connections: u64,
    sources: &str,
    dir: &Path,
    external: bool,
) -> Result<(ChildPlan, Option<PathBuf>)> {
    let mut plan = ChildPlan::new(args, connections, sources, dir)?;
    let server_token = external.then(|| dir.join("server.token"));
    if external {
        // Client hosts reach this endpoint for `time`; the lab too, with the token.
        let first = crate::args::parse_addrs(std::slice::from_ref(&args.addr))?;
        let ctl = match (&args.control_addr, first.first()) {
            (Some(a), _) => a.clone(),
            (None, Some(ip)) => std::net::SocketAddr::new(*ip, EXTERNAL_CONTROL_PORT).to_string(),
            (None, None) => bail!(
                "--addr names no address to serve the control endpoint on: give --control HOST:PORT"
            ),
        };
        plan.server.common.control = Some(ctl);
        plan.server.common.control_token_file = server_token.clone();
    }
    Ok((plan, server_token))
}

/// The live view's period: it redraws twice a second.
const TICK: Duration = Duration::from_millis(500);

/// How long a tick waits for the apps' and the kernel's answers before it draws with what
/// it has. Under a full ramp on two cores, a supervisor's stats answer or a socket walk
/// competes with ~120 busy workers for CPU and can take seconds (a 1M ramp froze the view
/// for 40 s while the observer walked 600k sockets): the view must keep moving, and the
/// answer is taken at a later tick.
const TICK_WAIT: Duration = Duration::from_millis(250);

/// A poll that may outlive the tick that started it.
struct Pending<T> {
    task: Option<tokio::task::JoinHandle<Option<T>>>,
}

impl<T: Send + 'static> Pending<T> {
    fn new() -> Self {
        Pending { task: None }
    }

    /// Starts a poll unless one is still under way.
    fn start_if_idle(
        &mut self,
        start: impl FnOnce() -> Option<tokio::task::JoinHandle<Option<T>>>,
    ) {
        if self.task.is_none() {
            self.task = start();
        }
    }

    /// The poll's answer if it comes by `deadline`; otherwise it stays pending.
    async fn ready_by(&mut self, deadline: tokio::time::Instant) -> Option<T> {
        let task = self.task.as_mut()?;
        let answer = tokio::time::timeout_at(deadline, task).await.ok()?;
        self.task = None;
        answer.ok().flatten()
    }

    /// Drops a poll under way: its answer would be older than the one about to be taken.
    fn forget(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// A phase being measured, with the CPU readings it started from.
struct PhaseStart {
    phase: Phase,
    server: Option<AppSnapshot>,
    client: Option<AppSnapshot>,
    own_cpu: (f64, f64),
}

struct Lab {
    record: RunRecord,
    dir: PathBuf,
    observer: Option<ObserverHandle>,
    kernel: Option<KernelView>,
    live: Live,
    figures: FiguresBuilder,
    rows: Rows,
    server_ctl: Ctl,
    /// None: the clients are on other hosts.
    client_ctl: Option<Ctl>,
    /// External clients: connections per peer address, read now and then.
    peers: Pending<std::collections::BTreeMap<std::net::IpAddr, u64>>,
    peers_at: Option<Instant>,
    /// The server's ports (whose peers are counted) and the last line said about them.
    ports: Vec<u16>,
    peers_line: Option<String>,
    last_server: Option<AppSnapshot>,
    last_client: Option<AppSnapshot>,
    server_poll: Pending<AppSnapshot>,
    client_poll: Pending<AppSnapshot>,
    kernel_poll: Pending<KernelView>,
    phase_start: Option<PhaseStart>,
    interrupted: bool,
    last_write: Instant,
    children: Option<Children>,
    /// What a `kill -9` would leave: children and workers are added as they start.
    journal: Option<JournalFile>,
    /// A server c1m did not write; its app side is built from the client's snapshot.
    foreign: Option<ForeignServer>,
    trigger: PushTrigger,
    push_format: PushFormat,
    mode: Mode,
    /// Connections asked for.
    target: u64,
}

impl Lab {
    fn kernel_view(&self) -> Option<KernelView> {
        self.kernel.clone()
    }

    /// What a foreign server said it runs on, once it said so.
    fn record_versions(&mut self) {
        let (Some(f), Some(info)) = (&self.foreign, self.record.server_info.as_mut()) else {
            return;
        };
        if info.runtime.is_none()
            && info.library.is_none()
            && let Some(v) = f.reported_versions()
        {
            info.runtime = v.runtime;
            info.library = v.library;
        }
    }

    /// A foreign server's side: its process tree now, its connections as the client
    /// saw them last.
    fn foreign_snapshot(&mut self) {
        if let Some(f) = self.foreign.as_mut() {
            self.last_server =
                Some(f.snapshot(self.last_client.as_ref(), self.mode.name(), self.target));
        }
    }

    /// One tick: poll both sides, sample, redraw, export now and then. Returns false
    /// when the user asked to stop.
    async fn tick(&mut self) -> Result<bool> {
        // All three asked at once, so answers that come back in time describe one moment.
        let started = tokio::time::Instant::now();
        let deadline = started + TICK_WAIT;
        // A poll left pending may take this long before it counts as lost.
        const POLL_LIMIT: Duration = Duration::from_secs(30);
        let ctl = self.server_ctl.clone();
        let own = self.foreign.is_none();
        self.server_poll.start_if_idle(|| {
            own.then(|| tokio::spawn(async move { stats_within(&ctl, POLL_LIMIT).await }))
        });
        if let Some(ctl) = self.client_ctl.clone() {
            self.client_poll.start_if_idle(|| {
                Some(tokio::spawn(
                    async move { stats_within(&ctl, POLL_LIMIT).await },
                ))
            });
        }
        if let Some(observer) = &self.observer {
            self.kernel_poll
                .start_if_idle(|| observer.start_request(false));
        }
        self.poll_peers().await;
        let (server, client, kernel) = tokio::join!(
            self.server_poll.ready_by(deadline),
            self.client_poll.ready_by(deadline),
            self.kernel_poll.ready_by(deadline),
        );
        if server.is_some() {
            self.last_server = server;
        }
        if client.is_some() {
            self.last_client = client;
        }
        if kernel.is_some() {
            self.kernel = kernel;
        }
        self.foreign_snapshot();
        if self
            .last_client
            .as_ref()
            .is_some_and(|c| c.counters.push_undecodable > 0)
        {
            // Once (warnings are kept unique); the count is in the summary.
            self.warn(format!(
                "frames from the server did not decode as --push-format {} (counted as push_undecodable)",
                self.push_format
            ));
        }
        let kernel = self.kernel_view();
        let phase = self
            .phase_start
            .as_ref()
            .map(|p| p.phase.name.clone())
            .unwrap_or_default();
        let (own_user, own_sys) = own_cpu();
        let figures = self.figures.build(
            crate::util::unix_ms_now(),
            kernel.as_ref(),
            self.last_server.as_ref(),
            self.last_client.as_ref(),
            Some(own_user + own_sys),
            Some(doctor::mem_available()),
        );
        if let Some(sample) = self
            .rows
            .row(&figures, &phase, (own_rss(), own_user + own_sys))
        {
            self.record.samples.push(sample);
        }
        self.live.observe(
            &self.record,
            kernel,
            self.last_server.clone(),
            self.last_client.clone(),
            figures,
            &phase,
        );
        if self.last_write.elapsed() > Duration::from_secs(10) {
            self.write_exports()?;
        }
        let rest = TICK.saturating_sub(started.elapsed());
        let quit = self.live.poll_quit(rest).await?;
        if quit {
            self.interrupted = true;
        }
        Ok(!quit)
    }

    /// External clients: who is connected, by peer address, every 2 s on a blocking
    /// thread (a /proc/net/tcp read grows with the connections); said when it changes.
    async fn poll_peers(&mut self) {
        if self.client_ctl.is_some() {
            return;
        }
        if self
            .peers_at
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(2))
        {
            let ports = self.ports.clone();
            let mut started = false;
            self.peers.start_if_idle(|| {
                started = true;
                Some(tokio::task::spawn_blocking(move || {
                    Some(crate::multihost::peers::by_peer(&ports))
                }))
            });
            if started {
                self.peers_at = Some(Instant::now());
            }
        }
        let now = tokio::time::Instant::now();
        if let Some(p) = self.peers.ready_by(now).await {
            let line = crate::multihost::peers::line(&p);
            if self.peers_line.as_ref() != Some(&line) {
                eprintln!("c1m run: {line}");
                self.peers_line = Some(line);
            }
        }
    }

    fn write_exports(&mut self) -> Result<()> {
        self.record.kernel = self.kernel_view();
        self.record.server = self.last_server.clone();
        self.record.client = self.last_client.clone();
        self.last_write = Instant::now();
        super::export::write_run(&self.dir, &self.record)
            .with_context(|| format!("writing the run folder {}", self.dir.display()))?;
        self.live.write_intervals(&self.dir)?;
        Ok(())
    }

    fn begin(&mut self, name: &str) {
        let phase = Phase {
            name: name.to_owned(),
            started_unix_ms: now_ms(),
            ..Phase::default()
        };
        self.phase_start = Some(PhaseStart {
            phase,
            server: self.last_server.clone(),
            client: self.last_client.clone(),
            own_cpu: own_cpu(),
        });
    }

    /// Closes the phase on answers taken now, app first and then the kernel after a full
    /// walk, so the phase's kernel-vs-app rows compare one moment.
    async fn end(&mut self, notes: Vec<String>) {
        // The phase ends here; the walk below takes seconds at 1M (2M sockets) and would
        // otherwise count as phase time: it was most of the observer's measured "cost"
        // on setup (+8–14% at 1M).
        let ended_unix_ms = now_ms();
        self.server_poll.forget();
        self.client_poll.forget();
        self.kernel_poll.forget();
        if self.foreign.is_none()
            && let Some(s) = stats(&self.server_ctl).await
        {
            self.last_server = Some(s);
        }
        if let Some(ctl) = &self.client_ctl
            && let Some(c) = stats(ctl).await
        {
            self.last_client = Some(c);
        }
        self.foreign_snapshot();
        let mut end_walk_s = 0.0;
        if let Some(observer) = &self.observer {
            let walk_started = Instant::now();
            if let Some(view) = observer.snapshot_fresh().await {
                self.kernel = Some(view);
            }
            end_walk_s = walk_started.elapsed().as_secs_f64();
        }
        self.close_phase(notes, ended_unix_ms, end_walk_s);
    }

    fn close_phase(&mut self, notes: Vec<String>, ended_unix_ms: u64, end_walk_s: f64) {
        let Some(PhaseStart {
            mut phase,
            server: s0,
            client: c0,
            own_cpu: o0,
        }) = self.phase_start.take()
        else {
            return;
        };
        phase.ended_unix_ms = ended_unix_ms.max(phase.started_unix_ms);
        phase.duration_s = (phase.ended_unix_ms - phase.started_unix_ms) as f64 / 1000.0;
        phase.end_walk_s = end_walk_s;
        phase.server = usage(s0.as_ref(), self.last_server.as_ref());
        phase.client = usage(c0.as_ref(), self.last_client.as_ref());
        let o1 = own_cpu();
        phase.observer = ProcessUsage {
            cpu_user_s: o1.0 - o0.0,
            cpu_sys_s: o1.1 - o0.1,
            rss_bytes: own_rss(),
            ..ProcessUsage::default()
        };
        let kernel = self.kernel_view();
        phase.kernel_socket_bytes = kernel
            .as_ref()
            .and_then(|k| k.memory.as_ref())
            .map(|m| m.total.total_bytes);
        phase.box_mem_available_bytes = doctor::mem_available();
        phase.kernel_vs_app = Figures::of_sources(
            crate::util::unix_ms_now(),
            kernel.as_ref(),
            self.last_server.as_ref(),
            self.last_client.as_ref(),
        )
        .kernel_vs_app;
        phase.notes = notes;
        // Figures per connection are taken when everything is held and idle.
        if phase.name == "idle" || phase.name == "setup" {
            self.record.per_connection = per_connection(
                kernel.as_ref(),
                self.last_server.as_ref(),
                self.last_client.as_ref(),
            );
        }
        self.record.phases.push(phase);
    }

    /// Fails with the child's last words when the server or the client has exited;
    /// warns of a worker that died; journals workers as they appear.
    fn check_children(&mut self) -> Result<()> {
        let tearing_down = self
            .phase_start
            .as_ref()
            .is_some_and(|p| p.phase.name == "teardown");
        let mut news = Vec::new();
        for (side, role, snap) in [
            ("server", Role::ServerWorker, &self.last_server),
            ("client", Role::ClientWorker, &self.last_client),
        ] {
            let Some(snap) = snap else { continue };
            if let Some(journal) = self.journal.as_mut() {
                for w in snap
                    .workers
                    .list
                    .iter()
                    .filter(|w| w.kind == crate::workload::stats::snapshot::ShardKind::Process)
                {
                    journal.add(role, w.pid)?;
                }
            }
            if !tearing_down {
                news.extend(verdict::worker_deaths(side, snap));
            }
        }
        for w in news {
            self.warn(w);
        }
        if let Some(f) = self.foreign.as_mut() {
            if f.owned()
                && let Some(journal) = self.journal.as_mut()
            {
                for &pid in f.seen.iter().filter(|&&p| p != f.pid) {
                    journal.add(Role::ServerWorker, pid)?;
                }
            }
            if let Some(status) = f.exited() {
                bail!(
                    "the server exited early ({status}); its stderr ends: {} (full log: {})",
                    f.stderr_tail(),
                    self.dir.join(foreign::STDERR_LOG).display()
                );
            }
        }
        let Some(children) = self.children.as_mut() else {
            return Ok(());
        };
        let mut exited = Vec::new();
        if let Some(Ok(Some(status))) = children.server.as_mut().map(|s| s.try_wait()) {
            exited.push(("server", status));
        }
        if let Some(Ok(Some(status))) = children.client.as_mut().map(|c| c.try_wait()) {
            exited.push(("client", status));
        }
        if let Some((side, status)) = exited.first() {
            let log = self.dir.join(format!("{side}.log"));
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            let last = tail
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no output");
            bail!(
                "the {side} exited early ({status}): {last} (full log: {})",
                log.display()
            );
        }
        Ok(())
    }

    /// Records bad news once: summary.json, the live view's notes, the report's top
    /// line and, at the end, stderr; any warning makes the run "degraded".
    fn warn(&mut self, w: String) {
        if !self.record.warnings.contains(&w) {
            self.record.warnings.push(w);
        }
    }

    /// The run's losses, from the last snapshots, as warnings.
    fn conclude(&mut self, n: u64) {
        for w in verdict::losses(n, self.last_server.as_ref(), self.last_client.as_ref()) {
            self.warn(w);
        }
    }

    /// Ticks until `done` holds for the latest snapshots, the limit passes (error)
    /// or the user stops the run (Ok(false)).
    async fn wait_for(
        &mut self,
        what: &str,
        limit: Limit,
        done: impl Fn(Option<&AppSnapshot>, Option<&AppSnapshot>, Option<&KernelView>) -> bool,
    ) -> Result<bool> {
        let started = Instant::now();
        let mut progress = (0u64, started);
        loop {
            if !self.tick().await? {
                return Ok(false);
            }
            self.check_children()?;
            if done(
                self.last_server.as_ref(),
                self.last_client.as_ref(),
                self.kernel_view().as_ref(),
            ) {
                return Ok(true);
            }
            if let Some(c) = &self.last_client
                && c.workers.count > 0
                && c.workers.alive == 0
            {
                bail!(
                    "every client worker died during {what}: see {}",
                    self.dir.join("client.log").display()
                );
            }
            match limit {
                Limit::Total(d) if started.elapsed() > d => {
                    bail!("{what} did not finish within {:.0} s", d.as_secs_f64())
                }
                Limit::Stall(d, measure) => {
                    let done = self.progress(measure);
                    if done > progress.0 {
                        progress = (done, Instant::now());
                    } else if progress.1.elapsed() > d {
                        let step = match measure {
                            Progress::Connects => "connect finished",
                            Progress::Push(_) => "frame arrived",
                        };
                        bail!(
                            "{what} stalled: no {step} for {:.0} s ({} so far)",
                            d.as_secs_f64(),
                            count(done)
                        )
                    }
                }
                Limit::Total(_) => {}
            }
        }
    }

    /// How far a phase judged by [`Limit::Stall`] has come.
    fn progress(&self, measure: Progress) -> u64 {
        // External clients: the server's figures are the only word here.
        match (measure, &self.last_client, &self.last_server) {
            (Progress::Connects, Some(c), _) => c.counters.connected + c.counters.failures.total(),
            (Progress::Connects, None, Some(s)) => s.counters.accepted,
            (Progress::Connects, None, None) => 0,
            (Progress::Push(id), _, _) => push_witness(
                self.client_ctl.is_none(),
                self.last_server.as_ref(),
                self.last_client.as_ref(),
            )
            .and_then(|x| x.pushes.iter().find(|p| p.push_id == id))
            .map_or(0, |p| p.count),
        }
    }

    async fn drive(&mut self, args: &RunArgs, n: u64, plan: &ChildPlan) -> Result<()> {
        // Server up?
        self.begin("setup");
        match self.foreign.as_mut() {
            Some(f) if f.owned() => {
                f.wait_listening(&args.ports.0, foreign::LISTEN_TIMEOUT)
                    .await?;
                self.record_versions();
            }
            Some(_) => {}
            None => {
                if !self
                    .wait_for(
                        "server start",
                        Limit::Total(Duration::from_secs(60)),
                        |s, _, _| s.is_some_and(|s| s.phase == "running"),
                    )
                    .await?
                {
                    return Ok(());
                }
            }
        }
        let external = self.client_ctl.is_none();
        if !external {
            let client = spawn_c1m(&plan.client_argv()?, &self.dir.join("client.log"))?;
            if let (Some(pid), Some(journal)) = (client.id(), self.journal.as_mut()) {
                journal.add(Role::Client, pid)?;
            }
            if let Some(c) = self.children.as_mut() {
                c.client = Some(client);
            }
        }
        let setup_timeout = args
            .setup_timeout
            .map_or(Limit::Stall(SETUP_STALL, Progress::Connects), Limit::Total);
        // A foreign server that stops completing connections ends the setup early.
        let watch = std::cell::RefCell::new(StallWatch::default());
        let stalled = std::cell::Cell::new(false);
        let watch_stalls = self.foreign.is_some();
        let set_up = if external {
            // The clients' hosts say nothing to this one: the kernel's count is the word.
            self.wait_for("setup (external clients)", setup_timeout, |s, _, k| {
                server_established(s, k) >= n
            })
            .await?
        } else {
            self.wait_for("setup", setup_timeout, |_, c, _| {
                let Some(c) = c else { return false };
                if c.phase == "hold" || c.counters.attempted >= n && c.counters.in_flight == 0 {
                    return true;
                }
                let pending = c.counters.connected < n;
                if watch_stalls
                    && c.phase == "ramp"
                    && watch
                        .borrow_mut()
                        .stalled(Instant::now(), c.counters.connected, pending)
                {
                    stalled.set(true);
                    return true;
                }
                false
            })
            .await?
        };
        if !set_up {
            return Ok(());
        }
        let mut notes = Vec::new();
        // Let the kernel and the app agree (accept queues drained) before calling it set up.
        let settled = if stalled.get() {
            let w = self.stall_evidence(n).describe();
            self.warn(w.clone());
            notes.push(w);
            Ok(true)
        } else {
            self.wait_for(
                "settling",
                Limit::Total(Duration::from_secs(30)),
                move |s, c, k| {
                    if external {
                        server_counts_agree(s, k)
                    } else {
                        counts_agree(s, c, k)
                    }
                },
            )
            .await
        };
        if external {
            self.peers.forget();
            let ports = self.ports.clone();
            let peers =
                tokio::task::spawn_blocking(move || crate::multihost::peers::by_peer(&ports))
                    .await
                    .unwrap_or_default();
            notes.push(format!(
                "at the end of setup: {}",
                crate::multihost::peers::line(&peers)
            ));
        }
        if let Err(e) = settled {
            let w =
                format!("setup: kernel and app counts still differed 30 s after the ramp ({e:#})");
            self.warn(w.clone());
            notes.push(w);
        }
        self.end(notes).await;
        // Each phase on disk as it ends: a reader of the run folder sees it at once.
        self.write_exports()?;
        if self.interrupted {
            return Ok(());
        }

        self.begin("idle");
        let idle_end = Instant::now() + args.idle;
        while Instant::now() < idle_end {
            if !self.tick().await? {
                return Ok(());
            }
            self.check_children()?;
        }
        self.end(Vec::new()).await;
        self.write_exports()?;

        if args.mode == Mode::Ws && args.pushes > 0 && self.trigger != PushTrigger::Control {
            self.begin("push");
            let notes = self.foreign_push(args).await?;
            self.end(notes).await;
            self.write_exports()?;
        } else if args.mode == Mode::Ws && args.pushes > 0 {
            self.begin("push");
            let mut notes = Vec::new();
            for k in 1..=u64::from(args.pushes) {
                // The trigger instant, on this box's clock (the client's), told to the
                // client under the id the server gives its k-th push (the lab is its only
                // driver), just before the trigger: fan-out starts where the push did,
                // as for a foreign server's signal.
                if self.client_ctl.is_some() {
                    let fired_at = crate::workload::sys::realtime_ns();
                    self.client_call(&format!("mark {k} {fired_at}"))
                        .await
                        .context("telling the client when the push was triggered")?;
                }
                let answer = self
                    .server_ctl
                    .call(&format!("push {}", args.push_writers))
                    .await
                    .context("asking the server to push")?;
                let push_id = serde_json::from_str::<serde_json::Value>(&answer)
                    .ok()
                    .and_then(|v| v.get("push_id")?.as_u64())
                    .with_context(|| format!("the server refused the push: {answer}"))?;
                if push_id != k && self.client_ctl.is_some() {
                    let w = format!(
                        "push {push_id}: the server numbered the lab's push {k} {push_id}, so its fan-out is from the broadcast start, not the trigger"
                    );
                    self.warn(w.clone());
                    notes.push(w);
                }
                let open = push_witness(
                    external,
                    self.last_server.as_ref(),
                    self.last_client.as_ref(),
                )
                .map(|x| {
                    if external {
                        x.counters.ws_open
                    } else {
                        x.counters.open
                    }
                })
                .unwrap_or(0);
                let reached = self
                    .wait_for(
                        "push",
                        Limit::Stall(PUSH_STALL, Progress::Push(push_id)),
                        move |s, c, _| {
                            push_witness(external, s, c).is_some_and(|x| {
                                x.pushes
                                    .iter()
                                    .any(|p| p.push_id == push_id && p.count >= open)
                            })
                        },
                    )
                    .await;
                match reached {
                    Ok(true) => {}
                    Ok(false) => return Ok(()),
                    Err(e) => {
                        let got = push_witness(
                            external,
                            self.last_server.as_ref(),
                            self.last_client.as_ref(),
                        )
                        .and_then(|c| c.pushes.iter().find(|p| p.push_id == push_id))
                        .map(|p| p.count)
                        .unwrap_or(0);
                        let w =
                            format!("push {push_id} reached {got} of {open} connections: {e:#}");
                        self.warn(w.clone());
                        notes.push(w);
                    }
                }
            }
            self.end(notes).await;
            self.write_exports()?;
        }

        self.begin("teardown");
        match &self.client_ctl {
            Some(c) => {
                let _ = c.call("close").await;
            }
            // The server closes; each client host sees its peer close and ends.
            None => {
                self.server_ctl
                    .call("close")
                    .await
                    .context("asking the server to close every connection")?;
            }
        }
        let done = self
            .wait_for(
                "teardown",
                Limit::Total(Duration::from_secs(180)),
                move |s, c, _| {
                    (external || c.is_some_and(|c| c.counters.open == 0))
                        && s.is_some_and(|s| s.counters.open == 0)
                },
            )
            .await;
        let notes = match done {
            Ok(_) => Vec::new(),
            Err(e) => {
                let w = format!("teardown: {e:#}");
                self.warn(w.clone());
                vec![w]
            }
        };
        self.end(notes).await;
        Ok(())
    }
}

/// Server-side connections ESTABLISHED in the kernel (the app's open count without
/// the observer).
fn server_established(s: Option<&AppSnapshot>, k: Option<&KernelView>) -> u64 {
    use c1m_common::tcp_state::ESTABLISHED;
    match k {
        Some(k) => k.server.state(ESTABLISHED).max(0) as u64,
        None => s.map(|s| s.counters.open).unwrap_or(0),
    }
}

/// External clients: kernel ESTABLISHED equals the server's open count.
fn server_counts_agree(s: Option<&AppSnapshot>, k: Option<&KernelView>) -> bool {
    s.is_some_and(|s| server_established(Some(s), k) == s.counters.open)
}

impl Lab {
    /// A line to the lab's own client (external clients have no endpoint here).
    async fn client_call(&self, line: &str) -> Result<String> {
        match &self.client_ctl {
            Some(c) => c.call(line).await,
            None => bail!("no client on this box to tell {line:?}"),
        }
    }

    /// What the kernel, the client and the server's log say about a stalled setup.
    fn stall_evidence(&self, n: u64) -> StallEvidence {
        use c1m_common::tcp_state::ESTABLISHED;
        let c = self
            .last_client
            .as_ref()
            .map(|c| c.counters)
            .unwrap_or_default();
        let k = self.kernel_view();
        StallEvidence {
            connected: c.connected,
            attempted: c.attempted,
            asked: n,
            established_not_accepted: k
                .as_ref()
                .map(|k| k.server.state(ESTABLISHED) - c.open as i64),
            accept_queue: k
                .as_ref()
                .filter(|k| !k.listeners.is_empty())
                .map(KernelView::queue_depth),
            server_fds: self.last_server.as_ref().and_then(|s| s.open_fds),
            accept_queue_overflows: k.as_ref().map(|k| k.queue_overflows()),
            nofile: self.foreign.as_ref().and_then(ForeignServer::nofile),
            emfile_line: self
                .foreign
                .as_ref()
                .and_then(ForeignServer::fd_exhaustion_line),
        }
    }

    /// The push phase without c1m's control endpoint: each push is marked on the client
    /// (frames carry no id), triggered, and awaited; with `none`, whatever the server
    /// sends within `--push-wait` is measured. Returns the phase's notes.
    async fn foreign_push(&mut self, args: &RunArgs) -> Result<Vec<String>> {
        let mut notes = Vec::new();
        let pushes = if self.trigger == PushTrigger::None {
            1
        } else {
            args.pushes
        };
        for id in 1..=u64::from(pushes) {
            let open = self
                .last_client
                .as_ref()
                .map(|c| c.counters.open)
                .unwrap_or(0);
            // With `none`, every connection should get `--pushes` frames in the wait.
            let want = if self.trigger == PushTrigger::None {
                open * u64::from(args.pushes)
            } else {
                open
            };
            self.client_call(&format!("mark {id} 0"))
                .await
                .context("telling the client which push comes")?;
            // Every shard must count the frames under this id before the server sends.
            if !self
                .wait_for(
                    "the client's push mark",
                    Limit::Total(Duration::from_secs(10)),
                    |_, c, _| c.is_some_and(|c| c.push_mark >= id),
                )
                .await?
            {
                return Ok(notes);
            }
            // The trigger instant, told just before it fires (the shards take commands
            // before the I/O that follows them), so fan-out starts where the push did.
            if self.trigger != PushTrigger::None {
                let fired_at = crate::workload::sys::realtime_ns();
                self.client_call(&format!("mark {id} {fired_at}"))
                    .await
                    .context("telling the client when the push was triggered")?;
            }
            let pid = self.foreign.as_ref().map(|f| f.pid).filter(|p| *p > 0);
            self.trigger
                .fire(pid)
                .await
                .with_context(|| format!("--push-trigger {}", self.trigger))?;
            let reached = self
                .wait_for("push", Limit::Total(args.push_wait), |_, c, _| {
                    c.is_some_and(|c| c.pushes.iter().any(|p| p.push_id == id && p.count >= want))
                })
                .await;
            match reached {
                Ok(true) => {}
                Ok(false) => return Ok(notes),
                Err(_) => {
                    let c = self.last_client.as_ref();
                    let got = c
                        .and_then(|c| c.pushes.iter().find(|p| p.push_id == id))
                        .map(|p| p.count)
                        .unwrap_or(0);
                    let undecodable = c.map(|c| c.counters.push_undecodable).unwrap_or(0);
                    let secs = args.push_wait.as_secs_f64();
                    let w = if got == 0 {
                        format!(
                            "push {id}: no push arrived within {secs:.0} s (--push-trigger {}, --push-format {}); frames that did not decode: {}",
                            self.trigger,
                            args.push_format,
                            count(undecodable)
                        )
                    } else {
                        format!(
                            "push {id}: {} of {} frames arrived within {secs:.0} s (--push-trigger {}); frames that did not decode: {}",
                            count(got),
                            count(want),
                            self.trigger,
                            count(undecodable)
                        )
                    };
                    self.warn(w.clone());
                    notes.push(w);
                }
            }
        }
        Ok(notes)
    }
}

/// Kernel ESTABLISHED equals the app's open count on both sides.
fn counts_agree(s: Option<&AppSnapshot>, c: Option<&AppSnapshot>, k: Option<&KernelView>) -> bool {
    use c1m_common::tcp_state::ESTABLISHED;
    let (Some(s), Some(c)) = (s, c) else {
        return false;
    };
    match k {
        Some(k) => {
            k.server.state(ESTABLISHED) == s.counters.open as i64
                && k.client.state(ESTABLISHED) == c.counters.open as i64
        }
        None => s.counters.open == c.counters.open,
    }
}

fn per_connection(
    k: Option<&KernelView>,
    s: Option<&AppSnapshot>,
    c: Option<&AppSnapshot>,
) -> PerConnection {
    let connections = c
        .map(|c| c.counters.open)
        .or(s.map(|s| s.counters.open))
        .unwrap_or(0);
    let memory = k.and_then(|k| k.memory.as_ref());
    // Leftover TIME_WAIT and request sockets (e.g. of an earlier run) are not part of
    // the held connections: take their slab cost out before dividing.
    let held = memory.map(|m| {
        let cost = |cache: &str| m.slab_object_bytes.get(cache).copied().unwrap_or(0);
        let mini = m.total.time_wait_sockets * cost("tw_sock_TCP")
            + m.total.request_sockets * cost("request_sock_TCP");
        (
            m.total.total_bytes.saturating_sub(mini),
            m.total.full_sockets,
        )
    });
    PerConnection {
        connections,
        server_user_bytes: s.and_then(|s| s.rss_per_connection_bytes),
        client_user_bytes: c.and_then(|c| c.rss_per_connection_bytes),
        kernel_bytes: held
            .filter(|_| connections > 0)
            .map(|(bytes, _)| bytes as f64 / connections as f64),
        kernel_bytes_per_socket: held
            .filter(|(_, n)| *n > 0)
            .map(|(bytes, n)| bytes as f64 / n as f64),
    }
}

fn usage(before: Option<&AppSnapshot>, after: Option<&AppSnapshot>) -> ProcessUsage {
    let (u0, s0) = before
        .map(|b| (b.cpu_user_s, b.cpu_sys_s))
        .unwrap_or((0.0, 0.0));
    match after {
        Some(a) => ProcessUsage {
            cpu_user_s: (a.cpu_user_s - u0).max(0.0),
            cpu_sys_s: (a.cpu_sys_s - s0).max(0.0),
            rss_bytes: a.rss_bytes,
            threads: a.threads,
            open_fds: a.open_fds,
        },
        None => ProcessUsage::default(),
    }
}

/// User and system CPU seconds of this process (the observer and the orchestration).
pub fn own_cpu() -> (f64, f64) {
    crate::procstat::cpu_seconds(std::process::id()).unwrap_or((0.0, 0.0))
}

/// Resident memory of this process, bytes.
pub fn own_rss() -> u64 {
    crate::procstat::rss_bytes(std::process::id()).unwrap_or(0)
}

/// Whose count of a push's frames judges it: the lab's client (frames received) or, with
/// external clients, the server (frames written; what each host received is in its own
/// folder, and `c1m merge` checks it). One choice for the wait, its stall limit and its
/// warning.
fn push_witness<'a>(
    external: bool,
    server: Option<&'a AppSnapshot>,
    client: Option<&'a AppSnapshot>,
) -> Option<&'a AppSnapshot> {
    if external { server } else { client }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_utc_calendar_times() {
        assert_eq!(crate::fmt::stamp(0), "19700101-000000");
        assert_eq!(crate::fmt::stamp(1_795_998_541_000), "20261130-002901");
    }

    #[test]
    fn default_target_says_why() {
        let (n, why) = resolve_target(Some(TargetArg::Count(5000)));
        assert_eq!(n, 5000);
        assert!(why.contains("allows"));
        let (n, why) = resolve_target(Some(TargetArg::Max));
        assert!(n == 1000 || n % 10_000 == 0, "{n}");
        assert!(why.starts_with("max: "), "{why}");
        assert_eq!(parse_target("max"), Ok(TargetArg::Max));
        assert_eq!(parse_target("25000"), Ok(TargetArg::Count(25_000)));
        assert!(parse_target("0").is_err());
    }
}
