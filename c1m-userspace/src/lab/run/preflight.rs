//! The answers a run owes before it does anything slow or sized, in the order a user
//! needs them: memory before the address ranges sized for a target (`-n 1000000000`
//! was told "address range … larger than 65536"), and a `--servers` sequence's checks
//! before its first run waits for clean ports (as non-root it waited out all 70 s of
//! `--clean-wait`, then failed the privilege check in each run and printed a comparison
//! of nothing).

use anyhow::{Result, bail};

use super::flags::RunArgs;
use crate::lab::doctor::{self, Check, Status, Target};

/// A target more than free memory holds fails now, with the memory check's own line
/// and fix (`--force` starts anyway, as for every preflight failure).
pub fn memory_first(connections: u64, force: bool) -> Result<()> {
    if force {
        return Ok(());
    }
    let checks = doctor::checks(&Target {
        connections,
        server_ports: 1,
        sources: 0,
        observer: false,
        foreign_server: false,
    });
    let failed: Vec<&Check> = checks
        .iter()
        .filter(|c| c.name == "memory" && c.status == Status::Fail)
        .collect();
    if !failed.is_empty() {
        bail!("{}", doctor::failure_line(&failed));
    }
    Ok(())
}

/// The checks every run of a `--servers` sequence would fail, run once before the first:
/// privileges, memory, limits no `--tune` fixes. A sysctl is left to each run, which
/// checks it in its own namespace and tunes it when asked.
pub fn sequence(args: &RunArgs, foreign_server: bool) -> Result<()> {
    if args.force {
        return Ok(());
    }
    let (connections, _) = super::plan::resolve_target(args.connections);
    let server_ports = args.ports.0.len() as u64;
    let sources = match &args.source {
        Some(s) => crate::args::parse_addrs(std::slice::from_ref(s))?.len() as u64,
        None => {
            super::sources::choose(
                connections,
                server_ports,
                crate::workload::limits::ephemeral_ports().unwrap_or(28_232),
            )
            .count
        }
    };
    let checks = doctor::checks(&Target {
        connections,
        server_ports,
        sources,
        observer: !args.no_observer,
        foreign_server,
    });
    let failed: Vec<&Check> = checks
        .iter()
        .filter(|c| c.status == Status::Fail && c.tune.is_none())
        .collect();
    if !failed.is_empty() {
        bail!("{}", doctor::failure_line(&failed));
    }
    Ok(())
}
