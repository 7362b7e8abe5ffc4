//! The sysctls c1m reads and the few `--tune` may write. Root writes back what a restore
//! record names, so the names a record may hold are this file's list and nothing else
//! (issue 30, case 1); a name is never joined to /proc/sys unless it is on it.

use std::path::{Path, PathBuf};

pub(crate) const FILE_MAX: &str = "fs.file-max";
pub(crate) const PORT_RANGE: &str = "net.ipv4.ip_local_port_range";
pub(crate) const SOMAXCONN: &str = "net.core.somaxconn";
pub(crate) const SYN_BACKLOG: &str = "net.ipv4.tcp_max_syn_backlog";
pub(crate) const TW_BUCKETS: &str = "net.ipv4.tcp_max_tw_buckets";
pub(crate) const CONNTRACK_MAX: &str = "net.netfilter.nf_conntrack_max";
/// The neighbour table's hard limit: the box's only (no child namespace has it on 6.18).
pub(crate) const NEIGH_GC_THRESH3: &str = "net.ipv4.neigh.default.gc_thresh3";

/// Every sysctl `--tune` may set: the only names a restore record may hold, so a
/// record never makes root write anything else (issue 30, case 1).
pub(crate) const TUNABLE: &[&str] = &[
    FILE_MAX,
    PORT_RANGE,
    SOMAXCONN,
    SYN_BACKLOG,
    TW_BUCKETS,
    CONNTRACK_MAX,
    NEIGH_GC_THRESH3,
];

/// A sysctl's value with its whitespace made single spaces (the port range is "a\tb").
pub(crate) fn read(name: &str) -> Option<String> {
    std::fs::read_to_string(path(name))
        .ok()
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// A numeric sysctl.
pub(crate) fn read_u64(name: &str) -> Option<u64> {
    read(name)?.parse().ok()
}

fn path(name: &str) -> PathBuf {
    Path::new("/proc/sys").join(name.replace('.', "/"))
}

/// The /proc/sys file of a sysctl `--tune` sets; None for any other name.
pub(crate) fn tunable_path(name: &str) -> Option<PathBuf> {
    TUNABLE.contains(&name).then(|| path(name))
}
