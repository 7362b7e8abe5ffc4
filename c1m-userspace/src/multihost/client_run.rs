//! `c1m client`'s run: the workload's shards under a supervisor, and beside them what a
//! client host of a many-host run keeps (its run folder, its metrics, its clock offset
//! to the server host). It sits above the lab because a host's folder is a lab record.

use std::{net::IpAddr, time::Duration};

use anyhow::{Context, Result, bail};

use super::client_metrics::ClientMetrics;
use crate::{
    args::{parse_addrs, parse_ports},
    model::RunInfo,
    workload::{
        cli::{ClientArgs, ClientEndpoints, Hold, cpus, default_step, runtime},
        config::{ClientShardConfig, ShardConfig},
        limits::{self, plan_client},
        push_rule::PushRule,
        push_trigger::PushTrigger,
        stats::snapshot::AppSnapshot,
        supervisor::{self, Options, Side},
        sys,
    },
};

/// `c1m client`.
pub(crate) fn run_client(a: ClientArgs) -> Result<()> {
    PushRule::check_stamp(&a.push_format, a.push_stamp).map_err(anyhow::Error::msg)?;
    match (&a.push_trigger, a.server_pid) {
        (Some(PushTrigger::Control), _) => bail!(
            "--push-trigger control: c1m's own server is pushed by `c1m run` or `push` on its control endpoint; \
             for a server of yours say signal:NAME, http:URL, cmd:\"…\" or none"
        ),
        (Some(PushTrigger::Signal(s)), None) => {
            bail!(
                "--push-trigger signal:{} needs the server's pid: add --server-pid PID",
                s.name
            )
        }
        _ => {}
    }
    let rt = runtime()?;
    let shard = crate::workload::host_share::resolve(a.hosts_run.shard, |k| std::env::var(k).ok())?;
    let mut a = a;
    let total = a.connections;
    if let Some(s) = shard {
        // This host's part of the totals; everything below sees only its share.
        let all = parse_addrs(&a.sources)?;
        a.rate = s.rate(a.rate, total)?;
        a.connections = s.connections(total)?;
        a.sources = s.sources(&all)?.iter().map(IpAddr::to_string).collect();
        a.in_flight = (a.in_flight / s.count).max(1);
        println!(
            "c1m client: shard {}/{}: {} of {total} connections, {:.0} conn/s, {} source address(es)",
            s.index,
            s.count,
            a.connections,
            a.rate,
            a.sources.len()
        );
    }
    let clock = match &a.hosts_run.clock_from {
        // Also the wait for the server host: its endpoint answers once it is up.
        Some(ep) => Some(rt.block_on(clock_offset_when_up(ep))?),
        None => None,
    };
    let ClientEndpoints {
        targets,
        sources,
        source_ports,
    } = a.endpoints()?;
    let nofile = limits::raise_nofile().context("RLIMIT_NOFILE")?;
    if source_ports.is_none()
        && let Some(eph) = limits::ephemeral_ports()
    {
        let pairs = sources.len().max(1) as u64 * targets.len() as u64;
        if pairs * eph < a.connections.get() {
            eprintln!(
                "c1m client: warning: {} connections over {pairs} (source, destination) pairs × {eph} ephemeral \
                 ports (net.ipv4.ip_local_port_range) cannot fit; expect EADDRNOTAVAIL: add --source addresses \
                 (e.g. --source 127.0.0.2-127.0.0.41) or server --ports",
                a.connections
            );
        }
    }
    let plan = plan_client(
        a.connections.get(),
        nofile,
        a.workers,
        a.common.threads.unwrap_or_else(cpus),
    );
    let shards = plan.per_shard.len() as u64;
    let mut seed = [0u8; 8];
    sys::random_bytes(&mut seed);
    let seed = u64::from_le_bytes(seed);
    let configs = plan
        .per_shard
        .iter()
        .enumerate()
        .map(|(i, &count)| {
            ShardConfig::Client(ClientShardConfig {
                shard: i as u32,
                engine: a.common.engine,
                mode: a.mode,
                count,
                first: i as u64,
                stride: shards,
                targets: targets.clone(),
                sources: sources.clone(),
                source_ports,
                rate: a.rate / shards as f64,
                in_flight: (a.in_flight / shards).max(1),
                connect_timeout_ms: a.connect_timeout.as_millis() as u64,
                payload: a.workload.payload_size.max(1),
                echo_count: a.workload.echo_count,
                path: a.workload.path.clone(),
                host: "localhost".into(),
                max_message: a.max_message,
                seed,
                clock_offset_ns: clock.map(|c| c.offset_ns).unwrap_or(0),
                push_format: a.push_format.clone(),
                push_latency: a.push_latency,
            })
        })
        .collect();
    // Bound before the run, so a taken address fails the command before any connect.
    let metrics = match a.hosts_run.metrics_addr {
        Some(addr) => Some(rt.block_on(ClientMetrics::start(
            addr,
            RunInfo {
                command: "client",
                mode: a.mode.name().to_owned(),
                engine: a.common.engine.name().to_owned(),
                server: a.hosts.join(","),
                target_connections: a.connections.get(),
                // The lab's c1m_run_info says how the run times its pushes.
                push: None,
            },
        ))?),
        None => None,
    };
    let (samples_tx, mut samples_rx) = tokio::sync::mpsc::unbounded_channel();
    let server_ports = parse_ports(&a.ports)?;
    let folder = match &a.hosts_run.run_dir {
        None => None,
        Some(dir) => {
            // After the first clock query, so what it attaches to is the run's own; the
            // same figures as a one-box run's client side, or the socket table, marked.
            let (reader, source, fallback) =
                crate::multihost::client_host::KernelReader::start(&server_ports);
            let host = crate::multihost::model::HostInfo {
                role: crate::multihost::model::HostRole::Client,
                hostname: crate::lab::run::host::machine().hostname,
                label: a
                    .hosts_run
                    .host_label
                    .clone()
                    .unwrap_or_else(|| crate::lab::run::host::machine().hostname),
                shard_index: shard.map(|s| s.index),
                shard_count: shard.map(|s| s.count),
                connections_total: Some(total.get()),
                clock,
                clock_end: None,
                kernel_source: Some(source),
                kernel_fallback: fallback,
            };
            let config = crate::model::RunConfig {
                connections: a.connections.get(),
                connections_reason: match shard {
                    Some(s) => format!("shard {}/{} of {total}", s.index, s.count),
                    None => "asked".to_owned(),
                },
                rate_per_s: a.rate.round() as u64,
                mode: a.mode.name().to_owned(),
                engine: a.common.engine,
                ports: a.ports.clone(),
                server_addrs: a.hosts.join(","),
                sources: a.sources.join(","),
                payload_size: a.workload.payload_size as u64,
                echo_count: a.workload.echo_count,
                ws_path: a.workload.path.clone(),
                command_line: crate::util::command_line(),
                // This host is told one trigger instant: its own --push-trigger's.
                push: Some(PushRule::new(
                    a.push_latency,
                    &a.push_format,
                    a.push_stamp,
                    a.push_trigger
                        .as_ref()
                        .is_some_and(|t| *t != PushTrigger::None),
                )),
                observer: source == crate::multihost::model::KernelSource::Observer,
                ..Default::default()
            };
            Some((
                crate::multihost::client_host::HostFolder::create(dir, config, host)?,
                reader,
            ))
        }
    };
    let o = Options {
        side: Side::Client,
        mode: a.mode,
        target: a.connections.get(),
        control: a.common.control,
        control_token_file: a.common.control_token_file,
        stats_json: a.common.stats_json,
        quiet: a.common.quiet,
        push_every: None,
        push_writers: 0,
        duration: match a.hold {
            Hold::For(d) => Some(d),
            Hold::Forever => None,
        },
        stay: a.stay,
        step: a.step.unwrap_or_else(|| default_step(a.connections.get())),
        rate: a.rate,
        start_at_unix_ns: a.hosts_run.start_at.map(|t| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0)
        }),
        end_when_peer_closes: shard.is_some(),
        samples: (folder.is_some() || metrics.is_some()).then_some(samples_tx),
        push_trigger: a.push_trigger.clone(),
        server_pid: a.server_pid,
    };
    let snap = rt.block_on(async {
        // The folder and the metrics take each second's snapshot beside the run.
        let mut folder = folder;
        let mut metrics = metrics;
        let writer = (folder.is_some() || metrics.is_some()).then(|| {
            tokio::spawn(async move {
                while let Some(s) = samples_rx.recv().await {
                    if let Some(m) = metrics.as_mut() {
                        m.observe(&s);
                    }
                    if let Some((f, reader)) = folder.as_mut() {
                        let kernel = reader.read(false).await;
                        f.observe(&s, kernel);
                    }
                }
                folder
            })
        });
        let snap = supervisor::run(o, &plan, configs).await;
        let folder = match writer {
            Some(w) => w.await.context("the run folder's writer")?,
            None => None,
        };
        // The last kernel reading, after a fresh walk, before the clock query at the end.
        let folder = match folder {
            Some((f, reader)) => Some((f, reader.read(true).await)),
            None => None,
        };
        anyhow::Ok((snap, folder))
    })?;
    let (snap, folder) = snap;
    let snap = snap?;
    let verdict = client_verdict(&snap);
    if let Some((mut f, kernel)) = folder {
        if let (Some(ep), Some(h)) = (&a.hosts_run.clock_from, f.host_mut()) {
            // Again at the end: the difference is the drift over the run.
            h.clock_end = rt.block_on(clock_offset(ep)).ok();
        }
        let warnings = verdict
            .as_ref()
            .err()
            .map(|e| vec![format!("{e:#}")])
            .unwrap_or_default();
        f.finish(&snap, kernel, warnings)?;
    }
    verdict
}

/// How long a client host waits for the server host's control endpoint to come up
/// (pods of a Kubernetes run start in any order).
const SERVER_UP_WITHIN: Duration = Duration::from_secs(120);

/// [`clock_offset`], retried once a second until the endpoint answers.
async fn clock_offset_when_up(ep: &str) -> Result<crate::workload::control::clock::ClockOffset> {
    let until = tokio::time::Instant::now() + SERVER_UP_WITHIN;
    loop {
        match clock_offset(ep).await {
            Ok(c) => return Ok(c),
            Err(e) if tokio::time::Instant::now() >= until => {
                return Err(e.context(format!(
                    "the server host's control endpoint did not answer within {SERVER_UP_WITHIN:?}: is `c1m run --clients external` running there?"
                )));
            }
            Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}

/// The clock offset to the server host, said as the client sees it.
async fn clock_offset(ep: &str) -> Result<crate::workload::control::clock::ClockOffset> {
    let c = crate::workload::control::clock::measure(ep, Duration::from_secs(10)).await?;
    println!(
        "c1m client: clock offset to {ep}: {:+.3} ms ± {:.3} ms (min RTT of {} round trips)",
        c.offset_ns as f64 / 1e6,
        c.uncertainty_ns as f64 / 1e6,
        c.round_trips
    );
    Ok(c)
}

/// A client run fails (non-zero exit) if any connection failed or any echo came back wrong,
/// with one line that names the causes.
fn client_verdict(s: &AppSnapshot) -> Result<()> {
    let c = &s.counters;
    let mut f = c.failures;
    f.aborted = 0;
    let bad: Vec<String> = f
        .iter()
        .chain([
            ("echo_mismatch", c.closed.echo_mismatch),
            ("worker_lost", c.closed.worker_lost),
        ])
        .filter(|(_, v)| *v > 0)
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        bail!(
            "{} of {} connections established; failures: {}",
            c.connected,
            s.target,
            bad.join(" ")
        )
    }
}
