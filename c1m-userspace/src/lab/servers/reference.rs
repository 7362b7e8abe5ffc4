//! The servers `--servers` knows by name: how each is started from its built script,
//! how its push is triggered, what its push frame looks like, and where they are built.

use std::{
    fmt,
    path::{Path, PathBuf},
    str::FromStr,
};

use anyhow::{Context as _, Result};
use thiserror::Error;

use crate::{
    compare::input::RunSpec,
    lab::run::flags::RunArgs,
    util::PortList,
    workload::{
        config::EngineKind,
        limits::{self, NoFile},
        push_format::PushFormat,
        push_rule::PushInstant,
        push_trigger::{PushTrigger, Signal},
    },
};

/// A server `c1m run --servers` knows by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ReferenceServer {
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
pub(crate) enum ServerError {
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
pub(crate) struct ServerFlags {
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
    /// The `--workers K` in `server_cmd`, when K > 1.
    pub server_workers: Option<u64>,
}

impl ServerFlags {
    /// `args` with these flags in place of the user's (which `--servers` refuses).
    pub(crate) fn apply(self, args: &mut RunArgs) {
        args.server_cmd = self.server_cmd;
        args.push_trigger = Some(self.push_trigger);
        args.push_format = self.push_format;
        args.push_stamp = self.push_stamp;
        args.server_engine = self.server_engine;
        args.server_workers = self.server_workers;
    }

    /// A server started from a command that runs in one process: its fd limit caps it.
    pub(crate) fn single_process_command(&self) -> bool {
        self.server_cmd.is_some() && self.server_workers.is_none()
    }
}

impl ReferenceServer {
    pub(crate) const ALL: [ReferenceServer; 6] = [
        ReferenceServer::Python,
        ReferenceServer::Node,
        ReferenceServer::Go,
        ReferenceServer::Netty,
        ReferenceServer::C1mEpoll,
        ReferenceServer::C1mTokio,
    ];

    pub(crate) fn name(self) -> &'static str {
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
    pub(super) fn is_reference(self) -> bool {
        self.own_engine().is_none()
    }

    /// The `run` wrapper under `built` (`target/reference-servers`).
    pub(crate) fn run_script(self, built: &Path) -> Option<PathBuf> {
        self.is_reference()
            .then(|| built.join(self.name()).join("run"))
    }

    /// The flags for `c1m run` against this server on `host`:`ports`, a reference server
    /// spread over `workers` processes when that is more than one (c1m's own server
    /// sizes itself). Fails with the build command when a reference server is not built.
    pub(crate) fn flags(
        self,
        built: &Path,
        host: &str,
        ports: &PortList,
        workers: u64,
    ) -> Result<ServerFlags, ServerError> {
        let Some(run) = self.run_script(built) else {
            return Ok(ServerFlags {
                server_cmd: None,
                push_trigger: PushTrigger::Control,
                push_format: PushFormat::C1m,
                push_stamp: None,
                server_engine: self.own_engine(),
                server_workers: None,
            });
        };
        if !run.exists() {
            return Err(ServerError::NotBuilt { server: self, run });
        }
        let script = run.display().to_string();
        let ports = ports.to_string();
        let server_workers = (workers > 1).then_some(workers);
        let workers = workers.to_string();
        let mut argv = vec![script.as_str(), "--host", host, "--ports", ports.as_str()];
        if server_workers.is_some() {
            argv.extend(["--workers", workers.as_str()]);
        }
        // Only a NUL byte cannot be quoted, and neither a path nor an argument (both
        // C strings) can hold one.
        let server_cmd = shlex::try_join(argv.iter().copied()).unwrap_or_else(|_| argv.join(" "));
        // The protocol's push: one SIGUSR1, one 8-byte little-endian µs stamp, taken
        // once per broadcast.
        Ok(ServerFlags {
            server_cmd: Some(server_cmd),
            push_trigger: PushTrigger::Signal(Signal {
                name: "USR1",
                number: rustix::process::Signal::USR1,
            }),
            push_format: PushFormat::U64leUs,
            push_stamp: Some(PushInstant::Broadcast),
            server_engine: None,
            server_workers,
        })
    }
}

/// The worker processes a reference server needs for `connections` over `ports` (each
/// worker listens on every one): as many as c1m's own server runs for them
/// ([`limits::plan_server`]: each filled to 75% of RLIMIT_NOFILE less its listeners and
/// reserve, since SO_REUSEPORT's shares are uneven and a reference server has no valve
/// that closes its listeners when full), or 1 when one process holds them all. `hard` is
/// the fd limit the server runs with: c1m raises its soft limit to the hard one.
pub(crate) fn workers_for(connections: u64, ports: u64, hard: u64) -> u64 {
    let nofile = NoFile { soft: hard, hard };
    let plan = limits::plan_server(connections, ports, nofile, 0, 1);
    if plan.processes {
        plan.per_shard.len() as u64
    } else {
        1
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
pub(crate) fn parse_list(s: &str) -> Result<Vec<ReferenceServer>, ServerError> {
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

/// The `c1m compare` argument for one run folder: its server's name, so repeats group.
pub(crate) fn compare_arg(run_dir: &Path, server: ReferenceServer) -> RunSpec {
    RunSpec {
        dir: run_dir.to_owned(),
        name: server.name().to_owned(),
    }
}

/// Where `cargo xtask reference-servers` puts the servers: `target/reference-servers`,
/// beside the `target/<profile>/` that holds this binary, unless `C1M_REFERENCE_SERVERS`
/// names another folder (a binary installed elsewhere).
pub(crate) fn built_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("C1M_REFERENCE_SERVERS") {
        return Ok(dir.into());
    }
    let exe = std::env::current_exe().context("locating the c1m binary")?;
    exe.parent()
        .and_then(Path::parent)
        .map(|target| target.join("reference-servers"))
        .with_context(|| format!("{}: no target folder above the binary", exe.display()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
    fn a_reference_server_past_one_process_runs_as_many_workers_as_c1ms_own() {
        // This box: RLIMIT_NOFILE 20,000, the seeds' 100 ports: 68 workers of ~14,700.
        assert_eq!(workers_for(1_000_000, 100, 20_000), 68);
        assert_eq!(
            workers_for(1_000_000, 100, 20_000),
            limits::plan_server(
                1_000_000,
                100,
                NoFile {
                    soft: 20_000,
                    hard: 20_000
                },
                0,
                1
            )
            .per_shard
            .len() as u64
        );
        // Just past one process: two, each at ~63% of its cap.
        assert_eq!(workers_for(25_000, 4, 20_000), 2);
        // What fits one process runs as today, and an unlimited box never needs more.
        assert_eq!(workers_for(2_000, 4, 20_000), 1);
        assert_eq!(workers_for(10_000_000, 100, u64::MAX), 1);
    }

    #[test]
    fn workers_are_on_the_servers_command_line_only_past_one() {
        let dir = crate::report::fixture::test_dir("refserver-workers");
        std::fs::create_dir_all(dir.join("node")).unwrap();
        std::fs::write(dir.join("node/run"), "#!/bin/sh\n").unwrap();
        let ports: PortList = "20000-20003".parse().unwrap();
        let one = ReferenceServer::Node
            .flags(&dir, "127.0.0.1", &ports, 1)
            .unwrap();
        assert!(!one.server_cmd.as_deref().unwrap().contains("--workers"));
        assert_eq!(one.server_workers, None);
        assert!(one.single_process_command());
        let many = ReferenceServer::Node
            .flags(&dir, "127.0.0.1", &ports, 68)
            .unwrap();
        assert!(
            many.server_cmd
                .as_deref()
                .unwrap()
                .ends_with("--ports 20000-20003 --workers 68"),
            "{:?}",
            many.server_cmd
        );
        assert_eq!(many.server_workers, Some(68));
        assert!(!many.single_process_command());
        let mut args = crate::lab::run::child_args::defaults::<RunArgs>("run").unwrap();
        many.apply(&mut args);
        assert_eq!(args.server_workers, Some(68));
        // c1m's own server shards itself: never a --workers.
        let own = ReferenceServer::C1mEpoll
            .flags(&dir, "127.0.0.1", &ports, 68)
            .unwrap();
        assert_eq!((own.server_cmd, own.server_workers), (None, None));
    }

    #[test]
    fn a_runs_compare_argument_is_its_folder_named_by_its_server() {
        use ReferenceServer::*;
        let arg = compare_arg(Path::new("c1m-runs/x"), Netty);
        assert_eq!(
            (arg.dir, arg.name.as_str()),
            (PathBuf::from("c1m-runs/x"), "netty")
        );
    }
}
