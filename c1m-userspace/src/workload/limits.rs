//! The file-descriptor budget and how a side splits its work over shards.
//!
//! # Server: SO_REUSEPORT, every worker binds every port
//!
//! Chosen over the alternatives because it needs no root, no eBPF, no fd passing and no
//! central acceptor that would itself be a bottleneck at 30k accepts/s on 2 cores: the
//! kernel picks a socket of the port's reuseport group by a hash of the 4-tuple
//! (`reuseport_select_sock` → `reciprocal_scale(hash, num_socks)`), so each of W workers
//! receives about N/W connections.
//!
//! If the kernel's hash were uniform over the 4-tuples, a worker's load would be
//! Binomial(N, 1/W): σ ≈ sqrt(N/W), 131 for 1,000,000 over 57 workers. It is not, for
//! the traffic this lab makes: the client's kernel picks source ports in sequence per
//! destination, and the shares spread much wider. Measured on this box (loopback, one
//! source address, 100 server ports):
//!
//! | connections | workers | mean   | σ measured | σ binomial | max     |
//! |-------------|---------|--------|------------|------------|---------|
//! | 100,000     | 57      | 1,754  | 120 (6.8%) | 41         | 2,005   |
//! | 200,000     | 12      | 16,667 | ~300       | 123        | 17,278  |
//! | 1,000,000   | 57      | 17,538 | 1,057 (6.0%) | 131      | ≥19,836 (two workers hit the cap) |
//!
//! The spread is ~6–7% of the mean at every size (a fixed per-worker bias, not noise
//! that averages out), with the largest share 13%+ above the mean. So workers are sized at
//! [`SERVER_FILL`] = 75% of the per-process cap C = RLIMIT_NOFILE − listeners − reserve:
//! the cap is 33% above the mean load, over 5 σ of the measured spread. For 1,000,000
//! connections at RLIMIT_NOFILE 20,000 and 100 ports: C = 19,836,
//! W = ⌈1,000,000 / (0.75 · 19,836)⌉ = 68, mean 14,706, cap 5,130 (35%, ~5.4 σ) above it.
//!
//! Safety valve: a worker that still reaches its cap closes its listeners, which takes it
//! out of every port's reuseport group, so the kernel sends new connections to the others
//! (it reopens them below 90% of the cap). Only connections already queued on it at that
//! moment are reset, and counted.
//!
//! Disjoint port sets per worker would balance only as well as clients spread over ports;
//! an `sk_reuseport` eBPF selector could pick the emptiest worker but needs CAP_BPF and
//! couples the workload to the observer's eBPF build; passing fds over SCM_RIGHTS puts a
//! single acceptor on the critical path.
//!
//! # Client: exact split
//!
//! The client knows N, so it gives each shard ⌈N/W⌉ or ⌊N/W⌋ connections with W = ⌈N/C⌉.
//!
//! # One process where the limit allows
//!
//! When N fits in one process's budget, one process runs one shard per core (threads, each
//! with its own epoll and slab): the kernel still balances the server's threads through
//! SO_REUSEPORT, and the fd limit is shared, so imbalance between threads cannot hit it.

use std::io;

use super::control;

/// Descriptors every process keeps for itself: stdio, the epoll instances, tokio's
/// eventfd and signal pipe, IPC pipes, /proc reads. 64 is ~3× what a worker uses, so a
/// burst of /proc reads never eats into connections.
pub(crate) const FD_RESERVE: u64 = 64;

/// Descriptors the process serving the control endpoint keeps for it on top: its
/// listener, [`control::MAX_SESSIONS`] sessions, and one more for a connection accepted
/// only to be told "too many" and closed. Reserved up front, so control connections
/// (10,000 idle ones, say) never take a data connection's descriptor.
pub(crate) const CONTROL_FDS: u64 = control::MAX_SESSIONS as u64 + 2;

/// Connections one process may hold: RLIMIT_NOFILE less its listeners, the reserve every
/// process keeps and, in the process that serves the control endpoint (the supervisor,
/// which holds connections itself when it runs thread shards), the control reserve.
pub(crate) fn conn_cap(nofile: NoFile, listeners: u64, serves_control: bool) -> u64 {
    let control = if serves_control { CONTROL_FDS } else { 0 };
    nofile
        .soft
        .saturating_sub(listeners + FD_RESERVE + control)
        .max(1)
}

/// Target load per server worker as a fraction of its cap: measured shares spread ~6–7%
/// around the mean with outliers at +13% (see the module docs).
pub(crate) const SERVER_FILL: f64 = 0.75;

/// This process's RLIMIT_NOFILE (open fds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoFile {
    /// The soft limit: the one enforced (after [`raise_nofile`], the hard one if it could).
    pub soft: u64,
    /// The hard limit: the most the soft limit can be raised to without privilege.
    pub hard: u64,
}

/// Reads RLIMIT_NOFILE and raises the soft limit to the hard one.
pub fn raise_nofile() -> io::Result<NoFile> {
    let (mut soft, hard) = crate::host::nofile_limits();
    if soft < hard {
        // Raising soft up to hard needs no privilege; unlimited stays RLIM_INFINITY.
        let want = rustix::process::Rlimit {
            current: (hard != u64::MAX).then_some(hard),
            maximum: (hard != u64::MAX).then_some(hard),
        };
        if rustix::process::setrlimit(rustix::process::Resource::Nofile, want).is_ok() {
            soft = hard;
        }
    }
    Ok(NoFile { soft, hard })
}

/// How a side runs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Plan {
    /// Worker processes (true) or threads in this process (false).
    pub processes: bool,
    /// Client: connections per shard. Server: one entry per shard (its expected share).
    pub per_shard: Vec<u64>,
    /// Connections one process may hold.
    pub cap: u64,
    /// The start-up line that says how and why.
    pub line: String,
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn split_even(n: u64, w: u64) -> Vec<u64> {
    let w = w.max(1);
    (0..w).map(|i| n / w + u64::from(i < n % w)).collect()
}

/// Plans a server expecting `expected` concurrent connections over `listeners` listen
/// sockets per worker. `workers`: force that many worker processes (0 = decide).
pub(crate) fn plan_server(
    expected: u64,
    listeners: u64,
    nofile: NoFile,
    workers: u64,
    threads: u64,
) -> Plan {
    let why = format!("RLIMIT_NOFILE {} per process", nofile.soft);
    let one = conn_cap(nofile, listeners, true);
    if workers == 0 && expected <= one {
        let cap = one;
        let t = threads.max(1);
        return Plan {
            processes: false,
            per_shard: split_even(expected, t),
            cap,
            line: format!(
                "server: 1 process, {t} thread shard{} sharing ≤{} connections ({why}; {} expected fit)",
                if t == 1 { "" } else { "s" },
                thousands(cap),
                thousands(expected)
            ),
        };
    }
    let cap = conn_cap(nofile, listeners, false);
    let w = if workers > 0 {
        workers
    } else {
        (expected as f64 / (SERVER_FILL * cap as f64)).ceil() as u64
    };
    let w = w.max(1);
    Plan {
        processes: true,
        per_shard: split_even(expected, w),
        cap,
        line: format!(
            "server: {w} workers × ≤{} connections ({why}; {} expected, ~{} each via SO_REUSEPORT, \
             {:.0}% headroom for hashing imbalance)",
            thousands(cap),
            thousands(expected),
            thousands(expected / w),
            100.0 * (1.0 - (expected as f64 / w as f64) / cap as f64)
        ),
    }
}

/// Plans a client opening `n` connections, `churn_per_s` of them (`--churn`, 0 without)
/// closed and reopened a second.
pub(crate) fn plan_client(
    n: u64,
    nofile: NoFile,
    workers: u64,
    threads: u64,
    churn_per_s: f64,
) -> Plan {
    let why = format!("RLIMIT_NOFILE {} per process", nofile.soft);
    let one = conn_cap(nofile, 0, true).saturating_sub(churn_reserve(churn_per_s, 1));
    if workers == 0 && n <= one {
        let cap = one;
        let t = threads.max(1).min(n.max(1));
        return Plan {
            processes: false,
            per_shard: split_even(n, t),
            cap,
            line: format!(
                "client: 1 process, {t} thread shard{} for {} connections ({why})",
                if t == 1 { "" } else { "s" },
                thousands(n)
            ),
        };
    }
    let full = conn_cap(nofile, 0, false);
    // A worker's share of the churn is known only with their number; the number without
    // the reserve is the smallest it can be, so its share is the largest.
    let fewest = n.div_ceil(full).max(1);
    let cap = full
        .saturating_sub(churn_reserve(churn_per_s, fewest))
        .max(1);
    let w = if workers > 0 {
        workers
    } else {
        n.div_ceil(cap)
    }
    .max(1);
    let per = split_even(n, w);
    Plan {
        processes: true,
        line: format!(
            "client: {w} workers × ≤{} connections ({why}; {} asked for)",
            thousands(per.iter().copied().max().unwrap_or(0)),
            thousands(n)
        ),
        per_shard: per,
        cap,
    }
}

/// Descriptors one of `processes` keeps free for `--churn`: a churned connection keeps
/// its socket until its server closes (at most [`CLOSE_STALL_NS`] once closes stall)
/// while its reopen takes a new one. Without it a worker filled to its cap met EMFILE:
/// 272 reopens at 300,000 churned 5,000/s.
///
/// [`CLOSE_STALL_NS`]: super::engine::client::proto::CLOSE_STALL_NS
fn churn_reserve(churn_per_s: f64, processes: u64) -> u64 {
    let closing_s = super::engine::client::proto::CLOSE_STALL_NS as f64 / 1e9;
    if !(churn_per_s.is_finite() && churn_per_s > 0.0) {
        return 0;
    }
    (churn_per_s / processes.max(1) as f64 * closing_s).ceil() as u64
}

/// The kernel's ephemeral port range (net.ipv4.ip_local_port_range), for the capacity
/// warning: each (source address, destination) pair can hold this many connections.
pub(crate) fn ephemeral_ports() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut it = s.split_whitespace().filter_map(|v| v.parse::<u64>().ok());
    let (lo, hi) = (it.next()?, it.next()?);
    Some(hi.saturating_sub(lo) + 1)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    const BOX: NoFile = NoFile {
        soft: 20_000,
        hard: 20_000,
    };

    #[test]
    fn million_on_this_box() {
        let p = plan_server(1_000_000, 100, BOX, 0, 2);
        assert!(p.processes);
        assert_eq!((p.per_shard.len(), p.cap), (68, 19_836));
        assert!(
            p.line
                .starts_with("server: 68 workers × ≤19,836 connections (RLIMIT_NOFILE 20000")
        );
        let c = plan_client(1_000_000, BOX, 0, 2, 0.0);
        assert_eq!(c.per_shard.len(), 51);
        assert_eq!(c.per_shard.iter().sum::<u64>(), 1_000_000);
        assert!(c.per_shard.iter().all(|&n| n <= c.cap));
    }

    #[test]
    fn small_runs_stay_in_one_process() {
        let p = plan_server(10_000, 100, BOX, 0, 2);
        assert_eq!((p.processes, p.per_shard.len()), (false, 2));
        // One process also serves the control endpoint: its sessions are reserved.
        assert_eq!(p.cap, 20_000 - 100 - FD_RESERVE - CONTROL_FDS);
        let c = plan_client(25_000, BOX, 0, 2, 0.0);
        assert_eq!((c.processes, c.per_shard), (true, vec![12_500, 12_500]));
        let forced = plan_client(100, BOX, 3, 2, 0.0);
        assert_eq!(
            (forced.processes, forced.per_shard),
            (true, vec![34, 33, 33])
        );
    }

    #[test]
    fn churn_keeps_descriptors_free_for_the_sockets_still_closing() {
        // 300,000 churned 5,000/s: 16 workers would hold 18,750 each; 313 churns a second
        // each, 5 s of closes, 1,563 descriptors kept free, so 17 workers.
        let c = plan_client(300_000, BOX, 0, 2, 5_000.0);
        assert_eq!(c.cap, 20_000 - FD_RESERVE - 1_563);
        assert_eq!(c.per_shard.len(), 17);
        assert!(c.per_shard.iter().all(|&n| n <= c.cap));
        // In one process: the whole churn's reserve.
        let one = plan_client(10_000, BOX, 0, 2, 100.0);
        assert_eq!(one.cap, 20_000 - FD_RESERVE - CONTROL_FDS - 500);
        assert!(!one.processes);
        assert_eq!(plan_client(300_000, BOX, 0, 2, 0.0).per_shard.len(), 16);
    }
}
