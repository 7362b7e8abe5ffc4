//! RSS and CPU time of processes from /proc, for the memory-per-connection and CPU figures.

use std::fs;

use procfs::{
    FromRead,
    process::{Process, Stat, StatM},
};

fn process(pid: u32) -> Option<Process> {
    Process::new(i32::try_from(pid).ok()?).ok()
}

/// Resident anonymous memory of `pid` in bytes (status's RssAnon: statm's resident less
/// its shared file and shmem pages), or None if it is gone. What a process allocated,
/// not the code and files it mapped: the first WebSocket handshakes fault in ~512 kB of
/// the executable's code in each worker, which VmRSS counted as 37 B a connection on a
/// tokio worker holding 14,000 (smaps, 2026-12-05); and code is shared, not per process.
/// From `statm`: a supervisor reads it for every worker on every stats answer, and
/// `status` (fifty formatted lines, after procfs's open of /proc/PID) was 12% of a client
/// supervisor's CPU in answering.
pub(crate) fn anon_rss_bytes(pid: u32) -> Option<u64> {
    let m = StatM::from_file(format!("/proc/{pid}/statm")).ok()?;
    Some(m.resident.saturating_sub(m.shared) * rustix::param::page_size() as u64)
}

/// Threads of `pid` (the `Threads:` line of its status), or None if it is gone.
pub(crate) fn threads(pid: u32) -> Option<u64> {
    Some(process(pid)?.status().ok()?.threads)
}

/// The real uid of `pid` (first of the `Uid:` line of its status), or None if it is
/// gone: with the start time it tells a journal's child from another user's process.
pub(crate) fn uid(pid: u32) -> Option<u32> {
    Some(process(pid)?.status().ok()?.ruid)
}

/// Open file descriptors of `pid` (entries of /proc/PID/fd; needs the same user or
/// root), or None if they cannot be read.
pub(crate) fn open_fds(pid: u32) -> Option<u64> {
    Some(process(pid)?.fd_count().ok()? as u64)
}

/// Seconds per clock tick, the unit /proc counts CPU time in (`sysconf(_SC_CLK_TCK)`,
/// 100 on common kernels: 10 ms; rustix reads it from the aux vector as libc does).
pub(crate) fn clock_tick_s() -> f64 {
    let hz = rustix::param::clock_ticks_per_second().max(1) as f64;
    1.0 / hz
}

/// (user, system) CPU seconds of `pid` (all its threads), or None if it is gone.
pub(crate) fn cpu_seconds(pid: u32) -> Option<(f64, f64)> {
    // The file itself, as for `anon_rss_bytes`: read per worker per stats answer.
    let stat = Stat::from_file(format!("/proc/{pid}/stat")).ok()?;
    let tick = clock_tick_s();
    Some((stat.utime as f64 * tick, stat.stime as f64 * tick))
}

/// Seconds `pid`'s threads spent runnable but waiting for a CPU (`schedstat`'s second
/// field, summed over `/proc/PID/task`), or None if it is gone or schedstats are off.
pub(crate) fn run_wait_s(pid: u32) -> Option<f64> {
    let tasks = fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut ns: u64 = 0;
    for task in tasks.flatten() {
        let Ok(text) = fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        ns = ns.saturating_add(text.split_whitespace().nth(1)?.parse().ok()?);
    }
    Some(ns as f64 / 1e9)
}

/// When `pid` started, in clock ticks since boot (field 22): with the pid it names one
/// process for good, so a pid reused by another process is never mistaken for it.
/// None if it is gone or a zombie (exited, waiting to be reaped).
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = process(pid)?.stat().ok()?;
    (stat.state != 'Z').then_some(stat.starttime)
}

/// Whether the process `pid` that started at `start` still runs.
pub fn alive(pid: u32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

/// The parent of `pid`.
pub(crate) fn parent(pid: u32) -> Option<u32> {
    u32::try_from(process(pid)?.stat().ok()?.ppid).ok()
}

/// The command line of `pid`, arguments joined by spaces. By hand: procfs 0.18's
/// `cmdline()` reads the file as UTF-8 and fails on any other argument (a path need
/// not be UTF-8); this one is lossy.
pub(crate) fn command_line(pid: u32) -> Option<String> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    Some(args.join(" "))
}

/// Every process id now.
pub fn all_pids() -> Vec<u32> {
    procfs::process::all_processes()
        .map(|all| {
            all.flatten()
                .filter_map(|p| u32::try_from(p.pid()).ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn reads_own_process() {
        let me = std::process::id();
        assert!(anon_rss_bytes(me).unwrap() > 0);
        // statm's resident less shared pages are status's RssAnon (the pages this test
        // touches between the two reads aside).
        let anon = process(me).unwrap().status().unwrap().rssanon.unwrap() * 1024;
        assert!(
            anon_rss_bytes(me).unwrap().abs_diff(anon) < 1 << 20,
            "{anon}"
        );
        let (u, s) = cpu_seconds(me).unwrap();
        assert!(u >= 0.0 && s >= 0.0);
        assert_eq!(anon_rss_bytes(u32::MAX), None);
        let start = start_time(me).unwrap();
        assert!(alive(me, start));
        assert!(!alive(me, start + 1));
        assert_eq!(uid(me), Some(rustix::process::getuid().as_raw()));
        assert_eq!(uid(u32::MAX), None);
        assert_eq!(parent(me), Some(std::os::unix::process::parent_id()));
        assert!(command_line(me).unwrap().len() > 1);
        assert!(all_pids().contains(&me));
    }
}
