//! `cargo xtask bench hosts`: the cost of the path (issue 33, point 3). The same run,
//! `c1m run --tune --rate 10000 -n N`, over loopback (one box, in a fresh network
//! namespace) and over the seeds' topology (`--hosts 1+2 --clients-per-host 10`: a
//! server namespace and two client namespaces on a bridge, veth pairs between), in
//! rounds whose order alternates, so the hour's drift falls on both alike.
//!
//! Printed per run and as the ratio bridge / loopback: setup rate, push (last frame, per-
//! message p99), CPU per side, kernel bytes per connection and per socket, and the slab
//! caches that grew by the end of idle (`/proc/slabinfo`, sampled each second against a
//! reading before the run): what the veth and bridge path holds beyond the sockets.
//! Kernel = app on every host is checked on every run.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::{
    bench::{Netns, settle},
    util::c1m_binary,
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Route {
    Loopback,
    Bridge,
}

impl Route {
    fn name(self) -> &'static str {
        match self {
            Route::Loopback => "loopback",
            Route::Bridge => "bridge",
        }
    }
}

/// Slab bytes per cache (`num_objs × objsize`), from `/proc/slabinfo`.
type Slabs = BTreeMap<String, u64>;

fn slabs() -> Slabs {
    let Ok(text) = std::fs::read_to_string("/proc/slabinfo") else {
        return Slabs::new();
    };
    text.lines()
        .skip(2)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let objs: u64 = f.get(2)?.parse().ok()?;
            let size: u64 = f.get(3)?.parse().ok()?;
            Some((f.first()?.to_string(), objs * size))
        })
        .collect()
}

/// One run's figures, read from its summary.json.
struct Figures {
    outcome: String,
    connected: u64,
    mismatches: usize,
    setup_per_s: f64,
    push_last_s: f64,
    push_p99_ms: f64,
    server_cpu_s: f64,
    client_cpu_s: f64,
    kernel_per_conn: f64,
    server_per_socket: f64,
    /// Each client host's kernel bytes per socket (the loopback run: none apart).
    client_per_socket: Vec<f64>,
    /// Slab growth by the end of idle, bytes per connection, by cache.
    slab_per_conn: Vec<(String, f64)>,
    resets: u64,
    /// One line per client host (the bridge run): the merge's per-host breakdown.
    hosts: Vec<String>,
}

fn read(dir: &Path, slab: Option<(Slabs, Vec<(u64, Slabs)>)>) -> Result<Figures> {
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("summary.json")).context("summary.json")?,
    )?;
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let phases = v["phases"].as_array().context("no phases")?;
    let cpu = |side: &str| {
        phases
            .iter()
            .map(|p| f(&p[side]["cpu_user_s"]) + f(&p[side]["cpu_sys_s"]))
            .sum::<f64>()
    };
    let mismatches = phases
        .iter()
        .flat_map(|p| p["kernel_vs_app"].as_array().into_iter().flatten())
        .filter(|r| !r["kernel"].is_null() && !r["app"].is_null() && r["agree"] != true)
        .count();
    let n = v["client"]["counters"]["connected"].as_u64().unwrap_or(0);
    // Slab growth at the last reading inside idle, against the reading before the run.
    let slab_per_conn = match (slab, phases.iter().find(|p| p["name"] == "idle")) {
        (Some((before, during)), Some(idle)) if n > 0 => {
            let (t0, t1) = (
                idle["started_unix_ms"].as_u64().unwrap_or(0),
                idle["ended_unix_ms"].as_u64().unwrap_or(0),
            );
            let at = during
                .iter()
                .rev()
                .find(|(t, _)| *t >= t0 && *t <= t1)
                .map(|(_, s)| s);
            let mut grew: Vec<(String, f64)> = at
                .into_iter()
                .flatten()
                .filter_map(|(name, b)| {
                    let d = b.saturating_sub(before.get(name).copied().unwrap_or(0));
                    (d > 0).then(|| (name.clone(), d as f64 / n as f64))
                })
                .collect();
            grew.sort_by(|a, b| b.1.total_cmp(&a.1));
            grew
        }
        _ => Vec::new(),
    };
    Ok(Figures {
        outcome: v["outcome"].as_str().unwrap_or("?").to_owned(),
        connected: n,
        mismatches,
        setup_per_s: f(&v["client"]["setup_rate"]["achieved_per_s"]),
        push_last_s: f(&v["client"]["pushes"][0]["complete_s"]),
        push_p99_ms: f(&v["client"]["percentiles"]["push_message_us"]["p99"]) / 1e3,
        server_cpu_s: cpu("server"),
        client_cpu_s: cpu("client"),
        kernel_per_conn: f(&v["per_connection"]["kernel_bytes"]),
        server_per_socket: f(&v["per_connection"]["kernel_bytes_per_socket"]),
        client_per_socket: v["multihost"]["hosts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|h| f(&h["kernel_bytes_per_socket"]))
            .collect(),
        slab_per_conn,
        hosts: v["multihost"]["hosts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|h| {
                format!(
                    "{}: connected {}, kernel {} {} app, retransmits {}, resets {}, CPU {:.1} s, RSS peak {:.0} MiB, user {:.0} B/conn, kernel {:.0} B/socket",
                    h["label"].as_str().unwrap_or("?"),
                    h["connected"],
                    h["kernel_connected"],
                    if h["kernel_agrees"] == true { "=" } else { "≠" },
                    h["kernel_retransmits"],
                    h["kernel_resets_sent"],
                    f(&h["cpu_user_s"]) + f(&h["cpu_sys_s"]),
                    f(&h["rss_peak_bytes"]) / 1048576.0,
                    f(&h["user_bytes_per_connection"]),
                    f(&h["kernel_bytes_per_socket"]),
                )
            })
            .collect(),
        resets: ["server", "client"]
            .iter()
            .flat_map(|side| {
                v["kernel"][side]["resets_sent_by_reason"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter_map(|(_, n)| n.as_u64())
            })
            .sum(),
    })
}

/// One run over `route`, its run folder under a fresh `out`, slab sampled beside it.
fn one(path: Route, n: u64, round: u32) -> Result<Figures> {
    let out: PathBuf = std::env::temp_dir().join(format!(
        "c1m-xbench-hosts-{}-{}{round}",
        std::process::id(),
        path.name()
    ));
    let _ = std::fs::remove_dir_all(&out);
    let common = [
        "run", "--tune", "--plain", "--rate", "10000", "--idle", "10s", "-n",
    ];
    // The loopback run in a namespace of its own, as each host of the bridge run is.
    let ns = match path {
        Route::Loopback => Some(Netns::new(&format!("lo{round}"))?),
        Route::Bridge => {
            settle();
            None
        }
    };
    let mut cmd = match &ns {
        Some(ns) => ns.cmd(c1m_binary()),
        None => Command::new(c1m_binary()),
    };
    cmd.args(common).arg(n.to_string()).arg("--out").arg(&out);
    if path == Route::Bridge {
        cmd.args(["--hosts", "1+2", "--clients-per-host", "10"]);
    }
    let before = slabs();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            // Bounded: a 1M run takes minutes, not an hour.
            for _ in 0..3600 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as u64)
                    .unwrap_or(0);
                seen.push((now, slabs()));
                std::thread::sleep(Duration::from_secs(1));
            }
            seen
        })
    };
    let status = cmd.stdout(Stdio::null()).status().context("c1m run");
    stop.store(true, Ordering::Relaxed);
    let during = sampler.join().unwrap_or_default();
    let status = status?;
    let dir = std::fs::read_dir(&out)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.join("summary.json").is_file())
        .with_context(|| format!("no run folder in {}", out.display()))?;
    let figures = read(&dir, Some((before, during)));
    let _ = std::fs::remove_dir_all(&out);
    drop(ns);
    if !status.success() {
        bail!("c1m run over {} -n {n} ended {status}", path.name());
    }
    figures
}

fn print(path: Route, round: u32, x: &Figures) {
    let hosts = if x.client_per_socket.is_empty() {
        String::new()
    } else {
        format!(
            ", client hosts {}",
            x.client_per_socket
                .iter()
                .map(|b| format!("{b:.0} B"))
                .collect::<Vec<_>>()
                .join(" / ")
        )
    };
    println!(
        "   round {} {:8}: {} {} connected, kernel = app {}, setup {:.0}/s, push last {:.2} s, p99 {:.1} ms, CPU server {:.1} s client {:.1} s, kernel {:.0} B/conn (server {:.0} B/socket{hosts}), resets {}",
        round + 1,
        path.name(),
        x.outcome,
        x.connected,
        if x.mismatches == 0 {
            "on every phase".to_owned()
        } else {
            format!("differs in {} row(s)", x.mismatches)
        },
        x.setup_per_s,
        x.push_last_s,
        x.push_p99_ms,
        x.server_cpu_s,
        x.client_cpu_s,
        x.kernel_per_conn,
        x.server_per_socket,
        x.resets
    );
    for h in &x.hosts {
        println!("      {h}");
    }
    let top: Vec<String> = x
        .slab_per_conn
        .iter()
        .take(8)
        .map(|(c, b)| format!("{c} {b:.0}"))
        .collect();
    let total: f64 = x.slab_per_conn.iter().map(|(_, b)| b).sum();
    println!(
        "      slab grown by the end of idle: {total:.0} B/conn ({})",
        top.join(", ")
    );
}

pub fn run(n: u64, rounds: u32) -> Result<()> {
    println!(
        "== the cost of the path: c1m run --tune --rate 10000 -n {n}, over loopback (one namespace) and over a bridge (--hosts 1+2 --clients-per-host 10), {rounds} round(s), order alternating"
    );
    let mut pairs = Vec::new();
    for r in 0..rounds {
        let order = if r % 2 == 0 {
            [Route::Loopback, Route::Bridge]
        } else {
            [Route::Bridge, Route::Loopback]
        };
        let mut lo = None;
        let mut br = None;
        for p in order {
            let x = one(p, n, r)?;
            print(p, r, &x);
            match p {
                Route::Loopback => lo = Some(x),
                Route::Bridge => br = Some(x),
            }
        }
        if let (Some(lo), Some(br)) = (lo, br) {
            pairs.push((lo, br));
        }
    }
    let ratio = |f: fn(&Figures) -> f64| {
        pairs
            .iter()
            .map(|(lo, br)| format!("{:.2}", f(br) / f(lo)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("   bridge / loopback, per round:");
    println!("      setup rate        {}", ratio(|x| x.setup_per_s));
    println!("      push last frame   {}", ratio(|x| x.push_last_s));
    println!("      push p99          {}", ratio(|x| x.push_p99_ms));
    println!("      server CPU        {}", ratio(|x| x.server_cpu_s));
    println!("      client CPU        {}", ratio(|x| x.client_cpu_s));
    println!("      kernel bytes/conn {}", ratio(|x| x.kernel_per_conn));
    println!(
        "      slab bytes/conn   {}",
        ratio(|x| x.slab_per_conn.iter().map(|(_, b)| b).sum())
    );
    Ok(())
}
