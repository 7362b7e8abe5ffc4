//! RSS and CPU time of processes from /proc, for the memory-per-connection and CPU figures.

use std::fs;

/// VmRSS of `pid` in bytes (resident anonymous + file + shmem pages), or None if it is gone.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
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
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some((ut / hz, st / hz))
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
    }
}
