//! `cargo xtask bench engines`: c1m's tokio engine against its epoll engine, both sides
//! (server and client) on the engine under test, interleaved per scenario with the order
//! swapped every round, each run in a fresh network namespace. Printed: setup rate (raw
//! TCP and WebSocket), push fan-out (last frame) and per-message p99, user-space bytes per
//! idle connection on each side, echo round trips/s on 2,000 connections, and the ratios
//! tokio / epoll per round (the goals: rates ≥ 0.85, bytes ≤ 1,536 per side).

use anyhow::Result;

use crate::bench::{Netns, c1m_bench, per_round, sources};

const ENGINES: [&str; 2] = ["epoll", "tokio"];
const ECHO_CONNECTIONS: u64 = 2_000;

/// One engine's figures of one round.
#[derive(Debug, Default, Clone, Copy)]
struct Figures {
    raw_rate: f64,
    server_bytes: f64,
    client_bytes: f64,
    ws_rate: f64,
    push_last_s: f64,
    push_received: u64,
    push_p99_us: f64,
    echo_rt_per_s: f64,
}

fn bench(scenario: &str, engine: &str, n: u64, tag: &str) -> Result<serde_json::Value> {
    let ns = Netns::new(tag)?;
    let extra = [
        "--engine",
        engine,
        "--echo-connections",
        &ECHO_CONNECTIONS.to_string(),
    ];
    c1m_bench(&ns, scenario, n, sources(n), &extra)
}

pub fn run(n: u64, rounds: u32) -> Result<()> {
    println!(
        "== c1m engines, tokio vs epoll: {n} connections (echo: {ECHO_CONNECTIONS}), {rounds} \
         interleaved round(s), each run in a fresh network namespace"
    );
    let mut all: Vec<[Figures; 2]> = Vec::new();
    for r in 0..rounds {
        let mut f = [Figures::default(); 2];
        // Swap who goes first every round: neither engine always gets the warmer box.
        let order: Vec<usize> = if r % 2 == 0 { vec![0, 1] } else { vec![1, 0] };
        for scenario in ["idle", "push", "echo"] {
            for &i in &order {
                let e = ENGINES[i];
                let v = bench(scenario, e, n, &format!("{r}{}{e}", &scenario[..1]))?;
                let x = &mut f[i];
                let num = |k: &str| v[k].as_f64().unwrap_or(0.0);
                match scenario {
                    "idle" => {
                        x.raw_rate = num("rate_per_s");
                        x.server_bytes = num("server_bytes_per_conn");
                        x.client_bytes = num("client_bytes_per_conn");
                    }
                    "push" => {
                        x.ws_rate = num("rate_per_s");
                        let p = &v["pushes"][0];
                        x.push_last_s = p["last_received_s"].as_f64().unwrap_or(0.0);
                        x.push_received = p["received"].as_u64().unwrap_or(0);
                        x.push_p99_us = p["per_message_us"]["p99"].as_f64().unwrap_or(0.0);
                    }
                    _ => x.echo_rt_per_s = num("round_trips_per_s"),
                }
            }
        }
        for (i, e) in ENGINES.iter().enumerate() {
            println!("   round {}: {e:<5} {:?}", r + 1, f[i]);
        }
        all.push(f);
    }
    let list = |g: &dyn Fn(&Figures, &Figures) -> f64| per_round(&all, |[ep, tk]| g(ep, tk));
    println!("   tokio / epoll, per round (rates: > 1 is faster; times and bytes: < 1 is less):");
    println!(
        "   raw TCP setup, conn/s:          {}",
        list(&|e, t| t.raw_rate / e.raw_rate)
    );
    println!(
        "   WebSocket setup, conn/s:        {}",
        list(&|e, t| t.ws_rate / e.ws_rate)
    );
    println!(
        "   push, last frame received:      {}",
        list(&|e, t| t.push_last_s / e.push_last_s)
    );
    println!(
        "   push, per-message p99:          {}",
        list(&|e, t| t.push_p99_us / e.push_p99_us.max(1.0))
    );
    println!(
        "   echo round trips/s ({ECHO_CONNECTIONS} conns): {}",
        list(&|e, t| t.echo_rt_per_s / e.echo_rt_per_s)
    );
    for (r, [ep, tk]) in all.iter().enumerate() {
        println!(
            "   round {}: user bytes per idle connection, server / client: epoll {:.0} / {:.0}, \
             tokio {:.0} / {:.0} (goal for tokio ≤ 1,536); push received epoll {} tokio {} of {n}",
            r + 1,
            ep.server_bytes,
            ep.client_bytes,
            tk.server_bytes,
            tk.client_bytes,
            ep.push_received,
            tk.push_received
        );
    }
    Ok(())
}
