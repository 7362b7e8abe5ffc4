//! `--metrics-addr ADDR`: the live state in the Prometheus text exposition format
//! (version 0.0.4), served over HTTP/1.1 by hyper on a tokio listener.
//!
//! Conventions: one prefix `c1m_`; base units (`_seconds`, `_bytes`); `_total` for
//! counters; labels `side` (server, client, other), `source` (kernel, app), `state`,
//! `port` (listeners), `cause`; never a label per connection, so the number of series is
//! bounded whatever the connection count. A figure whose source is missing is left out
//! (no series), never exported as 0 or `NaN`. Latencies are histograms with fixed
//! buckets in seconds ([`BOUNDS_US`]), read from the app's HdrHistograms, so
//! they add up across client hosts. `c1m_run_info` says what the run is with labels that
//! never change mid-run; the phase is `c1m_phase`, one series per phase (1: current).
//!
//! Six files: this one says what is exported, from [`LiveState`] and its
//! [`Figures`](crate::lab::figures::Figures); [`latency`] turns histograms into buckets;
//! [`encode`] hands the families to the `prometheus-client` encoder; [`check`] is a
//! strict reader tests use; [`http`] binds, serves and answers; [`admit`] caps the
//! connections per peer and in all.

mod admit;
pub mod check;
mod encode;
mod http;
mod latency;

use c1m_common::{side, tcp_state};

pub use self::admit::{PER_PEER, TOTAL};
use self::encode::{Exposition, Kind, Value};
pub use self::{
    http::{
        CONN_TIMEOUT, CONTENT_TYPE, FLAG, HEAD_TIMEOUT, PATH, bind, flag_error, respond, serve,
        serve_listener,
    },
    latency::BOUNDS_US,
};
use crate::{
    lab::figures::Source,
    lab::model::LiveState,
    observer::{KernelView, view::GAUGE_STATES},
    workload::stats::{
        histograms::{HIST_NAMES, decode_hist},
        snapshot::AppSnapshot,
    },
};

/// The app's latency histograms ([`HIST_NAMES`], µs) and their families (seconds): the
/// family is the histogram's name with `_us` turned into `_seconds`.
pub const LATENCIES: [(&str, &str, &str); HIST_NAMES.len()] = [
    (
        "connect_us",
        "c1m_connect_seconds",
        "TCP connect, from the connect() call to the socket established.",
    ),
    (
        "connect_from_schedule_us",
        "c1m_connect_from_schedule_seconds",
        "TCP connect, from the instant --rate scheduled it (includes waiting for an \
         in-flight slot: no coordinated omission).",
    ),
    (
        "ws_handshake_us",
        "c1m_ws_handshake_seconds",
        "WebSocket handshake, from the request written to a valid 101.",
    ),
    (
        "ws_open_from_schedule_us",
        "c1m_ws_open_from_schedule_seconds",
        "WebSocket open, from the instant --rate scheduled the connect to the 101.",
    ),
    (
        "echo_rtt_us",
        "c1m_echo_rtt_seconds",
        "Echo round-trip time, verified byte for byte.",
    ),
    (
        "push_message_us",
        "c1m_push_message_seconds",
        "Push receive time minus the server instant --push-latency names: the broadcast start (default) or that connection's frame's write.",
    ),
    (
        "push_fanout_us",
        "c1m_push_fanout_seconds",
        "Push receive time minus the instant the push was triggered, on the client's clock.",
    ),
];

/// The phases `c1m_phase` has a series for: the lab's (`c1m run`), then `c1m top`'s. A
/// fixed set, so a phase change moves a 1 between series instead of starting new ones;
/// one series per phase (as `kube_pod_status_phase`), not one gauge with a number per
/// phase, so `c1m_phase == 1` names the phase without a table of numbers.
pub const PHASES: [&str; 5] = ["setup", "idle", "push", "teardown", "watching"];

/// The whole exposition for one scrape.
pub fn render(state: &LiveState) -> Result<String, std::fmt::Error> {
    let mut x = Exposition::default();
    run_metrics(&mut x, state);
    app_metrics(&mut x, state);
    if let Some(k) = &state.kernel {
        kernel_metrics(&mut x, k);
    }
    latency_metrics(&mut x, state);
    x.finish()
}

fn sides(state: &LiveState) -> [(&'static str, Option<&AppSnapshot>); 2] {
    [
        ("server", state.server.as_ref()),
        ("client", state.client.as_ref()),
    ]
}

fn run_metrics(x: &mut Exposition, state: &LiveState) {
    let info = &state.info;
    let target = info.target_connections.to_string();
    let labels: Vec<(&'static str, &str)> = [
        ("version", env!("CARGO_PKG_VERSION")),
        ("command", info.command),
        ("mode", info.mode.as_str()),
        ("engine", info.engine.as_str()),
        ("server", info.server.as_str()),
        (
            "target_connections",
            if info.target_connections > 0 {
                target.as_str()
            } else {
                ""
            },
        ),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .collect();
    x.family(
        "c1m_run_info",
        Kind::Info,
        "What the run is; the labels never change during a run (the phase is c1m_phase).",
    )
    .sample(&labels, 1u64);
    // A client host's own endpoint has no lab phase.
    if !state.phase.is_empty() {
        let f = x.family(
            "c1m_phase",
            Kind::Gauge,
            "The lab's phase: 1 for the current one, 0 for the others.",
        );
        for phase in PHASES {
            f.sample(&[("phase", phase)], u64::from(phase == state.phase));
        }
        if !PHASES.contains(&state.phase.as_str()) {
            f.sample(&[("phase", &state.phase)], 1u64);
        }
    }
    if state.target > 0 {
        x.family(
            "c1m_target_connections",
            Kind::Gauge,
            "Connections the run aims to hold.",
        )
        .sample(&[], state.target);
    }
    x.family(
        "c1m_elapsed_seconds",
        Kind::Gauge,
        "Seconds since the run started.",
    )
    .sample(&[], state.elapsed_s);
    x.family(
        "c1m_kernel_view_available",
        Kind::Gauge,
        "1 when the kernel observer is running (kernel series present), else 0.",
    )
    .sample(&[], u64::from(state.kernel.is_some()));
    let f = x.family(
        "c1m_app_stats_available",
        Kind::Gauge,
        "1 when the side's c1m stats are read (app series present), else 0.",
    );
    for (side, app) in sides(state) {
        f.sample(&[("side", side)], u64::from(app.is_some()));
    }
    if let Some(b) = state.figures.mem_available_bytes {
        x.family(
            "c1m_memory_available_bytes",
            Kind::Gauge,
            "Free memory of the box (/proc/meminfo MemAvailable).",
        )
        .sample(&[], b);
    }
    let f = x.family(
        "c1m_figures_age_seconds",
        Kind::Gauge,
        "How old each source's figures are (stale past 1 s, two ticks of the live view).",
    );
    for source in Source::ALL {
        if let Some(r) = state.figures.readings.of(source) {
            f.sample(&[("source", source.name())], r.age_s);
        }
    }
}

fn app_metrics(x: &mut Exposition, state: &LiveState) {
    let f = x.family(
        "c1m_connections_open",
        Kind::Gauge,
        "Open connections: the app's own count, or the kernel's ESTABLISHED sockets.",
    );
    for (side, app) in sides(state) {
        if let Some(a) = app {
            f.sample(&[("side", side), ("source", "app")], a.counters.open);
        }
        if let Some(k) = &state.kernel {
            let n = k.side(side_index(side)).state(tcp_state::ESTABLISHED);
            f.sample(&[("side", side), ("source", "kernel")], n);
        }
    }
    let f = x.family(
        "c1m_connections_established_total",
        Kind::Counter,
        "Connections that opened: app (server accepted, client connected) since it \
         started; kernel (reached ESTABLISHED) since the observer attached.",
    );
    for (side, app) in sides(state) {
        if let Some(a) = app {
            let n = if side == "server" {
                a.counters.accepted
            } else {
                a.counters.connected
            };
            f.sample(&[("side", side), ("source", "app")], n);
        }
        if let Some(k) = &state.kernel {
            let n = k.side(side_index(side)).established_total;
            f.sample(&[("side", side), ("source", "kernel")], n);
        }
    }
    if let Some(c) = &state.client {
        x.family(
            "c1m_connections_in_flight",
            Kind::Gauge,
            "Client connects and handshakes not finished.",
        )
        .sample(&[("side", "client")], c.counters.in_flight);
        x.family(
            "c1m_connect_attempts_total",
            Kind::Counter,
            "Client connects started.",
        )
        .sample(&[("side", "client")], c.counters.attempted);
    }
    let present: Vec<_> = sides(state)
        .into_iter()
        .filter_map(|(s, a)| Some((s, a?)))
        .collect();
    let f = x.family(
        "c1m_connect_failures_total",
        Kind::Counter,
        "Connections that never opened, by cause (client: connect or handshake; server: accept).",
    );
    for (side, a) in &present {
        for (cause, n) in a.counters.failures.iter() {
            f.sample(&[("side", side), ("cause", cause)], n);
        }
    }
    let f = x.family(
        "c1m_connections_closed_total",
        Kind::Counter,
        "Open connections that ended, by cause.",
    );
    for (side, a) in &present {
        for (cause, n) in a.counters.closed.iter() {
            f.sample(&[("side", side), ("cause", cause)], n);
        }
    }
    let f = x.family(
        "c1m_protocol_errors_total",
        Kind::Counter,
        "Protocol violations seen, by the answer the RFC prescribes.",
    );
    for (side, a) in &present {
        for (cause, n) in a.counters.protocol_errors.iter() {
            f.sample(&[("side", side), ("cause", cause)], n);
        }
    }
    let f = x.family(
        "c1m_received_bytes_total",
        Kind::Counter,
        "Bytes the app read.",
    );
    for (side, a) in &present {
        f.sample(&[("side", side)], a.counters.bytes_in);
    }
    let f = x.family(
        "c1m_sent_bytes_total",
        Kind::Counter,
        "Bytes the app wrote.",
    );
    for (side, a) in &present {
        f.sample(&[("side", side)], a.counters.bytes_out);
    }
    let f = x.family(
        "c1m_push_frames_total",
        Kind::Counter,
        "Push frames: written by the server, received by the client.",
    );
    for (side, a) in &present {
        let n = if *side == "server" {
            a.counters.pushes_sent
        } else {
            a.counters.pushes_received
        };
        f.sample(&[("side", side)], n);
    }
    let f = x.family(
        "c1m_workers_alive",
        Kind::Gauge,
        "Worker shards alive (of c1m_workers).",
    );
    for (side, a) in &present {
        f.sample(&[("side", side)], a.workers.alive);
    }
    let f = x.family("c1m_workers", Kind::Gauge, "Worker shards started.");
    for (side, a) in &present {
        f.sample(&[("side", side)], a.workers.count);
    }
    let f = x.family(
        "c1m_process_resident_bytes",
        Kind::Gauge,
        "Resident memory of the side's processes (supervisor plus live workers).",
    );
    for (side, a) in &present {
        if a.rss_bytes > 0 {
            f.sample(&[("side", side)], a.rss_bytes);
        }
    }
    if let Some(rss) = state.history.last().and_then(|s| s.observer_rss_bytes) {
        f.sample(&[("side", "observer")], rss);
    }
    let f = x.family(
        "c1m_user_bytes_per_connection",
        Kind::Gauge,
        "(Resident memory - memory before any connection) / open connections.",
    );
    for (side, a) in &present {
        if let Some(b) = a.rss_per_connection_bytes {
            f.sample(&[("side", side)], b);
        }
    }
    let f = x.family(
        "c1m_process_cpu_seconds_total",
        Kind::Counter,
        "CPU time of the side's processes, by mode.",
    );
    for (side, a) in &present {
        f.sample(&[("side", side), ("mode", "user")], a.cpu_user_s);
        f.sample(&[("side", side), ("mode", "system")], a.cpu_sys_s);
    }
}

fn side_index(name: &str) -> u32 {
    match name {
        "server" => side::SERVER,
        "client" => side::CLIENT,
        _ => side::OTHER,
    }
}

fn kernel_metrics(x: &mut Exposition, k: &KernelView) {
    let f = x.family(
        "c1m_tcp_sockets",
        Kind::Gauge,
        "Watched TCP sockets per side and state, as the kernel counts them.",
    );
    for (i, side) in side::NAMES.iter().enumerate() {
        let sv = k.side(i as u32);
        for state in GAUGE_STATES {
            let name = crate::observer::view::state_key(state);
            f.sample(&[("side", side), ("state", &name)], sv.state(state));
        }
    }
    let f = x.family(
        "c1m_tcp_transitions_total",
        Kind::Counter,
        "TCP state transitions of watched sockets since the observer attached.",
    );
    for (i, side) in side::NAMES.iter().enumerate() {
        f.sample(&[("side", side)], k.side(i as u32).transitions_total);
    }
    let f = x.family(
        "c1m_tcp_events_total",
        Kind::Counter,
        "Handshake and error signals of watched sockets since the observer attached.",
    );
    for (i, side) in side::NAMES.iter().enumerate() {
        for (e, event) in c1m_common::event::NAMES.iter().enumerate() {
            f.sample(
                &[("side", side), ("event", event)],
                k.side(i as u32).event(e as u32),
            );
        }
    }
    let f = x.family(
        "c1m_accept_queue_depth",
        Kind::Gauge,
        "Connections waiting in the port's accept queues (established, not yet accepted).",
    );
    for l in &k.listeners {
        f.sample(&[("port", &l.port.to_string())], l.queue_depth);
    }
    let f = x.family(
        "c1m_accept_queue_limit",
        Kind::Gauge,
        "Accept queue limits of the port's listeners, summed (listen backlog, capped by somaxconn).",
    );
    for l in &k.listeners {
        f.sample(&[("port", &l.port.to_string())], l.queue_limit);
    }
    let f = x.family(
        "c1m_accept_queue_overflows_total",
        Kind::Counter,
        "Handshakes the port's listeners dropped since the observer attached, mostly because \
         the accept queue was full (the kernel's ListenDrops for this port).",
    );
    for l in &k.listeners {
        f.sample(&[("port", &l.port.to_string())], l.accept_queue_overflows);
    }
    let f = x.family(
        "c1m_accept_queue_overflow_acks_total",
        Kind::Counter,
        "Final handshake ACKs dropped by a full accept queue: those clients believe they are connected.",
    );
    for l in &k.listeners {
        if let Some(n) = l.overflow_acks {
            f.sample(&[("port", &l.port.to_string())], n);
        }
    }
    let f = x.family(
        "c1m_listen_sockets",
        Kind::Gauge,
        "Listening sockets on the port (several with SO_REUSEPORT).",
    );
    for l in &k.listeners {
        f.sample(&[("port", &l.port.to_string())], l.sockets);
    }
    if let Some(m) = &k.memory {
        let mems = [
            ("server", &m.server),
            ("client", &m.client),
            ("other", &m.other),
        ];
        let f = x.family(
            "c1m_kernel_socket_bytes",
            Kind::Gauge,
            "Kernel memory of the side's watched sockets (slab objects plus buffers), at the last socket walk.",
        );
        for (side, sm) in mems {
            f.sample(&[("side", side)], sm.total_bytes);
        }
        let f = x.family(
            "c1m_kernel_socket_buffer_bytes",
            Kind::Gauge,
            "Receive, send and forward-allocated buffer bytes of the side's watched sockets.",
        );
        for (side, sm) in mems {
            f.sample(&[("side", side)], sm.buffer_bytes);
        }
        let f = x.family(
            "c1m_kernel_sockets",
            Kind::Gauge,
            "Watched sockets seen by the last socket walk.",
        );
        for (side, sm) in mems {
            f.sample(&[("side", side)], sm.sockets);
        }
    }
    if let Some(age) = k.walk.age_s {
        x.family(
            "c1m_kernel_walk_age_seconds",
            Kind::Gauge,
            "Seconds since the last full socket walk ended.",
        )
        .sample(&[], age);
    }
    x.family(
        "c1m_kernel_walk_duration_seconds",
        Kind::Gauge,
        "Duration of the last full socket walk.",
    )
    .sample(&[], k.walk.duration_ms / 1e3);
    x.family(
        "c1m_kernel_map_errors_total",
        Kind::Counter,
        "Counter updates lost because a kernel map was full (should stay 0).",
    )
    .sample(&[], k.map_errors);
    x.family(
        "c1m_kernel_unavailable_figures",
        Kind::Gauge,
        "Figures this kernel cannot give (missing hooks or fields); see the live view.",
    )
    .sample(&[], k.unavailable.len());
}

fn latency_metrics(x: &mut Exposition, state: &LiveState) {
    for (hist, name, help) in LATENCIES {
        let f = x.family(name, Kind::Histogram, help);
        for (side, app) in sides(state) {
            // A side with nothing recorded (the server records none) has no series;
            // the convenience count saves decoding its empty histograms.
            let Some(blob) = app.and_then(|a| a.histograms.get(hist)) else {
                continue;
            };
            if app
                .and_then(|a| a.percentiles.get(hist))
                .is_some_and(|p| p.count == 0)
            {
                continue;
            }
            // A blob that does not decode has no series; the live view says why.
            if let Ok(h) = decode_hist(blob)
                && !h.is_empty()
            {
                f.sample(&[("side", side)], Value::Histogram(latency::buckets(&h)));
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::{check::parse, *};
    use crate::{
        lab::{model::RunInfo, view::demo},
        workload::stats::histograms::{Percentiles, encode_hist, new_hist},
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
        }
    }

    #[test]
    fn demo_exposition_is_valid_and_complete() {
        let mut state = with_histograms(demo::state());
        state.info = info();
        let text = render(&state).unwrap();
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
                        "target_connections"
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
        let text = render(&LiveState::default()).unwrap();
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
        let text = render(&s).unwrap();
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
        let text = render(&s).unwrap();
        let series = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert!(!text.contains("NaN") && !text.contains("Inf\n"), "{text}");
        for gone in [
            "c1m_push_fanout_seconds",
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
    fn every_histogram_of_the_app_has_its_family() {
        for ((hist, name, _), want) in LATENCIES.iter().zip(HIST_NAMES) {
            assert_eq!(*hist, want);
            let stem = hist.strip_suffix("_us").unwrap();
            assert_eq!(*name, format!("c1m_{stem}_seconds"));
        }
    }

    /// The cost of a scrape with the client's seven histograms full (the lab serves one
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
            bytes += render(&s).unwrap().len();
        }
        let per = t.elapsed() / runs;
        let plain = demo::state();
        let t = std::time::Instant::now();
        for _ in 0..runs {
            render(&plain).unwrap();
        }
        eprintln!(
            "render: {per:?} per scrape with 7 full histograms ({} bytes), {:?} without",
            bytes / runs as usize,
            t.elapsed() / runs
        );
    }
}
