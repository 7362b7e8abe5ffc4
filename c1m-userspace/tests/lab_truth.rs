//! The lab's figures between phase ends: fresh while the observer is starved of CPU,
//! marked stale when they are not, and rates on the sources' own clocks. Root: each test
//! runs `c1m run` in a private network namespace; without root it says SKIP loudly.

use std::{
    path::{Path, PathBuf},
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use c1m::model::{RunRecord, Source};
use lab_util::{c1m_run, fresh_dir, root_or_skip, run_folder};

use crate::lab_util;

const RATE: f64 = 2_000.0;

/// A cgroup v1 (or v2) CPU limit for one process, removed when dropped.
struct CpuLimit {
    dir: PathBuf,
}

impl CpuLimit {
    /// Puts `pid` (every thread) under `percent` of one core.
    fn apply(pid: u32, percent: u32) -> CpuLimit {
        let name = format!("c1m-test-starve-{}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        let v2 = Path::new("/sys/fs/cgroup");
        let quota = percent * 1000; // of a 100 ms period
        let dir = if v1.join("cpu.cfs_quota_us").exists() {
            let dir = v1.join(&name);
            std::fs::create_dir_all(&dir).expect("cgroup v1 cpu dir");
            std::fs::write(dir.join("cpu.cfs_period_us"), "100000").expect("period");
            std::fs::write(dir.join("cpu.cfs_quota_us"), quota.to_string()).expect("quota");
            dir
        } else {
            let dir = v2.join(&name);
            std::fs::create_dir_all(&dir).expect("cgroup v2 dir");
            std::fs::write(dir.join("cpu.max"), format!("{quota} 100000")).expect("cpu.max");
            dir
        };
        std::fs::write(dir.join("cgroup.procs"), pid.to_string()).expect("move the lab");
        CpuLimit { dir }
    }
}

impl Drop for CpuLimit {
    fn drop(&mut self) {
        // Empty once the lab has exited; a few tries while the kernel lets go of it.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let until = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("c1m run did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn run_record(out: &Path) -> RunRecord {
    let dir = run_folder(out);
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).expect("summary"))
        .expect("a RunRecord")
}

#[test]
fn a_starved_observer_keeps_the_kernel_column_moving_and_says_when_it_is_stale() {
    if !root_or_skip("a_starved_observer_keeps_the_kernel_column_moving_and_says_when_it_is_stale")
    {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let out = fresh_dir("truth");
    let mut lab = c1m_run(
        &out,
        &[
            "-n",
            "24000",
            "--rate",
            "2000",
            "--idle",
            "1s",
            "--ports",
            "23000-23003",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("c1m run");
    // Once server and client are up (both are children of the lab, started before
    // the ramp), the lab's process alone (observer, walker, ticks) gets 5% of a core.
    let until = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_dir(&out)
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .is_some_and(|e| e.path().join("client.log").exists())
    {
        assert!(Instant::now() < until, "the lab never started its client");
        std::thread::sleep(Duration::from_millis(50));
    }
    let limit = CpuLimit::apply(lab.id(), 5);
    let status = wait_exit(&mut lab, Duration::from_secs(180));
    drop(limit);
    assert!(status.success(), "c1m run: {status}");
    let run = run_record(&out);
    let setup: Vec<_> = run.samples.iter().filter(|s| s.phase == "setup").collect();
    assert!(setup.len() >= 8, "{} setup rows", setup.len());

    // Every row says how old its kernel figures are. How many are fresh at 5% of a core
    // depends on the box's speed that hour (12 of 12 here, 3 of 11 on a slower CI run):
    // printed, not asserted (a speed belongs in the bench). What must hold: every row
    // carries its age, and the column is read at all while the lab starves.
    assert!(setup.iter().all(|s| s.kernel_age_s.is_some()));
    let fresh: Vec<_> = setup.iter().filter(|s| s.fresh(Source::Kernel)).collect();
    eprintln!(
        "setup rows {}, kernel fresh in {}, oldest kernel figure {:.2} s",
        setup.len(),
        fresh.len(),
        setup
            .iter()
            .filter_map(|s| s.kernel_age_s)
            .fold(0.0, f64::max)
    );
    assert!(
        fresh.len() >= 2,
        "kernel figures fresh in only {} of {} rows",
        fresh.len(),
        setup.len()
    );
    // Between fresh rows the kernel's ESTABLISHED moves with the ramp: it never freezes
    // while the app's count goes on.
    for w in fresh.windows(2) {
        let app = w[1].client_connected.unwrap_or(0) - w[0].client_connected.unwrap_or(0);
        let kernel = w[1].kernel_client_established.unwrap_or(0)
            - w[0].kernel_client_established.unwrap_or(0);
        if app >= 1_000 {
            assert!(
                kernel > 0,
                "kernel ESTABLISHED frozen at t={} while the app connected {app}",
                w[1].t_s
            );
        }
    }

    // Rates on the sources' clocks: a paced ramp never shows a catch-up spike, and CPU
    // never exceeds the box's cores.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    for s in &run.samples {
        for (what, rate) in [
            ("client app", s.client_connect_per_s),
            ("kernel", s.kernel_established_per_s),
        ] {
            if let Some(r) = rate {
                assert!(r <= 1.5 * RATE, "{what} rate {r:.0}/s at t={}", s.t_s);
            }
        }
        for (what, c) in [
            ("server", s.server_cpu_cores),
            ("client", s.client_cpu_cores),
            ("observer", s.observer_cpu_cores),
        ] {
            if let Some(c) = c {
                assert!(c <= cores * 1.05, "{what} CPU {c:.2} cores at t={}", s.t_s);
            }
        }
    }
    // ... and the counts still agree at every phase end.
    for phase in &run.phases {
        for row in &phase.kernel_vs_app {
            if row.what.ends_with("open") {
                assert!(row.agree, "{}: {row:?}", phase.name);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}
