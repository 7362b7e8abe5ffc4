//! wss and TLS under the raw modes, against real third-party TLS peers (Python's ssl and
//! `websockets`), and the bad inputs a TLS port meets: each counted by its reason, the
//! server still up. Ports 23300–23349, control 23390–23399; resumption and an expired
//! certificate: ports 23500–23549, control 23590–23599.
#![allow(clippy::unwrap_used)] // panics are the assertions

use crate::workload_util;

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use workload_util::{Proc, c1m, control, require_python_websockets, scratch, stats, wait_for};

const T: Duration = Duration::from_secs(90);

/// `c1m server --tls` (self-signed, its certificate written to `cert`) on `port`.
fn tls_server(port: u16, ctl: &str, cert: &Path, mode: &str, extra: &[&str]) -> Proc {
    let server = Proc::spawn(
        "c1m server --tls",
        c1m()
            .args(["server", "--mode", mode, "--ports", &port.to_string()])
            .args(["--quiet", "--control", ctl, "--tls", "--tls-cert-out"])
            .arg(cert)
            .args(extra),
    );
    wait_for(ctl, "server up", Duration::from_secs(60), |s| {
        s.phase == "running"
    });
    server
}

/// Python client over wss trusting exactly CERT: per connection a text echo and a
/// 76,801-byte binary echo; then a push asked of the server's control endpoint reaches
/// every connection; then clean closes.
const PY_WSS_CLIENT: &str = r#"
import asyncio, ssl, struct, sys
from websockets.asyncio.client import connect
PORT, CTL, N, CERT = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
ctx = ssl.create_default_context(cafile=CERT)
async def one(i):
    ws = await connect(f"wss://127.0.0.1:{PORT}/", ssl=ctx, max_size=None)
    await ws.send(f"héllo {i}")
    assert await ws.recv() == f"héllo {i}"
    data = bytes(range(256)) * 300 + bytes([i % 256])
    await ws.send(data)
    assert await ws.recv() == data
    return ws
async def main():
    conns = await asyncio.gather(*(one(i) for i in range(N)))
    host, port = CTL.rsplit(":", 1)
    r, w = await asyncio.open_connection(host, int(port))
    w.write(b"push\n"); await w.drain()
    await r.readline()
    got = 0
    for ws in conns:
        m = await asyncio.wait_for(ws.recv(), 30)
        assert isinstance(m, bytes) and len(m) == 24, m
        assert struct.unpack(">Q", m[:8])[0] == 1
        got += 1
    for ws in conns:
        await ws.close()
        assert ws.close_code == 1000, ws.close_code
    print(f"OK {got}", flush=True)
asyncio.run(main())
"#;

#[test]
fn python_speaks_wss_with_the_epoll_server_byte_for_byte() {
    require_python_websockets();
    const N: u64 = 30;
    let (port, ctl) = (23300u16, "127.0.0.1:23390");
    let dir = scratch("tls-py-client");
    let cert = dir.path().join("cert.pem");
    let server = tls_server(port, ctl, &cert, "ws", &[]);
    let out = Proc::spawn(
        "python wss client",
        Command::new("python3").args([
            "-c",
            PY_WSS_CLIENT,
            &port.to_string(),
            ctl,
            &N.to_string(),
            cert.to_str().unwrap(),
        ]),
    )
    .wait(T);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(&format!("OK {N}")),
        "python wss client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = wait_for(ctl, "closes counted", T, |s| {
        s.counters.closed.peer_closed == N
    });
    let c = s.counters;
    assert_eq!((c.accepted, c.open, c.ws_open), (N, 0, 0));
    assert_eq!((c.tls_handshakes.full, c.tls_handshakes.resumed), (N, 0));
    assert_eq!((c.echo_round_trips, c.pushes_sent), (2 * N, N));
    assert_eq!(c.tls_errors.total() + c.protocol_errors.total(), 0);
    control(ctl, "stop").unwrap();
    assert!(server.wait(T).status.success());
}

/// A Python wss server (websockets over ssl, the certificate openssl made): one push
/// frame on connect, then echo.
const PY_WSS_SERVER: &str = r#"
import asyncio, ssl, struct, sys, time
from websockets.asyncio.server import serve
PORT, CERT, KEY = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(CERT, KEY)
async def handler(ws):
    now = time.time_ns()
    await ws.send(struct.pack(">QQQ", 7, now, time.time_ns()))
    async for m in ws:
        await ws.send(m)
async def main():
    async with serve(handler, "127.0.0.1", PORT, ssl=ctx, ping_interval=None):
        print("READY", flush=True)
        await asyncio.sleep(120)
asyncio.run(main())
"#;

fn openssl_pair(dir: &Path, name: &str) -> (String, String) {
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-subj", &format!("/CN={name}"), "-days", "1"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        // openssl's -x509 makes a CA certificate, which webpki (rustls) refuses as a
        // server's own: a leaf says so.
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        cert.to_str().unwrap().to_owned(),
        key.to_str().unwrap().to_owned(),
    )
}

#[test]
fn the_epoll_client_speaks_wss_to_a_python_server_and_refuses_one_it_does_not_trust() {
    require_python_websockets();
    const N: u64 = 100;
    let port = 23310u16;
    let dir = scratch("tls-py-server");
    let (cert, key) = openssl_pair(dir.path(), "pyserver");
    let (other, _) = openssl_pair(dir.path(), "someone-else");
    let mut child = Command::new("python3")
        .args(["-c", PY_WSS_SERVER, &port.to_string(), &cert, &key])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _py = Proc {
        child: Some(child),
        name: "python wss server",
    };
    assert_eq!(line.trim(), "READY");
    let client = |ca: &str, n: u64, json: &Path| {
        c1m()
            .args([
                "client",
                "--mode",
                "ws",
                "--ports",
                &port.to_string(),
                "--quiet",
            ])
            .args(["--hold", "1s", "-n", &n.to_string(), "--echo-count", "2"])
            .args(["--tls-ca", ca, "--stats-json"])
            .arg(json)
            .env("C1M_ENGINE", "epoll")
            .output()
            .unwrap()
    };
    let json = dir.path().join("good.json");
    let out = client(&cert, N, &json);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: c1m::workload::stats::snapshot::AppSnapshot =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let c = s.counters;
    assert_eq!(
        (
            c.connected,
            c.echo_round_trips,
            c.pushes_received,
            c.tls_handshakes.full
        ),
        (N, 2 * N, N, N)
    );
    assert_eq!(c.failures.total() + c.tls_errors.total(), 0);
    assert_eq!(c.closed.local_close, N);

    // A certificate nobody vouched for: every connect fails, counted as TLS, by reason.
    let json = dir.path().join("untrusted.json");
    let _ = client(&other, 5, &json);
    let s: c1m::workload::stats::snapshot::AppSnapshot =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let c = s.counters;
    assert_eq!(
        (
            c.connected,
            c.failures.tls,
            c.tls_errors.untrusted_certificate
        ),
        (0, 5, 5),
        "{:?}",
        c.tls_errors
    );
}

/// Sends `bytes`, then (if `close`) ends its side; returns once the server closed.
fn poke(port: u16, bytes: &[u8], close: bool) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(bytes).unwrap();
    if close {
        s.shutdown(std::net::Shutdown::Write).unwrap();
    }
    let mut back = Vec::new();
    let _ = s.read_to_end(&mut back);
    back
}

#[test]
fn bad_tls_input_is_counted_by_reason_and_the_server_stays_up() {
    let (port, ctl) = (23320u16, "127.0.0.1:23391");
    let dir = scratch("tls-bad");
    let cert = dir.path().join("cert.pem");
    let server = tls_server(port, ctl, &cert, "ws", &["--handshake-timeout", "1s"]);
    // Plain HTTP to a TLS port: not TLS; the server answers with a fatal alert (type 21).
    let back = poke(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", false);
    assert_eq!(back.first(), Some(&21), "an alert record: {back:x?}");
    // A ClientHello's record header promising 512 bytes, 4 of them sent, then EOF.
    poke(
        port,
        &[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc],
        true,
    );
    // Slowloris: 3 bytes, then nothing; the handshake timeout ends it.
    poke(port, &[0x16, 0x03, 0x01], false);
    // A client that does not trust the server's certificate: the server hears its alert.
    let (other, _) = openssl_pair(dir.path(), "other");
    let out = c1m()
        .args([
            "client",
            "--mode",
            "ws",
            "--ports",
            &port.to_string(),
            "--quiet",
        ])
        .args(["--hold", "1s", "-n", "4", "--tls-ca", &other])
        .env("C1M_ENGINE", "epoll")
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panick"));
    let s = wait_for(ctl, "every bad input counted", T, |s| {
        let e = &s.counters.tls_errors;
        e.not_tls == 1 && e.truncated == 1 && e.timeout == 1 && e.peer_rejected_certificate == 4
    });
    let c = s.counters;
    assert_eq!(
        (c.closed.tls, c.tls_errors.total(), c.open),
        (7, 7, 0),
        "{:?}",
        c.tls_errors
    );
    // Still up, and a client that trusts it gets through.
    let json = dir.path().join("after.json");
    let out = c1m()
        .args([
            "client",
            "--mode",
            "ws",
            "--ports",
            &port.to_string(),
            "--quiet",
        ])
        .args(["--hold", "0s", "-n", "10", "--tls-ca"])
        .arg(&cert)
        .arg("--stats-json")
        .arg(&json)
        .env("C1M_ENGINE", "epoll")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = wait_for(ctl, "the good ones", T, |s| {
        s.counters.tls_handshakes.full == 10
    });
    assert_eq!(s.counters.tls_errors.total(), 7);
    assert!(stats(ctl).is_some());
    control(ctl, "stop").unwrap();
    assert!(server.wait(T).status.success());
}

#[test]
fn tls_under_hold_and_echo_and_bad_flags_are_one_line_refusals() {
    let (port, ctl) = (23330u16, "127.0.0.1:23392");
    let dir = scratch("tls-raw");
    let cert = dir.path().join("cert.pem");
    let server = tls_server(port, ctl, &cert, "echo", &[]);
    let json = dir.path().join("echo.json");
    let out = c1m()
        .args([
            "client",
            "--mode",
            "echo",
            "--ports",
            &port.to_string(),
            "--quiet",
        ])
        .args([
            "--hold",
            "0s",
            "-n",
            "50",
            "--echo-count",
            "3",
            "--payload-size",
            "20000",
        ])
        .arg("--tls-ca")
        .arg(&cert)
        .arg("--stats-json")
        .arg(&json)
        .env("C1M_ENGINE", "epoll")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: c1m::workload::stats::snapshot::AppSnapshot =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(
        (
            s.counters.connected,
            s.counters.echo_round_trips,
            s.counters.tls_handshakes.full
        ),
        (50, 150, 50)
    );
    assert_eq!(s.counters.closed.echo_mismatch, 0);
    control(ctl, "stop").unwrap();
    assert!(server.wait(T).status.success());

    // Bad flags: one line each, naming the fix, exit non-zero.
    let refused = |args: &[&str], says: &str| {
        let out = c1m().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panick"));
    };
    refused(
        &["client", "--tls", "-n", "1", "--ports", "23340"],
        "--tls-ca FILE",
    );
    refused(
        &["server", "--tls", "--engine", "tokio", "--ports", "23341"],
        "epoll engine",
    );
    let nonsense = dir.path().join("nonsense.pem");
    std::fs::write(&nonsense, "not a certificate").unwrap();
    let n = nonsense.to_str().unwrap();
    refused(
        &[
            "server",
            "--tls-cert",
            n,
            "--tls-key",
            n,
            "--ports",
            "23342",
        ],
        "--tls-cert: no PEM certificate",
    );
    refused(
        &["server", "--tls-cert", n, "--ports", "23343"],
        "--tls-key",
    );
    refused(
        &[
            "client",
            "--tls-ca",
            "/nonexistent/ca.pem",
            "-n",
            "1",
            "--ports",
            "23344",
        ],
        "--tls-ca /nonexistent/ca.pem: cannot open",
    );
}

#[test]
fn c1m_run_tls_completes_with_kernel_equal_app_and_keeps_its_key_private() {
    use crate::lab_util::{c1m_run, fresh_dir, root_or_skip, run_folder};
    use std::os::unix::fs::PermissionsExt;
    if !root_or_skip("c1m_run_tls_completes_with_kernel_equal_app_and_keeps_its_key_private") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    const N: u64 = 2000;
    let out = fresh_dir("run-tls");
    let r = c1m_run(
        out.path(),
        &[
            "--tls",
            "-n",
            "2000",
            "--rate",
            "0",
            "--idle",
            "1s",
            "--ports",
            "8000-8003",
        ],
    )
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(
        r.status.success() && stdout.contains("== c1m run: complete"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(
        stdout.contains("kernel = app after every phase: 2,000 connections"),
        "{stdout}"
    );
    let dir = run_folder(out.path());
    let mode = |f: &str| std::fs::metadata(dir.join(f)).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode("tls-cert.pem"), mode("tls-key.pem")), (0o644, 0o600));
    for side in ["server", "client"] {
        let s: c1m::workload::stats::snapshot::AppSnapshot =
            serde_json::from_slice(&std::fs::read(dir.join(format!("{side}-final.json"))).unwrap())
                .unwrap();
        assert_eq!(
            (
                s.counters.tls_handshakes.full,
                s.counters.tls_errors.total()
            ),
            (N, 0),
            "{side}"
        );
        assert_eq!(
            s.counters.pushes_sent.max(s.counters.pushes_received),
            N,
            "{side}"
        );
    }
}

/// `c1m client` in ws mode against `port`, one connection in flight at a time on one
/// shard: connection k+1 starts after k's 101, so k's ticket (sent before the 101) is
/// there to resume from. Its final counters, from `--stats-json`.
fn one_at_a_time(
    port: u16,
    n: u64,
    ca: &Path,
    json: &Path,
    extra: &[&str],
) -> c1m::workload::stats::snapshot::AppSnapshot {
    let out = c1m()
        .args(["client", "--mode", "ws", "--ports", &port.to_string()])
        .args(["--quiet", "--hold", "0s", "-n", &n.to_string()])
        .args(["--in-flight", "1", "--threads", "1", "--tls-ca"])
        .arg(ca)
        .arg("--stats-json")
        .arg(json)
        .args(extra)
        .env("C1M_ENGINE", "epoll")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panick"), "{err}");
    serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap_or_else(|e| panic!("{e}: {err}"))
}

#[test]
fn resumption_resumes_all_but_the_first_connection_and_off_on_either_side_none() {
    const N: u64 = 40;
    let dir = scratch("tls-resume");
    // (server resumes, client resumes, port, control) → (full, resumed) on both sides.
    for (server_on, client_on, port, ctl, want) in [
        (true, true, 23500u16, "127.0.0.1:23590", (1, N - 1)),
        (false, true, 23501, "127.0.0.1:23591", (N, 0)),
        (true, false, 23502, "127.0.0.1:23592", (N, 0)),
    ] {
        let case = format!("server resumption {server_on}, client resumption {client_on}");
        let cert = dir.path().join(format!("cert-{port}.pem"));
        let on: &[&str] = &["--tls-resumption"];
        let server = tls_server(port, ctl, &cert, "ws", if server_on { on } else { &[] });
        let json = dir.path().join(format!("client-{port}.json"));
        let c = one_at_a_time(port, N, &cert, &json, if client_on { on } else { &[] }).counters;
        assert_eq!(
            (c.connected, c.failures.total(), c.tls_errors.total()),
            (N, 0, 0),
            "{case}"
        );
        assert_eq!(
            (c.tls_handshakes.full, c.tls_handshakes.resumed),
            want,
            "client, {case}"
        );
        let s = wait_for(ctl, "every handshake counted", T, |s| {
            s.counters.tls_handshakes.full + s.counters.tls_handshakes.resumed == N
        });
        let h = s.counters.tls_handshakes;
        assert_eq!((h.full, h.resumed), want, "server, {case}");
        assert_eq!(s.counters.tls_errors.total(), 0, "{case}");
        control(ctl, "stop").unwrap();
        assert!(server.wait(T).status.success(), "{case}");
    }
}

#[test]
fn an_expired_certificate_fails_every_connection_counted_as_expired() {
    const N: u64 = 7;
    let (port, ctl) = (23510u16, "127.0.0.1:23593");
    let dir = scratch("tls-expired");
    // Made now: valid for 2020 only, for the address the client asks for.
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let made = params.self_signed(&key).unwrap();
    let (cert, key_file) = (
        dir.path().join("expired.pem"),
        dir.path().join("expired.key"),
    );
    std::fs::write(&cert, made.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    let server = Proc::spawn(
        "c1m server --tls-cert (expired)",
        c1m()
            .args(["server", "--mode", "ws", "--ports", &port.to_string()])
            .args(["--quiet", "--control", ctl, "--tls-cert"])
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key_file),
    );
    wait_for(ctl, "server up", Duration::from_secs(60), |s| {
        s.phase == "running"
    });
    let json = dir.path().join("client.json");
    let c = one_at_a_time(port, N, &cert, &json, &[]).counters;
    assert_eq!(
        (
            c.connected,
            c.failures.tls,
            c.tls_errors.expired_certificate
        ),
        (0, N, N),
        "{:?}",
        c.tls_errors
    );
    assert_eq!(c.tls_errors.total(), N, "{:?}", c.tls_errors);
    // The server hears the client's certificate_expired alert, once per connection.
    let s = wait_for(ctl, "every rejection heard", T, |s| {
        s.counters.tls_errors.peer_rejected_certificate == N
    });
    assert_eq!(
        (
            s.counters.tls_errors.total(),
            s.counters.tls_handshakes.full,
            s.counters.open
        ),
        (N, 0, 0),
        "{:?}",
        s.counters.tls_errors
    );
    control(ctl, "stop").unwrap();
    assert!(server.wait(T).status.success());
}
