//! wss and TLS under the raw modes, against real third-party TLS peers (Python's ssl and
//! `websockets`), and the bad inputs a TLS port meets: each counted by its reason, the
//! server still up; both engines (the tokio engine's tests are their own section). Ports
//! 23300–23349 and 23400–23449, control 23390–23399 and 23490–23499; resumption and an
//! expired certificate: ports 23500–23549, control 23590–23599.
#![allow(clippy::unwrap_used)] // panics are the assertions

use crate::workload_util;

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    path::Path,
    process::{Command, Output, Stdio},
    time::Duration,
};

use c1m::workload::stats::snapshot::AppSnapshot;

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
if len(sys.argv) > 5:
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(sys.argv[5])
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
    python_speaks_wss_with(23300, "127.0.0.1:23390", "epoll");
}

/// TLS 1.2 on each AEAD, through c1m's own record layer after the handshake (the
/// server hands every session over): the same bytes and books as TLS 1.3.
#[test]
fn python_speaks_wss_over_tls12_with_the_epoll_server_on_each_aead() {
    for (port, ciphers) in [
        (23800, "ECDHE-ECDSA-AES128-GCM-SHA256"),
        (23802, "ECDHE-ECDSA-AES256-GCM-SHA384"),
        (23804, "ECDHE-ECDSA-CHACHA20-POLY1305"),
    ] {
        let ctl = format!("127.0.0.1:{}", port + 1);
        python_speaks_wss_over(port, &ctl, "epoll", &[ciphers]);
    }
}

/// [`PY_WSS_CLIENT`] against a `c1m server --tls` of `engine`: every echo and push
/// byte for byte, then the server's books exact.
fn python_speaks_wss_with(port: u16, ctl: &str, engine: &str) {
    python_speaks_wss_over(port, ctl, engine, &[]);
}

/// The same, with TLS 1.2 and the OpenSSL cipher string in `tls12` when given.
fn python_speaks_wss_over(port: u16, ctl: &str, engine: &str, tls12: &[&str]) {
    require_python_websockets();
    const N: u64 = 30;
    let dir = scratch("tls-py-client");
    let cert = dir.path().join("cert.pem");
    let server = tls_server(port, ctl, &cert, "ws", &["--engine", engine]);
    let out = Proc::spawn(
        "python wss client",
        Command::new("python3")
            .args([
                "-c",
                PY_WSS_CLIENT,
                &port.to_string(),
                ctl,
                &N.to_string(),
                cert.to_str().unwrap(),
            ])
            .args(tls12),
    )
    .wait(T);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(&format!("OK {N}")),
        "python wss client ({tls12:?}) failed:\n{stdout}\n{}",
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

/// `c1m client` of `engine` over TLS to `port`, trusting `ca`: `-n N --hold …` and the
/// rest in `args`; its final stats in `json` if given.
fn tls_client(
    engine: &str,
    mode: &str,
    port: u16,
    ca: &str,
    args: &[&str],
    json: Option<&Path>,
) -> Output {
    let mut cmd = c1m();
    cmd.args([
        "client",
        "--mode",
        mode,
        "--ports",
        &port.to_string(),
        "--quiet",
    ])
    .args(args)
    .args(["--tls-ca", ca])
    .env("C1M_ENGINE", engine);
    if let Some(json) = json {
        cmd.arg("--stats-json").arg(json);
    }
    cmd.output().unwrap()
}

/// A client's final stats, as `--stats-json` wrote them.
fn final_stats(json: &Path) -> AppSnapshot {
    serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap()
}

fn succeeded(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_epoll_client_speaks_wss_to_a_python_server_and_refuses_one_it_does_not_trust() {
    client_speaks_wss_to_python(23310, "epoll");
}

/// A `c1m client` of `engine` against [`PY_WSS_SERVER`]: echoes and the push on connect,
/// counted exactly; against a certificate it does not trust, every connect fails as TLS,
/// by reason.
fn client_speaks_wss_to_python(port: u16, engine: &str) {
    require_python_websockets();
    const N: u64 = 100;
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
        let n = n.to_string();
        let args = ["--hold", "1s", "-n", &n, "--echo-count", "2"];
        tls_client(engine, "ws", port, ca, &args, Some(json))
    };
    let json = dir.path().join("good.json");
    succeeded(&client(&cert, N, &json));
    let c = final_stats(&json).counters;
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
    let out = client(&other, 5, &json);
    // The first failure's reason in rustls's words, once per shard.
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("a TLS handshake failed: "))
        .collect();
    assert!(
        !lines.is_empty() && lines.iter().all(|l| l.contains("UnknownIssuer")),
        "{err}"
    );
    let mut shards: Vec<&str> = lines.iter().filter_map(|l| l.split(':').nth(1)).collect();
    let printed = shards.len();
    shards.sort_unstable();
    shards.dedup();
    assert_eq!(shards.len(), printed, "once per shard: {err}");
    let c = final_stats(&json).counters;
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
    bad_tls_input_against(23320, "127.0.0.1:23391", "epoll");
}

/// Garbage, a truncated hello, a slowloris and clients that distrust it, at a `c1m
/// server --tls` of `engine`: each counted by reason; a good client still gets through.
fn bad_tls_input_against(port: u16, ctl: &str, engine: &str) {
    let dir = scratch("tls-bad");
    let cert = dir.path().join("cert.pem");
    let server = tls_server(
        port,
        ctl,
        &cert,
        "ws",
        &["--handshake-timeout", "1s", "--engine", engine],
    );
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
    let out = tls_client(
        "epoll",
        "ws",
        port,
        &other,
        &["--hold", "1s", "-n", "4"],
        None,
    );
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
    let ca = cert.to_str().unwrap();
    succeeded(&tls_client(
        "epoll",
        "ws",
        port,
        ca,
        &["--hold", "0s", "-n", "10"],
        Some(&json),
    ));
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
    tls_echo(port, ctl, &cert, "epoll", "epoll");

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

/// 50 connections of a `c1m client` of `client` echoing 3 × 20,000 bytes over TLS
/// through a `c1m server --tls --mode echo` of `server`: both sides' books exact.
fn tls_echo(port: u16, ctl: &str, cert: &Path, server: &str, client: &str) {
    let srv = tls_server(port, ctl, cert, "echo", &["--engine", server]);
    let json = cert.with_extension("json");
    // Held 4 s: the client closes when its hold ends, echoes done or not (a loaded box
    // once left 97 of 150 round trips undone at 0 s).
    let args = [
        "--hold",
        "4s",
        "-n",
        "50",
        "--echo-count",
        "3",
        "--payload-size",
        "20000",
    ];
    succeeded(&tls_client(
        client,
        "echo",
        port,
        cert.to_str().unwrap(),
        &args,
        Some(&json),
    ));
    let c = final_stats(&json).counters;
    assert_eq!(
        (c.connected, c.echo_round_trips, c.tls_handshakes.full),
        (50, 150, 50)
    );
    assert_eq!(
        c.closed.echo_mismatch + c.tls_errors.total() + c.failures.total(),
        0
    );
    let s = wait_for(ctl, "every echo connection closed", T, |s| {
        s.counters.accepted == 50 && s.counters.open == 0
    });
    let c = s.counters;
    assert_eq!(
        (
            c.tls_handshakes.full,
            c.echo_round_trips,
            c.tls_errors.total()
        ),
        (50, 150, 0)
    );
    control(ctl, "stop").unwrap();
    assert!(srv.wait(T).status.success());
}

#[test]
fn c1m_run_tls_completes_with_kernel_equal_app_and_keeps_its_key_private() {
    c1m_run_tls("epoll", "8000-8003");
}

/// `c1m run --tls -n 2000` of `engine` (in a private netns): complete, kernel = app,
/// every handshake counted on both sides, none failed; the key 0600.
fn c1m_run_tls(engine: &str, ports: &str) {
    use crate::lab_util::{c1m_run, fresh_dir, root_or_skip, run_folder};
    use std::os::unix::fs::PermissionsExt;
    if !root_or_skip(&format!("c1m_run_tls ({engine})")) {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    const N: u64 = 2000;
    // One folder per engine: the two run at once in one process, and fresh_dir
    // empties its folder (one shared name deleted the other run's certificate).
    let out = fresh_dir(&format!("run-tls-{engine}"));
    let r = c1m_run(
        out.path(),
        &[
            "--tls", "--engine", engine, "-n", "2000", "--rate", "0", "--idle", "1s", "--ports",
            ports,
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
        let s: AppSnapshot =
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

// The tokio engine (tokio-rustls over the same configs): the same peers, the same
// counts. Ports 23400–23449, control 23490–23499.

#[test]
fn python_speaks_wss_with_the_tokio_server_byte_for_byte() {
    python_speaks_wss_with(23400, "127.0.0.1:23490", "tokio");
}

#[test]
fn the_tokio_client_speaks_wss_to_a_python_server_and_refuses_one_it_does_not_trust() {
    client_speaks_wss_to_python(23410, "tokio");
}

#[test]
fn bad_tls_input_at_the_tokio_server_is_counted_by_reason_and_it_stays_up() {
    bad_tls_input_against(23420, "127.0.0.1:23491", "tokio");
}

#[test]
fn the_tokio_client_speaks_wss_to_the_epoll_server_and_each_side_counts_the_other() {
    const N: u64 = 100;
    let (port, ctl) = (23430u16, "127.0.0.1:23492");
    let dir = scratch("tls-tokio-epoll");
    let cert = dir.path().join("cert.pem");
    let server = tls_server(port, ctl, &cert, "ws", &["--engine", "epoll"]);
    let json = dir.path().join("good.json");
    let ca = cert.to_str().unwrap();
    let args = ["--hold", "1s", "-n", "100", "--echo-count", "2"];
    succeeded(&tls_client("tokio", "ws", port, ca, &args, Some(&json)));
    let c = final_stats(&json).counters;
    assert_eq!(
        (
            c.connected,
            c.echo_round_trips,
            c.tls_handshakes.full,
            c.closed.local_close
        ),
        (N, 2 * N, N, N)
    );
    assert_eq!(c.failures.total() + c.tls_errors.total(), 0);
    // The server heard every close frame (the close_notify after it is not an error).
    let s = wait_for(ctl, "every close counted", T, |s| {
        s.counters.open == 0 && s.counters.accepted == N
    });
    let c = s.counters;
    assert_eq!(
        (
            c.tls_handshakes.full,
            c.closed.peer_closed,
            c.tls_errors.total()
        ),
        (N, N, 0),
        "{:?}",
        c.closed
    );
    // A client that trusts another certificate: N failures.tls, N untrusted; the
    // server hears the alert of each.
    let (other, _) = openssl_pair(dir.path(), "other");
    let json = dir.path().join("untrusted.json");
    let _ = tls_client(
        "tokio",
        "ws",
        port,
        &other,
        &["--hold", "0s", "-n", "7"],
        Some(&json),
    );
    let c = final_stats(&json).counters;
    assert_eq!(
        (
            c.connected,
            c.failures.tls,
            c.tls_errors.untrusted_certificate,
            c.tls_errors.total()
        ),
        (0, 7, 7, 7),
        "{:?}",
        c.tls_errors
    );
    let s = wait_for(ctl, "the alerts counted", T, |s| {
        s.counters.tls_errors.peer_rejected_certificate == 7
    });
    assert_eq!(s.counters.closed.tls, 7);
    control(ctl, "stop").unwrap();
    assert!(server.wait(T).status.success());
}

#[test]
fn tls_under_echo_on_the_tokio_engine_both_ways() {
    let dir = scratch("tls-tokio-echo");
    tls_echo(
        23440,
        "127.0.0.1:23493",
        &dir.path().join("a.pem"),
        "tokio",
        "tokio",
    );
    tls_echo(
        23441,
        "127.0.0.1:23494",
        &dir.path().join("b.pem"),
        "tokio",
        "epoll",
    );
    tls_echo(
        23442,
        "127.0.0.1:23495",
        &dir.path().join("c.pem"),
        "epoll",
        "tokio",
    );
}

#[test]
fn c1m_run_tls_on_the_tokio_engine_completes_with_kernel_equal_app() {
    c1m_run_tls("tokio", "23445-23448");
}

/// `c1m client` in ws mode against `port`, one connection in flight at a time on one
/// shard: connection k+1 starts after k's 101, so k's ticket (sent before the 101) is
/// there to resume from. Its final counters, from `--stats-json`.
fn one_at_a_time(port: u16, n: u64, ca: &Path, json: &Path, extra: &[&str]) -> AppSnapshot {
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

/// A client with many connections in flight resumes every connection after its first
/// wave: each completion's ticket (sent before the 101) waits for the next connection.
/// rustls's own store kept 8 tickets per server and dropped the rest: 38–54% resumed.
#[test]
fn a_ramp_with_64_in_flight_resumes_every_connection_after_the_first_wave() {
    const N: u64 = 600;
    const IN_FLIGHT: u64 = 64;
    let (port, ctl) = (23503u16, "127.0.0.1:23594");
    let dir = scratch("tls-resume-wave");
    let cert = dir.path().join("cert.pem");
    let on: &[&str] = &["--tls-resumption"];
    let server = tls_server(port, ctl, &cert, "ws", on);
    let json = dir.path().join("client.json");
    let out = c1m()
        .args(["client", "--mode", "ws", "--ports", &port.to_string()])
        .args([
            "--quiet",
            "--hold",
            "0s",
            "-n",
            &N.to_string(),
            "--rate",
            "0",
        ])
        .args(["--in-flight", &IN_FLIGHT.to_string(), "--threads", "1"])
        .arg("--tls-ca")
        .arg(&cert)
        .arg("--stats-json")
        .arg(&json)
        .args(on)
        .env("C1M_ENGINE", "epoll")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panick"), "{err}");
    let c: AppSnapshot = serde_json::from_slice(&std::fs::read(&json).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {err}"));
    let h = c.counters.tls_handshakes;
    assert_eq!((c.counters.connected, h.full + h.resumed), (N, N), "{err}");
    assert!(
        h.full <= IN_FLIGHT,
        "{} full handshakes: more than the first wave of {IN_FLIGHT}",
        h.full
    );
    let s = wait_for(ctl, "every handshake counted", T, |s| {
        s.counters.tls_handshakes.full + s.counters.tls_handshakes.resumed == N
    });
    assert_eq!(
        (
            s.counters.tls_handshakes.full,
            s.counters.tls_handshakes.resumed
        ),
        (h.full, h.resumed)
    );
    control(ctl, "stop").unwrap();
    assert!(server.wait(T).status.success());
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
