//! The kernel-vs-app quantities that are needed one at a time, each computed here once
//! and carrying the instant it describes: a phase decision (set up? settled?), a stalled
//! setup's evidence, the run's memory per connection, Prometheus's series and the
//! `c1m observe` line read these functions, and [`Figures`](super::Figures) is built
//! from the same ones, so no caller derives one of its own from raw kernel or app fields.

use std::collections::BTreeMap;

use c1m_common::tcp_state;

use crate::{
    model::{PerConnection, kernel_vs_app::KernelVsApp},
    observer::{KernelView, SideMemory, SideView},
    workload::stats::snapshot::AppSnapshot,
};

/// A figure and the instant it describes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct At<T> {
    pub value: T,
    /// ms since the Unix epoch (0: the source did not say).
    pub at_unix_ms: u64,
}

impl<T> At<T> {
    fn kernel(k: &KernelView, value: T) -> At<T> {
        At {
            value,
            at_unix_ms: k.unix_ms,
        }
    }

    fn app(a: &AppSnapshot, value: T) -> At<T> {
        At {
            value,
            at_unix_ms: a.counts_at_ns() / 1_000_000,
        }
    }
}

/// A side of the connections, as the kernel view splits sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Server,
    Client,
}

impl Side {
    pub(super) fn of(self, k: &KernelView) -> &SideView {
        match self {
            Side::Server => &k.server,
            Side::Client => &k.client,
        }
    }
}

/// Sockets of the side in ESTABLISHED now.
pub(crate) fn kernel_established(k: &KernelView, side: Side) -> At<i64> {
    At::kernel(k, side.of(k).state(tcp_state::ESTABLISHED))
}

/// Connections of the side that reached ESTABLISHED since the observer attached.
pub(crate) fn kernel_established_total(k: &KernelView, side: Side) -> At<u64> {
    At::kernel(k, side.of(k).established_total)
}

/// Connections that reached ESTABLISHED per second over the observer's last interval,
/// counted once per connection as [`KernelView::connections_established`] counts them:
/// the client side's when c1m watches a client, else the server side's. (`c1m observe`
/// once added both sides, so a client and a server on one box showed twice the rate.)
pub(crate) fn kernel_established_per_s(k: &KernelView) -> At<f64> {
    let side = if k.client.established_total > 0 {
        &k.client
    } else {
        &k.server
    };
    At::kernel(k, side.established_per_s)
}

/// Handshakes the watched listeners dropped since the observer attached (mostly: the
/// accept queue was full).
pub(crate) fn accept_queue_overflows(k: &KernelView) -> At<u64> {
    At::kernel(k, k.queue_overflows())
}

/// Connections waiting in the watched listeners' accept queues (established, never
/// accepted); `None` when no listener is watched, so there is no queue to read.
pub(crate) fn accept_queue_waiting(k: &KernelView) -> Option<At<u64>> {
    (!k.listeners.is_empty()).then(|| At::kernel(k, k.queue_depth()))
}

/// Server-side connections the kernel holds ESTABLISHED (none below 0); without a
/// kernel view the server's own open count stands in. `None` with neither.
pub(crate) fn server_established(
    k: Option<&KernelView>,
    s: Option<&AppSnapshot>,
) -> Option<At<u64>> {
    match (k, s) {
        (Some(k), _) => {
            let e = kernel_established(k, Side::Server);
            Some(At {
                value: u64::try_from(e.value).unwrap_or(0),
                at_unix_ms: e.at_unix_ms,
            })
        }
        (None, Some(s)) => Some(At::app(s, s.counters.open)),
        (None, None) => None,
    }
}

/// Server-side ESTABLISHED in the kernel beyond the connections the client holds open
/// (no client snapshot: beyond none): connections the server never answered, whether
/// still in its accept queues or accepted and left silent.
pub(crate) fn established_unanswered(k: &KernelView, client: Option<&AppSnapshot>) -> At<i64> {
    let open = client.map_or(0, |c| gauge(c.counters.open));
    let e = kernel_established(k, Side::Server);
    At {
        value: e.value.saturating_sub(open),
        at_unix_ms: e.at_unix_ms,
    }
}

/// Server-side connections the client never saw answered, told apart by the accept
/// queues: those waiting there were never accepted, the rest were accepted and left
/// silent (a server that accepts and says nothing held 300 with its queue at 0, once
/// reported as 300 "never accepted").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Unanswered {
    pub total: u64,
    /// Waiting in the accept queues (`None`: no listener was read, so no split).
    pub never_accepted: Option<u64>,
    /// Accepted by the server, never answered (`None` likewise).
    pub accepted_silent: Option<u64>,
}

impl Unanswered {
    /// The split of `total` unanswered by `queued` in the accept queues; `None` when
    /// nothing is unanswered.
    pub(crate) fn split(total: i64, queued: Option<u64>) -> Option<Unanswered> {
        let total = u64::try_from(total).ok().filter(|&n| n > 0)?;
        let never_accepted = queued.map(|q| q.min(total));
        Some(Unanswered {
            total,
            never_accepted,
            accepted_silent: never_accepted.map(|w| total - w),
        })
    }
}

/// [`established_unanswered`] split by the accept queues ([`Unanswered`]).
pub(crate) fn unanswered(k: &KernelView, client: Option<&AppSnapshot>) -> Option<At<Unanswered>> {
    let e = established_unanswered(k, client);
    let queued = accept_queue_waiting(k).map(|q| q.value);
    Unanswered::split(e.value, queued).map(|value| At {
        value,
        at_unix_ms: e.at_unix_ms,
    })
}

/// The app's open connections on `side` equal the kernel's ESTABLISHED sockets there.
pub(crate) fn open_agrees(k: &KernelView, side: Side, app: &AppSnapshot) -> bool {
    kernel_established(k, side).value == gauge(app.counters.open)
}

/// The server's open count agrees with the kernel's server side (clients elsewhere);
/// without a kernel view nothing disagrees with it. Negative gauges count as 0.
pub(crate) fn server_open_agrees(k: Option<&KernelView>, s: &AppSnapshot) -> bool {
    server_established(k, Some(s)).is_some_and(|e| e.value == s.counters.open)
}

/// Both sides' open counts agree with the kernel's ESTABLISHED; without a kernel view,
/// with each other.
pub(crate) fn open_counts_agree(k: Option<&KernelView>, s: &AppSnapshot, c: &AppSnapshot) -> bool {
    match k {
        Some(k) => open_agrees(k, Side::Server, s) && open_agrees(k, Side::Client, c),
        None => s.counters.open == c.counters.open,
    }
}

/// Kernel bytes of the held sockets in `m` and how many they are: every byte of the
/// walk less the slab of TIME_WAIT and request sockets (e.g. of an earlier run, or a
/// teardown under way), which are not held connections and cost a tenth of one, over
/// the full sockets. `None` before a walk saw a full socket. The run's figure and the
/// live columns' per side read this, so the two are one quantity: divided by every
/// socket instead, the live figure read 1.7–2.1 KiB beside a final 4,091 B.
fn held(m: &SideMemory, slab_object_bytes: &BTreeMap<String, u64>) -> (u64, u64) {
    let cost = |cache: &str| slab_object_bytes.get(cache).copied().unwrap_or(0);
    let mini = m
        .time_wait_sockets
        .saturating_mul(cost("tw_sock_TCP"))
        .saturating_add(m.request_sockets.saturating_mul(cost("request_sock_TCP")));
    (m.total_bytes.saturating_sub(mini), m.full_sockets)
}

/// Kernel bytes per held socket of one side (server, client) or of all watched sockets
/// (`None` for the side): see [`held`]. The instant is the walk's.
pub(crate) fn kernel_bytes_per_held_socket(k: &KernelView, side: Option<Side>) -> Option<At<f64>> {
    let m = k.memory.as_ref()?;
    let mem = match side {
        Some(Side::Server) => &m.server,
        Some(Side::Client) => &m.client,
        None => &m.total,
    };
    let (bytes, sockets) = held(mem, &m.slab_object_bytes);
    (sockets > 0).then(|| At {
        value: bytes as f64 / sockets as f64,
        at_unix_ms: k.walk.ended_unix_ms,
    })
}

/// Memory per held connection: each side's user space, and the kernel's over both
/// sockets and per socket ([`held`]: TIME_WAIT and request sockets taken out). The
/// instant is the kernel walk's (else the client's, else the server's). The live view
/// shows it every tick and the run records it at the end of idle: one function.
pub(crate) fn per_connection(
    k: Option<&KernelView>,
    s: Option<&AppSnapshot>,
    c: Option<&AppSnapshot>,
) -> PerConnection {
    let connections = c
        .map(|c| c.counters.open)
        .or(s.map(|s| s.counters.open))
        .unwrap_or(0);
    let held = k
        .and_then(|k| k.memory.as_ref())
        .map(|m| held(&m.total, &m.slab_object_bytes));
    let at_unix_ms = k
        .filter(|k| k.memory.is_some())
        .map(|k| k.walk.ended_unix_ms)
        .filter(|&t| t > 0)
        .or(c.map(|c| c.counts_at_ns() / 1_000_000))
        .or(s.map(|s| s.counts_at_ns() / 1_000_000))
        .unwrap_or(0);
    PerConnection {
        connections,
        server_user_bytes: s.and_then(|s| s.rss_per_connection_bytes),
        client_user_bytes: c.and_then(|c| c.rss_per_connection_bytes),
        kernel_bytes: held
            .filter(|_| connections > 0)
            .map(|(bytes, _)| bytes as f64 / connections as f64),
        kernel_bytes_per_socket: k
            .and_then(|k| kernel_bytes_per_held_socket(k, None))
            .map(|a| a.value),
        at_unix_ms,
    }
}

/// The kernel-vs-app rows that differ, by name with `_` for spaces: `None` when no row
/// has both figures (nothing was compared), empty when all that were agree.
pub(crate) fn mismatches(rows: &[KernelVsApp]) -> Option<Vec<String>> {
    let compared: Vec<_> = rows
        .iter()
        .filter(|r| r.kernel.is_some() && r.app.is_some())
        .collect();
    (!compared.is_empty()).then(|| {
        compared
            .iter()
            .filter(|r| !r.agree)
            .map(|r| r.what.replace(' ', "_"))
            .collect()
    })
}

/// Saturating conversion of an app counter to the kernel's signed gauge type.
pub(super) fn gauge(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use c1m_common::tcp_state::ESTABLISHED;

    use super::*;
    use crate::observer::view::state_key;

    fn snap(open: u64) -> AppSnapshot {
        let mut s = AppSnapshot {
            unix_ns: 5_000_000_000,
            ..AppSnapshot::default()
        };
        s.counters.open = open;
        s
    }

    fn kernel(server: i64, client: i64) -> KernelView {
        let mut k = KernelView {
            unix_ms: 7_000,
            ..KernelView::default()
        };
        k.server.states.insert(state_key(ESTABLISHED), server);
        k.client.states.insert(state_key(ESTABLISHED), client);
        k
    }

    #[test]
    fn server_established_is_the_kernels_else_the_apps() {
        let s = snap(100);
        let e = server_established(Some(&kernel(-1, 0)), Some(&s)).unwrap();
        assert_eq!((e.value, e.at_unix_ms), (0, 7_000));
        let e = server_established(None, Some(&s)).unwrap();
        assert_eq!((e.value, e.at_unix_ms), (100, 5_000));
        assert_eq!(server_established(None, None), None);
    }

    #[test]
    fn open_counts_agree_with_the_kernel_or_each_other() {
        let (s, c) = (snap(100), snap(100));
        assert!(open_counts_agree(Some(&kernel(100, 100)), &s, &c));
        assert!(!open_counts_agree(Some(&kernel(100, 99)), &s, &c));
        assert!(open_counts_agree(None, &s, &c));
        assert!(!open_counts_agree(None, &s, &snap(99)));
        assert!(server_open_agrees(Some(&kernel(100, 0)), &s));
        assert!(!server_open_agrees(Some(&kernel(98, 0)), &s));
        assert!(server_open_agrees(None, &s));
        assert!(!open_agrees(
            &kernel(i64::MIN, 0),
            Side::Server,
            &snap(u64::MAX)
        ));
    }

    #[test]
    fn unanswered_is_server_established_beyond_the_clients_open() {
        let k = kernel(1_025, 0);
        assert_eq!(established_unanswered(&k, Some(&snap(1_000))).value, 25);
        assert_eq!(established_unanswered(&k, None).value, 1_025);
        let k = kernel(i64::MIN, 0);
        assert_eq!(
            established_unanswered(&k, Some(&snap(u64::MAX))).value,
            i64::MIN
        );
    }

    #[test]
    fn unanswered_is_split_by_the_accept_queues() {
        let split = |n, q| Unanswered::split(n, q);
        assert_eq!(split(0, Some(5)), None);
        assert_eq!(split(-3, Some(5)), None);
        let u = split(300, Some(0)).unwrap();
        assert_eq!((u.never_accepted, u.accepted_silent), (Some(0), Some(300)));
        let u = split(300, Some(100)).unwrap();
        assert_eq!(
            (u.never_accepted, u.accepted_silent),
            (Some(100), Some(200))
        );
        // A queue deeper than the difference (other clients' connections): all waiting.
        let u = split(412, Some(1024)).unwrap();
        assert_eq!((u.never_accepted, u.accepted_silent), (Some(412), Some(0)));
        let u = split(25, None).unwrap();
        assert_eq!(
            (u.total, u.never_accepted, u.accepted_silent),
            (25, None, None)
        );
        // From a kernel view without listeners: no split.
        let k = kernel(1_025, 0);
        let u = unanswered(&k, Some(&snap(1_000))).unwrap();
        assert_eq!(
            (u.value.total, u.value.never_accepted, u.at_unix_ms),
            (25, None, 7_000)
        );
    }

    #[test]
    fn the_established_rate_counts_each_connection_once() {
        let mut k = kernel(0, 0);
        k.server.established_total = 50;
        k.server.established_per_s = 10.0;
        assert_eq!(kernel_established_per_s(&k).value, 10.0);
        // A client and a server on one box: both sides see every connection.
        k.client.established_total = 50;
        k.client.established_per_s = 10.0;
        assert_eq!(kernel_established_per_s(&k).value, 10.0);
    }

    #[test]
    fn queues_without_listeners_are_not_read() {
        let k = kernel(0, 0);
        assert_eq!(accept_queue_waiting(&k), None);
        assert_eq!(accept_queue_overflows(&k).value, 0);
    }

    #[test]
    fn mismatches_name_the_rows_that_differ() {
        let row = |what: &str, kernel, app| KernelVsApp {
            what: what.to_owned(),
            kernel,
            app,
            agree: kernel.is_some() && kernel == app,
            explanation: None,
        };
        assert_eq!(mismatches(&[]), None);
        assert_eq!(mismatches(&[row("server open", Some(1), None)]), None);
        assert_eq!(
            mismatches(&[row("server open", Some(1), Some(1))]),
            Some(vec![])
        );
        assert_eq!(
            mismatches(&[
                row("server open", Some(1), Some(2)),
                row("client open", Some(1), Some(1))
            ]),
            Some(vec!["server_open".to_owned()])
        );
    }
}
