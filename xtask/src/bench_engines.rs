//! `cargo xtask bench engines`: c1m's tokio engine against its epoll engine, both sides
//! (server and client) on the engine under test, each run in a fresh network namespace.
//! A round runs each scenario for both engines, the first engine turned every round, and
//! the WebSocket scenario twice each, A B B A ([`plan`]): a round's second run had an edge
//! of ~7%, so a judged figure gets one of each place. This VM's host takes
//! freed pages back (`page_reporting`, up to ~250 MB/s), and a run on pages it took back
//! pays for them again (300k WebSocket ramps: 25.8k-33.3k conn/s after a 30-s pause,
//! 38.5k right after another run; docs/results.md), so each run takes its memory warm
//! from the bench's keeper (`warm_pages`; `--cold-pages` turns it off), and the table
//! shows how much the host took back during each WebSocket run anyway. Printed: setup
//! rate (raw TCP and WebSocket) and the CPU per connection it took (both sides; a
//! WebSocket's also by side and by user / system time; the WebSocket's the mean of its two
//! runs), push fan-out (last frame) and per-message p99 (each the median of the
//! [`PUSHES`] unpaced pushes of both runs), user-space
//! bytes per idle connection on each side, echo round trips/s on 2,000 connections, and
//! the ratios tokio / epoll per round in a table with each round's box load (goals:
//! WebSocket setup and push ≥ 0.9× epoll, ≤ 512 B per idle server connection).

use anyhow::Result;

use crate::{
    bench::{Netns, c1m_bench, settle, sources, turned},
    bench_cpu::{Setup, SetupCpu},
    bench_table::{self, Better, BoxLoad, Row},
    warm_pages::{RunPages, RunStart},
};

/// tokio's goal on the server's user bytes per idle connection.
const TOKIO_SERVER_BYTES_GOAL: f64 = 512.0;

const ENGINES: [&str; 2] = ["epoll", "tokio"];
const ECHO_CONNECTIONS: u64 = 2_000;
/// Unpaced pushes per run, their median the round's push figure: a 200k push lasts
/// ~1.5 s, and one 0.4 s stall of this VM's CPU (perf: one CPU without a sample while
/// every shard was runnable) swung a round's ratio by a quarter.
const PUSHES: u16 = 3;

/// One engine's figures of one round.
#[derive(Debug, Default, Clone, Copy)]
struct Figures {
    raw_rate: f64,
    raw_cpu: SetupCpu,
    server_bytes: f64,
    client_bytes: f64,
    ws_rate: f64,
    ws_cpu: SetupCpu,
    ws_server_bytes: f64,
    ws_client_bytes: f64,
    push_last_s: f64,
    push_received: u64,
    push_p99_us: f64,
    echo_rt_per_s: f64,
    /// The WebSocket run's memory: from the keeper, and what the host took back.
    ws_pages: RunPages,
}

impl Figures {
    /// The WebSocket figures from an engine's push runs of a round: rates, CPU and bytes
    /// their mean, push figures the median over all their unpaced pushes.
    fn set_websocket(&mut self, runs: &[(serde_json::Value, RunPages)]) {
        let mean = |f: &dyn Fn(&serde_json::Value) -> f64| {
            runs.iter().map(|(v, _)| f(v)).sum::<f64>() / runs.len().max(1) as f64
        };
        let num = |k: &'static str| move |v: &serde_json::Value| v[k].as_f64().unwrap_or(0.0);
        self.ws_rate = mean(&num("rate_per_s"));
        self.ws_server_bytes = mean(&num("server_bytes_per_conn"));
        self.ws_client_bytes = mean(&num("client_bytes_per_conn"));
        let cpus: Vec<SetupCpu> = runs
            .iter()
            .map(|(v, _)| SetupCpu::from_c1m(&v["setup_cpu"]))
            .collect();
        self.ws_cpu = SetupCpu::mean(&cpus);
        self.ws_pages.host_took_mib = runs.iter().map(|(_, p)| p.host_took_mib).sum();
        self.ws_pages.from_keeper_mib = runs.iter().map(|(_, p)| p.from_keeper_mib).sum();
        let unpaced: Vec<&serde_json::Value> = runs
            .iter()
            .filter_map(|(v, _)| v["pushes"].as_array())
            .flatten()
            .filter(|p| p["writers"] == 0)
            .collect();
        let median_of =
            |f: &dyn Fn(&serde_json::Value) -> f64| median(unpaced.iter().map(|p| f(p)).collect());
        self.push_last_s = median_of(&|p| p["last_received_s"].as_f64().unwrap_or(0.0));
        self.push_p99_us = median_of(&|p| p["per_message_us"]["p99"].as_f64().unwrap_or(0.0));
        self.push_received = unpaced
            .iter()
            .map(|p| p["received"].as_u64().unwrap_or(0))
            .min()
            .unwrap_or(0);
    }
}

/// A scenario of the scenarios bench that this bench runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    /// Raw TCP: setup rate and CPU, bytes per idle connection.
    Idle,
    /// WebSocket: setup rate and CPU, bytes, pushes.
    Push,
    /// Echo round trips.
    Echo,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Idle => "idle",
            Scenario::Push => "push",
            Scenario::Echo => "echo",
        }
    }
}

/// Round `r`'s runs, (scenario, index into [`ENGINES`]) in order. The engine that goes
/// first turns every round, and the WebSocket runs (the judged figures) go A B B A: over
/// nine rounds of the old order (one engine's scenarios, then the other's), the three
/// where tokio ran first were its three weakest (0.85-0.90 against 0.90-1.10), an edge of
/// ~7% for a round's second runner, whatever its engine (docs/results.md, 2026-12-06).
fn plan(r: u32) -> [(Scenario, usize); 8] {
    let (a, b) = turned(r, 0, 1);
    [
        (Scenario::Idle, a),
        (Scenario::Idle, b),
        (Scenario::Push, a),
        (Scenario::Push, b),
        (Scenario::Push, b),
        (Scenario::Push, a),
        (Scenario::Echo, a),
        (Scenario::Echo, b),
    ]
}

fn bench(scenario: &str, engine: &str, n: u64, tag: &str) -> Result<(serde_json::Value, RunPages)> {
    let ns = Netns::new(tag)?;
    let start = RunStart::now();
    let extra = [
        "--engine",
        engine,
        "--echo-connections",
        &ECHO_CONNECTIONS.to_string(),
        "--unpaced-pushes",
        &PUSHES.to_string(),
    ];
    let v = c1m_bench(&ns, scenario, n, sources(n), &extra)?;
    let pages = start.end();
    println!(
        "   {engine} {scenario}: took {:.0} MiB of the warm pages; the host took back {:.0} MiB \
         during the run",
        pages.from_keeper_mib, pages.host_took_mib
    );
    Ok((v, pages))
}

pub fn run(n: u64, rounds: u32) -> Result<()> {
    println!(
        "== c1m engines, tokio vs epoll: {n} connections (echo: {ECHO_CONNECTIONS}), {rounds} \
         interleaved round(s), each run in a fresh network namespace"
    );
    let mut all: Vec<[Figures; 2]> = Vec::new();
    let mut loads = Vec::new();
    for r in 0..rounds {
        loads.push(BoxLoad::now(settle()));
        let mut f = [Figures::default(); 2];
        let mut ws_runs: [Vec<(serde_json::Value, RunPages)>; 2] = Default::default();
        for (k, &(scenario, i)) in plan(r).iter().enumerate() {
            let e = ENGINES[i];
            let (v, pages) = bench(scenario.name(), e, n, &format!("{r}{k}{e}"))?;
            let x = &mut f[i];
            let num = |k: &str| v[k].as_f64().unwrap_or(0.0);
            match scenario {
                Scenario::Idle => {
                    x.raw_rate = num("rate_per_s");
                    x.raw_cpu = SetupCpu::from_c1m(&v["setup_cpu"]);
                    x.server_bytes = num("server_bytes_per_conn");
                    x.client_bytes = num("client_bytes_per_conn");
                }
                Scenario::Push => ws_runs[i].push((v, pages)),
                Scenario::Echo => x.echo_rt_per_s = num("round_trips_per_s"),
            }
        }
        for (x, runs) in f.iter_mut().zip(&ws_runs) {
            x.set_websocket(runs);
        }
        for (i, e) in ENGINES.iter().enumerate() {
            println!("   round {}: {e:<5} {:?}", r + 1, f[i]);
        }
        all.push(f);
    }
    let per = |f: &dyn Fn(&Figures) -> f64| all.iter().map(|[ep, tk]| (f(tk), f(ep))).collect();
    // tokio ≥ 0.9× epoll on push: its last frame at most 1/0.9 of epoll's time.
    let mut rows = vec![
        Row {
            figure: "raw TCP setup",
            unit: "conn/s",
            better: Better::Higher,
            goal: None,
            rounds: per(&|f| f.raw_rate),
        },
        Row {
            figure: "WebSocket setup",
            unit: "conn/s",
            better: Better::Higher,
            goal: Some(0.9),
            rounds: per(&|f| f.ws_rate),
        },
    ];
    // What the rates cost (steadier than the rates on a box whose speed drifts), and where
    // a difference in the total is: each side's user and system time.
    let cpu = |f: fn(&Figures) -> SetupCpu| -> Vec<(SetupCpu, SetupCpu)> {
        all.iter().map(|[ep, tk]| (f(tk), f(ep))).collect()
    };
    rows.extend(SetupCpu::rows(Setup::Raw, &cpu(|f| f.raw_cpu)));
    rows.extend(SetupCpu::rows(Setup::WebSocket, &cpu(|f| f.ws_cpu)));
    rows.extend([
        Row {
            figure: "push, last frame received (median)",
            unit: "s",
            better: Better::Lower,
            goal: Some(1.0 / 0.9),
            rounds: per(&|f| f.push_last_s),
        },
        Row {
            figure: "push, per-message p99 (median)",
            unit: "µs",
            better: Better::Lower,
            goal: None,
            rounds: per(&|f| f.push_p99_us),
        },
        Row {
            figure: "echo round trips",
            unit: "/s",
            better: Better::Higher,
            goal: None,
            rounds: per(&|f| f.echo_rt_per_s),
        },
        Row {
            figure: "server user bytes per idle connection",
            unit: "B",
            better: Better::Lower,
            goal: None,
            rounds: per(&|f| f.server_bytes),
        },
        Row {
            figure: "server user bytes per idle WebSocket",
            unit: "B",
            better: Better::Lower,
            goal: None,
            rounds: per(&|f| f.ws_server_bytes),
        },
        // The one outside cost left: a page the host took back costs a fault again.
        Row {
            figure: "memory the host took back during the WebSocket runs",
            unit: "MiB",
            better: Better::Lower,
            goal: None,
            rounds: per(&|f| f.ws_pages.host_took_mib),
        },
    ]);
    println!("{}", bench_table::render("tokio", "epoll", &loads, &rows));
    for (r, [ep, tk]) in all.iter().enumerate() {
        let verdict = |b: f64| {
            if b <= TOKIO_SERVER_BYTES_GOAL {
                "met"
            } else {
                "MISSED"
            }
        };
        println!(
            "   round {}: user bytes per idle connection, server / client, raw TCP: epoll {:.0} / \
             {:.0}, tokio {:.0} / {:.0} ({}); WebSocket: epoll {:.0} / {:.0}, tokio {:.0} / {:.0} \
             ({}; goal for tokio's server ≤ {TOKIO_SERVER_BYTES_GOAL:.0}); push received epoll {} \
             tokio {} of {n}",
            r + 1,
            ep.server_bytes,
            ep.client_bytes,
            tk.server_bytes,
            tk.client_bytes,
            verdict(tk.server_bytes),
            ep.ws_server_bytes,
            ep.ws_client_bytes,
            tk.ws_server_bytes,
            tk.ws_client_bytes,
            verdict(tk.ws_server_bytes),
            ep.push_received,
            tk.push_received
        );
    }
    Ok(())
}

/// The middle value (the upper of the two middle ones for an even count); 0 if none.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}
