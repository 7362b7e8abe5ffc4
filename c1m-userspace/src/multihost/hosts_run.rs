//! `c1m run --hosts 1+K`: the seeds' topology from one command. It makes the hosts
//! ([`topology`](super::topology)), runs `c1m run --clients external` in the server
//! host and `c1m client --shard i/K` in each client host (each a process started
//! straight into its namespace), waits for them all, removes the hosts, merges the
//! folders into one run folder (the hosts' own kept in it, under `hosts/`) and prints
//! the merged summary with a row per host.
//!
//! Everything it makes is in its journal before it exists: the namespaces, the links
//! and each host's process, so a `kill -9` of this process leaves nothing the next
//! `c1m run --hosts` (or `c1m doctor --restore`) does not remove. Its children get
//! SIGTERM when it dies (and live in their own process group, so a Ctrl-C reaches them
//! through it, in order: the server host first, which closes every connection).

use std::{
    io::{BufRead as _, Write as _},
    os::fd::{AsRawFd as _, BorrowedFd},
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use super::{
    hosts_live::HostsLive,
    hosts_table::{self, HostRow},
    merge::{self, MergeArgs},
    topology::{self, Names, Topology},
};
use crate::{
    args::Connections,
    lab::run::{
        child_args,
        flags::{Clients, HostsShape, RunArgs, TargetArg},
        folder,
        journal::{self, JournalFile, Role},
        plan,
    },
    model::Outcome,
    netns, report,
    workload::{
        cli::{ClientArgs, Hold, HostsArgs},
        host_share::ShardOf,
        limits::{self, NoFile},
    },
};

/// The server host's control port the client hosts measure their clocks against.
const CONTROL_PORT: u16 = 7999;

/// The longest the server host may take to listen on its ports.
const LISTEN_WAIT: Duration = Duration::from_secs(120);

/// How long the client hosts may run on once the server host ended (they end when the
/// server closed their connections), and the hosts after a signal, before SIGKILL.
const GRACE: Duration = Duration::from_secs(60);

/// The flags `--hosts` decides itself, each with the fix, or None when they are fine.
fn refused(args: &RunArgs) -> Option<&'static str> {
    [
        (
            args.clients == Clients::External,
            "--hosts runs its client hosts itself: drop --clients external (that is for client hosts started by hand)",
        ),
        (
            args.servers.is_some(),
            "--hosts runs one server, c1m's own: drop --servers or --hosts",
        ),
        (
            args.server_cmd.is_some() || args.target.is_some(),
            "--hosts runs c1m's own server in the server host: drop --server-cmd or --target",
        ),
        (
            args.expect.is_some(),
            "--hosts waits for -n connections itself: drop --expect",
        ),
        (
            args.source.is_some(),
            "--hosts gives each client host the source addresses its share needs: drop --source",
        ),
        (
            args.addr != "127.0.0.1",
            "--hosts gives the server host its address (10.99.0.1): drop --addr",
        ),
        (
            args.control_addr.is_some(),
            "--hosts sets the server host's control endpoint: drop --control",
        ),
        (
            args.metrics_addr.is_some(),
            "--hosts runs the server host in a namespace of its own, where --metrics-addr cannot be reached from this box: drop --metrics-addr",
        ),
    ]
    .into_iter()
    .find_map(|(given, why)| given.then_some(why))
}

/// The client worker processes a host's `share` needs under the fd limit.
fn workers_needed(share: u64) -> u64 {
    let (_, hard) = crate::host::nofile_limits();
    let plan = limits::plan_client(share, NoFile { soft: hard, hard }, 0, 1, 0.0);
    if plan.processes {
        plan.per_shard.len() as u64
    } else {
        1
    }
}

/// How a client host runs its share: `clients` clients (the seeds' 10 a host), each
/// over `processes` worker processes, as many as the fd limit needs for its part (here
/// 20,000 fds a process: a seed client's 50,000 connections take 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ClientSplit {
    clients: u64,
    processes: u64,
}

impl ClientSplit {
    /// `asked`: --clients-per-host (None: one client, as many processes as needed).
    fn of(share: u64, asked: Option<u64>) -> Result<ClientSplit> {
        let clients = asked.unwrap_or(1);
        if clients == 0 || clients > share.max(1) {
            bail!(
                "--clients-per-host {clients} does not fit a client host's {} connections: give 1 to {}",
                crate::fmt::count(share),
                crate::fmt::count(share.max(1))
            );
        }
        Ok(ClientSplit {
            clients,
            processes: workers_needed(share.div_ceil(clients)),
        })
    }

    /// The worker processes of one client host, every client's together.
    fn workers(self) -> u64 {
        self.clients * self.processes
    }

    /// "10 clients × 3 processes", or "26 client processes" for one client.
    fn text(self) -> String {
        let s = |n: u64| if n == 1 { "" } else { "es" };
        if self.clients == 1 {
            format!("{} client process{}", self.processes, s(self.processes))
        } else {
            format!(
                "{} clients × {} process{}",
                self.clients,
                self.processes,
                s(self.processes)
            )
        }
    }
}

/// `c1m run --hosts 1+K`, dispatched by the command layer: the exit code of the merged
/// run's outcome.
pub(crate) fn main(args: RunArgs) -> Result<i32> {
    let Some(shape) = args.hosts else {
        bail!("--hosts 1+K is needed here");
    };
    if let Some(why) = refused(&args) {
        bail!("{why}");
    }
    if !rustix::process::geteuid().is_root() {
        bail!(
            "--hosts makes network namespaces, which needs root: run it as root (sudo c1m run --hosts {shape} …)"
        );
    }
    crate::util::shutdown_flag().context("installing signal handlers")?;
    for line in journal::sweep_hosts() {
        eprintln!("c1m: {line}");
    }
    let (n, _) = plan::resolve_target(args.connections);
    let k = u64::from(shape.client_hosts);
    if n.get() < k {
        bail!(
            "-n {n} is fewer connections than --hosts {shape} has client hosts: ask for at least {k}"
        );
    }
    let share = n.get().div_ceil(k);
    let split = ClientSplit::of(share, args.clients_per_host)?;
    // Held to the run's end: dropping it restores what --tune set.
    let _tuning = path_preflight(&args, share)?;
    let stamp = crate::fmt::stamp(crate::util::unix_ms_now());
    let dir = folder::create_unique(&args.out, &stamp)
        .with_context(|| format!("creating the run folder under {}", args.out.display()))?;
    crate::lab::run::plan_file::write_into(&dir, &args)?;
    let mut journal = JournalFile::create(&dir, &[]).context("writing the lab's journal")?;
    let names = Names::new(std::process::id(), shape.client_hosts);
    let (outcome, sources) = {
        let topo = Topology::namespaces(names.clone(), &mut journal)?;
        let ephemeral = topo
            .ephemeral_ports()
            .context("reading a client host's ephemeral port range")?;
        let ports = args.ports.0.len() as u64;
        let sources = topology::sources_needed(share, ports, ephemeral);
        if sources > topology::MAX_SOURCES_PER_HOST {
            return Err(topology::TopologyError::TooManySources {
                share,
                needed: sources,
                ports,
                ephemeral,
            }
            .into());
        }
        let started = Instant::now();
        topo.wire(sources, &mut journal)?;
        if args.conntrack {
            topo.track_clients()?;
        }
        let hosts = Hosts {
            args: &args,
            shape,
            n,
            split,
            sources,
            names: &names,
            dir: &dir,
        };
        println!("{}", hosts.plan_line(started.elapsed()));
        let ended = hosts.run(&mut journal);
        // The hosts go before the merge: it reads only their folders.
        drop(topo);
        (ended?, sources)
    };
    let mut run = merged(shape, &dir)?;
    if !args.checks.is_empty() {
        run.checks = crate::lab::gate::judge(&args.checks, &run);
        report::write_run(&dir, &run)
            .with_context(|| format!("writing the checks into {}", dir.display()))?;
    }
    println!("{}", crate::lab::summary::text(&run));
    println!("{}", per_host_table(&run, &names, sources));
    println!("run folder: {}", dir.display());
    drop(journal);
    Ok(match outcome {
        Outcome::Interrupted => Outcome::Interrupted.exit_code(),
        _ => crate::lab::gate::exit_code(run.outcome.exit_code(), &run.checks),
    })
}

/// Ports of the kernel's default ephemeral range (32768-60999), a new namespace's.
const DEFAULT_EPHEMERAL: u64 = 28_232;

/// The checks of the hosts' path, before anything is made: with --conntrack, each
/// client host's table against its share; the server host's neighbours against the
/// client addresses it will answer. A failure stops the run unless --force; --tune sets
/// what it can and restores it after.
fn path_preflight(args: &RunArgs, share: u64) -> Result<Option<crate::lab::tuning::Tuning>> {
    use crate::lab::{
        check::{Check, Status},
        doctor,
    };
    let churn = args.churn_most().map_or(0.0, |c| c.0);
    let checks: Vec<Check> = [
        args.conntrack
            .then(|| {
                doctor::conntrack_hosts(
                    crate::sysctl::read_u64(crate::sysctl::CONNTRACK_MAX),
                    share,
                    churn,
                )
            })
            .flatten(),
        args.hosts.and_then(|shape| {
            // A new namespace's ephemeral range is the kernel's default, 28,232 ports.
            let per_host =
                topology::sources_needed(share, args.ports.0.len() as u64, DEFAULT_EPHEMERAL)
                    .min(topology::MAX_SOURCES_PER_HOST);
            doctor::neighbours_hosts(
                crate::netpath::GcThresh::read().map(|g| g.gc_thresh3),
                per_host * u64::from(shape.client_hosts),
            )
        }),
    ]
    .into_iter()
    .flatten()
    .collect();
    let tuning = if args.tune && checks.iter().any(|c| c.tune.is_some()) {
        let t = crate::lab::tuning::Tuning::apply(&checks).context("--tune")?;
        for c in &t.changed {
            println!("tune: {} {} -> {}", c.name, c.old, c.new);
        }
        Some(t)
    } else {
        None
    };
    if tuning.is_none() {
        let failed: Vec<&Check> = checks.iter().filter(|c| c.status == Status::Fail).collect();
        for c in checks.iter().filter(|c| c.status != Status::Ok) {
            eprintln!(
                "c1m: {}: {} (needed {}): {}",
                c.name, c.current, c.needed, c.note
            );
        }
        if !failed.is_empty() && !args.force {
            bail!("{}", doctor::failure_line(&failed));
        }
    }
    Ok(tuning)
}

/// One run of the hosts: what it was asked and where it writes.
struct Hosts<'a> {
    args: &'a RunArgs,
    shape: HostsShape,
    n: Connections,
    split: ClientSplit,
    sources: u64,
    names: &'a Names,
    dir: &'a Path,
}

impl Hosts<'_> {
    /// One line: the hosts made and what each runs.
    fn plan_line(&self, took: Duration) -> String {
        format!(
            "c1m run --hosts {}: server host {} at {}; {} client host(s) × {}, {} source address(es) each ({}), {} connections in all; made in {} ms",
            self.shape,
            self.names.server_ns(),
            topology::server_addr(),
            self.shape.client_hosts,
            self.split.text(),
            self.sources,
            (0..self.shape.client_hosts)
                .map(|i| format!("{} {}", label(i), addr_text(i, self.sources)))
                .collect::<Vec<_>>()
                .join(", "),
            crate::fmt::count(self.n.get()),
            took.as_millis()
        )
    }

    fn server_args(&self) -> RunArgs {
        let mut one = self.args.clone();
        one.hosts = None;
        one.clients_per_host = None;
        // Dropped on the client hosts' links (their own `--loss`), not here.
        one.loss = None;
        one.clients = Clients::External;
        one.connections = Some(TargetArg::Count(self.n));
        one.expect = Some(self.n);
        one.addr = topology::server_addr().to_string();
        one.into = Some(self.dir.join("hosts").join("server"));
        one.plain = !self.args.json;
        // Judged on the merged run, not on the server host's half of it.
        one.checks = Vec::new();
        one
    }

    fn client_args(&self, i: u32, start_at: std::time::SystemTime) -> Result<ClientArgs> {
        let a = self.args;
        let mut c: ClientArgs = child_args::defaults("client")?;
        c.hosts = vec![topology::server_addr().to_string()];
        c.ports = a.ports.to_string();
        c.connections = self.n;
        c.rate = a.rate as f64;
        c.in_flight = a.in_flight;
        c.connect_timeout = a.connect_timeout;
        c.hold = Hold::Forever;
        // The totals over every host: shard i takes its own /24's addresses.
        c.sources = (0..self.shape.client_hosts)
            .flat_map(|h| topology::client_addrs(h, self.sources))
            .map(|ip| ip.to_string())
            .collect();
        c.mode = a.mode;
        c.workload = a.workload.clone();
        c.workers = self.split.workers();
        c.common.engine = a.engine;
        c.common.quiet = true;
        c.push_format = a.push_format.clone();
        c.push_latency = a.push_latency;
        c.push_stamp = a.push_stamp;
        // The server host's run writes the self-signed pair into its folder before it
        // listens (the client hosts start after): they trust that certificate, or the
        // --tls-ca given, and verify the server host's address, which the self-signed
        // certificate names (it is made for the listen addresses).
        (_, c.tls) = a.tls.split(&self.dir.join("hosts").join("server"))?;
        c.hosts_run = HostsArgs {
            shard: Some(ShardOf {
                index: u64::from(i),
                count: u64::from(self.shape.client_hosts),
            }),
            start_at: Some(start_at),
            run_dir: Some(self.dir.join("hosts").join(label(i))),
            clock_from: Some(format!("{}:{CONTROL_PORT}", topology::server_addr())),
            host_label: Some(label(i)),
            metrics_addr: None,
            server_wait: a.setup_timeout.unwrap_or(Duration::from_secs(120)),
            loss: a.loss,
            loss_link: a.loss.map(|_| self.names.client_link(i)),
        };
        Ok(c)
    }

    /// The server host, then the client hosts once it listens, to their ends.
    fn run(&self, journal: &mut JournalFile) -> Result<Outcome> {
        let hosts_dir = self.dir.join("hosts");
        std::fs::create_dir(&hosts_dir)
            .with_context(|| format!("creating {}", hosts_dir.display()))?;
        let server_argv = child_args::run_argv(&self.server_args())?;
        let mut procs = Procs::default();
        let server = spawn_in(&self.names.server_ns(), &server_argv, None)?;
        journal.add(Role::Server, server.id())?;
        procs.add("server host", server, Some(hosts_dir.join("server.log")));
        wait_listening(&self.names.server_ns(), &self.args.ports, &mut procs)?;
        // Every host ramps together, a second from now.
        let start_at = std::time::SystemTime::now() + Duration::from_secs(1);
        for i in 0..self.shape.client_hosts {
            let argv = child_args::client_argv(&self.client_args(i, start_at)?)?;
            let log = hosts_dir.join(format!("{}.log", label(i)));
            let file = std::fs::File::create(&log)
                .with_context(|| format!("creating {}", log.display()))?;
            let child = spawn_in(&self.names.client_ns(i), &argv, Some(file))?;
            journal.add(Role::Client, child.id())?;
            procs.add(&format!("client host {}", label(i)), child, None);
        }
        let mut live = HostsLive::new(
            (0..self.shape.client_hosts)
                .map(|i| (label(i), hosts_dir.join(label(i))))
                .collect(),
            self.args.json,
        );
        Ok(procs.wait(&mut live))
    }
}

/// Client host `i`'s label (and folder name).
fn label(i: u32) -> String {
    format!("host-{i}")
}

/// Client host `i`'s addresses in words: one, or the first and last.
fn addr_text(i: u32, per_host: u64) -> String {
    let a = topology::client_addrs(i, per_host);
    match (a.first(), a.last()) {
        (Some(f), Some(l)) if f != l => format!("{f}-{l}"),
        (Some(f), _) => f.to_string(),
        _ => String::new(),
    }
}

/// `c1m ARGV…` started straight into namespace `ns` (setns between fork and exec), in a
/// process group of its own, ended by SIGTERM if this process dies. Its stdout (and
/// stderr) go to `log`, or to a pipe the caller reads when None.
fn spawn_in(ns: &str, argv: &[std::ffi::OsString], log: Option<std::fs::File>) -> Result<Child> {
    let exe = crate::util::own_exe();
    let fd = netns::open_named(ns).with_context(|| format!("opening namespace {ns}"))?;
    let raw = fd.as_raw_fd();
    let parent = std::process::id();
    let mut cmd = Command::new(exe);
    cmd.args(argv).stdin(Stdio::null());
    match log {
        Some(f) => {
            cmd.stdout(f.try_clone()?).stderr(f);
        }
        None => {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
    }
    // SAFETY: setns, setpgid, prctl and getppid are single system calls that allocate
    // nothing; `raw` stays open (`fd` lives until spawn returns).
    unsafe {
        cmd.pre_exec(move || {
            netns::enter(BorrowedFd::borrow_raw(raw))?;
            rustix::process::setpgid(None, None)?;
            crate::util::end_with_parent(parent, rustix::process::Signal::TERM)?;
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("starting c1m in {ns}"))?;
    drop(fd);
    Ok(child)
}

/// Waits until the server host listens on the last of `ports` (it opens them in order),
/// for at most [`LISTEN_WAIT`], failing early when the server host ends.
fn wait_listening(ns: &str, ports: &crate::util::PortList, procs: &mut Procs) -> Result<()> {
    let Some(&last) = ports.0.last() else {
        bail!("--ports names no port");
    };
    let fd = netns::open_named(ns)?;
    let until = Instant::now() + LISTEN_WAIT;
    loop {
        let listening = netns::run_in(&fd, || {
            let mut found = false;
            crate::proc_net_tcp::for_each_row(|r| {
                found |= r.state == crate::proc_net_tcp::LISTEN && r.local_port() == Some(last);
                std::ops::ControlFlow::Continue(())
            });
            found
        })?;
        if listening {
            return Ok(());
        }
        procs.pump();
        if let Some((what, status)) = procs.first_ended() {
            bail!(
                "the {what} ended ({status}) before it listened on port {last}: see {}",
                procs.log_hint()
            );
        }
        if crate::util::shutdown_requested() {
            procs.stop();
            bail!("interrupted before the hosts started");
        }
        if Instant::now() > until {
            bail!(
                "the server host did not listen on port {last} within {} s: see {}",
                LISTEN_WAIT.as_secs(),
                procs.log_hint()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The hosts' processes; dropping it kills any still running (by its own child's pid)
/// and reaps it.
#[derive(Default)]
struct Procs {
    list: Vec<Proc>,
}

struct Proc {
    what: String,
    child: Child,
    status: Option<ExitStatus>,
    /// The server host's output, echoed with a prefix until its summary begins (the
    /// merged one follows), and kept in its log (with its per-second lines, which are
    /// not echoed).
    echo: Option<std::sync::mpsc::Receiver<String>>,
    log: Option<PathBuf>,
}

impl Procs {
    fn add(&mut self, what: &str, mut child: Child, log: Option<PathBuf>) {
        let echo = log.as_ref().and_then(|path| {
            let out = child.stdout.take()?;
            let err = child.stderr.take()?;
            let file = std::fs::File::create(path).ok()?;
            let (tx, rx) = std::sync::mpsc::channel();
            for stream in [
                Box::new(out) as Box<dyn std::io::Read + Send>,
                Box::new(err),
            ] {
                let tx = tx.clone();
                let mut file = file.try_clone().ok()?;
                std::thread::spawn(move || {
                    for line in std::io::BufReader::new(stream)
                        .lines()
                        .map_while(Result::ok)
                    {
                        let _ = writeln!(file, "{line}");
                        let _ = tx.send(line);
                    }
                });
            }
            Some(rx)
        });
        self.list.push(Proc {
            what: what.to_owned(),
            child,
            status: None,
            echo,
            log,
        });
    }

    /// Echoes the server host's new lines and notes who ended.
    fn pump(&mut self) {
        for p in &mut self.list {
            if let Some(rx) = &p.echo {
                let mut done = false;
                while let Ok(line) = rx.try_recv() {
                    if line.starts_with("== c1m run:") {
                        done = true;
                        break;
                    }
                    // Its notes and phases, not its per-second key=value lines (in its log);
                    // with --json its objects, named as the client hosts' are.
                    if let Some(json) = super::hosts_live::server_json(&line) {
                        println!("{json}");
                    } else if !line.starts_with("t_s=") && !line.trim().is_empty() {
                        println!("  server host | {line}");
                    }
                }
                if done {
                    p.echo = None;
                }
            }
            if p.status.is_none() {
                p.status = p.child.try_wait().ok().flatten();
            }
        }
    }

    fn first_ended(&self) -> Option<(String, ExitStatus)> {
        self.list
            .iter()
            .find_map(|p| p.status.map(|s| (p.what.clone(), s)))
    }

    fn log_hint(&self) -> String {
        self.list
            .iter()
            .find_map(|p| p.log.as_ref())
            .map_or_else(|| "the hosts' logs".to_owned(), |l| l.display().to_string())
    }

    /// SIGINT to the server host (it concludes `interrupted` and closes every
    /// connection), SIGTERM to the client hosts.
    fn stop(&mut self) {
        for (i, p) in self.list.iter().enumerate() {
            if p.status.is_none() {
                let sig = match i {
                    0 => rustix::process::Signal::INT,
                    _ => rustix::process::Signal::TERM,
                };
                signal(&p.child, sig);
            }
        }
    }

    /// Until every host ended: a signal to this process is passed on in order; a client
    /// host that fails stops the server host (the run cannot complete); client hosts
    /// still running [`GRACE`] after the server host are ended. Meanwhile `live` shows
    /// the client hosts (the list's entries after the server host's).
    fn wait(&mut self, live: &mut HostsLive) -> Outcome {
        let mut stopped: Option<Instant> = None;
        let mut interrupted = false;
        let mut server_ended: Option<Instant> = None;
        loop {
            self.pump();
            let ended: Vec<bool> = self.list[1..].iter().map(|p| p.status.is_some()).collect();
            live.tick(&ended);
            if self.list.iter().all(|p| p.status.is_some()) {
                return if interrupted {
                    Outcome::Interrupted
                } else {
                    Outcome::Complete
                };
            }
            if stopped.is_none() && crate::util::shutdown_requested() {
                eprintln!("c1m: stopping the hosts (the server host first)");
                interrupted = true;
                self.stop();
                stopped = Some(Instant::now());
            }
            let failed = self.list[1..]
                .iter()
                .find(|p| p.status.is_some_and(|s| !s.success()));
            if stopped.is_none()
                && let Some(p) = failed
            {
                eprintln!(
                    "c1m: the {} ended ({}) before the run did: stopping the server host",
                    p.what,
                    p.status.map(|s| s.to_string()).unwrap_or_default()
                );
                self.stop();
                stopped = Some(Instant::now());
            }
            if self.list[0].status.is_some() {
                server_ended.get_or_insert_with(Instant::now);
            }
            let late = [stopped, server_ended]
                .into_iter()
                .flatten()
                .any(|t| t.elapsed() > GRACE);
            if late {
                for p in self.list.iter_mut().filter(|p| p.status.is_none()) {
                    eprintln!(
                        "c1m: the {} did not end within {} s: killed",
                        p.what,
                        GRACE.as_secs()
                    );
                    let _ = p.child.kill();
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for p in &mut self.list {
            if p.status.is_none() {
                let _ = p.child.kill();
                let _ = p.child.wait();
            }
        }
    }
}

/// Sends `sig` to our own child, not yet reaped (so its pid is still its own).
fn signal(child: &Child, sig: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

/// The hosts' folders merged into the run folder: the merge is written beside them,
/// then moved up, so the run folder holds the merged run and `hosts/` the hosts'.
fn merged(shape: HostsShape, dir: &Path) -> Result<crate::model::RunRecord> {
    let hosts = dir.join("hosts");
    let staging = dir.join(".merged");
    let m = MergeArgs {
        server_dir: hosts.join("server"),
        client_dirs: (0..shape.client_hosts)
            .map(|i| hosts.join(label(i)))
            .collect(),
        out: staging.clone(),
    };
    let run = merge::merge(&m).with_context(|| {
        format!(
            "merging the hosts' folders (each host's log is in {})",
            hosts.display()
        )
    })?;
    for entry in
        std::fs::read_dir(&staging).with_context(|| format!("reading {}", staging.display()))?
    {
        let entry = entry?;
        let to = dir.join(entry.file_name());
        std::fs::rename(entry.path(), &to).with_context(|| format!("moving {}", to.display()))?;
    }
    std::fs::remove_dir(&staging).with_context(|| format!("removing {}", staging.display()))?;
    Ok(run)
}

/// The table of hosts: the server host, then each client host from its own folder.
fn per_host_table(run: &crate::model::RunRecord, names: &Names, per_host: u64) -> String {
    let server_dir = run.multihost.as_ref().map(|m| PathBuf::from(&m.server_dir));
    let server_run = server_dir.and_then(|d| report::load_run(&d).ok());
    let mut rows = vec![HostRow::server(
        server_run.as_ref().unwrap_or(run),
        &names.server_ns(),
        &topology::server_addr().to_string(),
    )];
    if let Some(m) = &run.multihost {
        for h in &m.hosts {
            let i = h.shard_index.unwrap_or(0) as u32;
            rows.push(HostRow::client(
                h,
                &names.client_ns(i),
                &addr_text(i, per_host),
            ));
        }
    }
    hosts_table::text(&rows)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    /// The seed's 10 clients a host: each client's part fits its processes' fds, and
    /// every client has the same number of processes.
    #[test]
    fn a_seed_host_is_ten_clients_each_over_what_the_fd_limit_needs() {
        let split = ClientSplit::of(500_000, Some(10)).unwrap();
        assert_eq!(split.clients, 10);
        assert_eq!(split.processes, workers_needed(50_000));
        assert_eq!(split.workers(), 10 * split.processes);
        assert!(
            split.text().starts_with("10 clients × "),
            "{}",
            split.text()
        );
        let one = ClientSplit::of(2_000, None).unwrap();
        assert_eq!((one.clients, one.processes), (1, 1));
        assert_eq!(one.text(), "1 client process");
    }

    #[test]
    fn clients_a_host_cannot_split_into_are_refused_in_one_line() {
        for asked in [0, 2_001] {
            let e = ClientSplit::of(2_000, Some(asked)).unwrap_err().to_string();
            assert!(e.contains("give 1 to 2,000"), "{e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }
}
