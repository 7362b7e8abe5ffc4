//! The workload scenarios: each starts `c1m server` and `c1m client` (the binary cargo
//! built beside this bench) as child processes, exactly as a user or the lab would,
//! drives them through their control endpoints (the library's public `control::call`
//! and `AppSnapshot`), and returns and prints figures. Nothing here asserts: the
//! goals (conn/s, bytes per connection, push fan-out, echo rate) are reported against the
//! reference numbers measured with minimal C epoll programs on the same box.
//!
//! Scenarios:
//! * `idle`: N idle connections (hold mode): setup rate per step, user-space bytes per
//!   connection on each side (RSS of all processes minus their baseline, / connections).
//! * `push`: N WebSocket connections, one broadcast push: per-message and fan-out latency
//!   tables, time until the last connection had it.
//! * `echo`: 2,000 connections doing back-to-back echo round trips for a fixed time:
//!   round trips per second and the RTT table.

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use tokio::process::{Child, Command};

use c1m::{
    args::Connections,
    observer::mib::{self, MibCounters},
    workload::{
        config::EngineKind,
        control,
        stats::{histograms::Percentiles, setup_rate::SetupStep, snapshot::AppSnapshot},
    },
};

/// Where and how big the benchmark runs are.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Scenarios to run: idle, push, echo (default: all three).
    pub scenarios: Vec<String>,
    /// What runs the server and client under test.
    #[arg(long, value_enum, env = "C1M_ENGINE", default_value_t = EngineKind::Epoll)]
    pub engine: EngineKind,
    /// Connections for `idle` and `push`.
    #[arg(long, default_value_t = Connections::of(100_000))]
    pub connections: Connections,
    /// Connections for `echo`.
    #[arg(long, default_value_t = Connections::of(2_000))]
    pub echo_connections: Connections,
    /// Measurement window for `echo`.
    #[arg(long, default_value = "10s", value_parser = c1m::duration::parse)]
    pub echo_time: Duration,
    /// Server ports (must be outside the ephemeral range 32768–60999).
    #[arg(long, default_value = "8000-8099")]
    pub ports: String,
    /// Client source addresses (e.g. 127.0.0.2-127.0.0.11); default: kernel's choice.
    #[arg(long)]
    pub source: Option<String>,
    /// Control endpoints of the server and the client.
    #[arg(long, default_value = "127.0.0.1:7001")]
    pub server_control: String,
    #[arg(long, default_value = "127.0.0.1:7002")]
    pub client_control: String,
    /// Give up on a phase (ramp, push delivery) after this long.
    #[arg(long, default_value = "300s", value_parser = c1m::duration::parse)]
    pub timeout: Duration,
    /// Broadcasts with every server shard writing at once, before the paced one: a
    /// 200k push lasts ~1.5 s, and a 0.4 s stall of this VM's CPU (seen by perf in 1 of 3
    /// runs) would be most of a ratio's swing; `bench engines` takes their median.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=20))]
    pub unpaced_pushes: u16,
    /// Print each scenario's figures as one JSON line instead of tables (read by
    /// `cargo xtask bench compare` and `engines`, which set them beside their references).
    #[arg(long)]
    pub json: bool,
}

/// Figures of the `idle` scenario.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct IdleFigures {
    pub connections: u64,
    pub ramp_s: f64,
    pub rate_per_s: f64,
    pub setup_steps: Vec<SetupStep>,
    pub server_bytes_per_conn: f64,
    pub client_bytes_per_conn: f64,
    pub server_split: String,
    pub client_split: String,
    /// Largest and smallest server worker share (SO_REUSEPORT balance).
    pub server_worker_open_max: u64,
    pub server_worker_open_min: u64,
    pub connect_us: Percentiles,
    /// The kernel's TCP counters' movement during the ramp (this network namespace).
    pub setup_kernel: Option<MibCounters>,
    pub setup_cpu: SetupCpu,
}

/// Figures of the `push` scenario: its WebSocket ramp, then each broadcast.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PushBench {
    pub connections: u64,
    pub ramp_s: f64,
    pub rate_per_s: f64,
    pub setup_kernel: Option<MibCounters>,
    pub setup_cpu: SetupCpu,
    /// User-space bytes per idle WebSocket connection before the pushes (the `idle`
    /// scenario's are raw TCP's: a WebSocket's upgrade may leave more behind).
    pub server_bytes_per_conn: f64,
    pub client_bytes_per_conn: f64,
    pub pushes: Vec<PushFigures>,
}

/// CPU per connection set up, µs, by side and mode (user, system), all of a side's
/// processes (supervisor and workers) from the client's start until the bench sees the
/// ramp end (it asks every 0.5 s, so up to 0.5 s of the tail is in it). Steadier
/// than the setup rate on a box whose speed drifts: the same engines at 300k read 80.6 and
/// 80.2 µs (tokio), 66.0 and 68.7 (epoll) while their rates swung 22.2k-27.0k.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct SetupCpu {
    pub server_user_us: f64,
    pub server_sys_us: f64,
    pub client_user_us: f64,
    pub client_sys_us: f64,
    pub total_us: f64,
}

impl SetupCpu {
    /// From the sides' own CPU figures (`AppSnapshot::cpu_*_s`: every process of a side,
    /// read by its supervisor when asked): the server's before the client started and at
    /// the ramp's end; the client's whole life to the ramp's end (it starts with it).
    fn between(
        server_before: &AppSnapshot,
        server_after: &AppSnapshot,
        client_after: &AppSnapshot,
        connections: u64,
    ) -> SetupCpu {
        let us = |s: f64| s.max(0.0) * 1e6 / connections.max(1) as f64;
        let (su, ss) = (
            us(server_after.cpu_user_s - server_before.cpu_user_s),
            us(server_after.cpu_sys_s - server_before.cpu_sys_s),
        );
        let (cu, cs) = (us(client_after.cpu_user_s), us(client_after.cpu_sys_s));
        SetupCpu {
            server_user_us: su,
            server_sys_us: ss,
            client_user_us: cu,
            client_sys_us: cs,
            total_us: su + ss + cu + cs,
        }
    }
}

/// Figures of one broadcast of the `push` scenario.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PushFigures {
    /// Server shards writing at once (0: all).
    pub writers: usize,
    pub connections: u64,
    pub received: u64,
    /// Broadcast start to the last frame received.
    pub last_received_s: f64,
    /// Broadcast start to the last frame written by the server.
    pub last_written_s: f64,
    pub per_message_us: Percentiles,
    pub fanout_us: Percentiles,
}

/// Figures of the `echo` scenario.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct EchoFigures {
    pub connections: u64,
    pub window_s: f64,
    pub round_trips: u64,
    pub round_trips_per_s: f64,
    pub rtt_us: Percentiles,
}

/// The `c1m` binary under test: cargo builds the package's binary for its benches.
const C1M: &str = env!("CARGO_BIN_EXE_c1m");

/// A running server + client pair, killed on drop.
struct Pair {
    server: Child,
    client: Child,
    sctl: String,
    cctl: String,
}

impl Pair {
    async fn start(a: &BenchArgs, mode: &str, n: u64, client_extra: &[&str]) -> Result<Pair> {
        let server = with_parent_death(Command::new(C1M))
            .args([
                "server",
                "--quiet",
                "--mode",
                mode,
                "--ports",
                &a.ports,
                "--control",
                &a.server_control,
            ])
            .args(["--max-conns", &n.to_string()])
            .args(["--engine", a.engine.name()])
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("start c1m server")?;
        wait_stats(&a.server_control, Duration::from_secs(60), |s| {
            s.phase == "running"
        })
        .await?;
        let mut cmd = Command::new(C1M);
        cmd.args([
            "client", "--quiet", "--stay", "--hold", "forever", "--mode", mode, "--ports", &a.ports,
        ])
        .args(["-n", &n.to_string(), "--control", &a.client_control])
        .args(["--engine", a.engine.name()])
        .args(client_extra);
        if let Some(src) = &a.source {
            cmd.args(["--source", src]);
        }
        let client = cmd
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("start c1m client")?;
        Ok(Pair {
            server,
            client,
            sctl: a.server_control.clone(),
            cctl: a.client_control.clone(),
        })
    }

    async fn stop(mut self, n: u64) -> Result<()> {
        let _ = control::call(&self.cctl, "stop").await;
        let _ = control::call(&self.sctl, "stop").await;
        // Closing is kernel work on two cores: ~1 s per 10,000 connections under load.
        let grace = Duration::from_secs(60 + n / 10_000);
        for c in [&mut self.client, &mut self.server] {
            if tokio::time::timeout(grace, c.wait()).await.is_err() {
                let _ = c.kill().await;
            }
        }
        Ok(())
    }
}

/// Children get SIGTERM if the bench dies (Ctrl-C, kill), so a 1M-connection pair is never
/// left running; on SIGTERM they tear down and stop their workers as usual.
fn with_parent_death(mut cmd: Command) -> Command {
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            // A raw syscall: nothing allocated between fork and exec.
            Ok(rustix::process::set_parent_process_death_signal(Some(
                rustix::process::Signal::TERM,
            ))?)
        });
    }
    cmd
}

async fn stats(ep: &str) -> Result<AppSnapshot> {
    Ok(serde_json::from_str(&control::call(ep, "stats").await?)?)
}

/// Polls `stats` twice a second until `done` (bounded).
async fn wait_stats(
    ep: &str,
    timeout: Duration,
    done: impl Fn(&AppSnapshot) -> bool,
) -> Result<AppSnapshot> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(s) = stats(ep).await {
            if done(&s) {
                return Ok(s);
            }
            if Instant::now() > deadline {
                bail!(
                    "{ep}: not done within {timeout:?}; last counters: {:?}",
                    s.counters
                );
            }
        } else if Instant::now() > deadline {
            bail!("{ep}: no stats within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits for the client's ramp to end and returns its snapshot.
async fn ramped(p: &Pair, a: &BenchArgs, n: u64) -> Result<AppSnapshot> {
    let c = wait_stats(&p.cctl, a.timeout, |s| {
        s.phase == "hold" || s.counters.attempted == n && s.counters.in_flight == 0
    })
    .await?;
    if c.counters.connected < n {
        eprintln!(
            "bench: only {} of {n} connected; failures: {:?}",
            c.counters.connected, c.counters.failures
        );
    }
    Ok(c)
}

/// Waits until the server holds as many connections as the client (WebSocket: past the
/// handshake) and returns that number; a connection the server reset is gone from both.
async fn settled(p: &Pair, a: &BenchArgs) -> Result<u64> {
    let deadline = Instant::now() + a.timeout;
    loop {
        let (s, c) = (stats(&p.sctl).await?, stats(&p.cctl).await?);
        let server_open = if s.mode == "ws" {
            s.counters.ws_open
        } else {
            s.counters.open
        };
        if server_open == c.counters.open {
            return Ok(c.counters.open);
        }
        if Instant::now() > deadline {
            bail!(
                "server holds {server_open}, client {}: not settled within {:?}",
                c.counters.open,
                a.timeout
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// N idle connections: setup rate, bytes per connection.
pub async fn bench_idle(a: &BenchArgs) -> Result<IdleFigures> {
    let n = a.connections.get();
    let base = mib::read().ok();
    let p = Pair::start(a, "hold", n, &[]).await?;
    let server_before = stats(&p.sctl).await?;
    let c = ramped(&p, a, n).await?;
    let setup_cpu = SetupCpu::between(
        &server_before,
        &stats(&p.sctl).await?,
        &c,
        c.counters.connected,
    );
    settled(&p, a).await?;
    let setup_kernel = kernel_since(base);
    // Let allocator and kernel settle before reading RSS.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (s, c) = (stats(&p.sctl).await?, stats(&p.cctl).await?);
    let ramp_s = c.setup_steps.last().map(|x| x.at_s).unwrap_or(0.0);
    let opens: Vec<u64> = s.workers.list.iter().map(|w| w.open).collect();
    let f = IdleFigures {
        connections: c.counters.open,
        ramp_s,
        rate_per_s: if ramp_s > 0.0 {
            c.counters.connected as f64 / ramp_s
        } else {
            0.0
        },
        setup_steps: c.setup_steps.clone(),
        server_bytes_per_conn: s.rss_per_connection_bytes.unwrap_or(0.0),
        client_bytes_per_conn: c.rss_per_connection_bytes.unwrap_or(0.0),
        server_split: s.split.clone(),
        client_split: c.split.clone(),
        server_worker_open_max: opens.iter().copied().max().unwrap_or(0),
        server_worker_open_min: opens.iter().copied().min().unwrap_or(0),
        connect_us: c.percentiles.get("connect_us").copied().unwrap_or_default(),
        setup_kernel,
        setup_cpu,
    };
    p.stop(n).await?;
    Ok(f)
}

/// N WebSocket connections and broadcasts over them: all server shards writing at once
/// (the seeds' way, fastest fan-out; `--unpaced-pushes` of them), then two shards per CPU
/// at a time (readers get the CPU sooner, so per-message latency drops). Each push's
/// histograms are its own: the client's histogram after it minus the one before.
pub async fn bench_push(a: &BenchArgs) -> Result<PushBench> {
    let n = a.connections.get();
    let base = mib::read().ok();
    // Per message from each frame's write: what the writers' pacing changes (the lab's
    // default, from the broadcast start, is the fan-out's to each frame).
    let p = Pair::start(a, "ws", n, &["--push-latency", "write"]).await?;
    let server_before = stats(&p.sctl).await?;
    let c = ramped(&p, a, n).await?;
    let setup_cpu = SetupCpu::between(
        &server_before,
        &stats(&p.sctl).await?,
        &c,
        c.counters.connected,
    );
    let open = settled(&p, a).await?;
    let setup_kernel = kernel_since(base);
    let ramp_s = c.setup_steps.last().map(|x| x.at_s).unwrap_or(0.0);
    // As the idle scenario: let allocator and kernel settle before reading RSS.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (ss, cs) = (stats(&p.sctl).await?, stats(&p.cctl).await?);
    let mut bench = PushBench {
        connections: open,
        ramp_s,
        rate_per_s: if ramp_s > 0.0 {
            c.counters.connected as f64 / ramp_s
        } else {
            0.0
        },
        setup_kernel,
        setup_cpu,
        server_bytes_per_conn: ss.rss_per_connection_bytes.unwrap_or(0.0),
        client_bytes_per_conn: cs.rss_per_connection_bytes.unwrap_or(0.0),
        pushes: Vec::new(),
    };
    let paced = 2 * std::thread::available_parallelism().map_or(1, |c| c.get());
    let figures = &mut bench.pushes;
    let mut before: Option<AppSnapshot> = None;
    for writers in std::iter::repeat_n(0, usize::from(a.unpaced_pushes)).chain([paced]) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let answer = control::call(&p.sctl, &format!("push {writers}")).await?;
        let id = serde_json::from_str::<serde_json::Value>(&answer)
            .ok()
            .and_then(|v| v.get("push_id")?.as_u64())
            .with_context(|| format!("the server refused the push: {answer}"))?;
        let done = |s: &AppSnapshot| s.pushes.iter().any(|x| x.push_id == id && x.count >= open);
        let c = wait_stats(&p.cctl, a.timeout, done).await?;
        let s = wait_stats(&p.sctl, a.timeout, done).await?;
        let of = |snap: &AppSnapshot| snap.pushes.iter().find(|x| x.push_id == id).cloned();
        let hist = |name: &str| -> Result<Percentiles> {
            let mut h = c.histogram(name)?;
            if let Some(b) = &before {
                h.subtract(b.histogram(name)?)
                    .with_context(|| format!("histogram {name} of push {id}"))?;
            }
            Ok(Percentiles::of(&h))
        };
        figures.push(PushFigures {
            writers,
            connections: open,
            received: of(&c).map_or(0, |x| x.count),
            last_received_s: of(&c).map_or(0.0, |x| x.complete_s),
            last_written_s: of(&s).map_or(0.0, |x| x.complete_s),
            per_message_us: hist("push_message_us")?,
            fanout_us: hist("push_fanout_us")?,
        });
        before = Some(c);
    }
    p.stop(n).await?;
    Ok(bench)
}

/// The kernel's counters since `base` (None if either read failed).
fn kernel_since(base: Option<MibCounters>) -> Option<MibCounters> {
    Some(mib::read().ok()?.since(&base?))
}

/// Setup's tail-loss probes, retransmits and DSACKs per 1,000 connections.
fn print_setup_kernel(k: &Option<MibCounters>, n: u64) {
    if let Some(k) = k {
        let per = |v: u64| v as f64 * 1000.0 / n.max(1) as f64;
        println!(
            "   kernel during setup, per 1,000 connections: TCPLossProbes {:.1}, RetransSegs {:.1}, TCPDSACKRecv {:.1}, DelayedACKLost {:.1}",
            per(k.loss_probes),
            per(k.retrans_segs),
            per(k.dsack_recv),
            per(k.delayed_ack_lost)
        );
    }
}

/// Back-to-back echo round trips on `echo_connections` connections.
pub async fn bench_echo(a: &BenchArgs) -> Result<EchoFigures> {
    let n = a.echo_connections.get();
    let p = Pair::start(a, "echo", n, &["--payload-size", "16"]).await?;
    ramped(&p, a, n).await?;
    // Warm up one second, then measure over the window.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let c0 = stats(&p.cctl).await?;
    let t0 = Instant::now();
    tokio::time::sleep(a.echo_time).await;
    let c1 = stats(&p.cctl).await?;
    let window_s = t0.elapsed().as_secs_f64();
    let rt = c1.counters.echo_round_trips - c0.counters.echo_round_trips;
    let f = EchoFigures {
        connections: c1.counters.open,
        window_s,
        round_trips: rt,
        round_trips_per_s: rt as f64 / window_s,
        rtt_us: c1
            .percentiles
            .get("echo_rtt_us")
            .copied()
            .unwrap_or_default(),
    };
    p.stop(n).await?;
    Ok(f)
}

fn print_idle(f: &IdleFigures) {
    println!(
        "== idle: {} connections (the C reference: `cargo xtask bench`)",
        f.connections
    );
    println!("   {}", f.server_split);
    println!("   {}", f.client_split);
    println!(
        "   ramp {:.2} s, {:.0} conn/s overall",
        f.ramp_s, f.rate_per_s
    );
    println!("   connections     at_s   step_s   conn/s");
    for s in &f.setup_steps {
        println!(
            "   {:>11}  {:>7.2}  {:>7.2}  {:>7.0}",
            s.connections, s.at_s, s.step_s, s.rate_per_s
        );
    }
    println!(
        "   user-space memory per idle connection: server {:.0} B, client {:.0} B (goal ≤ 512)",
        f.server_bytes_per_conn, f.client_bytes_per_conn
    );
    println!(
        "   server worker shares: min {} max {}",
        f.server_worker_open_min, f.server_worker_open_max
    );
    print!("{}", f.connect_us.table("   connect latency"));
    print_setup_kernel(&f.setup_kernel, f.connections);
    print_setup_cpu(&f.setup_cpu);
}

fn print_setup_cpu(c: &SetupCpu) {
    println!(
        "   CPU per connection set up: {:.1} µs (server {:.1} user + {:.1} system, client {:.1} + {:.1})",
        c.total_us, c.server_user_us, c.server_sys_us, c.client_user_us, c.client_sys_us
    );
}

fn print_push(f: &PushFigures) {
    let writers = match f.writers {
        0 => "all server shards writing at once".to_owned(),
        n => format!("{n} server shards writing at a time"),
    };
    println!(
        "== push ({writers}): {} of {} connections received the frame",
        f.received, f.connections
    );
    println!(
        "   last written {:.3} s, last received {:.3} s after the broadcast began",
        f.last_written_s, f.last_received_s
    );
    print!(
        "{}",
        f.per_message_us
            .table("   per-message latency (stamp at write)")
    );
    print!(
        "{}",
        f.fanout_us
            .table("   fan-out latency (stamp at broadcast start)")
    );
}

fn print_echo(f: &EchoFigures) {
    println!(
        "== echo: {} connections, {:.0} round trips/s over {:.1} s (reference: 240–290k/s on 2,000)",
        f.connections, f.round_trips_per_s, f.window_s
    );
    print!("{}", f.rtt_us.table("   round-trip time"));
}

/// Runs the chosen scenarios and prints their figures.
pub fn run(a: BenchArgs) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let all = a.scenarios.is_empty();
    let want = |s: &str| all || a.scenarios.iter().any(|x| x == s);
    for s in &a.scenarios {
        if !["idle", "push", "echo"].contains(&s.as_str()) {
            bail!("unknown scenario {s:?}: idle, push, echo");
        }
    }
    let json = |name: &str, v: serde_json::Value| println!("{}", serde_json::json!({ name: v }));
    rt.block_on(async {
        if want("idle") {
            let f = bench_idle(&a).await?;
            if a.json {
                json("idle", serde_json::to_value(&f)?);
            } else {
                print_idle(&f);
            }
        }
        if want("push") {
            let b = bench_push(&a).await?;
            if a.json {
                json("push", serde_json::to_value(&b)?);
            } else {
                println!(
                    "== WebSocket ramp: {} connections in {:.2} s, {:.0} conn/s",
                    b.connections, b.ramp_s, b.rate_per_s
                );
                print_setup_kernel(&b.setup_kernel, b.connections);
                print_setup_cpu(&b.setup_cpu);
                println!(
                    "   user-space memory per idle WebSocket: server {:.0} B, client {:.0} B",
                    b.server_bytes_per_conn, b.client_bytes_per_conn
                );
                for f in &b.pushes {
                    print_push(f);
                }
            }
        }
        if want("echo") {
            let f = bench_echo(&a).await?;
            if a.json {
                json("echo", serde_json::to_value(&f)?);
            } else {
                print_echo(&f);
            }
        }
        Ok(())
    })
}
