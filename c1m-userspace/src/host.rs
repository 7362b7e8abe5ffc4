//! Facts about this box and this process that any layer may read: memory, the fd
//! limit, the process's own CPU and RSS. Below everything (layer 0), so the workload,
//! the lab and a client host read them from one place.

/// MemAvailable of /proc/meminfo, bytes (0 when unreadable).
pub(crate) fn mem_available() -> u64 {
    meminfo().and_then(|m| m.mem_available).unwrap_or(0)
}

/// MemTotal of /proc/meminfo, bytes (0 when unreadable).
pub(crate) fn mem_total() -> u64 {
    meminfo().map_or(0, |m| m.mem_total)
}

/// procfs gives the values in bytes (the file's kB times 1024).
fn meminfo() -> Option<procfs::Meminfo> {
    use procfs::Current;
    procfs::Meminfo::current().ok()
}

/// RLIMIT_NOFILE as (soft, hard); unlimited reads as `u64::MAX`.
pub(crate) fn nofile_limits() -> (u64, u64) {
    let rl = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    (
        rl.current.unwrap_or(u64::MAX),
        rl.maximum.unwrap_or(u64::MAX),
    )
}

/// User and system CPU seconds of this process (the observer and the orchestration).
pub(crate) fn own_cpu() -> (f64, f64) {
    crate::procstat::cpu_seconds(std::process::id()).unwrap_or((0.0, 0.0))
}

/// Resident anonymous memory of this process, bytes (see `procstat::anon_rss_bytes`).
pub(crate) fn own_rss() -> u64 {
    crate::procstat::anon_rss_bytes(std::process::id()).unwrap_or(0)
}
