//! Helpers for the lab's integration tests: run the built `c1m run` into a fresh folder,
//! find its run folder, read sysctls. Root tests skip loudly without root.
#![allow(dead_code)] // each test binary uses a subset

use std::{
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use c1m::observer::privileges;

/// True as root; otherwise prints why `test` is skipped.
pub fn root_or_skip(test: &str) -> bool {
    if privileges::is_root() {
        return true;
    }
    eprintln!(
        "SKIP {test}: needs root (eBPF observer, private netns, sysctls); run `sudo -E cargo xtask test`"
    );
    false
}

/// A folder under the temp dir, removed with all it holds when dropped: when the test
/// ends, passed or failed (a panic unwinds through it). Every run left ~28 `c1m-test-*`
/// folders in /tmp before.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl std::ops::Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for TempDir {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An empty folder under the temp dir, unique to this test process, gone when the
/// guard is dropped.
pub fn fresh_dir(name: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("c1m-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    TempDir(dir)
}

/// `c1m run ARGS --plain --out OUT`, not started yet.
pub fn c1m_run(out: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_c1m"));
    cmd.arg("run")
        .args(args)
        .args(["--plain", "--out"])
        .arg(out);
    cmd
}

/// The run folders `c1m run --out parent` created.
pub fn run_folders(parent: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(parent)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default()
}

/// The one run folder `c1m run --out parent` created.
pub fn run_folder(parent: &Path) -> PathBuf {
    let mut dirs = run_folders(parent);
    assert_eq!(dirs.len(), 1, "one run folder in {}", parent.display());
    dirs.remove(0)
}

/// What a finished `c1m` printed, with its exit code, for an assertion's message.
pub fn printed(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The run record a folder's summary.json holds.
pub fn summary(folder: &Path) -> c1m::model::RunRecord {
    c1m::report::load_run(folder).expect("the run's summary.json")
}

/// A `c1m run --hosts` that must have exited 0: its one run folder under `runs`, and
/// the merged run in it.
pub fn merged_run(out: &Output, runs: &Path) -> (PathBuf, c1m::model::RunRecord) {
    assert_eq!(out.status.code(), Some(0), "{}", printed(out));
    let folder = run_folder(runs);
    let run = c1m::report::load_run(&folder).expect("merged summary");
    (folder, run)
}

/// The run's phases as (name, kind), in order.
pub fn phase_kinds(
    run: &c1m::model::RunRecord,
) -> Vec<(&str, Option<c1m::model::phase::PhaseKind>)> {
    run.phases
        .iter()
        .map(|p| (p.name.as_str(), p.kind))
        .collect()
}

/// A sysctl of this thread's network namespace, whitespace normalised.
pub fn sysctl(name: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/{name}"))
        .expect("sysctl")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Sets per-namespace sysctls low, so that `--tune` must raise them.
pub fn set_low(sysctls: &[(&str, &str)]) {
    for (name, value) in sysctls {
        c1m::netns::set_sysctl(name, value).expect("set sysctl");
    }
}

/// The kernel-vs-app row `what` ("server open", …) of a phase; panics naming the rows
/// there are.
pub fn kernel_vs_app<'a>(
    phase: &'a c1m::model::phase::Phase,
    what: &str,
) -> &'a c1m::model::kernel_vs_app::KernelVsApp {
    phase
        .kernel_vs_app
        .iter()
        .find(|r| r.what == what)
        .unwrap_or_else(|| panic!("no {what} row in {}: {:?}", phase.name, phase.kernel_vs_app))
}

/// Runs `cmd` to its end, killing it (and failing) if it takes longer than `limit`: a
/// run that hangs is the failure these tests look for.
pub fn bounded(mut cmd: Command, limit: Duration) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn c1m run");
    wait_bounded(child, limit, "c1m run")
}

/// Waits for `child` (started with piped output) to end, killing it (and failing) if it
/// takes longer than `limit`.
pub fn wait_bounded(child: std::process::Child, limit: Duration, what: &str) -> Output {
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    let watchdog = std::thread::spawn(move || {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if flag.load(std::sync::atomic::Ordering::Relaxed) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // SAFETY: our own child, not yet reaped (wait_with_output below holds it).
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        true
    });
    let out = child.wait_with_output().expect("wait for the child");
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(
        !watchdog.join().expect("watchdog"),
        "{what} hung: killed after {limit:?}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Where c1m looks for the reference servers: beside the `<profile>/` folder of the
/// binary under test (cargo's target dir, `CARGO_TARGET_DIR` included), where
/// `cargo xtask reference-servers` builds them.
pub fn reference_servers_dir() -> PathBuf {
    let exe = Path::new(env!("CARGO_BIN_EXE_c1m"));
    exe.parent()
        .and_then(Path::parent)
        .unwrap_or(exe)
        .join("reference-servers")
}

/// True when `cargo xtask reference-servers` built the reference server `name`;
/// otherwise a loud SKIP of `test`.
pub fn built(test: &str, name: &str) -> bool {
    let run = reference_servers_dir().join(name).join("run");
    if !run.exists() {
        eprintln!(
            "SKIP {test}: {} not built; run `cargo xtask reference-servers` (cargo xtask test does)",
            run.display()
        );
    }
    run.exists()
}

/// `c1m run --servers SERVERS -n N --idle 1s --tune EXTRA…` in a fresh folder, which
/// must exit 0 within `limit`: its printed output, its comparison folder and the guard
/// of the folder that holds it.
pub fn run_servers(
    folder: &str,
    servers: &str,
    n: &str,
    extra: &[&str],
    limit: Duration,
) -> (String, PathBuf, TempDir) {
    let out_dir = fresh_dir(folder);
    let mut args = vec!["--servers", servers, "-n", n, "--idle", "1s", "--tune"];
    args.extend_from_slice(extra);
    let out = bounded(c1m_run(&out_dir, &args), limit);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cmp = run_folder(&out_dir);
    (stdout, cmp, out_dir)
}

/// `c1m run --servers SERVERS -n N --tune MORE…` (no --idle of its own), which must exit
/// 0 within `limit`: stdout and stderr together, its comparison folder and the guard of
/// the folder that holds it.
pub fn run_servers_with(
    folder: &str,
    servers: &str,
    n: &str,
    more: &[&str],
    limit: Duration,
) -> (String, PathBuf, TempDir) {
    let out_dir = fresh_dir(folder);
    let mut args = vec!["--servers", servers, "-n", n, "--tune"];
    args.extend_from_slice(more);
    let out = bounded(c1m_run(&out_dir, &args), limit);
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    let cmp = run_folder(&out_dir);
    (text, cmp, out_dir)
}

/// `setpriv` arguments that run the rest of its command line as `nobody` (uid 65534),
/// with no groups and no capabilities: a user without privileges.
pub const AS_NOBODY: [&str; 5] = [
    "--reuid=65534",
    "--regid=65534",
    "--clear-groups",
    "--inh-caps=-all",
    "--",
];
