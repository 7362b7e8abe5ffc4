//! The per-host table `c1m run --hosts` prints under the merged summary: one row per
//! host (the server host, then each client host) with what it connected, its failures,
//! its kernel's count against its app's, and its kernel's retransmits and resets, each
//! read from that host's own folder (a figure a host did not record says so).

use std::fmt::Write as _;

use crate::{
    figures::kernel_vs_app::SERVER_OPEN,
    fmt::{count, signed},
    model::RunRecord,
};

/// One host's row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HostRow {
    /// The host's name: `server`, or the client host's label.
    pub label: String,
    /// Its namespace.
    pub namespace: String,
    /// Its addresses, as given to it.
    pub addrs: String,
    /// Connections its app established (the server's: accepted).
    pub connected: Option<u64>,
    /// Its failures (the server's app counts none of the clients').
    pub failures: Option<u64>,
    /// Its kernel's open connections against its app's (None: the host's folder has no
    /// kernel count).
    pub kernel_app: Option<(Option<i64>, Option<i64>)>,
    /// Segments its kernel retransmitted (None: no kernel view in its folder).
    pub retransmits: Option<u64>,
    /// Resets its kernel sent (None: likewise).
    pub resets: Option<u64>,
    /// What the host cost.
    pub cost: HostCost,
    /// Its path over the run (None: not read; the server host's).
    pub path: Option<crate::netpath::PathFigures>,
}

/// What one host's processes and sockets cost over the run (None: not recorded).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct HostCost {
    /// CPU seconds, user and system.
    pub cpu: Option<(f64, f64)>,
    /// The most resident memory at once, bytes.
    pub rss_peak: Option<u64>,
    /// User-space bytes per held connection.
    pub user_per_connection: Option<f64>,
    /// Kernel bytes per held socket.
    pub kernel_per_socket: Option<f64>,
}

impl HostRow {
    /// The server host's row, from the server's own folder (its kernel view and the
    /// `server open` row at the end of the idle phase or a phase list's first hold, when
    /// every connection is held; of setup in a run without one).
    pub(crate) fn server(run: &RunRecord, namespace: &str, addr: &str) -> HostRow {
        fn server_open(
            p: &crate::model::phase::Phase,
        ) -> Option<&crate::model::kernel_vs_app::KernelVsApp> {
            p.kernel_vs_app.iter().find(|r| r.what == SERVER_OPEN)
        }
        // The held phase (idle, or a phase list's first hold), else setup.
        let open = crate::model::phase::held_phase(&run.phases)
            .and_then(server_open)
            .or_else(|| {
                run.phases
                    .iter()
                    .filter(|p| p.name == "setup")
                    .find_map(server_open)
            });
        HostRow {
            label: "server".to_owned(),
            namespace: namespace.to_owned(),
            addrs: addr.to_owned(),
            connected: run.server.as_ref().map(|s| s.counters.accepted),
            failures: None,
            kernel_app: open.map(|r| (r.kernel, r.app)),
            retransmits: run.kernel.as_ref().map(|k| k.retransmits().total),
            resets: run.kernel.as_ref().map(|k| k.resets_sent()),
            cost: HostCost {
                cpu: run.server_cpu_s(),
                // The most at once, from its series (as a client host's is).
                rss_peak: run.samples.iter().filter_map(|s| s.server_rss_bytes).max(),
                user_per_connection: run.per_connection.server_user_bytes,
                kernel_per_socket: run.per_connection.kernel_bytes_per_socket,
            },
            path: None,
        }
    }

    /// A client host's row: the merge's breakdown of it, where its kernel against its
    /// app, retransmits and resets are computed once (the report's table reads the same).
    pub(crate) fn client(h: &super::model::HostBreakdown, namespace: &str, addrs: &str) -> HostRow {
        HostRow {
            label: h.label.clone(),
            namespace: namespace.to_owned(),
            addrs: addrs.to_owned(),
            connected: Some(h.connected),
            failures: Some(h.failures),
            kernel_app: h
                .kernel_connected
                .map(|k| (Some(k), i64::try_from(h.connected).ok())),
            retransmits: h.kernel_retransmits,
            resets: h.kernel_resets_sent,
            cost: HostCost {
                cpu: h.cpu_user_s.zip(h.cpu_sys_s),
                rss_peak: h.rss_peak_bytes,
                user_per_connection: h.user_bytes_per_connection,
                kernel_per_socket: h.kernel_bytes_per_socket,
            },
            path: h.path.clone(),
        }
    }
}

/// The table, with a note under it for what some host did not record.
pub(crate) fn text(rows: &[HostRow]) -> String {
    let na = "n/a".to_owned();
    let opt = |v: Option<u64>| v.map_or_else(|| na.clone(), count);
    let agree = |ka: &Option<(Option<i64>, Option<i64>)>| match ka {
        Some((Some(k), Some(a))) if k == a => format!("{} = {}", signed(*k), signed(*a)),
        Some((k, a)) => format!(
            "{} ≠ {}",
            k.map_or_else(|| na.clone(), signed),
            a.map_or_else(|| na.clone(), signed)
        ),
        None => na.clone(),
    };
    let cells: Vec<[String; 8]> = rows
        .iter()
        .map(|r| {
            [
                r.label.clone(),
                r.namespace.clone(),
                r.addrs.clone(),
                opt(r.connected),
                opt(r.failures),
                agree(&r.kernel_app),
                opt(r.retransmits),
                opt(r.resets),
            ]
        })
        .collect();
    let head = [
        "host",
        "namespace",
        "addresses",
        "connected",
        "failures",
        "kernel = app",
        "retransmits",
        "resets",
    ];
    let mut s = String::from("\nPer host:\n");
    s.push_str(&columns(&head, &cells, 3));
    if rows.iter().any(|r| r.retransmits.is_none()) {
        s.push_str(
            "  n/a: that host's folder holds no kernel view (it ran without the eBPF observer's privileges and counted ESTABLISHED in its own /proc/net/tcp)\n",
        );
    }
    s.push_str(&cost_text(rows));
    s.push_str(&path_text(rows));
    s
}

/// Each client host's path in words: its conntrack table (full, with the connects it
/// dropped; or not tracking) and any veth, softnet or neighbour drops.
pub(crate) fn path_text(rows: &[HostRow]) -> String {
    let mut s = String::new();
    for r in rows {
        let Some(p) = &r.path else { continue };
        if s.is_empty() {
            s.push_str("\nPath per client host:\n");
        }
        let mut parts = vec![p.conntrack_text()];
        parts.extend(p.drops_text());
        let _ = writeln!(s, "  {}: {}", r.label, parts.join(" · "));
    }
    s
}

/// `head` and `cells` as aligned columns, two spaces in, the first `names` columns left
/// (names), the rest right (numbers); trailing blanks trimmed.
fn columns<const N: usize>(head: &[&str; N], cells: &[[String; N]], names: usize) -> String {
    let mut widths = head.map(|h| h.chars().count());
    for row in cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut s = String::new();
    for row in std::iter::once(&head.map(str::to_owned)).chain(cells) {
        let mut l = String::new();
        for (i, (c, w)) in row.iter().zip(widths).enumerate() {
            let pad = " ".repeat(w - c.chars().count());
            if i < names {
                let _ = write!(l, "  {c}{pad}");
            } else {
                let _ = write!(l, "  {pad}{c}");
            }
        }
        s.push_str(l.trim_end());
        s.push('\n');
    }
    s
}

/// What each host cost: CPU over the run, peak RSS, and memory per held connection.
fn cost_text(rows: &[HostRow]) -> String {
    let na = || "n/a".to_owned();
    // Bytes a connection, whole, as the summary's "per connection" line writes them.
    let per = |b: f64| format!("{} B", count(b.round().max(0.0) as u64));
    let head = [
        "host",
        "CPU user + sys",
        "RSS peak",
        "user / conn",
        "kernel / socket",
    ];
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            let c = &r.cost;
            [
                r.label.clone(),
                c.cpu.map_or_else(na, |(u, s)| {
                    format!("{} + {}", crate::fmt::secs(u), crate::fmt::secs(s))
                }),
                c.rss_peak.map_or_else(na, |b| crate::fmt::bytes(b as f64)),
                c.user_per_connection.map_or_else(na, per),
                c.kernel_per_socket.map_or_else(na, per),
            ]
        })
        .collect();
    let mut s = String::from(
        "\nWhat each host cost (CPU over the run; memory at the end of idle, every connection held):\n",
    );
    s.push_str(&columns(&head, &cells, 1));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_per_host_with_what_each_recorded() {
        let rows = [
            HostRow {
                label: "server".into(),
                namespace: "c1mh7-srv".into(),
                addrs: "10.99.0.1".into(),
                connected: Some(4000),
                failures: None,
                kernel_app: Some((Some(4000), Some(4000))),
                retransmits: Some(0),
                resets: Some(3),
                cost: HostCost {
                    cpu: Some((1.25, 7.5)),
                    rss_peak: Some(110 << 20),
                    user_per_connection: Some(83.0),
                    kernel_per_socket: Some(3964.0),
                },
                path: None,
            },
            HostRow {
                label: "host-0".into(),
                namespace: "c1mh7-c0".into(),
                addrs: "10.99.1.1".into(),
                connected: Some(2000),
                failures: Some(0),
                kernel_app: Some((Some(1999), Some(2000))),
                retransmits: None,
                resets: None,
                cost: HostCost::default(),
                path: None,
            },
        ];
        let t = text(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[1], "Per host:");
        assert!(lines[2].starts_with("  host    namespace  "), "{t}");
        assert!(lines[3].contains("4,000 = 4,000"), "{t}");
        assert!(lines[4].contains("1,999 ≠ 2,000"), "{t}");
        assert!(lines[4].ends_with("n/a     n/a"), "{t}");
        assert!(
            lines[3].starts_with("  server  c1mh7-srv  10.99.0.1"),
            "{t}"
        );
        assert!(lines[5].starts_with("  n/a: that host's folder"), "{t}");
        assert!(lines[7].starts_with("What each host cost"), "{t}");
        assert!(lines[8].starts_with("  host     CPU user + sys"), "{t}");
        assert!(
            lines[9].ends_with("1.25 s + 7.50 s  110.0 MiB         83 B          3,964 B"),
            "{t}"
        );
        assert!(lines[10].starts_with("  host-0"), "{t}");
        assert!(
            lines[10].ends_with("n/a        n/a          n/a              n/a"),
            "{t}"
        );
    }
}
