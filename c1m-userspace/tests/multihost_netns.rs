//! The seeds' topology with network namespaces as hosts: one server host, two client
//! hosts, joined by veth pairs to a bridge (itself in a namespace of its own, so the
//! test's traffic never touches the box's namespace). The server host runs
//! `c1m run --clients external`, each client host `c1m client --shard i/2` over 10
//! worker processes, then `c1m merge` joins the three folders, and the merged numbers
//! must be exactly the hosts' own.

use crate::lab_util;

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use c1m::{
    multihost::model::KernelSource, observer::audit::Figure, report,
    workload::stats::histograms::HIST_NAMES,
};
use c1m_common::tcp_state;
use lab_util::{fresh_dir, root_or_skip};

/// Connections over both client hosts (15,000 each, 10 workers a host).
const TOTAL: u64 = 30_000;
const SERVER: &str = "10.77.0.1";
const PORTS: &str = "8000-8003";

/// The namespaces and the processes in them; dropping it (a panic too) kills the
/// processes it started, by pid, and deletes the namespaces, which removes the links.
struct Hosts {
    names: Vec<String>,
    children: Vec<Child>,
}

impl Hosts {
    fn ns(&self, i: usize) -> &str {
        &self.names[i]
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("run ip");
    assert!(st.success(), "ip {args:?} failed");
}

/// Namespace `n`, made anew (one left by a killed run of a test under the same pid goes
/// first), its loopback up.
pub(crate) fn fresh_ns(n: &str) {
    let _ = Command::new("ip")
        .args(["netns", "del", n])
        .stderr(Stdio::null())
        .status();
    ip(&["netns", "add", n]);
    ip(&["-n", n, "link", "set", "lo", "up"]);
}

/// bridge namespace + server + two clients, 10.77.0.0/24.
fn topology() -> Hosts {
    let tag = format!("{:x}", std::process::id() & 0xffff);
    let names: Vec<String> = ["br", "srv", "c0", "c1"]
        .iter()
        .map(|r| format!("c1mmh-{tag}-{r}"))
        .collect();
    let hosts = Hosts {
        names,
        children: Vec::new(),
    };
    for n in &hosts.names {
        fresh_ns(n);
    }
    let br = hosts.ns(0).to_owned();
    ip(&["-n", &br, "link", "add", "br0", "type", "bridge"]);
    ip(&["-n", &br, "link", "set", "br0", "up"]);
    for (i, addr) in [
        (1, "10.77.0.1/24"),
        (2, "10.77.0.2/24"),
        (3, "10.77.0.3/24"),
    ] {
        let host = hosts.ns(i).to_owned();
        let (inner, outer) = (format!("v{tag}h{i}"), format!("v{tag}b{i}"));
        ip(&[
            "link", "add", &inner, "netns", &host, "type", "veth", "peer", "name", &outer, "netns",
            &br,
        ]);
        ip(&["-n", &br, "link", "set", &outer, "master", "br0"]);
        ip(&["-n", &br, "link", "set", &outer, "up"]);
        ip(&["-n", &host, "addr", "add", addr, "dev", &inner]);
        ip(&["-n", &host, "link", "set", &inner, "up"]);
    }
    hosts
}

/// `c1m ARGS` inside namespace `ns`, output to `log`.
pub(crate) fn c1m_in(ns: &str, args: &[String], log: &Path) -> Child {
    let out = std::fs::File::create(log).expect("log file");
    Command::new("ip")
        .args(["netns", "exec", ns, env!("CARGO_BIN_EXE_c1m")])
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .spawn()
        .expect("start c1m")
}

pub(crate) fn wait(child: &mut Child, limit: Duration, what: &str, log: &Path) -> i32 {
    let until = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().expect("wait") {
            return st.code().unwrap_or(-1);
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!(
                "{what} did not end within {limit:?}:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn listening(ns: &str, port: &str) -> bool {
    let out: Output = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "ss",
            "-Htln",
            &format!("sport = :{port}"),
        ])
        .output()
        .expect("ss");
    !out.stdout.is_empty()
}

/// Waits until `port` listens in `ns`, at most 60 s (then fails with the server's log).
pub(crate) fn wait_listening(ns: &str, port: &str, log: &Path) {
    let up = Instant::now();
    while !listening(ns, port) {
        assert!(
            up.elapsed() < Duration::from_secs(60),
            "the server did not listen within 60 s:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn hlog_total(path: &Path) -> u64 {
    match std::fs::read_to_string(path) {
        Ok(text) => report::hlog::merge(&[&text]).expect("hlog").len(),
        Err(_) => 0,
    }
}

pub(crate) fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn two_client_hosts_merge_exactly_into_one_run() {
    if !root_or_skip("two_client_hosts_merge_exactly_into_one_run") {
        return;
    }
    let dir = fresh_dir("multihost");
    let mut hosts = topology();
    let (srv, c0, c1) = (
        hosts.ns(1).to_owned(),
        hosts.ns(2).to_owned(),
        hosts.ns(3).to_owned(),
    );
    let runs = dir.join("server-runs");
    let total = TOTAL.to_string();
    let server_log = dir.join("server.out");
    let server = c1m_in(
        &srv,
        &strings(&[
            "run",
            "--clients",
            "external",
            "--expect",
            &total,
            "--addr",
            SERVER,
            "--ports",
            PORTS,
            "--mode",
            "ws",
            "--idle",
            "2s",
            "--setup-timeout",
            "100s",
            "--plain",
            "--out",
            runs.to_str().expect("utf-8 path"),
        ]),
        &server_log,
    );
    hosts.children.push(server);
    wait_listening(&srv, "8003", &server_log);
    // The clock endpoint too: a client's query then connects once (a refused retry would
    // be one more ActiveOpens than the clock lines say).
    wait_listening(&srv, "7999", &server_log);
    // Both hosts ramp together, 2 s from now.
    let start_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
        + 2.0;
    let mut client_dirs: Vec<PathBuf> = Vec::new();
    for (i, ns) in [&c0, &c1].into_iter().enumerate() {
        let run_dir = dir.join(format!("client-{i}"));
        let args = strings(&[
            "client",
            "--shard",
            &format!("{i}/2"),
            "-n",
            &total,
            // --addr's old name, still accepted.
            "--host",
            SERVER,
            "--ports",
            PORTS,
            "--mode",
            "ws",
            "--rate",
            "10000",
            "--hold",
            "forever",
            "--workers",
            "10",
            "--start-at",
            &format!("{start_at:.3}"),
            "--run-dir",
            run_dir.to_str().expect("utf-8 path"),
            "--clock-from",
            &format!("{SERVER}:7999"),
            "--host-label",
            &format!("client-{i}"),
            "--quiet",
        ]);
        let log = dir.join(format!("client-{i}.out"));
        hosts.children.push(c1m_in(ns, &args, &log));
        client_dirs.push(run_dir);
    }
    let limit = Duration::from_secs(130);
    let mut codes = Vec::new();
    for (i, what) in ["server", "client 0", "client 1"].iter().enumerate() {
        let log = match i {
            0 => server_log.clone(),
            n => dir.join(format!("client-{}.out", n - 1)),
        };
        codes.push(wait(&mut hosts.children[i], limit, what, &log));
    }
    let log = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    assert_eq!(
        codes,
        [0, 0, 0],
        "server:\n{}\nclient 0:\n{}\nclient 1:\n{}",
        log("server.out"),
        log("client-0.out"),
        log("client-1.out")
    );
    let server_dir = lab_util::run_folder(&runs);
    let merged = dir.join("merged");
    let out = Command::new(env!("CARGO_BIN_EXE_c1m"))
        .arg("merge")
        .arg(&server_dir)
        .args(&client_dirs)
        .arg("--out")
        .arg(&merged)
        .output()
        .expect("c1m merge");
    assert!(
        out.status.success(),
        "merge: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // What a user sees: the per-host kernel-vs-app lines.
    eprintln!("{}", String::from_utf8_lossy(&out.stdout));
    let run = report::load_run(&merged).expect("merged summary");
    // Every host ended complete, each client of the server's run: so did the merge.
    assert_eq!(
        run.outcome,
        c1m::model::Outcome::Complete,
        "{:?}",
        run.warnings
    );
    let ids: Vec<Option<String>> = std::iter::once(&server_dir)
        .chain(&client_dirs)
        .map(|d| {
            report::load_run(d)
                .expect("summary")
                .host
                .and_then(|h| h.run_id)
        })
        .collect();
    assert!(
        ids[0].is_some() && ids.iter().all(|i| *i == ids[0]),
        "{ids:?}"
    );
    let shards: Vec<_> = client_dirs
        .iter()
        .map(|d| report::load_run(d).expect("client summary"))
        .collect();
    let client = run.client.as_ref().expect("merged client side");
    let connected: Vec<u64> = shards
        .iter()
        .map(|s| s.client.as_ref().expect("client").counters.connected)
        .collect();
    // Exact: the merged count is the shards' sum, which is what the server's kernel held.
    assert_eq!(connected, [TOTAL / 2, TOTAL / 2]);
    assert_eq!(client.counters.connected, connected.iter().sum::<u64>());
    let setup = &run.phases[0];
    assert_eq!(setup.name, "setup");
    let kernel_server = setup
        .kernel_vs_app
        .iter()
        .find(|r| r.what == "server open")
        .and_then(|r| r.kernel);
    assert_eq!(
        kernel_server,
        Some(TOTAL as i64),
        "{:?}",
        setup.kernel_vs_app
    );
    // Each host's kernel counted its own connections to the server.
    let mh = run.multihost.as_ref().expect("per-host breakdown");
    assert_eq!(mh.hosts.len(), 2);
    for (i, h) in mh.hosts.iter().enumerate() {
        assert_eq!(h.label, format!("client-{i}"));
        assert_eq!(h.connected, TOTAL / 2);
        assert_eq!(h.failures, 0);
        assert_eq!(h.kernel_client_established, Some((TOTAL / 2) as i64));
        assert!(h.connect_p99_us.is_some() && h.push_message_p99_us.is_some());
        assert!(h.clock_offset_ns.is_some() && h.clock_bound_ns.is_some());
    }
    assert!(mh.clock_bound_ns.is_some(), "{}", mh.clock_note);
    for h in &mh.hosts {
        eprintln!(
            "{}: clock offset {:?} ns, bound {:?} ns, p99 push {:?} µs",
            h.label, h.clock_offset_ns, h.clock_bound_ns, h.push_message_p99_us
        );
    }
    // Every client received the push.
    for s in &shards {
        let c = s.client.as_ref().expect("client");
        assert_eq!(c.counters.pushes_received, c.counters.connected);
    }
    assert_eq!(client.pushes.len(), 1);
    assert_eq!(client.pushes[0].count, TOTAL);
    // Merged interval logs hold exactly the shards' values, and the merged histograms.
    for name in HIST_NAMES {
        let file = format!("client-{name}.hlog");
        let sum: u64 = client_dirs.iter().map(|d| hlog_total(&d.join(&file))).sum();
        assert_eq!(hlog_total(&merged.join(&file)), sum, "{file}");
        let in_summary = client.histogram(name).map(|h| h.len()).unwrap_or(0);
        assert_eq!(in_summary, sum, "{name}");
    }
    assert_eq!(hlog_total(&merged.join("client-connect_us.hlog")), TOTAL);
    let report = std::fs::read_to_string(merged.join("report.html")).expect("report");
    assert!(report.contains("Client hosts") && report.contains("client-1"));
    assert!(report.contains("Kernel vs app, per client host"));
    for (i, ns) in [&c0, &c1].into_iter().enumerate() {
        let clock_queries = log(&format!("client-{i}.out"))
            .matches("clock offset to")
            .count() as u64;
        each_host_observed(ns, &shards[i], clock_queries);
    }
    for h in &mh.hosts {
        assert_eq!(h.kernel_source, Some(KernelSource::Observer), "{}", h.label);
        assert_eq!(h.kernel_connected, Some((TOTAL / 2) as i64), "{h:?}");
        assert!(h.kernel_agrees && h.kernel_explanation.is_none(), "{h:?}");
        assert!(h.kernel_retransmits.is_some() && h.kernel_socket_bytes.is_some());
    }
    server_names_its_clients(&server_dir, &log("server.out"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A client host's eBPF figures against its own namespace's MIB and its app, exactly:
/// every connect the observer saw is one the kernel counted (`Tcp ActiveOpens`, less
/// the clock queries to the server's control port, which are not on the watched ports)
/// and one the app connected.
fn each_host_observed(ns: &str, run: &c1m::model::RunRecord, clock_queries: u64) {
    let host = run.host.as_ref().expect("host");
    assert_eq!(host.kernel_source, Some(KernelSource::Observer), "{ns}");
    assert_eq!(host.kernel_fallback, None, "{ns}");
    let k = run.kernel.as_ref().expect("the observer's last view");
    let app = run.client.as_ref().expect("client").counters.connected;
    assert_eq!(app, TOTAL / 2);
    // CLOSE -> SYN_SENT, SYN_SENT -> ESTABLISHED: every connection on the client side.
    assert_eq!(k.client.established_total, app, "{ns}");
    assert_eq!(
        k.client.transition(tcp_state::CLOSE, tcp_state::SYN_SENT),
        app,
        "{ns}: births"
    );
    assert_eq!(
        k.server.established_total, 0,
        "{ns}: no server on a client host"
    );
    let snmp = Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/proc/net/snmp"])
        .output()
        .expect("ip netns exec cat");
    let active_opens = mib_tcp(&String::from_utf8_lossy(&snmp.stdout), "ActiveOpens");
    assert_eq!(
        active_opens,
        app + clock_queries,
        "{ns}: ActiveOpens = connects + {clock_queries} clock queries"
    );
    // The observer's own audit read the same MIB over its life: equal, row by row.
    let audit = run.audit.as_ref().expect("audit");
    let opens = audit
        .rows
        .iter()
        .find(|r| r.figure == Figure::ActiveOpens)
        .expect("ActiveOpens row");
    assert_eq!((opens.c1m, opens.kernel), (app, app), "{ns}: {opens:?}");
    // The last phase's rows compare the client side only, and agree.
    let last = run.phases.last().expect("phases");
    assert!(
        last.kernel_vs_app
            .iter()
            .all(|r| r.what.starts_with("client")),
        "{ns}: {:?}",
        last.kernel_vs_app
    );
    assert!(
        run.samples
            .iter()
            .any(|s| s.kernel_client_established == Some(app as i64)),
        "{ns}: the kernel held every connection at once"
    );
}

/// `Tcp: NAME` of /proc/net/snmp's text.
fn mib_tcp(text: &str, name: &str) -> u64 {
    let mut tcp = text.lines().filter(|l| l.starts_with("Tcp:"));
    let (heads, values) = (
        tcp.next().expect("Tcp header"),
        tcp.next().expect("Tcp values"),
    );
    let i = heads
        .split_whitespace()
        .position(|h| h == name)
        .expect("counter");
    values
        .split_whitespace()
        .nth(i)
        .and_then(|v| v.parse().ok())
        .expect("number")
}

/// The server host names its clients by the addresses they connected from, and never
/// counted more connections than there were (each read of the socket table counts a
/// connection once).
fn server_names_its_clients(server_dir: &Path, server_log: &str) {
    let run = report::load_run(server_dir).expect("server summary");
    assert_eq!(run.config.sources, "10.77.0.2,10.77.0.3");
    assert!(!server_log.contains("127.0.0."), "{server_log}");
    let counted: Vec<u64> = server_log
        .lines()
        .filter_map(|l| l.split_once("client host(s), "))
        .filter_map(|(_, rest)| rest.split_once(" connections"))
        .filter_map(|(n, _)| n.replace(',', "").parse().ok())
        .collect();
    assert!(!counted.is_empty(), "{server_log}");
    assert!(counted.iter().all(|&n| n <= TOTAL), "{counted:?}");
    // At the end of setup it saw them all (later lines may show the teardown).
    assert_eq!(counted.iter().max(), Some(&TOTAL), "{counted:?}");
}

/// A client host without privileges (uid 65534, no capabilities) says in one line that
/// it has no eBPF observer and why, counts its kernel side from `/proc/net/tcp`
/// instead, and its folder says where the figure came from.
#[test]
fn a_client_host_without_privileges_falls_back_to_the_socket_table_marked() {
    if !root_or_skip("a_client_host_without_privileges_falls_back_to_the_socket_table_marked") {
        return;
    }
    const N: u64 = 300;
    let dir = fresh_dir("multihost-nobody");
    // The unprivileged client writes its folder here.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .expect("chmod");
    let ns = format!("c1mobs-{:x}-c", std::process::id() & 0xffff);
    let _ = Command::new("ip")
        .args(["netns", "del", &ns])
        .stderr(Stdio::null())
        .status();
    ip(&["netns", "add", &ns]);
    let mut hosts = Hosts {
        names: vec![ns.clone()],
        children: Vec::new(),
    };
    ip(&["-n", &ns, "link", "set", "lo", "up"]);
    let server_log = dir.join("server.out");
    hosts.children.push(c1m_in(
        &ns,
        &strings(&["server", "--ports", "20710", "--threads", "1", "--quiet"]),
        &server_log,
    ));
    wait_listening(&ns, "20710", &server_log);
    let run_dir = dir.join("client");
    let mut client = Command::new("ip");
    client
        .args(["netns", "exec", &ns, "setpriv"])
        .args(lab_util::AS_NOBODY)
        .args([
            env!("CARGO_BIN_EXE_c1m"),
            "client",
            "-n",
            &N.to_string(),
            "--host",
            "127.0.0.1",
            "--ports",
            "20710",
            "--hold",
            "3s",
            "--quiet",
            "--host-label",
            "nobody",
            "--run-dir",
        ])
        .arg(&run_dir)
        .env("TMPDIR", dir.path())
        .env_remove("XDG_RUNTIME_DIR");
    let out = lab_util::bounded(client, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("no eBPF observer"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].contains("CAP_BPF") && said[0].contains("/proc/net/tcp"),
        "{}",
        said[0]
    );
    let run = report::load_run(&run_dir).expect("client summary");
    let host = run.host.as_ref().expect("host");
    assert_eq!(host.kernel_source, Some(KernelSource::ProcNetTcp));
    assert!(
        host.kernel_fallback
            .as_deref()
            .is_some_and(|w| w.contains("CAP_BPF")),
        "{:?}",
        host.kernel_fallback
    );
    assert!(!run.config.observer);
    assert!(run.kernel.is_none() && run.audit.is_none());
    assert_eq!(run.client.as_ref().expect("client").counters.connected, N);
    // The socket table saw every connection held at once (held 3 s: the table is read
    // once a second, and a loaded box read it once or never in a 1 s hold).
    let most = run
        .samples
        .iter()
        .filter_map(|s| s.kernel_client_established)
        .max();
    assert_eq!(most, Some(N as i64), "{:?}", run.samples);
}
