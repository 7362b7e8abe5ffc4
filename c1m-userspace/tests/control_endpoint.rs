//! The control endpoint against a hostile user: other uids, other network namespaces,
//! huge lines, floods of idle connections, and other processes' socket files.
//! Root tests run in a private network namespace and say SKIP loudly when not root.
#![allow(clippy::unwrap_used)] // panics are the assertions in tests

use crate::workload_util;

use std::{
    io::{BufRead, BufReader, ErrorKind, Read, Write},
    net::TcpStream,
    os::unix::{
        fs::{MetadataExt, PermissionsExt},
        net::{UnixListener, UnixStream},
        process::CommandExt,
    },
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use c1m::workload::stats::snapshot::AppSnapshot;
use workload_util::{Proc, c1m, is_root, stats, wait_for};

/// Env vars that turn [`probe_helper`] into a control client run as another user or in
/// another namespace.
const PROBE_EP: &str = "C1M_PROBE_EP";
const PROBE_LINES: &str = "C1M_PROBE_LINES";
const PROBE_TOKEN: &str = "C1M_PROBE_TOKEN";

fn root_or_skip(test: &str) -> bool {
    if is_root() {
        c1m::netns::enter_private().expect("unshare(CLONE_NEWNET)");
        true
    } else {
        eprintln!(
            "SKIP {test}: needs root (uid switch, network namespaces); run `sudo -E cargo xtask test`"
        );
        false
    }
}

/// A fresh directory under /tmp that other users may enter (so a 0600 socket, not the
/// directory, is what stops them); removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("c1m-ctl-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        Dir(p)
    }
    fn join(&self, f: &str) -> String {
        self.0.join(f).display().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Not a test: the control client [`probe`] runs in a child process (as another uid, or
/// in another namespace). Without its env vars it returns at once.
#[test]
fn probe_helper() {
    let Ok(ep) = std::env::var(PROBE_EP) else {
        return;
    };
    let mut out = String::new();
    if let Ok(t) = std::env::var(PROBE_TOKEN) {
        out.push_str(&format!("auth {t}\n"));
    }
    for l in std::env::var(PROBE_LINES).unwrap().split('|') {
        out.push_str(l);
        out.push('\n');
    }
    let mut s = match Conn::open(&ep) {
        Ok(s) => s,
        Err(e) => return println!("PROBE connect-error {:?}", e.kind()),
    };
    let _ = s.write_all(out.as_bytes());
    s.shut_write();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    loop {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) => break println!("PROBE eof"),
            Ok(_) => println!("PROBE {}", line.trim_end()),
            Err(e) => break println!("PROBE read-error {e}"),
        }
    }
}

/// A control connection over either transport, as the probe sees it.
enum Conn {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Conn {
    fn open(ep: &str) -> std::io::Result<Conn> {
        let timeout = Some(Duration::from_secs(10));
        Ok(if ep.contains('/') {
            let s = UnixStream::connect(ep)?;
            s.set_read_timeout(timeout)?;
            Conn::Unix(s)
        } else {
            let s = TcpStream::connect(ep)?;
            s.set_read_timeout(timeout)?;
            Conn::Tcp(s)
        })
    }

    fn shut_write(&self) {
        let _ = match self {
            Conn::Unix(s) => s.shutdown(std::net::Shutdown::Write),
            Conn::Tcp(s) => s.shutdown(std::net::Shutdown::Write),
        };
    }
}

impl Read for Conn {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Unix(s) => s.read(b),
            Conn::Tcp(s) => s.read(b),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Unix(s) => s.write(b),
            Conn::Tcp(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs [`probe_helper`] in a child (`uid`: as that user; `netns`: inside that named
/// namespace) and returns the lines it saw: the server's answers, then `eof`.
fn probe(
    ep: &str,
    lines: &str,
    token: Option<&str>,
    uid: Option<u32>,
    netns: Option<&str>,
) -> Vec<String> {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    cmd.args([
        "control_endpoint::probe_helper",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(PROBE_EP, ep)
    .env(PROBE_LINES, lines);
    if let Some(t) = token {
        cmd.env(PROBE_TOKEN, t);
    }
    if let Some(u) = uid {
        cmd.uid(u).gid(u);
    }
    let out = cmd.output().unwrap();
    let got: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        // The harness prints `test control_endpoint::probe_helper ... ` before our first line, unterminated.
        .filter_map(|l| l.find("PROBE ").map(|i| l[i + 6..].to_owned()))
        .collect();
    assert!(
        !got.is_empty(),
        "probe printed nothing: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    got
}

fn server(name: &'static str, port: u16, ctl: &str, extra: &[&str]) -> Proc {
    Proc::spawn(
        name,
        c1m()
            .args(["server", "--ports", &port.to_string(), "--threads", "1"])
            .args(["--max-conns", "100", "--quiet", "--control", ctl])
            .args(extra),
    )
}

/// [`server`] on a loopback TCP control endpoint, once it answers `stats`.
fn tcp_server_up(name: &'static str, port: u16, ctl: &str) -> Proc {
    let s = server(name, port, ctl, &[]);
    wait_for(ctl, "server up", Duration::from_secs(30), |s| {
        s.phase == "running"
    });
    s
}

fn wait_path(p: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !Path::new(p).exists() {
        assert!(Instant::now() < deadline, "{p} never appeared");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `stats` over a unix socket, as this (root) process.
fn unix_stats(p: &str) -> Option<AppSnapshot> {
    let mut s = UnixStream::connect(p).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(b"stats\n").ok()?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).ok()?;
    serde_json::from_str(&line).ok()
}

fn wait_unix_running(p: &str) -> AppSnapshot {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = unix_stats(p).filter(|s| s.phase == "running") {
            return s;
        }
        assert!(Instant::now() < deadline, "server on {p} never came up");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn refused_as_non_owner(got: &[String]) {
    assert_eq!(got.len(), 2, "one refusal, then closed: {got:?}");
    assert!(
        got[0].contains("uid 65534 may not use this control endpoint"),
        "{got:?}"
    );
    // Closed: EOF, or a reset when our unread lines were thrown away with it.
    assert!(
        got[1] == "eof" || got[1].starts_with("read-error Connection reset"),
        "{got:?}"
    );
}

/// uid 65534 can neither read stats from nor stop a root server, on a unix socket or on
/// loopback TCP; the server keeps running and still answers root.
#[test]
fn non_owner_uid_is_refused_on_unix_and_loopback_tcp() {
    if !root_or_skip("non_owner_uid_is_refused_on_unix_and_loopback_tcp") {
        return;
    }
    let dir = Dir::new("owner");
    let sock = dir.join("s.sock");
    let _unix = server("c1m server (unix)", 18601, &sock, &[]);
    let _tcp = tcp_server_up("c1m server (tcp)", 18602, "127.0.0.1:18603");
    wait_unix_running(&sock);

    // The file itself keeps other users out...
    assert_eq!(
        probe(&sock, "stats|stop", None, Some(65534), None),
        vec!["connect-error PermissionDenied"]
    );
    // ...and were it wider (an old file, a chmod), the peer check still does.
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    refused_as_non_owner(&probe(&sock, "stop", None, Some(65534), None));
    refused_as_non_owner(&probe(
        "127.0.0.1:18603",
        "stats|stop",
        None,
        Some(65534),
        None,
    ));

    assert_eq!(unix_stats(&sock).unwrap().phase, "running");
    assert_eq!(stats("127.0.0.1:18603").unwrap().phase, "running");
    // Root, and the owner, still may.
    let ok = probe("127.0.0.1:18603", "stats", None, None, None);
    assert!(ok[0].starts_with("{\"side\""), "{ok:?}");
}

/// A namespace of our own, deleted (with its veth end) on drop.
struct NetNs(String);

impl NetNs {
    fn new(name: String) -> NetNs {
        let _ = Command::new("ip")
            .args(["netns", "del", &name])
            .stderr(std::process::Stdio::null())
            .status();
        sh(&["netns", "add", &name]);
        NetNs(name)
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn sh(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Bound to an address other namespaces can reach: without a token the server refuses to
/// start, naming the flag; with one, a peer in another namespace is refused without the
/// token (and `stop` is not run), and served with it.
#[test]
fn non_loopback_endpoint_needs_the_token_from_another_netns() {
    if !root_or_skip("non_loopback_endpoint_needs_the_token_from_another_netns") {
        return;
    }
    let ns = NetNs::new(format!("c1m-ctl-{}", std::process::id()));
    sh(&[
        "link", "add", "c1mctl0", "type", "veth", "peer", "name", "c1mctl1",
    ]);
    sh(&["link", "set", "c1mctl1", "netns", &ns.0]);
    sh(&["addr", "add", "10.231.0.1/24", "dev", "c1mctl0"]);
    sh(&["link", "set", "c1mctl0", "up"]);
    for a in [
        &["addr", "add", "10.231.0.2/24", "dev", "c1mctl1"][..],
        &["link", "set", "c1mctl1", "up"],
        &["link", "set", "lo", "up"],
    ] {
        let mut full = vec!["-n", &ns.0];
        full.extend_from_slice(a);
        sh(&full);
    }
    let ep = "10.231.0.1:18611";

    let bare = server("c1m server (no token)", 18610, ep, &[]).wait(Duration::from_secs(30));
    assert!(!bare.status.success());
    let err = String::from_utf8_lossy(&bare.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("--control-token-file"), "{err}");

    let dir = Dir::new("token");
    let tf = dir.join("control.token");
    let _s = server(
        "c1m server (token)",
        18610,
        ep,
        &["--control-token-file", &tf],
    );
    wait_path(&tf);
    assert_eq!(
        std::fs::metadata(&tf).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let token = std::fs::read_to_string(&tf).unwrap().trim().to_owned();
    assert_eq!(token.len(), 64);
    let deadline = Instant::now() + Duration::from_secs(30);
    let with = loop {
        let got = probe(ep, "stats", Some(&token), None, Some(&ns.0));
        if got.len() == 3 || Instant::now() > deadline {
            break got;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(with[0], "{\"ok\":\"auth\"}", "{with:?}");
    assert!(with[1].starts_with("{\"side\":\"server\""), "{with:?}");

    let without = probe(ep, "stop|stats", None, None, Some(&ns.0));
    assert_eq!(without.len(), 2, "{without:?}");
    assert!(
        without[0].contains("send `auth <token>` first"),
        "{without:?}"
    );
    let wrong = probe(ep, "stop", Some(&"0".repeat(64)), None, Some(&ns.0));
    assert!(wrong[0].starts_with("{\"error\""), "{wrong:?}");
    // Neither `stop` was run: the token still gets stats.
    let again = probe(ep, "stats", Some(&token), None, Some(&ns.0));
    assert!(again[1].contains("\"phase\":\"running\""), "{again:?}");
}

fn vm_hwm_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A 256 MB line without a newline: one short error, the connection closed, and the
/// server's peak RSS within a few MB of where it was.
#[test]
fn huge_line_is_refused_without_memory_growth() {
    if !root_or_skip("huge_line_is_refused_without_memory_growth") {
        return;
    }
    let s = tcp_server_up("c1m server (huge line)", 18620, "127.0.0.1:18621");
    let pid = s.child.as_ref().unwrap().id();
    let before = vm_hwm_kib(pid);

    let conn = TcpStream::connect("127.0.0.1:18621").unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    conn.set_write_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut w = conn.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'a'; 1 << 20];
        let mut sent = 0u64;
        for _ in 0..256 {
            if w.write_all(&chunk).is_err() {
                break;
            }
            sent += chunk.len() as u64;
        }
        sent
    });
    let mut r = BufReader::new(conn);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert_eq!(line, "{\"error\":\"line longer than 4096 bytes\"}\n");
    // Closed: EOF, or a reset because our unread bytes were thrown away.
    let mut rest = Vec::new();
    match r.read_to_end(&mut rest) {
        Ok(_) => assert!(rest.is_empty()),
        Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset),
    }
    let sent = writer.join().unwrap();
    assert!(
        sent < 256 << 20,
        "the server must stop reading, not swallow it all"
    );

    let after = vm_hwm_kib(pid);
    assert!(
        after <= before + 4 * 1024,
        "peak RSS grew from {before} kB to {after} kB"
    );
    assert_eq!(stats("127.0.0.1:18621").unwrap().phase, "running");
}

/// `stop` without its newline, then EOF: dropped, not run. A bad command is answered
/// quoting a short prefix only.
#[test]
fn partial_line_at_eof_is_not_run_and_errors_do_not_echo() {
    if !root_or_skip("partial_line_at_eof_is_not_run_and_errors_do_not_echo") {
        return;
    }
    let _s = tcp_server_up("c1m server (partial)", 18630, "127.0.0.1:18631");
    let mut c = TcpStream::connect("127.0.0.1:18631").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(&[b'x'; 4000]).unwrap();
    c.write_all(b"\nstop").unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut all = String::new();
    c.read_to_string(&mut all).unwrap();
    assert!(
        all.len() < 200,
        "the reply echoed the request: {} bytes",
        all.len()
    );
    assert!(all.contains("unknown command \\\"xxxxxxxx"), "{all}");
    assert_eq!(all.lines().count(), 1, "{all}");
    assert_eq!(stats("127.0.0.1:18631").unwrap().phase, "running");
}

/// 10,000 idle control connections do not cost a data connection: a server sized for one
/// process holds all 12,000 data connections, serves exactly 64 control sessions and
/// tells the other 9,936 so.
#[test]
fn idle_control_flood_costs_no_data_connections() {
    if !root_or_skip("idle_control_flood_costs_no_data_connections") {
        return;
    }
    c1m::workload::limits::raise_nofile().unwrap();
    const IDLE: usize = 10_000;
    const DATA: u64 = 12_000;
    let _s = Proc::spawn(
        "c1m server (flood)",
        c1m().args([
            "server",
            "--ports",
            "18640",
            "--quiet",
            "--control",
            "127.0.0.1:18641",
        ]),
    );
    let first = wait_for(
        "127.0.0.1:18641",
        "server up",
        Duration::from_secs(30),
        |s| s.phase == "running",
    );
    assert!(first.split.contains("1 process"), "{}", first.split);
    // The first connection is a session: it asks for stats later.
    let mut ask = BufReader::new(TcpStream::connect("127.0.0.1:18641").unwrap());
    ask.get_ref()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut idle: Vec<TcpStream> = (1..IDLE)
        .map(|_| TcpStream::connect("127.0.0.1:18641").unwrap())
        .collect();

    let dir = Dir::new("flood");
    let cctl = dir.join("client.sock");
    let _c = Proc::spawn(
        "c1m client (flood)",
        c1m()
            .args(["client", "--ports", "18640", "-n", &DATA.to_string()])
            .args(["--hold", "forever", "--quiet", "--control", &cctl]),
    );
    let deadline = Instant::now() + Duration::from_secs(40);
    let held = loop {
        ask.get_mut().write_all(b"stats\n").unwrap();
        let mut line = String::new();
        ask.read_line(&mut line).unwrap();
        let s: AppSnapshot = serde_json::from_str(&line).unwrap();
        if s.counters.open == DATA {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "server holds {} of {DATA} data connections with {IDLE} control connections open; last: {}",
            s.counters.open,
            line
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(held.counters.failures.emfile, 0);
    assert_eq!(held.counters.failures.over_capacity, 0);

    // Exactly 64 are sessions (ours included); every other one was told why and closed.
    let mut refused = 0;
    for c in &mut idle {
        c.set_nonblocking(true).unwrap();
        let mut b = [0u8; 256];
        match c.read(&mut b) {
            Ok(n) if n > 0 => {
                assert!(
                    std::str::from_utf8(&b[..n])
                        .unwrap()
                        .contains("too many control connections")
                );
                refused += 1;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => panic!("unexpected read on an idle control connection: {other:?}"),
        }
    }
    assert_eq!(refused, IDLE - 64);
}

/// Under umask 000 the socket file is still 0600; a second server refuses a live socket
/// (naming it) instead of deleting it; a stale one is replaced; the file is gone after
/// `stop` and after SIGTERM.
#[test]
fn unix_socket_is_private_kept_from_others_and_removed() {
    // Needs no root; as root, a private namespace keeps its ports to itself.
    if is_root() {
        c1m::netns::enter_private().expect("unshare(CLONE_NEWNET)");
    }
    let dir = Dir::new("unix");
    let sock = dir.join("s.sock");
    let spawn = |name, port: u16| {
        let mut cmd = c1m();
        cmd.args(["server", "--ports", &port.to_string(), "--threads", "1"])
            .args(["--max-conns", "100", "--quiet", "--control", &sock]);
        // SAFETY: umask is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::umask(0);
                Ok(())
            });
        }
        Proc::spawn(name, &mut cmd)
    };
    // A stale socket from a killed run: its listener is gone, so connect is refused.
    drop(UnixListener::bind(&sock).unwrap());
    let first = spawn("c1m server (first)", 18650);
    wait_unix_running(&sock);
    let meta = std::fs::metadata(&sock).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    let second = spawn("c1m server (second)", 18651).wait(Duration::from_secs(30));
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&sock) && err.contains("in use"), "{err}");
    assert_eq!(std::fs::metadata(&sock).unwrap().ino(), meta.ino());
    assert_eq!(unix_stats(&sock).unwrap().phase, "running");

    // `stop`: the file goes with the server.
    let mut c = UnixStream::connect(&sock).unwrap();
    c.write_all(b"stop\n").unwrap();
    let out = first.wait(Duration::from_secs(30));
    assert!(out.status.success());
    assert!(!Path::new(&sock).exists(), "socket left after stop");

    // SIGTERM: the same.
    let third = spawn("c1m server (third)", 18652);
    wait_unix_running(&sock);
    let pid = third.child.as_ref().unwrap().id() as i32;
    // SAFETY: pid is our own child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let out = third.wait(Duration::from_secs(30));
    assert!(out.status.success(), "{out:?}");
    assert!(!Path::new(&sock).exists(), "socket left after SIGTERM");
}

/// `--control-token-file` never takes over a file it did not create: someone else's
/// file is refused and left as it was; a token file another server made is read as the
/// token and left in place when this one ends; only its creator removes it.
#[test]
fn token_file_is_never_replaced_or_removed_by_a_server_that_did_not_create_it() {
    if !root_or_skip("token_file_is_never_replaced_or_removed_by_a_server_that_did_not_create_it") {
        return;
    }
    use std::os::unix::fs::chown;
    let dir = Dir::new("token-owner");
    let theirs = dir.join("theirs");
    std::fs::write(&theirs, "precious\n").unwrap();
    chown(&theirs, Some(65534), Some(65534)).unwrap();
    let refused = server(
        "c1m server (someone else's file)",
        18660,
        "127.0.0.1:18661",
        &["--control-token-file", &theirs],
    )
    .wait(Duration::from_secs(30));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains(&theirs) && err.contains("uid 65534"), "{err}");
    let meta = std::fs::metadata(&theirs).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (65534, 65534), "still theirs");
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "precious\n");

    // Two servers, one token path: the second reads the first's token and leaves it.
    let shared = dir.join("shared.token");
    let first = server(
        "c1m server (creates the token)",
        18662,
        "127.0.0.1:18663",
        &["--control-token-file", &shared],
    );
    wait_path(&shared);
    let made = std::fs::metadata(&shared).unwrap();
    let token = std::fs::read_to_string(&shared).unwrap().trim().to_owned();
    let admitted = |ep: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let got = probe(ep, "stats", Some(&token), None, None);
            if got.len() == 3 || Instant::now() > deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    assert_eq!(admitted("127.0.0.1:18663")[0], "{\"ok\":\"auth\"}");
    let second = server(
        "c1m server (shares the token)",
        18664,
        "127.0.0.1:18665",
        &["--control-token-file", &shared],
    );
    let with = admitted("127.0.0.1:18665");
    assert_eq!(
        with[0], "{\"ok\":\"auth\"}",
        "the second serves the same token: {with:?}"
    );
    let pid = second.child.as_ref().unwrap().id() as i32;
    // SAFETY: pid is our own child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    assert!(second.wait(Duration::from_secs(30)).status.success());
    let after = std::fs::metadata(&shared).expect("the first's token file outlives the second");
    assert_eq!(after.ino(), made.ino(), "not replaced");
    assert_eq!(std::fs::read_to_string(&shared).unwrap().trim(), token);
    assert_eq!(admitted("127.0.0.1:18663")[0], "{\"ok\":\"auth\"}");
    let pid = first.child.as_ref().unwrap().id() as i32;
    // SAFETY: pid is our own child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    assert!(first.wait(Duration::from_secs(30)).status.success());
    assert!(!Path::new(&shared).exists(), "its creator removes it");
}
