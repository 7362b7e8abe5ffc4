//! `cargo xtask bench uring`: c1m's io_uring engine against its epoll engine and the
//! minimal C programs (`xtask/c/ref.c`), on the WebSocket ramp and one push to every
//! connection, with the syscalls each spends: per connection set up and per frame
//! pushed, server and client together.
//!
//! How syscalls are counted: each run's processes (server, client, their workers) live in
//! a cgroup v2 of their own, and `perf stat -a -e raw_syscalls:sys_enter,cpu-clock
//! --for-each-cgroup <cgroup>` counts that cgroup's syscalls and CPU time on every CPU
//! (the kernel's work for its sockets included where it runs in their context, as
//! loopback's softirqs mostly do), started right before a phase and stopped
//! (SIGINT) right after it: the setup from the client's start to its last connection,
//! the push from the trigger to the last frame received. Other work on the box is not
//! counted. c1m runs as `c1m server` + `c1m client` (`--engine` each; the uring client
//! is the epoll client), driven through unix control sockets, so xtask in the root
//! namespace reaches them in theirs. Rounds interleave the three, the order rotated.

use std::{
    io::{BufRead, BufReader, Write},
    os::unix::net::UnixStream,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use crate::{
    bench::{
        Netns, PORTS, Phase, Proc, Side, Watch, build_ref, processes, ref_ramp_watched, settle,
        sources,
    },
    bench_cpu::Cgroup,
    bench_table::{self, Better, BoxLoad, Row},
    util::{c1m_binary, is_root},
};

/// Who runs in a round: the C programs, or c1m (server and client) on one engine. The
/// discriminant is the subject's column in a round's figures.
#[derive(Clone, Copy)]
enum Subject {
    C = 0,
    Epoll = 1,
    Uring = 2,
}

impl Subject {
    const ALL: [Subject; 3] = [Subject::C, Subject::Epoll, Subject::Uring];

    /// As printed, and for c1m's subjects the value of `--engine`.
    fn name(self) -> &'static str {
        match self {
            Subject::C => "C",
            Subject::Epoll => "epoll",
            Subject::Uring => "uring",
        }
    }
}

const WAIT: Duration = Duration::from_secs(600);

/// One subject's figures of one round.
#[derive(Debug, Default, Clone, Copy)]
struct Figures {
    setup_rate: f64,
    setup_syscalls: u64,
    connections: u64,
    push_last_s: f64,
    push_p99_us: f64,
    push_received: u64,
    push_syscalls: u64,
    /// CPU time of the setup and of the push, ms.
    setup_cpu_ms: f64,
    push_cpu_ms: f64,
}

impl Figures {
    fn per_conn(&self) -> f64 {
        self.setup_syscalls as f64 / self.connections.max(1) as f64
    }
    fn per_frame(&self) -> f64 {
        self.push_syscalls as f64 / self.push_received.max(1) as f64
    }
    fn cpu_per_conn_us(&self) -> f64 {
        self.setup_cpu_ms * 1000.0 / self.connections.max(1) as f64
    }
    fn cpu_per_frame_us(&self) -> f64 {
        self.push_cpu_ms * 1000.0 / self.push_received.max(1) as f64
    }
}

pub fn run(n: u64, rounds: u32, profile: Option<&Path>) -> Result<()> {
    if !is_root() {
        bail!(
            "bench uring needs root (network namespaces, cgroups, perf -a): sudo -E cargo xtask bench uring"
        );
    }
    if let Some(dir) = profile {
        std::fs::create_dir_all(dir).with_context(|| format!("mkdir {}", dir.display()))?;
    }
    let ref_exe = build_ref()?;
    let (sp, cp) = processes(n);
    println!(
        "== c1m io_uring vs epoll vs minimal C: {n} WebSocket connections and one push, \
         {rounds} interleaved round(s), syscalls by perf per run's cgroup"
    );
    let mut all: Vec<[Figures; 3]> = Vec::new();
    let mut loads = Vec::new();
    for r in 0..rounds {
        loads.push(BoxLoad::now(settle()));
        let mut f = [Figures::default(); 3];
        for k in 0..3 {
            let i = (k + r as usize) % 3;
            let subject = Subject::ALL[i];
            let tag = format!("{r}u{i}");
            let ns = Netns::new(&tag)?;
            let mut w = Counted::new(&tag)?;
            w.profile = profile.map(|d| d.join(format!("{}-{}", r + 1, subject.name())));
            f[i] = match subject {
                Subject::C => {
                    let ((rate, _), push) = ref_ramp_watched(
                        &ns,
                        &ref_exe,
                        (n, sp, cp, sources(n)),
                        true,
                        &tag,
                        &mut w,
                    )?;
                    let (last, got, msg) = push.context("the C run pushed nothing")?;
                    Figures {
                        setup_rate: rate,
                        connections: n,
                        push_last_s: last,
                        push_p99_us: msg[1],
                        push_received: got,
                        ..Figures::default()
                    }
                }
                Subject::Epoll | Subject::Uring => c1m_run(&ns, &mut w, subject.name(), n, &tag)?,
            };
            f[i].setup_syscalls = w.counts[0].0;
            f[i].push_syscalls = w.counts[1].0;
            f[i].setup_cpu_ms = w.counts[0].1;
            f[i].push_cpu_ms = w.counts[1].1;
            println!("   round {}: {:<5} {:?}", r + 1, subject.name(), f[i]);
        }
        all.push(f);
    }
    print_tables(&all, &loads);
    Ok(())
}

fn print_tables(all: &[[Figures; 3]], loads: &[BoxLoad]) {
    for reference in [Subject::C, Subject::Epoll] {
        let (j, u) = (reference as usize, Subject::Uring as usize);
        let per = |f: fn(&Figures) -> f64| all.iter().map(|x| (f(&x[u]), f(&x[j]))).collect();
        let rows = [
            Row {
                figure: "WebSocket setup",
                unit: "conn/s",
                better: Better::Higher,
                goal: None,
                rounds: per(|f| f.setup_rate),
            },
            Row {
                figure: "syscalls per connection set up",
                unit: "",
                better: Better::Lower,
                goal: Some(1.0),
                rounds: per(Figures::per_conn),
            },
            Row {
                figure: "CPU per connection set up",
                unit: "µs",
                better: Better::Lower,
                goal: None,
                rounds: per(Figures::cpu_per_conn_us),
            },
            Row {
                figure: "push, last frame received",
                unit: "s",
                better: Better::Lower,
                goal: None,
                rounds: per(|f| f.push_last_s),
            },
            Row {
                figure: "push, per-message p99",
                unit: "µs",
                better: Better::Lower,
                goal: None,
                rounds: per(|f| f.push_p99_us),
            },
            Row {
                figure: "syscalls per frame pushed",
                unit: "",
                better: Better::Lower,
                // Against C only: the epoll server sends a push's frames through a ring
                // too (`engine::server::push_batch`), so against epoll the same count.
                goal: matches!(reference, Subject::C).then_some(1.0),
                rounds: per(Figures::per_frame),
            },
            Row {
                figure: "CPU per frame pushed",
                unit: "µs",
                better: Better::Lower,
                goal: None,
                rounds: per(Figures::cpu_per_frame_us),
            },
        ];
        println!(
            "{}",
            bench_table::render("uring", reference.name(), loads, &rows)
        );
    }
}

/// The run's cgroup, and the perf that counts its syscalls and CPU time in each phase.
struct Counted {
    cgroup: Cgroup,
    perf: Option<(Child, PathBuf)>,
    /// Syscalls and CPU ms of the setup and of the push.
    counts: [(u64, f64); 2],
    /// `--profile`: the path prefix of this run's profiles, and the recording perf.
    profile: Option<PathBuf>,
    recording: Option<Child>,
}

impl Counted {
    fn new(tag: &str) -> Result<Counted> {
        Ok(Counted {
            cgroup: Cgroup::new(tag)?,
            perf: None,
            counts: [(0, 0.0); 2],
            profile: None,
            recording: None,
        })
    }
}

impl Watch for Counted {
    fn program(&self, ns: &Netns, exe: &Path, _side: Side) -> Command {
        self.cgroup.wrap(&ns.cmd(exe))
    }

    fn phase(&mut self, p: Phase, starts: bool) -> Result<()> {
        if starts {
            let out = std::env::temp_dir().join(format!("{}-{p:?}.perf", self.cgroup.name()));
            let child = Command::new("perf")
                .args([
                    "stat",
                    "-a",
                    "-x,",
                    "-e",
                    "raw_syscalls:sys_enter,cpu-clock",
                    "--for-each-cgroup",
                ])
                .arg(self.cgroup.name())
                .arg("-o")
                .arg(&out)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("starting perf (is it installed? /usr/bin/perf)")?;
            self.perf = Some((child, out));
            if let Some(prefix) = &self.profile {
                let mut data = prefix.clone().into_os_string();
                data.push(format!("-{p:?}.data"));
                let rec = Command::new("perf")
                    .args(["record", "-a", "-g", "-F", "499", "-e", "cpu-clock", "-G"])
                    .arg(self.cgroup.name())
                    .arg("-o")
                    .arg(data)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .context("starting perf record")?;
                self.recording = Some(rec);
            }
            // perf opens its counters on every CPU before it counts anything.
            std::thread::sleep(Duration::from_millis(300));
            return Ok(());
        }
        if let Some(rec) = self.recording.take() {
            finish_perf(rec)?;
        }
        let Some((child, out)) = self.perf.take() else {
            return Ok(());
        };
        finish_perf(child)?;
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        let _ = std::fs::remove_file(&out);
        // CSV: value, unit, event, … (cpu-clock in msec).
        let field = |event: &str| -> Result<f64> {
            text.lines()
                .find(|l| l.split(',').nth(2).is_some_and(|e| e.starts_with(event)))
                .and_then(|l| l.split(',').next())
                .and_then(|v| v.trim().parse().ok())
                .with_context(|| format!("no {event} count from perf: {text:?}"))
        };
        self.counts[usize::from(p == Phase::Push)] =
            (field("raw_syscalls:sys_enter")? as u64, field("cpu-clock")?);
        Ok(())
    }
}

/// Ends a perf started by [`Counted`] the way it writes its results out (SIGINT, as
/// Ctrl-C would), and waits for it.
fn finish_perf(mut perf: Child) -> Result<()> {
    // SAFETY: a plain signal to our own child, still unreaped (not yet waited for).
    if unsafe { libc::kill(perf.id() as libc::pid_t, libc::SIGINT) } != 0 {
        return Err(std::io::Error::last_os_error()).context("interrupting perf");
    }
    perf.wait().context("waiting for perf")?;
    Ok(())
}

impl Drop for Counted {
    fn drop(&mut self) {
        for mut c in self
            .perf
            .take()
            .map(|p| p.0)
            .into_iter()
            .chain(self.recording.take())
        {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One line to a c1m control socket, its answer as JSON.
fn control(sock: &Path, line: &str) -> Result<serde_json::Value> {
    let mut s = UnixStream::connect(sock).with_context(|| format!("{}", sock.display()))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    writeln!(s, "{line}")?;
    let mut answer = String::new();
    BufReader::new(s).read_line(&mut answer)?;
    serde_json::from_str(&answer).with_context(|| format!("{line}: {answer}"))
}

/// Polls `stats` on `sock` until `done` (bounded by [`WAIT`]).
fn wait_stats(sock: &Path, done: impl Fn(&serde_json::Value) -> bool) -> Result<serde_json::Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(v) = control(sock, "stats")
            && done(&v)
        {
            return Ok(v);
        }
        if Instant::now() > deadline {
            bail!("{} did not get there within {WAIT:?}", sock.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// c1m's server and client on `engine`: the ramp and one push, phases told to `w`.
fn c1m_run(ns: &Netns, w: &mut Counted, engine: &str, n: u64, tag: &str) -> Result<Figures> {
    let exe = c1m_binary();
    let dir = std::env::temp_dir().join(format!("c1m-xbench-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (sctl, cctl) = (dir.join("server.sock"), dir.join("client.sock"));
    let ports = format!("{}-{}", PORTS.0, PORTS.1);
    let mut s = w.program(ns, &exe, Side::Server);
    s.args([
        "server", "--engine", engine, "--mode", "ws", "--quiet", "--ports", &ports,
    ])
    .args(["--max-conns", &n.to_string(), "--control"])
    .arg(&sctl);
    let server = Proc::spawn(s)?;
    wait_stats(&sctl, |v| v["phase"] == "running")?;
    w.phase(Phase::Setup, true)?;
    let src = format!("127.0.0.2-127.0.0.{}", 1 + sources(n).min(253));
    let mut c = w.program(ns, &exe, Side::Client);
    c.args([
        "client", "--engine", engine, "--mode", "ws", "--quiet", "--ports", &ports,
    ])
    .args([
        "-n",
        &n.to_string(),
        "--source",
        &src,
        "--hold",
        "forever",
        "--stay",
    ])
    .args(["--push-latency", "write", "--control"])
    .arg(&cctl);
    let client = Proc::spawn(c)?;
    let ramped = wait_stats(&cctl, |v| v["phase"] == "hold")?;
    w.phase(Phase::Setup, false)?;
    let connected = ramped["counters"]["connected"].as_u64().unwrap_or(0);
    let ramp_s = ramped["setup_steps"]
        .as_array()
        .and_then(|s| s.last())
        .and_then(|s| s["at_s"].as_f64())
        .unwrap_or(0.0);
    std::thread::sleep(Duration::from_secs(1));
    w.phase(Phase::Push, true)?;
    let id = control(&sctl, "push")?["push_id"]
        .as_u64()
        .context("the server refused the push")?;
    let push_of = |v: &serde_json::Value| -> Option<serde_json::Value> {
        v["pushes"]
            .as_array()?
            .iter()
            .find(|p| p["push_id"].as_u64() == Some(id))
            .cloned()
    };
    let done = wait_stats(&cctl, |v| {
        push_of(v).is_some_and(|p| p["count"].as_u64().unwrap_or(0) >= connected)
    })?;
    w.phase(Phase::Push, false)?;
    let p = push_of(&done).unwrap_or_default();
    drop(client);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Figures {
        setup_rate: if ramp_s > 0.0 {
            connected as f64 / ramp_s
        } else {
            0.0
        },
        connections: connected,
        push_last_s: p["complete_s"].as_f64().unwrap_or(0.0),
        push_p99_us: done["percentiles"]["push_message_us"]["p99"]
            .as_f64()
            .unwrap_or(0.0),
        push_received: p["count"].as_u64().unwrap_or(0),
        ..Figures::default()
    })
}
