//! The observer's own CPU while a lab run goes on, for `bench lab-observer`: the lab
//! process's observer and walker threads (their utime + stime), and the run time of its
//! BPF hook programs, which the kernel charges to whatever thread was running when a hook
//! fired (a worker's connect, a softirq) and so no process's figures show. The iterator
//! programs run inside the walker's and observer's `read()`s, so their time is already in
//! those threads' and is shown apart, not added. The programs' time needs the kernel's BPF
//! statistics (~2 clock reads per program run): [`BpfStats::on`] holds them on through
//! `BPF_ENABLE_STATS`, which the kernel undoes when its fd closes, also when the bench
//! is killed with -9 (a write to `kernel.bpf_stats_enabled` stayed 1 after a kill).

use std::{
    collections::HashMap,
    fs,
    os::fd::{FromRawFd, OwnedFd},
    path::Path,
};

/// Linux's USER_HZ on every architecture c1m builds for: /proc's tick unit.
const TICKS_PER_S: f64 = 100.0;

/// The kernel's BPF run-time statistics, on while this lives.
pub(crate) struct BpfStats {
    _held: Option<OwnedFd>,
}

impl BpfStats {
    pub(crate) fn on() -> BpfStats {
        match bpf::enable_stats() {
            Ok(fd) => BpfStats { _held: Some(fd) },
            Err(e) => {
                println!(
                    "   (BPF_ENABLE_STATS failed: {e}: the programs' run time is not measured)"
                );
                BpfStats { _held: None }
            }
        }
    }
}

/// The two bpf(2) commands the bench needs; xtask cannot use the c1m crate's.
mod bpf {
    use std::{io, os::fd::OwnedFd};

    use super::FromRawFd;

    const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
    const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
    const BPF_ENABLE_STATS: libc::c_long = 32;
    const BPF_STATS_RUN_TIME: u32 = 0;
    /// `struct bpf_prog_info`'s `name` (uapi: after type, id, tag, two lengths, two
    /// pointers, load_time, uid, nr_map_ids, map_ids).
    const NAME_AT: usize = 64;
    const NAME_LEN: usize = 16;

    /// bpf(2) on a zeroed, 8-byte-aligned attribute block whose leading u32s are `head`.
    fn call(cmd: libc::c_long, head: &[u32]) -> io::Result<i64> {
        let mut attr = [0u64; 16];
        for (i, v) in head.iter().enumerate() {
            let word = &mut attr[i / 2];
            *word |= u64::from(*v) << (32 * (i % 2));
        }
        call_attr(cmd, &mut attr)
    }

    fn call_attr(cmd: libc::c_long, attr: &mut [u64; 16]) -> io::Result<i64> {
        // SAFETY: the kernel reads and writes at most the block's 128 bytes.
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                cmd,
                attr.as_mut_ptr(),
                std::mem::size_of_val(attr),
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r)
    }

    fn owned(fd: i64) -> OwnedFd {
        // SAFETY: a file descriptor the kernel just returned, owned by nobody else.
        unsafe { OwnedFd::from_raw_fd(fd as i32) }
    }

    pub(super) fn enable_stats() -> io::Result<OwnedFd> {
        call(BPF_ENABLE_STATS, &[BPF_STATS_RUN_TIME]).map(owned)
    }

    /// A loaded program's name, by its id.
    pub(super) fn prog_name(id: u32) -> io::Result<String> {
        use std::os::fd::AsRawFd;
        let prog = owned(call(BPF_PROG_GET_FD_BY_ID, &[id])?);
        let mut info = [0u8; 256];
        let mut attr = [0u64; 16];
        attr[0] = prog.as_raw_fd() as u32 as u64 | ((info.len() as u64) << 32);
        attr[1] = info.as_mut_ptr() as u64;
        call_attr(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
        let name = &info[NAME_AT..NAME_AT + NAME_LEN];
        let end = name.iter().position(|b| *b == 0).unwrap_or(NAME_LEN);
        Ok(String::from_utf8_lossy(&name[..end]).into_owned())
    }
}

/// The observer's CPU over one lab run, seconds; and the box's busy CPU over the same time.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ObserverCpu {
    /// The `c1m-observer` thread: snapshots, counters, listener walks.
    pub observer_s: f64,
    /// The `c1m-walker` thread: socket walks.
    pub walker_s: f64,
    /// The lab's BPF hook programs, summed over programs.
    pub programs_s: f64,
    pub program_runs: u64,
    /// Its iterator programs: inside the walker's and observer's time, not added again.
    pub iterators_s: f64,
    /// Every CPU's busy time from the first sample to the last, but for work at a
    /// positive nice (another build beside the bench is not the lab's).
    pub box_busy_s: f64,
}

impl ObserverCpu {
    /// What grew from `earlier` to `self`.
    fn since(&self, earlier: &ObserverCpu) -> ObserverCpu {
        ObserverCpu {
            observer_s: self.observer_s - earlier.observer_s,
            walker_s: self.walker_s - earlier.walker_s,
            programs_s: self.programs_s - earlier.programs_s,
            program_runs: self.program_runs.saturating_sub(earlier.program_runs),
            iterators_s: self.iterators_s - earlier.iterators_s,
            box_busy_s: self.box_busy_s - earlier.box_busy_s,
        }
    }

    /// The observer's share of the box's busy CPU.
    pub(crate) fn share(&self) -> f64 {
        (self.observer_s + self.walker_s + self.programs_s) / self.box_busy_s.max(1e-9)
    }
}

/// Samples a running lab (`pid`). Totals only grow while the process lives, so each
/// sample keeps the largest seen: the last one before the lab exits and its threads
/// and programs go.
pub(crate) struct Sampler {
    pid: u32,
    first_busy: Option<u64>,
    /// Program id: an iterator (its name starts `iter_`)?
    iterators: HashMap<u32, bool>,
    /// The totals so far (the largest seen), and each sample's (unix ms, totals).
    pub(crate) cpu: ObserverCpu,
    samples: Vec<(u64, ObserverCpu)>,
}

impl Sampler {
    pub(crate) fn new(pid: u32) -> Sampler {
        Sampler {
            pid,
            first_busy: busy_unniced_jiffies(),
            iterators: HashMap::new(),
            samples: Vec::new(),
            cpu: ObserverCpu::default(),
        }
    }

    pub(crate) fn sample(&mut self) {
        let proc = Path::new("/proc").join(self.pid.to_string());
        let (mut observer, mut walker) = (0.0, 0.0);
        for task in fs::read_dir(proc.join("task"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let comm = fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            let Some(s) = thread_cpu_s(&task.path().join("stat")) else {
                continue;
            };
            match comm.trim() {
                "c1m-observer" => observer += s,
                "c1m-walker" => walker += s,
                _ => {}
            }
        }
        let (mut ns, mut runs, mut iter_ns) = (0u64, 0u64, 0u64);
        for fd in fs::read_dir(proc.join("fdinfo"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let text = fs::read_to_string(fd.path()).unwrap_or_default();
            if !text.contains("prog_type:") {
                continue;
            }
            let id = field(&text, "prog_id") as u32;
            let iterator = *self
                .iterators
                .entry(id)
                .or_insert_with(|| bpf::prog_name(id).is_ok_and(|n| n.starts_with("iter_")));
            if iterator {
                iter_ns += field(&text, "run_time_ns");
            } else {
                ns += field(&text, "run_time_ns");
                runs += field(&text, "run_cnt");
            }
        }
        let c = &mut self.cpu;
        c.observer_s = c.observer_s.max(observer);
        c.walker_s = c.walker_s.max(walker);
        c.programs_s = c.programs_s.max(ns as f64 / 1e9);
        c.program_runs = c.program_runs.max(runs);
        c.iterators_s = c.iterators_s.max(iter_ns as f64 / 1e9);
        if let (Some(first), Some(busy)) = (self.first_busy, busy_unniced_jiffies()) {
            c.box_busy_s = busy.saturating_sub(first) as f64 / TICKS_PER_S;
        }
        self.samples.push((unix_ms_now(), *c));
    }

    /// The observer's CPU from the first sample at or after `from_ms` to the last at
    /// or before `to_ms` (a phase's window, from its `started_unix_ms`/`ended_unix_ms`).
    pub(crate) fn between(&self, from_ms: u64, to_ms: u64) -> Option<ObserverCpu> {
        let first = self.samples.iter().find(|(t, _)| *t >= from_ms)?;
        let last = self.samples.iter().rev().find(|(t, _)| *t <= to_ms)?;
        (last.0 > first.0).then(|| last.1.since(&first.1))
    }
}

fn unix_ms_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The box's busy jiffies less those of positive-nice work.
fn busy_unniced_jiffies() -> Option<u64> {
    crate::bench::cpu_jiffies().map(|j| j.busy - j.nice)
}

/// utime + stime of one thread, seconds.
fn thread_cpu_s(stat: &Path) -> Option<f64> {
    let text = fs::read_to_string(stat).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, utime 14 and stime 15 (1-based over the line).
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / TICKS_PER_S)
}

fn field(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().parse().ok()).flatten()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SYSCTL: &str = "/proc/sys/kernel/bpf_stats_enabled";

    fn sysctl() -> Option<String> {
        fs::read_to_string(SYSCTL).ok().map(|s| s.trim().to_owned())
    }

    /// The bench holds the statistics by an fd and writes no sysctl: nothing is left to
    /// restore after a kill -9 (the kernel drops an fd's hold when it closes; the sysctl
    /// shows only what was written to it, so it stays as found).
    #[test]
    fn bpf_stats_are_held_by_an_fd_and_the_sysctl_is_left_as_found() {
        let before = sysctl();
        let Ok(fd) = bpf::enable_stats() else {
            return; // not root: nothing to switch, nothing to leave on
        };
        assert_eq!(sysctl(), before);
        drop(fd);
        assert_eq!(sysctl(), before);
    }
}
