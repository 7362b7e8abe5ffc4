//! The servers `c1m run --servers python,node,go,netty,c1m-epoll` puts under the same
//! workload, one after the other: how each is started, how its push is triggered and
//! what its push frame looks like. The reference servers live in `reference-servers/`
//! (their protocol: `reference-servers/PROTOCOL.md`) and are built by
//! `cargo xtask reference-servers` into `target/reference-servers/<name>/run`.
//!
//! The run itself needs `--server-cmd`, `--push-trigger` and `--push-format`;
//! [`ServerFlags`] carries their values in those flags' own spelling, so the lead wires
//! them where the flags are parsed.

use std::{
    fmt,
    path::{Path, PathBuf},
    str::FromStr,
};

use thiserror::Error;

use crate::util::PortList;

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
    /// c1m's own server (the epoll engine): started by `c1m run` as today.
    C1mEpoll,
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

/// How the client learns a push is due, in `--push-trigger`'s spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushTrigger {
    /// c1m's own control endpoint.
    Control,
    /// SIGUSR1 to the server's PID.
    SignalUsr1,
}

impl PushTrigger {
    pub fn flag_value(self) -> &'static str {
        match self {
            PushTrigger::Control => "control",
            PushTrigger::SignalUsr1 => "signal:USR1",
        }
    }
}

/// What a push frame holds, in `--push-format`'s spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushFormat {
    /// c1m's own 24-byte frame.
    C1m,
    /// 8 bytes, little-endian µs since the Unix epoch.
    U64LeUs,
}

impl PushFormat {
    pub fn flag_value(self) -> &'static str {
        match self {
            PushFormat::C1m => "c1m",
            PushFormat::U64LeUs => "u64le-us",
        }
    }
}

/// The `c1m run` flags that put one server under the workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFlags {
    /// `--server-cmd`: the argv of a foreign server; `None` for c1m's own.
    pub server_cmd: Option<Vec<String>>,
    pub push_trigger: PushTrigger,
    pub push_format: PushFormat,
}

impl ReferenceServer {
    pub const ALL: [ReferenceServer; 5] = [
        ReferenceServer::Python,
        ReferenceServer::Node,
        ReferenceServer::Go,
        ReferenceServer::Netty,
        ReferenceServer::C1mEpoll,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ReferenceServer::Python => "python",
            ReferenceServer::Node => "node",
            ReferenceServer::Go => "go",
            ReferenceServer::Netty => "netty",
            ReferenceServer::C1mEpoll => "c1m-epoll",
        }
    }

    fn names() -> String {
        Self::ALL.map(Self::name).join(", ")
    }

    /// Built by `cargo xtask reference-servers`; c1m's own server is c1m itself.
    fn is_reference(self) -> bool {
        self != ReferenceServer::C1mEpoll
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
            });
        };
        if !run.exists() {
            return Err(ServerError::NotBuilt { server: self, run });
        }
        Ok(ServerFlags {
            server_cmd: Some(vec![
                run.display().to_string(),
                "--host".into(),
                host.into(),
                "--ports".into(),
                ports.to_string(),
            ]),
            push_trigger: PushTrigger::SignalUsr1,
            push_format: PushFormat::U64LeUs,
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
pub fn compare_arg(run_dir: &Path, server: ReferenceServer) -> String {
    format!("{}={server}", run_dir.display())
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
            "unknown server `rust`: pick from python, node, go, netty, c1m-epoll"
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
        assert_eq!(
            compare_arg(Path::new("c1m-runs/x"), Netty),
            "c1m-runs/x=netty"
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
        let run = dir.join("go/run").display().to_string();
        assert_eq!(
            f.server_cmd.unwrap(),
            vec![
                run.as_str(),
                "--host",
                "127.0.0.1",
                "--ports",
                "20000-20003"
            ]
        );
        assert_eq!(f.push_trigger.flag_value(), "signal:USR1");
        assert_eq!(f.push_format.flag_value(), "u64le-us");
        let own = ReferenceServer::C1mEpoll
            .flags(&dir, "127.0.0.1", &ports)
            .unwrap();
        assert_eq!(own.server_cmd, None);
        assert_eq!(
            (own.push_trigger, own.push_format),
            (PushTrigger::Control, PushFormat::C1m)
        );
    }
}
