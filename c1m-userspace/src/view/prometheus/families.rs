//! What `/metrics` exports, family by family, from the live state: the run, the app's
//! counts, the kernel's, and the latency histograms. Apart from [`super::http`], which
//! serves it, so the server and the families do not import each other. Every family is
//! listed in `docs/metrics.md` (a test fails on one that is not).

use c1m_common::side;

use super::{
    encode::{Exposition, Kind, Value},
    latency::{self, LATENCIES},
};
use crate::{
    figures::SideFigures,
    model::{Outcome, Source},
    observer::{
        KernelView,
        view::{GAUGE_STATES, ListenerView},
    },
    view::live_state::LiveState,
    workload::stats::{histograms::decode_hist, snapshot::AppSnapshot},
};

/// The phases `c1m_phase` has a series for: the lab's (`c1m run`; `done` once the run
/// folder is written, while the endpoint lingers for a final scrape), then `c1m top`'s.
/// A fixed set, so a phase change moves a 1 between series instead of starting new
/// ones; one series per phase (as `kube_pod_status_phase`), not one gauge with a number
/// per phase, so `c1m_phase == 1` names the phase without a table of numbers.
pub const PHASES: [&str; 6] = ["setup", "idle", "push", "teardown", "done", "watching"];

/// What an endpoint exports beyond its defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Detail {
    /// The accept-queue families one series per listening port (`--metrics-per-port`);
    /// by default one series, summed over the watched ports, so a run on 50 ports does
    /// not export 250 series nobody plots.
    pub per_port: bool,
}

/// The families of one scrape, not encoded yet.
pub(super) fn families(state: &LiveState, detail: Detail) -> Exposition {
    let mut x = Exposition::default();
    run_metrics(&mut x, state);
    app_metrics(&mut x, state);
    if let Some(k) = &state.kernel {
        kernel_metrics(&mut x, k, detail);
    }
    let loss = state
        .loss
        .as_ref()
        .or_else(|| state.kernel.as_ref().and_then(|k| k.loss.as_ref()));
    if let Some(loss) = loss {
        loss_metrics(&mut x, loss);
    }
    latency_metrics(&mut x, state);
    if let Some(p) = &state.path {
        path_metrics(&mut x, p);
    }
    x
}

/// A client host's path (`c1m client --metrics-addr`): its namespace's conntrack table
/// and the kernel's drop counters, its interfaces' and the box's softnet drops, its
/// neighbours. Counters count from the host's start.
fn path_metrics(x: &mut Exposition, p: &crate::netpath::PathFigures) {
    use crate::netpath::Tracking;
    if let Some(tracking) = p.conntrack_tracking {
        x.family(
            "c1m_conntrack_tracking",
            Kind::Gauge,
            "1 when the host's namespace tracks connections (a rule uses conntrack), else 0.",
        )
        .sample(&[], u64::from(tracking == Tracking::Tracking));
    }
    if let (Some(entries), Some(max), Some(c)) = (p.conntrack_entries, p.conntrack_max, p.conntrack)
    {
        x.family(
            "c1m_conntrack_entries",
            Kind::Gauge,
            "Entries in the host's conntrack table (nf_conntrack_count).",
        )
        .sample(&[], entries);
        x.family(
            "c1m_conntrack_max",
            Kind::Gauge,
            "The most entries a namespace's conntrack table holds (nf_conntrack_max; 0: no limit).",
        )
        .sample(&[], max);
        let f = x.family(
            "c1m_conntrack_events_total",
            Kind::Counter,
            "The conntrack table's counters since the host started, by event (/proc/net/stat/nf_conntrack summed over CPUs).",
        );
        for (event, n) in [
            ("found", c.found),
            ("invalid", c.invalid),
            ("insert", c.insert),
            ("insert_failed", c.insert_failed),
            ("drop", c.drop),
            ("early_drop", c.early_drop),
            ("icmp_error", c.icmp_error),
        ] {
            f.sample(&[("event", event)], n);
        }
    }
    let f = x.family(
        "c1m_interface_dropped_total",
        Kind::Counter,
        "Packets the host's interfaces (its veth end; loopback not counted) dropped since it started.",
    );
    f.sample(&[("direction", "rx")], p.interface_rx_dropped);
    f.sample(&[("direction", "tx")], p.interface_tx_dropped);
    if let Some(s) = p.softnet {
        x.family(
            "c1m_softnet_dropped_total",
            Kind::Counter,
            "Packets the box's CPUs dropped with a full input backlog since the host started (the box's, every namespace).",
        )
        .sample(&[], s.dropped);
        x.family(
            "c1m_softnet_time_squeeze_total",
            Kind::Counter,
            "Receive passes that ran out of budget with work left, since the host started (the box's).",
        )
        .sample(&[], s.time_squeeze);
    }
    if let Some(n) = p.neighbours {
        x.family(
            "c1m_neighbours",
            Kind::Gauge,
            "Entries in the host's IPv4 neighbour table.",
        )
        .sample(&[], n);
    }
    if let Some(hard) = p.gc_thresh3 {
        x.family(
            "c1m_neighbour_gc_thresh3",
            Kind::Gauge,
            "The box's neighbour-table hard limit (net.ipv4.neigh.default.gc_thresh3).",
        )
        .sample(&[], hard);
    }
}

/// `--loss`: what the injector dropped, by direction and what the segment was.
fn loss_metrics(x: &mut Exposition, loss: &crate::observer::LossDrops) {
    let f = x.family(
        "c1m_loss_dropped_segments_total",
        Kind::Counter,
        "Segments --loss dropped on the host's link since the observer attached, by direction \
         (egress: leaving the host, ingress: arriving) and kind.",
    );
    for (direction, d) in [("egress", &loss.egress), ("ingress", &loss.ingress)] {
        for (n, _, class) in d.classes() {
            f.sample(&[("direction", direction), ("class", class)], n);
        }
    }
    x.family(
        "c1m_loss_probability",
        Kind::Gauge,
        "The probability --loss drops each segment with.",
    )
    .sample(&[], loss.probability);
}

/// The text of one scrape, without the series earlier scrapes kept (tests).
#[cfg(test)]
pub(super) fn render(state: &LiveState, detail: Detail) -> Result<String, std::fmt::Error> {
    families(state, detail).finish()
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
    // What the push histograms are timed from (`PushRule`): a dashboard titles them by it.
    let push_from = info
        .push
        .map(|p| p.measured_from().map_or("unstated", |i| i.name()));
    let fanout_from = info.push.map(|p| p.fanout_from.name());
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
        ("push_latency_from", push_from.unwrap_or("")),
        ("push_fanout_from", fanout_from.unwrap_or("")),
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
            "The lab's phase: 1 for the current one, 0 for the others (done: the run is over, \
             the endpoint stays for a final scrape).",
        );
        for phase in PHASES {
            f.sample(&[("phase", phase)], u64::from(phase == state.phase));
        }
        if !PHASES.contains(&state.phase.as_str()) {
            f.sample(&[("phase", &state.phase)], 1u64);
        }
    }
    if let Some(outcome) = state.outcome {
        let f = x.family(
            "c1m_run_outcome",
            Kind::Gauge,
            "The run's outcome: 1 for the current one (running until the run folder is \
             written, then its verdict), 0 for the others.",
        );
        for o in Outcome::ALL {
            f.sample(&[("outcome", o.name())], u64::from(o == outcome));
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
        if let Some(n) = side_figures(state, side).kernel_established {
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
        if let Some(n) = side_figures(state, side).kernel_established_total {
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
    // Only a side that spoke TLS: a plain run's 14 zero series per side would say nothing.
    let tls: Vec<_> = present
        .iter()
        .filter(|(_, a)| a.counters.tls_handshakes.total() + a.counters.tls_errors.total() > 0)
        .collect();
    let f = x.family(
        "c1m_tls_handshakes_total",
        Kind::Counter,
        "TLS handshakes completed, by kind (full, resumed).",
    );
    for (side, a) in &tls {
        for (kind, n) in a.counters.tls_handshakes.iter() {
            f.sample(&[("side", side), ("kind", kind)], n);
        }
    }
    let f = x.family(
        "c1m_tls_errors_total",
        Kind::Counter,
        "TLS handshakes that failed, by reason (what this side found wrong, or the peer's alert).",
    );
    for (side, a) in &tls {
        for (cause, n) in a.counters.tls_errors.iter() {
            f.sample(&[("side", side), ("cause", cause)], n);
        }
    }
    // Only a side that pinged (`--heartbeat`).
    let beats: Vec<_> = present
        .iter()
        .filter(|(_, a)| a.counters.heartbeat.pings > 0)
        .collect();
    let f = x.family(
        "c1m_heartbeat_pings_total",
        Kind::Counter,
        "--heartbeat: pings sent.",
    );
    for (side, a) in &beats {
        f.sample(&[("side", side)], a.counters.heartbeat.pings);
    }
    let f = x.family(
        "c1m_heartbeat_outcomes_total",
        Kind::Counter,
        "--heartbeat: what became of the pings (pongs, late_pongs, missed, unanswered), and unsolicited_pongs.",
    );
    for (side, a) in &beats {
        for (kind, n) in a
            .counters
            .heartbeat
            .iter()
            .filter(|(k, _)| !matches!(*k, "pings" | "outstanding"))
        {
            f.sample(&[("side", side), ("kind", kind)], n);
        }
    }
    let f = x.family(
        "c1m_heartbeat_outstanding",
        Kind::Gauge,
        "--heartbeat: pings waiting for their pong on open connections.",
    );
    for (side, a) in &beats {
        f.sample(&[("side", side)], a.counters.heartbeat.outstanding);
    }
    // Only a client that churned (`--churn`).
    let churns: Vec<_> = present
        .iter()
        .filter(|(_, a)| a.counters.churn.closed > 0)
        .collect();
    let f = x.family(
        "c1m_churn_total",
        Kind::Counter,
        "--churn: held connections closed (closed), their reopens that opened (reopened) and that failed (failed).",
    );
    for (side, a) in &churns {
        for (what, n) in a
            .counters
            .churn
            .iter()
            .filter(|(k, _)| matches!(*k, "closed" | "reopened" | "failed"))
        {
            f.sample(&[("side", side), ("what", what)], n);
        }
    }
    let f = x.family(
        "c1m_churn_in_progress",
        Kind::Gauge,
        "--churn: reopens in flight (reopening), and churned WebSocket connections waiting for the server to close (closing).",
    );
    for (side, a) in &churns {
        for (what, n) in a
            .counters
            .churn
            .iter()
            .filter(|(k, _)| matches!(*k, "reopening" | "closing"))
        {
            f.sample(&[("side", side), ("what", what)], n);
        }
    }
    // Only a side that sent messages (`--message-rate`: the client).
    let msgs: Vec<_> = present
        .iter()
        .filter(|(_, a)| a.counters.messages.sent > 0)
        .collect();
    let f = x.family(
        "c1m_messages_sent_total",
        Kind::Counter,
        "--message-rate: messages sent, each stamped with its scheduled instant.",
    );
    for (side, a) in &msgs {
        f.sample(&[("side", side)], a.counters.messages.sent);
    }
    let f = x.family(
        "c1m_message_outcomes_total",
        Kind::Counter,
        "--message-rate: what became of the messages (received, lost), and late and unmatched.",
    );
    for (side, a) in &msgs {
        for (kind, n) in a
            .counters
            .messages
            .iter()
            .filter(|(k, _)| !matches!(*k, "sent" | "outstanding"))
        {
            f.sample(&[("side", side), ("kind", kind)], n);
        }
    }
    let f = x.family(
        "c1m_messages_outstanding",
        Kind::Gauge,
        "--message-rate: messages waiting for their echo on open connections.",
    );
    for (side, a) in &msgs {
        f.sample(&[("side", side)], a.counters.messages.outstanding);
    }
    // `c1m server --message-rate`: the server's sent, late and capped, the client's
    // received and the numbers out of order.
    let f = x.family(
        "c1m_server_messages_total",
        Kind::Counter,
        "c1m server --message-rate: messages the server sent unasked (sent, late, capped), \
         the client received, and the client's order check (gaps, skipped, out_of_order, \
         duplicates).",
    );
    for (side, a) in &present {
        for (kind, n) in a.counters.server_messages.iter().filter(|(_, n)| *n > 0) {
            f.sample(&[("side", side), ("kind", kind)], n);
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

/// The figures of the side `sides` names.
fn side_figures<'a>(state: &'a LiveState, side: &str) -> &'a SideFigures {
    if side == "server" {
        &state.figures.server
    } else {
        &state.figures.client
    }
}

fn kernel_metrics(x: &mut Exposition, k: &KernelView, detail: Detail) {
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
        "c1m_tcp_retransmits_total",
        Kind::Counter,
        "Segments watched sockets retransmitted since the observer attached, by kind (they sum \
         to the kernel's RetransSegs less SYN-ACKs, which are the synack_retransmits event).",
    );
    for (i, side) in side::NAMES.iter().enumerate() {
        let r = k.side(i as u32).retransmits;
        for (kind, n) in [
            ("syn", r.syn),
            ("timeout", r.timeouts),
            ("slow_start", r.slow_start),
            ("fast", r.fast),
            ("tail_loss_probe", r.tail_loss_probes),
            ("other", r.other),
        ] {
            f.sample(&[("side", side), ("kind", kind)], n);
        }
    }
    // One series per port with --metrics-per-port, else one over the watched ports.
    let listeners = |x: &mut Exposition,
                     name: &'static str,
                     kind: Kind,
                     help: &'static str,
                     each: fn(&ListenerView) -> Option<u64>,
                     all: Option<u64>| {
        let f = x.family(name, kind, help);
        if !detail.per_port {
            if let Some(v) = all {
                f.sample(&[], v);
            }
            return;
        }
        for l in &k.listeners {
            if let Some(v) = each(l) {
                f.sample(&[("port", &l.port.to_string())], v);
            }
        }
    };
    listeners(
        x,
        "c1m_accept_queue_depth",
        Kind::Gauge,
        "Connections waiting in the watched listeners' accept queues (established, not yet accepted).",
        |l| Some(l.queue_depth),
        Some(k.queue_depth()),
    );
    listeners(
        x,
        "c1m_accept_queue_limit",
        Kind::Gauge,
        "Accept queue limits of the watched listeners, summed (listen backlog, capped by somaxconn).",
        |l| Some(l.queue_limit),
        Some(k.queue_limit()),
    );
    listeners(
        x,
        "c1m_accept_queue_overflows_total",
        Kind::Counter,
        "Handshakes the watched listeners dropped since the observer attached, mostly because \
         the accept queue was full (the kernel's ListenDrops for these ports).",
        |l| Some(l.accept_queue_overflows),
        Some(k.queue_overflows()),
    );
    listeners(
        x,
        "c1m_accept_queue_overflow_acks_total",
        Kind::Counter,
        "Final handshake ACKs dropped by a full accept queue: those clients believe they are connected.",
        |l| l.overflow_acks,
        k.queue_overflow_acks(),
    );
    listeners(
        x,
        "c1m_listen_sockets",
        Kind::Gauge,
        "Listening sockets on the watched ports (several per port with SO_REUSEPORT).",
        |l| Some(u64::from(l.sockets)),
        Some(k.listen_sockets()),
    );
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
            let Some(blob) = app.and_then(|a| a.histograms.get(hist)) else {
                continue;
            };
            // The client records the latencies: its histograms are exported from its
            // first snapshot, empty ones as zeros, so `rate()` and `increase()` see a
            // push's whole increase (a series born with its final count shows none). A
            // side with nothing recorded (the server records none) has no series; the
            // convenience count saves decoding its empty histograms.
            let empty = app
                .and_then(|a| a.percentiles.get(hist))
                .is_some_and(|p| p.count == 0);
            if side != "client" && empty {
                continue;
            }
            // A blob that does not decode has no series; the live view says why.
            if let Ok(h) = decode_hist(blob)
                && (side == "client" || !h.is_empty())
            {
                f.sample(&[("side", side)], Value::Histogram(latency::buckets(&h)));
            }
        }
    }
}

#[cfg(test)]
mod tests;
