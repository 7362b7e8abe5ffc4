//! `c1m client`'s run: the workload's shards under a supervisor, and beside them what a
//! client host of a many-host run keeps (its run folder, its metrics, its clock offset
//! to the server host). It sits above the lab because a host's folder is a lab record.

use std::{net::IpAddr, time::Duration};

use anyhow::{Context, Result, bail};

use super::{
    client_host::{HostFolder, HostKernel},
    client_metrics::ClientMetrics,
    model::{HostInfo, HostRole},
};
use crate::{
    args::{Connections, parse_addrs, parse_host_port, parse_ports},
    model::{Outcome, RunInfo},
    workload::{
        churn::{ChurnConfig, ChurnRate},
        cli::{ClientArgs, ClientEndpoints, Hold, cpus, default_step, runtime},
        config::{ClientShardConfig, Mode, ShardConfig},
        control::clock::{self, ClockError, Measured},
        heartbeat::HeartbeatConfig,
        host_share::ShardOf,
        limits::{self, Plan, plan_client},
        messages::MessageConfig,
        push_rule::PushRule,
        push_trigger::PushTrigger,
        stats::snapshot::AppSnapshot,
        supervisor::{self, Options, Side},
        sys,
    },
};

/// `c1m client`: its exit code, [`Outcome::exit_code`] of how it ended (as `c1m run`'s).
pub(crate) fn run_client(a: ClientArgs) -> Result<i32> {
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
    crate::workload::churn::check(
        a.workload.churn.map(|r| r.0),
        a.connections.get(),
        match a.hold {
            Hold::For(d) => Some(d),
            Hold::Forever => None,
        },
        "--hold",
    )
    .map_err(anyhow::Error::msg)?;
    if a.mode == Mode::Hold
        && (a.workload.message_rate.is_some() || a.workload.total_message_rate.is_some())
    {
        bail!(
            "--message-rate sends messages for the server to echo: it needs --mode ws or --mode echo"
        );
    }
    let rt = runtime()?;
    let shard = crate::workload::host_share::resolve(a.hosts_run.shard, |k| std::env::var(k).ok())?;
    let mut a = a;
    let total = a.connections;
    if let Some(s) = shard {
        // This host's part of the totals; everything below sees only its share.
        let all = parse_addrs(&a.sources)?;
        a.rate = s.rate(a.rate, total)?;
        // Churn as the rate: proportional to this host's connections.
        a.workload.churn = match a.workload.churn {
            Some(r) => Some(ChurnRate(s.rate(r.0, total)?)),
            None => None,
        };
        a.connections = s.connections(total)?;
        a.sources = s.sources(&all)?.iter().map(IpAddr::to_string).collect();
        a.in_flight = (a.in_flight / s.count).max(1);
        // What this host sends of --total-message-rate, said with the rest of its share.
        let mut messages = String::new();
        if let Some(r) = a.workload.total_message_rate.as_mut() {
            let all = r.0;
            r.0 = s.rate(all, total)?;
            messages = format!(
                ", messages {} of {}",
                crate::fmt::per_s(r.0),
                crate::fmt::per_s(all)
            );
        }
        println!(
            "c1m client: shard {}/{}: {} of {total} connections, {:.0} conn/s{messages}, {} source address(es)",
            s.index,
            s.count,
            a.connections,
            a.rate,
            a.sources.len()
        );
    }
    // The folder first: every failure from here on (a wrong clock endpoint above all)
    // is recorded in it, outcome failed with the reason, so nothing is lost.
    let mut folder = match &a.hosts_run.run_dir {
        None => None,
        Some(dir) => Some(host_folder(dir, &a, shard, total)?),
    };
    let ready = match prepare(&a, &rt) {
        Ok(r) => r,
        Err(e) => return Err(failed(folder, e)),
    };
    if let (Some(h), Some(m)) = (folder.as_mut().and_then(HostFolder::host_mut), &ready.clock) {
        h.clock = Some(m.offset);
        h.run_id.clone_from(&m.run_id);
    }
    let Ready {
        clock,
        plan,
        configs,
        metrics,
    } = ready;
    // After the first clock query, so what it attaches to is the run's own; the same
    // figures as a one-box run's client side, or the socket table, marked.
    let reader = match folder.as_mut() {
        Some(f) => {
            let loss = match (a.hosts_run.loss, &a.hosts_run.loss_link) {
                (Some(p), Some(link)) => Some(crate::observer::LossInjection {
                    probability: p.fraction(),
                    threshold: p.threshold(),
                    link: link.clone(),
                }),
                _ => None,
            };
            let (reader, source, fallback) =
                match crate::multihost::client_host::KernelReader::start(
                    &parse_ports(&a.ports)?,
                    loss,
                ) {
                    Ok(r) => r,
                    Err(e) => return Err(failed(folder, e)),
                };
            f.set_kernel_source(source, fallback);
            Some(reader)
        }
        None => None,
    };
    let (samples_tx, mut samples_rx) = tokio::sync::mpsc::unbounded_channel();
    let o = Options {
        side: Side::Client,
        mode: a.mode,
        target: a.connections.get(),
        control: a.common.control,
        control_token_file: a.common.control_token_file,
        run_id: None,
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
        churn: a.workload.churn.map(|_| a.churn_start),
    };
    let snap = rt.block_on(async {
        // The folder and the metrics take each second's snapshot beside the run.
        let mut folder = folder;
        let mut metrics = metrics;
        let writer = (folder.is_some() || metrics.is_some()).then(|| {
            tokio::spawn(async move {
                // The phase of the last second before the server ended connections
                // uncleanly (the client's own phase moves on once they are gone).
                let (mut crash_phase, mut before) = (None, None);
                while let Some(s) = samples_rx.recv().await {
                    if crash_phase.is_none() {
                        if unclean_closes(&s) > 0 {
                            crash_phase = before.take().or_else(|| Some(s.phase.clone()));
                        } else {
                            before = Some(s.phase.clone());
                        }
                    }
                    let mut loss = None;
                    if let (Some(f), Some(r)) = (folder.as_mut(), reader.as_ref()) {
                        let kernel = r.read(false).await;
                        if let HostKernel::View(v) = &kernel {
                            loss.clone_from(&v.loss);
                        }
                        f.observe(&s, kernel);
                    }
                    if let Some(m) = metrics.as_mut() {
                        m.observe(&s, loss);
                    }
                }
                // None seen in a sample: the run ended within a second of them, in
                // the phase of its last sample.
                (folder, reader, crash_phase.or(before))
            })
        });
        let snap = supervisor::run(o, &plan, configs).await;
        let (folder, reader, crash_phase) = match writer {
            Some(w) => w.await.context("the run folder's writer")?,
            None => (None, None, None),
        };
        // The last kernel reading, after a fresh walk, before the clock query at the end.
        let kernel = match reader {
            Some(r) => Some(r.read(true).await),
            None => None,
        };
        anyhow::Ok((snap, folder, kernel, crash_phase))
    })?;
    let (snap, mut folder, kernel, crash_phase) = snap;
    let snap = match snap {
        Ok(s) => s,
        Err(e) => return Err(failed(folder, e)),
    };
    // The phase of the last sample that saw none: when the unclean closes came.
    let mut warnings = client_verdict(&snap, crash_phase.as_deref());
    if let (Some(ep), Some(start)) = (&a.hosts_run.clock_from, &clock) {
        // Again at the end: the difference is the drift over the run.
        let end = rt.block_on(clock_offset(ep)).ok();
        if let Some(end) = &end
            && end.run_id != start.run_id
        {
            warnings.push(format!(
                "the server host's run changed during this run: id {} at the start, {} at the end (was it restarted?)",
                start.run_id.as_deref().unwrap_or("none"),
                end.run_id.as_deref().unwrap_or("none")
            ));
        }
        if let Some(h) = folder.as_mut().and_then(HostFolder::host_mut) {
            h.clock_end = end.map(|m| m.offset);
        }
    }
    let outcome = if warnings.is_empty() {
        Outcome::Complete
    } else {
        Outcome::Degraded
    };
    for w in &warnings {
        println!("c1m client: {outcome}: {w}");
    }
    if let (Some(f), Some(kernel)) = (folder, kernel) {
        f.finish(&snap, kernel, outcome, warnings)?;
    }
    Ok(outcome.exit_code())
}

/// This host's run folder, written at once (a first summary), before the clock is asked.
fn host_folder(
    dir: &std::path::Path,
    a: &ClientArgs,
    shard: Option<ShardOf>,
    total: Connections,
) -> Result<HostFolder> {
    let host = HostInfo {
        role: HostRole::Client,
        hostname: crate::lab::run::host::machine().hostname,
        label: a
            .hosts_run
            .host_label
            .clone()
            .unwrap_or_else(|| crate::lab::run::host::machine().hostname),
        shard_index: shard.map(|s| s.index),
        shard_count: shard.map(|s| s.count),
        connections_total: Some(total.get()),
        clock: None,
        clock_end: None,
        run_id: None,
        kernel_source: None,
        kernel_fallback: None,
        // Read by the folder when it is made.
        path_start: None,
        path_last: None,
    };
    let messages = crate::workload::messages::recorded(
        a.workload.message_rate,
        a.workload.total_message_rate,
        a.connections.get(),
        a.workload.message_size,
    );
    let config = crate::model::config::RunConfig {
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
        message_rate_per_s: messages.0,
        message_size: messages.1,
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
        ..Default::default()
    };
    HostFolder::create(dir, config, host)
}

/// What the run needs once the server host answered and the local limits are known.
struct Ready {
    clock: Option<Measured>,
    plan: Plan,
    configs: Vec<ShardConfig>,
    metrics: Option<ClientMetrics>,
}

/// The clock (also the wait for the server host), the endpoints, the shards' plan and
/// the metrics endpoint: everything that can fail before the first connect.
fn prepare(a: &ClientArgs, rt: &tokio::runtime::Runtime) -> Result<Ready> {
    let clock = match &a.hosts_run.clock_from {
        Some(ep) => {
            let ep = parse_host_port(ep).map_err(|e| anyhow::anyhow!("--clock-from {e}"))?;
            Some(rt.block_on(clock_when_up(&ep, a.hosts_run.server_wait))?)
        }
        None => None,
    };
    let ClientEndpoints {
        targets,
        sources,
        source_ports,
    } = a.endpoints()?;
    let tls = a.tls.resolve(&targets[0].ip().to_string())?;
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
        a.workload.churn.map_or(0.0, |c| c.0),
    );
    let shards = plan.per_shard.len() as u64;
    let messages = MessageConfig::of(
        a.workload.message_rate,
        a.workload.total_message_rate,
        a.connections.get(),
        a.workload.message_size,
    )
    .map_err(anyhow::Error::msg)?;
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
                clock_offset_ns: clock.as_ref().map(|c| c.offset.offset_ns).unwrap_or(0),
                push_format: a.push_format.clone(),
                push_latency: a.push_latency,
                tls: tls.clone(),
                heartbeat: HeartbeatConfig::of(a.workload.heartbeat, a.workload.heartbeat_timeout),
                churn: ChurnConfig::share(
                    a.workload.churn.map(|r| r.0),
                    a.workload.churn_order,
                    count,
                    a.connections.get(),
                ),
                messages,
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
    Ok(Ready {
        clock,
        plan,
        configs,
        metrics,
    })
}

/// A run that stopped on `e`: its folder (if any) says so, outcome failed with the reason,
/// and `e` goes on to be the command's one line (exit 1, [`Outcome::Failed`]).
fn failed(folder: Option<HostFolder>, e: anyhow::Error) -> anyhow::Error {
    if let Some(f) = folder
        && let Err(w) = f.fail(format!("{e:#}"))
    {
        return e.context(format!("{w:#}"));
    }
    e
}

/// How often a client host waiting for the server host's endpoint says so.
const SAY_WAITING_EVERY: Duration = Duration::from_secs(5);

/// How long one clock measurement (16 round trips) may take.
const MEASURE_WITHIN: Duration = Duration::from_secs(10);

/// [`clock_offset`], tried again every second while nothing accepts the connection (the
/// server host may still be starting: pods of a Kubernetes run start in any order), for
/// at most `wait`, saying what it waits for every few seconds. An endpoint that accepts
/// but is not c1m's fails at once: waiting would not change it.
async fn clock_when_up(ep: &str, wait: Duration) -> Result<Measured> {
    let began = tokio::time::Instant::now();
    let mut said: Option<tokio::time::Instant> = None;
    loop {
        let e = match clock_offset(ep).await {
            Ok(m) => return Ok(m),
            Err(e) if !e.not_up_yet() => bail!("--clock-from {e}"),
            Err(e) => e,
        };
        let waited = began.elapsed();
        if waited >= wait {
            bail!(
                "--clock-from {e}: the server host's control endpoint did not accept a connection within {} (--server-wait): is `c1m run --clients external` running there, with this address?",
                crate::fmt::duration(wait.as_secs_f64())
            );
        }
        if said.is_none_or(|t| t.elapsed() >= SAY_WAITING_EVERY) {
            println!(
                "c1m client: waiting for the server host's control endpoint ({e}): {} of --server-wait {}",
                crate::fmt::duration(waited.as_secs_f64()),
                crate::fmt::duration(wait.as_secs_f64())
            );
            said = Some(tokio::time::Instant::now());
        }
        tokio::time::sleep(Duration::from_secs(1).min(wait.saturating_sub(waited))).await;
    }
}

/// The clock offset to the server host, said as the client sees it.
async fn clock_offset(ep: &str) -> Result<Measured, ClockError> {
    let m = clock::measure(ep, MEASURE_WITHIN).await?;
    let c = m.offset;
    println!(
        "c1m client: clock offset to {ep}: {:+.3} ms ± {:.3} ms (min RTT of {} round trips), run {}",
        c.offset_ns as f64 / 1e6,
        c.uncertainty_ns as f64 / 1e6,
        c.round_trips,
        m.run_id.as_deref().unwrap_or("without an id")
    );
    Ok(m)
}

/// Connections the server ended without a WebSocket close frame: reset, or EOF alone.
fn unclean_closes(s: &AppSnapshot) -> u64 {
    s.counters
        .closed
        .reset
        .saturating_add(s.counters.closed.peer_eof)
}

/// What makes a client run `degraded` (non-zero exit), one sentence each: connections
/// that failed or came back wrong, and connections the server ended without a close
/// frame (a crash or a kill, never a teardown: it sends one on each). `crash_phase`: the
/// client's phase when the first of those was seen (None: not watched).
fn client_verdict(s: &AppSnapshot, crash_phase: Option<&str>) -> Vec<String> {
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
    let mut out = Vec::new();
    if !bad.is_empty() {
        out.push(format!(
            "{} of {} connections established; failures: {}",
            c.connected,
            s.target,
            bad.join(" ")
        ));
    }
    let unclean = unclean_closes(s);
    if unclean > 0 {
        let when = match crash_phase {
            Some("ramp") => " during the ramp",
            Some("hold") => " during idle",
            Some("closing" | "closed") => " during teardown",
            _ => "",
        };
        out.push(format!(
            "the server closed {} connections without a close frame{when} (peer reset {}, EOF {}): it crashed or was killed (a teardown sends a close frame on each)",
            crate::fmt::count(unclean),
            crate::fmt::count(c.closed.reset),
            crate::fmt::count(c.closed.peer_eof)
        ));
    }
    out
}
