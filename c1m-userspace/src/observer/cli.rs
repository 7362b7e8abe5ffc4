//! `c1m observe`: the kernel's view of any server on this host, every second.

use std::{
    io::{IsTerminal, Write},
    net::IpAddr,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use clap::Args;

use super::{KernelView, Observer, ObserverConfig};
use crate::util::{PortList, shutdown_flag};

#[derive(Args, Debug, Clone)]
pub struct ObserveArgs {
    /// Watched ports, e.g. `8000-8099` or `80,443` (default: every TCP socket; ports
    /// with a listener then count as server side).
    #[arg(long)]
    pub ports: Option<PortList>,
    /// Only sockets on these addresses, IPv4 or IPv6, e.g. `127.0.0.1,::1` (server:
    /// bound to, client: connected to; `::ffff:a.b.c.d` is the same as `a.b.c.d`).
    #[arg(value_name = "ADDRS", long, value_delimiter = ',')]
    pub addr: Vec<IpAddr>,
    /// Count sockets of every network namespace, not only this one.
    #[arg(long)]
    pub all_netns: bool,
    /// One JSON object per line with every figure.
    #[arg(long)]
    pub json: bool,
    /// Time between lines (seconds; e.g. 500ms, 2s).
    #[arg(value_name = "DURATION", long, default_value = "1s", value_parser = crate::duration::parse_secs)]
    pub interval: f64,
    /// Stop after this long (e.g. 3s, 2m; default: until Ctrl-C).
    #[arg(value_name = "DURATION", long, value_parser = crate::duration::parse_secs)]
    pub duration: Option<f64>,
    /// At exit, print c1m's figures against the kernel's own counters (/proc/net/snmp,
    /// /proc/net/netstat) since start, and why they differ (with --json: one last line
    /// `{"audit": …}`).
    #[arg(long)]
    pub audit: bool,
}

impl ObserveArgs {
    pub(crate) fn observer_config(&self) -> ObserverConfig {
        ObserverConfig {
            ports: self.ports.clone().map(|p| p.0).unwrap_or_default(),
            addrs: self.addr.clone(),
            all_netns: self.all_netns,
            walk_interval: None,
            loss: None,
        }
    }
}

/// Runs `c1m observe`; `line` makes a view's human line (the figures are a layer above).
pub(crate) fn run(args: ObserveArgs, line: fn(&KernelView) -> String) -> Result<()> {
    let mut observer = start(&args)?;
    let watched = watch(&args, &mut observer, line);
    if args.audit {
        // Afresh: the last line's view may be an interval old.
        let view = observer.snapshot().context("reading the kernel's view")?;
        let audit = super::audit::audit(&view);
        let text = if args.json {
            serde_json::to_string(&serde_json::json!({ "audit": audit }))?
        } else {
            audit.text_table()
        };
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", text.trim_end());
    }
    watched
}

fn start(args: &ObserveArgs) -> Result<Observer> {
    if !(args.interval > 0.0 && args.interval.is_finite()) {
        anyhow::bail!(
            "--interval must be a positive number of seconds, got {}",
            args.interval
        );
    }
    crate::priority::watcher();
    Ok(Observer::start(args.observer_config())?)
}

/// Prints a line per interval until the duration ends, Ctrl-C, or the reader leaves.
fn watch(
    args: &ObserveArgs,
    observer: &mut Observer,
    line: fn(&KernelView) -> String,
) -> Result<()> {
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
            line(&view)
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        args: ObserveArgs,
    }

    #[test]
    fn addr_takes_ipv6_ipv4_and_mapped_addresses() {
        let cmd = Cmd::try_parse_from([
            "observe",
            "--addr",
            "::1,127.0.0.1",
            "--addr",
            "::ffff:10.0.0.1",
        ])
        .unwrap();
        let want: Vec<IpAddr> = ["::1", "127.0.0.1", "::ffff:10.0.0.1"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        assert_eq!(cmd.args.observer_config().addrs, want);
    }

    #[test]
    fn a_bad_addr_is_named() {
        let err = Cmd::try_parse_from(["observe", "--addr", "::1,localhost"])
            .err()
            .expect("localhost is not an address")
            .to_string();
        assert!(err.contains("localhost") && err.contains("--addr"), "{err}");
    }
}
