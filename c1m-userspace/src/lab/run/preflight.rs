//! The answers a run owes before it does anything slow or sized, in the order a user
//! needs them: memory before the address ranges sized for a target (`-n 1000000000`
//! was told "address range … larger than 65536"), and a `--servers` sequence's checks
//! before its first run waits for clean ports (as non-root it waited out all 70 s of
//! `--clean-wait`, then failed the privilege check in each run and printed a comparison
//! of nothing). Then a single run's own checks, with `--tune`.

use anyhow::{Context, Result, bail};

use super::{flags::RunArgs, journal};
use crate::{
    args::Connections,
    lab::{
        check::{Check, Status},
        doctor::{self, Target},
        tuning::{self, Sweep, Tuning},
    },
};

/// A target more than free memory holds fails now, with the memory check's own line
/// and fix (`--force` starts anyway, as for every preflight failure).
pub(crate) fn memory_first(connections: Connections, force: bool) -> Result<()> {
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
pub(crate) fn sequence(args: &RunArgs, foreign_server: bool) -> Result<()> {
    if args.force {
        return Ok(());
    }
    let (connections, _) = super::plan::resolve_target(args.connections);
    let server_ports = args.ports.0.len() as u64;
    let sources = super::plan::sources(args.source.as_deref(), connections, server_ports, || {
        crate::workload::limits::ephemeral_ports().unwrap_or(28_232)
    })?
    .count;
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

/// A single run's preflight: what killed labs left behind is swept first (restored, or
/// said), then the checks for `target`, tuned with `--tune`; the problems are shown, and
/// a failed check stops the run unless `--force`. The tuning, to restore at the end.
pub(super) fn checks(
    target: &Target,
    tune: bool,
    force: bool,
    json: bool,
) -> Result<Option<Tuning>> {
    // Not this run's problem (and not root's business to fail a user's run over).
    match tuning::restore_orphans(Sweep::Run) {
        Ok(swept) => {
            for (c, ns) in &swept.restored {
                let there = ns
                    .map(|n| format!(" in network namespace net:[{n}]"))
                    .unwrap_or_default();
                eprintln!(
                    "c1m: restored {} = {} (was {}){there}, left by a killed tuned run",
                    c.name, c.old, c.new
                );
            }
            for l in &swept.left {
                eprintln!("c1m: sysctls left by a killed tuned run stay as they are: {l}");
            }
            for l in &swept.ignored {
                eprintln!("c1m: {l}");
            }
        }
        Err(e) => eprintln!(
            "c1m: sysctls left by a killed tuned run stay as they are ({e}); fix: sudo c1m doctor --restore"
        ),
    }
    for l in journal::leftover_lines() {
        eprintln!("c1m: {l}");
    }
    let mut checks = doctor::checks(target);
    let tuning = if tune {
        let t = Tuning::apply(&checks).context("--tune")?;
        for c in &t.changed {
            say!(json, "tune: {} {} -> {}", c.name, c.old, c.new);
        }
        for c in &t.held {
            say!(
                json,
                "tune: {} stays {}: another tuned lab set it; the last of us restores {}",
                c.name,
                c.new,
                c.old
            );
        }
        checks = doctor::checks(target);
        Some(t)
    } else {
        None
    };
    let problems: Vec<&Check> = checks.iter().filter(|c| c.status != Status::Ok).collect();
    if !problems.is_empty() {
        say_raw!(
            json,
            "{}",
            doctor::table(&problems.iter().map(|c| (*c).clone()).collect::<Vec<_>>())
        );
    }
    let failed: Vec<&Check> = checks.iter().filter(|c| c.status == Status::Fail).collect();
    if !failed.is_empty() && !force {
        bail!("{}", doctor::failure_line(&failed));
    }
    Ok(tuning)
}
