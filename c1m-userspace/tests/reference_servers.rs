//! The reference servers (`reference-servers/`, built by `cargo xtask reference-servers`)
//! each keep the common protocol (`reference-servers/PROTOCOL.md`): 2,000 WebSocket
//! connections from c1m's client held (kernel count from /proc, the server's own
//! `connections: N` line and the client's count agree), echo answered, and one SIGUSR1
//! delivers the 8-byte µs stamp to every connection (counted by a Python client: today's
//! c1m client expects its own 24-byte frame). Root: each test runs in a private network
//! namespace. A server not built is a loud SKIP naming the command that builds it.
//! Given `--tls-cert`/`--tls-key` (or `C1M_TLS_CERT`/`C1M_TLS_KEY`) each serves wss
//! instead, checked by `refservers/tls_probe.py` with a certificate made at test time.

use std::{
    fs,
    io::{BufRead, BufReader, Read as _, Write as _},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use lab_util::{fresh_dir, root_or_skip, wait_bounded};

use crate::lab_util;

const PORTS: &str = "20000-20003";
const PORT_RANGE: std::ops::RangeInclusive<u16> = 20000..=20003;
const CONNECTIONS: usize = 2000;
const PROBE_CONNECTIONS: usize = 200;

/// The server, killed and reaped on drop; its stdout goes to a file the test reads.
struct Server {
    child: Child,
    stdout: PathBuf,
}

impl Server {
    fn lines(&self) -> Vec<String> {
        fs::read_to_string(&self.stdout)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Waits (bounded) for a stdout line; panics with the output when it never comes.
    fn wait_line(&mut self, want: &str, timeout: Duration) {
        self.wait_line_from(0, want, timeout);
    }

    /// Waits (bounded) for a stdout line at index `from` or later (a count line printed
    /// before the state it must show is no answer); returns its index.
    fn wait_line_from(&mut self, from: usize, want: &str, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(i) = self.lines().iter().skip(from).position(|l| l == want) {
                return from + i;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "server exited ({status}) before `{want}`: {:?}",
                    self.lines()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("no `{want}` within {timeout:?}: {:?}", self.lines());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run_script(name: &str) -> Option<PathBuf> {
    let p = lab_util::reference_servers_dir().join(name).join("run");
    if p.exists() {
        return Some(p);
    }
    eprintln!(
        "SKIP reference server {name}: {} not built; run `cargo xtask reference-servers` \
         (cargo xtask test does)",
        p.display()
    );
    None
}

/// ESTABLISHED sockets whose local port is a server port, in this thread's namespace
/// (tcp6 too: the JVM binds IPv4 addresses on dual-stack sockets).
fn kernel_established_on_server_ports() -> usize {
    let mut n = 0;
    for table in ["/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"] {
        let text = fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let mut f = line.split_whitespace();
            let (Some(local), Some(_remote), Some(state)) = (f.nth(1), f.next(), f.next()) else {
                continue;
            };
            let port = local
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            if state == "01" && port.is_some_and(|p| PORT_RANGE.contains(&p)) {
                n += 1;
            }
        }
    }
    n
}

fn check(name: &str) {
    let test = format!("reference_server_{name}");
    if !root_or_skip(&test) {
        return;
    }
    let Some(run) = run_script(name) else {
        return;
    };
    c1m::netns::enter_private().expect("private netns");
    let dir = fresh_dir(&test);
    let stdout = dir.join("server.out");
    let child = Command::new(&run)
        .args(["--host", "127.0.0.1", "--ports", PORTS])
        .stdout(fs::File::create(&stdout).expect("server.out"))
        .stderr(fs::File::create(dir.join("server.err")).expect("server.err"))
        .spawn()
        .expect("start the reference server");
    let mut server = Server { child, stdout };
    let pid = server.child.id();
    server.wait_line(
        &format!("listening: 127.0.0.1:{PORTS}"),
        Duration::from_secs(30),
    );

    // c1m's client: 2,000 WebSocket connections, one echo round trip each, held.
    let mut client = Command::new(env!("CARGO_BIN_EXE_c1m"))
        .args([
            "client",
            "--mode",
            "ws",
            "--ports",
            PORTS,
            "--echo-count",
            "1",
        ])
        .args(["-n", &CONNECTIONS.to_string(), "--hold", "6s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("c1m client");
    // Generous: at a load average of 178 (other agents) all four once held 0 after 30 s.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut held = 0;
    while Instant::now() < deadline {
        held = kernel_established_on_server_ports();
        if held == CONNECTIONS {
            break;
        }
        if let Ok(Some(_)) = client.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if held != CONNECTIONS {
        let _ = client.kill();
        let out = client.wait_with_output().expect("client output");
        panic!(
            "server-side ESTABLISHED in the kernel: {held}, not {CONNECTIONS}; server: {:?}\nclient:\n{}{}",
            server.lines(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    server.wait_line(
        &format!("connections: {CONNECTIONS}"),
        Duration::from_secs(10),
    );
    // Hold 6 s, then the teardown: a client that never ends is the failure.
    let out = wait_bounded(client, Duration::from_secs(60), "c1m client");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with(&format!("attempted={CONNECTIONS} connected={CONNECTIONS} "))),
        "{text}"
    );
    assert!(
        text.contains(&format!("echo_round_trips={CONNECTIONS} ")),
        "{text}"
    );
    assert!(text.contains("\nfailures: \n"), "{text}");
    server.wait_line("connections: 0", Duration::from_secs(10));

    // The push, counted by a client that reads the 8-byte stamp.
    let probe = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/refservers/push_probe.py");
    let probe_ports: Vec<String> = PORT_RANGE.map(|p| p.to_string()).collect();
    let probe_ports = probe_ports.join(",");
    let out = Command::new("python3")
        .arg(probe)
        .args([
            "--ports",
            &probe_ports,
            "-n",
            &PROBE_CONNECTIONS.to_string(),
        ])
        .args(["--pid", &pid.to_string()])
        .output()
        .expect("python3 push_probe.py");
    let probe_out = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{probe_out}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let n = PROBE_CONNECTIONS;
    assert_eq!(
        BufReader::new(out.stdout.as_slice())
            .lines()
            .map_while(Result::ok)
            .last()
            .unwrap_or_default(),
        format!("connected={n} echoed={n} pushed={n} bad=0")
    );
}

#[test]
fn reference_server_python() {
    check("python");
}

#[test]
fn reference_server_node() {
    check("node");
}

#[test]
fn reference_server_go() {
    check("go");
}

#[test]
fn reference_server_netty() {
    check("netty");
}

/// What a runtime or package manager says about itself: the output of `program args…`
/// (stdout and stderr), with the process's failure as the panic.
fn said(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {out:?}");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The runtime and library each server will name, as their own tools report them.
fn expected_versions(name: &str, run: &Path) -> (String, String) {
    let built = run.parent().expect("the server's build folder");
    match name {
        "python" => {
            let v = said(
                "python3",
                &[
                    "-c",
                    "import platform, websockets; print(f'python@{platform.python_version()} websockets@{websockets.__version__}')",
                ],
            );
            let (rt, lib) = v.trim().split_once(' ').expect("two words");
            (rt.to_owned(), lib.to_owned())
        }
        "node" => {
            let ws = built.join("node_modules/ws/package.json");
            let v = said(
                "node",
                &[
                    "-p",
                    &format!(
                        "'node@' + process.versions.node + ' ws@' + require({:?}).version",
                        ws.display().to_string()
                    ),
                ],
            );
            let (rt, lib) = v.trim().split_once(' ').expect("two words");
            (rt.to_owned(), lib.to_owned())
        }
        "go" => {
            // "go version go1.19.8 linux/amd64"; a GOPATH binary knows the library only
            // from the Debian package it was built against.
            let v = said("go", &["version"]);
            let go = v
                .split_whitespace()
                .nth(2)
                .expect("go1.x")
                .trim_start_matches("go");
            let deb = said(
                "dpkg-query",
                &["-W", "-f=${Version}", "golang-github-gorilla-websocket-dev"],
            );
            let lib = deb.trim().split('-').next().expect("upstream version");
            (format!("go@{go}"), format!("gorilla/websocket@{lib}"))
        }
        "netty" => {
            let v = said("java", &["-XshowSettings:properties", "-version"]);
            let java = v
                .lines()
                .find_map(|l| l.trim().strip_prefix("java.version = "))
                .expect("java.version");
            let props = said(
                "python3",
                &[
                    "-c",
                    "import zipfile; print(zipfile.ZipFile('/usr/share/java/netty-codec-http.jar').read('META-INF/io.netty.versions.properties').decode())",
                ],
            );
            let netty = props
                .lines()
                .find_map(|l| l.strip_prefix("netty-codec-http.version="))
                .expect("netty-codec-http.version");
            (format!("java@{java}"), format!("netty@{netty}"))
        }
        other => panic!("no expectation for {other}"),
    }
}

/// Each server's first line names its runtime and library at the versions their own
/// tools report (PROTOCOL.md, `version:`), and c1m reads it as that.
#[test]
fn each_reference_server_names_the_versions_its_runtime_reports() {
    let test = "each_reference_server_names_the_versions_its_runtime_reports";
    if !root_or_skip(test) {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let dir = fresh_dir(test);
    for name in ["python", "node", "go", "netty"] {
        let Some(run) = run_script(name) else {
            continue;
        };
        let stdout = dir.join(format!("{name}.out"));
        let child = Command::new(&run)
            .args(["--host", "127.0.0.1", "--ports", "20000"])
            .stdout(fs::File::create(&stdout).expect("stdout file"))
            .stderr(Stdio::null())
            .spawn()
            .expect("start the reference server");
        let mut server = Server { child, stdout };
        server.wait_line("listening: 127.0.0.1:20000", Duration::from_secs(30));
        let lines = server.lines();
        let (runtime, library) = expected_versions(name, &run);
        assert_eq!(
            lines[0],
            format!("version: runtime={runtime} library={library}"),
            "{name}: {lines:?}"
        );
        let parsed = c1m::lab::run::foreign::parse_version_line(&lines[0]).expect("a version line");
        let words = |s: Option<c1m::model::Software>| {
            let s = s.expect("named");
            assert!(!s.name.is_empty() && !s.version.is_empty(), "{name}: {s:?}");
            format!("{}@{}", s.name, s.version)
        };
        assert_eq!(
            (words(parsed.runtime), words(parsed.library)),
            (runtime, library)
        );
    }
}

// wss (PROTOCOL.md, `tls`): the same protocol over TLS when given a certificate and key.

const TLS_PORTS: &str = "20000-20001";
const TLS_PROBE_PORTS: &str = "20000,20001";
const TLS_CONNECTIONS: usize = 20;

/// The private key a test certificate comes with, in each form the contract names.
#[derive(Clone, Copy, Debug)]
enum TlsKey {
    /// ECDSA P-256, PKCS#8 (`BEGIN PRIVATE KEY`): what `openssl req` writes.
    EcPkcs8,
    /// ECDSA P-256, SEC1 (`BEGIN EC PRIVATE KEY`).
    EcSec1,
    /// RSA-2048, PKCS#1 (`BEGIN RSA PRIVATE KEY`).
    RsaPkcs1,
}

/// How the server is told where its certificate and key are.
#[derive(Clone, Copy, Debug)]
enum TlsGiven {
    Flags,
    Env,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed certificate for 127.0.0.1 and localhost, valid one day, made in `dir`:
/// (the certificate, its key in the form asked for).
fn make_cert(dir: &Path, key: TlsKey) -> (PathBuf, PathBuf) {
    let newkey: &[&str] = match key {
        TlsKey::EcPkcs8 | TlsKey::EcSec1 => {
            &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
        }
        TlsKey::RsaPkcs1 => &["-newkey", "rsa:2048"],
    };
    let rest = [
        "-nodes",
        "-keyout",
        "key.pem",
        "-out",
        "cert.pem",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=IP:127.0.0.1,DNS:localhost",
        "-days",
        "1",
    ];
    openssl(dir, &[&["req", "-x509"], newkey, &rest].concat());
    let (file, first_line) = match key {
        TlsKey::EcPkcs8 => ("key.pem", "-----BEGIN PRIVATE KEY-----"),
        TlsKey::EcSec1 => {
            openssl(dir, &["ec", "-in", "key.pem", "-out", "key-sec1.pem"]);
            ("key-sec1.pem", "-----BEGIN EC PRIVATE KEY-----")
        }
        TlsKey::RsaPkcs1 => {
            openssl(
                dir,
                &[
                    "rsa",
                    "-in",
                    "key.pem",
                    "-traditional",
                    "-out",
                    "key-pkcs1.pem",
                ],
            );
            ("key-pkcs1.pem", "-----BEGIN RSA PRIVATE KEY-----")
        }
    };
    let key_file = dir.join(file);
    let text = fs::read_to_string(&key_file).expect("the key file");
    // The form under test, not whatever this openssl writes by default.
    assert_eq!(text.lines().next(), Some(first_line), "{key:?}");
    (dir.join("cert.pem"), key_file)
}

/// The probe's next stdout line (bounded); panics with its stderr when none comes.
fn probe_line(lines: &mpsc::Receiver<String>, probe: &mut Child, what: &str) -> String {
    match lines.recv_timeout(Duration::from_secs(60)) {
        Ok(line) => line,
        Err(e) => {
            let _ = probe.kill();
            let _ = probe.wait();
            let mut err = String::new();
            if let Some(mut s) = probe.stderr.take() {
                let _ = s.read_to_string(&mut err);
            }
            panic!("tls_probe.py gave no {what} line ({e}): {err}");
        }
    }
}

/// The server serves wss with `key`: `tls: on` before `listening:`; 20 connections over
/// TLS 1.2 and 1.3 trusting exactly its certificate, each echoing bytes exactly; a plain
/// ws client refused on every port; `connections: 20`; one SIGUSR1 brings exactly one
/// 8-byte stamp to each; `connections: 0` once they close; SIGTERM ends it.
fn check_tls(name: &str, key: TlsKey, given: TlsGiven) {
    check_tls_on(name, key, given, 1);
}

/// [`check_tls`] with `--workers workers` (more than one: on ports of their own).
fn check_tls_on(name: &str, key: TlsKey, given: TlsGiven, workers: usize) {
    let (ports, probe_ports) = if workers > 1 {
        ("24410-24411", "24410,24411")
    } else {
        (TLS_PORTS, TLS_PROBE_PORTS)
    };
    let test = format!("reference_server_{name}_wss_{key:?}_{given:?}_{workers}");
    if !root_or_skip(&test) {
        return;
    }
    let Some(run) = run_script(name) else {
        return;
    };
    c1m::netns::enter_private().expect("private netns");
    let dir = fresh_dir(&test);
    let (cert, key_file) = make_cert(&dir, key);
    let stdout = dir.join("server.out");
    let mut cmd = Command::new(&run);
    cmd.args(["--host", "127.0.0.1", "--ports", ports])
        .args(["--workers", &workers.to_string()])
        .env_remove("C1M_TLS_CERT")
        .env_remove("C1M_TLS_KEY");
    match given {
        TlsGiven::Flags => cmd
            .arg("--tls-cert")
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key_file),
        TlsGiven::Env => cmd.env("C1M_TLS_CERT", &cert).env("C1M_TLS_KEY", &key_file),
    };
    let child = cmd
        .stdout(fs::File::create(&stdout).expect("server.out"))
        .stderr(fs::File::create(dir.join("server.err")).expect("server.err"))
        .spawn()
        .expect("start the reference server");
    let mut server = Server { child, stdout };
    let pid = server.child.id();
    let listening_line = format!("listening: 127.0.0.1:{ports}");
    let listening = server.wait_line_from(0, &listening_line, Duration::from_secs(60));
    let worker_pids = workers_of(pid);
    assert_eq!(
        worker_pids.len(),
        if workers > 1 { workers } else { 0 },
        "{worker_pids:?}"
    );
    let lines = server.lines();
    assert!(lines[0].starts_with("version: "), "{lines:?}");
    assert_eq!(
        lines[1..=listening],
        ["tls: on".to_owned(), listening_line],
        "{lines:?}"
    );

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/refservers/tls_probe.py");
    let mut probe = Command::new("python3")
        .arg(script)
        .args(["--ports", probe_ports, "-n", &TLS_CONNECTIONS.to_string()])
        .args(["--pid", &pid.to_string(), "--ca"])
        .arg(&cert)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 tls_probe.py");
    let mut go = probe.stdin.take().expect("probe stdin");
    let out = probe.stdout.take().expect("probe stdout");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    let (n, half) = (TLS_CONNECTIONS, TLS_CONNECTIONS / 2);
    assert_eq!(
        probe_line(&lines, &mut probe, "open"),
        format!(
            "open={n} tls12={half} tls13={half} echoed={n} plain_refused=2 plain_open=0 plain_hung=0"
        ),
        "{:?}",
        server.lines()
    );
    // The probe holds its connections until told to push: the count sees all of them.
    let held = server.wait_line_from(
        listening,
        &format!("connections: {n}"),
        Duration::from_secs(10),
    );
    go.write_all(b"push\n").expect("tell the probe to push");
    assert_eq!(
        probe_line(&lines, &mut probe, "push"),
        format!("pushed={n} extra=0 bad_frame=0 bad_stamp=0 failed=0")
    );
    drop(go);
    let out = wait_bounded(probe, Duration::from_secs(30), "tls_probe.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.wait_line_from(held + 1, "connections: 0", Duration::from_secs(10));

    // SAFETY: pid is our own child, not yet reaped (Server reaps it on drop).
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut ended = None;
    while ended.is_none() && Instant::now() < deadline {
        ended = server.child.try_wait().expect("try_wait");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        ended.is_some(),
        "SIGTERM did not end it: {:?}",
        server.lines()
    );
    all_ended(&worker_pids, "SIGTERM");
}

#[test]
fn reference_server_python_wss() {
    check_tls("python", TlsKey::EcPkcs8, TlsGiven::Flags);
}

#[test]
fn reference_server_node_wss() {
    check_tls("node", TlsKey::EcPkcs8, TlsGiven::Flags);
}

#[test]
fn reference_server_go_wss() {
    check_tls("go", TlsKey::EcPkcs8, TlsGiven::Flags);
}

#[test]
fn reference_server_netty_wss() {
    check_tls("netty", TlsKey::EcPkcs8, TlsGiven::Flags);
}

#[test]
fn reference_server_python_wss_workers() {
    check_tls_on("python", TlsKey::EcPkcs8, TlsGiven::Flags, WORKERS);
}

#[test]
fn reference_server_node_wss_workers() {
    check_tls_on("node", TlsKey::EcPkcs8, TlsGiven::Flags, WORKERS);
}

#[test]
fn reference_server_go_wss_workers() {
    check_tls_on("go", TlsKey::EcPkcs8, TlsGiven::Flags, WORKERS);
}

#[test]
fn reference_server_netty_wss_workers() {
    check_tls_on("netty", TlsKey::EcPkcs8, TlsGiven::Flags, WORKERS);
}

#[test]
fn reference_server_python_wss_rsa_pkcs1_key_from_env() {
    check_tls("python", TlsKey::RsaPkcs1, TlsGiven::Env);
}

#[test]
fn reference_server_node_wss_rsa_pkcs1_key_from_env() {
    check_tls("node", TlsKey::RsaPkcs1, TlsGiven::Env);
}

#[test]
fn reference_server_go_wss_rsa_pkcs1_key_from_env() {
    check_tls("go", TlsKey::RsaPkcs1, TlsGiven::Env);
}

#[test]
fn reference_server_netty_wss_rsa_pkcs1_key_from_env() {
    check_tls("netty", TlsKey::RsaPkcs1, TlsGiven::Env);
}

#[test]
fn reference_server_python_wss_ec_sec1_key() {
    check_tls("python", TlsKey::EcSec1, TlsGiven::Flags);
}

#[test]
fn reference_server_node_wss_ec_sec1_key() {
    check_tls("node", TlsKey::EcSec1, TlsGiven::Flags);
}

#[test]
fn reference_server_go_wss_ec_sec1_key() {
    check_tls("go", TlsKey::EcSec1, TlsGiven::Flags);
}

#[test]
fn reference_server_netty_wss_ec_sec1_key() {
    check_tls("netty", TlsKey::EcSec1, TlsGiven::Flags);
}

/// Half a TLS configuration (a certificate without its key, by flag; a key without its
/// certificate, from the environment) is refused before binding: exit 2 and one line on
/// stderr naming the missing flag.
#[test]
fn reference_servers_refuse_half_a_tls_configuration() {
    let test = "reference_servers_refuse_half_a_tls_configuration";
    if !root_or_skip(test) {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let dir = fresh_dir(test);
    let (cert, key) = make_cert(&dir, TlsKey::EcPkcs8);
    for name in ["python", "node", "go", "netty"] {
        let Some(run) = run_script(name) else {
            continue;
        };
        for given in [TlsGiven::Flags, TlsGiven::Env] {
            let mut cmd = Command::new(&run);
            cmd.args(["--host", "127.0.0.1", "--ports", "20000"])
                .env_remove("C1M_TLS_CERT")
                .env_remove("C1M_TLS_KEY");
            let want = match given {
                TlsGiven::Flags => {
                    cmd.arg("--tls-cert").arg(&cert);
                    "error: --tls-key missing (--tls-cert given; TLS needs both)"
                }
                TlsGiven::Env => {
                    cmd.env("C1M_TLS_KEY", &key);
                    "error: --tls-cert missing (--tls-key given; TLS needs both)"
                }
            };
            let child = cmd
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start the reference server");
            let out = wait_bounded(child, Duration::from_secs(30), name);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert_eq!(out.status.code(), Some(2), "{name} {given:?}: {stdout}");
            assert_eq!(
                String::from_utf8_lossy(&out.stderr),
                format!("{want}\n"),
                "{name} {given:?}"
            );
            assert!(!stdout.contains("listening:"), "{name} {given:?}: {stdout}");
        }
    }
}

// Worker processes (PROTOCOL.md, `workers`): past one process's fd limit a server runs
// `--workers N` processes on the same ports; the PID started still speaks the protocol.

const WORKER_PORTS: &str = "24400-24403";
const WORKER_PORT_RANGE: std::ops::RangeInclusive<u16> = 24400..=24403;
const WORKERS: usize = 3;
const WORKER_CONNECTIONS: usize = 300;

/// `run --ports WORKER_PORTS --workers 3 EXTRA…`, its stdout and stderr in `dir`.
fn start_with_workers(run: &Path, dir: &Path, tag: &str, extra: &[&std::ffi::OsStr]) -> Server {
    let stdout = dir.join(format!("{tag}.out"));
    let child = Command::new(run)
        .args(["--host", "127.0.0.1", "--ports", WORKER_PORTS])
        .args(["--workers", &WORKERS.to_string()])
        .args(extra)
        .env_remove("C1M_WORKERS")
        .stdout(fs::File::create(&stdout).expect("stdout file"))
        .stderr(fs::File::create(dir.join(format!("{tag}.err"))).expect("stderr file"))
        .spawn()
        .expect("start the reference server");
    Server { child, stdout }
}

/// The server's workers: the processes below it (each its child, none left the tree).
fn workers_of(pid: u32) -> Vec<u32> {
    let tree = c1m::lab::run::foreign::tree(pid);
    let workers: Vec<u32> = tree.into_iter().filter(|p| *p != pid).collect();
    for w in &workers {
        let stat = fs::read_to_string(format!("/proc/{w}/stat")).unwrap_or_default();
        // "pid (comm) state ppid …": the comm may hold spaces, so read after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        assert_eq!(ppid, Some(pid), "worker {w} of {pid}: {stat}");
    }
    workers
}

/// The inodes of ESTABLISHED sockets on the worker ports, in this thread's namespace.
fn established_on_worker_ports() -> std::collections::HashSet<String> {
    let mut inodes = std::collections::HashSet::new();
    for table in ["/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"] {
        let text = fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let port = local
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            if *state == "01" && port.is_some_and(|p| WORKER_PORT_RANGE.contains(&p)) {
                inodes.insert(inode.to_string());
            }
        }
    }
    inodes
}

/// How many of `sockets` (inodes) a process holds a descriptor of.
fn held_by(pid: u32, sockets: &std::collections::HashSet<String>) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| fs::read_link(e.path()).ok())
                .filter(|l| {
                    l.to_string_lossy()
                        .strip_prefix("socket:[")
                        .and_then(|r| r.strip_suffix(']'))
                        .is_some_and(|i| sockets.contains(i))
                })
                .count()
        })
        .unwrap_or(0)
}

/// Gone, or a zombie its parent has yet to reap.
fn ended(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            == Some("Z")
    })
}

/// Waits (bounded) for the server to exit; its status.
fn exit_within(server: &mut Server, limit: Duration, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = server.child.try_wait().expect("try_wait") {
            return status;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "{what}: the server did not exit within {limit:?}: {:?}",
        server.lines()
    );
}

/// Every worker ended too (bounded: an orphan is reaped by init).
fn all_ended(workers: &[u32], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && !workers.iter().all(|w| ended(*w)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<u32> = workers.iter().copied().filter(|w| !ended(*w)).collect();
    assert!(left.is_empty(), "{what}: workers {left:?} still running");
}

/// `--workers 3`: `listening:` once all three listen; 300 connections of c1m's client
/// spread over the three (each holds a share of the sockets), every one echoed; one
/// `connections: 300` line for them all; one SIGUSR1 to the PID started brings one
/// stamp to every connection; SIGTERM ends every worker; a second start with one worker
/// killed ends non-zero, saying so on stderr, its other workers with it.
fn check_workers(name: &str) {
    let test = format!("reference_server_{name}_workers");
    if !root_or_skip(&test) {
        return;
    }
    let Some(run) = run_script(name) else {
        return;
    };
    c1m::netns::enter_private().expect("private netns");
    let dir = fresh_dir(&test);
    let mut server = start_with_workers(&run, &dir, "server", &[]);
    let pid = server.child.id();
    let listening = server.wait_line_from(
        0,
        &format!("listening: 127.0.0.1:{WORKER_PORTS}"),
        Duration::from_secs(60),
    );
    let workers = workers_of(pid);
    assert_eq!(workers.len(), WORKERS, "{name}: {workers:?}");

    let client = Command::new(env!("CARGO_BIN_EXE_c1m"))
        .args(["client", "--mode", "ws", "--ports", WORKER_PORTS])
        .args(["--echo-count", "1", "--hold", "8s"])
        .args(["-n", &WORKER_CONNECTIONS.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("c1m client");
    let counted = server.wait_line_from(
        listening,
        &format!("connections: {WORKER_CONNECTIONS}"),
        Duration::from_secs(60),
    );
    // Each worker holds its share; together, every connection (a Node primary holds an
    // accepted socket only until it hands it over).
    let open = established_on_worker_ports();
    let shares: Vec<usize> = workers.iter().map(|w| held_by(*w, &open)).collect();
    assert_eq!(
        shares.iter().sum::<usize>(),
        WORKER_CONNECTIONS,
        "{name}: {shares:?}"
    );
    // SO_REUSEPORT servers get a share by the 4-tuple's hash, near a third each. Node's
    // workers accept on one shared socket (SCHED_NONE): the kernel hands each connection
    // to whichever worker waits, so a busy box skews it ([118, 22, 160] beside two
    // builds, 2026-12-04): each must hold some.
    let least = if name == "node" {
        1
    } else {
        WORKER_CONNECTIONS / WORKERS / 4
    };
    assert!(
        shares.iter().all(|s| *s >= least),
        "{name}: connections not spread over the workers: {shares:?}"
    );
    let out = wait_bounded(client, Duration::from_secs(60), "c1m client");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    let n = WORKER_CONNECTIONS;
    assert!(text.contains(&format!("echo_round_trips={n} ")), "{text}");
    server.wait_line_from(counted + 1, "connections: 0", Duration::from_secs(10));

    let probe = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/refservers/push_probe.py");
    let probe_ports: Vec<String> = WORKER_PORT_RANGE.map(|p| p.to_string()).collect();
    let out = Command::new("python3")
        .arg(probe)
        .args(["--ports", &probe_ports.join(","), "-n", &n.to_string()])
        .args(["--pid", &pid.to_string()])
        .output()
        .expect("python3 push_probe.py");
    let probe_out = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{probe_out}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        probe_out.lines().last().unwrap_or_default(),
        format!("connected={n} echoed={n} pushed={n} bad=0"),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // SAFETY: pid is our own child, not yet reaped (Server reaps it on drop).
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    exit_within(&mut server, Duration::from_secs(20), "SIGTERM");
    all_ended(&workers, "SIGTERM");
    drop(server);

    // A worker that dies takes the server with it, never a silent partial server.
    let mut server = start_with_workers(&run, &dir, "killed", &[]);
    let pid = server.child.id();
    server.wait_line(
        &format!("listening: 127.0.0.1:{WORKER_PORTS}"),
        Duration::from_secs(60),
    );
    let workers = workers_of(pid);
    assert_eq!(workers.len(), WORKERS, "{name}: {workers:?}");
    // SAFETY: a child of our child, alive: it just listened.
    unsafe { libc::kill(workers[1] as i32, libc::SIGKILL) };
    let status = exit_within(&mut server, Duration::from_secs(20), "a worker killed");
    assert!(!status.success(), "{name}: {status}");
    let err = fs::read_to_string(dir.join("killed.err")).unwrap_or_default();
    assert!(
        err.lines().any(|l| l.starts_with("error: worker ")
            && l.contains(&format!("(pid {}) ended: ", workers[1]))),
        "{name}: {err}"
    );
    all_ended(&workers, "a worker killed");
}

#[test]
fn reference_server_python_workers() {
    check_workers("python");
}

#[test]
fn reference_server_node_workers() {
    check_workers("node");
}

#[test]
fn reference_server_go_workers() {
    check_workers("go");
}

#[test]
fn reference_server_netty_workers() {
    check_workers("netty");
}
