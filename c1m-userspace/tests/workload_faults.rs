//! Bad input and faults over real sockets: malformed handshakes and frames get the RFC's
//! answer and are counted, the server keeps serving; a refused connect is a clear failure.
//! Ports 20100–20199, control 20910–20919.
#![allow(clippy::unwrap_used)] // panics are the assertions

use crate::workload_util;

use std::{
    io::{Read, Write},
    net::TcpStream,
    time::Duration,
};

use workload_util::{Proc, c1m, control, each_engine, scratch, wait_for, ws_server};

const T: Duration = Duration::from_secs(60);
const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Reads until the server closes.
fn read_all(mut s: TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

fn upgraded(port: u16) -> TcpStream {
    let mut s = connect(port);
    s.write_all(&c1m::workload::ws::handshake::request("h", "/", &rfc_key()))
        .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut b).unwrap();
        head.push(b[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    s
}

fn masked(op: c1m::workload::ws::Opcode, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    c1m::workload::ws::frame::encode_frame(&mut v, op, payload, Some([7, 7, 7, 7]));
    v
}

#[test]
fn malformed_input_gets_rfc_answers_and_is_counted() {
    each_engine(|_| {
        use c1m::workload::ws::Opcode;
        let (port, ctl) = (20100u16, "127.0.0.1:20910");
        let server = Proc::spawn(
            "server",
            c1m()
                .args([
                    "server",
                    "--mode",
                    "ws",
                    "--ports",
                    "20100",
                    "--quiet",
                    "--threads",
                    "1",
                ])
                .args(["--max-message", "1024", "--control", ctl]),
        );
        wait_for(ctl, "server up", T, |s| s.phase == "running");

        // Bad key → 400; wrong version → 426; garbage → 400.
        for (req, status) in [
            (
                String::from(
                    "GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: short\r\nSec-WebSocket-Version: 13\r\n\r\n",
                ),
                "400",
            ),
            (
                format!(
                    "GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 8\r\n\r\n"
                ),
                "426",
            ),
            ("\x16\x03\x01 not http at all\r\n\r\n".to_owned(), "400"),
        ] {
            let mut s = connect(port);
            s.write_all(req.as_bytes()).unwrap();
            let answer = String::from_utf8_lossy(&read_all(s)).to_string();
            assert!(
                answer.starts_with(&format!("HTTP/1.1 {status}")),
                "{answer}"
            );
        }
        // Frame violations → close frame with the RFC code, then the server closes.
        let cases: Vec<(Vec<u8>, u16)> = vec![
            (vec![0x81, 0x02, b'h', b'i'], 1002), // unmasked client frame
            (vec![0x83, 0x80, 0, 0, 0, 0], 1002), // reserved opcode
            (vec![0xF1, 0x80, 0, 0, 0, 0], 1002), // reserved bits
            (masked(Opcode::Text, &[0xC0, 0xAF]), 1007), // invalid UTF-8
            (vec![0x82, 0xFF, 0, 0, 0, 0, 0, 1, 0, 0, 1, 2, 3, 4], 1009), // 64 KiB > --max-message 1024
            (masked(Opcode::Continuation, b"x"), 1002), // continuation without start
        ];
        for (bytes, code) in &cases {
            let mut s = upgraded(port);
            s.write_all(bytes).unwrap();
            let answer = read_all(s);
            assert_eq!(answer[..2], [0x88, 0x02], "{bytes:x?} -> {answer:x?}");
            assert_eq!(
                u16::from_be_bytes([answer[2], answer[3]]),
                *code,
                "{bytes:x?}"
            );
        }
        // A header cut short and then EOF: counted as truncated.
        let mut s = upgraded(port);
        s.write_all(&[0x82, 0xFE, 0x00]).unwrap();
        drop(s);
        // The server still works: ping and echo on a fresh connection.
        let mut s = upgraded(port);
        s.write_all(&masked(Opcode::Ping, b"p?")).unwrap();
        s.write_all(&masked(Opcode::Text, b"still here")).unwrap();
        let mut buf = [0u8; 16];
        s.read_exact(&mut buf).unwrap();
        assert_eq!(&buf[..4], &[0x8A, 0x02, b'p', b'?']);
        assert_eq!(&buf[4..6], &[0x81, 10]);
        assert_eq!(&buf[6..], b"still here");

        let st = wait_for(ctl, "counted", T, |s| {
            s.counters.protocol_errors.truncated == 1
        });
        let p = st.counters.protocol_errors;
        assert_eq!(
            (p.http_400, p.http_426, p.ws_1002, p.ws_1007, p.ws_1009),
            (2, 1, 4, 1, 1),
            "{p:?}"
        );
        assert_eq!(st.counters.closed.protocol, 9);
        assert_eq!(st.counters.open, 1);
        control(ctl, "stop").unwrap();
        assert!(server.wait(T).status.success());
    });
}

#[test]
fn silent_and_stalled_handshakes_are_closed_at_the_timeout() {
    each_engine(|_| {
        let (port, ctl) = (20170u16, "127.0.0.1:20913");
        let server = ws_server(port, ctl, &["--threads", "1", "--handshake-timeout", "1s"]);
        // Four peers that say nothing, two that stop mid-request, one that completes.
        let silent: Vec<TcpStream> = (0..4).map(|_| connect(port)).collect();
        let stalled: Vec<TcpStream> = (0..2)
            .map(|_| {
                let mut s = connect(port);
                s.write_all(b"GET / HTTP/1.1\r\nHost: h\r\n").unwrap();
                s
            })
            .collect();
        let good = upgraded(port);
        wait_for(ctl, "overdue handshakes closed", T, |s| {
            s.counters.closed.handshake_timeout == 6
        });
        // Past the completed one's own deadline too: it stays.
        std::thread::sleep(Duration::from_millis(1500));
        let s = wait_for(ctl, "stats", T, |_| true);
        assert_eq!(s.counters.closed.handshake_timeout, 6);
        assert_eq!((s.counters.open, s.counters.ws_open), (1, 1));
        for peer in silent.into_iter().chain(stalled) {
            assert!(
                read_all(peer).is_empty(),
                "a timed-out peer gets no answer, just the close"
            );
        }
        drop(good);
        control(ctl, "stop").unwrap();
        assert!(server.wait(T).status.success());
    });
}

#[test]
fn refused_is_counted_and_named() {
    each_engine(|_| {
        // Nothing listens on 20150: every connect is refused, the run fails with one clear line.
        let out = c1m()
            .args([
                "client", "--ports", "20150", "-n", "20", "--hold", "0s", "--quiet",
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        // The outcome line (with the failures by kind) is on stdout, as `c1m run`'s.
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success());
        assert!(err.contains("connection refused"), "{err}");
        assert!(said.contains("refused=20"), "{said}\n{err}");
        assert_eq!(
            err.matches("connection refused: is the server listening")
                .count(),
            1,
            "one line per cause: {err}"
        );
    });
}

/// A server worker at its fd cap stops listening (so SO_REUSEPORT sends new connections
/// to workers with room) instead of failing accept with EMFILE; nothing is lost from the
/// books. RLIMIT_NOFILE 265 with one port gives each worker a cap of 265 − 1 − 64 = 200;
/// 2 workers hold at most 400 of the 500 asked for.
#[test]
fn full_workers_stop_listening_and_everything_is_counted() {
    each_engine(|_| {
        use std::os::unix::process::CommandExt;
        // A namespace of its own (as root) per round: no other test's traffic on its
        // ports, and the kernel's TCP counters below are this round's alone.
        let private = c1m::netns::enter_private().is_ok();
        let ctl = "127.0.0.1:20911";
        let mut cmd = c1m();
        cmd.args([
            "server",
            "--ports",
            "20160",
            "--quiet",
            "--workers",
            "2",
            "--control",
            ctl,
        ]);
        // SAFETY: setrlimit is async-signal-safe; it only lowers this child's own limit.
        unsafe {
            cmd.pre_exec(|| {
                let r = libc::rlimit {
                    rlim_cur: 265,
                    rlim_max: 265,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let server = Proc::spawn("server", &mut cmd);
        wait_for(ctl, "server up", T, |s| s.phase == "running");
        let scratch = scratch("cap");
        let json = scratch.path().join("client.json");
        let lost_before = loopback_drops();
        let mib_before = c1m::observer::mib::read().unwrap();
        let out = c1m()
            .args([
                "client",
                "--ports",
                "20160",
                "-n",
                "500",
                // A connection queued at a full worker is reset when that worker next
                // runs: the hold leaves a loaded box's worker room to run.
                "--hold",
                "6s",
                "--quiet",
                "--connect-timeout",
                "3s",
            ])
            .arg("--stats-json")
            .arg(&json)
            .output()
            .unwrap();
        let softnet = loopback_drops().since(&lost_before).dropped;
        let mib = c1m::observer::mib::read().unwrap().since(&mib_before);
        let lost = softnet + mib.listen_drops;
        assert!(!out.status.success(), "500 cannot all fit");
        let c: c1m::workload::stats::snapshot::AppSnapshot =
            serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let s = wait_for(ctl, "server drained", T, |s| s.counters.open == 0);
        // The client's books: every attempt ended somewhere.
        let cc = c.counters;
        assert_eq!(cc.attempted, 500);
        assert_eq!(cc.connected + cc.failures.total(), 500, "{:?}", cc.failures);
        // Past the caps, each connection is reset by the server, unless a packet of it was
        // lost: a reset is never sent again, and a lost handshake ACK leaves the server a
        // request the closed listener drops without a word. The client holds either
        // silently (hold mode sends nothing). Lost: the box's input backlogs (shared by
        // every namespace) and the listeners' drops. One failure with no backlog drop
        // (epoll, 2026-12-06, a run right after a build, in the root namespace, where the
        // listeners' drops were not read) is not explained yet: the message carries the
        // server's books and the kernel's counters (a passing round: 100 resets sent, one
        // a connection past the caps).
        assert!(
            cc.connected <= 400 + cc.closed.reset + lost,
            "{softnet} packets dropped by the box, {} by listeners: {cc:?}\nserver: {:?}\n\
             kernel (private namespace: {private}): {mib:?}",
            mib.listen_drops,
            s.counters
        );
        // The server's books: it never held more than its caps, and its accepts match.
        let sc = s.counters;
        assert_eq!(sc.accepted, sc.closed.total(), "{sc:?}");
        assert!(sc.accepted <= 400, "{sc:?}");
        assert_eq!(
            sc.failures.emfile, 0,
            "the cap must stop accepts before EMFILE"
        );
        control(ctl, "stop").unwrap();
        let out = server.wait(T);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("stopped listening"), "{err}");
    });
}

/// The box's input backlogs (`/proc/net/softnet_stat`: every CPU, every namespace), where
/// loopback loses packets; read as the lab reads them (`netpath`). A test beside this one
/// can fill them: an unpaced 25k ramp in another namespace dropped 48 and 93 here, and
/// 275–797 over this test's 6 s.
fn loopback_drops() -> c1m::netpath::Softnet {
    c1m::netpath::PathReading::read()
        .softnet
        .expect("/proc/net/softnet_stat readable")
}

/// A worker that dies is reported, its connections are counted as lost, and the rest keep
/// running. Also exercises a control endpoint on a unix socket.
#[test]
fn dead_worker_is_reported_and_its_connections_lost() {
    each_engine(|_| {
        let ctl = "127.0.0.1:20912";
        let scratch = scratch("ctl");
        let cctl = scratch.path().join("client.sock");
        let cctl = cctl.to_string_lossy().to_string();
        let server = Proc::spawn(
            "server",
            c1m().args([
                "server",
                "--ports",
                "20170-20179",
                "--quiet",
                "--workers",
                "2",
                "--control",
                ctl,
            ]),
        );
        wait_for(ctl, "server up", T, |s| s.phase == "running");
        let client = Proc::spawn(
            "client",
            c1m()
                .args([
                    "client",
                    "--ports",
                    "20170-20179",
                    "-n",
                    "1000",
                    "--hold",
                    "forever",
                    "--quiet",
                ])
                .args(["--stay", "--control", &cctl]),
        );
        let unix_stats = |cond: &dyn Fn(&c1m::workload::stats::snapshot::AppSnapshot) -> bool| {
            let deadline = std::time::Instant::now() + T;
            loop {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                let line = rt.block_on(c1m::workload::control::call(&cctl, "stats"));
                if let Ok(line) = line {
                    let s: c1m::workload::stats::snapshot::AppSnapshot =
                        serde_json::from_str(&line).unwrap();
                    if cond(&s) {
                        return s;
                    }
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "client over unix socket never got there"
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        };
        unix_stats(&|s| s.phase == "hold" && s.counters.open == 1000);
        let s = wait_for(ctl, "all accepted", T, |s| s.counters.open == 1000);
        let victim = s.workers.list[0].clone();
        assert!(
            victim.open > 0 && victim.kind == c1m::workload::stats::snapshot::ShardKind::Process
        );
        // SAFETY: kill(2) on a worker process this test's server started.
        assert_eq!(unsafe { libc::kill(victim.pid as i32, libc::SIGKILL) }, 0);
        let s = wait_for(ctl, "death noticed", T, |s| s.workers.alive == 1);
        assert_eq!(s.counters.closed.worker_lost, victim.open);
        assert_eq!(s.counters.open, 1000 - victim.open);
        assert!(
            s.workers.list[0]
                .exit
                .as_deref()
                .unwrap_or("")
                .contains("signal"),
            "{:?}",
            s.workers.list[0]
        );
        // The client sees those connections end; the others stay up.
        let c = unix_stats(&|s| s.counters.open == 1000 - victim.open);
        assert_eq!(c.counters.closed.total(), victim.open);
        // The survivor still accepts: a fresh connection is taken.
        let _probe = TcpStream::connect("127.0.0.1:20170").unwrap();
        wait_for(ctl, "survivor accepts", T, |s| s.counters.accepted == 1001);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(c1m::workload::control::call(&cctl, "stop"))
            .unwrap();
        control(ctl, "stop").unwrap();
        let out = server.wait(T);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("counted as lost"), "{err}");
        let _ = client.wait(T);
    });
}

/// The nice value of one thread, from /proc (field 19 of its stat line).
fn nice_of(pid: u32, tid: u32) -> i64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    after_comm.split(' ').nth(16).unwrap().parse().unwrap()
}

/// Every thread of a process and its name.
fn threads_of(pid: u32) -> Vec<(u32, String)> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let tid: u32 = e.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            Some((tid, comm.trim().to_owned()))
        })
        .collect()
}

/// A supervisor reads its shards' reports at a raised weight (at 1M a default-weight
/// client supervisor read 50 workers' reports up to 43 s late), while what makes the load
/// runs at the default: worker processes, and shard threads in a one-process run.
#[test]
fn supervisors_watch_above_the_load_their_shards_make() {
    each_engine(|_| {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIP supervisors_watch_above_the_load_their_shards_make: needs root");
            return;
        }
        let (ctl, cctl) = ("127.0.0.1:20915", "127.0.0.1:20916");
        let server = Proc::spawn(
            "server",
            c1m().args([
                "server",
                "--ports",
                "20185",
                "--quiet",
                "--workers",
                "2",
                "--control",
                ctl,
            ]),
        );
        let s = wait_for(ctl, "server up", T, |s| s.phase == "running");
        let client = Proc::spawn(
            "client",
            c1m().args([
                "client",
                "--ports",
                "20185",
                "-n",
                "20",
                "--hold",
                "forever",
                "--quiet",
                "--stay",
                "--control",
                cctl,
            ]),
        );
        let c = wait_for(cctl, "client holding", T, |s| s.counters.connected == 20);
        let server_pid = server.child.as_ref().unwrap().id();
        let client_pid = client.child.as_ref().unwrap().id();
        assert_eq!(nice_of(server_pid, server_pid), -10, "server supervisor");
        assert_eq!(nice_of(client_pid, client_pid), -10, "client supervisor");
        let workers: Vec<_> = s
            .workers
            .list
            .iter()
            .filter(|w| w.kind == c1m::workload::stats::snapshot::ShardKind::Process)
            .collect();
        assert_eq!(workers.len(), 2, "{:?}", s.workers);
        for w in workers {
            for (tid, name) in threads_of(w.pid) {
                assert_eq!(
                    nice_of(w.pid, tid),
                    0,
                    "server worker {} thread {name}",
                    w.pid
                );
            }
        }
        assert!(
            c.workers
                .list
                .iter()
                .all(|w| w.kind == c1m::workload::stats::snapshot::ShardKind::Thread),
            "{:?}",
            c.workers
        );
        let shards: Vec<_> = threads_of(client_pid)
            .into_iter()
            .filter(|(_, name)| name.starts_with("c1m-shard"))
            .collect();
        assert!(!shards.is_empty());
        for (tid, name) in shards {
            assert_eq!(nice_of(client_pid, tid), 0, "client {name}");
        }
        control(cctl, "stop").unwrap();
        client.wait(T);
        control(ctl, "stop").unwrap();
        server.wait(T);
    });
}

/// A server that upgrades and then never answers our close frame (nor closes) holds the
/// client's teardown for the stall limit once, not once per `--in-flight` batch of
/// goodbyes: then the client closes the rest itself, warns once, and exits 0 (every
/// connection was set up; the peer broke the closing handshake).
#[test]
fn a_server_that_never_closes_stalls_the_teardown_only_5_s() {
    each_engine(|_| {
        const N: usize = 20;
        let listener = std::net::TcpListener::bind(("127.0.0.1", 20180)).unwrap();
        let (done, wait_done) = std::sync::mpsc::channel::<()>();
        let peer = std::thread::spawn(move || {
            let mut held = Vec::new();
            let deadline = std::time::Instant::now() + T;
            listener.set_nonblocking(true).unwrap();
            while held.len() < N && std::time::Instant::now() < deadline {
                let mut s = match listener.accept() {
                    Ok((s, _)) => s,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                    Err(e) => panic!("accept: {e}"),
                };
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut buf = Vec::new();
                let mut chunk = [0u8; 512];
                let answer = loop {
                    let n = s.read(&mut chunk).unwrap();
                    assert!(n > 0, "the client hung up mid-handshake");
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some((req, _)) =
                        c1m::workload::ws::handshake::parse_request(&buf).unwrap()
                    {
                        break c1m::workload::ws::handshake::response_accept(req.key);
                    }
                };
                s.write_all(&answer).unwrap();
                held.push(s);
            }
            // Hold every socket, unread, until the client is gone (bounded).
            let _ = wait_done.recv_timeout(T);
            held
        });
        let started = std::time::Instant::now();
        let client = Proc::spawn(
            "client",
            c1m().args([
                "client",
                "--mode",
                "ws",
                "--ports",
                "20180",
                "-n",
                "20",
                "--hold",
                "0s",
                "--quiet",
                "--in-flight",
                "4",
            ]),
        );
        let out = client.wait(T);
        let took = started.elapsed();
        let _ = done.send(());
        assert_eq!(peer.join().unwrap().len(), N);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(err.contains("the server did not close"), "{err}");
        assert!(
            took >= Duration::from_secs(5) && took < Duration::from_secs(15),
            "teardown took {took:?}: the stall limit is 5 s\n{err}"
        );
    });
}

/// A teardown while every connection is still in its setup (the server took the TCP
/// connections but never answers the upgrade, the connect timeout far off): each one is
/// counted aborted once, none open or in flight, and the teardown does not wait for the
/// timeout.
#[test]
fn a_teardown_mid_setup_counts_each_connection_aborted_once() {
    each_engine(|_| {
        const N: u64 = 20;
        let cctl = "127.0.0.1:20917";
        // Never accepted, never read: the kernel completes the connects into its backlog.
        let _listener = std::net::TcpListener::bind(("127.0.0.1", 20190)).unwrap();
        let client = Proc::spawn(
            "client",
            c1m()
                .args(["client", "--mode", "ws", "--ports", "20190", "--quiet"])
                .args(["-n", &N.to_string(), "--in-flight", &N.to_string()])
                .args(["--connect-timeout", "60s", "--hold", "forever", "--stay"])
                .args(["--control", cctl]),
        );
        wait_for(cctl, "every connection in its setup", T, |s| {
            s.counters.attempted == N && s.counters.in_flight == N
        });
        control(cctl, "close").unwrap();
        let c = wait_for(cctl, "client closed", T, |s| s.phase == "closed");
        assert_eq!(
            (c.counters.failures.aborted, c.counters.failures.total()),
            (N, N),
            "{:?}",
            c.counters.failures
        );
        assert_eq!((c.counters.open, c.counters.in_flight), (0, 0));
        assert_eq!(c.counters.closed.total(), 0, "{:?}", c.counters.closed);
        control(cctl, "stop").unwrap();
        client.wait(T);
    });
}

/// The RFC 6455 §1.3 sample key, "dGhlIHNhbXBsZSBub25jZQ==".
fn rfc_key() -> c1m::workload::ws::handshake::Key {
    c1m::workload::ws::handshake::Key::from_nonce(*b"the sample nonce")
}

/// A rate the pacing cannot honour (not a number, infinite, or beyond any box) is
/// refused when parsed, naming the flag; before, the client took it and hung.
#[test]
fn rates_that_cannot_be_paced_are_refused_at_parse() {
    for rate in ["nan", "inf", "-inf", "1e308", "-5"] {
        let mut cmd = c1m();
        cmd.args([
            "client", "--ports", "20160", "-n", "5", "--hold", "0s", "--quiet",
        ])
        .arg(format!("--rate={rate}"));
        let out = Proc::spawn("c1m client (bad rate)", &mut cmd).wait(Duration::from_secs(30));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "--rate {rate}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.contains("--rate") && first.contains(&format!("'{rate}'")),
            "--rate {rate}: {err}"
        );
    }
}
