//! A server c1m did not write, under the lab's microscope: started from `--server-cmd`
//! in a cgroup of its own (`cgroup.rs`; or found by `--server-pid` beside `--target`),
//! its processes measured, its listeners awaited, its logs kept at a bounded size
//! (`capped_log.rs`), and stopped at the end, every descendant with it.
//!
//! It has no control endpoint, so its app side is what the client saw (handshakes
//! completed, connections open, closes by the server): [`ForeignServer::snapshot`] puts
//! that beside the tree's RSS, CPU, threads and fds in an [`AppSnapshot`], so every view,
//! export and kernel-vs-app row reads a foreign server as it reads c1m's own.

use std::{
    collections::{BTreeSet, HashMap},
    os::{
        fd::{AsRawFd, BorrowedFd},
        unix::process::CommandExt,
    },
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use rustix::process::{Pid, Resource, Signal};
use thiserror::Error;

use super::{capped_log::CappedLog, cgroup::Cgroup};
use crate::{
    model::Software,
    procstat,
    workload::stats::{counters::Counters, snapshot::AppSnapshot},
};

/// Its output files in the run folder.
pub(crate) const STDOUT_LOG: &str = "server.stdout.log";
pub(crate) const STDERR_LOG: &str = "server.stderr.log";

/// How long a server has to listen on every port before the run gives up on it.
pub(crate) const LISTEN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long SIGTERM has before SIGKILL.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Error)]
pub(crate) enum ForeignError {
    #[error(
        "--server-cmd is empty or badly quoted: {0:?} (e.g. --server-cmd \"python3 server.py --port 9000\")"
    )]
    BadCommand(String),
    #[error("starting the server {cmd:?}: {source}")]
    Spawn { cmd: String, source: std::io::Error },
    #[error("--target {0}: nothing answers there ({1}); start the server first or fix --target")]
    Unreachable(String, std::io::Error),
    #[error("--target {0:?}: say HOST:PORTS, e.g. 127.0.0.1:9000 or 127.0.0.1:9000-9009")]
    BadTarget(String),
    #[error("creating {path}: {source}")]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the server exited ({status}) before it listened on port(s) {ports}; its stderr ends: {tail}"
    )]
    ExitedEarly {
        status: ExitStatus,
        ports: String,
        tail: String,
    },
    #[error(
        "the server did not listen on port(s) {missing} within {secs} s (check --ports); its stderr ends: {tail}"
    )]
    NeverListened {
        missing: String,
        secs: u64,
        tail: String,
    },
    #[error(
        "the server's {workers} worker processes did not all listen within {secs} s (every port listens, but no `listening:` line on its stdout); its stderr ends: {tail}"
    )]
    WorkersNeverListened {
        workers: u64,
        secs: u64,
        tail: String,
    },
}

/// When a server c1m started is ready for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ready {
    /// Every port listens.
    Listening,
    /// Every port listens and it printed `listening:` (reference-servers/PROTOCOL.md):
    /// its `workers` bind one after another, and the first to bind would take every
    /// early connection (SO_REUSEPORT spreads only over the sockets bound) and the
    /// baseline would miss the rest.
    Announced { workers: u64 },
}

impl Ready {
    /// How long the server has: a worker process more is one more runtime to start
    /// (68 JVMs on this 2-core box take about a minute).
    pub(crate) fn limit(self) -> Duration {
        match self {
            Ready::Listening => LISTEN_TIMEOUT,
            Ready::Announced { workers } => {
                LISTEN_TIMEOUT + Duration::from_secs(2).saturating_mul(workers as u32)
            }
        }
    }
}

/// `--server-cmd` split as a shell would split words, with no shell run: a user who
/// wants one writes `sh -c "…"`.
pub(crate) fn split_command(cmd: &str) -> Result<Vec<String>, ForeignError> {
    crate::workload::push_trigger::split_words(cmd)
        .ok_or_else(|| ForeignError::BadCommand(cmd.to_owned()))
}

/// `--target HOST:PORTS`: where a server already runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetAddr {
    /// The host (name or address) the server runs on.
    pub host: String,
    /// Its listening ports.
    pub ports: crate::util::PortList,
}

impl std::str::FromStr for TargetAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || ForeignError::BadTarget(s.to_owned()).to_string();
        let (host, ports) = s.rsplit_once(':').ok_or_else(bad)?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.parse::<std::net::IpAddr>().is_err() {
            return Err(bad());
        }
        Ok(TargetAddr {
            host: host.to_owned(),
            ports: ports.parse().map_err(|_| bad())?,
        })
    }
}

impl std::fmt::Display for TargetAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.host.contains(':') {
            true => write!(f, "[{}]:{}", self.host, self.ports),
            false => write!(f, "{}:{}", self.host, self.ports),
        }
    }
}

impl TargetAddr {
    /// Fails with one line when nothing accepts a connection on its first port.
    pub(crate) async fn reachable(&self) -> Result<(), ForeignError> {
        let ip: std::net::IpAddr = self
            .host
            .parse()
            .map_err(|_| ForeignError::BadTarget(self.to_string()))?;
        let addr = std::net::SocketAddr::new(ip, self.ports.0[0]);
        match tokio::time::timeout(Duration::from_secs(3), tokio::net::TcpStream::connect(addr))
            .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(ForeignError::Unreachable(self.to_string(), e)),
            Err(_) => Err(ForeignError::Unreachable(
                self.to_string(),
                std::io::Error::from(std::io::ErrorKind::TimedOut),
            )),
        }
    }
}

/// The process tree of one server and what it has cost so far.
pub(crate) struct ForeignServer {
    /// The process c1m started (None: `--server-pid`, someone else's).
    child: Option<Child>,
    /// Where every process of a server c1m started lives, whatever it forks.
    cgroup: Option<Cgroup>,
    /// Why a server c1m started has no cgroup (its tree is then walked in /proc).
    no_cgroup: Option<String>,
    /// Its stdout and stderr, capped.
    logs: Vec<CappedLog>,
    /// The tree's root: signals go here, figures are summed below it.
    pub pid: u32,
    /// What the user asked for, for the split line.
    command: String,
    dir: PathBuf,
    started: Instant,
    /// The tree's RSS once it listened, before any connection.
    baseline_rss: Option<u64>,
    /// Last CPU seen per process (a process that exited keeps what it used), when there
    /// is no cgroup to say it.
    cpu: HashMap<u32, (f64, f64)>,
    /// The cgroup's CPU seconds, user and system, when there is one.
    cgroup_cpu: Option<(f64, f64)>,
    /// Pids ever seen in the tree, to journal each once.
    pub seen: BTreeSet<u32>,
}

/// Where a server's processes are found, to read how long they waited for a CPU.
pub(crate) struct RunWait {
    cgroup: Option<PathBuf>,
    root: u32,
}

impl RunWait {
    /// Seconds its processes now have spent runnable but waiting for a CPU (a server
    /// the box starves is not a stalled one: stall.rs); None when none can be read.
    pub(crate) fn seconds(&self) -> Option<f64> {
        let pids = match &self.cgroup {
            Some(path) => super::cgroup::pids_of(path),
            None => tree(self.root),
        };
        let waits: Vec<f64> = pids.into_iter().filter_map(procstat::run_wait_s).collect();
        (!waits.is_empty()).then(|| waits.iter().sum())
    }
}

/// One reading of a process tree.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct TreeUsage {
    pub processes: u64,
    /// Resident anonymous memory, as c1m's own sides count it (`procstat::anon_rss_bytes`).
    pub rss_bytes: u64,
    pub threads: u64,
    pub open_fds: u64,
}

impl ForeignServer {
    /// Starts `argv` in a cgroup of its own (when this process may make one), with the
    /// raised soft fd limit, in its own process group, dying with the lab, its stdout
    /// and stderr in `dir`. Called from the lab's main thread, which lives as long as
    /// the lab.
    pub(crate) fn start(
        argv: &[String],
        dir: &Path,
        env: &[(&str, &Path)],
    ) -> Result<Self, ForeignError> {
        let log = |name: &str| {
            let path = dir.join(name);
            CappedLog::create(&path).map_err(|source| ForeignError::Log { path, source })
        };
        let ((out_log, out), (err_log, err)) = (log(STDOUT_LOG)?, log(STDERR_LOG)?);
        let (cgroup, no_cgroup) = match Cgroup::create("server") {
            Ok(c) => (Some(c), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let procs = cgroup.as_ref().map(|c| c.procs_fd().as_raw_fd());
        let command = argv.join(" ");
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let lab = std::process::id();
        // SAFETY: write, getrlimit, setrlimit, setpgid, setpriority, prctl and getppid
        // are async-signal-safe and touch only the stack; `procs` was opened before the
        // fork and stays open until the spawn returns. The server joins its cgroup
        // before anything else, so all it ever forks is in there; it gets what c1m's
        // own server gives itself (soft fd limit = hard), the default CPU weight, its
        // own process group, and dies with the lab.
        unsafe {
            cmd.pre_exec(move || {
                if let Some(fd) = procs {
                    rustix::io::write(BorrowedFd::borrow_raw(fd), b"0")?;
                }
                let r = rustix::process::getrlimit(Resource::Nofile);
                // None is unlimited.
                let below = match (r.current, r.maximum) {
                    (Some(soft), Some(hard)) => soft < hard,
                    (Some(_), None) => true,
                    (None, _) => false,
                };
                if below {
                    let raised = rustix::process::Rlimit {
                        current: r.maximum,
                        ..r
                    };
                    let _ = rustix::process::setrlimit(Resource::Nofile, raised);
                }
                rustix::process::setpgid(None, None)?;
                // Without CAP_SYS_NICE a lab run under `nice` cannot go back to 0; the
                // server then keeps the lab's weight, as c1m's own server does.
                let _ = rustix::process::setpriority_process(None, 0);
                crate::util::die_with_parent(lab)
            });
        }
        let child = cmd.spawn().map_err(|source| ForeignError::Spawn {
            cmd: command.clone(),
            source,
        })?;
        let pid = child.id();
        Ok(ForeignServer {
            child: Some(child),
            cgroup,
            no_cgroup,
            logs: vec![out_log, err_log],
            pid,
            command,
            dir: dir.to_owned(),
            started: Instant::now(),
            baseline_rss: None,
            cpu: HashMap::new(),
            cgroup_cpu: None,
            seen: BTreeSet::from([pid]),
        })
    }

    /// A server someone else started (`--server-pid`): measured, never signalled at
    /// the end.
    pub(crate) fn attach(pid: u32, dir: &Path) -> Self {
        ForeignServer {
            child: None,
            cgroup: None,
            no_cgroup: None,
            logs: Vec::new(),
            pid,
            command: procstat::command_line(pid).unwrap_or_else(|| format!("pid {pid}")),
            dir: dir.to_owned(),
            started: Instant::now(),
            baseline_rss: None,
            cpu: HashMap::new(),
            cgroup_cpu: None,
            seen: BTreeSet::from([pid]),
        }
    }

    /// A server on another host (`--target` without `--server-pid`): only what the
    /// client saw.
    pub(crate) fn remote(target: &str, dir: &Path) -> Self {
        let mut s = ForeignServer::attach(0, dir);
        s.command = format!("a server at {target}");
        s.seen.clear();
        s
    }

    /// Whether c1m started it (and so stops it).
    pub(crate) fn owned(&self) -> bool {
        self.child.is_some()
    }

    /// The cgroup every process of the server is in, when c1m made one.
    pub(crate) fn cgroup(&self) -> Option<&Cgroup> {
        self.cgroup.as_ref()
    }

    /// For the run's warnings: a server c1m started without a cgroup of its own, whose
    /// processes are found only by their parent links.
    pub(crate) fn unwatched(&self) -> Option<String> {
        let why = self.no_cgroup.as_ref()?;
        Some(format!(
            "the server's processes are found by walking /proc from pid {} (no cgroup of its own: {why}): one that leaves the tree (setsid and a fork) is neither measured nor stopped",
            self.pid
        ))
    }

    /// The exit status if the process c1m started has exited.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// The last lines of its stderr, one line, for an error message.
    pub(crate) fn stderr_tail(&self) -> String {
        tail(&self.dir.join(STDERR_LOG))
    }

    /// The first line of its stderr that says it ran out of file descriptors.
    pub(crate) fn fd_exhaustion_line(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.dir.join(STDERR_LOG)).ok()?;
        text.lines()
            .find(|l| {
                let l = l.to_ascii_lowercase();
                l.contains("emfile") || l.contains("too many open files")
            })
            .map(|l| l.trim().chars().take(200).collect())
    }

    /// What it said it runs on: the `version:` line of its stdout (see
    /// [`parse_version_line`]); None before it printed one, or when it prints none.
    pub(crate) fn reported_versions(&self) -> Option<Reported> {
        let text = std::fs::read_to_string(self.dir.join(STDOUT_LOG)).ok()?;
        text.lines().find_map(parse_version_line)
    }

    /// It printed the protocol's `listening:` line (after every worker listens).
    fn announced_listening(&self) -> bool {
        std::fs::read_to_string(self.dir.join(STDOUT_LOG))
            .is_ok_and(|text| text.lines().any(|l| l.starts_with("listening: ")))
    }

    /// The soft fd limit the server runs with (/proc/PID/limits), if it is on this box.
    /// None also when it is unlimited.
    pub(crate) fn nofile(&self) -> Option<u64> {
        let pid = i32::try_from(self.pid).ok()?;
        let limits = procfs::process::Process::new(pid).ok()?.limits().ok()?;
        match limits.max_open_files.soft_limit {
            procfs::process::LimitValue::Value(n) => Some(n),
            procfs::process::LimitValue::Unlimited => None,
        }
    }

    /// Waits until it is `ready` (its ports seen on this network namespace), the
    /// process exits, or [`Ready::limit`] passes; the errors carry the end of its stderr.
    pub(crate) async fn wait_listening(
        &mut self,
        ports: &[u16],
        ready: Ready,
    ) -> Result<(), ForeignError> {
        let limit = ready.limit();
        let until = Instant::now() + limit;
        let list = |p: &[u16]| p.iter().map(u16::to_string).collect::<Vec<_>>().join(",");
        loop {
            let listening = listening_ports();
            let missing: Vec<u16> = ports
                .iter()
                .copied()
                .filter(|p| !listening.contains(p))
                .collect();
            let announced = match ready {
                Ready::Listening => true,
                Ready::Announced { .. } => self.announced_listening(),
            };
            if missing.is_empty() && announced {
                // Let it finish starting (threads, buffers) before the baseline.
                tokio::time::sleep(Duration::from_millis(200)).await;
                self.baseline_rss = Some(self.usage().rss_bytes);
                return Ok(());
            }
            if let Some(status) = self.exited() {
                return Err(ForeignError::ExitedEarly {
                    status,
                    ports: list(ports),
                    tail: self.stderr_tail(),
                });
            }
            if Instant::now() > until {
                return Err(match ready {
                    Ready::Announced { workers } if missing.is_empty() => {
                        ForeignError::WorkersNeverListened {
                            workers,
                            secs: limit.as_secs(),
                            tail: self.stderr_tail(),
                        }
                    }
                    _ => ForeignError::NeverListened {
                        missing: list(&missing),
                        secs: limit.as_secs(),
                        tail: self.stderr_tail(),
                    },
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// How many processes it runs now and the most fds one of them holds: a server of
    /// worker processes is at its fd limit only when one of them is.
    pub(crate) fn fds_per_process(&self) -> Option<(u64, u64)> {
        let pids = match &self.cgroup {
            Some(c) => c.pids(),
            None => tree(self.pid),
        };
        let fds: Vec<u64> = pids.into_iter().filter_map(procstat::open_fds).collect();
        Some((fds.len() as u64, fds.into_iter().max()?))
    }

    /// A reader of the time its processes spend waiting for a CPU, to hold apart from it
    /// while the lab drives the setup.
    pub(crate) fn run_wait(&self) -> RunWait {
        RunWait {
            cgroup: self.cgroup.as_ref().map(|c| c.path().to_path_buf()),
            root: self.pid,
        }
    }

    /// Its processes now (the cgroup's, or the tree's): RSS, threads and fds summed;
    /// CPU from the cgroup, or remembered per process.
    pub(crate) fn usage(&mut self) -> TreeUsage {
        let mut u = TreeUsage::default();
        let pids = match &self.cgroup {
            Some(c) => c.pids(),
            None => tree(self.pid),
        };
        for pid in pids {
            self.seen.insert(pid);
            u.processes += 1;
            u.rss_bytes += procstat::anon_rss_bytes(pid).unwrap_or(0);
            u.threads += procstat::threads(pid).unwrap_or(0);
            u.open_fds += procstat::open_fds(pid).unwrap_or(0);
            if self.cgroup.is_none()
                && let Some(cpu) = procstat::cpu_seconds(pid)
            {
                self.cpu.insert(pid, cpu);
            }
        }
        if let Some(cpu) = self.cgroup.as_ref().and_then(Cgroup::cpu_seconds) {
            self.cgroup_cpu = Some(cpu);
        }
        u
    }

    /// The server's side as an app snapshot: its tree's figures, and the client's view of
    /// the connections (what a server without a control endpoint can be known by).
    pub(crate) fn snapshot(
        &mut self,
        client: Option<&AppSnapshot>,
        mode: &str,
        target: u64,
    ) -> AppSnapshot {
        let u = self.usage();
        let (cpu_user_s, cpu_sys_s) = self.cgroup_cpu.unwrap_or_else(|| {
            self.cpu
                .values()
                .fold((0.0, 0.0), |(a, b), (u, s)| (a + u, b + s))
        });
        let found = match &self.cgroup {
            Some(c) => format!("cgroup {}", c.name()),
            None => "process tree".to_owned(),
        };
        let now = crate::workload::sys::realtime_ns();
        let seen = client.map(|c| c.counters).unwrap_or_default();
        let mut counters = Counters {
            accepted: seen.connected,
            open: seen.open,
            ws_open: seen.ws_open,
            pushes_sent: seen.pushes_received,
            ..Counters::default()
        };
        // Every close the client saw come from the server, a close frame or not.
        counters.closed.local_close = seen.closed.peer_closed + seen.closed.peer_eof;
        let baseline = self.baseline_rss.unwrap_or(u.rss_bytes);
        // Nothing of it on this box: no process figures rather than zeros.
        let here = u.processes > 0;
        AppSnapshot {
            side: "server".into(),
            mode: mode.into(),
            unix_ns: now,
            counts_unix_ns: client.map(|c| c.counts_at_ns()).unwrap_or(now),
            uptime_s: self.started.elapsed().as_secs_f64(),
            phase: "running".into(),
            target,
            split: format!(
                "foreign server: {} (pid {}, {found}: {} process(es), {} threads); connections as the client saw them",
                self.command, self.pid, u.processes, u.threads
            ),
            counters,
            rss_bytes: u.rss_bytes,
            rss_baseline_bytes: baseline,
            rss_per_connection_bytes: (here && seen.open > 0)
                .then(|| u.rss_bytes.saturating_sub(baseline) as f64 / seen.open as f64),
            cpu_user_s,
            cpu_sys_s,
            threads: here.then_some(u.threads),
            open_fds: here.then_some(u.open_fds),
            ..AppSnapshot::default()
        }
    }

    /// SIGTERM to its process group and to every process of its cgroup, SIGKILL to
    /// whatever is left after `grace` (`cgroup.kill`: forks included), then its logs
    /// made final; a server c1m did not start is left alone.
    pub(crate) async fn stop(&mut self, grace: Duration) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        // Our own child, not reaped yet: its pid (the group's id, setpgid in pre_exec)
        // cannot have been reused.
        let group = Pid::from_raw(child.id() as i32);
        if let Some(g) = group {
            let _ = rustix::process::kill_process_group(g, Signal::TERM);
        }
        // A process that left the group (setsid) is still in the cgroup.
        for pid in self.cgroup.as_ref().map(Cgroup::pids).unwrap_or_default() {
            if let Some(p) = Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(p, Signal::TERM);
            }
        }
        let until = Instant::now() + grace;
        while Instant::now() < until {
            let rest = match &self.cgroup {
                Some(c) => c.populated(),
                None => !tree(child.id()).is_empty(),
            };
            if matches!(child.try_wait(), Ok(Some(_))) && !rest {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if let Some(g) = group {
            let _ = rustix::process::kill_process_group(g, Signal::KILL);
        }
        if let Some(c) = &self.cgroup {
            let _ = c.kill();
        }
        let _ = child.wait();
        if let Some(c) = &self.cgroup {
            let _ = c.remove(STOP_GRACE);
        }
        // Every writer is gone now (unless one escaped a tree walk): the logs end.
        for log in &self.logs {
            log.finish(Duration::from_secs(2));
        }
    }
}

impl Drop for ForeignServer {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut()
            && matches!(child.try_wait(), Ok(None))
        {
            if let Some(g) = Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process_group(g, Signal::KILL);
            }
            if let Some(c) = &self.cgroup {
                let _ = c.kill();
            }
            let _ = child.wait();
        }
        // The cgroup's own drop kills what is left in it and removes it.
    }
}

/// `root` and every process below it (by parent pid), root first; empty if it is gone.
pub fn tree(root: u32) -> Vec<u32> {
    if root == 0 || procstat::start_time(root).is_none() {
        return Vec::new();
    }
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for pid in procstat::all_pids() {
        if let Some(parent) = procstat::parent(pid) {
            children.entry(parent).or_default().push(pid);
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        if let Some(kids) = children.get(&out[i]) {
            out.extend(kids);
        }
        i += 1;
    }
    out
}

/// Ports with a listening TCP socket in this thread's network namespace.
pub fn listening_ports() -> BTreeSet<u16> {
    use crate::proc_net_tcp::{LISTEN, for_each_row};
    let mut out = BTreeSet::new();
    // Listeners come first: stop at the first other socket.
    for_each_row(|row| {
        if row.state != LISTEN {
            return std::ops::ControlFlow::Break(());
        }
        out.extend(row.local_port());
        std::ops::ControlFlow::Continue(())
    });
    out
}

/// A server's runtime and library as it named them at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reported {
    /// The language runtime, e.g. go 1.19.8 (None: not named).
    pub runtime: Option<Software>,
    /// The WebSocket library, e.g. gorilla/websocket 1.5.0 (None: not named).
    pub library: Option<Software>,
}

/// `version: runtime=NAME@VERSION library=NAME@VERSION` (reference-servers/PROTOCOL.md:
/// printed before `listening:`; a name may hold `/`, the version is after the last `@`).
/// Keys it does not know are skipped; None for any other line.
pub fn parse_version_line(line: &str) -> Option<Reported> {
    let rest = line.trim().strip_prefix("version:")?;
    let mut out = Reported::default();
    for word in rest.split_whitespace() {
        let Some((key, value)) = word.split_once('=') else {
            continue;
        };
        let Some((name, version)) = value.rsplit_once('@') else {
            continue;
        };
        if name.is_empty() || version.is_empty() {
            continue;
        }
        let software = Some(Software {
            name: name.to_owned(),
            version: version.to_owned(),
        });
        match key {
            "runtime" => out.runtime = software,
            "library" => out.library = software,
            _ => {}
        }
    }
    Some(out)
}

/// The last non-empty lines of a log, joined on one line (at most ~300 characters).
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        return "(nothing)".into();
    }
    let joined = lines[lines.len().saturating_sub(3)..].join(" | ");
    let n = joined.chars().count();
    if n > 300 {
        joined.chars().skip(n - 300).collect()
    } else {
        joined
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn a_server_of_workers_has_longer_to_start_than_one_process() {
        assert_eq!(Ready::Listening.limit(), LISTEN_TIMEOUT);
        assert_eq!(
            Ready::Announced { workers: 68 }.limit(),
            LISTEN_TIMEOUT + Duration::from_secs(136)
        );
    }

    #[test]
    fn commands_split_as_shell_words_without_a_shell() {
        assert_eq!(
            split_command("python3 'my server.py' --port 9000").unwrap(),
            ["python3", "my server.py", "--port", "9000"]
        );
        assert!(split_command("  ").is_err());
        assert!(split_command("python3 'unclosed").is_err());
    }

    #[test]
    fn the_version_line_names_runtime_and_library() {
        let v = parse_version_line(
            "version: runtime=go@1.19.8 library=github.com/gorilla/websocket@1.5.0",
        )
        .unwrap();
        let sw = |name: &str, version: &str| {
            Some(Software {
                name: name.into(),
                version: version.into(),
            })
        };
        assert_eq!(v.runtime, sw("go", "1.19.8"));
        assert_eq!(v.library, sw("github.com/gorilla/websocket", "1.5.0"));
        let v = parse_version_line("version: library=ws@8.18.0 extra=x@1 runtime=node").unwrap();
        assert_eq!((v.runtime, v.library), (None, sw("ws", "8.18.0")));
        assert_eq!(parse_version_line("listening: 127.0.0.1:8000"), None);
    }

    #[test]
    fn targets_are_host_and_ports() {
        let t: TargetAddr = "127.0.0.1:9000-9002".parse().unwrap();
        assert_eq!((t.host.as_str(), t.ports.0.len()), ("127.0.0.1", 3));
        assert_eq!(t.to_string(), "127.0.0.1:9000-9002");
        let t: TargetAddr = "[::1]:9000".parse().unwrap();
        assert_eq!(t.to_string(), "[::1]:9000");
        for bad in ["9000", "localhost:9000", "127.0.0.1:", "127.0.0.1:x"] {
            let e = bad.parse::<TargetAddr>().unwrap_err();
            assert!(e.contains("HOST:PORTS") && !e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn this_process_is_its_own_tree_and_a_listener_is_seen() {
        let me = std::process::id();
        assert_eq!(tree(me)[0], me);
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(listening_ports().contains(&port));
    }
}
