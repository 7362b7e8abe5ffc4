//! `c1m top`: the live view for a server that is already running — the kernel side
//! always, the app side too when it is a c1m process with a control endpoint.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use clap::Args;

use super::live::{Live, LiveOutput};
use crate::figures::{FiguresBuilder, Rows};
use crate::model::RunInfo;
use crate::view::live_state::LiveState;
use crate::{observer::ObserverHandle, util::PortList, workload::control};

#[derive(Args, Debug, Clone)]
pub struct TopArgs {
    /// Ports of the server to watch (default: every TCP socket; listening ports count
    /// as server side).
    #[arg(long)]
    pub ports: Option<PortList>,
    /// Control endpoint of a running `c1m server` (its app-side counts).
    #[arg(value_name = "ENDPOINT", long)]
    pub server_control: Option<String>,
    /// Control endpoint of a running `c1m client`.
    #[arg(value_name = "ENDPOINT", long)]
    pub client_control: Option<String>,
    /// Where `c1m run` keeps its run folders: without --server-control/--client-control,
    /// top attaches to the app side of the newest lab still running there.
    #[arg(value_name = "DIR", long, default_value = "c1m-runs")]
    pub runs: std::path::PathBuf,
    /// Plain lines instead of the terminal UI.
    #[arg(long)]
    pub plain: bool,
    /// Serve Prometheus metrics here too, e.g. 127.0.0.1:9464 or :9464.
    #[arg(value_name = "HOST:PORT", long, value_parser = crate::args::parse_metrics_addr)]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// The accept-queue metrics one series per listening port (by default one sum over
    /// the ports).
    #[arg(long, requires = "metrics_addr")]
    pub metrics_per_port: bool,
    /// Stop after this long (default: until q / Ctrl-C).
    #[arg(value_name = "DURATION", long, value_parser = crate::duration::parse)]
    pub duration: Option<Duration>,
    /// Refresh interval.
    #[arg(value_name = "DURATION", long, default_value = "500ms", value_parser = crate::duration::parse)]
    pub interval: Duration,
}

pub(crate) fn main(args: TopArgs) -> Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(top(args))
}

async fn stats(endpoint: &Option<String>) -> Option<crate::workload::stats::snapshot::AppSnapshot> {
    let line = tokio::time::timeout(
        Duration::from_secs(5),
        control::call(endpoint.as_deref()?, "stats"),
    )
    .await
    .ok()?
    .ok()?;
    serde_json::from_str(&line).ok()
}

/// The control sockets of the newest run folder whose server still answers.
async fn running_lab(runs: &std::path::Path) -> Option<(String, String)> {
    let mut dirs: Vec<(std::time::SystemTime, std::path::PathBuf)> = std::fs::read_dir(runs)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .filter(|(_, p)| p.join("server.sock").exists())
        .collect();
    dirs.sort();
    for (_, dir) in dirs.into_iter().rev() {
        let server = dir.join("server.sock").display().to_string();
        if stats(&Some(server.clone())).await.is_some() {
            return Some((server, dir.join("client.sock").display().to_string()));
        }
    }
    None
}

async fn top(mut args: TopArgs) -> Result<()> {
    if args.interval.is_zero() {
        bail!("--interval must be more than 0");
    }
    if args.server_control.is_none()
        && args.client_control.is_none()
        && let Some((server, client)) = running_lab(&args.runs).await
    {
        eprintln!("c1m top: attached to the running lab's server and client ({server})");
        args.server_control = Some(server);
        args.client_control = Some(client);
    }
    let observer = ObserverHandle::start(args.ports.clone().map(|p| p.0).unwrap_or_default())?;
    let started = Instant::now();
    let started_ms = crate::util::unix_ms_now();
    let mut live = Live::new(
        LiveOutput::choose(args.plain, false),
        args.metrics_addr.map(super::live::MetricsAt::Addr),
        crate::view::prometheus::Detail {
            per_port: args.metrics_per_port,
        },
        "c1m top",
        // Attached to whatever runs: nothing else is known for the whole watch.
        RunInfo {
            command: "top",
            ..RunInfo::default()
        },
        started_ms,
    )
    .await?;
    let mut figures = FiguresBuilder::new();
    let mut rows = Rows::new(started_ms);
    let mut state = LiveState {
        title: "c1m top".to_owned(),
        phase: "watching".to_owned(),
        ..LiveState::default()
    };
    loop {
        state.server = stats(&args.server_control).await.or(state.server.take());
        state.client = stats(&args.client_control).await.or(state.client.take());
        if let Some(view) = observer.snapshot().await {
            state.kernel = Some(view);
        }
        state.elapsed_s = started.elapsed().as_secs_f64();
        state.target = state.client.as_ref().map(|c| c.target).unwrap_or(0);
        let (own_user, own_sys) = crate::host::own_cpu();
        state.figures = figures.build(
            crate::util::unix_ms_now(),
            state.kernel.as_ref(),
            state.server.as_ref(),
            state.client.as_ref(),
            Some(own_user + own_sys),
            Some(crate::host::mem_available()),
        );
        if let Some(sample) = rows.row(
            &state.figures,
            &state.phase,
            (crate::host::own_rss(), own_user + own_sys),
        ) {
            state.history.push(sample);
            let excess = state.history.len().saturating_sub(600);
            state.history.drain(..excess);
        }
        live.show(state.clone());
        if live.poll_quit(args.interval).await?
            || args.duration.is_some_and(|d| started.elapsed() >= d)
        {
            break;
        }
    }
    live.stop();
    Ok(())
}
