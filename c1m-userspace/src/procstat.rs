//! RSS and CPU time of processes from /proc, for the memory-per-connection and CPU figures.

use std::fs;

/// VmRSS of `pid` in bytes (resident anonymous + file + shmem pages), or None if it is gone.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Threads of `pid` (the `Threads:` line of its status), or None if it is gone.
pub fn threads(pid: u32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("Threads:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The real uid of `pid` (first of the `Uid:` line of its status), or None if it is
/// gone: with the start time it tells a journal's child from another user's process.
pub fn uid(pid: u32) -> Option<u32> {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Open file descriptors of `pid` (entries of /proc/PID/fd; needs the same user or
/// root), or None if they cannot be read.
pub fn open_fds(pid: u32) -> Option<u64> {
    Some(fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
}

/// Seconds per clock tick, the unit /proc counts CPU time in (`sysconf(_SC_CLK_TCK)`,
/// 100 on common kernels: 10 ms).
pub fn clock_tick_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    1.0 / hz
}

/// (user, system) CPU seconds of `pid` (all its threads), or None if it is gone.
pub fn cpu_seconds(pid: u32) -> Option<(f64, f64)> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces: fields start after ')'.
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3 of stat(5), so utime (14) and stime (15) are at 11 and 12.
    let ut: f64 = f.get(11)?.parse().ok()?;
    let st: f64 = f.get(12)?.parse().ok()?;
    let tick = clock_tick_s();
    Some((ut * tick, st * tick))
}

/// Fields of /proc/PID/stat after the command name: `state` is index 0 (field 3 of
/// stat(5)), so field N is index N - 3.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// When `pid` started, in clock ticks since boot (field 22): with the pid it names one
/// process for good, so a pid reused by another process is never mistaken for it.
/// None if it is gone or a zombie (exited, waiting to be reaped).
pub fn start_time(pid: u32) -> Option<u64> {
    let f = stat_fields(pid)?;
    if f.first().map(String::as_str) == Some("Z") {
        return None;
    }
    f.get(19)?.parse().ok()
}

/// Whether the process `pid` that started at `start` still runs.
pub fn alive(pid: u32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

/// The parent of `pid`.
pub fn parent(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// The command line of `pid`, arguments joined by spaces.
pub fn command_line(pid: u32) -> Option<String> {
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
    fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
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
        assert!(rss_bytes(me).unwrap() > 0);
        let (u, s) = cpu_seconds(me).unwrap();
        assert!(u >= 0.0 && s >= 0.0);
        assert_eq!(rss_bytes(u32::MAX), None);
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
