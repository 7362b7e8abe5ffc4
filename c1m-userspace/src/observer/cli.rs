//! `c1m observe`: the kernel's view of any server on this host, every second.

use std::{
    io::{IsTerminal, Write},
    net::Ipv4Addr,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use c1m_common::tcp_state;
use clap::Args;

use super::{KernelView, Observer, ObserverConfig};
use crate::util::{PortList, shutdown_flag};

#[derive(Args, Debug, Clone)]
pub struct ObserveArgs {
    /// Watched ports, e.g. `8000-8099` or `80,443` (default: every TCP socket; ports
    /// with a listener then count as server side).
    #[arg(long)]
    pub ports: Option<PortList>,
    /// Only sockets on these IPv4 addresses (server: bound to, client: connected to).
    #[arg(long, value_delimiter = ',')]
    pub addr: Vec<Ipv4Addr>,
    /// Count sockets of every network namespace, not only this one.
    #[arg(long)]
    pub all_netns: bool,
    /// One JSON object per line with every figure.
    #[arg(long)]
    pub json: bool,
    /// Seconds between lines.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long)]
    pub duration: Option<f64>,
}

impl ObserveArgs {
    pub fn observer_config(&self) -> ObserverConfig {
        ObserverConfig {
            ports: self.ports.clone().map(|p| p.0).unwrap_or_default(),
            addrs: self.addr.clone(),
            all_netns: self.all_netns,
            walk_interval: None,
        }
    }
}

pub fn run(args: ObserveArgs) -> Result<()> {
    if !(args.interval > 0.0 && args.interval.is_finite()) {
        anyhow::bail!(
            "--interval must be a positive number of seconds, got {}",
            args.interval
        );
    }
    super::keep_up_under_load();
    let mut observer = Observer::start(args.observer_config())?;
    let stop = shutdown_flag()?;
    let started = Instant::now();
    let interval = Duration::from_secs_f64(args.interval);
    let mut out = std::io::stdout().lock();
    let mut next = Instant::now();
    loop {
        let view = observer.snapshot().context("reading the kernel's view")?;
        let line = if args.json {
            serde_json::to_string(&view)?
        } else {
            plain_line(&view)
        };
        if writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
            return Ok(()); // reader went away (e.g. `| head`)
        }
        if !args.json && std::io::stderr().is_terminal() && view.uptime_s < args.interval * 1.5 {
            for u in &view.unavailable {
                eprintln!("c1m: unavailable: {u}");
            }
        }
        if args
            .duration
            .is_some_and(|d| started.elapsed().as_secs_f64() >= d)
        {
            return Ok(());
        }
        next += interval;
        while Instant::now() < next {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                return Ok(());
            }
            std::thread::sleep(
                Duration::from_millis(20).min(next.saturating_duration_since(Instant::now())),
            );
        }
    }
}

/// One human line: established per side, handshake states, listeners, memory.
pub fn plain_line(v: &KernelView) -> String {
    let s = &v.server;
    let c = &v.client;
    let queue: u64 = v.listeners.iter().map(|l| l.queue_depth).sum();
    let overflows: u64 = v.listeners.iter().map(|l| l.accept_queue_overflows).sum();
    let mut line = format!(
        "t={:.0}s server: est {} syn_recv {} close_wait {} time_wait {} | client: est {} syn_sent {} time_wait {} | \
         accept queue {} overflows {} | est/s {:.0}",
        v.uptime_s,
        s.state(tcp_state::ESTABLISHED),
        s.state(tcp_state::SYN_RECV) + s.state(tcp_state::NEW_SYN_RECV),
        s.state(tcp_state::CLOSE_WAIT),
        s.state(tcp_state::TIME_WAIT),
        c.state(tcp_state::ESTABLISHED),
        c.state(tcp_state::SYN_SENT),
        c.state(tcp_state::TIME_WAIT),
        queue,
        overflows,
        s.established_per_s + c.established_per_s,
    );
    if let Some(m) = &v.memory {
        line.push_str(&format!(
            " | kernel mem {} ({:.0} B/socket)",
            crate::fmt::bytes(m.total.total_bytes as f64),
            m.total.bytes_per_socket
        ));
    }
    line
}
