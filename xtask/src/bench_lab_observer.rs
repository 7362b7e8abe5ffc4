//! `cargo xtask bench lab-observer`: what the observer costs where users run it, the lab's
//! own setup phase (`c1m run --tune`, WebSocket, default sources) with and without the
//! observer, in pairs whose order alternates, each run in a fresh network namespace.
//! Printed per pair: setup seconds both ways and the cost (with / without − 1); then the
//! median and the spread over the pairs (the goal: ≤ 5%). The walk of every socket
//! the lab makes after the phase for its kernel column is printed beside it: it is not
//! setup time (before `end_walk_s` existed it was counted in, and was most of the cost).
//! With the observer, its own CPU is measured too, over the whole run and in the setup
//! and push phases alone: its threads and its BPF programs' run time, as a share of the
//! box's busy CPU (see [`crate::observer_cpu`]).

use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::{
    bench::Netns,
    observer_cpu::{BpfStats, ObserverCpu, Sampler},
    util::c1m_binary,
};

/// How often the observer's CPU is sampled while a run goes on.
const SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// One lab run: its setup phase and the walk after it, seconds, and (with the observer)
/// the observer's CPU over the run.
fn setup_s(
    n: u64,
    rate: Option<u64>,
    observer: bool,
    tag: &str,
) -> Result<(f64, f64, Option<ObserverCpus>)> {
    let ns = Netns::new(tag)?;
    let out = std::env::temp_dir().join(format!("c1m-xbench-lab-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let mut cmd = ns.cmd(c1m_binary());
    cmd.args([
        "run",
        "--tune",
        "--plain",
        "--idle",
        "1s",
        "-n",
        &n.to_string(),
    ])
    .arg("--out")
    .arg(&out);
    if let Some(r) = rate {
        cmd.args(["--rate", &r.to_string()]);
    }
    if !observer {
        cmd.arg("--no-observer");
    }
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .spawn()
        .context("c1m run")?;
    // `ip netns exec` execs c1m in place: the child's pid is the lab's.
    let mut sampler = Sampler::new(child.id());
    let status = loop {
        if let Some(status) = child.try_wait().context("waiting for c1m run")? {
            break status;
        }
        sampler.sample();
        std::thread::sleep(SAMPLE_EVERY);
    };
    let figure = read_setup(&out).map(|setup| {
        let cpu = observer.then(|| ObserverCpus {
            run: sampler.cpu,
            setup: sampler.between(setup.started_ms, setup.ended_ms),
            push: setup.push_ms.and_then(|(a, b)| sampler.between(a, b)),
        });
        (setup.duration_s, setup.end_walk_s, cpu)
    });
    let _ = std::fs::remove_dir_all(&out);
    if !status.success() {
        bail!("c1m run -n {n} (observer {observer}) failed: {status}");
    }
    figure
}

/// The setup phase of a run, from its summary, and the push's window.
struct Setup {
    duration_s: f64,
    end_walk_s: f64,
    started_ms: u64,
    ended_ms: u64,
    push_ms: Option<(u64, u64)>,
}

/// The observer's CPU over the whole run, and over the setup and push phases alone (the
/// ramp and the broadcast, without the walks before and after them).
#[derive(Clone, Copy)]
struct ObserverCpus {
    run: ObserverCpu,
    setup: Option<ObserverCpu>,
    push: Option<ObserverCpu>,
}

/// The setup phase's duration, end walk and window from the one run folder under `out`.
fn read_setup(out: &Path) -> Result<Setup> {
    let dir = std::fs::read_dir(out)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.join("summary.json").is_file())
        .with_context(|| format!("no run folder in {}", out.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json"))?)?;
    let phase = |name: &str| {
        v["phases"]
            .as_array()
            .and_then(|p| p.iter().find(|p| p["name"] == name))
    };
    let setup = phase("setup").context("no setup phase in summary.json")?;
    let push_ms = phase("push")
        .and_then(|p| Some((p["started_unix_ms"].as_u64()?, p["ended_unix_ms"].as_u64()?)));
    let duration = setup["duration_s"]
        .as_f64()
        .context("setup phase without duration_s")?;
    Ok(Setup {
        duration_s: duration,
        end_walk_s: setup["end_walk_s"].as_f64().unwrap_or(0.0),
        started_ms: setup["started_unix_ms"].as_u64().unwrap_or(0),
        ended_ms: setup["ended_unix_ms"].as_u64().unwrap_or(u64::MAX),
        push_ms,
    })
}

pub fn run(n: u64, pairs: u32, rate: Option<u64>) -> Result<()> {
    let pace = rate.map_or(String::new(), |r| format!(" --rate {r}"));
    println!(
        "== observer cost on the lab's setup: c1m run --tune -n {n}{pace}, with and without \
         the observer, {pairs} pair(s), order alternating, each run in a fresh network namespace"
    );
    let _stats = BpfStats::on();
    let mut costs = Vec::new();
    let mut shares = Vec::new();
    let mut setup_shares = Vec::new();
    let mut push_shares = Vec::new();
    for r in 0..pairs {
        let order = if r % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        let mut with = 0.0;
        let mut without = 0.0;
        let mut walk = 0.0;
        let mut cpu = None;
        for observer in order {
            let (s, w, c) = setup_s(n, rate, observer, &format!("lo{r}{}", u8::from(observer)))?;
            if observer {
                (with, walk, cpu) = (s, w, c);
            } else {
                without = s;
            }
        }
        let cost = with / without - 1.0;
        println!(
            "   pair {}: setup {with:.1} s with the observer, {without:.1} s without: {:+.1}% \
             (then the walk of every socket: {walk:.1} s)",
            r + 1,
            cost * 100.0
        );
        if let Some(c) = cpu {
            print_cpu("over the run", &c.run);
            shares.push(c.run.share());
            match c.setup {
                Some(s) => {
                    print_cpu("in setup", &s);
                    setup_shares.push(s.share());
                }
                None => println!("           (setup too short for two samples inside it)"),
            }
            if let Some(p) = c.push {
                print_cpu("in push", &p);
                push_shares.push(p.share());
            }
        }
        costs.push(cost);
    }
    costs.sort_by(f64::total_cmp);
    if let (Some(lo), Some(hi)) = (costs.first(), costs.last()) {
        println!(
            "   observer cost: median {:+.1}%, from {:+.1}% to {:+.1}% over {} pair(s) (goal ≤ 5%)",
            costs[costs.len() / 2] * 100.0,
            lo * 100.0,
            hi * 100.0,
            costs.len()
        );
    }
    for (what, mut v) in [
        ("over the run", shares),
        ("in setup", setup_shares),
        ("in push", push_shares),
    ] {
        v.sort_by(f64::total_cmp);
        if !v.is_empty() {
            println!(
                "   observer's share of the box's busy CPU {what}: median {:.1}% over {} run(s) \
                 (goal ≤ 5%)",
                v[v.len() / 2] * 100.0,
                v.len()
            );
        }
    }
    Ok(())
}

fn print_cpu(what: &str, c: &ObserverCpu) {
    println!(
        "           observer CPU {what}: observer thread {:.2} s, walker {:.2} s (iterator \
         programs {:.2} s of these two), hook programs {:.2} s in {} runs ({:.0} ns each): \
         {:.1}% of the box's {:.1} busy CPU-seconds",
        c.observer_s,
        c.walker_s,
        c.iterators_s,
        c.programs_s,
        c.program_runs,
        c.programs_s * 1e9 / c.program_runs.max(1) as f64,
        c.share() * 100.0,
        c.box_busy_s
    );
}
