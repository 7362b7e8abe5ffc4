//! A realistic [`LiveState`] of a run 49 s into its setup phase, with every kind of
//! kernel-vs-app difference in it: for the view's tests (unit, `TestBackend`, tmux,
//! Prometheus) and for looking at the view without root or a running lab.

use std::collections::BTreeMap;

use c1m_common::tcp_state;

use crate::{
    figures::Figures,
    model::Sample,
    observer::{
        KernelMemory, KernelView, ListenerView, SideMemory, SideView, view::WalkInfo,
        view::state_key,
    },
    view::live_state::LiveState,
    workload::stats::{
        histograms::Percentiles,
        setup_rate::SetupRate,
        snapshot::{AppSnapshot, Workers},
    },
};

/// Wall clock of every reading in the demo (kernel and app read at the same instant).
pub(crate) const UNIX_MS: u64 = 1_750_000_000_000;
pub(crate) const TARGET: u64 = 1_000_000;
pub(crate) const ELAPSED_S: f64 = 49.0;

pub(crate) const SERVER_APP_OPEN: u64 = 600_000;
pub(crate) const SERVER_ACCEPTED: u64 = 600_020;
/// Connections in the accept queues (200 on port 8000, 212 on 8001).
pub(crate) const QUEUE_DEPTH: u64 = 412;
pub(crate) const SERVER_CLOSE_WAIT: i64 = 5;
/// Held by the app, minus those the peer closed, plus the queued ones.
pub const SERVER_KERNEL_ESTABLISHED: i64 =
    SERVER_APP_OPEN as i64 - SERVER_CLOSE_WAIT + QUEUE_DEPTH as i64;
/// Handshakes dropped on port 8003, 30 of them final ACKs.
pub(crate) const OVERFLOWS: u64 = 37;
pub(crate) const OVERFLOW_ACKS: u64 = 30;

/// Connections the demo client says are open.
pub const CLIENT_APP_OPEN: u64 = 600_300;
pub(crate) const CLIENT_CONNECTED: u64 = 600_310;
pub(crate) const CLIENT_IN_FLIGHT: u64 = 86;
pub(crate) const CLIENT_SYN_SENT: i64 = 37;
/// Open in the app plus the 49 whose WebSocket handshake is still running.
pub(crate) const CLIENT_KERNEL_ESTABLISHED: i64 =
    CLIENT_APP_OPEN as i64 + CLIENT_IN_FLIGHT as i64 - CLIENT_SYN_SENT;

pub(crate) const SERVER_TRANSITIONS_PER_S: f64 = 24_800.0;
pub(crate) const CLIENT_TRANSITIONS_PER_S: f64 = 25_100.0;
pub(crate) const SERVER_BYTES_PER_SOCKET: u64 = 3_328;
pub(crate) const CLIENT_BYTES_PER_SOCKET: u64 = 3_456;
pub(crate) const SERVER_RSS_BYTES: u64 = 1_300_000_000;
pub(crate) const CLIENT_RSS_BYTES: u64 = 1_000_000_000;
pub(crate) const UNAVAILABLE: &str =
    "synack_retransmits: tracepoint tcp/tcp_retransmit_synack not found on this kernel";
/// The client's setup time so far (its ramp is still going).
pub(crate) const SETUP_S: f64 = 48.21;
/// The setup rate the demo ramp settles at.
pub(crate) const SETUP_PER_S: f64 = 12_450.0;

/// The demo state: server and client columns both full, observer attached.
pub fn state() -> LiveState {
    let mut state = LiveState {
        title: "c1m run".into(),
        phase: "setup".into(),
        target: TARGET,
        elapsed_s: ELAPSED_S,
        kernel: Some(kernel()),
        server: Some(server()),
        client: Some(client()),
        history: history(),
        notes: vec!["ramp: 12,500 connections/s up to 1,000,000".into()],
        ..LiveState::default()
    };
    refigure(&mut state);
    state
}

/// Recomputes the state's figures from its sources (after a test changed one), with the
/// demo's rates where a source is there.
pub fn refigure(state: &mut LiveState) {
    let mut figures = Figures::of_sources(
        UNIX_MS,
        state.kernel.as_ref(),
        state.server.as_ref(),
        state.client.as_ref(),
    );
    let (k, s, c) = (
        state.kernel.is_some(),
        state.server.is_some(),
        state.client.is_some(),
    );
    figures.client_connect_per_s = c.then_some(SETUP_PER_S);
    figures.kernel_established_per_s = k.then_some(2.0 * SETUP_PER_S);
    figures.setup_per_s = figures
        .client_connect_per_s
        .or(figures.kernel_established_per_s);
    figures.server.cpu_cores = s.then_some(0.8);
    figures.client.cpu_cores = c.then_some(0.9);
    figures.mem_available_bytes = Some(17 << 30);
    state.figures = figures;
}

fn states(pairs: &[(u32, i64)]) -> BTreeMap<String, i64> {
    pairs.iter().map(|&(s, n)| (state_key(s), n)).collect()
}

fn side_memory(sockets: u64, bytes_per_socket: u64) -> SideMemory {
    SideMemory {
        sockets,
        full_sockets: sockets,
        with_file: sockets,
        in_epoll: sockets,
        slab_bytes_derived: sockets * (bytes_per_socket - 256),
        buffer_bytes: sockets * 256,
        total_bytes: sockets * bytes_per_socket,
        bytes_per_socket: bytes_per_socket as f64,
        ..Default::default()
    }
}

pub(crate) fn kernel() -> KernelView {
    let server_sockets = SERVER_KERNEL_ESTABLISHED as u64 + SERVER_CLOSE_WAIT as u64 + 10;
    let client_sockets = CLIENT_KERNEL_ESTABLISHED as u64 + CLIENT_SYN_SENT as u64;
    let server_mem = side_memory(server_sockets, SERVER_BYTES_PER_SOCKET);
    let client_mem = side_memory(client_sockets, CLIENT_BYTES_PER_SOCKET);
    let total_sockets = server_sockets + client_sockets;
    let total_bytes = server_mem.total_bytes + client_mem.total_bytes;
    let total = SideMemory {
        sockets: total_sockets,
        full_sockets: total_sockets,
        total_bytes,
        bytes_per_socket: total_bytes as f64 / total_sockets as f64,
        ..Default::default()
    };
    KernelView {
        unix_ms: UNIX_MS,
        uptime_s: ELAPSED_S + 1.0,
        server: SideView {
            states: states(&[
                (tcp_state::ESTABLISHED, SERVER_KERNEL_ESTABLISHED),
                (tcp_state::SYN_RECV, 3),
                (tcp_state::NEW_SYN_RECV, 21),
                (tcp_state::CLOSE_WAIT, SERVER_CLOSE_WAIT),
                (tcp_state::LAST_ACK, 15),
                (tcp_state::LISTEN, 10),
            ]),
            transitions: [
                ("LISTEN->SYN_RECV".to_owned(), 600_456),
                ("SYN_RECV->ESTABLISHED".to_owned(), 600_432),
            ]
            .into(),
            transitions_total: 1_801_000,
            transitions_per_s: SERVER_TRANSITIONS_PER_S,
            established_total: SERVER_ACCEPTED + QUEUE_DEPTH,
            established_per_s: 12_400.0,
            events: [("synack_retransmits".to_owned(), 12)].into(),
            retransmits: Default::default(),
            resets_sent_by_reason: BTreeMap::new(),
            resets_sent_by_cause: Vec::new(),
        },
        client: SideView {
            states: states(&[
                (tcp_state::ESTABLISHED, CLIENT_KERNEL_ESTABLISHED),
                (tcp_state::SYN_SENT, CLIENT_SYN_SENT),
                (tcp_state::TIME_WAIT, 17),
            ]),
            transitions: [("SYN_SENT->ESTABLISHED".to_owned(), 600_359)].into(),
            transitions_total: 1_800_900,
            transitions_per_s: CLIENT_TRANSITIONS_PER_S,
            established_total: 600_359,
            established_per_s: SETUP_PER_S,
            events: BTreeMap::new(),
            retransmits: Default::default(),
            resets_sent_by_reason: BTreeMap::new(),
            resets_sent_by_cause: Vec::new(),
        },
        other: SideView::default(),
        listeners: (8000..8010)
            .map(|port| ListenerView {
                port,
                sockets: 1,
                queue_depth: match port {
                    8000 => 200,
                    8001 => 212,
                    _ => 0,
                },
                queue_limit: 4096,
                queue_peak_sampled: 900,
                accept_queue_overflows: if port == 8003 { OVERFLOWS } else { 0 },
                overflow_acks: Some(if port == 8003 { OVERFLOW_ACKS } else { 0 }),
                rcv_discards: Some(0),
                sk_drops_delta: if port == 8003 { OVERFLOWS } else { 0 },
                children: 60_045,
                synack_retransmits: Some(1),
            })
            .collect(),
        memory: Some(KernelMemory {
            server: server_mem,
            client: client_mem,
            other: SideMemory::default(),
            total,
            slab_object_bytes: [("TCP".to_owned(), 2432)].into(),
            slab_bytes_by_cache: [("TCP".to_owned(), total_sockets * 2432)].into(),
        }),
        walk: WalkInfo {
            age_s: Some(0.4),
            duration_ms: 180.0,
            sockets_walked: total_sockets,
            walks: 49,
            ended_unix_ms: UNIX_MS - 400,
        },
        unavailable: vec![UNAVAILABLE.to_owned()],
        map_errors: 0,
        skipped_runs: Default::default(),
        scope: Default::default(),
        mib: None,
        loss: None,
    }
}

fn snapshot(side: &str, phase: &str, rss: u64, baseline: u64, open: u64) -> AppSnapshot {
    AppSnapshot {
        side: side.into(),
        mode: "ws".into(),
        unix_ns: UNIX_MS * 1_000_000,
        uptime_s: ELAPSED_S,
        phase: phase.into(),
        target: TARGET,
        rss_bytes: rss,
        rss_baseline_bytes: baseline,
        rss_per_connection_bytes: Some((rss - baseline) as f64 / open as f64),
        workers: Workers {
            count: 2,
            alive: 2,
            list: Vec::new(),
        },
        ..Default::default()
    }
}

pub(crate) fn server() -> AppSnapshot {
    let mut a = snapshot(
        "server",
        "running",
        SERVER_RSS_BYTES,
        70_000_000,
        SERVER_APP_OPEN,
    );
    a.counters.accepted = SERVER_ACCEPTED;
    a.counters.open = SERVER_APP_OPEN;
    a.counters.ws_open = SERVER_APP_OPEN - 12;
    a.counters.closed.peer_closed = SERVER_ACCEPTED - SERVER_APP_OPEN;
    a.counters.bytes_in = 180_000_000;
    a.counters.bytes_out = 90_000_000;
    a.cpu_user_s = 40.5;
    a.cpu_sys_s = 80.2;
    a
}

pub(crate) fn client() -> AppSnapshot {
    let mut a = snapshot(
        "client",
        "ramp",
        CLIENT_RSS_BYTES,
        50_000_000,
        CLIENT_APP_OPEN,
    );
    a.counters.attempted = CLIENT_CONNECTED + CLIENT_IN_FLIGHT + 5;
    a.setup_rate = Some(SetupRate::new(12_500.0, CLIENT_CONNECTED, SETUP_S));
    a.counters.connected = CLIENT_CONNECTED;
    a.counters.open = CLIENT_APP_OPEN;
    a.counters.in_flight = CLIENT_IN_FLIGHT;
    a.counters.ws_open = CLIENT_APP_OPEN;
    a.counters.failures.refused = 3;
    a.counters.failures.timed_out = 2;
    a.counters.closed.reset = CLIENT_CONNECTED - CLIENT_APP_OPEN;
    a.counters.bytes_in = 90_000_000;
    a.counters.bytes_out = 180_000_000;
    a.cpu_user_s = 55.0;
    a.cpu_sys_s = 95.3;
    a.percentiles.insert(
        "connect_us".into(),
        Percentiles {
            count: CLIENT_CONNECTED,
            min: 60,
            max: 1_030_000,
            mean: 310.5,
            stddev: 2_200.0,
            p50: 180,
            p75: 240,
            p95: 600,
            p98: 1_100,
            p99: 2_400,
            p999: 1_010_000,
        },
    );
    a
}

/// One sample per second: a ramp that settles near [`SETUP_PER_S`] after 3 s and ends on it.
fn history() -> Vec<Sample> {
    let mut open = 0u64;
    (1..=ELAPSED_S as u64)
        .map(|t| {
            let rate = match t {
                1 => 4_000.0,
                2 => 9_000.0,
                _ if t == ELAPSED_S as u64 => SETUP_PER_S,
                _ => SETUP_PER_S + ((t * 37) % 11) as f64 * 10.0 - 50.0,
            };
            open = (open + rate as u64).min(CLIENT_APP_OPEN);
            Sample {
                t_s: t as f64,
                unix_ms: UNIX_MS - (ELAPSED_S as u64 - t) * 1000,
                phase: "setup".into(),
                kernel_server_established: Some(open as i64),
                kernel_client_established: Some(open as i64),
                kernel_client_syn_sent: Some(CLIENT_SYN_SENT),
                kernel_accept_queue_depth: Some(QUEUE_DEPTH),
                kernel_transitions_per_s: Some(2.0 * rate * 2.0),
                kernel_established_per_s: Some(2.0 * rate),
                server_open: Some(open),
                client_open: Some(open),
                client_connect_per_s: Some(rate),
                box_mem_available_bytes: 17 << 30,
                ..Default::default()
            }
        })
        .collect()
}
