//! Preflight: every limit the C1M blog posts tripped over, with the value found, the
//! value a run of this size needs and the command that fixes it. `--tune` applies the
//! sysctls a run needs and puts the old values back afterwards, also on Ctrl-C,
//! SIGTERM, or (via `c1m doctor --restore`) after the process was killed: see
//! [`super::tuning`].

use std::path::Path;

use super::{
    check::{Check, Status},
    tuning::{self, Sweep, Tuning},
};
use crate::{
    args::Connections,
    host,
    ktls::KernelTls,
    observer::{privileges, procfs},
    sysctl::{
        self, CONNTRACK_MAX, FILE_MAX, NEIGH_GC_THRESH3, PORT_RANGE, SOMAXCONN, SYN_BACKLOG,
        TW_BUCKETS,
    },
};

/// The memory model: what one connection (both ends on this box) was measured to
/// cost, times a head room. Measured by the lab at 1,000,000 WebSocket connections
/// (docs/results.md): the observer's slab accounting gave 4,092 B of
/// kernel memory per idle loopback socket (TCP object, inode, file, dentry, epoll
/// item); the processes' RSS gave at most 46 B per connection on the server and 85 B
/// on the client.
pub(crate) const KERNEL_BYTES_PER_SOCKET: u64 = 4_092;
pub(crate) const SERVER_USER_BYTES_PER_CONNECTION: u64 = 46;
pub(crate) const CLIENT_USER_BYTES_PER_CONNECTION: u64 = 85;
/// Head room over the idle figure: the push queues a frame (an skb and its clone in
/// the sender's retransmit queue) per connection at once, plus page cache and the
/// processes' base.
const SAFETY: f64 = 1.5;
const RESERVE_BYTES: u64 = 1 << 30;

/// Memory one connection costs on this box with both ends here: two sockets.
pub(crate) fn bytes_per_connection() -> u64 {
    ((2 * KERNEL_BYTES_PER_SOCKET
        + SERVER_USER_BYTES_PER_CONNECTION
        + CLIENT_USER_BYTES_PER_CONNECTION) as f64
        * SAFETY) as u64
}

/// The memory `n` connections need on this box: both ends, with the head room and the
/// reserve. The memory check and `--force`'s "how far past" read this one figure.
pub(crate) fn memory_needed(n: u64) -> u64 {
    n.saturating_mul(bytes_per_connection())
        .saturating_add(RESERVE_BYTES)
}

/// The most connections `available` bytes allow.
pub(crate) fn connections_that_fit(available: u64) -> u64 {
    available.saturating_sub(RESERVE_BYTES) / bytes_per_connection()
}

/// What the run will ask of the box.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub connections: Connections,
    pub server_ports: u64,
    pub sources: u64,
    pub observer: bool,
    /// The server is not c1m's and runs in one process, as written (c1m shards its own,
    /// and `--servers` starts a reference server with `--workers` past the limit).
    pub single_process_server: bool,
    /// `--churn`'s connections closed and reopened a second (0 without): each leaves a
    /// TIME_WAIT for 60 s beside the teardown's.
    pub churn_per_s: f64,
}

/// `MemAvailable` from /proc/meminfo, bytes.
fn check(
    name: &str,
    current: String,
    needed: String,
    status: Status,
    fix: Option<String>,
    note: &str,
) -> Check {
    Check {
        name: name.to_owned(),
        current,
        needed,
        status,
        fix,
        tune: None,
        note: note.to_owned(),
        ktls: None,
    }
}

/// Every check for `target`.
/// TIME_WAIT sockets `--churn` keeps at a time: each churned connection's for
/// TCP_TIMEWAIT_LEN (60 s, fixed in the kernel).
fn time_wait_of_churn(per_s: f64) -> u64 {
    const TIME_WAIT_S: f64 = 60.0;
    if per_s.is_finite() && per_s > 0.0 {
        (per_s * TIME_WAIT_S).ceil() as u64
    } else {
        0
    }
}

pub(crate) fn checks(target: &Target) -> Vec<Check> {
    let n = target.connections.get();
    let sockets = n.saturating_mul(2);
    let mut out = Vec::new();

    let root = privileges::is_root();
    let bpf = privileges::check_bpf();
    out.push(check(
        "privileges",
        if root {
            "root".to_owned()
        } else {
            format!("uid {}", rustix::process::geteuid().as_raw())
        },
        if target.observer {
            "root or CAP_BPF+CAP_PERFMON+CAP_NET_ADMIN"
        } else {
            "any"
        }
        .to_owned(),
        match (&bpf, target.observer) {
            (Ok(()), _) | (_, false) => Status::Ok,
            (Err(_), true) => Status::Fail,
        },
        match (&bpf, target.observer) {
            (Err(missing), true) => Some(format!(
                "the eBPF observer needs {missing}: sudo -E c1m …, or --no-observer"
            )),
            _ => None,
        },
        "the kernel observer loads eBPF programs; sysctl tuning also needs root",
    ));

    let (soft, hard) = host::nofile_limits();
    // One process holds the fds of both ends only if server and client were one; each
    // side is its own process tree, so the per-process need is one side's sockets.
    let per_process_need = n.saturating_add(100);
    let workers = n.div_ceil(hard.saturating_sub(100).max(1) * 9 / 10);
    out.push(check(
        "ulimit -n (RLIMIT_NOFILE)",
        format!("soft {soft}, hard {hard}"),
        format!("{per_process_need} for one process per side"),
        if hard >= per_process_need { Status::Ok } else { Status::Warn },
        (hard < per_process_need).then(|| {
            format!(
                "ulimit -n {per_process_need}  (raising the hard limit needs root: /etc/security/limits.conf or prlimit)"
            )
        }),
        &if hard >= per_process_need {
            "each side fits in one process".to_owned()
        } else {
            format!("c1m will spread each side over ~{workers} worker processes instead")
        },
    ));

    if target.single_process_server {
        // c1m shards its own server past the limit; a foreign one runs as it was written.
        let cap = soft.max(hard).saturating_sub(100);
        out.push(check(
            "foreign server fd limit",
            format!("RLIMIT_NOFILE {hard}"),
            format!("{per_process_need} in one server process"),
            if cap >= n { Status::Ok } else { Status::Warn },
            (cap < n).then(|| {
                format!(
                    "-n {} or fewer, or a server that spreads over processes (SO_REUSEPORT workers)",
                    cap
                )
            }),
            &if cap >= n {
                "a single-process server fits".to_owned()
            } else {
                format!(
                    "a single-process server stops near {cap} connections (RLIMIT_NOFILE {hard}); the run will end the setup there and say so"
                )
            },
        ));
    }

    let file_max = sysctl::read_u64(FILE_MAX).unwrap_or(0);
    let file_need = sockets + sockets / 10 + 10_000;
    let mut c = Check {
        name: FILE_MAX.to_owned(),
        current: file_max.to_string(),
        needed: format!("≥ {file_need}"),
        status: if file_max >= file_need {
            Status::Ok
        } else {
            Status::Fail
        },
        fix: (file_max < file_need).then(|| format!("sysctl -w fs.file-max={file_need}")),
        tune: (file_max < file_need).then(|| (FILE_MAX.to_owned(), file_need.to_string())),
        note: "open files on the whole box: every socket is one".to_owned(),
        ktls: None,
    };
    out.push(c.clone());

    let nr_open = sysctl::read_u64("fs.nr_open").unwrap_or(0);
    out.push(check(
        "fs.nr_open",
        nr_open.to_string(),
        format!("≥ {per_process_need} to raise ulimit -n that far"),
        if nr_open >= per_process_need {
            Status::Ok
        } else {
            Status::Warn
        },
        (nr_open < per_process_need).then(|| format!("sysctl -w fs.nr_open={per_process_need}")),
        "the ceiling for any process's RLIMIT_NOFILE",
    ));

    let range = sysctl::read(PORT_RANGE).unwrap_or_default();
    let (lo, hi) = range
        .split_once(' ')
        .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
        .unwrap_or((32768, 60999));
    let per_tuple = hi.saturating_sub(lo) + 1;
    // The kernel picks a port per (source, server address, server port): each pair has
    // the whole range.
    let capacity = per_tuple * target.server_ports.max(1) * target.sources.max(1);
    c = Check {
        name: PORT_RANGE.to_owned(),
        // Counts with separators; the range stays as the sysctl takes it.
        current: format!(
            "{lo}-{hi}: {} ports × {} server ports × {} sources = {}",
            crate::fmt::count(per_tuple),
            crate::fmt::count(target.server_ports),
            crate::fmt::count(target.sources),
            crate::fmt::count(capacity)
        ),
        needed: format!("≥ {} client ports", crate::fmt::count(n)),
        status: if capacity >= n { Status::Ok } else { Status::Fail },
        fix: (capacity < n).then(|| {
            format!(
                "more --source addresses (each adds {}), more server ports, or sysctl -w net.ipv4.ip_local_port_range=\"10000 65535\"",
                per_tuple * target.server_ports.max(1)
            )
        }),
        tune: (capacity < n).then(|| (PORT_RANGE.to_owned(), "10000 65535".to_owned())),
        note: "ephemeral ports per 4-tuple; c1m binds sources with IP_BIND_ADDRESS_NO_PORT".to_owned(),
        ktls: None,
    };
    out.push(c);

    for (name, want, why) in [
        (
            SOMAXCONN,
            4096,
            "caps every listen() backlog: the accept queue a ramp fills",
        ),
        (
            SYN_BACKLOG,
            8192,
            "half-open handshakes per listener during the ramp",
        ),
    ] {
        let cur = sysctl::read_u64(name).unwrap_or(0);
        out.push(Check {
            name: name.to_owned(),
            current: cur.to_string(),
            needed: format!("≥ {want}"),
            status: if cur >= want {
                Status::Ok
            } else {
                Status::Warn
            },
            fix: (cur < want).then(|| format!("sysctl -w {name}={want}")),
            tune: (cur < want).then(|| (name.to_owned(), want.to_string())),
            note: why.to_owned(),
            ktls: None,
        });
    }

    // The side that closes first keeps each connection in TIME_WAIT for 60 s (a
    // WebSocket server, RFC 6455 §7.1.1), and an orphan waiting in FIN_WAIT2 takes a slot
    // too. Past the limit the kernel frees the socket, so the peer's FIN meets no socket
    // and draws a RST: 626,177 of them at 1M with the default 131,072 (TCPTimeWaitOverflow).
    // A slot is a 256 B `tw_sock_TCP`, taken as the full sockets are freed.
    let tw_name = TW_BUCKETS;
    if let Some(cur) = sysctl::read_u64(tw_name) {
        // Churn's TIME_WAITs live 60 s each and are still there when the teardown adds
        // n more: at 300,000 churned 5,000/s, a limit of n + 10% let 120,387 closes of
        // the teardown find no bucket.
        let need = n.saturating_add(time_wait_of_churn(target.churn_per_s));
        let want = need.saturating_add(need / 10);
        out.push(Check {
            name: tw_name.to_owned(),
            current: cur.to_string(),
            needed: format!("≥ {need}"),
            status: if cur >= need {
                Status::Ok
            } else {
                Status::Warn
            },
            fix: (cur < need).then(|| format!("sysctl -w {tw_name}={want}")),
            tune: (cur < need).then(|| (tw_name.to_owned(), want.to_string())),
            note: "TIME_WAIT sockets after a teardown: past the limit every close ends in a RST"
                .to_owned(),
            ktls: None,
        });
    }

    if let Some(max) = sysctl::read_u64(CONNTRACK_MAX).filter(|_| conntrack_tracks_loopback()) {
        let want = sockets + sockets / 10;
        out.push(Check {
            name: CONNTRACK_MAX.to_owned(),
            current: max.to_string(),
            needed: format!("≥ {want}"),
            status: if max >= want {
                Status::Ok
            } else {
                Status::Fail
            },
            fix: (max < want).then(|| format!("sysctl -w {CONNTRACK_MAX}={want}")),
            tune: (max < want).then(|| (CONNTRACK_MAX.to_owned(), want.to_string())),
            note: "conntrack is loaded: a full table drops new connections silently".to_owned(),
            ktls: None,
        });
    }

    let available = host::mem_available();
    let need = memory_needed(n);
    let fit = connections_that_fit(available);
    out.push(check(
        "memory",
        format!(
            "{} available of {}",
            crate::fmt::bytes(available as f64),
            crate::fmt::bytes(host::mem_total() as f64)
        ),
        format!(
            "{} for {n} connections (~{} B each, both ends)",
            crate::fmt::bytes(need as f64),
            bytes_per_connection()
        ),
        if available >= need {
            Status::Ok
        } else {
            Status::Fail
        },
        (available < need).then(|| format!("--connections {fit}")),
        &format!(
            "{} allows ~{fit} connections",
            crate::fmt::bytes(available as f64)
        ),
    ));

    if target.observer {
        let btf = Path::new("/sys/kernel/btf/vmlinux").exists();
        out.push(check(
            "kernel BTF",
            if btf {
                "/sys/kernel/btf/vmlinux"
            } else {
                "missing"
            }
            .to_owned(),
            "present".to_owned(),
            if btf { Status::Ok } else { Status::Fail },
            (!btf).then(|| "a kernel built with CONFIG_DEBUG_INFO_BTF=y".to_owned()),
            "struct offsets for the eBPF programs come from it",
        ));
        let readable = [
            "/sys/kernel/tracing/events",
            "/sys/kernel/debug/tracing/events",
        ]
        .iter()
        .any(|p| Path::new(p).is_dir());
        // Mounted but mode 0700 is what a non-root user meets: the fix is root, not a mount.
        let mounted = crate::observer::tracefs::mount_point();
        out.push(check(
            "tracefs",
            match (readable, &mounted) {
                (true, _) => "mounted".to_owned(),
                (false, Some(at)) => {
                    format!("mounted at {}, unreadable without root", at.display())
                }
                (false, None) => "not mounted".to_owned(),
            },
            "readable (c1m mounts it when root)".to_owned(),
            if readable || root {
                Status::Ok
            } else {
                Status::Fail
            },
            match (readable || root, &mounted) {
                (true, _) => None,
                (false, Some(_)) => Some("sudo -E c1m …, or --no-observer".to_owned()),
                (false, None) => Some(
                    "as root: mount -t tracefs tracefs /sys/kernel/tracing; or --no-observer"
                        .to_owned(),
                ),
            },
            "tracepoint ids and record layouts",
        ));
        let cgroup2 = procfs::cgroup2_root();
        out.push(check(
            "cgroup v2",
            cgroup2
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "no mount".to_owned()),
            "a cgroup2 hierarchy".to_owned(),
            if cgroup2.is_some() || root {
                Status::Ok
            } else {
                Status::Warn
            },
            None,
            "sock_ops counts transitions losslessly there (c1m mounts it privately when root)",
        ));
    }
    out
}

/// The kTLS row: informational, never a failure, and left out of [`checks`] so a run's
/// preflight neither prints nor weighs it (wss's record layer is rustls's either way).
pub(crate) fn ktls_row(k: &KernelTls) -> Check {
    Check {
        name: "kTLS".to_owned(),
        current: k.state(),
        needed: "nothing: informational".to_owned(),
        status: Status::Ok,
        fix: None,
        tune: None,
        note: k.meaning().to_owned(),
        ktls: Some(k.clone()),
    }
}

/// How long conntrack keeps a closed connection's entry (`nf_conntrack_tcp_timeout_time_wait`,
/// 120 s by default): churned connections hold entries that long after their close.
const CONNTRACK_TIME_WAIT_S: f64 = 120.0;

/// Connections a client host opens beside its share: the clock measurements and the
/// control endpoint's, each an entry in its table.
const CONNTRACK_CONTROL_ENTRIES: u64 = 16;

/// `c1m run --hosts --conntrack`: each client host's table (held to the box's
/// `nf_conntrack_max`, counted per namespace) holds an entry per connection of its
/// `share`, per churned connection for 120 s after its close, and the control
/// connections; 10% more is asked of --tune. `max` None: no conntrack in this kernel.
pub(crate) fn conntrack_hosts(max: Option<u64>, share: u64, churn_per_s: f64) -> Option<Check> {
    let max = max?;
    let churned = if churn_per_s.is_finite() && churn_per_s > 0.0 {
        (churn_per_s * CONNTRACK_TIME_WAIT_S).ceil() as u64
    } else {
        0
    };
    let need = share
        .saturating_add(churned)
        .saturating_add(CONNTRACK_CONTROL_ENTRIES);
    let want = need.saturating_add(need / 10);
    let short = max > 0 && max < need;
    Some(Check {
        name: CONNTRACK_MAX.to_owned(),
        current: max.to_string(),
        needed: format!("≥ {need} (a client host's {share} connections, TIME_WAIT and control entries)"),
        status: if short { Status::Fail } else { Status::Ok },
        fix: short.then(|| format!("sysctl -w {CONNTRACK_MAX}={want}")),
        tune: short.then(|| (CONNTRACK_MAX.to_owned(), want.to_string())),
        note: "--conntrack: past the limit a client host's new connects are dropped (its table's drop counter)"
            .to_owned(),
        ktls: None,
    })
}

/// `c1m run --hosts`: the server host's neighbour table holds an entry per client
/// address it answers (`peers`); past the box's `gc_thresh3` a reply to a new one is
/// dropped ("neighbour table overflow"). None: the thresholds are not readable.
pub(crate) fn neighbours_hosts(gc_thresh3: Option<u64>, peers: u64) -> Option<Check> {
    let hard = gc_thresh3?;
    let short = hard < peers;
    let want = peers.saturating_add(peers / 10).max(hard);
    Some(Check {
        name: NEIGH_GC_THRESH3.to_owned(),
        current: hard.to_string(),
        needed: format!("≥ {peers} (the server host's peers: one per client address)"),
        status: if short { Status::Warn } else { Status::Ok },
        fix: short.then(|| format!("sysctl -w {NEIGH_GC_THRESH3}={want}")),
        tune: short.then(|| (NEIGH_GC_THRESH3.to_owned(), want.to_string())),
        note: "past it the server host cannot reach new client addresses".to_owned(),
        ktls: None,
    })
}

/// Whether conntrack tracks loopback connections here: it is often loaded with no
/// rule that needs it, and then costs nothing. Probed with one real connection.
fn conntrack_tracks_loopback() -> bool {
    let count = || sysctl::read_u64("net.netfilter.nf_conntrack_count").unwrap_or(0);
    let before = count();
    if before > 0 {
        return true;
    }
    let Ok(listener) = std::net::TcpListener::bind("127.0.0.1:0") else {
        return false;
    };
    let Ok(addr) = listener.local_addr() else {
        return false;
    };
    let _client = std::net::TcpStream::connect(addr);
    count() > before
}

/// The checks as an aligned table.
pub(crate) fn table(checks: &[Check]) -> String {
    let mut s = String::new();
    for c in checks {
        s.push_str(&format!("{:<5} {:<30} {}\n", c.status, c.name, c.current));
        s.push_str(&format!("      {:<30} needed: {}\n", "", c.needed));
        if !c.note.is_empty() {
            s.push_str(&format!("      {:<30} {}\n", "", c.note));
        }
        if let Some(fix) = &c.fix {
            s.push_str(&format!("      {:<30} fix: {fix}\n", ""));
        }
    }
    s
}

/// One line per failed check, each with the fix that applies to it.
pub(crate) fn failure_line(failed: &[&Check]) -> String {
    let mut s = String::from("preflight failed:");
    for c in failed {
        s.push_str(&format!("\n  {}: {}", c.name, c.current));
        if let Some(fix) = &c.fix {
            s.push_str(&format!(" (fix: {fix})"));
        }
    }
    if failed.iter().any(|c| c.tune.is_some()) {
        s.push_str("\n  --tune sets the sysctls above for this run and restores them after");
    }
    s.push_str("\n  --force starts anyway");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_budget_is_both_ends_with_head_room() {
        assert_eq!(bytes_per_connection(), 12_472);
        // (24 GiB − 1 GiB reserve) / 12,472 B.
        assert_eq!(connections_that_fit(24 << 30), 1_980_120);
        assert_eq!(connections_that_fit(0), 0);
    }

    #[test]
    fn a_foreign_server_past_one_process_fd_limit_is_said_before_the_run() {
        let (_, hard) = host::nofile_limits();
        let target = |n| Target {
            connections: Connections::of(n),
            server_ports: 1,
            sources: 1,
            observer: false,
            single_process_server: true,
            churn_per_s: 0.0,
        };
        let check = |n| {
            checks(&target(n))
                .into_iter()
                .find(|c| c.name == "foreign server fd limit")
                .unwrap()
        };
        let over = check(hard + 1000);
        assert_eq!(over.status, Status::Warn);
        assert!(
            over.note.contains(&format!("RLIMIT_NOFILE {hard}")),
            "{}",
            over.note
        );
        assert_eq!(check(100).status, Status::Ok);
        let own = Target {
            single_process_server: false,
            ..target(hard + 1000)
        };
        assert!(
            checks(&own)
                .iter()
                .all(|c| c.name != "foreign server fd limit")
        );
    }

    #[test]
    fn churn_adds_a_minute_of_its_rate_to_the_time_wait_buckets_needed() {
        let tw = |churn_per_s| {
            checks(&Target {
                connections: Connections::of(300_000),
                churn_per_s,
                ..huge()
            })
            .into_iter()
            .find(|c| c.name == TW_BUCKETS)
        };
        // No such sysctl (an old kernel, a container without it): nothing to say.
        let (Some(plain), Some(churned)) = (tw(0.0), tw(5_000.0)) else {
            return;
        };
        assert_eq!(plain.needed, "≥ 300000");
        assert_eq!(churned.needed, "≥ 600000");
        if let Some((_, want)) = churned.tune {
            assert_eq!(want, "660000");
        }
    }

    #[test]
    fn the_ktls_row_informs_and_never_fails() {
        let k = KernelTls::of(Some("mptcp"), crate::ktls::Module::Absent);
        let row = ktls_row(&k);
        assert_eq!(row.status, Status::Ok);
        assert_eq!(row.fix, None);
        assert_eq!(row.tune, None);
        assert_eq!(
            table(std::slice::from_ref(&row)),
            "ok    kTLS                           not available (tcp_available_ulp: mptcp; \
             CONFIG_TLS unset or module absent)\n      {:30} needed: nothing: informational\n      \
             {:30} wss runs its record layer in user space (rustls); nothing to fix\n"
                .replace("{:30}", &" ".repeat(30))
        );
        let v = serde_json::to_value(&row).expect("json");
        assert_eq!(v["name"], "kTLS");
        assert_eq!(v["status"], "Ok");
        assert_eq!(v["ktls"]["available"], false);
        assert_eq!(v["ktls"]["ulps"], serde_json::json!(["mptcp"]));
        // The other rows carry no ktls field at all.
        let other = serde_json::to_value(&checks(&huge())[0]).expect("json");
        assert!(other.get("ktls").is_none(), "{other}");
        assert!(checks(&huge()).iter().all(|c| c.name != "kTLS"));
    }

    /// A run far past what this box holds: every check has something to say.
    fn huge() -> Target {
        Target {
            connections: Connections::of(100_000_000),
            server_ports: 1,
            sources: 1,
            observer: false,
            single_process_server: false,
            churn_per_s: 0.0,
        }
    }

    #[test]
    fn a_client_hosts_conntrack_table_must_hold_its_share_and_tune_fixes_it() {
        // 1+2 hosts of 4,000: a share of 2,000 and 16 control entries.
        let short = conntrack_hosts(Some(500), 2_000, 0.0).unwrap();
        assert_eq!(short.status, Status::Fail);
        assert_eq!(
            short.tune,
            Some((CONNTRACK_MAX.to_owned(), "2217".to_owned()))
        );
        assert_eq!(
            short.fix.as_deref(),
            Some("sysctl -w net.netfilter.nf_conntrack_max=2217")
        );
        assert_eq!(
            conntrack_hosts(Some(262_144), 2_000, 0.0).unwrap().status,
            Status::Ok
        );
        // Churn at 1,000/s keeps 120,000 closed connections' entries beside the share.
        let churn = conntrack_hosts(Some(122_000), 2_000, 1_000.0).unwrap();
        assert_eq!(churn.status, Status::Fail);
        assert!(churn.needed.starts_with("≥ 122016 "), "{}", churn.needed);
        // No conntrack in the kernel: nothing to check; 0 is "no limit".
        assert!(conntrack_hosts(None, 2_000, 0.0).is_none());
        assert_eq!(
            conntrack_hosts(Some(0), 2_000, 0.0).unwrap().status,
            Status::Ok
        );
        // 16 client hosts of 254 addresses: 4,064 peers past the default 1,024.
        let neigh = neighbours_hosts(Some(1_024), 16 * 254).unwrap();
        assert_eq!(neigh.status, Status::Warn);
        assert_eq!(
            neigh.tune,
            Some((NEIGH_GC_THRESH3.to_owned(), "4470".to_owned()))
        );
        assert_eq!(neighbours_hosts(Some(1_024), 2).unwrap().status, Status::Ok);
    }

    #[test]
    fn checks_name_a_fix_for_every_failure() {
        let huge = huge();
        let checks = checks(&huge);
        let failed: Vec<&Check> = checks.iter().filter(|c| c.status == Status::Fail).collect();
        assert!(failed.iter().any(|c| c.name == "memory"));
        assert!(
            failed
                .iter()
                .any(|c| c.name == "net.ipv4.ip_local_port_range")
        );
        for c in failed {
            assert!(c.fix.is_some(), "{} has no fix", c.name);
        }
        assert!(table(&checks).contains("fix: --connections"));
    }

    /// What `--tune` may set is the list a restore record is checked against, and no
    /// other name reaches /proc/sys (issue 30, case 1).
    #[test]
    fn only_the_tune_list_is_ever_written() {
        use std::path::PathBuf;

        use crate::sysctl::tunable_path;
        let huge = huge();
        for (name, _) in checks(&huge).iter().filter_map(|c| c.tune.clone()) {
            assert!(
                tunable_path(&name).is_some(),
                "{name} is tuned but not listed"
            );
        }
        assert_eq!(
            tunable_path("net.core.somaxconn"),
            Some(PathBuf::from("/proc/sys/net/core/somaxconn"))
        );
        for name in [
            "/tmp/proof",
            "/etc/crontab",
            "kernel.core_pattern",
            "fs/../../etc/x",
            "",
        ] {
            assert_eq!(tunable_path(name), None, "{name}");
        }
    }
}

/// `c1m doctor`.
#[derive(clap::Args, Debug, Clone)]
pub struct DoctorArgs {
    /// Connections the run should hold (default: 1,000,000).
    #[arg(value_name = "COUNT", short = 'n', long, default_value_t = Connections::of(1_000_000))]
    pub connections: Connections,
    /// Server ports the run will use.
    #[arg(long, default_value = "8000-8099")]
    pub ports: String,
    /// Client source addresses the run will use, as `c1m run --source` takes them, e.g.
    /// 127.0.0.2-127.0.0.41, or how many (default: as many as `c1m run` picks, each
    /// (source, server port) pair at most 10% of the ephemeral range full).
    /// (`--source`, as for `c1m run` and `c1m client`; `--sources` is its old name.)
    #[arg(long, alias = "sources", value_name = "ADDRS")]
    pub source: Option<String>,
    /// Check as if the kernel observer will not run.
    #[arg(long)]
    pub no_observer: bool,
    /// Apply the sysctls the run needs now and keep them until Ctrl-C, then restore
    /// them (for running `c1m server`/`c1m client` by hand; `c1m run --tune` does this
    /// for its own run).
    #[arg(long)]
    pub tune: bool,
    /// Put back sysctls left changed by a tuned run that was killed, then exit.
    #[arg(long)]
    pub restore: bool,
    /// The checks as JSON.
    #[arg(long)]
    pub json: bool,
    /// Check for a server of yours (`c1m run --server-cmd`/`--target`): one process,
    /// unless it shards itself, so its fd limit caps the connections.
    #[arg(long)]
    pub foreign: bool,
}

/// Runs `c1m doctor`; exit code 1 when a check fails.
pub(crate) fn main(args: DoctorArgs) -> anyhow::Result<i32> {
    if args.restore {
        return restore();
    }
    for l in super::run::journal::leftover_lines() {
        println!("{l}");
    }
    let server_ports = crate::args::parse_ports(&args.ports)?.len() as u64;
    let target = Target {
        connections: args.connections,
        server_ports,
        sources: match args.source.as_deref().map(str::trim) {
            // `--sources N`, the old flag, counted the addresses.
            Some(given) => match given.parse::<u64>() {
                Ok(count) => count,
                Err(_) => crate::args::parse_addrs(&[given.to_owned()])
                    .map_err(|e| anyhow::anyhow!("--source: {e:#}: give addresses such as 127.0.0.2-127.0.0.41, or a count"))?
                    .len() as u64,
            },
            None => {
                let ephemeral = crate::workload::limits::ephemeral_ports().unwrap_or(28_232);
                super::run::sources::choose(args.connections.get(), server_ports, ephemeral)
                    .count
            }
        },
        observer: !args.no_observer,
        single_process_server: args.foreign,
        churn_per_s: 0.0,
    };
    let mut checks = checks(&target);
    let tuning = if args.tune {
        Some(Tuning::apply(&checks)?)
    } else {
        None
    };
    if tuning.is_some() {
        checks = self::checks(&target);
    }
    checks.push(ktls_row(&KernelTls::read()));
    if args.json {
        println!("{}", serde_json::to_string_pretty(&checks)?);
    } else {
        print!("{}", table(&checks));
    }
    let failed = checks.iter().any(|c| c.status == Status::Fail);
    if let Some(t) = tuning {
        for c in &t.changed {
            println!("tuned {}: {} -> {}", c.name, c.old, c.new);
        }
        for c in &t.held {
            println!(
                "held {} at {}: another tuner set it; the last one restores {}",
                c.name, c.new, c.old
            );
        }
        if t.changed.is_empty() && t.held.is_empty() {
            println!("nothing to tune");
            return Ok(i32::from(failed));
        }
        println!("holding the tuned values; Ctrl-C restores them");
        let stop = crate::util::shutdown_flag()?;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        drop(t);
        println!("restored");
    }
    Ok(i32::from(failed))
}

/// `c1m doctor --restore`: ends what killed labs left and puts back their sysctls,
/// one line per thing it ended, removed, restored or dropped ("nothing to restore"
/// when there was nothing). Exit 1 when something is left.
fn restore() -> anyhow::Result<i32> {
    use super::run::journal::{self, Leftover};
    let found = journal::leftovers()?;
    let mut done = 0usize;
    let mut left = false;
    for l in &found.ignored {
        eprintln!("c1m doctor: {l}");
    }
    // A killed `--hosts` lab's hosts first (they get their grace to conclude), so its
    // server host's own journal is swept with it, not left for the next restore.
    let (hosts, mut others): (Vec<Leftover>, Vec<Leftover>) =
        found.leftovers.into_iter().partition(Leftover::is_hosts);
    for h in &hosts {
        println!("{}", h.describe());
    }
    for h in journal::end_hosts(hosts, &mut others) {
        for c in &h.concluded {
            println!(
                "{} pid {} concluded on its own (SIGTERM when its lab died)",
                c.role.name(),
                c.proc.pid
            );
        }
        let (n, failed) = say_ended(&h.ended, &h.folder.display().to_string());
        done += n;
        left |= failed;
        if let Some((pid, ended)) = &h.host_lab {
            let (n, failed) = say_ended(ended, &format!("its host lab pid {pid}"));
            done += n;
            left |= failed;
        }
    }
    for leftover in others {
        println!("{}", leftover.describe());
        let folder = leftover.journal.run_folder.display().to_string();
        let (n, failed) = say_ended(&leftover.end(), &folder);
        done += n;
        left |= failed;
    }
    let swept = tuning::restore_orphans(Sweep::Doctor)?;
    for l in &swept.ignored {
        eprintln!("c1m doctor: {l}");
    }
    for (c, ns) in &swept.restored {
        let there = ns
            .map(|n| format!(" in network namespace net:[{n}]"))
            .unwrap_or_default();
        println!("restored {} = {} (was {}){there}", c.name, c.old, c.new);
    }
    for (c, ns) in &swept.gone {
        println!(
            "dropped {} = {} (was {}): its network namespace net:[{ns}] is gone, and the value with it",
            c.name, c.old, c.new
        );
    }
    for p in &swept.removed {
        println!("removed {}", p.display());
    }
    for l in &swept.left {
        eprintln!("c1m doctor: {l}");
    }
    done += swept.restored.len() + swept.gone.len() + swept.removed.len();
    left |= !swept.left.is_empty();
    if done == 0 && !left {
        println!("nothing to restore");
    }
    Ok(i32::from(left))
}

/// Prints what ending a leftover did, a line each (`of`: whose processes they were);
/// returns how many things it ended or removed, and whether something was left.
fn say_ended(ended: &super::run::journal::Ended, of: &str) -> (usize, bool) {
    for c in &ended.ended {
        println!("ended {} pid {} (of {of})", c.role.name(), c.proc.pid);
    }
    for (c, why) in &ended.spared {
        println!("left {} pid {} running: {why}", c.role.name(), c.proc.pid);
    }
    for d in &ended.deleted {
        println!("removed {d}");
    }
    for p in &ended.removed {
        println!("removed {}", p.display());
    }
    for f in &ended.failed {
        eprintln!("c1m doctor: {f}");
    }
    (
        ended.ended.len() + ended.deleted.len() + ended.removed.len(),
        !ended.failed.is_empty(),
    )
}
