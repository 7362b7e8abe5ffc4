//! What a run records about the box it runs on: the machine (kernel, memory, limits,
//! sysctls). Apart from the run so the client hosts of `c1m client --shard` record the
//! same.

use crate::{host, model::Machine};

/// The sysctls every run records (`machine.sysctls`); the per-namespace ones among them
/// are carried into a run's fresh namespace.
pub(super) const RECORDED_SYSCTLS: [&str; 8] = [
    "fs.file-max",
    "fs.nr_open",
    "net.core.somaxconn",
    "net.ipv4.tcp_max_syn_backlog",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_abort_on_overflow",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.tcp_max_tw_buckets",
];

pub(crate) fn machine() -> Machine {
    let (soft, hard) = host::nofile_limits();
    let mut sysctls = std::collections::BTreeMap::new();
    for name in RECORDED_SYSCTLS {
        if let Some(v) = crate::sysctl::read(name) {
            sysctls.insert(name.to_owned(), v);
        }
    }
    Machine {
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap_or_default()
            .trim()
            .to_owned(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_owned(),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1),
        mem_total_bytes: host::mem_total(),
        mem_available_bytes: host::mem_available(),
        nofile_soft: soft,
        nofile_hard: hard,
        sysctls,
    }
}
