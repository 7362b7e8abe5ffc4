//! `c1m run --servers python,node,go,netty,c1m-epoll,c1m-tokio`: the same phases against each named
//! server in turn, one run folder each under one comparison folder, then the comparison
//! of `c1m compare` written there and printed. Here: how each server is started, how its
//! push is triggered and what its push frame looks like, the order of the runs, and the
//! sequence itself (each run is the lab's own `run` with the flags of its server). The
//! reference servers live in `reference-servers/` (their protocol:
//! `reference-servers/PROTOCOL.md`) and are built by `cargo xtask reference-servers` into
//! `target/reference-servers/<name>/run`.

use std::{
    fmt,
    path::{Path, PathBuf},
    str::FromStr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use anyhow::{Context as _, Result, bail};
use thiserror::Error;

use super::{
    compare::{
        self,
        cli::{CompareArgs, EXIT_BAD_INPUT},
        input::RunSpec,
    },
    export::{load_run, write_run},
    model::{Outcome, RunRecord},
    run::{Clients, RunArgs},
};
use crate::{
    util::PortList,
    workload::{
        config::EngineKind,
        push_format::PushFormat,
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
        // The protocol's push: one SIGUSR1, one 8-byte little-endian µs stamp.
        Ok(ServerFlags {
            server_cmd: Some(server_cmd),
            push_trigger: PushTrigger::Signal(Signal {
                name: "USR1",
                number: libc::SIGUSR1,
            }),
            push_format: PushFormat::U64leUs,
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

/// The order of the runs for `--repeat K`: round `r` starts at server `r mod n`, so no
/// server always runs first (a box warming up, or filling its memory, over the rounds
/// then weighs on every server alike). Each entry is (server, repeat index).
pub fn schedule(servers: &[ReferenceServer], repeat: usize) -> Vec<(ReferenceServer, usize)> {
    let n = servers.len();
    (0..repeat)
        .flat_map(|r| (0..n).map(move |i| (servers[(r + i) % n], r)))
        .collect()
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

/// A run that stopped on an error before the lab could conclude it: its folder says
/// `failed` and why, so the comparison lists it beside the others.
fn record_failure(dir: &Path, error: &anyhow::Error) -> Result<()> {
    let mut record = load_run(dir).unwrap_or_else(|_| RunRecord {
        c1m_version: env!("CARGO_PKG_VERSION").to_owned(),
        started_unix_ms: super::run::now_ms(),
        ..RunRecord::default()
    });
    if record.outcome == Outcome::Running {
        record.outcome = Outcome::Failed;
        record.ended_unix_ms = super::run::now_ms();
        record
            .warnings
            .insert(0, format!("the run failed: {error:#}"));
    }
    write_run(dir, &record).with_context(|| format!("writing {}", dir.display()))?;
    Ok(())
}

/// SIGINT or SIGTERM at any time of the sequence, also between two runs (each run's
/// own handler ends that run; this one ends the sequence).
fn stop_flag() -> Result<Arc<AtomicBool>> {
    use tokio::signal::unix::{SignalKind, signal};
    let stop = Arc::new(AtomicBool::new(false));
    for kind in [SignalKind::interrupt(), SignalKind::terminate()] {
        let mut s = signal(kind).context("installing signal handlers")?;
        let flag = stop.clone();
        tokio::spawn(async move {
            if s.recv().await.is_some() {
                flag.store(true, Ordering::Relaxed);
            }
        });
    }
    Ok(stop)
}

/// `c1m run --servers NAMES [--repeat K]`: the lab's run once per entry of [`schedule`],
/// into `<out>/<stamp>-servers/<name>-<k>/`, then the comparison of them all into that
/// folder. Everything is checked before the first run starts: a bad name or a server not
/// built exits 2, a flag `--servers` sets itself exits 1. A failed run is listed with its
/// outcome and the sequence goes on; Ctrl-C ends it and compares what was measured.
pub async fn run_all(mut args: RunArgs) -> Result<i32> {
    let names = args.servers.take().unwrap_or_default();
    let servers = match parse_list(&names) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("c1m run: --servers: {e}");
            return Ok(EXIT_BAD_INPUT);
        }
    };
    if let Some(flag) = refused_flags(&args).first() {
        bail!(
            "--servers starts each named server with its own push, so it cannot be used with {flag}: drop one of them"
        );
    }
    if args.clients == Clients::External {
        bail!("--servers runs its clients on this box: drop --clients external");
    }
    let host = match crate::workload::cli::parse_addrs(std::slice::from_ref(&args.addr))?[..] {
        [ip] => ip.to_string(),
        _ => bail!(
            "--servers takes one --addr (a reference server listens on one address), not {}",
            args.addr
        ),
    };
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
    // Never another lab's, as a run folder (`run/folder.rs`).
    let stamp = format!("{}-servers", crate::fmt::stamp(super::run::now_ms()));
    let dir = super::run::folder::create_unique(&args.out, &stamp).with_context(|| {
        format!(
            "creating the comparison folder {}",
            args.out.join(&stamp).display()
        )
    })?;
    let stop = stop_flag()?;
    let order = schedule(&servers, args.repeat as usize);
    let mut runs = Vec::new();
    let mut worst = Outcome::Complete;
    for (i, (server, r)) in order.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
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
        if let Err(e) = super::run::run(one, Some(run_dir.clone())).await {
            eprintln!("c1m run --servers: {server}: {e:#}");
            record_failure(&run_dir, &e)?;
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
    let compare = CompareArgs {
        runs,
        out: dir.clone(),
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
    use crate::lab::run::ServerSpec;

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

    #[test]
    fn repeats_interleave_and_rotate() {
        use ReferenceServer::*;
        let s = schedule(&[Python, Go, C1mEpoll], 3);
        assert_eq!(
            s,
            vec![
                (Python, 0),
                (Go, 0),
                (C1mEpoll, 0),
                (Go, 1),
                (C1mEpoll, 1),
                (Python, 1),
                (C1mEpoll, 2),
                (Python, 2),
                (Go, 2),
            ]
        );
        assert!(schedule(&[Go], 0).is_empty());
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
