//! The Grafana dashboard (deploy/grafana/c1m-dashboard.json) and the Prometheus scrape
//! config (deploy/kubernetes/prometheus-scrape.yaml) against c1m's real `/metrics`:
//! every metric a PromQL expression of the dashboard reads, and every label value it
//! matches, is in what real c1m processes serve over HTTP (`c1m top` over a real server
//! and client, and the client's own endpoint, as on Kubernetes); every scrape is valid
//! text without `NaN`; and a real `c1m run` keeps its `c1m_run_info` labels across its
//! phases while `c1m_phase` moves. Root (observer, private netns): run under the lock.

use crate::lab_util;

use std::{
    collections::{BTreeMap, BTreeSet},
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use c1m::view::prometheus::{
    self, LATENCIES, PHASES,
    check::{self, value},
};
use lab_util::{fresh_dir, root_or_skip};

const PORTS: &str = "8000-8001";
const CONNECTIONS: u64 = 300;
const LIMIT: Duration = Duration::from_secs(90);

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

/// The exposition at `path` of `addr`, or why not (the process may not listen yet).
pub(crate) fn scrape(addr: SocketAddr, path: &str) -> Result<String, String> {
    let mut s =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: c1m\r\n\r\n").map_err(|e| e.to_string())?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).map_err(|e| e.to_string())?;
    let (head, body) = resp.split_once("\r\n\r\n").ok_or("no head")?;
    if !head.starts_with("HTTP/1.1 200 OK\r\n") {
        return Err(head.to_owned());
    }
    assert!(
        head.contains(&format!("Content-Type: {}", prometheus::CONTENT_TYPE)),
        "{head}"
    );
    Ok(body.to_owned())
}

/// Parsed strictly; `NaN` nowhere.
pub(crate) fn series(body: &str) -> Vec<check::Series> {
    assert!(!body.contains("NaN"), "NaN in\n{body}");
    check::parse(body).unwrap_or_else(|e| panic!("{e}\n{body}"))
}

/// Processes this test started; dropped (a panic too), each is killed by its pid.
struct Children(Vec<(String, Child)>);

impl Children {
    fn start(&mut self, what: &str, args: &[&str], log: &Path) {
        let out = std::fs::File::create(log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_c1m"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("start c1m");
        self.0.push((what.to_owned(), child));
    }

    /// Fails naming the child that ended, with its log.
    fn all_alive(&mut self, dir: &Path) {
        for (what, c) in &mut self.0 {
            if let Ok(Some(st)) = c.try_wait() {
                let log = std::fs::read_to_string(dir.join(format!("{what}.log")));
                panic!("{what} exited ({st}):\n{}", log.unwrap_or_default());
            }
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Scrapes `addr` until `ready` holds for the parsed series (bounded by [`LIMIT`]).
fn scrape_until(
    addr: SocketAddr,
    what: &str,
    children: &mut Children,
    dir: &Path,
    ready: impl Fn(&[check::Series]) -> bool,
) -> Vec<check::Series> {
    let until = Instant::now() + LIMIT;
    let mut last = String::new();
    loop {
        children.all_alive(dir);
        if let Ok(body) = scrape(addr, prometheus::PATH) {
            let s = series(&body);
            if ready(&s) {
                return s;
            }
            last = body;
        }
        assert!(
            Instant::now() < until,
            "{what}: not ready within {LIMIT:?}; last scrape:\n{last}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One selector of a PromQL expression: the metric and its label matchers.
#[derive(Debug, PartialEq)]
struct Selector {
    metric: String,
    /// (label, operator, value).
    matchers: Vec<(String, String, String)>,
}

/// The selectors of a PromQL expression (or a Grafana `label_values(metric, label)`):
/// names followed by `(` are functions, names after `by`/`without`/`on`/`ignoring`/
/// `group_left`/`group_right` are label lists, `[…]` are ranges, keywords and numbers
/// are skipped; every other name is a metric.
fn selectors(expr: &str) -> Vec<Selector> {
    const KEYWORDS: [&str; 7] = ["bool", "offset", "and", "or", "unless", "inf", "nan"];
    const GROUPINGS: [&str; 6] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut skip_group = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '[' {
            while i < chars.len() && chars[i] != ']' {
                i += 1;
            }
            i += 1;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += 1 + usize::from(chars[i] == '\\');
            }
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "_:".contains(chars[i])) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut j = i;
            while j < chars.len() && chars[j] == ' ' {
                j += 1;
            }
            let next = chars.get(j).copied();
            let rest: String = chars[j..].iter().collect();
            // `max by (phase) (…)`: an aggregation with its grouping first.
            let grouped_next = ["by", "without"]
                .iter()
                .any(|g| rest.starts_with(g) && rest[g.len()..].trim_start().starts_with('('));
            if GROUPINGS.contains(&word.as_str()) {
                skip_group = true;
            } else if next == Some('(')
                || grouped_next
                || KEYWORDS.contains(&word.to_lowercase().as_str())
            {
            } else {
                let mut matchers = Vec::new();
                if next == Some('{') {
                    let end = (j..chars.len())
                        .find(|&k| chars[k] == '}')
                        .expect("unclosed {");
                    let inner: String = chars[j + 1..end].iter().collect();
                    matchers = label_matchers(&inner);
                    i = end + 1;
                }
                out.push(Selector {
                    metric: word,
                    matchers,
                });
            }
        } else if c == '(' && skip_group {
            // `by (side, le)`: label names, not metrics.
            while i < chars.len() && chars[i] != ')' {
                i += 1;
            }
            i += 1;
            skip_group = false;
        } else if c == '$' {
            // A Grafana variable ($__rate_interval outside a range).
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// `side="client", job=~"$job"` as (label, operator, value).
fn label_matchers(inner: &str) -> Vec<(String, String, String)> {
    inner
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(|m| {
            let at = m.find(['=', '!']).expect("matcher operator");
            let op_len = if m[at + 1..].starts_with(['=', '~']) {
                2
            } else {
                1
            };
            let value = m[at + op_len..].trim().trim_matches('"');
            (
                m[..at].trim().to_owned(),
                m[at..at + op_len].to_owned(),
                value.to_owned(),
            )
        })
        .collect()
}

/// The PromQL in a Grafana query variable: `label_values(SELECTOR, label)` reads
/// SELECTOR; `query_result(EXPR)` reads EXPR.
fn variable_query(q: &str) -> String {
    let q = q.trim();
    if let Some(args) = q
        .strip_prefix("label_values(")
        .and_then(|a| a.strip_suffix(')'))
    {
        let (selector, _label) = args.rsplit_once(',').expect("label_values(metric, label)");
        return selector.trim().to_owned();
    }
    q.strip_prefix("query_result(")
        .and_then(|a| a.strip_suffix(')'))
        .unwrap_or(q)
        .to_owned()
}

/// Every PromQL expression of the dashboard: panel targets (rows' panels too) and
/// query variables.
fn dashboard_queries() -> Vec<String> {
    let path = repo("deploy/grafana/c1m-dashboard.json");
    let text = std::fs::read_to_string(&path).expect("dashboard");
    let d: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");
    fn panels(v: &serde_json::Value, out: &mut Vec<String>) {
        for p in v.as_array().into_iter().flatten() {
            for t in p["targets"].as_array().into_iter().flatten() {
                out.push(t["expr"].as_str().expect("target expr").to_owned());
            }
            panels(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    panels(&d["panels"], &mut out);
    for v in d["templating"]["list"].as_array().expect("templating") {
        if v["type"] == "query" {
            out.push(variable_query(v["query"]["query"].as_str().expect("query")));
        }
    }
    assert!(out.len() > 10, "{} queries", out.len());
    out
}

#[test]
fn promql_reader_finds_metrics_and_matchers_only() {
    let got = selectors(
        r#"max by (phase) (c1m_phase) + histogram_quantile(0.99, sum by (le) (rate(c1m_connect_seconds_bucket{side="client", job=~"$job"}[$__rate_interval]))) / on (side) group_left sum without (port) (c1m_kernel_sockets) > bool 0"#,
    );
    assert_eq!(
        got,
        [
            Selector {
                metric: "c1m_phase".into(),
                matchers: vec![],
            },
            Selector {
                metric: "c1m_connect_seconds_bucket".into(),
                matchers: vec![
                    ("side".into(), "=".into(), "client".into()),
                    ("job".into(), "=~".into(), "$job".into())
                ],
            },
            Selector {
                metric: "c1m_kernel_sockets".into(),
                matchers: vec![],
            }
        ]
    );
    assert_eq!(
        selectors(&variable_query("label_values(c1m_run_info, job)")),
        [Selector {
            metric: "c1m_run_info".into(),
            matchers: vec![]
        }]
    );
}

/// Labels Prometheus adds to every series it scrapes (the scrape config's relabelling
/// and its own): not in c1m's output.
const TARGET_LABELS: [&str; 6] = ["job", "instance", "namespace", "pod", "app", "node"];

#[test]
fn dashboard_and_scrape_config_read_what_c1m_serves() {
    if !root_or_skip("dashboard_and_scrape_config_read_what_c1m_serves") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let dir = fresh_dir("dashboard");
    let (server_sock, client_sock) = (dir.join("server.sock"), dir.join("client.sock"));
    let (top_addr, client_addr): (SocketAddr, SocketAddr) = (
        "127.0.0.1:9464".parse().expect("addr"),
        "127.0.0.1:9465".parse().expect("addr"),
    );
    let n = CONNECTIONS.to_string();
    let mut children = Children(Vec::new());
    children.start(
        "server",
        &[
            "server",
            "--mode",
            "ws",
            "--ports",
            PORTS,
            "--control",
            server_sock.to_str().expect("utf-8"),
            "--quiet",
        ],
        &dir.join("server.log"),
    );
    let until = Instant::now() + LIMIT;
    while !server_sock.exists() {
        children.all_alive(&dir);
        assert!(Instant::now() < until, "the server's control socket");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Echoes, a paced ramp and a push: every latency histogram gets values.
    children.start(
        "client",
        &[
            "client",
            "-n",
            &n,
            "--addr",
            "127.0.0.1",
            "--ports",
            PORTS,
            "--mode",
            "ws",
            "--echo-count",
            "3",
            "--rate",
            "1000",
            "--hold",
            "forever",
            "--control",
            client_sock.to_str().expect("utf-8"),
            "--metrics-addr",
            &client_addr.to_string(),
            "--quiet",
        ],
        &dir.join("client.log"),
    );
    children.start(
        "top",
        &[
            "top",
            "--ports",
            PORTS,
            "--server-control",
            server_sock.to_str().expect("utf-8"),
            "--client-control",
            client_sock.to_str().expect("utf-8"),
            "--plain",
            "--metrics-addr",
            &top_addr.to_string(),
            "--duration",
            "5m",
        ],
        &dir.join("top.log"),
    );
    let open = |s: &[check::Series]| {
        value(
            s,
            "c1m_connections_open",
            &[("side", "client"), ("source", "app")],
        )
    };
    scrape_until(client_addr, "client connected", &mut children, &dir, |s| {
        open(s) == Some(CONNECTIONS as f64)
    });
    let push = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(c1m::workload::control::call(
            server_sock.to_str().expect("utf-8"),
            "push 0",
        ))
        .expect("push");
    assert!(push.contains("push_id"), "{push}");
    let count = |s: &[check::Series], name: &str| {
        value(s, &format!("{name}_count"), &[("side", "client")]).unwrap_or(0.0)
    };
    let client = scrape_until(client_addr, "every latency", &mut children, &dir, |s| {
        LATENCIES.iter().all(|(_, name, _)| {
            let want = if name.starts_with("c1m_echo") {
                3 * CONNECTIONS
            } else if name.starts_with("c1m_tls")
                || name.starts_with("c1m_pong")
                || name.starts_with("c1m_churn")
                || name.starts_with("c1m_message")
                || name.starts_with("c1m_server_message")
            {
                // A plain run without --heartbeat, --churn nor either --message-rate: the
                // TLS, pong, churn setup and message histograms are served, and empty.
                0
            } else {
                CONNECTIONS
            };
            count(s, name) == want as f64
        })
    });
    let top = scrape_until(top_addr, "top's kernel view", &mut children, &dir, |s| {
        ["server", "client"].iter().all(|side| {
            value(
                s,
                "c1m_connections_open",
                &[("side", side), ("source", "kernel")],
            ) == Some(CONNECTIONS as f64)
                && open(s) == Some(CONNECTIONS as f64)
        }) && value(s, "c1m_kernel_sockets", &[("side", "server")]).is_some()
            && value(s, "c1m_accept_queue_overflows_total", &[]).is_some()
    });

    // A histogram per latency, its buckets those documented.
    for (_, name, _) in LATENCIES {
        let les: Vec<String> = client
            .iter()
            .filter(|(n, ..)| *n == format!("{name}_bucket"))
            .map(|(_, l, _)| l["le"].clone())
            .collect();
        let mut want: Vec<String> = prometheus::BOUNDS_US
            .iter()
            .map(|&us| (us as f64 / 1e6).to_string())
            .collect();
        want.push("+Inf".into());
        let got: Vec<f64> = les.iter().map(|l| l.parse().expect("le")).collect();
        let want: Vec<f64> = want.iter().map(|l| l.parse().expect("le")).collect();
        assert_eq!(got, want, "{name}");
    }

    // Every metric and label value the dashboard reads is served.
    let served: Vec<&check::Series> = client.iter().chain(&top).collect();
    let mut read = BTreeSet::new();
    for expr in dashboard_queries() {
        let found = selectors(&expr);
        assert!(!found.is_empty(), "no metric in {expr}");
        for sel in found {
            assert!(
                served.iter().any(|(n, ..)| *n == sel.metric),
                "`{}` (in {expr}) is not in c1m's output",
                sel.metric
            );
            for (label, op, want) in &sel.matchers {
                if TARGET_LABELS.contains(&label.as_str()) || op != "=" {
                    continue;
                }
                assert!(
                    served
                        .iter()
                        .any(|(n, l, _)| *n == sel.metric && l.get(label) == Some(want)),
                    "no {}{{{label}=\"{want}\"}} (in {expr})",
                    sel.metric
                );
            }
            read.insert(sel.metric);
        }
    }
    // The latencies and the figures the dashboard is for.
    for name in LATENCIES
        .iter()
        .map(|(_, name, _)| format!("{name}_bucket"))
        .chain(
            [
                "c1m_connections_open",
                "c1m_connections_established_total",
                "c1m_accept_queue_overflows_total",
                "c1m_kernel_socket_bytes",
                "c1m_kernel_sockets",
                "c1m_phase",
            ]
            .map(String::from),
        )
    {
        assert!(read.contains(&name), "the dashboard does not read {name}");
    }

    // The scrape config's path is where c1m serves.
    let scrape_config: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo("deploy/kubernetes/prometheus-scrape.yaml"))
            .expect("scrape config"),
    )
    .expect("scrape config YAML");
    let path = scrape_config["scrape_configs"][0]["metrics_path"]
        .as_str()
        .expect("metrics_path");
    for addr in [top_addr, client_addr] {
        let body = scrape(addr, path).unwrap_or_else(|e| panic!("{addr}{path}: {e}"));
        assert!(!series(&body).is_empty());
    }
}

#[test]
fn run_info_stays_while_the_phase_moves() {
    if !root_or_skip("run_info_stays_while_the_phase_moves") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let dir = fresh_dir("run-info");
    let addr: SocketAddr = "127.0.0.1:9466".parse().expect("addr");
    // 400 connections at 200/s: 2 s of setup, then 2 s of idle.
    let mut lab = lab_util::c1m_run(
        &dir.join("runs"),
        &[
            "--ports",
            PORTS,
            "-n",
            "400",
            "--rate",
            "200",
            "--idle",
            "2s",
            "--metrics-addr",
            &addr.to_string(),
            // Ends with the run: this test waits for the exit.
            "--metrics-linger",
            "0s",
        ],
    )
    .stdout(std::fs::File::create(dir.join("lab.log")).expect("log"))
    .stderr(Stdio::null())
    .spawn()
    .expect("c1m run");
    let until = Instant::now() + Duration::from_secs(120);
    let mut infos: BTreeSet<Vec<(String, String)>> = BTreeSet::new();
    let mut phases: Vec<String> = Vec::new();
    let mut buckets = false;
    let status = loop {
        std::thread::sleep(Duration::from_millis(100));
        if let Some(st) = lab.try_wait().expect("wait") {
            break st;
        }
        if Instant::now() > until {
            let _ = lab.kill();
            let _ = lab.wait();
            panic!("c1m run did not end within 120 s");
        }
        if let Ok(body) = scrape(addr, prometheus::PATH) {
            let s = series(&body);
            let info: Vec<&check::Series> =
                s.iter().filter(|(n, ..)| n == "c1m_run_info").collect();
            assert_eq!(info.len(), 1, "{body}");
            infos.insert(info[0].1.clone().into_iter().collect());
            let current: Vec<&String> = s
                .iter()
                .filter(|(n, _, v)| n == "c1m_phase" && *v == 1.0)
                .map(|(_, l, _)| &l["phase"])
                .collect();
            // Bound before its first tick, the lab has no phase yet: only then.
            if current.is_empty() && phases.is_empty() {
                assert!(!s.iter().any(|(n, ..)| n == "c1m_phase"), "{body}");
                continue;
            }
            assert_eq!(current.len(), 1, "one current phase:\n{body}");
            for phase in PHASES {
                assert!(
                    value(&s, "c1m_phase", &[("phase", phase)]).is_some(),
                    "{body}"
                );
            }
            if phases.last() != Some(current[0]) {
                phases.push(current[0].clone());
            }
            buckets |= s.iter().any(|(n, ..)| n == "c1m_connect_seconds_bucket");
        }
    };
    assert_eq!(
        status.code(),
        Some(0),
        "{}",
        std::fs::read_to_string(dir.join("lab.log")).unwrap_or_default()
    );
    assert!(
        phases.starts_with(&["setup".to_owned(), "idle".to_owned()]),
        "{phases:?}"
    );
    assert!(buckets, "no connect histogram in any scrape");
    assert_eq!(infos.len(), 1, "c1m_run_info changed: {infos:?}");
    let info: BTreeMap<String, String> = infos
        .into_iter()
        .next()
        .unwrap_or_default()
        .into_iter()
        .collect();
    // The lab's --engine defaults to $C1M_ENGINE, which a suite may set.
    let engine = std::env::var("C1M_ENGINE").unwrap_or_else(|_| "epoll".into());
    let server = format!("c1m-{engine}");
    for (k, v) in [
        ("command", "run"),
        ("mode", "ws"),
        ("engine", engine.as_str()),
        ("server", server.as_str()),
        ("target_connections", "400"),
        ("version", env!("CARGO_PKG_VERSION")),
    ] {
        assert_eq!(info.get(k).map(String::as_str), Some(v), "{info:?}");
    }
}

/// The dashboard asks for its Prometheus when imported (`__inputs`, every query on
/// `${DS_PROMETHEUS}`), and its push panels are titled by what the run timed them from.
#[test]
fn the_dashboard_declares_its_data_source_and_titles_push_by_the_run() {
    let path = repo("deploy/grafana/c1m-dashboard.json");
    let text = std::fs::read_to_string(&path).expect("dashboard");
    let d: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");
    let inputs = d["__inputs"].as_array().expect("__inputs");
    assert_eq!(inputs.len(), 1, "{inputs:?}");
    assert_eq!(inputs[0]["name"], "DS_PROMETHEUS");
    assert_eq!(inputs[0]["type"], "datasource");
    assert_eq!(inputs[0]["pluginId"], "prometheus");
    // Every data source of a panel, a target or a variable is the input.
    fn sources(v: &serde_json::Value, out: &mut Vec<serde_json::Value>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    if k == "datasource" {
                        out.push(x.clone());
                    } else {
                        sources(x, out);
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| sources(x, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    sources(&d["panels"], &mut found);
    sources(&d["templating"], &mut found);
    assert!(found.len() > 20, "{} data sources", found.len());
    for ds in &found {
        assert_eq!(
            ds,
            &serde_json::json!({"type": "prometheus", "uid": "${DS_PROMETHEUS}"})
        );
    }
    // The push panels: titled by c1m_run_info's labels, through query variables.
    let mut titles = BTreeMap::new();
    fn panels(v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
        for p in v.as_array().into_iter().flatten() {
            for t in p["targets"].as_array().into_iter().flatten() {
                let expr = t["expr"].as_str().unwrap_or_default();
                for metric in ["c1m_push_message_seconds", "c1m_push_fanout_seconds"] {
                    if expr.contains(metric) {
                        out.insert(
                            metric.to_owned(),
                            p["title"].as_str().unwrap_or_default().to_owned(),
                        );
                    }
                }
            }
            panels(&p["panels"], out);
        }
    }
    panels(&d["panels"], &mut titles);
    for (metric, label) in [
        ("c1m_push_message_seconds", "push_latency_from"),
        ("c1m_push_fanout_seconds", "push_fanout_from"),
    ] {
        let title = &titles[metric];
        assert!(
            title.contains(&format!("${{{label}}}")),
            "{metric}: {title}"
        );
        let var = d["templating"]["list"]
            .as_array()
            .expect("templating")
            .iter()
            .find(|v| v["name"] == label)
            .unwrap_or_else(|| panic!("no variable {label}"));
        assert_eq!(
            var["query"]["query"],
            format!("label_values(c1m_run_info{{job=~\"$job\"}}, {label})")
        );
    }
    // The two titles the rules contradicted are gone.
    for wrong in ["from the server's write", "from the broadcast's start"] {
        assert!(!text.contains(wrong), "{wrong}");
    }
}
