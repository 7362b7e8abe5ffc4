//! One run, from its flags to its exit code: the plan, preflight (and `--tune`), the run
//! folder and its journal, the server, the lab's phases, then teardown, the verdict and
//! the exports, whatever happened.

use std::{path::PathBuf, time::Instant};

use anyhow::{Context, Result, bail};
use tokio::process::Child;

use super::{
    children::{Children, spawn_c1m},
    ctl::Ctl,
    flags::{Clients, RunArgs, ServerSpec},
    folder,
    foreign::ForeignServer,
    host::machine,
    isolation,
    journal::{JournalFile, Role},
    lab::{Lab, Pending},
    plan::{self, Sources, plan_into, resolve_target},
    ports, preflight, verdict,
};
use crate::{
    figures::{FiguresBuilder, Rows},
    fmt::count,
    lab::{
        doctor::Target,
        live::{Live, LiveOutput, MetricsAt},
    },
    model::{Netns, Outcome, RunInfo, RunRecord, TriggerKind, config::RunConfig},
    observer::ObserverHandle,
    workload::{push_rule::PushRule, push_trigger::PushTrigger},
};

/// The kind of `--push-trigger`, as the record keeps it.
fn trigger_kind(t: &PushTrigger) -> TriggerKind {
    match t {
        PushTrigger::Control => TriggerKind::Control,
        PushTrigger::Signal(_) => TriggerKind::Signal,
        PushTrigger::Http(..) => TriggerKind::Http,
        PushTrigger::Cmd(_) => TriggerKind::Command,
        PushTrigger::None => TriggerKind::None,
    }
}

/// What a server host says of its sources until it has seen them.
const EXTERNAL_SOURCES: &str = "the client hosts' own addresses, named as they connect";

/// One run into `dir`, or into a new `<out>/<stamp>` folder; its exit code.
pub(super) async fn run(mut args: RunArgs, dir: Option<PathBuf>) -> Result<i32> {
    // Everything the user said is checked before anything starts or is written.
    let (spec, trigger) = ServerSpec::of(&args)?;
    let external = args.clients == Clients::External;
    if external && spec.foreign() {
        bail!(
            "--clients external runs c1m's own server for now: drop --server-cmd/--target, or run your server with clients on this box"
        );
    }
    if let ServerSpec::Target(t, _) = &spec {
        args.addr = t.host.clone();
        args.ports = t.ports.clone();
        t.reachable().await?;
    }
    let (connections, reason) = match args.expect {
        Some(n) if external => (n, "--expect: clients on other hosts".to_owned()),
        _ => resolve_target(args.connections),
    };
    if !external {
        preflight::memory_first(connections, args.force)?;
    }
    let server_ports = args.ports.0.len() as u64;
    let Sources {
        range: sources,
        count: source_count,
        reason: sources_reason,
    } = plan::sources(args.source.as_deref(), connections, server_ports, || {
        crate::workload::limits::ephemeral_ports().unwrap_or(28_232)
    })?;
    let started_ms = crate::util::unix_ms_now();
    let stamp = crate::fmt::stamp(started_ms);
    // Checked now with the folder the run would get; made (never shared) after preflight.
    let wanted = dir.clone().unwrap_or_else(|| args.out.join(&stamp));
    let (mut plan, mut server_token) = plan_into(&args, connections, &sources, &wanted, external)?;
    let listen_addrs = crate::args::parse_addrs(&plan.server.addrs)?;
    // What the run starts from, after the wait for an earlier run's sockets when asked.
    let wait = match args.isolation {
        Some(isolation::Isolation::Wait) => {
            let waited = isolation::wait_for_clean_ports(&args.ports.0, args.clean_wait).await;
            Some((waited, args.clean_wait))
        }
        _ => None,
    };
    let netns = match args.isolation {
        Some(isolation::Isolation::Netns) => Netns::Fresh,
        _ => Netns::Inherited,
    };
    let start = isolation::start_state(&args.ports.0, netns, wait);
    let server_info = plan::server_info(&args, &spec);
    // A --target listens there already, by design.
    if !matches!(spec, ServerSpec::Target(..)) {
        ports::preflight(&args.ports.0, &listen_addrs)?;
    }
    let observer_wanted = !args.no_observer;
    say!(
        args.json,
        "c1m run: {} connections ({reason}), {}, mode {}",
        count(connections.get()),
        crate::fmt::pace(args.rate),
        args.mode.name()
    );
    // Client hosts connect from their own addresses: the run names them as it sees them
    // (`multihost::peers`), never the loopback range a local client would have used.
    let (recorded_sources, sources_reason) = if external {
        (String::new(), EXTERNAL_SOURCES.to_owned())
    } else {
        (sources.clone(), sources_reason)
    };
    say!(args.json, "sources: {sources_reason}");
    say!(args.json, "start: {}", start.describe());

    // Preflight.
    let target = Target {
        connections,
        server_ports,
        // External clients bring their own addresses and ports.
        sources: if external { 0 } else { source_count },
        observer: observer_wanted,
        // A reference server given `--workers` spreads itself (`servers/reference.rs`).
        single_process_server: spec.foreign() && args.server_workers.is_none(),
        churn_per_s: args.churn_most().map_or(0.0, |c| c.0),
    };
    let tuning = preflight::checks(&target, args.tune, args.force, args.json)?;

    // A folder given (`--into`: one run of --servers, the server host of --hosts) is part
    // of a larger experiment, whose own folder keeps the plan.
    let own_folder = dir.is_none();
    let dir = match dir {
        Some(d) => folder::create_given(&d).map(|()| d),
        None => folder::create_unique(&args.out, &stamp),
    }
    .with_context(|| format!("creating the run folder {}", wanted.display()))?;
    if dir != wanted {
        // Another lab took the name this second: the children write here instead.
        (plan, server_token) = plan_into(&args, connections, &sources, &dir, external)?;
    }
    args.tls.write_self_signed(
        &dir,
        &crate::workload::tls::args::names_for(&plan.server.listen()?),
    )?;
    say!(args.json, "run folder: {}", dir.display());
    if own_folder {
        super::plan_file::write_into(&dir, &args)?;
    }
    // Before any child: what a `kill -9` of this process would leave, and where.
    let mut journal = JournalFile::create(
        &dir,
        tuning.as_ref().map(|t| t.changed.as_slice()).unwrap_or(&[]),
    )
    .with_context(|| format!("writing the journal in {}", dir.display()))?;

    let w = &plan.client.workload;
    let messages = crate::workload::messages::recorded(
        w.message_rate,
        w.total_message_rate,
        plan.client.connections.get(),
        w.message_size,
    );
    // The server's rate is per connection (`c1m server --message-rate`): its size is
    // the run's one `--message-size`.
    let server_messages =
        crate::workload::messages::recorded(args.server_message_rate, None, 1, w.message_size);
    let mut record = RunRecord {
        c1m_version: env!("CARGO_PKG_VERSION").to_owned(),
        started_unix_ms: started_ms,
        outcome: Outcome::Running,
        config: RunConfig {
            connections: connections.get(),
            connections_reason: reason,
            rate_per_s: args.rate,
            mode: args.mode.name().to_owned(),
            engine: args.engine,
            server_engine: args.server_engine.unwrap_or(args.engine),
            ports: args.ports.to_string(),
            server_addrs: args.addr.clone(),
            sources: recorded_sources,
            sources_reason: sources_reason.clone(),
            // A phase list has no idle phase (its holds are phases of their own).
            idle_s: match args.phases.is_empty() {
                true => args.idle.as_secs_f64(),
                false => 0.0,
            },
            push_count: match args.phases.is_empty() {
                true => args.pushes,
                false => super::phase_list::push_count(&args.phases),
            },
            phases: args.phases.iter().map(ToString::to_string).collect(),
            push_writers: args.push_writers as u64,
            // What the lab's client was handed (external clients bring their own).
            payload_size: plan.client.workload.payload_size as u64,
            echo_count: plan.client.workload.echo_count,
            ws_path: plan.client.workload.path.clone(),
            message_rate_per_s: messages.0,
            message_size: messages.1,
            server_message_rate_per_s: server_messages.0,
            server_message_size: server_messages.1,
            // The lab tells its own client each trigger's instant; clients on other
            // hosts are told none.
            push: Some(PushRule::new(
                args.push_latency,
                &args.push_format,
                args.push_stamp,
                !external && trigger != PushTrigger::None,
            )),
            observer: observer_wanted,
            // After any tuning: the values the run had, whoever set them (a run of a
            // `--tune` sequence may find another's values already in place).
            tuned: Some(
                crate::sysctl::TUNABLE
                    .iter()
                    .filter_map(|n| Some(((*n).to_owned(), crate::sysctl::read(n)?)))
                    .collect(),
            ),
            push_trigger: Some(trigger_kind(&trigger)),
            tls: args.tls.record(&plan.server.tls),
            command_line: crate::util::command_line(),
        },
        machine: machine(),
        host: external.then(|| crate::multihost::model::HostInfo {
            role: crate::multihost::model::HostRole::Server,
            hostname: machine().hostname,
            label: machine().hostname,
            run_id: plan.server.run_id.clone(),
            ..Default::default()
        }),
        server_info: Some(server_info),
        start: Some(start),
        ..RunRecord::default()
    };
    // A summary from the first second: even a `kill -9` leaves a parseable one.
    if let Err(e) = crate::report::write_run(&dir, &record)
        .with_context(|| format!("writing the run folder {}", dir.display()))
    {
        folder::fail_in_place(&dir, &mut record, &e);
        return Err(e);
    }

    let observer = if observer_wanted {
        match ObserverHandle::start(args.ports.0.clone()) {
            Ok(handle) => Some(handle),
            Err(e) => {
                let w = format!("kernel observer unavailable: {e:#}");
                eprintln!("c1m: {w}");
                record.warnings.push(w);
                None
            }
        }
    } else {
        None
    };

    let title = format!(
        "c1m run: {} {} connections · {}",
        args.mode.name(),
        count(connections.get()),
        record
            .server_info
            .as_ref()
            .map_or("c1m", |i| i.name.as_str())
    );
    // Before the server: a bad --metrics-addr fails the command before anything starts.
    let mut live = Live::new(
        LiveOutput::choose(args.plain, args.json),
        match args.metrics_listener.take() {
            Some(bound) => Some(MetricsAt::Bound(bound.try_clone()?)),
            None => args.metrics_addr.map(MetricsAt::Addr),
        },
        crate::view::prometheus::Detail {
            per_port: args.metrics_per_port,
        },
        &title,
        RunInfo {
            command: "run",
            mode: args.mode.name().to_owned(),
            engine: args.engine.name().to_owned(),
            // A reference server's command is `…/<name>/run`: its name, not "run".
            server: args
                .server_name
                .clone()
                .unwrap_or_else(|| spec.name(args.server_engine.unwrap_or(args.engine))),
            target_connections: connections.get(),
            push: record.config.push,
        },
        started_ms,
    )
    .await?;
    live.outcome(Outcome::Running);
    let server_ctl = Ctl::new(
        plan.server.common.control.clone().unwrap_or_default(),
        server_token,
    );
    let client_ctl =
        (!external).then(|| Ctl::new(plan.client.common.control.clone().unwrap_or_default(), None));
    let (server, foreign) = match &spec {
        ServerSpec::Own => (
            Some(spawn_c1m(&plan.server_argv()?, &dir.join("server.log"))?),
            None,
        ),
        ServerSpec::Command(argv) => {
            // A server of yours (a reference server among them) finds the lab's pair
            // where the reference-server protocol says.
            let tls: Vec<(&str, &std::path::Path)> = [
                ("C1M_TLS_CERT", plan.server.tls.tls_cert.as_deref()),
                ("C1M_TLS_KEY", plan.server.tls.tls_key.as_deref()),
            ]
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?)))
            .collect();
            (None, Some(ForeignServer::start(argv, &dir, &tls)?))
        }
        ServerSpec::Target(_, Some(pid)) => (None, Some(ForeignServer::attach(*pid, &dir))),
        ServerSpec::Target(t, None) => (None, Some(ForeignServer::remote(&t.to_string(), &dir))),
    };
    if let Some(pid) = server.as_ref().and_then(Child::id) {
        journal.add(Role::Server, pid)?;
    }
    if let Some(f) = foreign.as_ref().filter(|f| f.owned()) {
        journal.add(Role::Server, f.pid)?;
        if let Some(c) = f.cgroup() {
            journal.add_cgroup(c.path())?;
        }
        // A note, not a warning: without root (or a delegated cgroup) every run would be
        // degraded for what only a server that leaves its tree makes true.
        if let Some(w) = f.unwatched() {
            eprintln!("c1m: note: {w}");
        }
    }
    let children = Children {
        server,
        client: None,
    };

    let mut lab = Lab {
        record,
        dir: dir.clone(),
        observer,
        kernel: None,
        live,
        figures: FiguresBuilder::new(),
        rows: Rows::new(started_ms),
        server_ctl,
        client_ctl,
        last_server: None,
        last_client: None,
        server_poll: Pending::new(),
        client_poll: Pending::new(),
        peers: Pending::new(),
        peers_at: None,
        ports: args.ports.0.clone(),
        peers_line: None,
        kernel_poll: Pending::new(),
        phase_start: None,
        interrupted: false,
        last_write: Instant::now(),
        children: Some(children),
        journal: Some(journal),
        foreign,
        trigger,
        push_format: args.push_format.clone(),
        mode: args.mode,
        target: connections.get(),
        time_wait_peak: None,
    };

    let result = lab.drive(&args, connections.get(), &plan).await;
    lab.stop_servers_and_clients().await;
    // A server that printed its versions late (or had to be waited for) is named now.
    lab.record_versions();
    lab.observer = None;
    // The terminal is back for the summary; the endpoint stays for a final scrape.
    lab.live.end_view();

    lab.record.ended_unix_ms = crate::util::unix_ms_now();
    // The last kernel view (the teardown's end, taken afresh) against the kernel's counters.
    lab.record.audit = lab
        .kernel_view()
        .as_ref()
        .map(crate::observer::audit::audit);
    if result.is_ok() && !lab.interrupted {
        lab.conclude(connections.get());
    }
    if let Err(e) = &result {
        lab.record
            .warnings
            .insert(0, format!("the run failed: {e:#}"));
    }
    lab.record.outcome = verdict::outcome(
        result.is_err(),
        lab.interrupted,
        !lab.record.warnings.is_empty(),
    );
    lab.record.checks = crate::lab::gate::judge(&args.checks, &lab.record);
    let written = lab.write_exports();
    match &written {
        // The run folder holds the outcome: a scrape from now on says it too.
        Ok(()) => lab.live.outcome(lab.record.outcome),
        Err(e) => folder::fail_in_place(&lab.dir, &mut lab.record, e),
    }
    if let Some(mut t) = tuning {
        let restore = t.restore();
        for f in restore.failed {
            eprintln!("c1m: could not restore sysctl {f}");
        }
        for (c, pid) in restore.left_to {
            say!(
                args.json,
                "tune: {} stays {}: tuned lab pid {pid} still runs, and restores {} when it ends",
                c.name,
                c.new,
                c.old
            );
        }
    }
    drop(lab.journal.take());
    written?;
    say_raw!(args.json, "{}", crate::lab::summary::text(&lab.record));
    say!(args.json, "run folder: {}", dir.display());
    // Bad news on stderr too, where scripts and CI look for it.
    for w in &lab.record.warnings {
        eprintln!("c1m run: warning: {w}");
    }
    if lab.record.outcome != Outcome::Complete {
        eprintln!("c1m run: {}", lab.record.outcome);
    }
    for c in lab.record.checks.iter().filter(|c| !c.passed) {
        eprintln!("c1m run: check failed: {}: {}", c.check, c.shown);
    }
    // Everything is written and restored: only the endpoint is left, for a final scrape
    // of the figures the run ended with (a 15 s scrape interval misses a 2 s push).
    if let Some(addr) = lab.live.metrics_addr()
        && !args.metrics_linger.is_zero()
    {
        say!(
            args.json,
            "metrics stay up for {} s at {addr} for a final scrape (Ctrl-C ends now)",
            args.metrics_linger.as_secs_f64()
        );
        lab.live.linger(args.metrics_linger).await;
    }
    lab.live.stop();
    Ok(crate::lab::gate::exit_code(
        lab.record.outcome.exit_code(),
        &lab.record.checks,
    ))
}
