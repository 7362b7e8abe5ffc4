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
/// and fix (`--force` starts anyway, as for every preflight failure, and says how far
/// past memory it goes).
pub(crate) fn memory_first(connections: Connections, force: bool) -> Result<()> {
    if force {
        let n = connections.get();
        let available = crate::host::mem_available();
        if let Some(line) = beyond_memory(n, available, doctor::connections_that_fit(available)) {
            eprintln!("c1m: {line}");
        }
        return Ok(());
    }
    let checks = doctor::checks(&Target {
        connections,
        server_ports: 1,
        sources: 0,
        observer: false,
        single_process_server: false,
        churn_per_s: 0.0,
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

/// How far past memory a forced target goes, or nothing when it fits: `n` connections
/// against the `fit` that `available` bytes hold (the doctor's memory model).
fn beyond_memory(n: u64, available: u64, fit: u64) -> Option<String> {
    use crate::fmt::{bytes, int, num};
    if n <= fit {
        return None;
    }
    let need = doctor::memory_needed(n);
    let times = if fit == 0 {
        "more than".to_owned()
    } else {
        format!("{}× what", num(n as f64 / fit as f64, 1))
    };
    Some(format!(
        "--force: {} connections is {times} memory holds (~{} fit: {} needed at ~{} B a connection, {} available); expect failed connects or the OOM killer past ~{}",
        int(n.into()),
        int(fit.into()),
        bytes(need as f64),
        int(doctor::bytes_per_connection().into()),
        bytes(available as f64),
        int(fit.into()),
    ))
}

/// The checks every run of a `--servers` sequence would fail, run once before the first:
/// privileges, memory, limits no `--tune` fixes. A sysctl is left to each run, which
/// checks it in its own namespace and tunes it when asked.
pub(crate) fn sequence(args: &RunArgs, single_process_server: bool) -> Result<()> {
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
        single_process_server,
        churn_per_s: args.churn_most().map_or(0.0, |c| c.0),
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

#[cfg(test)]
mod tests {
    use super::beyond_memory;

    #[test]
    fn a_forced_target_past_memory_says_how_far_past() {
        assert_eq!(beyond_memory(1_000, 4 << 30, 1_000), None);
        let line = beyond_memory(5_000_000, 12 << 30, 1_000_000).expect("beyond");
        assert!(
            line.contains("5,000,000 connections is 5.0× what memory holds"),
            "{line}"
        );
        assert!(line.contains("~1,000,000 fit"), "{line}");
        assert!(line.contains("12.0 GiB available"), "{line}");
        let none_fit = beyond_memory(10, 1 << 20, 0).expect("beyond");
        assert!(
            none_fit.contains("is more than memory holds (~0 fit"),
            "{none_fit}"
        );
    }
}
