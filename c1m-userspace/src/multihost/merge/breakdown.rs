//! One host's row of the merged run: what it connected, its failures and latency, and
//! its kernel against its app (the observer's count, or the socket table's when the
//! host had no privileges), computed once here for the summary, `c1m merge`'s lines,
//! the report's table and `c1m run --hosts`'s table.

use super::{Host, MergeError};
use crate::{
    model::{RunRecord, kernel_vs_app::KernelVsApp},
    multihost::model::{HostBreakdown, KernelSource},
};

/// `client-0: kernel 15,000 = app 15,000 (eBPF)`: one host's kernel against its app.
pub(super) fn host_line(h: &HostBreakdown) -> String {
    let source = h.kernel_source.map_or("unknown", |s| s.name());
    format!(
        "{}: kernel {} {} app {} ({source}){}",
        h.label,
        h.kernel_connected
            .map_or("n/a".to_owned(), |v| crate::fmt::int(i128::from(v))),
        if h.kernel_agrees { "=" } else { "≠" },
        crate::fmt::count(h.connected),
        h.kernel_explanation
            .as_deref()
            .map(|e| format!(": {e}"))
            .unwrap_or_default()
    )
}

pub(super) fn label(h: &Host) -> String {
    h.run
        .host
        .as_ref()
        .map(|i| i.label.clone())
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| h.dir.display().to_string())
}

/// `held_at_ms`: the server's instant for memory per connection (the end of idle, on its
/// clock; 0: none), where each host's memory is read too.
pub(super) fn breakdown(h: &Host, held_at_ms: u64) -> Result<HostBreakdown, MergeError> {
    let info = h.run.host.clone().unwrap_or_default();
    let p99 = |name: &str| {
        h.hists
            .get(name)
            .filter(|x| !x.is_empty())
            .map(|x| x.value_at_quantile(0.99))
    };
    let c = &h.snap.counters;
    let kernel_client_established = most_established(&h.run);
    // The observer's last view of the host (None: it counted from /proc/net/tcp).
    let observed = h
        .run
        .kernel
        .as_ref()
        .filter(|_| info.kernel_source == Some(KernelSource::Observer));
    let kernel = host_kernel_vs_app(&h.run, h.snap.counters.connected, kernel_client_established);
    // Memory when every connection is held: at the server's instant, else at the host's
    // last row with the most open.
    let held = h
        .sample_at(held_at_ms)
        .filter(|_| held_at_ms > 0)
        .or_else(|| {
            h.run
                .samples
                .iter()
                .filter(|s| s.client_open.is_some())
                .max_by_key(|s| (s.client_open, s.unix_ms))
        });
    let failures = c
        .failures
        .checked_total()
        .ok_or_else(|| MergeError::Overflow {
            path: h.dir.clone(),
            field: "counters.failures (every kind summed)".to_owned(),
        })?;
    Ok(HostBreakdown {
        label: label(h),
        hostname: info.hostname.clone(),
        dir: h.dir.display().to_string(),
        shard_index: info.shard_index,
        connections_asked: h.run.config.connections,
        connected: c.connected,
        failures,
        pushes_received: c.pushes_received,
        setup_rate_per_s: h.snap.setup_rate.and_then(|r| r.achieved_per_s),
        connect_p99_us: p99("connect_us"),
        push_message_p99_us: p99("push_message_us"),
        kernel_client_established,
        kernel_source: info.kernel_source,
        kernel_connected: kernel.kernel,
        kernel_agrees: kernel.agree,
        kernel_explanation: kernel.explanation,
        kernel_retransmits: observed.map(|k| k.client.retransmits.total),
        kernel_resets_sent: observed.map(|k| k.client.resets_sent()),
        kernel_retransmit_kinds: observed.map(|k| k.client.retransmits),
        loss: observed.and_then(|k| k.loss.clone()),
        loss_explained: observed.and_then(|k| {
            k.loss
                .as_ref()
                .map(|l| crate::observer::loss::explain(&label(h), l, &k.client.retransmits))
        }),
        kernel_socket_bytes: observed.and(
            h.run
                .samples
                .iter()
                .filter_map(|s| s.kernel_socket_bytes)
                .max(),
        ),
        cpu_user_s: Some(h.snap.cpu_user_s),
        cpu_sys_s: Some(h.snap.cpu_sys_s),
        rss_peak_bytes: h
            .run
            .samples
            .iter()
            .filter_map(|s| s.client_rss_bytes)
            .max(),
        user_bytes_per_connection: held.and_then(|s| s.client_rss_per_connection_bytes),
        kernel_bytes_per_socket: observed.and(held.and_then(|s| s.kernel_bytes_per_socket)),
        clock_offset_ns: info.clock.map(|c| c.offset_ns),
        clock_bound_ns: info.clock_bound_ns(),
        path: info.path(),
    })
}

/// The most ESTABLISHED client-side sockets a host's folder recorded at once.
pub(crate) fn most_established(run: &RunRecord) -> Option<i64> {
    run.samples
        .iter()
        .filter_map(|s| s.kernel_client_established)
        .max()
}

/// A client host's kernel against its app's `connected` over its folder `run` so far:
/// with the observer, connections its kernel saw reach ESTABLISHED since attach;
/// without, `most_established` (the most ESTABLISHED at once). The merge's row and
/// `--hosts`' live lines both read it here.
pub(crate) fn host_kernel_vs_app(
    run: &RunRecord,
    connected: u64,
    most_established: Option<i64>,
) -> KernelVsApp {
    let info = run.host.as_ref();
    let app = i64::try_from(connected).unwrap_or(i64::MAX);
    match info.and_then(|i| i.kernel_source) {
        Some(KernelSource::Observer) => crate::figures::kernel_vs_app::client_host_connected(
            run.kernel
                .as_ref()
                .map(|k| i64::try_from(k.client.established_total).unwrap_or(i64::MAX)),
            app,
            None,
        ),
        _ => crate::figures::kernel_vs_app::client_host_connected(
            most_established,
            app,
            Some(
                info.and_then(|i| i.kernel_fallback.as_deref())
                    .unwrap_or("a folder of an older c1m"),
            ),
        ),
    }
}
