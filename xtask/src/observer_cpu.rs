//! The observer's own CPU while a lab run goes on, for `bench lab-observer`: the lab
//! process's observer and walker threads (their utime + stime), and the run time of its
//! BPF programs, which the kernel charges to whatever thread was running when a hook
//! fired (a worker's connect, a softirq) and so no process's figures show. The programs'
//! time needs the kernel's BPF statistics (`kernel.bpf_stats_enabled`, ~2 clock reads per
//! program run): [`BpfStats::on`] switches them on for the bench and puts the old value
//! back on drop.

use std::{fs, path::Path};

use crate::bench::busy_jiffies;

const BPF_STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// Linux's USER_HZ on every architecture c1m builds for: /proc's tick unit.
const TICKS_PER_S: f64 = 100.0;

/// `kernel.bpf_stats_enabled` as found, restored on drop.
pub(crate) struct BpfStats(Option<String>);

impl BpfStats {
    pub(crate) fn on() -> BpfStats {
        let before = fs::read_to_string(BPF_STATS).ok();
        if before.as_deref().map(str::trim) != Some("1") && fs::write(BPF_STATS, "1").is_err() {
            println!(
                "   (could not switch on {BPF_STATS}: the programs' run time is not measured)"
            );
            return BpfStats(None);
        }
        BpfStats(before)
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        if let Some(v) = &self.0 {
            let _ = fs::write(BPF_STATS, v.trim());
        }
    }
}

/// The observer's CPU over one lab run, seconds; and the box's busy CPU over the same time.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ObserverCpu {
    /// The `c1m-observer` thread: snapshots, counters, listener walks.
    pub observer_s: f64,
    /// The `c1m-walker` thread: socket walks.
    pub walker_s: f64,
    /// The lab's BPF programs (hooks and iterators), summed over programs.
    pub programs_s: f64,
    pub program_runs: u64,
    /// Every CPU's busy time from the first sample to the last.
    pub box_busy_s: f64,
}

impl ObserverCpu {
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
    pub(crate) cpu: ObserverCpu,
}

impl Sampler {
    pub(crate) fn new(pid: u32) -> Sampler {
        Sampler {
            pid,
            first_busy: busy_jiffies().map(|(b, _)| b),
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
        let (mut ns, mut runs) = (0u64, 0u64);
        for fd in fs::read_dir(proc.join("fdinfo"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let text = fs::read_to_string(fd.path()).unwrap_or_default();
            if text.contains("prog_type:") {
                ns += field(&text, "run_time_ns");
                runs += field(&text, "run_cnt");
            }
        }
        let c = &mut self.cpu;
        c.observer_s = c.observer_s.max(observer);
        c.walker_s = c.walker_s.max(walker);
        c.programs_s = c.programs_s.max(ns as f64 / 1e9);
        c.program_runs = c.program_runs.max(runs);
        if let (Some(first), Some((busy, _))) = (self.first_busy, busy_jiffies()) {
            c.box_busy_s = busy.saturating_sub(first) as f64 / TICKS_PER_S;
        }
    }
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
