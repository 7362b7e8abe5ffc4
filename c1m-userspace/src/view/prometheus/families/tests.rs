//! The exposition checked with the strict reader: names, labels, values, buckets.
#![allow(clippy::unwrap_used)] // panics are the assertions in tests
use super::{
    super::check::{self, parse},
    *,
};
use crate::{
    model::RunInfo,
    view::demo,
    workload::stats::histograms::{HIST_NAMES, Percentiles, encode_hist, new_hist},
};

fn find(series: &[check::Series], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    series
        .iter()
        .find(|(n, l, _)| {
            n == name
                && l.len() == labels.len()
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.2)
}

/// The demo with a real histogram behind each of the client's latencies: values
/// 1..=n µs times the histogram's position, n = 1000.
fn with_histograms(mut s: LiveState) -> LiveState {
    let Some(c) = s.client.as_mut() else {
        return s;
    };
    for (i, name) in HIST_NAMES.iter().enumerate() {
        let mut h = new_hist().unwrap();
        for v in 1..=1000u64 {
            h.record(v * (i as u64 + 1)).unwrap();
        }
        c.percentiles.insert((*name).into(), Percentiles::of(&h));
        c.histograms
            .insert((*name).into(), encode_hist(&h).unwrap());
    }
    s
}

fn info() -> RunInfo {
    RunInfo {
        command: "run",
        mode: "ws".into(),
        engine: "epoll".into(),
        server: "c1m-epoll".into(),
        target_connections: 1_000_000,
        push: None,
    }
}

#[test]
fn demo_exposition_is_valid_and_complete() {
    let mut state = with_histograms(demo::state());
    state.info = info();
    let text = render(&state, Detail { per_port: true }).unwrap();
    let series = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    for (name, labels, _) in &series {
        assert!(name.starts_with("c1m_"), "{name}");
        for k in labels.keys() {
            assert!(
                [
                    "side",
                    "source",
                    "state",
                    "port",
                    "cause",
                    "event",
                    "mode",
                    "le",
                    "phase",
                    "version",
                    "command",
                    "engine",
                    "server",
                    "target_connections",
                    "kind",
                    "direction",
                    "class"
                ]
                .contains(&k.as_str()),
                "unexpected label {k} on {name}"
            );
        }
    }
    let v = |name: &str, labels: &[(&str, &str)]| {
        find(&series, name, labels).unwrap_or_else(|| panic!("no {name}{labels:?}\n{text}"))
    };
    assert_eq!(
        v(
            "c1m_connections_open",
            &[("side", "server"), ("source", "app")]
        ),
        600_000.0
    );
    assert_eq!(
        v(
            "c1m_connections_open",
            &[("side", "server"), ("source", "kernel")]
        ),
        demo::SERVER_KERNEL_ESTABLISHED as f64
    );
    assert_eq!(
        v(
            "c1m_connections_open",
            &[("side", "client"), ("source", "kernel")]
        ),
        demo::CLIENT_KERNEL_ESTABLISHED as f64
    );
    assert_eq!(
        v(
            "c1m_tcp_sockets",
            &[("side", "client"), ("state", "syn_sent")]
        ),
        37.0
    );
    assert_eq!(
        v(
            "c1m_tcp_sockets",
            &[("side", "server"), ("state", "close_wait")]
        ),
        5.0
    );
    assert_eq!(
        v("c1m_tcp_transitions_total", &[("side", "server")]),
        1_801_000.0
    );
    assert_eq!(v("c1m_accept_queue_depth", &[("port", "8001")]), 212.0);
    assert_eq!(
        v("c1m_accept_queue_overflows_total", &[("port", "8003")]),
        37.0
    );
    assert_eq!(
        v("c1m_accept_queue_overflow_acks_total", &[("port", "8003")]),
        30.0
    );
    assert_eq!(
        v("c1m_kernel_socket_bytes", &[("side", "server")]),
        ((demo::SERVER_KERNEL_ESTABLISHED + 15) as u64 * demo::SERVER_BYTES_PER_SOCKET) as f64
    );
    assert_eq!(
        v("c1m_process_resident_bytes", &[("side", "client")]),
        demo::CLIENT_RSS_BYTES as f64
    );
    assert_eq!(
        v(
            "c1m_connect_failures_total",
            &[("side", "client"), ("cause", "refused")]
        ),
        3.0
    );
    // Connect times 1..=1000 µs: at most 100 µs are 100 of them, all are at most 1 ms.
    let bucket = |le: f64| {
        series
            .iter()
            .find(|(n, l, _)| {
                n == "c1m_connect_seconds_bucket"
                    && l.get("side").map(String::as_str) == Some("client")
                    && l.get("le").and_then(|b| b.parse::<f64>().ok()) == Some(le)
            })
            .map(|s| s.2)
            .unwrap_or_else(|| panic!("no bucket {le}\n{text}"))
    };
    assert_eq!(bucket(5e-6), 5.0);
    assert_eq!(bucket(1e-4), 100.0);
    assert_eq!(bucket(2.5e-4), 250.0);
    assert_eq!(bucket(1e-3), 1000.0);
    assert_eq!(bucket(f64::INFINITY), 1000.0);
    assert_eq!(
        v("c1m_connect_seconds_count", &[("side", "client")]),
        1000.0
    );
    let sum = v("c1m_connect_seconds_sum", &[("side", "client")]);
    assert!((sum - 0.5005).abs() < 1e-9, "{sum}");
    // Every latency has its family, and only the side that recorded it.
    for (_, name, _) in LATENCIES {
        assert!(
            text.contains(&format!("# TYPE {name} histogram\n")),
            "{name}"
        );
        assert!(find(&series, &format!("{name}_count"), &[("side", "server")]).is_none());
    }
    let run_info = series.iter().find(|(n, ..)| n == "c1m_run_info").unwrap();
    assert_eq!(
        run_info
            .1
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect::<Vec<_>>(),
        [
            ("command", "run"),
            ("engine", "epoll"),
            ("mode", "ws"),
            ("server", "c1m-epoll"),
            ("target_connections", "1000000"),
            ("version", env!("CARGO_PKG_VERSION")),
        ]
    );
    for phase in PHASES {
        let want = if phase == "setup" { 1.0 } else { 0.0 };
        assert_eq!(v("c1m_phase", &[("phase", phase)]), want, "{phase}");
    }
    assert_eq!(v("c1m_kernel_view_available", &[]), 1.0);
    assert_eq!(v("c1m_memory_available_bytes", &[]), (17u64 << 30) as f64);
    assert!(text.contains("# TYPE c1m_run_info gauge\n"));
    assert!(text.contains("# TYPE c1m_accept_queue_overflows_total counter\n"));
}

#[test]
fn missing_sources_leave_series_out() {
    let text = render(&LiveState::default(), Detail::default()).unwrap();
    let series = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(find(&series, "c1m_kernel_view_available", &[]), Some(0.0));
    assert_eq!(
        find(&series, "c1m_app_stats_available", &[("side", "client")]),
        Some(0.0)
    );
    for (name, ..) in &series {
        assert!(
            !name.starts_with("c1m_connections")
                && !name.starts_with("c1m_tcp_")
                && !name.ends_with("_bucket"),
            "{name} without a source\n{text}"
        );
    }
    // No phase (a client host's endpoint): no c1m_phase at all.
    assert!(!series.iter().any(|(n, ..)| n == "c1m_phase"), "{text}");
    // Server only: server app series, no kernel ones, no client ones.
    let mut s = with_histograms(demo::state());
    s.kernel = None;
    s.client = None;
    // The live state's figures come from its sources, as every writer of it does.
    demo::refigure(&mut s);
    let text = render(&s, Detail::default()).unwrap();
    let series = parse(&text).unwrap();
    assert!(
        find(
            &series,
            "c1m_connections_open",
            &[("side", "server"), ("source", "app")]
        )
        .is_some()
    );
    assert!(
        find(
            &series,
            "c1m_connections_open",
            &[("side", "server"), ("source", "kernel")]
        )
        .is_none()
    );
    assert!(!text.contains("side=\"client\","));
    assert!(!text.contains("c1m_accept_queue"));
    assert!(!text.contains("_bucket"), "{text}");
}

#[test]
fn no_data_is_no_series_never_nan_and_label_values_are_escaped() {
    let mut s = with_histograms(demo::state());
    s.phase = "a \"quoted\"\\phase\nwith newline".into();
    s.elapsed_s = f64::NAN;
    if let Some(c) = s.client.as_mut() {
        // Recorded nothing yet: the count says so, the blob is an empty histogram.
        c.percentiles
            .insert("push_fanout_us".into(), Percentiles::default());
        c.histograms.insert(
            "push_fanout_us".into(),
            encode_hist(&new_hist().unwrap()).unwrap(),
        );
        // A blob that does not decode.
        c.percentiles.remove("echo_rtt_us");
        c.histograms
            .insert("echo_rtt_us".into(), "not base64".into());
        c.rss_per_connection_bytes = Some(f64::INFINITY);
    }
    let text = render(&s, Detail::default()).unwrap();
    let series = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(!text.contains("NaN") && !text.contains("Inf\n"), "{text}");
    // The client's empty histogram is zeros, so rate() sees its first increase whole.
    assert_eq!(
        find(
            &series,
            "c1m_push_fanout_seconds_count",
            &[("side", "client")]
        ),
        Some(0.0)
    );
    assert_eq!(
        find(
            &series,
            "c1m_push_fanout_seconds_bucket",
            &[("side", "client"), ("le", "+Inf")]
        ),
        Some(0.0)
    );
    for gone in [
        "c1m_echo_rtt_seconds",
        "c1m_elapsed_seconds",
        "c1m_user_bytes_per_connection{side=\"client\"}",
    ] {
        assert!(!text.contains(gone), "{gone}\n{text}");
    }
    assert!(text.contains("c1m_push_message_seconds_count{side=\"client\"} 1000\n"));
    // An unknown phase is the one set to 1, beside the known ones at 0.
    assert!(series.iter().any(|(n, l, v)| n == "c1m_phase"
        && l.get("phase").map(String::as_str) == Some("a \"quoted\"\\phase\nwith newline")
        && *v == 1.0));
    assert_eq!(find(&series, "c1m_phase", &[("phase", "setup")]), Some(0.0));
}

#[test]
fn ports_are_summed_unless_asked_per_port() {
    let s = demo::state();
    let summed = parse(&render(&s, Detail::default()).unwrap()).unwrap();
    let per_port = parse(&render(&s, Detail { per_port: true }).unwrap()).unwrap();
    assert!(!summed.iter().any(|(_, l, _)| l.contains_key("port")));
    // Ten listeners of one socket each, queues of 200 and 212 on two of them.
    for (name, want) in [
        ("c1m_accept_queue_depth", 412.0),
        ("c1m_accept_queue_limit", 40_960.0),
        ("c1m_accept_queue_overflows_total", 37.0),
        ("c1m_accept_queue_overflow_acks_total", 30.0),
        ("c1m_listen_sockets", 10.0),
    ] {
        assert_eq!(find(&summed, name, &[]), Some(want), "{name}");
        let ports: Vec<f64> = per_port
            .iter()
            .filter(|(n, l, _)| n == name && l.contains_key("port"))
            .map(|s| s.2)
            .collect();
        assert_eq!(ports.len(), 10, "{name}");
        assert_eq!(ports.iter().sum::<f64>(), want, "{name}");
    }
}

#[test]
fn the_outcome_and_the_push_rule_are_said() {
    use crate::{
        model::Outcome,
        workload::{
            push_format::PushFormat,
            push_rule::{PushInstant, PushRule},
        },
    };
    let mut s = demo::state();
    s.info = RunInfo {
        push: Some(PushRule::new(
            PushInstant::Broadcast,
            &PushFormat::C1m,
            None,
            true,
        )),
        ..info()
    };
    // Not a lab run (c1m top, a client host): no outcome.
    let top = parse(&render(&s, Detail::default()).unwrap()).unwrap();
    assert!(!top.iter().any(|(n, ..)| n == "c1m_run_outcome"));
    let run_info = |series: &[check::Series]| {
        series
            .iter()
            .find(|(n, ..)| n == "c1m_run_info")
            .map(|s| s.1.clone())
            .unwrap()
    };
    let labels = run_info(&top);
    assert_eq!(labels["push_latency_from"], "broadcast");
    assert_eq!(labels["push_fanout_from"], "trigger");
    s.outcome = Some(Outcome::Running);
    let running = parse(&render(&s, Detail::default()).unwrap()).unwrap();
    s.outcome = Some(Outcome::Degraded);
    s.phase = "done".into();
    let done = parse(&render(&s, Detail::default()).unwrap()).unwrap();
    for o in Outcome::ALL {
        let want = |now: Outcome| f64::from(u8::from(o == now));
        let name = o.name();
        assert_eq!(
            find(&running, "c1m_run_outcome", &[("outcome", name)]),
            Some(want(Outcome::Running)),
        );
        assert_eq!(
            find(&done, "c1m_run_outcome", &[("outcome", name)]),
            Some(want(Outcome::Degraded)),
        );
    }
    for phase in PHASES {
        let want = if phase == "done" { 1.0 } else { 0.0 };
        assert_eq!(find(&done, "c1m_phase", &[("phase", phase)]), Some(want));
    }
    // A foreign server's stamp of unstated instant, with no trigger: said so.
    s.info.push = Some(PushRule::new(
        PushInstant::Write,
        &PushFormat::U64leUs,
        None,
        false,
    ));
    let labels = run_info(&parse(&render(&s, Detail::default()).unwrap()).unwrap());
    assert_eq!(labels["push_latency_from"], "unstated");
    assert_eq!(labels["push_fanout_from"], "no_trigger");
}

/// A client host whose conntrack table filled: 500 of 500, 501 SYNs dropped.
fn full_table() -> crate::netpath::PathFigures {
    crate::netpath::PathFigures {
        conntrack_tracking: Some(crate::netpath::Tracking::Tracking),
        conntrack_entries: Some(500),
        conntrack_max: Some(500),
        conntrack: Some(crate::netpath::ConntrackCounters {
            drop: 501,
            ..Default::default()
        }),
        interface_rx_dropped: 2,
        softnet: Some(crate::netpath::Softnet::default()),
        neighbours: Some(1),
        gc_thresh3: Some(1024),
        ..Default::default()
    }
}

#[test]
fn a_client_hosts_path_is_exported_with_the_kernels_counts() {
    let mut s = demo::state();
    s.path = Some(full_table());
    let text = render(&s, Detail::default()).unwrap();
    for line in [
        "c1m_conntrack_tracking 1",
        "c1m_conntrack_entries 500",
        "c1m_conntrack_max 500",
        "c1m_conntrack_events_total{event=\"drop\"} 501",
        "c1m_conntrack_events_total{event=\"insert_failed\"} 0",
        "c1m_interface_dropped_total{direction=\"rx\"} 2",
        "c1m_softnet_dropped_total 0",
        "c1m_neighbours 1",
        "c1m_neighbour_gc_thresh3 1024",
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
    }
    // Not a client host: none of them.
    assert!(
        !render(&demo::state(), Detail::default())
            .unwrap()
            .contains("c1m_conntrack")
    );
}

/// `docs/metrics.md` lists every family c1m exports, with its type: a family added
/// without its line fails here, and a line of a family that is gone too.
#[test]
fn docs_metrics_md_lists_every_family_with_its_type() {
    const DOC: &str = include_str!("../../../../../docs/metrics.md");
    // The table's rows: | `name` | type | unit | labels | meaning |
    let documented: std::collections::BTreeMap<&str, &str> = DOC
        .lines()
        .filter_map(|l| {
            let mut cells = l.strip_prefix("| `")?.split('|');
            let name = cells.next()?.trim().strip_suffix('`')?;
            Some((name, cells.next()?.trim()))
        })
        .filter(|(name, _)| name.starts_with("c1m_"))
        .collect();
    // Every family there is: a lab run with every source, its outcome, and the
    // listeners both ways.
    let mut s = with_histograms(demo::state());
    s.info = info();
    s.outcome = Some(Outcome::Running);
    // The TLS families show only for a side that spoke TLS.
    if let Some(c) = s.client.as_mut() {
        c.counters.tls_handshakes.full = 5;
        c.counters.tls_errors.timeout = 1;
        // And the heartbeat families only for a side that pinged.
        c.counters.heartbeat.pings = 3;
        // And the churn families only for a client that churned.
        c.counters.churn.closed = 2;
        // The message families only for a side that sent messages.
        c.counters.messages.sent = 5;
        // The server-message family only for a side that sent or received one.
        c.counters.server_messages.received = 5;
    }
    // The path families only for a client host, which reads its path.
    s.path = Some(full_table());
    // The loss families only where --loss dropped (a client host's endpoint).
    s.loss = Some(crate::observer::LossDrops {
        probability: 0.01,
        ..Default::default()
    });
    let mut exported = std::collections::BTreeMap::new();
    for detail in [Detail::default(), Detail { per_port: true }] {
        let text = render(&s, detail).unwrap();
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                exported.insert(name.to_owned(), kind.to_owned());
            }
        }
    }
    for (name, kind) in &exported {
        // The text format types an info family as a gauge; the table says what it is.
        let kind = if name.ends_with("_info") {
            "info"
        } else {
            kind
        };
        assert_eq!(
            documented.get(name.as_str()).copied(),
            Some(kind),
            "docs/metrics.md: no row `| `{name}` | {kind} | …` in the table of metrics"
        );
    }
    for name in documented.keys() {
        assert!(
            exported.contains_key(*name),
            "docs/metrics.md lists {name}, which c1m does not export"
        );
    }
}

#[test]
fn every_histogram_of_the_app_has_its_family() {
    for ((hist, name, _), want) in LATENCIES.iter().zip(HIST_NAMES) {
        assert_eq!(*hist, want);
        let stem = hist.strip_suffix("_us").unwrap();
        assert_eq!(*name, format!("c1m_{stem}_seconds"));
    }
}

/// The cost of a scrape with the client's nine histograms full (the lab serves one
/// per scrape; Prometheus scrapes every 15 s by default):
/// `cargo test --release -p c1m-userspace --lib render_cost -- --ignored --nocapture`.
#[test]
#[ignore]
fn render_cost() {
    let mut s = with_histograms(demo::state());
    if let Some(c) = s.client.as_mut() {
        // A 1M-connection ramp's spread: values over five decades in every histogram.
        for name in HIST_NAMES {
            let mut h = new_hist().unwrap();
            for i in 0..1_000_000u64 {
                h.record(1 + crate::workload::sys::splitmix64(i) % 10_000_000)
                    .unwrap();
            }
            c.percentiles.insert(name.into(), Percentiles::of(&h));
            c.histograms.insert(name.into(), encode_hist(&h).unwrap());
        }
    }
    let runs = 200u32;
    let t = std::time::Instant::now();
    let mut bytes = 0;
    for _ in 0..runs {
        bytes += render(&s, Detail::default()).unwrap().len();
    }
    let per = t.elapsed() / runs;
    let plain = demo::state();
    let t = std::time::Instant::now();
    for _ in 0..runs {
        render(&plain, Detail::default()).unwrap();
    }
    eprintln!(
        "render: {per:?} per scrape with 7 full histograms ({} bytes), {:?} without",
        bytes / runs as usize,
        t.elapsed() / runs
    );
}
