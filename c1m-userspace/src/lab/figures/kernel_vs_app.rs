//! Kernel vs app: the counts that should match, side by side, and why they differ when
//! they do. Pure: no I/O, no clock; the run summary stores the same rows per phase.
//!
//! Each row is one equation between a kernel figure `K` and an application figure `A`.
//! `K - A` is split into parts the kernel can name (accept queues, CLOSE_WAIT, handshakes
//! the app has not finished) and a residual. The residual is put down to the two readings
//! being taken at different instants when the side's rate could have moved it that far;
//! otherwise it is reported as unexplained, with the usual suspect.
//!
//! | row | kernel | app | `K - A` is made of |
//! | --- | --- | --- | --- |
//! | server open | server ESTABLISHED | server open | + accept queues − server CLOSE_WAIT |
//! | server accepted | server SYN_RECV→ESTABLISHED since attach | server accepted | + accept queues |
//! | client open | client ESTABLISHED | client open | + TCP-connected, app handshake pending − client CLOSE_WAIT |
//! | client connecting | client SYN_SENT | client in flight | − TCP-connected, app handshake pending |
//!
//! A figure computation, so it lives under `figures` (which stores the rows in
//! [`Figures::kernel_vs_app`](super::Figures::kernel_vs_app)), not among the views.

use std::cmp::Ordering;

use c1m_common::tcp_state;

use crate::fmt::{count, int, whole};
use crate::{
    lab::model::{KernelVsApp, Source},
    observer::{KernelView, SideView},
    workload::{engine::REPORT_EVERY_NS, stats::snapshot::AppSnapshot},
};

/// Row names (`KernelVsApp::what`).
pub const SERVER_OPEN: &str = "server open";
pub const SERVER_ACCEPTED: &str = "server accepted";
pub const CLIENT_OPEN: &str = "client open";
pub const CLIENT_CONNECTING: &str = "client connecting";

/// The source of a row's app figure (`KernelVsApp::what`): the server's snapshot for
/// the server rows, the client's for the client rows; its kernel figure is the kernel
/// view's.
pub fn app_source(what: &str) -> Option<Source> {
    match what {
        SERVER_OPEN | SERVER_ACCEPTED => Some(Source::Server),
        CLIENT_OPEN | CLIENT_CONNECTING => Some(Source::Client),
        _ => None,
    }
}

/// A residual counts as "between the two readings" up to this multiple of what the side's
/// rate could change in the time between them (rates move within a second).
const SKEW_SLACK: f64 = 1.5;

/// An app that started more than this before the observer attached may hold totals the
/// kernel view never saw.
const ATTACH_TOLERANCE_S: f64 = 1.0;

/// The kernel-vs-app rows for the latest views. Server rows appear when the kernel view or
/// the server's snapshot is there, client rows when the kernel view or the client's is; a
/// missing source leaves its figure `None` and says so in the explanation.
pub fn kernel_vs_app(
    kernel: Option<&KernelView>,
    server: Option<&AppSnapshot>,
    client: Option<&AppSnapshot>,
) -> Vec<KernelVsApp> {
    let mut rows = Vec::new();
    if kernel.is_some() || server.is_some() {
        rows.push(server_open(kernel, server));
        rows.push(server_accepted(kernel, server));
    }
    if kernel.is_some() || client.is_some() {
        rows.push(client_open(kernel, client));
        rows.push(client_connecting(kernel, client));
    }
    rows
}

/// The row named `what`, if present.
pub fn row<'a>(rows: &'a [KernelVsApp], what: &str) -> Option<&'a KernelVsApp> {
    rows.iter().find(|r| r.what == what)
}

fn server_open(k: Option<&KernelView>, app: Option<&AppSnapshot>) -> KernelVsApp {
    let kernel = k.map(|k| k.server.state(tcp_state::ESTABLISHED));
    let app_n = app.map(|a| gauge(a.counters.open));
    let mut why = Why::default();
    if let (Some(k), Some(a), Some(kn), Some(an)) = (k, app, kernel, app_n) {
        let queued = gauge(k.queue_depth());
        let close_wait = k.server.state(tcp_state::CLOSE_WAIT).max(0);
        why.part(queued, |n| {
            format!("{n} established in the kernel, not yet accepted")
        });
        why.part(-close_wait, |n| {
            format!("{n} closed by the peer, not yet noticed by the app (CLOSE_WAIT)")
        });
        why.residual(
            kn.saturating_sub(an)
                .saturating_sub(queued)
                .saturating_add(close_wait),
            skew(k, a, k.server.transitions_per_s),
            "sockets of another process on the watched ports?",
            "reset in the kernel, not yet noticed by the app?",
        );
    }
    if let Some(k) = k {
        accept_queue_notes(k, &mut why.notes);
        closing_note(&k.server, &mut why.notes);
    }
    why.finish(SERVER_OPEN, "server", kernel, app_n)
}

fn server_accepted(k: Option<&KernelView>, app: Option<&AppSnapshot>) -> KernelVsApp {
    let kernel = k.map(|k| gauge(k.server.established_total));
    let app_n = app.map(|a| gauge(a.counters.accepted));
    let mut why = Why::default();
    if let (Some(k), Some(a), Some(kn), Some(an)) = (k, app, kernel, app_n) {
        let queued = gauge(k.queue_depth());
        why.part(queued, |n| {
            format!("{n} established in the kernel, not yet accepted")
        });
        let residual = kn.saturating_sub(an).saturating_sub(queued);
        match started_before_attach(k, a) {
            Some(early_s) if residual < 0 => why.notes.push(format!(
                "not comparable: the app started {early_s:.0} s before the observer attached, \
                 so its total includes connections the kernel view never saw"
            )),
            _ => why.residual(
                residual,
                skew(k, a, k.server.established_per_s),
                "connections to another process on the watched ports?",
                "accepted before the observer attached?",
            ),
        }
    }
    why.finish(SERVER_ACCEPTED, "server", kernel, app_n)
}

fn client_open(k: Option<&KernelView>, app: Option<&AppSnapshot>) -> KernelVsApp {
    let kernel = k.map(|k| k.client.state(tcp_state::ESTABLISHED));
    let app_n = app.map(|a| gauge(a.counters.open));
    let mut why = Why::default();
    if let (Some(k), Some(a), Some(kn), Some(an)) = (k, app, kernel, app_n) {
        let pending = handshake_pending(&k.client, a);
        let close_wait = k.client.state(tcp_state::CLOSE_WAIT).max(0);
        why.part(pending, |n| pending_text(n, a));
        why.part(-close_wait, |n| {
            format!("{n} closed by the server, not yet noticed by the app (CLOSE_WAIT)")
        });
        why.residual(
            kn.saturating_sub(an)
                .saturating_sub(pending)
                .saturating_add(close_wait),
            skew(k, a, k.client.transitions_per_s),
            "connections of another process to the watched ports?",
            "reset in the kernel, not yet noticed by the app?",
        );
    }
    if let Some(k) = k {
        closing_note(&k.client, &mut why.notes);
    }
    why.finish(CLIENT_OPEN, "client", kernel, app_n)
}

fn client_connecting(k: Option<&KernelView>, app: Option<&AppSnapshot>) -> KernelVsApp {
    let kernel = k.map(|k| k.client.state(tcp_state::SYN_SENT));
    let app_n = app.map(|a| gauge(a.counters.in_flight));
    let mut why = Why::default();
    if let (Some(k), Some(a), Some(kn), Some(an)) = (k, app, kernel, app_n) {
        let pending = handshake_pending(&k.client, a);
        why.part(-pending, |n| pending_text(n, a));
        why.residual(
            kn.saturating_sub(an).saturating_add(pending),
            skew(k, a, k.client.transitions_per_s),
            "connects of another process to the watched ports?",
            "connects the kernel has not started?",
        );
    }
    if let Some(syn_sent) = kernel.filter(|&n| n > 0) {
        why.notes.push(format!(
            "{} SYN_SENT: handshakes in flight",
            count(syn_sent.unsigned_abs())
        ));
    }
    why.finish(CLIENT_CONNECTING, "client", kernel, app_n)
}

/// Client connections the kernel has ESTABLISHED while the app still counts them in
/// flight (its handshake, or its first writable event, is still to come).
fn handshake_pending(client: &SideView, app: &AppSnapshot) -> i64 {
    gauge(app.counters.in_flight)
        .saturating_sub(client.state(tcp_state::SYN_SENT).max(0))
        .max(0)
}

fn pending_text(n: &str, app: &AppSnapshot) -> String {
    if app.mode == "ws" {
        format!("{n} connected in the kernel, WebSocket handshake not finished")
    } else {
        format!("{n} connected in the kernel, not yet seen by the app")
    }
}

/// Where closing connections are, per state, while any are actively closing (FIN_WAIT,
/// CLOSING, LAST_ACK): at teardown this is where ESTABLISHED went. CLOSE_WAIT is a part
/// of the row's difference already; TIME_WAIT alone is history, not news.
fn closing_note(side: &SideView, notes: &mut Vec<String>) {
    let active = [
        tcp_state::FIN_WAIT1,
        tcp_state::FIN_WAIT2,
        tcp_state::CLOSING,
        tcp_state::LAST_ACK,
    ];
    if active.iter().all(|&st| side.state(st) <= 0) {
        return;
    }
    let parts: Vec<String> = active
        .into_iter()
        .chain([tcp_state::TIME_WAIT])
        .filter_map(|st| {
            let n = side.state(st);
            (n > 0).then(|| {
                format!(
                    "{} {}",
                    count(n.unsigned_abs()),
                    tcp_state::NAMES[st as usize]
                )
            })
        })
        .collect();
    notes.push(format!("closing in the kernel: {}", parts.join(", ")));
}

fn accept_queue_notes(k: &KernelView, notes: &mut Vec<String>) {
    let overflows = k.queue_overflows();
    if overflows > 0 {
        let acks = k.queue_overflow_acks();
        let mut s = format!(
            "{} handshakes dropped since start: accept queue full",
            count(overflows)
        );
        if let Some(acks) = acks.filter(|&a| a > 0) {
            s.push_str(&format!(
                " ({} final ACKs: those clients believe they are connected)",
                count(acks)
            ));
        }
        notes.push(s);
    }
    let full: Vec<_> = k
        .listeners
        .iter()
        .filter(|l| l.queue_limit > 0 && l.queue_depth >= l.queue_limit)
        .collect();
    match full.as_slice() {
        [] => {}
        [l] => notes.push(format!(
            "accept queue full on port {} ({}/{}): the server is not accepting fast enough",
            l.port,
            count(l.queue_depth),
            count(l.queue_limit)
        )),
        many => {
            let mut ports: Vec<String> = many.iter().take(3).map(|l| l.port.to_string()).collect();
            if many.len() > 3 {
                ports.push("…".to_owned());
            }
            notes.push(format!(
                "accept queues full on {} ports ({}): the server is not accepting fast enough",
                many.len(),
                ports.join(", ")
            ));
        }
    }
}

/// How far apart the kernel and app readings were, and how fast the side was changing.
#[derive(Clone, Copy, Debug)]
struct Skew {
    apart_s: f64,
    per_s: f64,
}

impl Skew {
    fn explains(&self, n: u64) -> bool {
        let bound = self.per_s * self.apart_s * SKEW_SLACK;
        bound.is_finite() && n > 0 && n as f64 <= bound
    }
}

/// `None` when either reading has no timestamp. The app's counts are sums of shard
/// reports taken within one report period ([`REPORT_EVERY_NS`]) around their mean
/// instant, so a shard's reading may be half a period further from the kernel's.
fn skew(k: &KernelView, a: &AppSnapshot, per_s: f64) -> Option<Skew> {
    if k.unix_ms == 0 || a.unix_ns == 0 {
        return None;
    }
    let spread_s = REPORT_EVERY_NS as f64 / 2e9;
    let apart_s = (k.unix_ms as f64 / 1e3 - a.counts_at_ns() as f64 / 1e9).abs() + spread_s;
    Some(Skew {
        apart_s,
        per_s: if per_s.is_finite() {
            per_s.max(0.0)
        } else {
            0.0
        },
    })
}

/// Seconds the app started before the observer attached, when that exceeds the tolerance.
fn started_before_attach(k: &KernelView, a: &AppSnapshot) -> Option<f64> {
    if k.unix_ms == 0 || a.unix_ns == 0 {
        return None;
    }
    let app_start = a.unix_ns as f64 / 1e9 - a.uptime_s;
    let attach = k.unix_ms as f64 / 1e3 - k.uptime_s;
    let early = attach - app_start;
    (early.is_finite() && early > ATTACH_TOLERANCE_S).then_some(early)
}

/// Saturating conversion of an app counter to the signed gauge type.
fn gauge(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Collects the parts of `K - A` and the notes of one row.
#[derive(Default)]
struct Why {
    /// Named parts of the difference.
    parts: Vec<String>,
    /// Facts that bear on the row whether or not the counts differ.
    notes: Vec<String>,
}

impl Why {
    /// A part that contributes `delta` to `K - A`; `text` gets its size with separators.
    fn part(&mut self, delta: i64, text: impl FnOnce(&str) -> String) {
        if delta != 0 {
            self.parts.push(text(&count(delta.unsigned_abs())));
        }
    }

    fn residual(&mut self, r: i64, skew: Option<Skew>, kernel_more: &str, app_more: &str) {
        let n = r.unsigned_abs();
        let (more_in, suspect) = match r.cmp(&0) {
            Ordering::Equal => return,
            Ordering::Greater => ("kernel", kernel_more),
            Ordering::Less => ("app", app_more),
        };
        let text = match skew {
            Some(s) if s.explains(n) => format!(
                "{} more in the {more_in}: counted between the two readings ({:.0} ms apart at {}/s)",
                count(n),
                s.apart_s * 1e3,
                whole(s.per_s)
            ),
            _ => format!("{} more in the {more_in}, unexplained: {suspect}", count(n)),
        };
        self.parts.push(text);
    }

    fn finish(self, what: &str, side: &str, kernel: Option<i64>, app: Option<i64>) -> KernelVsApp {
        let mut sentences = Vec::new();
        match (kernel, app) {
            (Some(k), Some(a)) => {
                let d = i128::from(k) - i128::from(a);
                let head = match d.cmp(&0) {
                    Ordering::Greater => {
                        Some(format!("kernel counts {} more than the app", int(d)))
                    }
                    Ordering::Less => Some(format!("app counts {} more than the kernel", int(-d))),
                    Ordering::Equal => (!self.parts.is_empty()).then(|| "equal on balance".into()),
                };
                if let Some(head) = head {
                    if self.parts.is_empty() {
                        sentences.push(head);
                    } else {
                        sentences.push(format!("{head}: {}", self.parts.join("; ")));
                    }
                }
            }
            (None, Some(_)) => sentences.push("kernel: n/a (observer not running)".into()),
            (Some(_), None) => sentences.push(format!("app: n/a (no c1m {side} stats)")),
            (None, None) => {}
        }
        sentences.extend(self.notes);
        KernelVsApp {
            what: what.to_owned(),
            kernel,
            app,
            agree: matches!((kernel, app), (Some(k), Some(a)) if k == a),
            explanation: (!sentences.is_empty()).then(|| join_sentences(&sentences)),
        }
    }
}

/// Joins with ". ", or a space after a sentence that already ends with '?' or '.'.
fn join_sentences(sentences: &[String]) -> String {
    let mut out = String::new();
    for s in sentences {
        if !out.is_empty() {
            out.push_str(if out.ends_with(['?', '.']) { " " } else { ". " });
        }
        out.push_str(s);
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
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
            "kernel counts 49 more than the app: 49 connected in the kernel, WebSocket handshake not finished"
        );
        let connecting = get(&rows, CLIENT_CONNECTING);
        assert_eq!((connecting.kernel, connecting.app), (Some(37), Some(86)));
        assert_eq!(
            why(connecting),
            "app counts 49 more than the kernel: 49 connected in the kernel, WebSocket handshake not \
             finished. 37 SYN_SENT: handshakes in flight"
        );
        let c = client("hold", 1000, 86);
        let rows = kernel_vs_app(Some(&k), Some(&s), Some(&c));
        assert_eq!(
            why(get(&rows, CLIENT_OPEN)),
            "kernel counts 49 more than the app: 49 connected in the kernel, not yet seen by the app"
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
}
