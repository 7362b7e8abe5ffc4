//! The client's check of a server's message numbers (`c1m server --message-rate`): a
//! peer written here speaks WebSocket and numbers its messages wrongly on purpose (a
//! gap, a late one, repeats), as no c1m server can, and both client engines count each
//! kind on its own and say what happened in words. The clean case (every number in
//! order, 0 of each) is in `workload_server_messages`. Ports 9410–9411.
#![allow(clippy::unwrap_used)] // panics are the assertions

use std::{
    io::{Read, Write},
    net::{Shutdown, TcpListener},
    thread,
    time::Duration,
};

use c1m::workload::{
    stats::snapshot::AppSnapshot,
    ws::{Opcode, frame::encode_frame, handshake},
};

use crate::workload_util::{Proc, c1m, scratch};

const LONG: Duration = Duration::from_secs(60);

/// The numbers the peer sends: 2 skipped and arriving late (then once more), 5 and 6
/// skipped for good, 8 twice.
const NUMBERS: [u32; 9] = [0, 1, 3, 2, 2, 4, 7, 8, 8];

/// A server message's payload as `c1m server --message-rate` writes it
/// (`workload::messages`): scheduled instant (CLOCK_MONOTONIC ns, big-endian), sequence
/// with the top bit set (a server's) and the message's number below it, "c1mM", zeros.
fn payload(number: u32) -> Vec<u8> {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let ns = t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64;
    let mut p = Vec::with_capacity(32);
    p.extend_from_slice(&ns.to_be_bytes());
    p.extend_from_slice(&(number | 1 << 31).to_be_bytes());
    p.extend_from_slice(b"c1mM");
    p.resize(32, 0);
    p
}

/// One WebSocket connection served on `listener`: the upgrade, [`NUMBERS`] as server
/// messages, then the client's close frame (its hold ended) answered with ours and the
/// FIN, as c1m's server ends a connection.
fn misnumbering_peer(listener: TcpListener) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(LONG)).unwrap();
        let mut head = Vec::new();
        let key = loop {
            let mut b = [0u8; 1024];
            let n = s.read(&mut b).unwrap();
            assert!(n > 0, "the client left before its upgrade");
            head.extend_from_slice(&b[..n]);
            if let Some((req, _)) = handshake::parse_request(&head).unwrap() {
                break req.key.to_owned();
            }
        };
        let mut out = handshake::response_accept(&key);
        for n in NUMBERS {
            encode_frame(&mut out, Opcode::Binary, &payload(n), None);
        }
        s.write_all(&out).unwrap();
        let mut b = [0u8; 64];
        let n = s.read(&mut b).unwrap();
        assert!(n >= 2 && b[0] == 0x88, "not a close frame: {:?}", &b[..n]);
        let mut close = Vec::new();
        encode_frame(&mut close, Opcode::Close, &1000u16.to_be_bytes(), None);
        s.write_all(&close).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        while s.read(&mut b).is_ok_and(|n| n > 0) {}
    })
}

#[test]
fn a_gap_a_late_message_and_repeats_are_counted_each_and_named_in_words() {
    for (engine, port) in [("epoll", 9410u16), ("tokio", 9411)] {
        eprintln!("--- client engine {engine}");
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let peer = misnumbering_peer(listener);
        let dir = scratch("server-message-order");
        let json = dir.path().join("client.json");
        let out = Proc::spawn(
            "client",
            c1m()
                .args(["client", "--engine", engine, "--mode", "ws", "-n", "1"])
                .args(["--ports", &port.to_string(), "--quiet", "--hold", "1s"])
                .arg("--stats-json")
                .arg(&json),
        )
        .wait(LONG);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {err}", out.status);
        peer.join().unwrap();
        let c: AppSnapshot = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let m = c.counters.server_messages;
        // 3 jumped over 2, 7 over 5 and 6; 2 came late; 2 again and 8 again are repeats.
        assert_eq!(
            (m.received, m.gaps, m.skipped, m.out_of_order, m.duplicates),
            (9, 2, 3, 1, 2),
            "{engine}: {m:?}"
        );
        assert_eq!(c.percentiles["server_message_us"].count, 9, "each timed");
        assert_eq!(c.counters.closed.local_close, 1, "{:?}", c.counters.closed);
        // Each kind in words, once, with the numbers of its first case.
        for says in [
            "the server's messages have a gap: connection 0 got message 3 where 2 was next, \
             so 1 did not arrive in their place",
            "the server's messages came out of order: connection 0 got message 2 after later \
             ones (message 4 was next)",
            "the server sent a message twice: connection 0 got message 2 again",
        ] {
            assert_eq!(err.matches(says).count(), 1, "{engine}: {says:?} in\n{err}");
        }
    }
}
