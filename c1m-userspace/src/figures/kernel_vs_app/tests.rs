//! The kernel-vs-app rows checked on hand-made views: each row's parts, residual and
//! explanation, apart from the computation so that each file stays one concern.
#![allow(clippy::unwrap_used)] // panics are the assertions in tests
use c1m_common::tcp_state::{CLOSE_WAIT, ESTABLISHED, SYN_SENT};

use super::*;
use crate::observer::ListenerView;

const T_MS: u64 = 1_700_000_000_000;

fn kernel() -> KernelView {
    KernelView {
        unix_ms: T_MS,
        uptime_s: 100.0,
        ..Default::default()
    }
}

fn set(side: &mut SideView, state: u32, n: i64) {
    side.states
        .insert(crate::observer::view::state_key(state), n);
}

fn listener(port: u16, depth: u64, limit: u64, overflows: u64) -> ListenerView {
    ListenerView {
        port,
        sockets: 1,
        queue_depth: depth,
        queue_limit: limit,
        accept_queue_overflows: overflows,
        ..Default::default()
    }
}

/// An app snapshot read at the same instant as [`kernel`], started with it.
fn app(side: &str, mode: &str) -> AppSnapshot {
    AppSnapshot {
        side: side.into(),
        mode: mode.into(),
        unix_ns: T_MS * 1_000_000,
        uptime_s: 100.0,
        ..Default::default()
    }
}

fn server(open: u64, accepted: u64) -> AppSnapshot {
    let mut a = app("server", "ws");
    a.counters.open = open;
    a.counters.accepted = accepted;
    a
}

fn client(mode: &str, open: u64, in_flight: u64) -> AppSnapshot {
    let mut a = app("client", mode);
    a.counters.open = open;
    a.counters.in_flight = in_flight;
    a.counters.connected = open;
    a
}

fn rows(k: &KernelView, s: &AppSnapshot, c: &AppSnapshot) -> Vec<KernelVsApp> {
    kernel_vs_app(Some(k), Some(s), Some(c))
}

fn get<'a>(rows: &'a [KernelVsApp], what: &str) -> &'a KernelVsApp {
    row(rows, what).unwrap()
}

fn why(r: &KernelVsApp) -> &str {
    r.explanation.as_deref().unwrap_or("")
}

/// A kernel view where every row agrees: 1,000 connections, server side accepted
/// them all, client side opened them all.
fn agreeing() -> (KernelView, AppSnapshot, AppSnapshot) {
    let mut k = kernel();
    set(&mut k.server, ESTABLISHED, 1000);
    set(&mut k.client, ESTABLISHED, 1000);
    k.server.established_total = 1000;
    k.client.established_total = 1000;
    k.listeners.push(listener(8000, 0, 4096, 0));
    (k, server(1000, 1000), client("ws", 1000, 0))
}

#[test]
fn nothing_gives_no_rows() {
    assert!(kernel_vs_app(None, None, None).is_empty());
}

#[test]
fn all_agree_without_explanations() {
    let (k, s, c) = agreeing();
    let rows = rows(&k, &s, &c);
    let names: Vec<_> = rows.iter().map(|r| r.what.as_str()).collect();
    assert_eq!(
        names,
        [SERVER_OPEN, SERVER_ACCEPTED, CLIENT_OPEN, CLIENT_CONNECTING]
    );
    for r in &rows {
        assert!(r.agree, "{r:?}");
        assert_eq!(r.explanation, None, "{r:?}");
    }
    assert_eq!(get(&rows, SERVER_OPEN).kernel, Some(1000));
    assert_eq!(get(&rows, SERVER_OPEN).app, Some(1000));
    assert_eq!(get(&rows, CLIENT_CONNECTING).kernel, Some(0));
}

#[test]
fn kernel_only_rows_say_app_is_missing() {
    let (k, _, _) = agreeing();
    let rows = kernel_vs_app(Some(&k), None, None);
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert_eq!(r.app, None);
        assert!(!r.agree);
        assert!(why(r).starts_with("app: n/a (no c1m "), "{r:?}");
    }
    assert_eq!(
        why(get(&rows, SERVER_OPEN)),
        "app: n/a (no c1m server stats)"
    );
    assert_eq!(
        why(get(&rows, CLIENT_OPEN)),
        "app: n/a (no c1m client stats)"
    );
}

#[test]
fn app_only_rows_say_observer_is_missing() {
    let s = server(10, 10);
    let rows = kernel_vs_app(None, Some(&s), None);
    assert_eq!(
        rows.len(),
        2,
        "no client rows without a client or a kernel view"
    );
    for r in &rows {
        assert_eq!(r.kernel, None);
        assert!(!r.agree);
        assert_eq!(why(r), "kernel: n/a (observer not running)");
    }
    let c = client("ws", 5, 1);
    let rows = kernel_vs_app(None, None, Some(&c));
    assert_eq!(rows.len(), 2);
    assert_eq!(get(&rows, CLIENT_OPEN).app, Some(5));
    assert_eq!(get(&rows, CLIENT_CONNECTING).app, Some(1));
}

#[test]
fn accept_queue_explains_kernel_surplus() {
    let (mut k, mut s, c) = agreeing();
    k.listeners[0].queue_depth = 412;
    s.counters.open = 588;
    s.counters.accepted = 588;
    let rows = rows(&k, &s, &c);
    let open = get(&rows, SERVER_OPEN);
    assert!(!open.agree);
    assert_eq!(
        why(open),
        "kernel counts 412 more than the app: 412 established in the kernel, not yet accepted"
    );
    assert_eq!(
        why(get(&rows, SERVER_ACCEPTED)),
        "kernel counts 412 more than the app: 412 established in the kernel, not yet accepted"
    );
}

#[test]
fn close_wait_explains_app_surplus() {
    let (mut k, mut s, c) = agreeing();
    set(&mut k.server, ESTABLISHED, 995);
    set(&mut k.server, CLOSE_WAIT, 5);
    s.counters.open = 1000;
    let rows = rows(&k, &s, &c);
    assert_eq!(
        why(get(&rows, SERVER_OPEN)),
        "app counts 5 more than the kernel: 5 closed by the peer, not yet noticed by the app (CLOSE_WAIT)"
    );
}

#[test]
fn churned_connections_waiting_for_their_close_are_a_named_part() {
    let (mut k, s, mut c) = agreeing();
    // 1,000 held by the app, 7 churned ones still ESTABLISHED (close frame out), 2 of
    // them with the server's FIN in (CLOSE_WAIT).
    set(&mut k.client, ESTABLISHED, 1005);
    set(&mut k.client, CLOSE_WAIT, 2);
    c.counters.open = 1000;
    c.counters.churn.closing = 7;
    let rows = rows(&k, &s, &c);
    let r = get(&rows, CLIENT_OPEN);
    assert_eq!(
        why(r),
        "kernel counts 5 more than the app: 7 churned, our close frame sent, waiting for the \
         server to close; 2 closed by the server, not yet noticed by the app (CLOSE_WAIT)"
    );
    assert!(!why(r).contains("unexplained"));
}

#[test]
fn queue_and_close_wait_together() {
    let (mut k, mut s, c) = agreeing();
    // 1,200 held by the app of which 5 in CLOSE_WAIT; 2,412 queued.
    set(&mut k.server, ESTABLISHED, 1195 + 2412);
    set(&mut k.server, CLOSE_WAIT, 5);
    k.listeners[0].queue_depth = 2412;
    s.counters.open = 1200;
    let rows = rows(&k, &s, &c);
    assert_eq!(
        why(get(&rows, SERVER_OPEN)),
        "kernel counts 2,407 more than the app: 2,412 established in the kernel, not yet accepted; \
         5 closed by the peer, not yet noticed by the app (CLOSE_WAIT)"
    );
}

#[test]
fn parts_that_cancel_still_agree_and_say_so() {
    let (mut k, mut s, c) = agreeing();
    set(&mut k.server, ESTABLISHED, 1000);
    set(&mut k.server, CLOSE_WAIT, 3);
    k.listeners[0].queue_depth = 3;
    s.counters.open = 1000;
    let rows = rows(&k, &s, &c);
    let open = get(&rows, SERVER_OPEN);
    assert!(open.agree);
    assert_eq!(
        why(open),
        "equal on balance: 3 established in the kernel, not yet accepted; \
         3 closed by the peer, not yet noticed by the app (CLOSE_WAIT)"
    );
}

#[test]
fn unexplained_residuals_name_the_usual_suspect() {
    let (mut k, mut s, c) = agreeing();
    set(&mut k.server, ESTABLISHED, 1010);
    let rows = rows(&k, &s, &c);
    assert_eq!(
        why(get(&rows, SERVER_OPEN)),
        "kernel counts 10 more than the app: 10 more in the kernel, unexplained: \
         sockets of another process on the watched ports?"
    );
    set(&mut k.server, ESTABLISHED, 990);
    s.counters.open = 1000;
    let rows = kernel_vs_app(Some(&k), Some(&s), Some(&c));
    assert_eq!(
        why(get(&rows, SERVER_OPEN)),
        "app counts 10 more than the kernel: 10 more in the app, unexplained: \
         reset in the kernel, not yet noticed by the app?"
    );
}

#[test]
fn app_counts_older_than_their_snapshot_are_not_unexplained() {
    // A steady 2,000/s ramp: the snapshot is assembled at the kernel's instant, but its
    // shard reports describe 220 ms earlier, so the kernel leads by ~450.
    let (mut k, mut s, c) = agreeing();
    s.unix_ns = T_MS * 1_000_000;
    s.counts_unix_ns = (T_MS - 220) * 1_000_000;
    k.server.transitions_per_s = 2_000.0;
    set(&mut k.server, ESTABLISHED, 1450);
    let rows = rows(&k, &s, &c);
    let text = why(get(&rows, SERVER_OPEN));
    assert!(text.contains("counted between the two readings"), "{text}");
    assert!(!text.contains("unexplained"), "{text}");
}

#[test]
fn teardown_names_the_closing_states() {
    let (mut k, s, mut c) = agreeing();
    set(&mut k.client, ESTABLISHED, 600);
    set(&mut k.client, tcp_state::FIN_WAIT2, 300);
    set(&mut k.client, tcp_state::TIME_WAIT, 100);
    c.counters.open = 600;
    let rows = rows(&k, &s, &c);
    let text = why(get(&rows, CLIENT_OPEN));
    assert!(
        text.contains("closing in the kernel: 300 FIN_WAIT2, 100 TIME_WAIT"),
        "{text}"
    );
}

#[test]
fn residual_within_reading_skew_is_timing() {
    let (mut k, mut s, c) = agreeing();
    // App read 250 ms after the kernel, a shard's report up to 125 ms from the mean;
    // the server side moves 20,000 transitions/s, so up to 11,250 (with slack) can
    // change between the readings.
    s.unix_ns = (T_MS + 250) * 1_000_000;
    s.uptime_s = 100.25;
    k.server.transitions_per_s = 20_000.0;
    set(&mut k.server, ESTABLISHED, 1000);
    s.counters.open = 6000;
    let rows = rows(&k, &s, &c);
    assert_eq!(
        why(get(&rows, SERVER_OPEN)),
        "app counts 5,000 more than the kernel: 5,000 more in the app: counted between the \
         two readings (375 ms apart at 20,000/s)"
    );
    // Beyond what the rate allows: unexplained.
    s.counters.open = 13_000;
    let rows = kernel_vs_app(Some(&k), Some(&s), Some(&c));
    assert!(why(get(&rows, SERVER_OPEN)).contains("12,000 more in the app, unexplained"));
    // Readings of the same instant of a side that is not moving never blame timing.
    s.unix_ns = T_MS * 1_000_000;
    k.server.transitions_per_s = 0.0;
    s.counters.open = 1001;
    let rows = kernel_vs_app(Some(&k), Some(&s), Some(&c));
    assert!(why(get(&rows, SERVER_OPEN)).contains("1 more in the app, unexplained"));
}

#[test]
fn missing_timestamps_never_blame_timing() {
    let (mut k, mut s, c) = agreeing();
    k.server.transitions_per_s = 1e9;
    s.unix_ns = 0;
    s.counters.open = 1001;
    let rows = rows(&k, &s, &c);
    assert!(why(get(&rows, SERVER_OPEN)).contains("unexplained"));
    k.server.transitions_per_s = f64::NAN;
    s.unix_ns = (T_MS + 500) * 1_000_000;
    let rows = kernel_vs_app(Some(&k), Some(&s), Some(&c));
    assert!(why(get(&rows, SERVER_OPEN)).contains("unexplained"));
}

#[test]
fn overflows_are_noted_even_when_counts_agree() {
    let (mut k, s, c) = agreeing();
    k.listeners[0].accept_queue_overflows = 37;
    let rows = rows(&k, &s, &c);
    let open = get(&rows, SERVER_OPEN);
    assert!(open.agree);
    assert_eq!(
        why(open),
        "37 handshakes dropped since start: accept queue full"
    );
    k.listeners[0].overflow_acks = Some(30);
    k.listeners.push(ListenerView {
        overflow_acks: Some(2),
        ..listener(8001, 0, 4096, 2)
    });
    let rows = kernel_vs_app(Some(&k), Some(&s), Some(&c));
    assert_eq!(
        why(get(&rows, SERVER_OPEN)),
        "39 handshakes dropped since start: accept queue full (32 final ACKs: those clients \
         believe they are connected)"
    );
    // A listener whose ACK drops are unknown makes the ACK figure unknown.
    k.listeners[1].overflow_acks = None;
    let rows = kernel_vs_app(Some(&k), Some(&s), Some(&c));
    assert_eq!(
        why(get(&rows, SERVER_OPEN)),
        "39 handshakes dropped since start: accept queue full"
    );
}

#[test]
fn full_accept_queues_are_named() {
    let (mut k, mut s, c) = agreeing();
    k.listeners[0] = listener(8000, 4096, 4096, 0);
    set(&mut k.server, ESTABLISHED, 4096);
    s.counters.open = 0;
    let rows = rows(&k, &s, &c);
    assert_eq!(
        why(get(&rows, SERVER_OPEN)),
        "kernel counts 4,096 more than the app: 4,096 established in the kernel, not yet accepted. \
         accept queue full on port 8000 (4,096/4,096): the server is not accepting fast enough"
    );
    k.listeners = (8000..8005).map(|p| listener(p, 128, 128, 0)).collect();
    set(&mut k.server, ESTABLISHED, 640);
    let rows = kernel_vs_app(Some(&k), Some(&s), Some(&c));
    assert!(
        why(get(&rows, SERVER_OPEN)).ends_with(
            "accept queues full on 5 ports (8000, 8001, 8002, …): the server is not accepting fast enough"
        ),
        "{}",
        why(get(&rows, SERVER_OPEN))
    );
    // A listener without a known limit is never "full".
    k.listeners = vec![listener(8000, 5, 0, 0)];
    set(&mut k.server, ESTABLISHED, 5);
    let rows = kernel_vs_app(Some(&k), Some(&s), Some(&c));
    assert!(!why(get(&rows, SERVER_OPEN)).contains("full"));
}

#[test]
fn accepted_totals_before_attach_are_not_comparable() {
    let (mut k, mut s, c) = agreeing();
    // The server ran 240 s before the observer attached and accepted 50,000 meanwhile.
    s.uptime_s = 340.0;
    s.counters.accepted = 51_000;
    let rows = rows(&k, &s, &c);
    let acc = get(&rows, SERVER_ACCEPTED);
    assert!(!acc.agree);
    assert_eq!(
        why(acc),
        "app counts 50,000 more than the kernel. not comparable: the app started 240 s before \
         the observer attached, so its total includes connections the kernel view never saw"
    );
    // Started early but nothing was missed: the counts agree and nothing is said.
    s.counters.accepted = 1000;
    let rows = kernel_vs_app(Some(&k), Some(&s), Some(&c));
    assert!(get(&rows, SERVER_ACCEPTED).agree);
    assert_eq!(get(&rows, SERVER_ACCEPTED).explanation, None);
    // Started with the observer: an app surplus is unexplained.
    s.uptime_s = 100.5;
    s.counters.accepted = 1003;
    let rows = kernel_vs_app(Some(&k), Some(&s), Some(&c));
    assert_eq!(
        why(get(&rows, SERVER_ACCEPTED)),
        "app counts 3 more than the kernel: 3 more in the app, unexplained: accepted before \
         the observer attached?"
    );
    // A kernel surplus beyond the queue: another process.
    k.server.established_total = 1010;
    s.counters.accepted = 1000;
    let rows = kernel_vs_app(Some(&k), Some(&s), Some(&c));
    assert!(why(get(&rows, SERVER_ACCEPTED)).contains(
        "10 more in the kernel, unexplained: connections to another process on the watched ports?"
    ));
}

#[test]
fn client_handshakes_pending_in_ws_and_hold_modes() {
    let (mut k, s, _) = agreeing();
    // 1,049 ESTABLISHED in the kernel; the app has 1,000 open and 86 in flight, of
    // which 37 are still SYN_SENT: 49 wait for the 101.
    set(&mut k.client, ESTABLISHED, 1049);
    set(&mut k.client, SYN_SENT, 37);
    let c = client("ws", 1000, 86);
    let rows = rows(&k, &s, &c);
    let open = get(&rows, CLIENT_OPEN);
    assert_eq!(
        why(open),
        "kernel counts 49 more than the app: 49 ESTABLISHED in the kernel, WebSocket handshake not finished"
    );
    let connecting = get(&rows, CLIENT_CONNECTING);
    assert_eq!((connecting.kernel, connecting.app), (Some(37), Some(86)));
    assert_eq!(
        why(connecting),
        "app counts 49 more than the kernel: 49 ESTABLISHED (past SYN_SENT), WebSocket \
         handshake not finished. 37 SYN_SENT: handshakes in flight"
    );
    let c = client("hold", 1000, 86);
    let rows = kernel_vs_app(Some(&k), Some(&s), Some(&c));
    assert_eq!(
        why(get(&rows, CLIENT_OPEN)),
        "kernel counts 49 more than the app: 49 ESTABLISHED in the kernel, not yet seen by the app"
    );
}

/// Issue 32's case: every connection past SYN_SENT, none open in the app yet. The
/// connecting row's kernel figure is 0 (SYN_SENT), so its explanation must not say the
/// kernel counts them "connected": it says where they are instead.
#[test]
fn the_connecting_row_does_not_contradict_its_kernel_figure() {
    let (mut k, s, _) = agreeing();
    set(&mut k.client, ESTABLISHED, 2048);
    set(&mut k.client, SYN_SENT, 0);
    let c = client("ws", 0, 2048);
    let rows = rows(&k, &s, &c);
    let connecting = get(&rows, CLIENT_CONNECTING);
    assert_eq!((connecting.kernel, connecting.app), (Some(0), Some(2048)));
    let text = why(connecting);
    assert_eq!(
        text,
        "app counts 2,048 more than the kernel: 2,048 ESTABLISHED (past SYN_SENT), WebSocket \
         handshake not finished"
    );
    assert!(!text.contains("connected in the kernel"), "{text}");
    let open = get(&rows, CLIENT_OPEN);
    assert_eq!((open.kernel, open.app), (Some(2048), Some(0)));
    assert_eq!(
        why(open),
        "kernel counts 2,048 more than the app: 2,048 ESTABLISHED in the kernel, WebSocket \
         handshake not finished"
    );
}

#[test]
fn syn_sent_alone_is_a_note() {
    let (mut k, s, _) = agreeing();
    set(&mut k.client, SYN_SENT, 37);
    let c = client("ws", 1000, 37);
    let rows = rows(&k, &s, &c);
    let connecting = get(&rows, CLIENT_CONNECTING);
    assert!(connecting.agree);
    assert_eq!(why(connecting), "37 SYN_SENT: handshakes in flight");
    assert!(get(&rows, CLIENT_OPEN).agree);
    assert_eq!(get(&rows, CLIENT_OPEN).explanation, None);
}

#[test]
fn client_close_wait_and_surplus_syn_sent() {
    let (mut k, s, _) = agreeing();
    set(&mut k.client, ESTABLISHED, 993);
    set(&mut k.client, CLOSE_WAIT, 7);
    set(&mut k.client, SYN_SENT, 12);
    let c = client("ws", 1000, 2);
    let rows = rows(&k, &s, &c);
    assert_eq!(
        why(get(&rows, CLIENT_OPEN)),
        "app counts 7 more than the kernel: 7 closed by the server, not yet noticed by the app (CLOSE_WAIT)"
    );
    assert_eq!(
        why(get(&rows, CLIENT_CONNECTING)),
        "kernel counts 10 more than the app: 10 more in the kernel, unexplained: connects of \
         another process to the watched ports? 12 SYN_SENT: handshakes in flight"
    );
}

#[test]
fn odd_inputs_never_panic() {
    let mut k = kernel();
    set(&mut k.server, ESTABLISHED, i64::MIN);
    set(&mut k.server, CLOSE_WAIT, i64::MAX);
    set(&mut k.client, ESTABLISHED, i64::MAX);
    set(&mut k.client, SYN_SENT, -5);
    k.server.established_total = u64::MAX;
    k.listeners.push(listener(1, u64::MAX, 1, u64::MAX));
    k.uptime_s = f64::NAN;
    let mut s = server(u64::MAX, u64::MAX);
    s.uptime_s = f64::INFINITY;
    let mut c = client("ws", u64::MAX, u64::MAX);
    c.unix_ns = u64::MAX;
    let rows = rows(&k, &s, &c);
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert!(r.explanation.is_some(), "{r:?}");
    }
}
