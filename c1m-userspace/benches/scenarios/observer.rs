//! The `observer` scenario: connection setup throughput with and without the observer
//! attached. The command line of the whole bench lives here too ([`BenchCmd`]); the
//! workload scenarios (idle ramp, push, echo) are in `workload.rs`.

use std::{
    net::{TcpListener, TcpStream},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use clap::Args;

use c1m::{
    args::Connections,
    observer::{Observer, ObserverConfig, privileges},
};

use crate::workload::BenchArgs;

#[derive(Args, Debug, Clone)]
pub struct BenchCmd {
    #[command(flatten)]
    pub workload: BenchArgs,
    /// Connections per round of the `observer` scenario (both ends in one process, so
    /// at most half the fd limit).
    #[arg(long, default_value_t = Connections::of(8000))]
    pub observer_round: Connections,
    /// Rounds per measurement of the `observer` scenario.
    #[arg(long, default_value_t = 4)]
    pub observer_rounds: u32,
}

pub const SCENARIOS: [&str; 4] = ["idle", "push", "echo", "observer"];

pub fn run(mut cmd: BenchCmd) -> Result<()> {
    if let Some(bad) = cmd
        .workload
        .scenarios
        .iter()
        .find(|s| !SCENARIOS.contains(&s.as_str()))
    {
        bail!(
            "unknown benchmark {bad:?}: choose from {}",
            SCENARIOS.join(", ")
        );
    }
    let all = cmd.workload.scenarios.is_empty();
    let observer = all || cmd.workload.scenarios.iter().any(|s| s == "observer");
    cmd.workload.scenarios.retain(|s| s != "observer");
    if all || !cmd.workload.scenarios.is_empty() {
        crate::workload::run(cmd.workload.clone())?;
    }
    if observer {
        observer_overhead(cmd.observer_round.get(), cmd.observer_rounds)?;
    }
    Ok(())
}

/// Setup throughput (connect + accept, loopback, blocking) with and without the
/// observer, each measurement in a fresh network namespace so TIME_WAIT and port
/// reuse from one can't slow the next.
fn observer_overhead(per_round: u64, rounds: u32) -> Result<()> {
    if !privileges::is_root() {
        println!(
            "== observer overhead: SKIPPED (needs root for the eBPF programs and private netns)"
        );
        return Ok(());
    }
    println!(
        "== observer overhead: connection setup, {per_round} × {rounds} connections per measurement (goal < 5% slower)"
    );
    let mut without = Vec::new();
    let mut with = Vec::new();
    // Alternate, so drift of the box (the /proc walker, caches) hits both alike, and
    // judge by the median of the pairs' slowdowns: a pair shares one moment of the box,
    // whose speed moves by 10-15% within a minute here.
    let mut pairs = Vec::new();
    for _ in 0..5 {
        let (a, b) = (
            measure(per_round, rounds, false)?,
            measure(per_round, rounds, true)?,
        );
        without.push(a);
        with.push(b);
        pairs.push((a - b) / a * 100.0);
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "   without observer: {:>9.0} conn/s  (runs: {})",
        median(&without),
        fmt_runs(&without)
    );
    println!(
        "   with observer:    {:>9.0} conn/s  (runs: {})",
        median(&with),
        fmt_runs(&with)
    );
    let per_pair: Vec<String> = pairs.iter().map(|p| format!("{p:.1}")).collect();
    println!(
        "   slowdown: {:.1}% (median of pairs: {})",
        median(&pairs),
        per_pair.join(", ")
    );
    Ok(())
}

fn fmt_runs(v: &[f64]) -> String {
    v.iter()
        .map(|r| format!("{r:.0}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn measure(per_round: u64, rounds: u32, observe: bool) -> Result<f64> {
    std::thread::spawn(move || -> Result<f64> {
        c1m::netns::enter_private().context("private network namespace")?;
        c1m::netns::set_sysctl("net/ipv4/ip_local_port_range", "10000 65000")?;
        let observer = if observe {
            let ports = (0..rounds).map(|r| 18_000 + r as u16).collect();
            Some(Observer::start(ObserverConfig {
                ports,
                ..ObserverConfig::default()
            })?)
        } else {
            None
        };
        let mut elapsed = Duration::ZERO;
        for round in 0..rounds {
            let port = 18_000 + round as u16;
            let listener = TcpListener::bind(("127.0.0.1", port))?;
            // std listens with a backlog of 128; a full queue would turn the benchmark
            // into a measure of SYN retransmit timers.
            // Re-listening on our own bound socket only changes its backlog.
            let _ = rustix::net::listen(&listener, 4096);
            let acceptor = std::thread::spawn(move || -> std::io::Result<Vec<TcpStream>> {
                (0..per_round)
                    .map(|_| listener.accept().map(|(s, _)| s))
                    .collect()
            });
            let started = Instant::now();
            let clients: Vec<TcpStream> = (0..per_round)
                .map(|_| TcpStream::connect(("127.0.0.1", port)))
                .collect::<std::io::Result<_>>()?;
            let servers = acceptor
                .join()
                .map_err(|_| anyhow::anyhow!("acceptor panicked"))??;
            elapsed += started.elapsed();
            // Server closes first: the TIME_WAITs land on this round's port only.
            drop(servers);
            drop(clients);
        }
        drop(observer);
        Ok((per_round * u64::from(rounds)) as f64 / elapsed.as_secs_f64())
    })
    .join()
    .map_err(|_| anyhow::anyhow!("benchmark thread panicked"))?
}
