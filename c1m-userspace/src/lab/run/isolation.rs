//! Runs that do not leak into each other. `c1m run --servers` measures one server after
//! another, and each run used to inherit the one before it: in one sequence the peak
//! kernel socket memory climbed 39.4 → 40.6 → 41.8 → 43.0 → 43.8 → 44.6 MiB in run
//! order, each run starting beside ~5,000 TIME_WAIT sockets (they last 60 s), conntrack
//! entries and memory of the previous one.
//!
//! As root each run of a sequence is its own `c1m run` process in a network namespace of
//! its own ([`Isolation::Netns`]): lo up, the sysctls the run depends on carried over from
//! the namespace the sequence started in (a fresh one has the kernel's defaults), then
//! `--tune` on top. The observer counts sockets of its own namespace only and reads the
//! MIB from /proc/thread-self/net, so every kernel figure becomes the run's own; the
//! namespace, with whatever its sockets left, goes with the run's last process.
//! Otherwise ([`Isolation::Wait`]) a run waits, at most `--clean-wait`, until no socket
//! is left on its ports. Either way the run records what it started from
//! ([`StartState`]) and says so when that was not clean.

use std::{
    collections::BTreeMap,
    ops::ControlFlow,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use crate::{
    lab::tuning,
    model::{Netns, StartState, leftovers},
    observer::view::state_key,
    proc_net_tcp::for_each_row,
};

/// How the runs of a `--servers` sequence are kept apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Isolation {
    /// Each run in a network namespace of its own (root, loopback addresses only).
    Netns,
    /// Each run waits, at most --clean-wait, until no socket is left on its ports.
    Wait,
}

/// TIME_WAIT lasts 60 s (`TCP_TIMEWAIT_LEN`, fixed in the kernel): the default wait lets
/// the last run's close through with some room for a teardown that ended late.
pub(crate) const CLEAN_WAIT_DEFAULT: &str = "70s";

/// How often the wait looks at the socket table.
const POLL: Duration = Duration::from_millis(500);

/// The sysctls a run's figures depend on that have a value per network namespace,
/// among the ones the run records (`machine.sysctls`).
fn per_namespace(recorded: &[&'static str]) -> Vec<&'static str> {
    recorded
        .iter()
        .copied()
        .filter(|n| tuning::per_netns(n))
        .collect()
}

/// Moves this process into a network namespace of its own, with lo up and the
/// per-namespace sysctls of `recorded` as they were in the namespace it leaves. Must run
/// before any thread is started: a namespace belongs to a thread, and the threads started
/// later (runtime, observer, children) inherit the caller's. Returns the sysctls that
/// could not be carried over (said by the caller, the run goes on with the default).
pub(crate) fn enter_fresh_netns(recorded: &[&'static str]) -> Result<Vec<String>> {
    let threads = crate::procstat::threads(std::process::id()).unwrap_or(0);
    if threads > 1 {
        bail!(
            "entering a fresh network namespace with {threads} threads running: only the calling one would move"
        );
    }
    let carried: Vec<(&str, String)> = per_namespace(recorded)
        .into_iter()
        .filter_map(|n| Some((n, crate::sysctl::read(n)?)))
        .collect();
    crate::netns::enter_private().context(
        "--isolation netns: making a network namespace (needs root or CAP_SYS_ADMIN; or --isolation wait)",
    )?;
    Ok(carried
        .into_iter()
        .filter(|(name, value)| crate::sysctl::read(name).as_deref() != Some(value.as_str()))
        .filter_map(|(name, value)| {
            crate::netns::set_sysctl(&name.replace('.', "/"), &value)
                .err()
                .map(|e| format!("{name} = {value}: {e}"))
        })
        .collect())
}

/// Whether runs can get namespaces of their own here: root (or the capability), and
/// addresses that exist in an empty namespace (loopback). The reason when not.
pub(crate) fn netns_possible(addrs: &[std::net::IpAddr]) -> Result<(), String> {
    if let Some(ip) = addrs.iter().find(|ip| !ip.is_loopback()) {
        return Err(format!(
            "{ip} is not a loopback address, and a fresh network namespace has only lo"
        ));
    }
    // A thread of its own tries: the namespace goes with the thread.
    let probe = std::thread::spawn(|| {
        // SAFETY: rustix marks unshare unsafe for CLONE_FILES; unsharing the network
        // namespace only changes this short-lived thread's membership, no descriptor.
        unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNET) }
            .map_err(std::io::Error::from)
    });
    match probe.join() {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!(
            "no network namespace can be made here ({e}; needs root)"
        )),
        Err(_) => Err("no network namespace can be made here".to_owned()),
    }
}

/// TCP sockets of this thread's namespace by state: all of them, and the ones with a
/// local or remote port in `ports`.
fn sockets(ports: &[u16]) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let (mut all, mut on_ports) = (BTreeMap::new(), BTreeMap::new());
    for_each_row(|row| {
        let state = state_key(u32::from(row.state));
        *all.entry(state.clone()).or_insert(0) += 1;
        let mine = |p: Option<u16>| p.is_some_and(|p| ports.contains(&p));
        if mine(row.local_port()) || mine(row.remote_port()) {
            *on_ports.entry(state).or_insert(0) += 1;
        }
        ControlFlow::Continue(())
    });
    (all, on_ports)
}

/// Waits until an earlier run's sockets on `ports` are gone (any but a listener, as
/// [`StartState::leftovers`] counts them) or `limit` passes; the seconds waited.
pub(crate) async fn wait_for_clean_ports(ports: &[u16], limit: Duration) -> f64 {
    let started = Instant::now();
    loop {
        let ports_now = ports.to_vec();
        let left = tokio::task::spawn_blocking(move || leftovers(&sockets(&ports_now).1))
            .await
            .unwrap_or(0);
        // A signal ends the wait too: the run then ends as interrupted at once.
        if left == 0 || started.elapsed() >= limit || crate::util::shutdown_requested() {
            return started.elapsed().as_secs_f64();
        }
        tokio::time::sleep(POLL.min(limit.saturating_sub(started.elapsed()))).await;
    }
}

/// The namespace and the box now, before any process of the run.
pub(crate) fn start_state(
    ports: &[u16],
    netns: Netns,
    wait: Option<(f64, Duration)>,
) -> StartState {
    let (all, on_ports) = sockets(ports);
    StartState {
        unix_ms: crate::util::unix_ms_now(),
        netns,
        sockets: all,
        sockets_on_ports: on_ports,
        conntrack_entries: crate::sysctl::read("net.netfilter.nf_conntrack_count")
            .and_then(|v| v.parse().ok()),
        mem_available_bytes: crate::host::mem_available(),
        waited_s: wait.map(|(w, _)| w),
        wait_limit_s: wait.map(|(_, l)| l.as_secs_f64()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sockets_on_the_ports_are_counted_by_state_apart_from_the_rest() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (server, _) = listener.accept().unwrap();
        let (all, mine) = sockets(&[port]);
        // The listener and both ends of the connection.
        assert_eq!(mine.get("listen"), Some(&1), "{mine:?}");
        assert_eq!(mine.get("established"), Some(&2), "{mine:?}");
        assert!(all.values().sum::<u64>() >= 3);
        drop((client, server, listener));
    }

    #[test]
    fn only_namespaced_sysctls_are_carried() {
        assert_eq!(
            per_namespace(&[
                "fs.file-max",
                "net.core.somaxconn",
                "net.ipv4.tcp_max_tw_buckets"
            ]),
            ["net.core.somaxconn", "net.ipv4.tcp_max_tw_buckets"]
        );
    }

    #[test]
    fn a_namespace_needs_loopback_addresses() {
        let e = netns_possible(&["10.1.2.3".parse().unwrap()]).unwrap_err();
        assert!(e.contains("10.1.2.3 is not a loopback address"), "{e}");
    }
}
