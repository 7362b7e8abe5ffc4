//! Scheduling weight. The threads that watch a load (observer, walker, lab, the
//! workload's supervisors) run above it; the threads and processes that make the load
//! (shards, workers, the lab's children) run at the default weight.

/// The nice value of a watching thread: ~9× a default thread's share of a core.
pub(crate) const WATCHER_NICE: i32 = -10;

/// Raises the calling thread to [`WATCHER_NICE`]. The load can be ~120 busy processes on
/// two cores, where a default-weight thread gets under 2% of a core: a walk of 600k
/// sockets (~0.6 s of CPU) took 40 s, and a client supervisor read its 50 workers'
/// reports up to 43 s late at 1M. The watchers' CPU stays the same; they just finish
/// while their figures are still current. Without the privilege, nothing changes.
pub(crate) fn watcher() {
    set_this_thread(WATCHER_NICE);
}

/// Puts the calling thread back to the default weight. Threads and processes inherit
/// the nice value of the thread that made them, so a shard started by a supervisor, or a
/// child forked by the lab, calls this first. Async-signal-safe (for `pre_exec`).
pub(crate) fn load() {
    set_this_thread(0);
}

fn set_this_thread(nice: i32) {
    // With PRIO_PROCESS, a thread id names that thread alone on Linux.
    let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), nice);
}
