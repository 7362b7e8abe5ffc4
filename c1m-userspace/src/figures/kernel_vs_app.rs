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
//! | client open | client ESTABLISHED | client open | + TCP-connected, app handshake pending + churned, close frame sent − client CLOSE_WAIT |
//! | client connecting | client SYN_SENT | client in flight | − TCP-connected, app handshake pending |
//!
//! A figure computation, so it lives under `figures` (which stores the rows in
//! [`Figures::kernel_vs_app`](super::Figures::kernel_vs_app)), not among the views.

use std::cmp::Ordering;

use c1m_common::tcp_state;

use super::counts::{self, Side, gauge};
use crate::fmt::{count, int, whole};
use crate::{
    model::{Source, kernel_vs_app::KernelVsApp},
    observer::{KernelView, SideView},
    workload::{engine::REPORT_EVERY_NS, stats::snapshot::AppSnapshot},
};

/// Row names (`KernelVsApp::what`).
pub(crate) const SERVER_OPEN: &str = "server open";
pub(crate) const SERVER_ACCEPTED: &str = "server accepted";
pub(crate) const CLIENT_OPEN: &str = "client open";
pub(crate) const CLIENT_CONNECTING: &str = "client connecting";
pub(crate) const CLIENT_HOSTS_OPEN: &str = "client open (client hosts, summed)";
pub(crate) const CLIENT_HOST_CONNECTED: &str = "client connected (this host)";

/// The source of a row's app figure (`KernelVsApp::what`): the server's snapshot for
/// the server rows, the client's for the client rows; its kernel figure is the kernel
/// view's.
pub(crate) fn app_source(what: &str) -> Option<Source> {
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
pub(crate) fn kernel_vs_app(
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

/// A merged run's client row (`c1m merge`): the client hosts' kernels' ESTABLISHED to
/// the server and their apps' open connections, each summed over the hosts at one
/// instant. Each host's own rows, with their explanations, stay in its folder.
pub(crate) fn client_hosts_open(kernel: Option<i64>, app: Option<i64>) -> KernelVsApp {
    KernelVsApp {
        what: CLIENT_HOSTS_OPEN.to_owned(),
        kernel,
        app,
        agree: kernel.is_some() && kernel == app,
        explanation: kernel.is_none().then(|| {
            "the client hosts' kernels were not read (each host's own rows are in its folder)"
                .to_owned()
        }),
    }
}

/// The server host's client row while the clients run on other hosts (`c1m run
/// --clients external`): this host's kernel holds none of their sockets and its lab has
/// no client to ask, so both figures are missing and the row says where they are.
pub(crate) fn client_hosts_elsewhere() -> KernelVsApp {
    KernelVsApp {
        what: CLIENT_HOSTS_OPEN.to_owned(),
        kernel: None,
        app: None,
        agree: false,
        explanation: Some(
            "the clients run on other hosts: each counts its own kernel (eBPF in its network \
             namespace) against its app in its run folder; `c1m merge` puts them side by side"
                .to_owned(),
        ),
    }
}

/// One client host's row in a merged run (`c1m merge`): connections its kernel saw
/// reach ESTABLISHED on the server's ports against those its app connected, over the
/// whole run. `fallback`: the kernel figure is the most ESTABLISHED `/proc/net/tcp`
/// showed at once (no observer on that host), said in the explanation.
pub(crate) fn client_host_connected(
    kernel: Option<i64>,
    app: i64,
    fallback: Option<&str>,
) -> KernelVsApp {
    let agree = kernel == Some(app);
    let explanation = match (kernel, fallback) {
        (None, _) => Some("this host's kernel was not read".to_owned()),
        (Some(_), Some(why)) => Some(format!(
            "kernel: the most ESTABLISHED in /proc/net/tcp at once, no eBPF ({why})"
        )),
        (Some(k), None) if !agree => Some(format!(
            "{} apart: {}",
            count(k.abs_diff(app)),
            if k > app {
                "connections of another process of this host to the server's ports?"
            } else {
                "connects the observer did not see (started before it attached?)"
            }
        )),
        _ => None,
    };
    KernelVsApp {
        what: CLIENT_HOST_CONNECTED.to_owned(),
        kernel,
        app: Some(app),
        agree,
        explanation,
    }
}

#[cfg(test)]
/// The row named `what`, if present.
pub(crate) fn row<'a>(rows: &'a [KernelVsApp], what: &str) -> Option<&'a KernelVsApp> {
    rows.iter().find(|r| r.what == what)
}

fn server_open(k: Option<&KernelView>, app: Option<&AppSnapshot>) -> KernelVsApp {
    let kernel = k.map(|k| counts::kernel_established(k, Side::Server).value);
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
    let kernel = k.map(|k| gauge(counts::kernel_established_total(k, Side::Server).value));
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
    let kernel = k.map(|k| counts::kernel_established(k, Side::Client).value);
    let app_n = app.map(|a| gauge(a.counters.open));
    let mut why = Why::default();
    if let (Some(k), Some(a), Some(kn), Some(an)) = (k, app, kernel, app_n) {
        let pending = handshake_pending(&k.client, a);
        let close_wait = k.client.state(tcp_state::CLOSE_WAIT).max(0);
        // `--churn`: our close frame is out, the server's close not yet in: still
        // ESTABLISHED (or CLOSE_WAIT, counted there) in the kernel, no longer open here.
        let churning = gauge(a.counters.churn.closing);
        why.part(pending, |n| pending_text(n, CLIENT_OPEN, a));
        why.part(churning, |n| {
            format!("{n} churned, our close frame sent, waiting for the server to close")
        });
        why.part(-close_wait, |n| {
            format!("{n} closed by the server, not yet noticed by the app (CLOSE_WAIT)")
        });
        why.residual(
            kn.saturating_sub(an)
                .saturating_sub(pending)
                .saturating_sub(churning)
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
        why.part(-pending, |n| pending_text(n, CLIENT_CONNECTING, a));
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

/// The connections whose TCP handshake is done and whose app handshake is not, as a
/// part of the row `what`: in "client open" they are in the kernel's count (ESTABLISHED)
/// and not yet in the app's; in "client connecting" the other way round, the kernel's
/// figure being SYN_SENT. Said the same in both rows, "connected in the kernel" beside
/// "kernel 0" read as a contradiction.
fn pending_text(n: &str, what: &str, app: &AppSnapshot) -> String {
    let app_step = if app.mode == "ws" {
        "WebSocket handshake not finished"
    } else {
        "not yet seen by the app"
    };
    if what == CLIENT_CONNECTING {
        format!("{n} ESTABLISHED (past SYN_SENT), {app_step}")
    } else {
        format!("{n} ESTABLISHED in the kernel, {app_step}")
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
    let overflows = counts::accept_queue_overflows(k).value;
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
mod tests;
