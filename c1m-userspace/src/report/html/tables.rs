//! The report's cards and tables: key figures, phases, kernel vs app, latency, per
//! connection, workload counters, kernel, audit, config and machine.

use maud::{Markup, html};
use serde_json::Value;

use crate::{
    figures::phase_latency,
    model::RunRecord,
    observer::audit::Verdict,
    report::{
        RunHist,
        figures::{Group, hist_title, push_rule_line, setup_rate, tls_line},
        fmt::{bytes, count, int, ms, num, secs, utc},
    },
    workload::stats::{
        histograms::{Percentiles, SETUP_LATENCY_PAIRS},
        snapshot::AppSnapshot,
    },
};

/// Renders a list of figure groups as cards.
pub(crate) fn cards(groups: &[Group]) -> Markup {
    html! {
        div.cards {
            @for g in groups {
                div.card {
                    h3 { (g.title) }
                    table {
                        @for f in &g.figures {
                            tr {
                                td.t { (f.label) }
                                td.v {
                                    (f.value
                                        .map(|v| f.unit.show(v))
                                        .or_else(|| f.why_none.clone())
                                        .unwrap_or_else(|| "–".into()))
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "–".to_owned())
}

/// A two-column key/value table.
pub(super) fn kv_table(rows: &[(String, String)]) -> Markup {
    html! {
        table.wide {
            @for (k, v) in rows { tr { th.t { (k) } td.wrap { (v) } } }
        }
    }
}

/// Flattens a JSON value into `a.b.c = value` rows (for config, machine, counters).
pub(crate) fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        Value::Null => out.push((prefix.to_owned(), "–".to_owned())),
        Value::String(s) => out.push((prefix.to_owned(), s.clone())),
        Value::Number(n) => out.push((
            prefix.to_owned(),
            n.as_u64()
                .map(count)
                .or_else(|| n.as_i64().map(|v| int(i128::from(v))))
                .unwrap_or_else(|| n.to_string()),
        )),
        other => out.push((prefix.to_owned(), other.to_string())),
    }
}

pub(super) fn json_rows<T: serde::Serialize>(v: &T) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    if let Ok(v) = serde_json::to_value(v) {
        flatten("", &v, &mut rows);
    }
    rows
}

pub(super) fn phase_table(run: &RunRecord) -> Markup {
    let mut tot = [0.0f64; 7];
    let rows: Vec<(&crate::model::phase::Phase, [f64; 6])> = run
        .phases
        .iter()
        .map(|p| {
            let cpu = [
                p.server.cpu_user_s,
                p.server.cpu_sys_s,
                p.client.cpu_user_s,
                p.client.cpu_sys_s,
                p.observer.cpu_user_s,
                p.observer.cpu_sys_s,
            ];
            tot[0] += p.duration_s;
            for (t, c) in tot[1..].iter_mut().zip(cpu) {
                *t += c;
            }
            (p, cpu)
        })
        .collect();
    let notes: Vec<String> = run
        .phases
        .iter()
        .flat_map(|p| p.notes.iter().map(move |n| format!("{}: {n}", p.name)))
        .collect();
    html! {
        table.wide {
            tr {
                th.t rowspan="2" { "phase" }
                th rowspan="2" { "duration" }
                th colspan="2" { "server CPU (s)" }
                th colspan="2" { "client CPU (s)" }
                th colspan="2" { "observer CPU (s)" }
                th colspan="3" { "RSS at the end" }
                th rowspan="2" { "kernel socket" br; "memory" }
                th rowspan="2" { "box" br; "MemAvailable" }
            }
            tr {
                @for h in ["user", "sys", "user", "sys", "user", "sys", "server", "client", "observer"] {
                    th { (h) }
                }
            }
            @for (p, cpu) in &rows {
                tr {
                    td.t { (p.name) }
                    td { (secs(p.duration_s)) }
                    @for c in cpu { td { (format!("{c:.2}")) } }
                    td { (bytes(p.server.rss_bytes as f64)) }
                    td { (bytes(p.client.rss_bytes as f64)) }
                    td { (bytes(p.observer.rss_bytes as f64)) }
                    td { (opt(p.kernel_socket_bytes, |b| bytes(b as f64))) }
                    td { (bytes(p.box_mem_available_bytes as f64)) }
                }
            }
            @if run.phases.len() > 1 {
                tr.total {
                    td.t { "all phases" }
                    td { (secs(tot[0])) }
                    @for c in &tot[1..] { td { (format!("{c:.2}")) } }
                    td colspan="5" {}
                }
            }
        }
        @if let Some(line) = crate::model::phase::end_walks_line(&run.phases) {
            p.mut { (line) }
        }
        @if !notes.is_empty() {
            p.mut { (notes.join(" · ")) }
        }
    }
}

/// A merged multi-host run: one row per client host, and how far the clocks agree.
pub(super) fn hosts_table(m: &crate::multihost::model::Merged) -> Markup {
    let heads = [
        "shard",
        "asked",
        "connected",
        "failures",
        "kernel ESTABLISHED",
        "setup conn/s",
        "connect p99 µs",
        "push p99 µs",
        "pushes received",
        "clock offset µs",
        "± µs",
    ];
    html! {
        p.sub { (m.clock_note) }
        table.wide {
            tr { th.t { "host" } @for h in heads { th { (h) } } }
            @for h in &m.hosts {
                tr {
                    td.t { (h.label) }
                    td { (opt(h.shard_index, |v| int(i128::from(v)))) }
                    td { (int(i128::from(h.connections_asked))) }
                    td { (int(i128::from(h.connected))) }
                    td { (int(i128::from(h.failures))) }
                    td { (opt(h.kernel_client_established, |v| int(i128::from(v)))) }
                    td { (opt(h.setup_rate_per_s, |v| int(v.round() as i128))) }
                    td { (opt(h.connect_p99_us, |v| int(i128::from(v)))) }
                    td { (opt(h.push_message_p99_us, |v| int(i128::from(v)))) }
                    td { (int(i128::from(h.pushes_received))) }
                    td { (opt(h.clock_offset_ns, |v| format!("{:.1}", v as f64 / 1e3))) }
                    td { (opt(h.clock_bound_ns, |v| format!("{:.1}", v as f64 / 1e3))) }
                }
            }
        }
        h3 { "Kernel vs app, per client host" }
        p.sub { "Each host's own kernel: the eBPF observer in its network namespace (connections that reached ESTABLISHED since it attached), or, without privileges, the most ESTABLISHED /proc/net/tcp showed at once." }
        table.wide {
            tr {
                th.t { "host" } th.t { "kernel from" } th { "kernel" } th { "app connected" }
                th { "agree" } th { "retransmits" } th { "resets sent" } th { "kernel socket memory" }
                th.t { "why they differ" }
            }
            @for h in &m.hosts {
                tr {
                    td.t { (h.label) }
                    td.t { (h.kernel_source.map_or("–", |s| s.name())) }
                    td { (opt(h.kernel_connected, |v| int(i128::from(v)))) }
                    td { (int(i128::from(h.connected))) }
                    td { (agree_mark(h.kernel_agrees)) }
                    td { (opt(h.kernel_retransmits, |v| int(i128::from(v)))) }
                    td { (opt(h.kernel_resets_sent, |v| int(i128::from(v)))) }
                    td { (opt(h.kernel_socket_bytes, |v| bytes(v as f64))) }
                    td.wrap { (h.kernel_explanation.as_deref().unwrap_or("")) }
                }
            }
        }
        h3 { "What each client host cost" }
        p.sub { "CPU over the whole run; memory at the end of idle, every connection held (the server's instant for memory per connection)." }
        table.wide {
            tr {
                th.t { "host" } th { "CPU user s" } th { "CPU system s" } th { "RSS peak" }
                th { "user bytes / connection" } th { "kernel bytes / socket" }
            }
            @for h in &m.hosts {
                tr {
                    td.t { (h.label) }
                    td { (opt(h.cpu_user_s, |v| format!("{v:.2}"))) }
                    td { (opt(h.cpu_sys_s, |v| format!("{v:.2}"))) }
                    td { (opt(h.rss_peak_bytes, |v| bytes(v as f64))) }
                    td { (opt(h.user_bytes_per_connection, |v| int(v.round() as i128))) }
                    td { (opt(h.kernel_bytes_per_socket, |v| int(v.round() as i128))) }
                }
            }
        }
    }
}

pub(super) fn kernel_vs_app_table(run: &RunRecord) -> Markup {
    html! {
        table.wide {
            tr {
                th.t { "phase" } th.t { "what" } th { "kernel" } th { "app" }
                th { "kernel − app" } th { "agree" } th.t { "why they differ" }
            }
            @for p in &run.phases {
                @for k in &p.kernel_vs_app {
                    tr {
                        td.t { (p.name) }
                        td.t { (k.what) }
                        td { (opt(k.kernel, |v| int(i128::from(v)))) }
                        td { (opt(k.app, |v| int(i128::from(v)))) }
                        td {
                            @match (k.kernel, k.app) {
                                (Some(a), Some(b)) => (int(i128::from(a) - i128::from(b))),
                                _ => "–",
                            }
                        }
                        td { (agree_mark(k.agree)) }
                        td.wrap { (k.explanation.as_deref().unwrap_or("")) }
                    }
                }
            }
        }
    }
}

/// ✓ or ✗, coloured.
fn agree_mark(agree: bool) -> Markup {
    html! {
        @if agree { span.yes { "✓" } } @else { span.no { "✗" } }
    }
}

/// Setup latency timed from the `connect()` call and from the pace's schedule, side by
/// side, under the asked and achieved setup rates: a client that fell behind its `--rate`
/// shows it here as schedule-based latency far above call-based.
pub(super) fn setup_latency_table(run: &RunRecord, hists: &[RunHist]) -> Markup {
    let rows: Vec<(&str, &str, &str, Percentiles)> = SETUP_LATENCY_PAIRS
        .iter()
        .flat_map(|&(what, call, sched)| {
            [("from the call", call), ("from the schedule", sched)]
                .into_iter()
                .filter_map(move |(from, name)| {
                    let h = hists
                        .iter()
                        .find(|h| h.side == "client" && h.name == name)?;
                    Some((what, name, from, Percentiles::of(&h.hist)))
                })
        })
        .collect();
    html! {
        @if let Some(r) = setup_rate(run) {
            p {
                "Setup rate: asked "
                b { (opt(r.asked_per_s, |a| format!("{}/s", num(a, 0)))) }
                ", achieved "
                b { (opt(r.achieved_per_s, |a| format!("{}/s", num(a, 0)))) }
                " (" (count(r.connected)) " connected in " (secs(r.duration_s)) ")."
            }
        }
        @if !rows.is_empty() {
            table.wide {
                tr {
                    th.t { "setup latency (ms)" } th.t { "timed" } th { "count" } th { "median" }
                    th { "99%" } th { "99.9%" } th { "max" }
                }
                @for (what, name, from, p) in &rows {
                    tr {
                        td.t { (what) " " span.mut { "(" (name) ")" } }
                        td.t { (from) }
                        td { (count(p.count)) }
                        td { (ms(p.p50 as f64)) }
                        td { (ms(p.p99 as f64)) }
                        td { (ms(p.p999 as f64)) }
                        td { (ms(p.max as f64)) }
                    }
                }
            }
            p.mut {
                "From the call: the " code { "connect()" } " call (or the ClientHello, or the handshake request) to success; with TLS the WebSocket handshake starts as the TLS one ends, so the rows add up. From the schedule: the instant "
                code { "--rate" }
                " scheduled that connection to the same success, so the wait for an in-flight slot counts (coordinated omission corrected, as wrk2 does). Unpaced runs have no schedule."
            }
        }
    }
}

/// A TLS run's handshakes: the run's TLS in a line, then the failed handshakes by reason
/// for each side (nothing for a plain run).
pub(super) fn tls_table(run: &RunRecord) -> Markup {
    let Some(line) = tls_line(run) else {
        return html! {};
    };
    let none = crate::workload::stats::counters::TlsErrors::default();
    let of = |s: &Option<AppSnapshot>| s.as_ref().map_or(none, |a| a.counters.tls_errors);
    let (client, server) = (of(&run.client), of(&run.server));
    let rows: Vec<(&str, u64, u64)> = client
        .iter()
        .zip(server.iter())
        .filter(|((_, c), (_, s))| c + s > 0)
        .map(|((why, c), (_, s))| (why, c, s))
        .collect();
    html! {
        p { (line) "." }
        @if rows.is_empty() {
            p.mut { "No TLS handshake failed." }
        } @else {
            table {
                tr { th.t { "TLS failures by reason" } th { "client" } th { "server" } }
                @for (why, c, s) in &rows {
                    tr {
                        td.t { (why.replace('_', " ")) }
                        td { (count(*c)) }
                        td { (count(*s)) }
                    }
                }
            }
        }
    }
}

/// Each audited figure: c1m's, the kernel's MIB counter, and why they differ.
pub(super) fn audit_table(run: &RunRecord) -> Markup {
    let Some(a) = &run.audit else {
        return html! { p { "No audit: the kernel observer did not run." } };
    };
    if let Some(why) = &a.unavailable {
        return html! { p { "No audit: " (why) } };
    }
    html! {
        table.wide {
            tr {
                th.t { "kernel counter (Δ since attach)" } th.t { "c1m's figure" } th { "c1m" }
                th { "kernel" } th { "agree" } th.t { "why they differ" }
            }
            @for r in &a.rows {
                tr {
                    td.t { (r.figure.mib_name()) }
                    td.t { (r.figure.c1m_definition()) }
                    td { (int(i128::from(r.c1m))) }
                    td { (int(i128::from(r.kernel))) }
                    td {
                        @match r.verdict {
                            Verdict::Agrees => span.yes { "✓" },
                            Verdict::Explained => { span.no { "✗" } " explained" },
                            Verdict::Unexplained => span.no { "✗ unexplained" },
                        }
                    }
                    td.wrap { (r.explanation) }
                }
            }
        }
    }
}

/// The seeds' latency table, one row per histogram, in ms.
pub(crate) fn latency_table(rows: &[(String, Percentiles)]) -> Markup {
    let heads = [
        "count", "min", "max", "mean", "stddev", "median", "75%", "95%", "98%", "99%", "99.9%",
    ];
    html! {
        table.wide {
            tr { th.t { "histogram (ms)" } @for h in heads { th { (h) } } }
            @for (name, p) in rows {
                tr {
                    td.t { (name) }
                    td { (count(p.count)) }
                    @for v in [
                        p.min as f64,
                        p.max as f64,
                        p.mean,
                        p.stddev,
                        p.p50 as f64,
                        p.p75 as f64,
                        p.p95 as f64,
                        p.p98 as f64,
                        p.p99 as f64,
                        p.p999 as f64,
                    ] {
                        td { (ms(v)) }
                    }
                }
            }
        }
    }
}

/// Latency per phase, under the run's: a row per phase for each histogram whose values
/// fell in more than one phase (`figures::phase_latency::split`); nothing when every
/// histogram was recorded within one phase, whose figures the run's table already are.
pub(super) fn phase_latency_table(run: &RunRecord) -> Markup {
    let split = phase_latency::split(&run.phases);
    let heads = ["count", "median", "90%", "99%", "99.9%", "max"];
    html! {
        @if !split.is_empty() {
            h3 { "Per phase" }
            table.wide {
                tr { th.t { "histogram, phase (ms)" } @for h in heads { th { (h) } } }
                @for s in &split {
                    tr { td.t colspan=(heads.len() + 1) { b { (hist_title(run, s.side.name(), s.histogram)) } } }
                    @for (i, l) in &s.phases {
                        tr {
                            td.t { (run.phases.get(*i).map_or("?", |p| p.name.as_str())) }
                            td { (count(l.count)) }
                            @for v in [l.p50, l.p90, l.p99, l.p999, l.max] { td { (ms(v as f64)) } }
                        }
                    }
                }
            }
        }
    }
}

pub(super) fn per_connection_table(run: &RunRecord) -> Markup {
    let pc = &run.per_connection;
    let total = match (pc.server_user_bytes, pc.client_user_bytes, pc.kernel_bytes) {
        (Some(s), Some(c), Some(k)) => Some(s + c + k),
        _ => None,
    };
    let cols = [
        ("server, user space", pc.server_user_bytes),
        ("client, user space", pc.client_user_bytes),
        ("kernel, both sockets", pc.kernel_bytes),
        ("kernel, per socket", pc.kernel_bytes_per_socket),
        ("server + client + kernel", total),
    ];
    html! {
        table.wide {
            tr { th { "connections open" } @for (h, _) in cols { th { (h) } } }
            tr {
                td { (count(pc.connections)) }
                @for (_, v) in cols {
                    td {
                        b { (opt(v, bytes)) } " "
                        span.mut { (opt(v, |v| format!("({} B)", num(v, 0)))) }
                    }
                }
            }
        }
    }
}

pub(super) fn setup_and_pushes(run: &RunRecord) -> Markup {
    let Some(c) = &run.client else {
        return html! {};
    };
    html! {
        @if !c.setup_steps.is_empty() {
            div {
                h3 { "Setup steps (client)" }
                table.wide {
                    tr { th { "connections" } th { "at" } th { "step took" } th { "rate in the step" } }
                    @for s in &c.setup_steps {
                        tr {
                            td { (count(s.connections)) }
                            td { (secs(s.at_s)) }
                            td { (secs(s.step_s)) }
                            td { (num(s.rate_per_s, 0)) "/s" }
                        }
                    }
                }
            }
        }
        @if !c.pushes.is_empty() {
            div {
                h3 { "Pushes (client: frames received)" }
                @if let Some(rule) = push_rule_line(run) {
                    p.sub { (rule) }
                }
                table.wide {
                    tr {
                        th { "push" } th.t { "started" } th { "received" } th { "first after" }
                        th { "all received after" }
                    }
                    @for p in &c.pushes {
                        tr {
                            td { (p.push_id) }
                            td.t { (utc(p.started_unix_ns / 1_000_000)) }
                            td { (count(p.count)) }
                            td { (secs(p.first_unix_ns.saturating_sub(p.started_unix_ns) as f64 / 1e9)) }
                            td { (secs(p.complete_s)) }
                        }
                    }
                }
            }
        }
    }
}

/// Non-zero counters of both sides, side by side.
pub(super) fn counters_table(run: &RunRecord) -> Markup {
    let rows = |s: &Option<AppSnapshot>| -> Vec<(String, String)> {
        let mut rows = Vec::new();
        if let Some(s) = s
            && let Ok(v) = serde_json::to_value(s.counters)
        {
            flatten("", &v, &mut rows);
        }
        rows
    };
    let (srv, cli) = (rows(&run.server), rows(&run.client));
    let mut lines: Vec<(String, String, String)> = Vec::new();
    for (k, _) in srv.iter().chain(&cli) {
        if lines.iter().any(|(seen, _, _)| seen == k) {
            continue;
        }
        let get = |rows: &[(String, String)]| {
            rows.iter()
                .find(|(r, _)| r == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| "–".into())
        };
        lines.push((k.clone(), get(&srv), get(&cli)));
    }
    lines.retain(|(_, a, b)| [a, b].iter().any(|v| *v != "0" && *v != "–"));
    let mut side_rows = Vec::new();
    for s in [&run.server, &run.client].into_iter().flatten() {
        side_rows.push((
            format!("{} workers", s.side),
            format!(
                "{} ({} alive) — {}",
                s.workers.count, s.workers.alive, s.split
            ),
        ));
        for w in s.workers.list.iter().filter(|w| w.exit.is_some()) {
            side_rows.push((
                format!("{} worker {} (pid {})", s.side, w.shard, w.pid),
                w.exit.clone().unwrap_or_default(),
            ));
        }
    }
    html! {
        table.wide {
            tr { th.t { "counter (non-zero)" } th { "server" } th { "client" } }
            @for (k, a, b) in &lines {
                tr { td.t { (k) } td { (a) } td { (b) } }
            }
        }
        @if !side_rows.is_empty() {
            h3 { "Workers" }
            (kv_table(&side_rows))
        }
    }
}

pub(super) fn kernel_tables(run: &RunRecord) -> Markup {
    let Some(k) = &run.kernel else {
        return html! { p.mut { "The kernel observer did not run." } };
    };
    html! {
        p.mut {
            "Last view at " (utc(k.unix_ms)) ": " (count(k.walk.walks))
            " socket walks, the last took " (num(k.walk.duration_ms, 1)) " ms over "
            (count(k.walk.sockets_walked)) " sockets; map errors: " (count(k.map_errors)) "; "
            "program runs the kernel skipped (already running on that CPU): "
            @if k.skipped_runs.is_empty() { "0" }
            @for (i, (name, n)) in k.skipped_runs.iter().enumerate() {
                @if i > 0 { ", " }
                (name) " " (count(*n))
            }
            "."
        }
        div {
            h3 { "Listeners" }
            table.wide {
                tr {
                    th { "port" } th { "sockets" } th { "queue now / limit" } th { "peak (sampled)" }
                    th { "overflows" } th { "SYN-ACK retrans." } th { "children" }
                }
                @for l in &k.listeners {
                    tr {
                        td { (l.port) }
                        td { (l.sockets) }
                        td { (count(l.queue_depth)) " / " (count(l.queue_limit)) }
                        td { (count(l.queue_peak_sampled)) }
                        td.no[l.accept_queue_overflows > 0] { (count(l.accept_queue_overflows)) }
                        td { (opt(l.synack_retransmits, count)) }
                        td { (count(l.children)) }
                    }
                }
            }
        }
        @if let Some(m) = &k.memory {
            div {
                h3 { "Kernel socket memory" }
                table.wide {
                    tr {
                        th.t { "side" } th { "sockets" } th { "full" } th { "TIME_WAIT" }
                        th { "request" } th { "slab (derived)" } th { "buffers" } th { "total" }
                        th { "per socket" }
                    }
                    @for (name, s) in [
                        ("server", &m.server),
                        ("client", &m.client),
                        ("other", &m.other),
                        ("total", &m.total),
                    ] {
                        tr.total[name == "total"] {
                            td.t { (name) }
                            td { (count(s.sockets)) }
                            td { (count(s.full_sockets)) }
                            td { (count(s.time_wait_sockets)) }
                            td { (count(s.request_sockets)) }
                            td { (bytes(s.slab_bytes_derived as f64)) }
                            td { (bytes(s.buffer_bytes as f64)) }
                            td { (bytes(s.total_bytes as f64)) }
                            td { (bytes(s.bytes_per_socket)) }
                        }
                    }
                }
                @if !m.slab_object_bytes.is_empty() {
                    h3 { "Slab caches" }
                    table {
                        tr { th.t { "cache" } th { "object size" } th { "bytes used by the run" } }
                        @for (cache, size) in &m.slab_object_bytes {
                            tr {
                                td.t { (cache) }
                                td { (bytes(*size as f64)) }
                                td { (opt(m.slab_bytes_by_cache.get(cache), |b| bytes(*b as f64))) }
                            }
                        }
                    }
                }
            }
        }
        @if !k.unavailable.is_empty() {
            p.mut { "Not available on this kernel: " (k.unavailable.join("; ")) }
        }
    }
}
