//! Source-address binding: more connections to one server port than one source address
//! allows, which succeeds only because several source addresses are used.
//!
//! Runs in a private network namespace (root) where `net.ipv4.ip_local_port_range` is
//! narrowed to 100 ports, so one source address can hold exactly 100 connections to one
//! server port. The negative control proves the limit is real: with one source, 150 asked
//! gives 100 connected and 50 EADDRNOTAVAIL with a message naming `--source`.
#![allow(clippy::unwrap_used)] // panics are the assertions

use crate::workload_util;

use std::process::Command;

use c1m::workload::stats::snapshot::AppSnapshot;
use workload_util::{each_engine, is_root, scratch};

#[test]
fn several_source_addresses_pass_where_one_cannot() {
    each_engine(|engine| {
        if !is_root() {
            eprintln!(
                "SKIP: several_source_addresses_pass_where_one_cannot needs root \
             (private network namespace and per-namespace ip_local_port_range)"
            );
            return;
        }
        let bin = env!("CARGO_BIN_EXE_c1m");
        let scratch = scratch("source");
        let dir = scratch.path();
        let d = dir.display();
        let script = format!(
            r#"
set -e
ip link set lo up
sysctl -q -w net.ipv4.ip_local_port_range="40000 40099"
{bin} server --ports 21000 --quiet --duration 60s --control 127.0.0.1:21900 &
SPID=$!
for i in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/21900) 2>/dev/null && break; sleep 0.1; done
set +e
{bin} client --ports 21000 -n 150 --source 127.0.0.9 --hold 0s --quiet --stats-json {d}/one.json 2> {d}/one.err
echo "one_rc=$?"
{bin} client --ports 21000 -n 250 --source 127.0.0.2-127.0.0.4 --hold 0s --quiet --stats-json {d}/three.json 2> {d}/three.err
echo "three_rc=$?"
kill $SPID; wait $SPID
"#
        );
        let out = Command::new("unshare")
            .args(["--net", "bash", "-c", &script])
            .env("C1M_ENGINE", engine)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let read = |name: &str| -> AppSnapshot {
            let p = dir.join(name);
            let bytes = std::fs::read(&p).unwrap_or_else(|e| {
                panic!(
                    "{}: {e}\nstdout: {stdout}\nstderr: {}",
                    p.display(),
                    String::from_utf8_lossy(&out.stderr)
                )
            });
            serde_json::from_slice(&bytes).unwrap()
        };
        let one = read("one.json");
        let one_err = std::fs::read_to_string(dir.join("one.err")).unwrap();
        assert_eq!(one.counters.connected, 100, "{one_err}");
        assert_eq!(
            one.counters.failures.addr_not_avail, 50,
            "{:?}",
            one.counters.failures
        );
        // Degraded: exit 2, as a degraded `c1m run`.
        assert!(stdout.contains("one_rc=2"), "{stdout}");
        assert!(one_err.contains("add --source addresses"), "{one_err}");

        let three = read("three.json");
        let three_err = std::fs::read_to_string(dir.join("three.err")).unwrap();
        assert_eq!(three.counters.connected, 250, "{three_err}");
        assert_eq!(
            three.counters.failures.total(),
            0,
            "{:?}",
            three.counters.failures
        );
        assert!(stdout.contains("three_rc=0"), "{stdout}");
    });
}

/// A connect that never completes is given up after --connect-timeout and counted as
/// timed_out. In a private netns a listener that never accepts, with a backlog of 1 and
/// SYN cookies off, silently drops every SYN once its queue is full.
#[test]
fn connect_timeout_is_counted() {
    each_engine(|engine| {
        if !is_root() {
            eprintln!(
                "SKIP: connect_timeout_is_counted needs root (private network namespace, tcp_syncookies)"
            );
            return;
        }
        let bin = env!("CARGO_BIN_EXE_c1m");
        let scratch = scratch("timeout");
        let json = scratch.path().join("client.json");
        let j = json.display();
        let script = format!(
            r#"
ip link set lo up
sysctl -q -w net.ipv4.tcp_syncookies=0
python3 -c 'import socket,time; s=socket.socket(); s.bind(("127.0.0.1",21001)); s.listen(1); time.sleep(30)' &
PY=$!
# Until it listens (port 21001 = 0x5209, state 0A), without a probe taking a queue slot.
for i in $(seq 1 200); do grep -q ':5209 00000000:0000 0A' /proc/net/tcp && break; sleep 0.05; done
{bin} client --ports 21001 -n 20 --connect-timeout 1s --hold 0s --quiet --stats-json {j}
echo "rc=$?"
kill $PY
"#
        );
        let out = Command::new("unshare")
            .args(["--net", "bash", "-c", &script])
            .env("C1M_ENGINE", engine)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let s: AppSnapshot =
            serde_json::from_slice(&std::fs::read(&json).unwrap_or_else(|e| {
                panic!("{e}: {stdout} {}", String::from_utf8_lossy(&out.stderr))
            }))
            .unwrap();
        let c = s.counters;
        // The accept queue (backlog 1) takes a couple; every other connect times out.
        assert_eq!(c.attempted, 20);
        assert_eq!(c.connected + c.failures.timed_out, 20, "{:?}", c.failures);
        assert!(c.failures.timed_out >= 15, "{:?}", c.failures);
        assert!(stdout.contains("rc=2"), "{stdout}");
    });
}
