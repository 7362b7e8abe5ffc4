//! Helpers for the workload integration tests: run the built `c1m`, talk to its control
//! endpoint, wait for counts. Every wait is bounded; processes are killed on drop.
#![allow(dead_code, clippy::unwrap_used)] // each test binary uses a subset; panics are assertions

use std::{
    io::{BufRead, BufReader, Write},
    net::TcpStream,
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use c1m::workload::stats::snapshot::AppSnapshot;

/// The built `c1m`, running the engine of the current [`each_engine`] round (epoll
/// outside one).
pub fn c1m() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_c1m"));
    c.env("C1M_ENGINE", ENGINE.get());
    c
}

/// Every connection engine: the shared suite runs once per engine (uring's client is
/// the epoll client, so its round tests the io_uring server).
pub const ENGINES: [&str; 3] = ["epoll", "tokio", "uring"];

thread_local! {
    static ENGINE: std::cell::Cell<&'static str> = const { std::cell::Cell::new("epoll") };
}

/// Runs `body` once per engine, one after the other (the same ports are reused): every
/// `c1m()` started meanwhile gets `C1M_ENGINE`, which `--engine` defaults to. A failure
/// names the engine it failed with.
pub fn each_engine(body: impl Fn(&'static str)) {
    struct Round(&'static str);
    impl Drop for Round {
        fn drop(&mut self) {
            if std::thread::panicking() {
                eprintln!("^^^ failed with --engine {}", self.0);
            }
            ENGINE.set("epoll");
        }
    }
    for e in ENGINES {
        ENGINE.set(e);
        let _round = Round(e);
        eprintln!("--- engine {e}");
        body(e);
    }
}

/// A child process killed (and reaped) when dropped, so a failed assertion leaves nothing
/// running.
pub struct Proc {
    pub child: Option<Child>,
    pub name: &'static str,
}

impl Proc {
    pub fn spawn(name: &'static str, cmd: &mut Command) -> Proc {
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Proc {
            child: Some(child),
            name,
        }
    }

    /// Waits for exit (bounded) and returns the output.
    pub fn wait(mut self, timeout: Duration) -> Output {
        let mut child = self.child.take().unwrap();
        let deadline = Instant::now() + timeout;
        loop {
            if child.try_wait().unwrap().is_some() {
                return child.wait_with_output().unwrap();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                panic!(
                    "{} did not exit within {timeout:?}\nstdout:\n{}\nstderr:\n{}",
                    self.name,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            if let Ok(out) = c.wait_with_output() {
                eprintln!(
                    "--- {} (killed) stdout:\n{}\n--- stderr:\n{}",
                    self.name,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

/// `stop` on a c1m client's or server's control endpoint, then its clean exit (bounded).
pub fn stop(ctl: &str, p: Proc) {
    control(ctl, "stop").unwrap();
    let out = p.wait(Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One control command, one answer line.
pub fn control(addr: &str, cmd: &str) -> Result<String, std::io::Error> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(format!("{cmd}\n").as_bytes())?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line)?;
    Ok(line)
}

pub fn stats(addr: &str) -> Option<AppSnapshot> {
    serde_json::from_str(&control(addr, "stats").ok()?).ok()
}

/// Polls `stats` until `done` holds (bounded), returning the last snapshot.
pub fn wait_for(
    addr: &str,
    what: &str,
    timeout: Duration,
    done: impl Fn(&AppSnapshot) -> bool,
) -> AppSnapshot {
    let deadline = Instant::now() + timeout;
    let mut last = None;
    while Instant::now() < deadline {
        if let Some(s) = stats(addr) {
            if done(&s) {
                return s;
            }
            last = Some(s);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "timed out waiting for {what}; last stats: {}",
        serde_json::to_string_pretty(&last).unwrap()
    );
}

/// `c1m server --mode ws` on one port with its control endpoint, up and running.
#[allow(dead_code)] // not every test binary that includes this module starts one
pub fn ws_server(port: u16, ctl: &str, extra: &[&str]) -> Proc {
    let server = Proc::spawn(
        "c1m server",
        c1m()
            .args(["server", "--mode", "ws", "--ports", &port.to_string()])
            .args(["--quiet", "--control", ctl])
            .args(extra),
    );
    wait_for(ctl, "server up", Duration::from_secs(60), |s| {
        s.phase == "running"
    });
    server
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The Python `websockets` package, or a failure telling how to get it.
pub fn require_python_websockets() {
    let ok = Command::new("python3")
        .args(["-c", "import websockets"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        ok,
        "the interop tests need Python's `websockets` package: run `cargo xtask test` (it installs it), \
         or `python3 -m pip install websockets`"
    );
}

/// An empty folder of this test's under the temp dir, removed when dropped, also when
/// the test fails.
pub fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("c1m-test-{name}-"))
        .tempdir()
        .expect("scratch dir")
}

/// `c1m run … --out dir` ended well: the summary line that starts with `starts`, and
/// the record of the one run folder under `dir`.
pub fn run_line_and_record(
    out: &Output,
    dir: &std::path::Path,
    starts: &str,
) -> (String, c1m::model::RunRecord) {
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}: {text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text
        .lines()
        .find(|l| l.starts_with(starts))
        .unwrap_or_else(|| panic!("no {starts:?} line: {text}"))
        .to_owned();
    let run = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("summary.json").exists())
        .unwrap();
    let rec = serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap();
    (line, rec)
}
