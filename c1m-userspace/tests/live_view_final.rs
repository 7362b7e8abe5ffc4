//! Live and final figures agree (issue 32, point 5): a real small run with `--json`
//! lines, whose last line of each phase (`phase_end`) carries the figures the run
//! records for that phase, and summary.json beside it. Each figure's last live value in
//! each phase equals the run's: connections, kernel bytes, the setup time, memory per
//! connection (kernel per socket, user per connection), the latencies; after idle the
//! memory per connection shown is idle's. Root: the run is in a private network
//! namespace; without root the test says SKIP loudly.
#![allow(clippy::unwrap_used)] // panics are the assertions in tests

use std::{collections::BTreeMap, process::Command, time::Duration};

use c1m::model::{PerConnection, RunRecord};
use lab_util::{bounded, fresh_dir, kernel_vs_app, root_or_skip, run_folder};
use serde_json::Value;

use crate::lab_util;

const N: u64 = 2000;

/// `figures.<path>` of a JSON line, as u64 / f64 (None: null or missing).
fn u(line: &Value, path: &str) -> Option<u64> {
    line.pointer(&format!("/figures/{path}"))
        .and_then(Value::as_u64)
}

fn f(line: &Value, path: &str) -> Option<f64> {
    line.pointer(&format!("/figures/{path}"))
        .and_then(Value::as_f64)
}

#[test]
fn the_last_live_value_of_each_phase_is_the_runs() {
    if !root_or_skip("the_last_live_value_of_each_phase_is_the_runs") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let out = fresh_dir("live-final");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_c1m"));
    cmd.args([
        "run",
        "--json",
        "--ports",
        "8000-8003",
        "-n",
        &N.to_string(),
        "--rate",
        "4000",
        "--idle",
        "1s",
        "--out",
    ])
    .arg(out.path());
    let result = bounded(cmd, Duration::from_secs(240));
    let stdout = String::from_utf8_lossy(&result.stdout);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(
        result.status.success(),
        "c1m run failed\n{stdout}\n{stderr}"
    );
    let lines: Vec<Value> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let run: RunRecord = serde_json::from_str(
        &std::fs::read_to_string(run_folder(out.path()).join("summary.json")).unwrap(),
    )
    .unwrap();
    let names: Vec<&str> = run.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["setup", "idle", "push", "teardown"]);

    // Each phase's last line is its end, drawn with the recorded figures.
    let mut last: BTreeMap<&str, &Value> = BTreeMap::new();
    for l in &lines {
        if let Some(p) = l["phase"]
            .as_str()
            .and_then(|p| names.iter().find(|n| **n == p))
        {
            last.insert(p, l);
        }
    }
    for phase in &run.phases {
        let end = last
            .get(phase.name.as_str())
            .unwrap_or_else(|| panic!("no line of {}:\n{stdout}", phase.name));
        assert_eq!(end["phase_end"], Value::Bool(true), "{}: {end}", phase.name);
        // Connections, both sides, kernel and app: the phase's kernel-vs-app rows.
        for (side, row) in [("server", "server open"), ("client", "client open")] {
            let r = kernel_vs_app(phase, row);
            assert_eq!(
                u(end, &format!("{side}/app_open")).map(|v| v as i64),
                r.app,
                "{} {row}: {end}",
                phase.name
            );
            assert_eq!(
                end.pointer(&format!("/figures/{side}/kernel_established"))
                    .and_then(Value::as_i64),
                r.kernel,
                "{} {row}: {end}",
                phase.name
            );
        }
        assert_eq!(
            u(end, "kernel_socket_bytes"),
            phase.kernel_socket_bytes,
            "{}: {end}",
            phase.name
        );
        // Every figure carries its age.
        assert!(
            end.pointer("/figures/readings/kernel/age_s").is_some()
                && end.pointer("/figures/readings/client/age_s").is_some(),
            "{end}"
        );
    }
    let client = run.client.as_ref().unwrap();
    let setup = last["setup"];
    assert_eq!(u(setup, "client/app_open"), Some(N));
    // The setup time: the client's, first connect to last established, as recorded.
    let recorded = client.setup_rate.unwrap().duration_s;
    assert_eq!(f(setup, "setup_duration_s"), Some(recorded), "{setup}");
    assert_eq!(f(last["teardown"], "setup_duration_s"), Some(recorded));

    // Memory per connection: the end of idle's, live and recorded, to the byte.
    let idle = last["idle"];
    let live: PerConnection =
        serde_json::from_value(idle["figures"]["per_connection"].clone()).unwrap();
    assert_eq!(live, run.per_connection, "{idle}");
    assert_eq!(live.connections, N);
    assert!(live.kernel_bytes_per_socket.is_some_and(|b| b > 1000.0));
    assert_eq!(
        f(idle, "kernel_bytes_per_socket"),
        run.per_connection.kernel_bytes_per_socket
    );
    assert_eq!(
        f(idle, "server/user_bytes_per_connection"),
        run.per_connection.server_user_bytes
    );
    assert_eq!(
        f(idle, "client/user_bytes_per_connection"),
        run.per_connection.client_user_bytes
    );
    // From idle's end on the view shows idle's, said so: during the push and the
    // teardown.
    for phase in ["idle", "push", "teardown"] {
        let held: PerConnection =
            serde_json::from_value(last[phase]["held"]["per_connection"].clone()).unwrap();
        assert_eq!(held, run.per_connection, "{phase}");
        assert_eq!(last[phase]["held"]["phase"], "idle");
    }
    // While connections are held, the live figure itself.
    assert!(last["setup"]["held"].is_null(), "{}", last["setup"]);

    // Latencies: the client's histograms, as summary.json has them.
    for (phase, key, name) in [
        ("idle", "connect", "connect_us"),
        ("push", "push_message", "push_message_us"),
        ("push", "push_fanout", "push_fanout_us"),
    ] {
        let want = client.percentiles[name];
        assert_eq!(want.count, N, "{name}");
        let got = &last[phase]["figures"]["latency"][key];
        for q in ["count", "p50", "p99", "max"] {
            assert_eq!(
                got[q].as_u64(),
                Some(match q {
                    "count" => want.count,
                    "p50" => want.p50,
                    "p99" => want.p99,
                    _ => want.max,
                }),
                "{phase} {key} {q}: {got}"
            );
        }
    }
    // No push latency before the push.
    assert!(idle["figures"]["latency"]["push_message"].is_null());
    let teardown = last["teardown"];
    assert_eq!(u(teardown, "client/app_open"), Some(0));
    assert_eq!(u(teardown, "server/app_open"), Some(0));
}
