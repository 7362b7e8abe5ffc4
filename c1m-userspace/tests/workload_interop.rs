//! Interop with a real third-party WebSocket implementation (Python `websockets`), both
//! ways. `cargo xtask test` installs the package; without it these tests fail and say so.
//! Ports 20200–20299, control 20920–20929.
#![allow(clippy::unwrap_used)] // panics are the assertions

use crate::workload_util;

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    time::Duration,
};

use workload_util::{
    Proc, c1m, control, each_engine, require_python_websockets, scratch, wait_for, ws_server,
};

const T: Duration = Duration::from_secs(90);

/// Python client: N connections; per connection a text and a binary echo and a ping; then
/// it asks the c1m server (control endpoint) for a push and checks every connection gets a
/// 24-byte frame with push id 1 and sane timestamps; then closes cleanly (1000).
const PY_CLIENT: &str = r#"
import asyncio, struct, sys, time
from websockets.asyncio.client import connect
PORT, CTL, N = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
async def one(i):
    ws = await connect(f"ws://127.0.0.1:{PORT}/chat?i={i}", max_size=None)
    await ws.send(f"héllo {i}")
    assert await ws.recv() == f"héllo {i}"
    data = bytes(range(256)) * 300 + bytes([i % 256])   # 76,801 bytes: 64-bit length form
    await ws.send(data)
    assert await ws.recv() == data
    await asyncio.wait_for(await ws.ping(b"x"), 10)
    return ws
async def main():
    conns = await asyncio.gather(*(one(i) for i in range(N)))
    host, port = CTL.rsplit(":", 1)
    r, w = await asyncio.open_connection(host, int(port))
    w.write(b"push\n"); await w.drain()
    print("ack", (await r.readline()).decode().strip(), flush=True)
    got = 0
    for ws in conns:
        m = await asyncio.wait_for(ws.recv(), 30)
        assert isinstance(m, bytes) and len(m) == 24, m
        pid, start, wr = struct.unpack(">QQQ", m)
        assert pid == 1 and 0 < start <= wr <= time.time_ns() + 10**9, (pid, start, wr)
        got += 1
    for ws in conns:
        await ws.close()
        assert ws.close_code == 1000, ws.close_code
    print(f"OK {got}", flush=True)
asyncio.run(main())
"#;

/// Starts `python3 -c SCRIPT ARGS…` and waits for its first line, `ready`; its stdout
/// stays readable for the lines that follow.
fn python_peer(
    name: &'static str,
    script_and_args: &[&str],
    ready: &str,
) -> (Proc, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new("python3")
        .arg("-c")
        .args(script_and_args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let py = Proc {
        child: Some(child),
        name,
    };
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), ready, "{name} did not start");
    (py, out)
}

/// Reads the Python peer's `CLOSED <code>` lines: `n` of them, each with `code`.
fn expect_close_codes(out: &mut impl BufRead, n: usize, code: u16) {
    let want = format!("CLOSED {code}");
    let codes: Vec<String> = (0..n)
        .map(|_| {
            let mut l = String::new();
            out.read_line(&mut l).unwrap();
            l.trim().to_owned()
        })
        .collect();
    assert!(codes.iter().all(|c| *c == want), "{codes:?}");
}

#[test]
fn python_websockets_client_against_c1m_server() {
    each_engine(|_| {
        require_python_websockets();
        const N: u64 = 50;
        let (port, ctl) = (20200u16, "127.0.0.1:20920");
        let server = ws_server(port, ctl, &[]);
        let py = Proc::spawn(
            "python client",
            Command::new("python3").args(["-c", PY_CLIENT, &port.to_string(), ctl, &N.to_string()]),
        );
        let out = py.wait(T);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(&format!("OK {N}")),
            "python client failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s = wait_for(ctl, "closes counted", T, |s| {
            s.counters.closed.peer_closed == N
        });
        let c = s.counters;
        assert_eq!((c.accepted, c.open, c.ws_open), (N, 0, 0));
        assert_eq!(
            (c.echo_round_trips, c.ws_pings_in, c.pushes_sent),
            (2 * N, N, N)
        );
        assert_eq!(c.protocol_errors.total(), 0, "{:?}", c.protocol_errors);
        control(ctl, "stop").unwrap();
        assert!(server.wait(T).status.success());
    });
}

/// Python client that holds N connections until the server goes away, then prints the
/// close code each one got.
const PY_HOLDER: &str = r#"
import asyncio, sys
from websockets.asyncio.client import connect
PORT, N = int(sys.argv[1]), int(sys.argv[2])
async def main():
    conns = [await connect(f"ws://127.0.0.1:{PORT}/") for _ in range(N)]
    print("HELD", flush=True)
    for ws in conns:
        await asyncio.wait_for(ws.wait_closed(), 60)
        print("CLOSED", ws.close_code, flush=True)
asyncio.run(main())
"#;

#[test]
fn c1m_server_stopping_says_going_away_to_a_python_client() {
    each_engine(|_| {
        require_python_websockets();
        const N: usize = 20;
        let (port, ctl) = (20201u16, "127.0.0.1:20921");
        let server = ws_server(port, ctl, &[]);
        let (_py, mut out) = python_peer(
            "python holder",
            &[PY_HOLDER, &port.to_string(), &N.to_string()],
            "HELD",
        );
        wait_for(ctl, "all open", T, |s| s.counters.ws_open == N as u64);
        control(ctl, "stop").unwrap();
        assert!(server.wait(T).status.success());
        expect_close_codes(&mut out, N, 1001);
    });
}

/// Python server: on connect it sends one push frame (id 7, its own timestamps), then
/// echoes every message.
const PY_SERVER: &str = r#"
import asyncio, struct, sys, time
from websockets.asyncio.server import serve
PORT = int(sys.argv[1])
async def handler(ws):
    now = time.time_ns()
    await ws.send(struct.pack(">QQQ", 7, now, time.time_ns()))
    try:
        async for m in ws:
            await ws.send(m)
    finally:
        print("CLOSED", ws.close_code, flush=True)
async def main():
    async with serve(handler, "127.0.0.1", PORT, ping_interval=None):
        print("READY", flush=True)
        await asyncio.sleep(120)
asyncio.run(main())
"#;

#[test]
fn c1m_client_against_python_websockets_server() {
    each_engine(|_| {
        require_python_websockets();
        const N: u64 = 200;
        let port = 20250u16;
        let (py, mut py_out) =
            python_peer("python server", &[PY_SERVER, &port.to_string()], "READY");
        let scratch = scratch("interop");
        let json = scratch.path().join("client.json");
        let out = c1m()
            .args([
                "client",
                "--mode",
                "ws",
                "--ports",
                &port.to_string(),
                "--quiet",
                "--hold",
                "1s",
            ])
            .args([
                "-n",
                &N.to_string(),
                "--echo-count",
                "3",
                "--payload-size",
                "300",
            ])
            .arg("--stats-json")
            .arg(&json)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "c1m client failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s: c1m::workload::stats::snapshot::AppSnapshot =
            serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let c = s.counters;
        assert_eq!(
            (c.connected, c.echo_round_trips, c.pushes_received),
            (N, 3 * N, N)
        );
        assert_eq!(c.failures.total(), 0);
        assert_eq!(c.closed.local_close, N);
        assert_eq!(
            (s.pushes.len(), s.pushes[0].push_id, s.pushes[0].count),
            (1, 7, N)
        );
        assert_eq!(s.percentiles["push_message_us"].count, N);
        // The server saw every connection end with our close frame: 1000, not 1006.
        expect_close_codes(&mut py_out, N as usize, 1000);
        drop(py);
    });
}
