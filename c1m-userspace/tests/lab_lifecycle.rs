//! The lab's lifecycle as a hostile user meets it: two labs on the same ports, a
//! `kill -9` of the lab, a worker killed mid-idle, bad flags, and the run folder's
//! summary from the first second. Root tests run c1m in a private network namespace
//! (its own ports and per-namespace sysctls) and say SKIP loudly without root.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use c1m::{
    lab::run::journal::{self, Journal, Role},
    model::{Outcome, RunRecord},
    observer::privileges,
    procstat,
};
use lab_util::{fresh_dir, root_or_skip, run_folders, set_low, sysctl};

use crate::lab_util;

/// `c1m run ARGS --no-observer --plain --out OUT`, not started yet.
fn c1m_run(out: &Path, args: &[&str]) -> Command {
    let mut cmd = lab_util::c1m_run(out, args);
    cmd.arg("--no-observer");
    cmd
}

fn c1m(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_c1m"))
        .args(args)
        .output()
        .expect("c1m")
}

/// Polls (bounded) until `f` gives a value.
fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn summary(folder: &Path) -> Option<RunRecord> {
    serde_json::from_str(&std::fs::read_to_string(folder.join("summary.json")).ok()?).ok()
}

/// The lab's run folder once its setup phase is on disk.
fn wait_for_setup(out: &Path) -> PathBuf {
    wait_for("the setup phase", Duration::from_secs(90), || {
        let folder = run_folders(out).into_iter().next()?;
        let run = summary(&folder)?;
        run.phases
            .iter()
            .any(|p| p.name == "setup")
            .then_some(folder)
    })
}

fn journal_of(folder: &Path) -> Journal {
    serde_json::from_str(
        &std::fs::read_to_string(folder.join(journal::FILE)).expect("journal.json"),
    )
    .expect("a journal")
}

fn finish(child: Child) -> (Option<i32>, String, String) {
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_second_lab_on_the_same_ports_refuses_and_names_the_first() {
    if !root_or_skip("a_second_lab_on_the_same_ports_refuses_and_names_the_first") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let (out_a, out_b) = (fresh_dir("first"), fresh_dir("second"));
    let ports = ["--ports", "21000-21003", "--mode", "hold"];
    let a = c1m_run(
        &out_a,
        &[&["-n", "3000", "--idle", "4s"][..], &ports].concat(),
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("lab A");
    let folder_a = wait_for_setup(&out_a);

    let b = c1m_run(
        &out_b,
        &[&["-n", "3000", "--idle", "4s"][..], &ports].concat(),
    )
    .output()
    .expect("lab B");
    let stderr = String::from_utf8_lossy(&b.stderr);
    assert_eq!(b.status.code(), Some(1), "B refuses: {stderr}");
    let line = format!(
        "port 21000 is taken by another c1m lab: pid {} (run folder {})",
        a.id(),
        std::path::absolute(&folder_a).expect("path").display()
    );
    assert!(stderr.contains(&line), "names lab A:\n{stderr}");
    assert!(stderr.contains("use other --ports"), "{stderr}");
    assert!(
        run_folders(&out_b).is_empty(),
        "B started nothing and wrote nothing"
    );

    let (code, stdout, stderr) = finish(a);
    assert_eq!(code, Some(0), "A completes untouched\n{stdout}\n{stderr}");
    let run = summary(&folder_a).expect("A's summary");
    assert_eq!(run.outcome, Outcome::Complete, "{:?}", run.warnings);
    assert!(run.warnings.is_empty(), "{:?}", run.warnings);
    let server = run.server.expect("server snapshot");
    assert_eq!(server.counters.accepted, 3000, "A got all its connections");
    let _ = std::fs::remove_dir_all(&out_a);
    let _ = std::fs::remove_dir_all(&out_b);
}

/// Gone, or a zombie waiting for init: either way it holds nothing.
fn gone(pid: u32, start: u64) -> bool {
    !procstat::alive(pid, start)
}

#[test]
fn kill_9_of_the_lab_takes_its_children_and_doctor_restores_the_rest() {
    if !root_or_skip("kill_9_of_the_lab_takes_its_children_and_doctor_restores_the_rest") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    // Per-namespace sysctls, low so that --tune raises them.
    let low = [
        ("net/core/somaxconn", "128"),
        ("net/ipv4/tcp_max_syn_backlog", "128"),
        ("net/ipv4/tcp_max_tw_buckets", "128"),
    ];
    set_low(&low);
    let out = fresh_dir("kill9");
    // 25,000 connections: past RLIMIT_NOFILE (20,000 here), so both sides have workers.
    let mut lab = c1m_run(
        &out,
        &[
            "-n",
            "25000",
            "--idle",
            "60s",
            "--tune",
            "--mode",
            "hold",
            "--ports",
            "21100-21103",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("c1m run");
    let folder = wait_for_setup(&out);
    assert_eq!(sysctl("net/core/somaxconn"), "4096", "--tune applied");
    let journal = journal_of(&folder);
    let roles: Vec<Role> = journal.children.iter().map(|c| c.role).collect();
    for role in [
        Role::Server,
        Role::Client,
        Role::ServerWorker,
        Role::ClientWorker,
    ] {
        assert!(roles.contains(&role), "{role:?} in the journal: {roles:?}");
    }

    lab.kill().expect("kill -9");
    let _ = lab.wait();
    let killed = Instant::now();
    for c in &journal.children {
        wait_for(
            &format!("{} pid {} to end", c.role.name(), c.proc.pid),
            Duration::from_secs(30),
            || gone(c.proc.pid, c.proc.start_time).then_some(()),
        );
    }
    eprintln!(
        "all {} children ended {:.2} s after the kill",
        journal.children.len(),
        killed.elapsed().as_secs_f64()
    );
    // The run folder keeps what was measured: a summary that parses.
    assert_eq!(
        summary(&folder).expect("summary.json").outcome,
        Outcome::Running
    );

    let doctor = c1m(&["doctor", "-n", "10", "--no-observer"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    let abs = std::path::absolute(&folder).expect("path");
    assert!(
        text.contains(&format!(
            "leftover: lab pid {} (run folder {}) ended without cleaning up",
            journal.lab.pid,
            abs.display()
        )),
        "doctor names the leftovers:\n{text}"
    );
    assert!(text.contains("net.core.somaxconn 4096 (was 128)"), "{text}");
    assert!(text.contains("clean up: c1m doctor --restore"), "{text}");

    let restore = c1m(&["doctor", "--restore"]);
    let text = String::from_utf8_lossy(&restore.stdout);
    assert!(restore.status.success(), "{text}");
    for (name, value) in low {
        assert_eq!(sysctl(name), value, "{name} restored:\n{text}");
    }
    let again = c1m(&["doctor", "-n", "10", "--no-observer"]);
    assert!(
        !String::from_utf8_lossy(&again.stdout).contains(&abs.display().to_string()),
        "the journal is gone once restored"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_server_worker_killed_mid_idle_degrades_the_run() {
    if !root_or_skip("a_server_worker_killed_mid_idle_degrades_the_run") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let out = fresh_dir("worker");
    let lab = c1m_run(
        &out,
        &[
            "-n",
            "25000",
            "--idle",
            "8s",
            "--mode",
            "hold",
            "--ports",
            "21200-21203",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("c1m run");
    let folder = wait_for_setup(&out);
    let worker = journal_of(&folder)
        .children
        .into_iter()
        .find(|c| c.role == Role::ServerWorker)
        .expect("a server worker in the journal");
    assert!(worker.proc.alive());
    // SAFETY: a worker of the lab we started, checked alive by pid and start time.
    assert_eq!(
        unsafe { libc::kill(worker.proc.pid as i32, libc::SIGKILL) },
        0
    );

    let (code, stdout, stderr) = finish(lab);
    assert_eq!(code, Some(2), "degraded exits 2\n{stdout}\n{stderr}");
    assert!(
        stderr.contains("c1m run: warning: server worker ")
            && stderr.contains(&format!(
                "(pid {}) died (exited: signal: 9 (SIGKILL)); its connections are lost",
                worker.proc.pid
            )),
        "warning on stderr:\n{stderr}"
    );
    assert!(
        stdout.contains("== c1m run: degraded (2 warnings)"),
        "top line:\n{stdout}"
    );
    let run = summary(&folder).expect("summary.json");
    assert_eq!(run.outcome, Outcome::Degraded);
    assert_eq!(run.warnings.len(), 2, "{:?}", run.warnings);
    assert!(
        run.warnings[0].starts_with("server worker"),
        "{:?}",
        run.warnings
    );
    let lost = run
        .server
        .as_ref()
        .expect("server")
        .counters
        .closed
        .worker_lost;
    assert!(lost > 0, "the lost connections are counted");
    assert!(
        run.warnings[1].starts_with(&format!("server: {lost} connections lost")),
        "{:?}",
        run.warnings
    );
    assert_eq!(
        run.per_connection.server_user_bytes, None,
        "no per-connection server memory once a worker took its share away"
    );
    assert!(stdout.contains("server user n/a"), "{stdout}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_flags_are_refused_before_anything_starts() {
    for (args, says) in [
        (
            &["-n", "0"][..],
            "invalid value '0' for '--connections <COUNT>'",
        ),
        (
            &["--mode", "foo"][..],
            "invalid value 'foo' for '--mode <MODE>'",
        ),
        (&["--ports", "9-1"][..], "empty port range"),
    ] {
        let out = fresh_dir("flags");
        let result = c1m_run(&out, args).output().expect("c1m run");
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert_eq!(result.status.code(), Some(1), "{args:?}: {stderr}");
        let first = stderr.lines().next().unwrap_or_default();
        assert!(first.contains(says), "{args:?}: {stderr}");
        if args[0] == "--mode" {
            assert!(
                stderr.contains("[possible values: hold, echo, ws]"),
                "{stderr}"
            );
        }
        assert!(
            run_folders(&out).is_empty(),
            "{args:?}: no run folder, no server.log"
        );
        let _ = std::fs::remove_dir_all(&out);
    }
}

#[test]
fn summary_json_is_there_from_the_first_second() {
    if !root_or_skip("summary_json_is_there_from_the_first_second") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let out = fresh_dir("early");
    let started = Instant::now();
    let mut lab = c1m_run(
        &out,
        &["-n", "3000", "--idle", "30s", "--ports", "21300-21303"],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("c1m run");
    let run = wait_for("summary.json", Duration::from_secs(30), || {
        summary(&run_folders(&out).into_iter().next()?)
    });
    eprintln!(
        "summary.json parsed {:.2} s after the start",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(run.outcome, Outcome::Running);
    assert_eq!(run.config.connections, 3000);
    // Stopped once its server runs (the live view handles SIGTERM from then on).
    let folder = run_folders(&out).remove(0);
    wait_for("the server in the journal", Duration::from_secs(30), || {
        let text = std::fs::read_to_string(folder.join(journal::FILE)).ok()?;
        let j: Journal = serde_json::from_str(&text).ok()?;
        j.children
            .iter()
            .any(|c| c.role == Role::Server)
            .then_some(())
    });
    // SAFETY: signalling the lab we started, by its pid.
    assert_eq!(unsafe { libc::kill(lab.id() as i32, libc::SIGTERM) }, 0);
    assert_eq!(lab.wait().expect("wait").code(), Some(130));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn without_root_preflight_names_the_real_cause_and_the_fix_that_applies() {
    use std::os::unix::process::CommandExt;
    let out = fresh_dir("nonroot");
    // Not `c1m_run`: that adds --no-observer, and the observer is the point here.
    let mut cmd = {
        let mut c = Command::new(env!("CARGO_BIN_EXE_c1m"));
        c.args([
            "run",
            "-n",
            "100",
            "--plain",
            "--ports",
            "21400-21403",
            "--out",
        ])
        .arg(&out);
        c
    };
    // uid 65534's state directory (port locks) in a folder of the test's, not /tmp/c1m-65534.
    let tmp = fresh_dir("nonroot-tmp");
    if privileges::is_root() {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
        cmd.uid(65534)
            .gid(65534)
            .env("TMPDIR", &tmp)
            .env_remove("XDG_RUNTIME_DIR");
    }
    let result = cmd.output().expect("c1m run");
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert_eq!(result.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("preflight failed:"), "{stderr}");
    assert!(
        stderr.contains("privileges: uid 65534") || !privileges::is_root(),
        "{stderr}"
    );
    assert!(
        stderr.contains("sudo -E c1m …, or --no-observer"),
        "the fix that applies:\n{stderr}"
    );
    assert!(
        !stderr.contains("--tune"),
        "no sysctl failed, so --tune is no fix:\n{stderr}"
    );
    assert!(
        !stderr.contains("tracefs: not mounted") || tracefs_unmounted(),
        "tracefs is mounted, only unreadable:\n{stderr}"
    );
    assert!(run_folders(&out).is_empty(), "nothing started");
}

fn tracefs_unmounted() -> bool {
    c1m::observer::tracefs::mount_point().is_none()
}

#[test]
fn a_server_refuses_a_port_another_program_listens_on_and_names_it() {
    if !root_or_skip("a_server_refuses_a_port_another_program_listens_on_and_names_it") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    // Not c1m: a plain listener of this test process.
    let _other = std::net::TcpListener::bind("127.0.0.1:21500").expect("bind");
    let out = c1m(&["server", "--ports", "21500-21501", "--duration", "1s"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "port 21500 is taken: pid {} (",
            std::process::id()
        )),
        "names the holder:\n{stderr}"
    );
    assert!(stderr.contains("use other --ports, or stop it"), "{stderr}");
}

/// The run folders of `out` that hold a summary.json, with their record.
fn runs_in(out: &Path) -> Vec<(PathBuf, RunRecord)> {
    run_folders(out)
        .into_iter()
        .filter_map(|f| summary(&f).map(|r| (f, r)))
        .collect()
}

#[test]
fn two_labs_started_in_the_same_second_never_share_a_run_folder() {
    if !root_or_skip("two_labs_started_in_the_same_second_never_share_a_run_folder") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let out = fresh_dir("same-second");
    // Someone else's folders under every name a lab could pick in the next minute:
    // whatever second the labs start in, its folder name is taken.
    let now = c1m::util::unix_ms_now();
    let taken: Vec<PathBuf> = (0..90)
        .map(|s| out.join(c1m::fmt::stamp(now + s * 1000)))
        .collect();
    for t in &taken {
        std::fs::create_dir_all(t).expect("a taken folder");
        std::fs::write(t.join("not-yours.txt"), "someone else's").expect("marker");
    }
    let lab = |ports: &str| {
        c1m_run(
            &out,
            &[
                "-n", "300", "--idle", "1s", "--mode", "hold", "--ports", ports,
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("c1m run")
    };
    // Started together: the same second, the same --out.
    let (a, b) = (lab("21800-21803"), lab("21810-21813"));
    let a = lab_util::wait_bounded(a, Duration::from_secs(120), "lab A");
    let b = lab_util::wait_bounded(b, Duration::from_secs(120), "lab B");
    for (name, o) in [("A", &a), ("B", &b)] {
        assert_eq!(
            o.status.code(),
            Some(0),
            "lab {name}\n{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    for t in &taken {
        let names: Vec<String> = std::fs::read_dir(t)
            .expect("taken folder")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["not-yours.txt"], "a lab wrote into {}", t.display());
    }
    let runs = runs_in(&out);
    assert_eq!(runs.len(), 2, "one folder per lab: {runs:?}");
    let mut ports: Vec<String> = runs.iter().map(|(_, r)| r.config.ports.clone()).collect();
    ports.sort();
    assert_eq!(
        ports,
        ["21800-21803", "21810-21813"],
        "each folder is one lab's"
    );
    for (folder, run) in &runs {
        assert_eq!(run.outcome, Outcome::Complete, "{}", folder.display());
        assert_eq!(run.server.as_ref().expect("server").counters.accepted, 300);
        let j = journal_of(folder);
        assert_eq!(j.run_folder, std::path::absolute(folder).expect("path"));
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// A namespace kept only by `ip netns add` (a bind mount under /run/netns), deleted on
/// drop.
struct NamedNetns(String);

impl NamedNetns {
    fn new(name: String) -> NamedNetns {
        let _ = Command::new("ip")
            .args(["netns", "del", &name])
            .stderr(Stdio::null())
            .status();
        let st = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .expect("ip netns add");
        assert!(st.success(), "ip netns add {name}");
        let ns = NamedNetns(name);
        assert!(ns.exec(&["ip", "link", "set", "lo", "up"]).status.success());
        ns
    }

    /// `ip netns exec NAME ARGS…`, not started yet.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.0]).args(args);
        cmd
    }

    fn exec(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("ip netns exec")
    }

    /// A sysctl of the namespace, whitespace normalised.
    fn sysctl(&self, name: &str) -> String {
        let out = self.exec(&["cat", &format!("/proc/sys/{name}")]);
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn set(&self, name: &str, value: &str) {
        let st = self
            .command(&["sh", "-c", &format!("echo {value} > /proc/sys/{name}")])
            .status()
            .expect("set sysctl");
        assert!(st.success(), "{name} = {value}");
    }
}

impl Drop for NamedNetns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn a_killed_labs_sysctls_are_restored_in_its_own_namespace_not_forgotten() {
    if !root_or_skip("a_killed_labs_sysctls_are_restored_in_its_own_namespace_not_forgotten") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let ns = NamedNetns::new(format!("c1m-h2-{}", std::process::id()));
    let low = [
        ("net/core/somaxconn", "128"),
        ("net/ipv4/tcp_max_syn_backlog", "128"),
    ];
    for (name, value) in low {
        ns.set(name, value);
    }
    let out = fresh_dir("named-netns");
    let bin = env!("CARGO_BIN_EXE_c1m");
    let out_arg = out.display().to_string();
    // `ip netns exec` execs c1m: the lab's pid is this child's.
    let mut lab = ns
        .command(&[
            bin,
            "run",
            "-n",
            "2000",
            "--idle",
            "120s",
            "--tune",
            "--mode",
            "hold",
            "--ports",
            "21600-21603",
            "--no-observer",
            "--plain",
            "--out",
            &out_arg,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("c1m run in the named namespace");
    let folder = wait_for_setup(&out);
    assert_eq!(ns.sysctl("net/ipv4/tcp_max_syn_backlog"), "8192", "--tune");
    let journal = journal_of(&folder);
    lab.kill().expect("kill -9");
    let _ = lab.wait();
    for c in &journal.children {
        wait_for(
            &format!("{} pid {} to end", c.role.name(), c.proc.pid),
            Duration::from_secs(30),
            || gone(c.proc.pid, c.proc.start_time).then_some(()),
        );
    }
    // Nothing runs in the namespace now: only its /run/netns mount keeps it.
    let record = PathBuf::from(format!("/run/c1m/tuned-{}.json", journal.lab.pid));
    assert!(record.exists(), "the lab's restore record");

    // From another namespace: doctor only names it, and a run sweeps it at its start.
    let doctor = c1m(&["doctor", "-n", "10", "--no-observer"]);
    assert!(
        record.exists(),
        "doctor without --restore consumed the record"
    );
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(text.contains("clean up: c1m doctor --restore"), "{text}");
    let other = fresh_dir("named-netns-other");
    let run = lab_util::bounded(
        c1m_run(
            &other,
            &[
                "-n",
                "100",
                "--idle",
                "1s",
                "--mode",
                "hold",
                "--ports",
                "21610-21613",
            ],
        ),
        Duration::from_secs(120),
    );
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    for (name, value) in low {
        assert_eq!(
            ns.sysctl(name),
            value,
            "{name} restored in its own namespace\n{}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
    assert!(!record.exists(), "consumed by restoring it");
    // What is left of the lab (its journal) is doctor's; its sysctls are back already.
    let restore = c1m(&["doctor", "--restore"]);
    let text = String::from_utf8_lossy(&restore.stdout);
    assert!(restore.status.success(), "{text}");
    assert!(!text.contains("restored net."), "restored twice:\n{text}");
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&other);
}

#[test]
fn two_tuned_labs_keep_the_tuned_values_until_the_last_one_ends() {
    if !root_or_skip("two_tuned_labs_keep_the_tuned_values_until_the_last_one_ends") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let low = [
        ("net/core/somaxconn", "128"),
        ("net/ipv4/tcp_max_syn_backlog", "128"),
    ];
    set_low(&low);
    let (out_a, out_b) = (fresh_dir("tune-a"), fresh_dir("tune-b"));
    let a = c1m_run(
        &out_a,
        &[
            "-n",
            "1000",
            "--idle",
            "3s",
            "--tune",
            "--mode",
            "hold",
            "--ports",
            "21700-21703",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("lab A");
    wait_for_setup(&out_a);
    assert_eq!(sysctl("net/core/somaxconn"), "4096", "A tuned");
    let mut b = c1m_run(
        &out_b,
        &[
            "-n",
            "1000",
            "--idle",
            "300s",
            "--tune",
            "--mode",
            "hold",
            "--ports",
            "21710-21713",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("lab B");
    wait_for_setup(&out_b);
    let a = lab_util::wait_bounded(a, Duration::from_secs(120), "lab A");
    assert_eq!(
        a.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&a.stderr)
    );
    assert!(b.try_wait().expect("B").is_none(), "B still runs");
    for (name, _) in low {
        assert_ne!(sysctl(name), "128", "{name}: A's end took B's tuning away");
    }
    // SAFETY: signalling the lab we started, by its pid.
    assert_eq!(unsafe { libc::kill(b.id() as i32, libc::SIGTERM) }, 0);
    assert_eq!(b.wait().expect("wait").code(), Some(130));
    for (name, value) in low {
        assert_eq!(sysctl(name), value, "{name}: the last lab restores");
    }
    let _ = std::fs::remove_dir_all(&out_a);
    let _ = std::fs::remove_dir_all(&out_b);
}

/// `c1m ARGS` with its stdout a pipe whose reader is gone (`c1m … | head -0`).
fn with_closed_stdout(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let child = Command::new(env!("CARGO_BIN_EXE_c1m"))
        .args(args)
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .expect("c1m");
    lab_util::wait_bounded(child, Duration::from_secs(120), &format!("c1m {args:?}"))
}

#[test]
fn every_command_exits_quietly_on_a_closed_stdout() {
    let dir = fresh_dir("closed-stdout");
    let run = dir.join("run");
    c1m::report::write_run(&run, &c1m::report::fixture::sample_run()).expect("a run");
    let run = run.display().to_string();
    let out = dir.join("cmp").display().to_string();
    let mut cases: Vec<Vec<&str>> = vec![
        vec!["doctor", "-n", "10", "--no-observer"],
        vec!["compare", &run, "--out", &out],
        vec!["--help"],
    ];
    if privileges::is_root() {
        c1m::netns::enter_private().expect("private netns");
        cases.push(vec![
            "run",
            "-n",
            "100",
            "--idle",
            "1s",
            "--mode",
            "hold",
            "--ports",
            "21900-21903",
            "--no-observer",
            "--plain",
            "--out",
        ]);
    }
    let runs = dir.join("runs").display().to_string();
    for mut args in cases {
        if args[0] == "run" {
            args.push(&runs);
        }
        let o = with_closed_stdout(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "{args:?}: {err}"
        );
        assert!(err.is_empty(), "{args:?} says nothing: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tmpfs of `size` mounted over `dir`, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).expect("mount point");
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .expect("mount");
        assert!(st.success(), "mount tmpfs on {}", dir.display());
        Tmpfs(dir.to_owned())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_run_folder_fails_the_run_and_the_summary_says_so() {
    if !root_or_skip("a_full_run_folder_fails_the_run_and_the_summary_says_so") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let dir = fresh_dir("enospc");
    let small = Tmpfs::mount(&dir.join("small"), "64k");
    let out = lab_util::bounded(
        c1m_run(
            &small.0,
            &[
                "-n",
                "2000",
                "--idle",
                "20s",
                "--mode",
                "hold",
                "--ports",
                "22000-22003",
            ],
        ),
        Duration::from_secs(180),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    for folder in run_folders(&small.0) {
        // Not written at all, or written as failed with the reason.
        if let Ok(text) = std::fs::read_to_string(folder.join("summary.json")) {
            let run: RunRecord = serde_json::from_str(&text).expect("a summary that parses");
            assert_eq!(run.outcome, Outcome::Failed, "{:?}", run.warnings);
            assert!(
                run.warnings
                    .first()
                    .is_some_and(|w| w.contains("No space left on device")),
                "{:?}",
                run.warnings
            );
        }
    }
    drop(small);
    let _ = std::fs::remove_dir_all(&dir);
}
