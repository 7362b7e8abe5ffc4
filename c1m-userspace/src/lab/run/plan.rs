//! The run's plan from its flags: how many connections and why, the
//! client's source addresses, the server's name in the record, and the children's
//! command lines (with external clients, the server's control endpoint).

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::{
    child_args::ChildPlan,
    flags::{EXTERNAL_CONTROL_PORT, RunArgs, ServerSpec, TargetArg},
};
use crate::{
    args::Connections,
    fmt::count,
    lab::doctor,
    model::{ServerInfo, Software},
};

/// The target without `-n` when free memory allows it: the seeds' million.
const DEFAULT: Connections = Connections::of(1_000_000);

/// The smallest target `-n max` or a short memory sets.
const FLOOR: Connections = Connections::of(1000);

/// The connections to aim for and why.
pub(crate) fn resolve_target(asked: Option<TargetArg>) -> (Connections, String) {
    let available = crate::host::mem_available();
    let fit = doctor::connections_that_fit(available);
    let gib = available as f64 / (1u64 << 30) as f64;
    match asked {
        Some(TargetArg::Max) => {
            // 2% under and rounded down to 10,000: free memory moves between this read
            // and the preflight's, which refused a target rounded only to 1,000.
            let n = Connections::new(fit / 100 * 98 / 10_000 * 10_000).unwrap_or(FLOOR);
            (
                n.max(FLOOR),
                format!(
                    "max: {gib:.1} GiB free allows ~{} at {} B per connection",
                    count(fit),
                    count(doctor::bytes_per_connection())
                ),
            )
        }
        Some(TargetArg::Count(n)) => (
            n,
            format!(
                "asked for {}; {gib:.1} GiB free allows ~{}",
                count(n.get()),
                count(fit)
            ),
        ),
        None if fit >= DEFAULT.get() => (
            DEFAULT,
            format!("{gib:.1} GiB free allows ~{}; using 1,000,000", count(fit)),
        ),
        None => {
            // Round down to a readable number.
            let n = Connections::new(fit / 1000 * 1000).map_or(FLOOR, |n| n.max(FLOOR));
            (
                n,
                format!(
                    "{gib:.1} GiB free allows ~{}; using {} (not 1,000,000)",
                    count(fit),
                    count(n.get())
                ),
            )
        }
    }
}

/// The client's source addresses: `--source`, or as many as the ephemeral port range
/// needs (`ephemeral` reads its size, only then).
pub(crate) struct Sources {
    /// The addresses as the client's `--sources` takes them.
    pub(crate) range: String,
    pub(crate) count: u64,
    /// Why these, for the run's header and record.
    pub(crate) reason: String,
}

pub(crate) fn sources(
    given: Option<&str>,
    connections: Connections,
    server_ports: u64,
    ephemeral: impl FnOnce() -> u64,
) -> Result<Sources> {
    Ok(match given {
        Some(s) => Sources {
            range: s.to_owned(),
            count: crate::args::parse_addrs(&[s.to_owned()])?.len() as u64,
            reason: "--source".to_owned(),
        },
        None => {
            let c = super::sources::choose(connections.get(), server_ports, ephemeral());
            Sources {
                range: c.range(),
                count: c.count,
                reason: c.reason(),
            }
        }
    })
}

/// The server as the record names it: `--server-name` or its default; c1m's own with
/// its engine and version.
pub(super) fn server_info(args: &RunArgs, spec: &ServerSpec) -> ServerInfo {
    let mut server_info = ServerInfo {
        name: args
            .server_name
            .clone()
            .unwrap_or_else(|| spec.default_name()),
        workers: args.server_workers,
        ..ServerInfo::default()
    };
    if *spec == ServerSpec::Own {
        server_info.engine = Some(args.server_engine.unwrap_or(args.engine));
        server_info.library = Some(Software {
            name: "c1m".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        });
    }
    server_info
}

/// The children's plan for a run into `dir`: their arguments and, with external clients,
/// the server's control endpoint and the token file it writes (the lab reads it).
pub(super) fn plan_into(
    args: &RunArgs,
    connections: Connections,
    sources: &str,
    dir: &Path,
    external: bool,
) -> Result<(ChildPlan, Option<PathBuf>)> {
    let mut plan = ChildPlan::new(args, connections, sources, dir)?;
    let server_token = external.then(|| dir.join("server.token"));
    if external {
        // Client hosts reach this endpoint for `time`; the lab too, with the token.
        let first = crate::args::parse_addrs(std::slice::from_ref(&args.addr))?;
        let ctl = match (&args.control_addr, first.first()) {
            (Some(a), _) => a.clone(),
            (None, Some(ip)) => std::net::SocketAddr::new(*ip, EXTERNAL_CONTROL_PORT).to_string(),
            (None, None) => bail!(
                "--addr names no address to serve the control endpoint on: give --control HOST:PORT"
            ),
        };
        plan.server.common.control = Some(ctl);
        plan.server.common.control_token_file = server_token.clone();
        // Client hosts learn it with the time; `c1m merge` joins only folders of this id.
        plan.server.run_id = Some(crate::multihost::model::new_run_id());
    }
    Ok((plan, server_token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_target_says_why() {
        let (n, why) = resolve_target(Some(TargetArg::Count(Connections::of(5000))));
        assert_eq!(n.get(), 5000);
        assert!(why.contains("allows"));
        let (n, why) = resolve_target(Some(TargetArg::Max));
        assert!(n.get() == 1000 || n.get() % 10_000 == 0, "{n}");
        assert!(why.starts_with("max: "), "{why}");
    }
}
