//! The merged run's phases are the server host's (its lab drove them); what the client
//! hosts did in each is cut from their time series on the server's clock: their
//! kernel-vs-app counts at the phase's end, their CPU over it and their RSS at its end.
//! The last phase lasts until the last host ended: a client host still closing when the
//! server's teardown ended is not done, and its counts then are not a mismatch.

use super::{Host, MergeError};
use crate::model::{
    PerConnection, Sample,
    kernel_vs_app::KernelVsApp,
    phase::{Phase, ProcessUsage},
};

/// Fills the client side of every phase from the hosts, after stretching the last phase
/// to the last host's end.
pub(super) fn merge(phases: &mut [Phase], hosts: &[Host]) -> Result<(), MergeError> {
    if let Some(last) = phases.last_mut() {
        let end = hosts
            .iter()
            .map(Host::ended_on_server_ms)
            .max()
            .unwrap_or(0);
        if end > last.ended_unix_ms {
            last.ended_unix_ms = end;
            last.duration_s = end.saturating_sub(last.started_unix_ms) as f64 / 1e3;
        }
    }
    for p in phases.iter_mut() {
        rows(&mut p.kernel_vs_app, p.ended_unix_ms, hosts)?;
        if let Some(u) = usage(p, hosts) {
            p.client = u;
        }
    }
    Ok(())
}

/// A phase's client rows: the server host's kernel has no client side, so its rows are
/// replaced by the client hosts' own counts (kernel and app) at the phase's end.
fn rows(rows: &mut Vec<KernelVsApp>, ended_unix_ms: u64, hosts: &[Host]) -> Result<(), MergeError> {
    rows.retain(|r| !r.what.starts_with("client"));
    let mut one = [Sample {
        unix_ms: ended_unix_ms,
        ..Sample::default()
    }];
    super::align_samples(&mut one, hosts)?;
    let [s] = one;
    rows.push(crate::figures::kernel_vs_app::client_hosts_open(
        s.kernel_client_established,
        s.client_open.map(|v| i64::try_from(v).unwrap_or(i64::MAX)),
    ));
    Ok(())
}

/// The client hosts' CPU over the phase and RSS at its end, summed (None: some host
/// recorded no CPU split, as a folder of an older c1m).
fn usage(p: &Phase, hosts: &[Host]) -> Option<ProcessUsage> {
    let mut u = ProcessUsage::default();
    let mut any = false;
    for h in hosts {
        let Some(end) = h.sample_at(p.ended_unix_ms) else {
            continue;
        };
        let cpu = |s: Option<&Sample>| match s {
            None => Some((0.0, 0.0)),
            Some(s) => Some((s.client_cpu_s?, s.client_cpu_sys_s?)),
        };
        let (total1, sys1) = cpu(Some(end))?;
        let (total0, sys0) = cpu(h.sample_at(p.started_unix_ms))?;
        let sys = (sys1 - sys0).max(0.0);
        u.cpu_sys_s += sys;
        u.cpu_user_s += (total1 - total0 - sys).max(0.0);
        u.rss_bytes = u
            .rss_bytes
            .saturating_add(end.client_rss_bytes.unwrap_or(0));
        any = true;
    }
    any.then_some(u)
}

/// Memory per connection with the client hosts in it, at the server's instant (the end
/// of idle): their user bytes (each host's RSS over its baseline, summed, over every
/// host's connections) and their sockets' kernel bytes added to the server's.
pub(super) fn per_connection(pc: &PerConnection, hosts: &[Host]) -> PerConnection {
    let mut out = PerConnection {
        client_user_bytes: None,
        ..pc.clone()
    };
    let rows: Option<Vec<&Sample>> = hosts.iter().map(|h| h.sample_at(pc.at_unix_ms)).collect();
    let Some(rows) = rows.filter(|r| !r.is_empty()) else {
        return out;
    };
    let open: u64 = rows.iter().filter_map(|r| r.client_open).sum();
    if open == 0 {
        return out;
    }
    let user: Option<f64> = rows
        .iter()
        .map(|r| Some(r.client_rss_per_connection_bytes? * r.client_open? as f64))
        .sum();
    out.client_user_bytes = user.map(|b| b / open as f64);
    let kernel: Option<u64> = rows.iter().map(|r| r.kernel_socket_bytes).sum();
    if let (Some(k), Some(server)) = (kernel, pc.kernel_bytes)
        && pc.connections > 0
    {
        out.kernel_bytes = Some(server + k as f64 / pc.connections as f64);
    }
    out
}
