//! What the process may do: effective capabilities from /proc/self/status.

const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

pub(crate) fn effective_caps() -> u64 {
    procfs::process::Process::myself()
        .and_then(|me| me.status())
        .map_or(0, |s| s.capeff)
}

fn has(caps: u64, cap: u32) -> bool {
    caps & (1 << cap) != 0
}

/// Ok when eBPF programs (tracepoints, iterators) can be loaded; otherwise the names
/// of the missing capabilities.
pub(crate) fn check_bpf() -> Result<(), String> {
    let caps = effective_caps();
    if has(caps, CAP_SYS_ADMIN) {
        return Ok(());
    }
    let missing: Vec<&str> = [
        (CAP_BPF, "CAP_BPF"),
        (CAP_PERFMON, "CAP_PERFMON"),
        (CAP_NET_ADMIN, "CAP_NET_ADMIN"),
    ]
    .into_iter()
    .filter(|(c, _)| !has(caps, *c))
    .map(|(_, n)| n)
    .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join(", "))
    }
}

/// Whether the effective uid is root.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}
