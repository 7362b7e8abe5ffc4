//! `cargo xtask bench`: c1m against minimal C programs (`xtask/c/ref.c`, built with gcc
//! here) doing the same work, measured in the same run, interleaved, so each figure is a
//! ratio that the box's ±15% drift with the hour does not move. Every run gets a fresh
//! network namespace: no TIME_WAIT or port-search state from the run before it, and
//! the kernel's counters (`/proc/net/netstat`, `snmp`) count that run alone.
//!
//! Compared, per round: the raw TCP ramp (the `idle` scenario / `ref` in hold mode), the
//! WebSocket ramp (same request and response bytes) with its tail-loss probes and
//! DSACKs per 1,000 connections, and one push to every connection (same frame, same
//! connection count, as many server processes as c1m shards into; all writing at once):
//! last frame received, per-message p50/p99/p99.9, each side's the mean of its two
//! WebSocket runs of the round (run A B B A). Each ramp's CPU a connection, by side
//! and by user / system time (`bench_cpu`: the C programs' from a cgroup per side). Then
//! c1m's own `echo` and `observer`.
//!
//! c1m's scenarios are a bench target of the c1m package (`c1m-userspace/benches/
//! scenarios/`, harness = false), not a subcommand of the product: built here once with
//! `cargo bench --no-run`, its binary then runs in each namespace as `c1m` did.

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Command, Stdio},
    sync::{OnceLock, mpsc},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, Result, bail};
use clap::Parser;

use crate::{
    bench_cpu::{Setup, SetupCpu, SideCgroups},
    bench_table::{self, Better, BoxLoad, Row},
    util::{cargo_bin, is_root, root, run},
};

#[derive(Parser, Debug)]
#[command(name = "bench")]
struct Opts {
    /// What to run: `compare` (c1m vs C), `engines` (tokio vs epoll engine), `uring`
    /// (the io_uring engine vs epoll vs C, with syscalls per connection and per frame),
    /// `lab-observer` (the lab's setup with and without the observer, `--rounds` pairs),
    /// `hosts` (the same run over loopback and over `--hosts 1+2`, `--rounds` pairs), `tls`
    /// (TLS 1.3 handshakes: the crypto floor, a C OpenSSL pair, c1m), or
    /// c1m's own `idle`, `push`, `echo`, `observer` (default: compare, engines, then echo
    /// and observer).
    names: Vec<String>,
    /// Connections per ramp and push.
    #[arg(long, default_value_t = 100_000)]
    connections: u64,
    /// Interleaved rounds of the comparison (each: C then c1m, per scenario).
    #[arg(long, default_value_t = 2)]
    rounds: u32,
    /// `lab-observer`: the lab's `--rate` (default: the lab's own, 25,000/s; 0: unpaced,
    /// so the ramp is CPU-bound and any CPU the observer takes shows).
    #[arg(long)]
    lab_rate: Option<u64>,
    /// `tls`: handshakes per measurement.
    #[arg(long, default_value_t = 5000)]
    handshakes: u64,
    /// `uring`: also profile each subject's setup and push (`perf record -g` over the
    /// run's cgroup) into this directory, one `ROUND-SUBJECT-PHASE.data` each.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Let each run meet the memory as the box left it. By default, where this VM gives
    /// free memory back to its host, the bench holds it warm and hands it to each run
    /// (`xtask/src/warm_pages.rs`): a page the host took back costs a host fault again,
    /// up to ~25 s of CPU at 1M, more than the engines differ by.
    #[arg(long)]
    cold_pages: bool,
}

pub(crate) const PORTS: (u16, u16) = (8000, 8099);
/// c1m client's default `--in-flight`, given to the C client too.
const IN_FLIGHT: u64 = 1024;
const TIMEOUT: Duration = Duration::from_secs(600);

pub fn run_bench(args: &[String]) -> Result<()> {
    let o = Opts::try_parse_from(std::iter::once("bench".to_owned()).chain(args.iter().cloned()))?;
    // Needs no scenarios: asked alone, it does not wait for their build.
    if o.names.iter().any(|n| n == "tls") {
        crate::bench_tls::bench(o.handshakes, o.rounds)?;
        if o.names.iter().all(|n| n == "tls") {
            return Ok(());
        }
    }
    if !o.cold_pages && is_root() {
        crate::warm_pages::enable();
    }
    // Drives the c1m binary itself (root, perf and cgroup v2): by name only, and alone
    // it does not wait for the scenarios' build either.
    if o.names.iter().any(|n| n == "uring") {
        crate::bench_uring::run(o.connections, o.rounds, o.profile.as_deref())?;
        if o.names.iter().all(|n| n == "uring" || n == "tls") {
            return Ok(());
        }
    }
    let exe = build_scenarios()?;
    // Set once, here, before any scenario runs.
    let _ = SCENARIOS.set(exe);
    let all = o.names.is_empty();
    let own: Vec<&str> = o
        .names
        .iter()
        .map(String::as_str)
        .filter(|n| {
            ![
                "compare",
                "engines",
                "uring",
                "lab-observer",
                "hosts",
                "tls",
            ]
            .contains(n)
        })
        .collect();
    if all || o.names.iter().any(|n| n == "compare") {
        compare(&o)?;
    }
    if all || o.names.iter().any(|n| n == "engines") {
        crate::bench_engines::run(o.connections, o.rounds)?;
    }
    // The lab's doctor reads the box's free memory: no keeper from here on.
    if o.names.iter().any(|n| n == "lab-observer" || n == "hosts") {
        crate::warm_pages::disable();
    }
    // At 1M a pair takes ~10 minutes: asked for by name only.
    if o.names.iter().any(|n| n == "lab-observer") {
        crate::bench_lab_observer::run(o.connections, o.rounds, o.lab_rate)?;
    }
    // The seeds' topology against loopback: ~4 minutes a run at 1M, by name only.
    if o.names.iter().any(|n| n == "hosts") {
        crate::bench_hosts::run(o.connections, o.rounds)?;
    }
    let own = if all { vec!["echo", "observer"] } else { own };
    if !own.is_empty() {
        let mut a: Vec<String> = own.iter().map(|s| s.to_string()).collect();
        a.extend(["--connections".into(), o.connections.to_string()]);
        run(Command::new(scenarios()?).args(&a))?;
    }
    Ok(())
}

/// The bench target's binary, built by [`build_scenarios`].
static SCENARIOS: OnceLock<PathBuf> = OnceLock::new();

fn scenarios() -> Result<&'static Path> {
    SCENARIOS
        .get()
        .map(PathBuf::as_path)
        .context("the scenarios bench was not built")
}

/// Builds the `scenarios` bench target (and the `c1m` binary it drives) and returns the
/// bench's executable, as cargo reports it.
fn build_scenarios() -> Result<PathBuf> {
    let out = Command::new(cargo_bin())
        .args([
            "bench",
            "--package",
            "c1m-userspace",
            "--bench",
            "scenarios",
        ])
        .args(["--no-run", "--message-format=json-render-diagnostics"])
        .current_dir(root())
        .stderr(Stdio::inherit())
        .output()
        .context("cargo bench --no-run")?;
    if !out.status.success() {
        bail!("building the scenarios bench failed: {}", out.status);
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["reason"] == "compiler-artifact" && v["target"]["name"] == "scenarios")
        .find_map(|v| v["executable"].as_str().map(PathBuf::from))
        .context("cargo named no executable for the scenarios bench")
}

/// Source addresses for both sides: each (source, server port) pair ≤ 10% of the
/// default 28,232-port range, as the lab chooses (`lab/run/sources.rs`).
pub(crate) fn sources(n: u64) -> u64 {
    let ports = u64::from(PORTS.1 - PORTS.0 + 1);
    n.div_ceil(2_823).div_ceil(ports).max(1)
}

/// RLIMIT_NOFILE (soft) of this process, which its children inherit.
fn nofile() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        })
        .unwrap_or(1024)
}

/// As many processes as c1m shards each side into (`workload/limits.rs`: server
/// workers at 75% of their fd cap, client workers full).
pub(crate) fn processes(n: u64) -> (u64, u64) {
    let soft = nofile();
    let ports = u64::from(PORTS.1 - PORTS.0 + 1);
    let server_cap = soft.saturating_sub(ports + 64).max(1) as f64 * 0.75;
    let client_cap = soft.saturating_sub(64).max(1);
    (
        ((n as f64 / server_cap).ceil() as u64).max(1),
        n.div_ceil(client_cap).max(1),
    )
}

/// A network namespace of our own, deleted on drop.
pub(crate) struct Netns(String);

impl Netns {
    /// A namespace for one run, made once the box is quiet (see [`settle`]).
    pub(crate) fn new(tag: &str) -> Result<Netns> {
        settle();
        crate::warm_pages::refill();
        let name = format!("c1m-xbench-{}-{tag}", std::process::id());
        run(Command::new("ip").args(["netns", "add", &name]))?;
        let ns = Netns(name);
        run(ns.cmd("ip").args(["link", "set", "lo", "up"]))?;
        Ok(ns)
    }

    pub(crate) fn cmd(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0]).arg(program);
        c
    }

    /// The namespace's TCP counters (name → value) from `/proc/net/{snmp,netstat}`.
    fn counters(&self) -> Result<HashMap<String, u64>> {
        let out = self
            .cmd("cat")
            .args(["/proc/net/snmp", "/proc/net/netstat"])
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        let mut m = HashMap::new();
        for pair in lines.windows(2) {
            let (Some((p1, names)), Some((p2, values))) =
                (pair[0].split_once(':'), pair[1].split_once(':'))
            else {
                continue;
            };
            if p1 != p2 || values.split_whitespace().any(|v| v.parse::<i64>().is_err()) {
                continue;
            }
            for (k, v) in names.split_whitespace().zip(values.split_whitespace()) {
                m.insert(format!("{p1}{k}"), v.parse().unwrap_or(0));
            }
        }
        Ok(m)
    }
}

/// Waits (at most [`SETTLE_MAX`]) until the box is near idle. Tearing down a million
/// connections and deleting their namespace goes on in the kernel (RCU frees, the
/// namespace's cleanup work) after the processes are gone, so the run that starts next
/// would pay for the one before it: in an interleaved pair, always the same side.
/// Returns the share of the CPUs busy over its last half second (NaN: unread).
pub(crate) fn settle() -> f64 {
    let started = Instant::now();
    let mut last = busy_jiffies();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = busy_jiffies();
        let (Some((b0, t0)), Some((b1, t1))) = (last, now) else {
            return f64::NAN;
        };
        let busy = (b1 - b0) as f64 / (t1 - t0).max(1) as f64;
        // Below a third of the box busy: the rest is the box's own background.
        if (b1 - b0) * 3 < (t1 - t0) {
            let waited = started.elapsed();
            if waited > Duration::from_secs(2) {
                println!(
                    "   (waited {:.0} s for the box to settle)",
                    waited.as_secs_f64()
                );
            }
            return busy;
        }
        if started.elapsed() > SETTLE_MAX {
            println!(
                "   (the box did not settle in {} s: run starts anyway)",
                SETTLE_MAX.as_secs()
            );
            return busy;
        }
        last = now;
    }
}

const SETTLE_MAX: Duration = Duration::from_secs(120);

/// All CPUs' jiffies from `/proc/stat`: busy (all but idle and iowait), total, and the
/// part of busy spent at a positive nice.
pub(crate) struct CpuJiffies {
    pub busy: u64,
    pub total: u64,
    pub nice: u64,
}

pub(crate) fn cpu_jiffies() -> Option<CpuJiffies> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = cpu
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    // user nice system idle iowait irq softirq steal: idle and iowait are not busy.
    let idle = v.get(3)? + v.get(4)?;
    Some(CpuJiffies {
        busy: total - idle,
        total,
        nice: *v.get(1)?,
    })
}

/// (busy, total) jiffies of all CPUs.
fn busy_jiffies() -> Option<(u64, u64)> {
    cpu_jiffies().map(|j| (j.busy, j.total))
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// The kernel's setup counters that say "spurious retransmit", per 1,000 connections.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Kernel {
    loss_probes: f64,
    retrans: f64,
    dsack: f64,
}

impl Kernel {
    fn of(before: &HashMap<String, u64>, after: &HashMap<String, u64>, n: u64) -> Kernel {
        let d = |k: &str| {
            after
                .get(k)
                .copied()
                .unwrap_or(0)
                .saturating_sub(before.get(k).copied().unwrap_or(0)) as f64
                * 1000.0
                / n.max(1) as f64
        };
        Kernel {
            loss_probes: d("TcpExtTCPLossProbes"),
            retrans: d("TcpRetransSegs"),
            dsack: d("TcpExtTCPDSACKRecv"),
        }
    }

    fn from_c1m(v: &serde_json::Value, n: u64) -> Kernel {
        let per = |k: &str| v[k].as_f64().unwrap_or(0.0) * 1000.0 / n.max(1) as f64;
        Kernel {
            loss_probes: per("loss_probes"),
            retrans: per("retrans_segs"),
            dsack: per("dsack_recv"),
        }
    }
}

/// One side's figures of one round.
#[derive(Debug, Default, Clone)]
struct Figures {
    raw_rate: f64,
    raw_kernel: Kernel,
    raw_cpu: SetupCpu,
    ws_rate: f64,
    ws_kernel: Kernel,
    ws_cpu: SetupCpu,
    push_last_s: f64,
    push_received: u64,
    /// p50, p99, p99.9 of per-message latency, µs.
    push_msg_us: [f64; 3],
}

fn compare(o: &Opts) -> Result<()> {
    if !is_root() {
        bail!("the comparison needs root (private network namespaces): sudo -E cargo xtask bench");
    }
    let exe = build_ref()?;
    let n = o.connections;
    let (sp, cp) = processes(n);
    let src = sources(n);
    println!(
        "== c1m vs minimal C (xtask/c/ref.c): {n} connections, {sp} server / {cp} client processes \
         each, {src} source address(es), {} round(s), each run in a fresh network namespace",
        o.rounds
    );
    let began = Instant::now();
    let mut rounds = Vec::new();
    let mut loads = Vec::new();
    for r in 0..o.rounds {
        loads.push(BoxLoad::now(settle()));
        let mut c = Figures::default();
        let mut m = Figures::default();
        // Interleaved per scenario, so a pair shares one moment of the box, and the order
        // turns each round (C first, then c1m first, ...) as `bench uring`'s does: the box
        // drifts within a bench (there, C's WebSocket setup ran at 14.1k, 19.7k and
        // 22.3k/s over three rounds, 2026-12-05), and a fixed order gives one side the
        // same place in that drift every round. The WebSocket runs go A B B A ([`plan`]).
        let (first, second) = turned(r, Subject::C, Subject::C1m);
        let mut ws: [Vec<WsRun>; 2] = Default::default();
        for (k, (scenario, subject)) in plan(first, second).into_iter().enumerate() {
            let tag = format!("{r}{k}{}", subject.name());
            let run = match (scenario, subject) {
                (Scenario::Raw, Subject::C) => {
                    ((c.raw_rate, c.raw_kernel), c.raw_cpu, _) =
                        ref_ramp(&exe, (n, sp, cp, src), false, &tag)?;
                    None
                }
                (Scenario::Raw, Subject::C1m) => {
                    c1m_idle(n, src, &tag, &mut m)?;
                    None
                }
                (Scenario::WebSocket, Subject::C) => Some(ref_push(&exe, (n, sp, cp, src), &tag)?),
                (Scenario::WebSocket, Subject::C1m) => Some(c1m_push(n, src, &tag)?),
            };
            // Each run as it ends, with its instant: the round's figures are means, and a
            // mean of two rates hides which run was off (C's ramps read 36.5k, 31.8k,
            // 26.4k a round while c1m's read 25.7k-26.7k, 2026-12-06 17:24).
            if let Some(w) = run {
                println!(
                    "   round {} run {} (ended {:.0} s into the bench): {} {}",
                    r + 1,
                    k + 1,
                    began.elapsed().as_secs_f64(),
                    subject.name(),
                    w.line()
                );
                ws[subject as usize].push(w);
            }
        }
        c.set_websocket(&ws[0]);
        m.set_websocket(&ws[1]);
        println!("   round {}: {} ran first", r + 1, first.name());
        println!("   round {}: C {c:?}", r + 1);
        println!("   round {}: c1m {m:?}", r + 1);
        rounds.push((c, m));
    }
    print_ratios(&rounds, &loads);
    Ok(())
}

/// Round `r`'s pair of subjects in the order they run: turned every round, so neither
/// always has the same place in the box's drift within a bench.
pub(crate) fn turned<T>(r: u32, x: T, y: T) -> (T, T) {
    if r.is_multiple_of(2) { (x, y) } else { (y, x) }
}

/// A round's runs, `a` going first: the raw ramps, then the WebSocket
/// ramps A B B A, so each subject's WebSocket figures hold one run of each place. Over
/// nine 1M rounds tokio against epoll showed an edge of ~7% for a round's second run
/// (`bench_engines::plan`); c1m against C at 1M, 2026-12-06 15:51: 1.06 and 1.08 of C's
/// WebSocket ramp where c1m ran second, 0.89 where it ran first (at 13:05 0.93 and
/// 0.83 second, 0.84 first: no edge there).
fn plan(a: Subject, b: Subject) -> [(Scenario, Subject); 6] {
    [
        (Scenario::Raw, a),
        (Scenario::Raw, b),
        (Scenario::WebSocket, a),
        (Scenario::WebSocket, b),
        (Scenario::WebSocket, b),
        (Scenario::WebSocket, a),
    ]
}

/// One WebSocket run of a subject: its ramp and its one push.
#[derive(Debug, Default, Clone, Copy)]
struct WsRun {
    rate: f64,
    kernel: Kernel,
    cpu: SetupCpu,
    push_last_s: f64,
    push_received: u64,
    push_msg_us: [f64; 3],
}

impl WsRun {
    fn line(&self) -> String {
        format!(
            "WebSocket ramp {:.0}/s, {}, push last frame {:.2} s, per-message p99 {:.0} µs",
            self.rate,
            self.cpu.line(),
            self.push_last_s,
            self.push_msg_us[1],
        )
    }
}

impl Figures {
    /// The WebSocket figures from a subject's runs of a round: each the runs' mean, the
    /// push received their least.
    fn set_websocket(&mut self, runs: &[WsRun]) {
        let k = runs.len().max(1) as f64;
        let mean = |f: &dyn Fn(&WsRun) -> f64| runs.iter().map(f).sum::<f64>() / k;
        self.ws_rate = mean(&|w| w.rate);
        self.ws_kernel = Kernel {
            loss_probes: mean(&|w| w.kernel.loss_probes),
            retrans: mean(&|w| w.kernel.retrans),
            dsack: mean(&|w| w.kernel.dsack),
        };
        self.ws_cpu = SetupCpu::mean(&runs.iter().map(|w| w.cpu).collect::<Vec<_>>());
        self.push_last_s = mean(&|w| w.push_last_s);
        self.push_received = runs.iter().map(|w| w.push_received).min().unwrap_or(0);
        self.push_msg_us = std::array::from_fn(|i| mean(&|w| w.push_msg_us[i]));
    }
}

/// A scenario of `bench compare`: the raw TCP ramp, or the WebSocket ramp and its push.
#[derive(Clone, Copy)]
enum Scenario {
    Raw,
    WebSocket,
}

/// Who runs in a pair of `bench compare`; the value indexes a round's WebSocket runs
/// (`ws` in [`compare`]).
#[derive(Clone, Copy)]
enum Subject {
    C = 0,
    C1m = 1,
}

impl Subject {
    fn name(self) -> &'static str {
        match self {
            Subject::C => "C",
            Subject::C1m => "c1m",
        }
    }
}

/// The goals of c1m against the C programs (issue "ahead of the floor"), each per round.
fn print_ratios(rounds: &[(Figures, Figures)], loads: &[BoxLoad]) {
    let per = |f: fn(&Figures) -> f64| rounds.iter().map(|(c, m)| (f(m), f(c))).collect();
    let msg = |i: usize| -> Vec<(f64, f64)> {
        rounds
            .iter()
            .map(|(c, m)| (m.push_msg_us[i], c.push_msg_us[i]))
            .collect()
    };
    let cpu = |f: fn(&Figures) -> SetupCpu| -> Vec<(SetupCpu, SetupCpu)> {
        rounds.iter().map(|(c, m)| (f(m), f(c))).collect()
    };
    let mut rows = vec![
        Row {
            figure: "raw TCP ramp",
            unit: "conn/s",
            better: Better::Higher,
            goal: Some(1.0),
            rounds: per(|f| f.raw_rate),
        },
        Row {
            figure: "WebSocket ramp",
            unit: "conn/s",
            better: Better::Higher,
            goal: Some(0.95),
            rounds: per(|f| f.ws_rate),
        },
        Row {
            figure: "push, last frame received",
            unit: "s",
            better: Better::Lower,
            goal: Some(1.0),
            rounds: per(|f| f.push_last_s),
        },
        Row {
            figure: "push, per-message p50",
            unit: "µs",
            better: Better::Lower,
            goal: None,
            rounds: msg(0),
        },
        Row {
            figure: "push, per-message p99",
            unit: "µs",
            better: Better::Lower,
            goal: Some(1.0),
            rounds: msg(1),
        },
        Row {
            figure: "push, per-message p99.9",
            unit: "µs",
            better: Better::Lower,
            goal: None,
            rounds: msg(2),
        },
    ];
    // What the ramps cost, and on which side: steadier than the rates, and where a gap is.
    rows.splice(
        2..2,
        SetupCpu::rows(Setup::Raw, &cpu(|f| f.raw_cpu))
            .into_iter()
            .chain(SetupCpu::rows(Setup::WebSocket, &cpu(|f| f.ws_cpu))),
    );
    println!("{}", bench_table::render("c1m", "C", loads, &rows));
    for (i, (c, m)) in rounds.iter().enumerate() {
        println!(
            "   round {}: kernel during WebSocket setup, per 1,000 connections: TLP {:.1} / {:.1}, \
             RetransSegs {:.1} / {:.1}, DSACK {:.1} / {:.1} (c1m / C); raw: TLP {:.1} / {:.1}",
            i + 1,
            m.ws_kernel.loss_probes,
            c.ws_kernel.loss_probes,
            m.ws_kernel.retrans,
            c.ws_kernel.retrans,
            m.ws_kernel.dsack,
            c.ws_kernel.dsack,
            m.raw_kernel.loss_probes,
            c.raw_kernel.loss_probes
        );
        println!(
            "   round {}: push received {} / {}, last {:.2} s / {:.2} s, per-message p50/p99/p99.9 \
             {:.0}/{:.0}/{:.0} µs / {:.0}/{:.0}/{:.0} µs (c1m / C)",
            i + 1,
            m.push_received,
            c.push_received,
            m.push_last_s,
            c.push_last_s,
            m.push_msg_us[0],
            m.push_msg_us[1],
            m.push_msg_us[2],
            c.push_msg_us[0],
            c.push_msg_us[1],
            c.push_msg_us[2]
        );
    }
}

/// Compiles the C reference into target/ (no binary is committed).
pub(crate) fn build_ref() -> Result<PathBuf> {
    let src = root().join("xtask/c/ref.c");
    // Cargo's target directory, which a worktree building into a shared one lacks.
    let dir = crate::util::target_dir();
    std::fs::create_dir_all(&dir)?;
    let out = dir.join("c1m-ref");
    run(Command::new("gcc")
        .args(["-O2", "-Wall", "-Wextra", "-o"])
        .arg(&out)
        .arg(&src))
    .context("building xtask/c/ref.c (is gcc installed?)")?;
    Ok(out)
}

/// A process whose stdout lines arrive on a channel; killed on drop (its workers die
/// with it: PR_SET_PDEATHSIG).
pub(crate) struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Proc {
    pub(crate) fn spawn(mut cmd: Command) -> Result<Proc> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {cmd:?}"))?;
        let stdin = child.stdin.take();
        let out = child.stdout.take().context("stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Ok(Proc {
            child,
            stdin,
            lines,
        })
    }

    /// The next line starting with `prefix` (bounded).
    pub(crate) fn expect(&self, prefix: &str) -> Result<String> {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let l = self
                .lines
                .recv_timeout(left)
                .with_context(|| format!("no {prefix:?} line within {TIMEOUT:?}"))?;
            if l.starts_with(prefix) {
                return Ok(l);
            }
        }
    }

    pub(crate) fn say(&mut self, line: &str) -> Result<()> {
        let s = self.stdin.as_mut().context("stdin")?;
        writeln!(s, "{line}")?;
        Ok(s.flush()?)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

pub(crate) type Push = (f64, u64, [f64; 3]);

/// The numbers after the word that starts a line of the C reference.
fn numbers(line: &str) -> Vec<u64> {
    line.split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect()
}

/// The C reference: a ramp (rate, kernel counters, its CPU a connection) and, in
/// WebSocket mode, one push.
fn ref_ramp(
    exe: &Path,
    (n, sp, cp, src): (u64, u64, u64, u64),
    ws: bool,
    tag: &str,
) -> Result<((f64, Kernel), SetupCpu, Option<Push>)> {
    let ns = Netns::new(tag)?;
    let mut cpu = SideCgroups::new(tag)?;
    let (ramp, push) = ref_ramp_watched(&ns, exe, (n, sp, cp, src), ws, tag, &mut cpu)?;
    Ok((ramp, cpu.per_connection(n), push))
}

/// A phase of a bench run, for a [`Watch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// From the client's start to the last connection set up.
    Setup,
    /// From the push's trigger to the last frame received.
    Push,
}

/// Which side of a run a process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Server,
    Client,
}

/// What a bench that measures more than the run itself hooks into it: how its
/// processes start (e.g. in a cgroup) and the instants each phase starts and ends.
pub(crate) trait Watch {
    /// The command that runs `exe` in `ns` as `side`.
    fn program(&self, ns: &Netns, exe: &Path, side: Side) -> Command;
    /// Called right before a phase starts (`starts`) and right after it ended.
    fn phase(&mut self, _p: Phase, _starts: bool) -> Result<()> {
        Ok(())
    }
}

impl Watch for SideCgroups {
    fn program(&self, ns: &Netns, exe: &Path, side: Side) -> Command {
        let inner = ns.cmd(exe);
        match side {
            Side::Server => self.server.wrap(&inner),
            Side::Client => self.client.wrap(&inner),
        }
    }

    fn phase(&mut self, p: Phase, starts: bool) -> Result<()> {
        match (p, starts) {
            (Phase::Setup, true) => self.setup_starts(),
            (Phase::Setup, false) => self.setup_ended(),
            (Phase::Push, _) => Ok(()),
        }
    }
}

/// [`ref_ramp`] in `ns`, `(n, sp, cp, src)` as there, its phases told to `w`.
pub(crate) fn ref_ramp_watched(
    ns: &Netns,
    exe: &Path,
    (n, sp, cp, src): (u64, u64, u64, u64),
    ws: bool,
    tag: &str,
    w: &mut dyn Watch,
) -> Result<((f64, Kernel), Option<Push>)> {
    let mode = if ws { "ws" } else { "hold" };
    let (lo, hi) = (PORTS.0.to_string(), PORTS.1.to_string());
    let mut s = w.program(ns, exe, Side::Server);
    s.args(["server", mode, &lo, &hi, &sp.to_string()]);
    let mut server = Proc::spawn(s)?;
    server.expect("ready")?;
    let lat = std::env::temp_dir().join(format!("c1m-xbench-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&lat)?;
    let before = ns.counters()?;
    w.phase(Phase::Setup, true)?;
    let mut c = w.program(ns, exe, Side::Client);
    c.args(["client", mode, &n.to_string(), &lo, &hi, &cp.to_string()])
        .args(["127.0.0.2", &src.to_string(), &IN_FLIGHT.to_string()])
        .arg(&lat);
    let client = Proc::spawn(c)?;
    // "open OPEN FAILED ELAPSED_NS"
    let open = client.expect("open")?;
    let [opened, failed, ns_elapsed] = numbers(&open)[..] else {
        bail!("bad line from the C client: {open}");
    };
    w.phase(Phase::Setup, false)?;
    if failed > 0 {
        eprintln!("bench: C client: {failed} of {n} failed");
    }
    let kernel = Kernel::of(&before, &ns.counters()?, n);
    let rate = opened as f64 / (ns_elapsed as f64 / 1e9);
    let mut push = None;
    if ws {
        std::thread::sleep(Duration::from_secs(1));
        w.phase(Phase::Push, true)?;
        let start = unix_ns();
        server.say(&format!("push 1 {start}"))?;
        let got = client.expect("got 1 ")?;
        w.phase(Phase::Push, false)?;
        let [_, count, last] = numbers(&got)[..] else {
            bail!("bad line from the C client: {got}");
        };
        let mut msg = Vec::with_capacity(count as usize);
        for e in std::fs::read_dir(&lat)? {
            let bytes = std::fs::read(e?.path())?;
            for pair in bytes.chunks_exact(8) {
                msg.push(u32::from_ne_bytes([pair[0], pair[1], pair[2], pair[3]]));
            }
        }
        msg.sort_unstable();
        let at = |q: f64| {
            msg.get(((q * msg.len() as f64).ceil() as usize).saturating_sub(1))
                .map_or(0.0, |v| f64::from(*v))
        };
        push = Some((
            last.saturating_sub(start) as f64 / 1e9,
            count,
            [at(0.5), at(0.99), at(0.999)],
        ));
    }
    drop(client);
    drop(server);
    let _ = std::fs::remove_dir_all(&lat);
    Ok(((rate, kernel), push))
}

/// The scenarios bench's `SCENARIO --json` in `ns` with `extra` arguments; its figures.
pub(crate) fn c1m_bench(
    ns: &Netns,
    scenario: &str,
    n: u64,
    src: u64,
    extra: &[&str],
) -> Result<serde_json::Value> {
    let out = ns
        .cmd(scenarios()?)
        .args([scenario, "--json", "--connections", &n.to_string()])
        .args(extra)
        .args([
            "--source",
            &format!("127.0.0.2-127.0.0.{}", 1 + src.min(253)),
        ])
        .stderr(Stdio::inherit())
        .output()
        .context("the scenarios bench")?;
    if !out.status.success() {
        bail!("bench {scenario} failed: {}", out.status);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with('{'))
        .context("no JSON line from the scenarios bench")?;
    let v: serde_json::Value = serde_json::from_str(line)?;
    Ok(v[scenario].clone())
}

fn c1m_idle(n: u64, src: u64, tag: &str, m: &mut Figures) -> Result<()> {
    let ns = Netns::new(tag)?;
    let v = c1m_bench(&ns, "idle", n, src, &[])?;
    m.raw_rate = v["rate_per_s"].as_f64().unwrap_or(0.0);
    m.raw_kernel = Kernel::from_c1m(&v["setup_kernel"], n);
    m.raw_cpu = SetupCpu::from_c1m(&v["setup_cpu"]);
    Ok(())
}

/// The C programs' WebSocket ramp and push, as one run.
fn ref_push(exe: &Path, sizes: (u64, u64, u64, u64), tag: &str) -> Result<WsRun> {
    let ((rate, kernel), cpu, push) = ref_ramp(exe, sizes, true, tag)?;
    let (push_last_s, push_received, push_msg_us) = push.unwrap_or_default();
    Ok(WsRun {
        rate,
        kernel,
        cpu,
        push_last_s,
        push_received,
        push_msg_us,
    })
}

fn c1m_push(n: u64, src: u64, tag: &str) -> Result<WsRun> {
    let ns = Netns::new(tag)?;
    let v = c1m_bench(&ns, "push", n, src, &[])?;
    // The default schedule: all shards writing at once (writers 0).
    let p = &v["pushes"][0];
    let pm = &p["per_message_us"];
    Ok(WsRun {
        rate: v["rate_per_s"].as_f64().unwrap_or(0.0),
        kernel: Kernel::from_c1m(&v["setup_kernel"], n),
        cpu: SetupCpu::from_c1m(&v["setup_cpu"]),
        push_last_s: p["last_received_s"].as_f64().unwrap_or(0.0),
        push_received: p["received"].as_u64().unwrap_or(0),
        push_msg_us: ["p50", "p99", "p999"].map(|k| pm[k].as_f64().unwrap_or(0.0)),
    })
}
