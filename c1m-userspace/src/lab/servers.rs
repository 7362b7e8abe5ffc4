//! `c1m run --servers python,node,go,netty,c1m-epoll,c1m-tokio`: the same phases against each named
//! server in turn, one run folder each under one comparison folder, then the comparison
//! of `c1m compare` written there and printed. Here: how each server is started, how its
//! push is triggered and what its push frame looks like, the order of the runs, and the
//! sequence itself (each run is a `c1m run` process with the flags of its server, kept
//! apart from the others by `run/isolation.rs`). The
//! reference servers live in `reference-servers/` (their protocol:
//! `reference-servers/PROTOCOL.md`) and are built by `cargo xtask reference-servers` into
//! `target/reference-servers/<name>/run`.

use std::{
    fmt,
    path::{Path, PathBuf},
    process::ExitStatus,
    str::FromStr,
};

use anyhow::{Context as _, Result, bail};
use thiserror::Error;

use super::{
    compare::{
        self,
        cli::{CompareArgs, EXIT_BAD_INPUT},
        input::RunSpec,
    },
    export::load_run,
    model::Outcome,
    run::{
        child_args,
        flags::{Clients, RunArgs},
        isolation::{self, Isolation},
    },
};
use crate::{
    util::PortList,
    workload::{
        config::EngineKind,
        push_format::PushFormat,
        push_rule::PushInstant,
        push_trigger::{PushTrigger, Signal},
    },
};

/// A server `c1m run --servers` knows by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReferenceServer {
    /// `websockets` on asyncio.
    Python,
    /// `ws` on Node.js.
    Node,
    /// `gorilla/websocket`.
    Go,
    /// Netty 4.1, NIO.
    Netty,
    /// c1m's own server, epoll engine.
    C1mEpoll,
    /// c1m's own server, tokio engine (a task per connection).
    C1mTokio,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ServerError {
    #[error("unknown server `{0}`: pick from {names}", names = ReferenceServer::names())]
    Unknown(String),
    #[error("--servers names `{0}` twice: give each server once and --repeat K to repeat")]
    Twice(String),
    #[error("--servers is empty: pick from {names}", names = ReferenceServer::names())]
    Empty,
    #[error(
        "{server}: {} not built: run `cargo xtask reference-servers`",
        run.display()
    )]
    NotBuilt {
        server: ReferenceServer,
        run: PathBuf,
    },
}

/// The `c1m run` flags that put one server under the workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFlags {
    /// `--server-cmd`, quoted as the flag takes it; `None` for c1m's own server.
    pub server_cmd: Option<String>,
    pub push_trigger: PushTrigger,
    pub push_format: PushFormat,
    /// The instant the one stamp of `push_format` is taken (None: c1m's frame carries
    /// both).
    pub push_stamp: Option<PushInstant>,
    /// c1m's own server: its engine (the lab's client keeps `--engine`, so every server
    /// meets the same client).
    pub server_engine: Option<EngineKind>,
}

impl ServerFlags {
    /// `args` with these flags in place of the user's (which `--servers` refuses).
    pub fn apply(self, args: &mut RunArgs) {
        args.server_cmd = self.server_cmd;
        args.push_trigger = Some(self.push_trigger);
        args.push_format = self.push_format;
        args.push_stamp = self.push_stamp;
        args.server_engine = self.server_engine;
    }
}

impl ReferenceServer {
    pub const ALL: [ReferenceServer; 6] = [
        ReferenceServer::Python,
        ReferenceServer::Node,
        ReferenceServer::Go,
        ReferenceServer::Netty,
        ReferenceServer::C1mEpoll,
        ReferenceServer::C1mTokio,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ReferenceServer::Python => "python",
            ReferenceServer::Node => "node",
            ReferenceServer::Go => "go",
            ReferenceServer::Netty => "netty",
            ReferenceServer::C1mEpoll => "c1m-epoll",
            ReferenceServer::C1mTokio => "c1m-tokio",
        }
    }

    fn names() -> String {
        Self::ALL.map(Self::name).join(", ")
    }

    /// c1m's own server, and its engine; `None` for a reference server.
    fn own_engine(self) -> Option<EngineKind> {
        match self {
            ReferenceServer::C1mEpoll => Some(EngineKind::Epoll),
            ReferenceServer::C1mTokio => Some(EngineKind::Tokio),
            _ => None,
        }
    }

    /// Built by `cargo xtask reference-servers`; c1m's own server is c1m itself.
    fn is_reference(self) -> bool {
        self.own_engine().is_none()
    }

    /// The `run` wrapper under `built` (`target/reference-servers`).
    pub fn run_script(self, built: &Path) -> Option<PathBuf> {
        self.is_reference()
            .then(|| built.join(self.name()).join("run"))
    }

    /// The flags for `c1m run` against this server on `host`:`ports`. Fails with the
    /// build command when a reference server is not built.
    pub fn flags(
        self,
        built: &Path,
        host: &str,
        ports: &PortList,
    ) -> Result<ServerFlags, ServerError> {
        let Some(run) = self.run_script(built) else {
            return Ok(ServerFlags {
                server_cmd: None,
                push_trigger: PushTrigger::Control,
                push_format: PushFormat::C1m,
                push_stamp: None,
                server_engine: self.own_engine(),
            });
        };
        if !run.exists() {
            return Err(ServerError::NotBuilt { server: self, run });
        }
        let script = run.display().to_string();
        let ports = ports.to_string();
        let argv = [script.as_str(), "--host", host, "--ports", ports.as_str()];
        // Only a NUL byte cannot be quoted, and neither a path nor an argument (both
        // C strings) can hold one.
        let server_cmd = shlex::try_join(argv).unwrap_or_else(|_| argv.join(" "));
        // The protocol's push: one SIGUSR1, one 8-byte little-endian µs stamp, taken
        // once per broadcast.
        Ok(ServerFlags {
            server_cmd: Some(server_cmd),
            push_trigger: PushTrigger::Signal(Signal {
                name: "USR1",
                number: libc::SIGUSR1,
            }),
            push_format: PushFormat::U64leUs,
            push_stamp: Some(PushInstant::Broadcast),
            server_engine: None,
        })
    }
}

impl fmt::Display for ReferenceServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ReferenceServer {
    type Err = ServerError;

    fn from_str(s: &str) -> Result<Self, ServerError> {
        Self::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| ServerError::Unknown(s.to_owned()))
    }
}

/// `--servers a,b,c`: each name once, in the order given.
pub fn parse_list(s: &str) -> Result<Vec<ReferenceServer>, ServerError> {
    let mut out: Vec<ReferenceServer> = Vec::new();
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let server = name.parse()?;
        if out.contains(&server) {
            return Err(ServerError::Twice(name.to_owned()));
        }
        out.push(server);
    }
    if out.is_empty() {
        return Err(ServerError::Empty);
    }
    Ok(out)
}

/// The order of the runs for `--repeat K`: each entry is (server, repeat index), every
/// round runs each server once. What a run inherits from the one before it (memory the
/// kernel has not given back yet, a warm or busy box; without a fresh network namespace,
/// its TIME_WAIT sockets) must weigh on every server alike, so each server should follow
/// each other server equally often. Rotating the list did not do that: `a b c`, `b c a`,
/// `c a b` has `b` after `a` in every round. The rounds are the rows of a Williams
/// design (the crossover design balanced for first-order carry-over): over its period
/// (n rounds for an even number of servers, 2n for an odd one) every ordered pair stands
/// next to each other within rounds equally often and every server runs first equally
/// often. The rows of a period are taken in the order that keeps the pairs across round
/// boundaries balanced too (the row that leaves the fewest repeats), so over a period
/// the counts of "a right after b", boundaries included, differ by at most one.
pub fn schedule(servers: &[ReferenceServer], repeat: usize) -> Vec<(ReferenceServer, usize)> {
    balanced_order(servers.len(), repeat)
        .into_iter()
        .enumerate()
        .map(|(i, s)| (servers[s], i / servers.len().max(1)))
        .collect()
}

/// The rows of a Williams design for `n` treatments: the cyclic Latin square whose first
/// row is 0, 1, n−1, 2, n−2, …, and for odd `n` also its rows reversed.
fn williams_rows(n: usize) -> Vec<Vec<usize>> {
    let mut first = Vec::with_capacity(n);
    let (mut lo, mut hi) = (1, n);
    for i in 0..n {
        // 0, then alternately the next from the bottom and the next from the top.
        if i == 0 {
            first.push(0);
        } else if i % 2 == 1 {
            first.push(lo);
            lo += 1;
        } else {
            hi -= 1;
            first.push(hi);
        }
    }
    let mut rows: Vec<Vec<usize>> = (0..n)
        .map(|r| first.iter().map(|x| (x + r) % n).collect())
        .collect();
    if n % 2 == 1 {
        let mirrored: Vec<Vec<usize>> = rows
            .iter()
            .map(|r| r.iter().rev().copied().collect())
            .collect();
        rows.extend(mirrored);
    }
    rows
}

/// `rounds` rounds of `0..n`, one after another, as indices (see [`schedule`]).
fn balanced_order(n: usize, rounds: usize) -> Vec<usize> {
    let rows = williams_rows(n);
    // follows[a][b]: how often b ran right after a so far.
    let mut follows = vec![vec![0u32; n]; n];
    let mut order: Vec<usize> = Vec::with_capacity(n * rounds);
    let mut unused: Vec<usize> = Vec::new();
    for _ in 0..rounds {
        if unused.is_empty() {
            unused = (0..rows.len()).collect();
        }
        // The row whose pairs, with the one across the boundary, leave the counts most
        // even: the lowest highest count, then the smallest spread, then no server
        // right after itself, then the fewest repeats; ties go to the design's order.
        let cost = |row: &[usize]| {
            let mut f = follows.clone();
            let mut itself = 0;
            let boundary = order.last().map(|&last| (last, row[0]));
            for (a, b) in boundary
                .into_iter()
                .chain(row.windows(2).map(|w| (w[0], w[1])))
            {
                f[a][b] += 1;
                itself += u32::from(a == b);
            }
            let others = (0..n).flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| (a, b)));
            let counts: Vec<u32> = others.map(|(a, b)| f[a][b]).collect();
            let max = counts.iter().copied().max().unwrap_or(0);
            let min = counts.iter().copied().min().unwrap_or(0);
            let squares: u32 = counts.iter().map(|c| c * c).sum();
            (max, max - min, itself, squares)
        };
        let Some(pick) = unused.iter().copied().min_by_key(|&i| (cost(&rows[i]), i)) else {
            break;
        };
        unused.retain(|&i| i != pick);
        for &s in &rows[pick] {
            if let Some(&last) = order.last() {
                follows[last][s] += 1;
            }
            order.push(s);
        }
    }
    order
}

/// The `c1m compare` argument for one run folder: its server's name, so repeats group.
pub fn compare_arg(run_dir: &Path, server: ReferenceServer) -> RunSpec {
    RunSpec {
        dir: run_dir.to_owned(),
        name: server.name().to_owned(),
    }
}

/// Where `cargo xtask reference-servers` puts the servers: `target/reference-servers`,
/// beside the `target/<profile>/` that holds this binary, unless `C1M_REFERENCE_SERVERS`
/// names another folder (a binary installed elsewhere).
pub fn built_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("C1M_REFERENCE_SERVERS") {
        return Ok(dir.into());
    }
    let exe = std::env::current_exe().context("locating the c1m binary")?;
    exe.parent()
        .and_then(Path::parent)
        .map(|target| target.join("reference-servers"))
        .with_context(|| format!("{}: no target folder above the binary", exe.display()))
}

/// The flags `--servers` sets for each server itself, with the user's value when given.
fn refused_flags(args: &RunArgs) -> Vec<&'static str> {
    [
        ("--server-cmd", args.server_cmd.is_some()),
        ("--target", args.target.is_some()),
        ("--push-trigger", args.push_trigger.is_some()),
        ("--push-format", args.push_format != PushFormat::C1m),
        ("--push-stamp", args.push_stamp.is_some()),
    ]
    .into_iter()
    .filter_map(|(flag, given)| given.then_some(flag))
    .collect()
}

/// How bad an outcome is for the exit code of the whole sequence.
fn severity(o: Outcome) -> u8 {
    match o {
        Outcome::Complete => 0,
        Outcome::Degraded => 1,
        Outcome::Running | Outcome::Failed => 2,
        Outcome::Interrupted => 3,
    }
}

/// SIGINT, SIGTERM and SIGHUP to the sequence: each stops it, and is passed on to the
/// run under way (a TUI in raw mode takes Ctrl-C as a key and ends its run itself; the
/// sequence then stops on the run's outcome).
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
    stop: bool,
}

impl Signals {
    fn new() -> Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        crate::util::note_terminals();
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt()).context("installing signal handlers")?,
            terminate: signal(SignalKind::terminate()).context("installing signal handlers")?,
            hangup: signal(SignalKind::hangup()).context("installing signal handlers")?,
            stop: false,
        })
    }

    /// The next signal's number.
    async fn next(&mut self) -> i32 {
        tokio::select! {
            _ = self.interrupt.recv() => libc::SIGINT,
            _ = self.terminate.recv() => libc::SIGTERM,
            _ = self.hangup.recv() => {
                // The terminal is gone: the comparison printed at the end must not fail.
                crate::util::leave_dead_terminal();
                libc::SIGHUP
            }
        }
    }
}

/// Runs `c1m ARGV…` (one run of the sequence) to its end, passing the sequence's signals
/// on. Called from the lab's main thread (the `block_on` of `run::main`), which lives as
/// long as the sequence: the run dies with it.
async fn run_one(argv: &[std::ffi::OsString], signals: &mut Signals) -> Result<ExitStatus> {
    let exe = std::env::current_exe().context("locating the c1m binary")?;
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args(argv).kill_on_drop(true);
    let parent = std::process::id();
    // SAFETY: prctl and getppid are async-signal-safe and touch no memory.
    unsafe {
        cmd.pre_exec(move || crate::util::die_with_parent(parent));
    }
    let mut child = cmd.spawn().context("starting a run of the sequence")?;
    loop {
        tokio::select! {
            status = child.wait() => return status.context("waiting for a run of the sequence"),
            sig = signals.next() => {
                signals.stop = true;
                if let Some(pid) = child.id() {
                    // SAFETY: our own child, not yet reaped (its pid cannot be reused).
                    unsafe { libc::kill(pid as i32, sig) };
                }
            }
        }
    }
}

/// The sequence's size and length before it starts: each run's ramp at --rate, its
/// idle phase and ~15 s of start, settling, push and teardown (a wait for clean ports
/// comes on top).
fn estimate(args: &RunArgs, runs: usize, isolation: Isolation) -> String {
    let (n, _) = super::run::plan::resolve_target(args.connections);
    let ramp = n as f64
        / if args.rate == 0 {
            25_000.0
        } else {
            args.rate as f64
        };
    let each = ramp + args.idle.as_secs_f64() + 15.0;
    let wait = match isolation {
        Isolation::Wait => format!(
            ", plus up to --clean-wait {}s each",
            args.clean_wait.as_secs()
        ),
        Isolation::Netns => String::new(),
    };
    format!(
        "{runs} run{}, ~{} each, estimated {} in all{wait}",
        if runs == 1 { "" } else { "s" },
        crate::fmt::duration(each),
        crate::fmt::duration(each * runs as f64)
    )
}

/// How the runs are kept apart: `--isolation`, or a namespace each where that works
/// (root, loopback addresses), else the wait; with the reason for the default.
fn choose_isolation(args: &RunArgs, host: std::net::IpAddr) -> Result<(Isolation, String)> {
    let mut addrs = vec![host];
    if let Some(s) = &args.source {
        addrs.extend(crate::args::parse_addrs(std::slice::from_ref(s))?);
    }
    let possible = isolation::netns_possible(&addrs);
    Ok(match (args.isolation, possible) {
        (Some(Isolation::Netns), Err(why)) => bail!(
            "--isolation netns: {why}; use --isolation wait (each run waits for the sockets an earlier one left)"
        ),
        (Some(i), _) => (i, "--isolation".to_owned()),
        (None, Ok(())) => (Isolation::Netns, "the default as root".to_owned()),
        (None, Err(why)) => (Isolation::Wait, why),
    })
}

/// `c1m run --servers NAMES [--repeat K]`: the lab's run once per entry of [`schedule`],
/// into `<out>/<stamp>-servers/<name>-<k>/`, then the comparison of them all into that
/// folder. Each run is a `c1m run` process of its own (its memory, fds and, as root, its
/// network namespace), so nothing but the box carries from one run to the next; the
/// sequence keeps only the order and the comparison. Everything is checked before the
/// first run starts: a bad name or a server not built exits 2, a flag `--servers` sets
/// itself exits 1. A failed run is listed with its outcome and the sequence goes on;
/// Ctrl-C ends it and compares what was measured.
pub async fn run_all(mut args: RunArgs) -> Result<i32> {
    let names = args.servers.take().unwrap_or_default();
    let servers = match parse_list(&names) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("c1m run: --servers: {e}");
            return Ok(EXIT_BAD_INPUT);
        }
    };
    if let Some(b) = &args.baseline
        && !servers.iter().any(|s| s.name() == b)
    {
        let choices: Vec<&str> = servers.iter().map(|s| s.name()).collect();
        eprintln!(
            "c1m run: --baseline {b}: not among --servers; pick from {}",
            choices.join(", ")
        );
        return Ok(EXIT_BAD_INPUT);
    }
    if let Some(flag) = refused_flags(&args).first() {
        bail!(
            "--servers starts each named server with its own push, so it cannot be used with {flag}: drop one of them"
        );
    }
    if args.clients == Clients::External {
        bail!("--servers runs its clients on this box: drop --clients external");
    }
    let ip = match crate::args::parse_addrs(std::slice::from_ref(&args.addr))?[..] {
        [ip] => ip,
        _ => bail!(
            "--servers takes one --addr (a reference server listens on one address), not {}",
            args.addr
        ),
    };
    let host = ip.to_string();
    let (isolation, why) = choose_isolation(&args, ip)?;
    let built = built_dir()?;
    let mut flags = Vec::new();
    for s in &servers {
        match s.flags(&built, &host, &args.ports) {
            Ok(f) => flags.push((*s, f)),
            Err(e) => {
                eprintln!("c1m run: {e}");
                return Ok(EXIT_BAD_INPUT);
            }
        }
    }
    // What would fail every run fails now, before any wait or folder.
    super::run::preflight::sequence(&args, servers.iter().any(|s| s.is_reference()))?;
    // Never another lab's, as a run folder (`run/folder.rs`).
    let stamp = format!("{}-servers", crate::fmt::stamp(crate::util::unix_ms_now()));
    let dir = super::run::folder::create_unique(&args.out, &stamp).with_context(|| {
        format!(
            "creating the comparison folder {}",
            args.out.join(&stamp).display()
        )
    })?;
    let mut signals = Signals::new()?;
    eprintln!(
        "c1m run --servers: {} ({why})",
        match isolation {
            Isolation::Netns => "each run in a network namespace of its own",
            Isolation::Wait =>
                "each run waits until the sockets an earlier run left on its ports are gone",
        }
    );
    let order = schedule(&servers, args.repeat as usize);
    eprintln!(
        "c1m run --servers: {}",
        estimate(&args, order.len(), isolation)
    );
    let mut runs = Vec::new();
    let mut worst = Outcome::Complete;
    for (i, (server, r)) in order.iter().enumerate() {
        // A signal that came between two runs (while the last one was read back) stops
        // the sequence here, before the next run starts only to be killed.
        tokio::select! {
            biased;
            _ = signals.next() => signals.stop = true,
            () = std::future::ready(()) => {}
        }
        if signals.stop {
            worst = Outcome::Interrupted;
            break;
        }
        let run_dir = dir.join(format!("{server}-{}", r + 1));
        eprintln!(
            "c1m run --servers: {server} ({} of {}) into {}",
            i + 1,
            order.len(),
            run_dir.display()
        );
        let mut one = args.clone();
        if let Some((_, f)) = flags.iter().find(|(s, _)| s == server) {
            f.clone().apply(&mut one);
        }
        one.repeat = 1;
        // The comparison's, not the run's: a run on its own compares with nothing.
        one.baseline = None;
        one.isolation = Some(isolation);
        one.server_name = Some(server.name().to_owned());
        one.into = Some(run_dir.clone());
        let ended = match child_args::run_argv(&one) {
            Ok(argv) => run_one(&argv, &mut signals).await,
            Err(e) => Err(e.into()),
        };
        // A run that could not even say why it stopped (killed, or never started).
        let concluded = load_run(&run_dir).is_ok_and(|r| r.outcome != Outcome::Running);
        let failure = match ended {
            Err(e) => Some(e),
            Ok(status) if !concluded => Some(anyhow::anyhow!(
                "its c1m run process ended ({status}) before concluding"
            )),
            Ok(_) => None,
        };
        // The sequence goes on (and compares what it has) even when the folder cannot
        // take the failure either, e.g. a full disk.
        if let Some(e) = failure
            && let Err(w) = super::run::folder::record_failure(&run_dir, &e)
        {
            eprintln!("c1m run --servers: {server}: {e:#}; and recording it: {w:#}");
        }
        let outcome = load_run(&run_dir)
            .map(|r| r.outcome)
            .unwrap_or(Outcome::Failed);
        if severity(outcome) > severity(worst) {
            worst = outcome;
        }
        runs.push(compare_arg(&run_dir, *server));
        if outcome == Outcome::Interrupted {
            break;
        }
    }
    // The table's columns in the order the servers were named (the rounds' order is
    // the Williams design's); each server's repeats keep their run order.
    runs.sort_by_key(|r| servers.iter().position(|s| s.name() == r.name));
    let compare = CompareArgs {
        runs,
        out: dir.clone(),
        baseline: args.baseline.clone(),
    };
    let code = if args.json {
        compare::cli::run(compare, &mut std::io::stderr().lock())?
    } else {
        compare::cli::run(compare, &mut std::io::stdout().lock())?
    };
    eprintln!("c1m run --servers: comparison folder {}", dir.display());
    if code != 0 {
        return Ok(code);
    }
    Ok(worst.exit_code())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::lab::run::flags::ServerSpec;

    #[test]
    fn names_round_trip_and_lists_are_checked() {
        for s in ReferenceServer::ALL {
            assert_eq!(s.name().parse::<ReferenceServer>().unwrap(), s);
        }
        assert_eq!(
            parse_list("go, node,c1m-epoll").unwrap(),
            vec![
                ReferenceServer::Go,
                ReferenceServer::Node,
                ReferenceServer::C1mEpoll
            ]
        );
        assert_eq!(
            parse_list("go,rust").unwrap_err().to_string(),
            "unknown server `rust`: pick from python, node, go, netty, c1m-epoll, c1m-tokio"
        );
        assert_eq!(
            parse_list("go,go").unwrap_err(),
            ServerError::Twice("go".into())
        );
        assert_eq!(parse_list(" , ").unwrap_err(), ServerError::Empty);
    }

    /// How often each server ran right after each other one (a != b), and right after
    /// itself, over the whole sequence, round boundaries included.
    fn follow_counts(order: &[usize], n: usize) -> (Vec<u32>, u32) {
        let mut f = vec![vec![0u32; n]; n];
        for w in order.windows(2) {
            f[w[0]][w[1]] += 1;
        }
        let others = (0..n)
            .flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| (a, b)))
            .map(|(a, b)| f[a][b])
            .collect();
        (others, (0..n).map(|a| f[a][a]).sum())
    }

    #[test]
    fn each_server_follows_each_other_equally_often_over_a_period() {
        for n in 2..=6 {
            // A Williams design's period: n rounds for even n, 2n for odd n (for n = 3
            // and 5 no n rounds can put every pair side by side once).
            let period = if n % 2 == 0 { n } else { 2 * n };
            // Two periods stay balanced for an even count; for 3 or 5 servers the second
            // period's boundaries repeat the first's.
            for periods in 1..=(if n % 2 == 0 { 2 } else { 1 }) {
                let rounds = period * periods;
                let order = balanced_order(n, rounds);
                assert_eq!(order.len(), n * rounds);
                for (r, round) in order.chunks(n).enumerate() {
                    let mut sorted = round.to_vec();
                    sorted.sort_unstable();
                    assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "n={n} round {r}");
                }
                // Within rounds, the design itself: every ordered pair equally often.
                let mut within = vec![vec![0u32; n]; n];
                for round in order.chunks(n) {
                    for w in round.windows(2) {
                        within[w[0]][w[1]] += 1;
                    }
                }
                let want = (rounds / n) as u32;
                for (a, row) in within.iter().enumerate() {
                    for (b, &count) in row.iter().enumerate().filter(|&(b, _)| b != a) {
                        assert_eq!(count, want, "n={n} rounds={rounds}: {b} after {a}");
                    }
                }
                // With the boundaries between rounds: as even as the count allows.
                let (counts, itself) = follow_counts(&order, n);
                let (min, max) = (
                    counts.iter().copied().min().unwrap(),
                    counts.iter().copied().max().unwrap(),
                );
                assert!(max - min <= 1, "n={n} rounds={rounds}: counts {counts:?}");
                let pairs = (n * (n - 1)) as u32;
                let total: u32 = counts.iter().sum();
                assert_eq!(min, total / pairs, "n={n} rounds={rounds}");
                // No server right after itself, except where two servers allow no other.
                if n > 3 {
                    assert_eq!(itself, 0, "n={n} rounds={rounds}");
                }
                // Every server first equally often.
                let mut first = vec![0usize; n];
                for round in order.chunks(n) {
                    first[round[0]] += 1;
                }
                assert!(first.iter().all(|&f| f == rounds / n), "n={n}: {first:?}");
            }
        }
    }

    #[test]
    fn a_shorter_sequence_repeats_no_pair_more_than_once() {
        // Fewer rounds than a period (the usual --repeat 2 or 3): a pair comes twice
        // only once the sequence has nearly as many neighbours as there are pairs.
        for n in 2..=6 {
            for rounds in 1..=n {
                let (counts, _) = follow_counts(&balanced_order(n, rounds), n);
                let max = counts.iter().copied().max().unwrap();
                let pairs = n * (n - 1);
                let limit = if (n * rounds - 1) <= pairs - n { 1 } else { 2 };
                assert!(max <= limit, "n={n} rounds={rounds}: {counts:?}");
            }
        }
    }

    #[test]
    fn repeats_follow_the_balanced_order() {
        use ReferenceServer::*;
        let s = schedule(&[Python, Go, C1mEpoll, Node], 4);
        let mut after = std::collections::HashMap::new();
        for w in s.windows(2) {
            *after.entry((w[0].0, w[1].0)).or_insert(0) += 1;
        }
        // 15 neighbours over 12 ordered pairs: each pair once or twice, none missing.
        assert_eq!(after.len(), 12, "{s:?}");
        assert!(after.values().all(|&c| c == 1 || c == 2), "{after:?}");
        assert_eq!(s[0], (Python, 0));
        assert!(s.iter().take(4).all(|&(_, r)| r == 0));
        assert!(s.iter().skip(12).all(|&(_, r)| r == 3));
        assert!(schedule(&[Go], 0).is_empty());
        assert_eq!(schedule(&[Go], 2), vec![(Go, 0), (Go, 1)]);
        let arg = compare_arg(Path::new("c1m-runs/x"), Netty);
        assert_eq!(
            (arg.dir, arg.name.as_str()),
            (PathBuf::from("c1m-runs/x"), "netty")
        );
    }

    #[test]
    fn flags_start_the_built_script_and_signal_it() {
        let dir = crate::lab::export::fixture::test_dir("refserver-flags");
        let ports: PortList = "20000-20003".parse().unwrap();
        let err = ReferenceServer::Go
            .flags(&dir, "127.0.0.1", &ports)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "go: {}/go/run not built: run `cargo xtask reference-servers`",
                dir.display()
            )
        );
        std::fs::create_dir_all(dir.join("go")).unwrap();
        std::fs::write(dir.join("go/run"), "#!/bin/sh\n").unwrap();
        let f = ReferenceServer::Go
            .flags(&dir, "127.0.0.1", &ports)
            .unwrap();
        // Through `c1m run`'s own flags: the lab starts the script and signals it.
        let mut args = run_args(&[]);
        f.apply(&mut args);
        let (spec, trigger) = ServerSpec::of(&args).unwrap();
        let run = dir.join("go/run").display().to_string();
        assert_eq!(
            spec,
            ServerSpec::Command(
                [
                    run.as_str(),
                    "--host",
                    "127.0.0.1",
                    "--ports",
                    "20000-20003"
                ]
                .map(String::from)
                .to_vec()
            )
        );
        assert_eq!(trigger.to_string(), "signal:USR1");
        assert_eq!(args.push_format.to_string(), "u64le-us");
        let own = ReferenceServer::C1mEpoll
            .flags(&dir, "127.0.0.1", &ports)
            .unwrap();
        let mut args = run_args(&[]);
        own.apply(&mut args);
        assert_eq!(
            ServerSpec::of(&args).unwrap(),
            (ServerSpec::Own, PushTrigger::Control)
        );
        assert_eq!(args.push_format, PushFormat::C1m);
    }

    /// `c1m run ARGS` as the lab reads it.
    fn run_args(argv: &[&str]) -> RunArgs {
        #[derive(clap::Parser)]
        struct Run {
            #[command(flatten)]
            run: RunArgs,
        }
        let argv = std::iter::once("run").chain(argv.iter().copied());
        <Run as clap::Parser>::try_parse_from(argv).unwrap().run
    }

    #[test]
    fn servers_refuses_the_flags_it_sets_itself() {
        assert!(refused_flags(&run_args(&["--servers", "go"])).is_empty());
        assert_eq!(
            refused_flags(&run_args(&[
                "--servers",
                "go",
                "--server-cmd",
                "x",
                "--push-format",
                "text-ms",
            ])),
            vec!["--server-cmd", "--push-format"]
        );
        assert_eq!(
            refused_flags(&run_args(&["--target", "127.0.0.1:9000"])),
            vec!["--target"]
        );
    }
}
