//! `/metrics` as people scrape it, on real `c1m run`s: the endpoint answers after the run
//! ended (its summary.json says the outcome) with the push histogram in that final
//! scrape, its count connections × pushes; a series once scraped is in every later
//! scrape (setup, idle, push, teardown and after); SIGTERM during the linger ends it at
//! once with the run's own exit code; per-port series only with `--metrics-per-port`.
//! Root (observer, private netns): run under the lock.

use std::{
    collections::BTreeSet,
    net::SocketAddr,
    path::Path,
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use c1m::view::prometheus::{
    self,
    check::{self, value},
};
use lab_util::{fresh_dir, root_or_skip};

use crate::{
    lab_util,
    metrics_dashboard::{scrape, series},
};

const PORTS: &str = "8000-8001";
const CONNECTIONS: u64 = 200;
const PUSHES: u64 = 3;
const LIMIT: Duration = Duration::from_secs(120);

/// A `c1m run` with `--metrics-addr addr` and `extra`, output in `dir`/lab.log.
fn start(dir: &Path, addr: SocketAddr, extra: &[&str]) -> Child {
    let n = CONNECTIONS.to_string();
    let pushes = PUSHES.to_string();
    let addr = addr.to_string();
    let mut args = vec![
        "--ports",
        PORTS,
        "-n",
        &n,
        "--rate",
        "400",
        "--idle",
        "1s",
        "--pushes",
        &pushes,
        "--metrics-addr",
        &addr,
    ];
    args.extend_from_slice(extra);
    lab_util::c1m_run(&dir.join("runs"), &args)
        .stdout(std::fs::File::create(dir.join("lab.log")).expect("log"))
        .stderr(std::fs::File::create(dir.join("lab.err")).expect("log"))
        .stdin(Stdio::null())
        .spawn()
        .expect("c1m run")
}

/// What the run printed, for failure messages.
fn logs(dir: &Path) -> String {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    format!("stdout:\n{}\nstderr:\n{}", read("lab.log"), read("lab.err"))
}

/// The outcome summary.json says, once it says one (it is rewritten while the run runs).
fn outcome(runs: &Path) -> Option<String> {
    let dir = lab_util::run_folders(runs).into_iter().next()?;
    let text = std::fs::read_to_string(dir.join("summary.json")).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    let o = json["outcome"].as_str()?.to_owned();
    (o != "running").then_some(o)
}

/// Every series of a scrape, by name and labels (values aside).
fn keys(s: &[check::Series]) -> BTreeSet<String> {
    s.iter().map(|(n, l, _)| format!("{n}{l:?}")).collect()
}

/// The phase a scrape says is current.
fn phase(s: &[check::Series]) -> Option<String> {
    s.iter()
        .find(|(n, _, v)| n == "c1m_phase" && *v == 1.0)
        .map(|(_, l, _)| l["phase"].clone())
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn the_final_scrape_after_the_run_has_the_push() {
    if !root_or_skip("the_final_scrape_after_the_run_has_the_push") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let dir = fresh_dir("metrics-linger");
    let addr: SocketAddr = "127.0.0.1:9467".parse().expect("addr");
    // A linger far longer than the test: SIGTERM ends it.
    let mut lab = start(&dir, addr, &["--metrics-linger", "10m"]);
    let until = Instant::now() + LIMIT;
    // Every series seen so far, and the phases scraped in.
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut phases: Vec<String> = Vec::new();
    let last = loop {
        if let Ok(Some(st)) = lab.try_wait() {
            panic!("c1m run ended ({st}) during its linger:\n{}", logs(&dir));
        }
        if Instant::now() > until {
            kill(&mut lab);
            panic!(
                "no outcome in summary.json and phase done within {LIMIT:?}:\n{}",
                logs(&dir)
            );
        }
        // Read before the scrape: a scrape after the outcome is written and the phase
        // moved to done is the final one.
        let ended = outcome(&dir.join("runs"));
        if let Ok(body) = scrape(addr, prometheus::PATH) {
            let s = series(&body);
            let now = keys(&s);
            let gone: Vec<&String> = seen.difference(&now).collect();
            assert!(
                gone.is_empty(),
                "series gone in phase {:?}: {gone:?}\n{body}",
                phase(&s)
            );
            seen = now;
            if let Some(p) = phase(&s)
                && phases.last() != Some(&p)
            {
                phases.push(p);
            }
            if let Some(o) = ended
                && phase(&s).as_deref() == Some("done")
            {
                break (o, s);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let (ended, s) = last;
    assert_eq!(ended, "complete", "{}", logs(&dir));
    assert!(
        phases.starts_with(&["setup".to_owned()]) && phases.contains(&"idle".to_owned()),
        "{phases:?}"
    );
    // The final scrape: the run is done, its outcome said, the push histogram whole.
    assert_eq!(phase(&s).as_deref(), Some("done"));
    let pushed = (CONNECTIONS * PUSHES) as f64;
    for (name, labels, want) in [
        ("c1m_run_outcome", &[("outcome", "complete")][..], 1.0),
        ("c1m_run_outcome", &[("outcome", "running")], 0.0),
        (
            "c1m_push_message_seconds_count",
            &[("side", "client")],
            pushed,
        ),
        (
            "c1m_push_message_seconds_bucket",
            &[("side", "client"), ("le", "+Inf")],
            pushed,
        ),
        (
            "c1m_push_fanout_seconds_count",
            &[("side", "client")],
            pushed,
        ),
    ] {
        assert_eq!(value(&s, name, labels), Some(want), "{name}{labels:?}");
    }
    // What the push was timed from, for the dashboard's titles.
    assert_eq!(
        value(
            &s,
            "c1m_run_info",
            &[
                ("push_latency_from", "broadcast"),
                ("push_fanout_from", "trigger")
            ]
        ),
        Some(1.0)
    );
    // Accept-queue series summed over the ports: no `port` label by default.
    assert!(
        !s.iter().any(|(_, l, _)| l.contains_key("port")),
        "a per-port series without --metrics-per-port"
    );
    assert!(value(&s, "c1m_listen_sockets", &[]).is_some(), "{s:?}");
    // The run said where and for how long, after its summary.
    let stdout = std::fs::read_to_string(dir.join("lab.log")).unwrap_or_default();
    let said = format!("metrics stay up for 600 s at {addr} for a final scrape (Ctrl-C ends now)");
    let (summary, after) = stdout
        .split_once(&said)
        .unwrap_or_else(|| panic!("no {said:?} in\n{stdout}"));
    assert!(summary.contains("run folder:"), "{stdout}");
    assert!(after.trim().is_empty(), "{after}");

    // SIGTERM ends the linger at once, and the exit code is the run's own.
    // SAFETY: our own child, not yet reaped.
    unsafe { libc::kill(lab.id() as i32, libc::SIGTERM) };
    let out = lab_util::wait_bounded(lab, Duration::from_secs(30), "c1m run's linger");
    assert_eq!(out.status.code(), Some(0), "{}", logs(&dir));
    assert_eq!(
        outcome(&dir.join("runs")).as_deref(),
        Some("complete"),
        "the linger changed the outcome"
    );
    assert!(
        scrape(addr, prometheus::PATH).is_err(),
        "/metrics still answers after c1m run ended"
    );
}

#[test]
fn per_port_series_come_with_the_flag() {
    if !root_or_skip("per_port_series_come_with_the_flag") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let dir = fresh_dir("metrics-per-port");
    let addr: SocketAddr = "127.0.0.1:9468".parse().expect("addr");
    let mut lab = start(
        &dir,
        addr,
        &["--metrics-per-port", "--metrics-linger", "0s"],
    );
    let until = Instant::now() + LIMIT;
    let s = loop {
        if let Ok(Some(st)) = lab.try_wait() {
            panic!(
                "c1m run ended ({st}) before a scrape had its ports:\n{}",
                logs(&dir)
            );
        }
        if Instant::now() > until {
            kill(&mut lab);
            panic!("no per-port series within {LIMIT:?}:\n{}", logs(&dir));
        }
        if let Ok(body) = scrape(addr, prometheus::PATH) {
            let s = series(&body);
            let listening = |port: &str| value(&s, "c1m_listen_sockets", &[("port", port)]);
            if listening("8000").is_some() && listening("8001").is_some() {
                break s;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for family in [
        "c1m_accept_queue_depth",
        "c1m_accept_queue_limit",
        "c1m_accept_queue_overflows_total",
        "c1m_listen_sockets",
    ] {
        let ports: BTreeSet<&str> = s
            .iter()
            .filter(|(n, ..)| n == family)
            .map(|(_, l, _)| l.get("port").map_or("none", String::as_str))
            .collect();
        assert_eq!(ports, BTreeSet::from(["8000", "8001"]), "{family}");
    }
    // --metrics-linger 0s: the endpoint closes with the run, which ends as it would.
    let out = lab_util::wait_bounded(lab, LIMIT, "c1m run");
    assert_eq!(out.status.code(), Some(0), "{}", logs(&dir));
    let stdout = std::fs::read_to_string(dir.join("lab.log")).unwrap_or_default();
    assert!(!stdout.contains("metrics stay up"), "{stdout}");
}
