//! Issue 30, cases 9, 11 and 12: signals, terminals and absurd flags as a new (or
//! hostile) user meets them. A run in the background of a terminal, SIGTERM and SIGHUP
//! at any moment, durations and repeats no run could live through, a `--out` that looks
//! like a flag, a non-UTF-8 `--out`, a folder name holding `=`. Root tests run in a
//! private network namespace (its own ports and per-namespace sysctls) and say SKIP
//! loudly without root.

use std::{
    io::BufRead,
    os::unix::ffi::OsStrExt,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use c1m::model::{Outcome, RunRecord};
use lab_util::{bounded, fresh_dir, root_or_skip, run_folders, set_low, sysctl};

use crate::lab_util;

fn summary(folder: &Path) -> Option<RunRecord> {
    serde_json::from_str(&std::fs::read_to_string(folder.join("summary.json")).ok()?).ok()
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A process's state letter from /proc (R, S, T, Z…), None once it is gone.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Single quotes for bash.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `c1m run ARGS` on a terminal it does not own: `script` gives bash a pty, bash runs
/// with job control and starts the run as a background job, so the run's process group
/// is not the terminal's foreground group (as `c1m run … &` in a shell, or a `timeout`
/// that puts its command in a group of its own). Killed with its shell when dropped.
struct Backgrounded {
    script: Child,
    pid: u32,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Backgrounded {
    fn start(args: &[&str]) -> Backgrounded {
        let mut line = format!("set -m; {} run", quote(env!("CARGO_BIN_EXE_c1m")));
        for a in args {
            line.push(' ');
            line.push_str(&quote(a));
        }
        // The job's exit code once it has ended (bash's `wait` also returns when the job
        // merely stops; the loop goes on until it is gone).
        line.push_str(
            " & pid=$!; echo C1M_PID=$pid; wait $pid; rc=$?; \
             while kill -0 $pid 2>/dev/null; do sleep 0.2; wait $pid; rc=$?; done; \
             echo C1M_EXIT=$rc",
        );
        let mut script = Command::new("script")
            .args(["-q", "-e", "-f", "-c", &line, "/dev/null"])
            .env("SHELL", "/bin/bash")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("script (util-linux)");
        let stdout = script.stdout.take().expect("script's stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(stdout).lines() {
                let Ok(l) = l else { break };
                if tx.send(l.trim_end_matches('\r').to_owned()).is_err() {
                    break;
                }
            }
        });
        let mut run = Backgrounded {
            script,
            pid: 0,
            lines,
            seen: Vec::new(),
        };
        let pid = run.wait_line("C1M_PID=", Duration::from_secs(10));
        run.pid = pid.parse().expect("the job's pid");
        run
    }

    /// The rest of the first line starting with `prefix`, waiting at most `limit`.
    fn wait_line(&mut self, prefix: &str, limit: Duration) -> String {
        if let Some(l) = self.seen.iter().find_map(|l| l.strip_prefix(prefix)) {
            return l.to_owned();
        }
        let until = Instant::now() + limit;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match self
                .lines
                .recv_timeout(left.min(Duration::from_millis(200)))
            {
                Ok(l) => {
                    let found = l.strip_prefix(prefix).map(str::to_owned);
                    self.seen.push(l);
                    if let Some(rest) = found {
                        return rest;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            self.not_stopped();
        }
        panic!(
            "no line {prefix:?} within {limit:?}:\n{}",
            self.seen.join("\n")
        );
    }

    /// Fails when the run stopped itself (SIGTTOU/SIGTTIN for touching a terminal it does
    /// not own): a stopped run takes no SIGTERM, and `timeout` then kills it.
    fn not_stopped(&self) {
        if self.pid != 0 && state(self.pid) == Some('T') {
            panic!(
                "c1m stopped itself (state T) in the terminal's background, no plain fallback:\n{}",
                self.seen.join("\n")
            );
        }
    }

    /// Polls (bounded) until `f` gives a value, failing if the run stops itself.
    fn wait_for<T>(&mut self, what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
        let until = Instant::now() + limit;
        loop {
            if let Some(v) = f() {
                return v;
            }
            while let Ok(l) = self.lines.try_recv() {
                self.seen.push(l);
            }
            self.not_stopped();
            assert!(
                Instant::now() < until,
                "timed out waiting for {what}:\n{}",
                self.seen.join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn signal(&self, sig: i32) {
        // SAFETY: signalling the run this test started, by its pid (still alive: its
        // shell has not reaped it, so the pid cannot be reused).
        assert_eq!(unsafe { libc::kill(self.pid as i32, sig) }, 0, "kill");
    }

    /// The run's exit code, as its shell saw it.
    fn exit_code(&mut self, limit: Duration) -> i32 {
        self.wait_line("C1M_EXIT=", limit)
            .parse()
            .expect("an exit code")
    }

    fn output(&self) -> String {
        self.seen.join("\n")
    }
}

impl Drop for Backgrounded {
    fn drop(&mut self) {
        if self.pid != 0 && state(self.pid).is_some() {
            // SAFETY: the run this test started; a stopped process takes SIGKILL too.
            unsafe { libc::kill(self.pid as i32, libc::SIGKILL) };
        }
        let _ = self.script.kill();
        let _ = self.script.wait();
    }
}

/// The per-namespace sysctls `--tune` raises for a small run, set low first.
const LOW: [(&str, &str); 2] = [
    ("net/core/somaxconn", "128"),
    ("net/ipv4/tcp_max_syn_backlog", "128"),
];

/// A tuned run in the background of a terminal, ended by `sig` once `when` says so:
/// exit 130, `interrupted`, every sysctl back to the value read at the test's start.
fn tuned_run_ended_by(sig: i32, ports: &str, early: bool) {
    c1m::netns::enter_private().expect("private netns");
    set_low(&LOW);
    let before: Vec<String> = LOW.iter().map(|(n, _)| sysctl(n)).collect();
    let out = fresh_dir(&format!("signal-{sig}-{early}"));
    let out_s = out.to_str().expect("a UTF-8 temp dir").to_owned();
    let mut run = Backgrounded::start(&[
        "-n",
        "1000",
        "--idle",
        "300s",
        "--tune",
        "--mode",
        "hold",
        "--no-observer",
        "--ports",
        ports,
        "--out",
        &out_s,
    ]);
    if early {
        // Right after the first sysctl changed: before the run folder, the live view
        // or any child exists.
        run.wait_line("tune: ", Duration::from_secs(60));
    } else {
        run.wait_for("the setup phase", Duration::from_secs(90), || {
            let folder = run_folders(&out).into_iter().next()?;
            summary(&folder)?
                .phases
                .iter()
                .any(|p| p.name == "setup")
                .then_some(())
        });
        for (name, low) in LOW {
            assert_ne!(sysctl(name), low, "{name} tuned during the run");
        }
    }
    run.signal(sig);
    let code = run.exit_code(Duration::from_secs(120));
    let shown = run.output();
    assert_eq!(code, 130, "exit 130 on signal {sig}:\n{shown}");
    if !early {
        assert!(
            shown.contains("printing plain lines"),
            "a run that does not own the terminal falls back to plain lines:\n{shown}"
        );
    }
    let folder = lab_util::run_folder(&out);
    let record = summary(&folder).expect("summary.json");
    assert_eq!(record.outcome, Outcome::Interrupted, "{shown}");
    for ((name, _), was) in LOW.iter().zip(&before) {
        assert_eq!(&sysctl(name), was, "{name} restored after signal {sig}");
    }
}

#[test]
fn sigterm_in_a_terminals_background_restores_the_tuning_and_says_interrupted() {
    if !root_or_skip("sigterm_in_a_terminals_background_restores_the_tuning_and_says_interrupted") {
        return;
    }
    tuned_run_ended_by(libc::SIGTERM, "21800-21803", false);
}

#[test]
fn sighup_in_a_terminals_background_restores_the_tuning_and_says_interrupted() {
    if !root_or_skip("sighup_in_a_terminals_background_restores_the_tuning_and_says_interrupted") {
        return;
    }
    tuned_run_ended_by(libc::SIGHUP, "21810-21813", false);
}

#[test]
fn sigterm_right_after_the_tuning_restores_it_and_says_interrupted() {
    if !root_or_skip("sigterm_right_after_the_tuning_restores_it_and_says_interrupted") {
        return;
    }
    tuned_run_ended_by(libc::SIGTERM, "21820-21823", true);
}

/// A refused flag: exit 1, the flag and `limit` named on clap's first line, no panic,
/// nothing started or written.
fn refused_at_parse(args: &[&str], flag: &str, limit: &str) {
    let out = fresh_dir("absurd");
    let result = bounded(
        lab_util::c1m_run(&out, &[args, &["--no-observer"]].concat()),
        Duration::from_secs(60),
    );
    let shown = text(&result);
    assert_eq!(result.status.code(), Some(1), "{args:?}:\n{shown}");
    assert!(!shown.contains("panicked"), "{shown}");
    let first = String::from_utf8_lossy(&result.stderr)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(
        first.contains(flag) && first.contains(limit),
        "{args:?}: one line naming {flag} and {limit}:\n{shown}"
    );
    assert!(run_folders(&out).is_empty(), "{args:?}: nothing written");
}

#[test]
fn durations_no_run_lives_through_are_refused_at_parse() {
    let huge = "18446744073709551615s";
    refused_at_parse(&["-n", "10", "--idle", huge], "--idle", "7 days");
    refused_at_parse(&["-n", "10", "--idle", "8d"], "--idle", "7 days");
    refused_at_parse(&["-n", "10", "--push-wait", huge], "--push-wait", "7 days");
    refused_at_parse(
        &["--servers", "c1m-epoll", "-n", "10", "--clean-wait", huge],
        "--clean-wait",
        "7 days",
    );
}

#[test]
fn a_repeat_beyond_the_cap_is_refused_at_parse() {
    refused_at_parse(
        &["--servers", "c1m-epoll", "-n", "10", "--repeat", "1000000"],
        "--repeat",
        "1000",
    );
}

#[test]
fn a_target_beyond_memory_is_told_by_memory_not_by_address_ranges() {
    let out = fresh_dir("beyond-memory");
    let result = bounded(
        // One port: the source addresses sized for it are a range beyond any.
        lab_util::c1m_run(
            &out,
            &["-n", "1000000000", "--no-observer", "--ports", "21900"],
        ),
        Duration::from_secs(60),
    );
    let shown = text(&result);
    assert_eq!(result.status.code(), Some(1), "{shown}");
    assert!(
        shown.contains("memory:") && shown.contains("--connections"),
        "the memory check and its fix:\n{shown}"
    );
    assert!(!shown.contains("address range"), "{shown}");
    assert!(run_folders(&out).is_empty(), "nothing written");
}

#[test]
fn a_non_utf8_out_folder_gets_a_complete_run() {
    if !root_or_skip("a_non_utf8_out_folder_gets_a_complete_run") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let parent = fresh_dir("non-utf8");
    let out = parent.join(std::ffi::OsStr::from_bytes(b"runs-\xff"));
    let result = bounded(
        lab_util::c1m_run(
            &out,
            &[
                "-n",
                "10",
                "--mode",
                "hold",
                "--idle",
                "0s",
                "--no-observer",
                "--ports",
                "21830-21831",
            ],
        ),
        Duration::from_secs(120),
    );
    let shown = text(&result);
    assert!(!shown.contains("panicked"), "{shown}");
    assert_eq!(result.status.code(), Some(0), "{shown}");
    let record = summary(&lab_util::run_folder(&out)).expect("summary.json");
    assert_eq!(record.outcome, Outcome::Complete, "{shown}");
}

/// `c1m run --servers ARGS` as `nobody`, in `out` (which nobody may write).
fn servers_as_nobody(out: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
        "--",
        env!("CARGO_BIN_EXE_c1m"),
        "run",
    ])
    .args(args)
    .args(["--plain", "--out"])
    .arg(out);
    cmd
}

#[test]
fn a_sequence_without_privileges_fails_preflight_before_any_wait() {
    if !root_or_skip("a_sequence_without_privileges_fails_preflight_before_any_wait") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    c1m::netns::enter_private().expect("private netns");
    let out = fresh_dir("nobody-servers");
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    // A connection on the sequence's ports (its listener gone): a run that waits for
    // clean ports waits all of --clean-wait for it.
    let listener = std::net::TcpListener::bind("127.0.0.1:21840").expect("listen");
    let _client = std::net::TcpStream::connect("127.0.0.1:21840").expect("connect");
    let _server = listener.accept().expect("accept");
    drop(listener);
    let result = bounded(
        servers_as_nobody(
            &out,
            &[
                "--servers",
                "c1m-epoll",
                "-n",
                "1000",
                "--ports",
                "21840-21841",
                "--clean-wait",
                "600s",
            ],
        ),
        Duration::from_secs(60),
    );
    let shown = text(&result);
    assert_eq!(result.status.code(), Some(1), "{shown}");
    assert!(
        shown.contains("preflight failed:") && shown.contains("privileges: uid 65534"),
        "{shown}"
    );
    assert!(
        !shown.contains("comparison folder"),
        "no comparison of runs that never started:\n{shown}"
    );
    assert!(
        run_folders(&out).is_empty(),
        "no empty folder left:\n{shown}"
    );
}

#[test]
fn an_out_that_looks_like_a_flag_reaches_each_run_of_a_sequence() {
    if !root_or_skip("an_out_that_looks_like_a_flag_reaches_each_run_of_a_sequence") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let cwd = fresh_dir("dash-out");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_c1m"));
    cmd.current_dir(&cwd).args([
        "run",
        "--servers",
        "c1m-epoll",
        "-n",
        "20",
        "--idle",
        "0s",
        "--no-observer",
        "--ports",
        "21850-21851",
        "--plain",
        "--out=-runs",
    ]);
    let result = bounded(cmd, Duration::from_secs(180));
    let shown = text(&result);
    assert_eq!(result.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("1 run,") && shown.contains("estimated"),
        "the sequence's size and an estimate before it starts:\n{shown}"
    );
    let cmp = lab_util::run_folder(&cwd.join("-runs"));
    let record = summary(&cmp.join("c1m-epoll-1")).expect("the run's summary.json");
    assert_eq!(record.outcome, Outcome::Complete, "{shown}");
}

#[test]
fn a_folder_name_holding_equals_gets_a_hint_how_to_name_it() {
    let parent = fresh_dir("equals");
    let folder: PathBuf = parent.join("run=1");
    std::fs::create_dir(&folder).expect("mkdir");
    let arg = folder.to_str().expect("UTF-8").to_owned();
    let result = Command::new(env!("CARGO_BIN_EXE_c1m"))
        .args(["compare", &arg, "--out"])
        .arg(parent.join("cmp"))
        .output()
        .expect("c1m compare");
    let shown = text(&result);
    assert_eq!(result.status.code(), Some(2), "{shown}");
    assert!(
        shown.contains(&format!("{arg}=NAME")) && shown.contains("'='"),
        "says the folder exists and how to write it:\n{shown}"
    );
}

/// Issue 30, case 14: a test's folder is gone when its test ends, failed ones included.
#[test]
fn a_tests_folder_is_gone_after_it_even_when_it_failed() {
    let made = std::sync::Mutex::new(None);
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let dir = fresh_dir("left-behind");
        std::fs::create_dir(dir.join("run")).expect("mkdir");
        std::fs::write(dir.join("run").join("summary.json"), "{}").expect("write");
        *made.lock().expect("lock") = Some(dir.to_path_buf());
        panic!("a failing test");
    }));
    assert!(failed.is_err());
    let made = made
        .lock()
        .expect("lock")
        .clone()
        .expect("the folder was made");
    assert!(!made.exists(), "{} left behind", made.display());
}
