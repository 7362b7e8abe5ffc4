//! The report's cards and tables: key figures, phases, kernel vs app, latency, per
//! connection, workload counters, kernel, audit, config and machine.

use std::fmt::Write as _;

use serde_json::Value;

use crate::{
    model::RunRecord,
    observer::audit::Verdict,
    report::{
        RunHist,
        figures::{Group, push_rule_line, setup_rate},
        fmt::{bytes, count, esc, int, ms, num, secs, utc},
    },
    workload::stats::{
        histograms::{Percentiles, SETUP_LATENCY_PAIRS},
        snapshot::AppSnapshot,
    },
};

/// Renders a list of figure groups as cards.
pub(crate) fn cards(groups: &[Group]) -> String {
    let mut out = String::from("<div class=\"cards\">");
    for g in groups {
        let _ = write!(out, "<div class=\"card\"><h3>{}</h3><table>", esc(&g.title));
        for f in &g.figures {
            let _ = write!(
                out,
                "<tr><td class=\"t\">{}</td><td class=\"v\">{}</td></tr>",
                esc(&f.label),
                esc(&f
                    .value
                    .map(|v| f.unit.show(v))
                    .or_else(|| f.why_none.clone())
                    .unwrap_or_else(|| "–".into()))
            );
        }
        out.push_str("</table></div>");
    }
    out.push_str("</div>");
    out
}

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "–".to_owned())
}

/// A two-column key/value table.
pub(super) fn kv_table(rows: &[(String, String)]) -> String {
    let mut out = String::from("<table class=\"wide\">");
    for (k, v) in rows {
        let _ = write!(
            out,
            "<tr><th class=\"t\">{}</th><td class=\"wrap\">{}</td></tr>",
            esc(k),
            esc(v)
        );
    }
    out.push_str("</table>");
    out
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

pub(super) fn phase_table(run: &RunRecord) -> String {
    let mut out = String::from(
        "<table class=\"wide\"><tr><th class=\"t\" rowspan=\"2\">phase</th><th rowspan=\"2\">duration</th>\
         <th colspan=\"2\">server CPU (s)</th><th colspan=\"2\">client CPU (s)</th><th colspan=\"2\">observer CPU (s)</th>\
         <th colspan=\"3\">RSS at the end</th><th rowspan=\"2\">kernel socket<br>memory</th><th rowspan=\"2\">box<br>MemAvailable</th></tr>\
         <tr><th>user</th><th>sys</th><th>user</th><th>sys</th><th>user</th><th>sys</th><th>server</th><th>client</th><th>observer</th></tr>",
    );
    let mut tot = [0.0f64; 7];
    for p in &run.phases {
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
        let _ = write!(
            out,
            "<tr><td class=\"t\">{}</td><td>{}</td>",
            esc(&p.name),
            secs(p.duration_s)
        );
        for c in cpu {
            let _ = write!(out, "<td>{c:.2}</td>");
        }
        let _ = write!(
            out,
            "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            bytes(p.server.rss_bytes as f64),
            bytes(p.client.rss_bytes as f64),
            bytes(p.observer.rss_bytes as f64),
            opt(p.kernel_socket_bytes, |b| bytes(b as f64)),
            bytes(p.box_mem_available_bytes as f64)
        );
    }
    if run.phases.len() > 1 {
        let _ = write!(
            out,
            "<tr class=\"total\"><td class=\"t\">all phases</td><td>{}</td>",
            secs(tot[0])
        );
        for c in &tot[1..] {
            let _ = write!(out, "<td>{c:.2}</td>");
        }
        out.push_str("<td colspan=\"5\"></td></tr>");
    }
    out.push_str("</table>");
    if let Some(line) = crate::model::end_walks_line(&run.phases) {
        let _ = write!(out, "<p class=\"mut\">{}</p>", esc(&line));
    }
    let notes: Vec<String> = run
        .phases
        .iter()
        .flat_map(|p| p.notes.iter().map(move |n| format!("{}: {n}", p.name)))
        .collect();
    if !notes.is_empty() {
        out.push_str("<p class=\"mut\">");
        out.push_str(&esc(&notes.join(" · ")));
        out.push_str("</p>");
    }
    out
}

/// A merged multi-host run: one row per client host, and how far the clocks agree.
pub(super) fn hosts_table(m: &crate::multihost::model::Merged) -> String {
    let mut out = format!(
        "<p class=\"sub\">{}</p><table class=\"wide\"><tr><th class=\"t\">host</th><th>shard</th><th>asked</th><th>connected</th><th>failures</th><th>kernel ESTABLISHED</th><th>setup conn/s</th><th>connect p99 µs</th><th>push p99 µs</th><th>pushes received</th><th>clock offset µs</th><th>± µs</th></tr>",
        esc(&m.clock_note)
    );
    for h in &m.hosts {
        let _ = write!(
            out,
            "<tr><td class=\"t\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&h.label),
            opt(h.shard_index, |v| int(i128::from(v))),
            int(i128::from(h.connections_asked)),
            int(i128::from(h.connected)),
            int(i128::from(h.failures)),
            opt(h.kernel_client_established, |v| int(i128::from(v))),
            opt(h.setup_rate_per_s, |v| int(v.round() as i128)),
            opt(h.connect_p99_us, |v| int(i128::from(v))),
            opt(h.push_message_p99_us, |v| int(i128::from(v))),
            int(i128::from(h.pushes_received)),
            opt(h.clock_offset_ns, |v| format!("{:.1}", v as f64 / 1e3)),
            opt(h.clock_bound_ns, |v| format!("{:.1}", v as f64 / 1e3)),
        );
    }
    out.push_str("</table>");
    out
}

pub(super) fn kernel_vs_app_table(run: &RunRecord) -> String {
    let mut out = String::from(
        "<table class=\"wide\"><tr><th class=\"t\">phase</th><th class=\"t\">what</th><th>kernel</th><th>app</th><th>kernel − app</th><th>agree</th><th class=\"t\">why they differ</th></tr>",
    );
    for p in &run.phases {
        for k in &p.kernel_vs_app {
            let diff = match (k.kernel, k.app) {
                (Some(a), Some(b)) => int(i128::from(a) - i128::from(b)),
                _ => "–".to_owned(),
            };
            let _ = write!(
                out,
                "<tr><td class=\"t\">{}</td><td class=\"t\">{}</td><td>{}</td><td>{}</td><td>{diff}</td><td>{}</td><td class=\"wrap\">{}</td></tr>",
                esc(&p.name),
                esc(&k.what),
                opt(k.kernel, |v| int(i128::from(v))),
                opt(k.app, |v| int(i128::from(v))),
                if k.agree {
                    "<span class=\"yes\">✓</span>"
                } else {
                    "<span class=\"no\">✗</span>"
                },
                esc(k.explanation.as_deref().unwrap_or(""))
            );
        }
    }
    out.push_str("</table>");
    out
}

/// Setup latency timed from the `connect()` call and from the pace's schedule, side by
/// side, under the asked and achieved setup rates: a client that fell behind its `--rate`
/// shows it here as schedule-based latency far above call-based.
pub(super) fn setup_latency_table(run: &RunRecord, hists: &[RunHist]) -> String {
    let mut out = String::new();
    if let Some(r) = setup_rate(run) {
        let _ = write!(
            out,
            "<p>Setup rate: asked <b>{}</b>, achieved <b>{}</b> ({} connected in {}).</p>",
            opt(r.asked_per_s, |a| format!("{}/s", num(a, 0))),
            opt(r.achieved_per_s, |a| format!("{}/s", num(a, 0))),
            count(r.connected),
            secs(r.duration_s)
        );
    }
    let mut rows = String::new();
    for (what, call, sched) in SETUP_LATENCY_PAIRS {
        for (from, name) in [("from the call", call), ("from the schedule", sched)] {
            let Some(h) = hists.iter().find(|h| h.side == "client" && h.name == name) else {
                continue;
            };
            let p = Percentiles::of(&h.hist);
            let _ = write!(
                rows,
                "<tr><td class=\"t\">{} <span class=\"mut\">({})</span></td><td class=\"t\">{from}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(what),
                esc(name),
                count(p.count),
                ms(p.p50 as f64),
                ms(p.p99 as f64),
                ms(p.p999 as f64),
                ms(p.max as f64)
            );
        }
    }
    if !rows.is_empty() {
        out.push_str("<table class=\"wide\"><tr><th class=\"t\">setup latency (ms)</th><th class=\"t\">timed</th><th>count</th><th>median</th><th>99%</th><th>99.9%</th><th>max</th></tr>");
        out.push_str(&rows);
        out.push_str("</table><p class=\"mut\">From the call: the <code>connect()</code> call (or the handshake request) to success. From the schedule: the instant <code>--rate</code> scheduled that connection to the same success, so the wait for an in-flight slot counts (coordinated omission corrected, as wrk2 does). Unpaced runs have no schedule.</p>");
    }
    out
}

/// Each audited figure: c1m's, the kernel's MIB counter, and why they differ.
pub(super) fn audit_table(run: &RunRecord) -> String {
    let Some(a) = &run.audit else {
        return "<p>No audit: the kernel observer did not run.</p>".to_owned();
    };
    if let Some(why) = &a.unavailable {
        return format!("<p>No audit: {}</p>", esc(why));
    }
    let mut out = String::from(
        "<table class=\"wide\"><tr><th class=\"t\">kernel counter (Δ since attach)</th><th class=\"t\">c1m's figure</th><th>c1m</th><th>kernel</th><th>agree</th><th class=\"t\">why they differ</th></tr>",
    );
    for r in &a.rows {
        let verdict = match r.verdict {
            Verdict::Agrees => "<span class=\"yes\">✓</span>",
            Verdict::Explained => "<span class=\"no\">✗</span> explained",
            Verdict::Unexplained => "<span class=\"no\">✗ unexplained</span>",
        };
        let _ = write!(
            out,
            "<tr><td class=\"t\">{}</td><td class=\"t\">{}</td><td>{}</td><td>{}</td><td>{verdict}</td><td class=\"wrap\">{}</td></tr>",
            esc(r.figure.mib_name()),
            esc(r.figure.c1m_definition()),
            int(i128::from(r.c1m)),
            int(i128::from(r.kernel)),
            esc(&r.explanation)
        );
    }
    out.push_str("</table>");
    out
}

/// The seeds' latency table, one row per histogram, in ms.
pub(crate) fn latency_table(rows: &[(String, Percentiles)]) -> String {
    let mut out = String::from(
        "<table class=\"wide\"><tr><th class=\"t\">histogram (ms)</th><th>count</th><th>min</th><th>max</th><th>mean</th><th>stddev</th><th>median</th><th>75%</th><th>95%</th><th>98%</th><th>99%</th><th>99.9%</th></tr>",
    );
    for (name, p) in rows {
        let _ = write!(
            out,
            "<tr><td class=\"t\">{}</td><td>{}</td>",
            esc(name),
            count(p.count)
        );
        for v in [
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
            let _ = write!(out, "<td>{}</td>", ms(v));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    out
}

pub(super) fn per_connection_table(run: &RunRecord) -> String {
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
    let mut out = String::from("<table class=\"wide\"><tr><th>connections open</th>");
    for (h, _) in cols {
        let _ = write!(out, "<th>{h}</th>");
    }
    let _ = write!(out, "</tr><tr><td>{}</td>", count(pc.connections));
    for (_, v) in cols {
        let _ = write!(
            out,
            "<td><b>{}</b> <span class=\"mut\">{}</span></td>",
            opt(v, bytes),
            opt(v, |v| format!("({} B)", num(v, 0)))
        );
    }
    out.push_str("</tr></table>");
    out
}

pub(super) fn setup_and_pushes(run: &RunRecord) -> String {
    let mut out = String::new();
    let Some(c) = &run.client else {
        return out;
    };
    if !c.setup_steps.is_empty() {
        out.push_str("<div><h3>Setup steps (client)</h3><table class=\"wide\"><tr><th>connections</th><th>at</th><th>step took</th><th>rate in the step</th></tr>");
        for s in &c.setup_steps {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}/s</td></tr>",
                count(s.connections),
                secs(s.at_s),
                secs(s.step_s),
                num(s.rate_per_s, 0)
            );
        }
        out.push_str("</table></div>");
    }
    if !c.pushes.is_empty() {
        out.push_str("<div><h3>Pushes (client: frames received)</h3>");
        if let Some(rule) = push_rule_line(run) {
            let _ = write!(out, "<p class=\"sub\">{}</p>", esc(&rule));
        }
        out.push_str("<table class=\"wide\"><tr><th>push</th><th class=\"t\">started</th><th>received</th><th>first after</th><th>all received after</th></tr>");
        for p in &c.pushes {
            let first = p.first_unix_ns.saturating_sub(p.started_unix_ns) as f64 / 1e9;
            let _ = write!(
                out,
                "<tr><td>{}</td><td class=\"t\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                p.push_id,
                utc(p.started_unix_ns / 1_000_000),
                count(p.count),
                secs(first),
                secs(p.complete_s)
            );
        }
        out.push_str("</table></div>");
    }
    out
}

/// Non-zero counters of both sides, side by side.
pub(super) fn counters_table(run: &RunRecord) -> String {
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
    let mut out = String::from(
        "<table class=\"wide\"><tr><th class=\"t\">counter (non-zero)</th><th>server</th><th>client</th></tr>",
    );
    let keys = srv.iter().chain(&cli).map(|(k, _)| k.clone());
    let mut seen = Vec::new();
    for k in keys {
        if seen.contains(&k) {
            continue;
        }
        let get = |rows: &[(String, String)]| {
            rows.iter()
                .find(|(r, _)| *r == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| "–".into())
        };
        let (a, b) = (get(&srv), get(&cli));
        seen.push(k.clone());
        if [&a, &b].iter().all(|v| *v == "0" || *v == "–") {
            continue;
        }
        let _ = write!(
            out,
            "<tr><td class=\"t\">{}</td><td>{}</td><td>{}</td></tr>",
            esc(&k),
            esc(&a),
            esc(&b)
        );
    }
    out.push_str("</table>");
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
    if !side_rows.is_empty() {
        out.push_str("<h3>Workers</h3>");
        out.push_str(&kv_table(&side_rows));
    }
    out
}

pub(super) fn kernel_tables(run: &RunRecord) -> String {
    let Some(k) = &run.kernel else {
        return "<p class=\"mut\">The kernel observer did not run.</p>".to_owned();
    };
    let mut out = format!(
        "<p class=\"mut\">Last view at {}: {} socket walks, the last took {} ms over {} sockets; map errors: {}.</p>",
        utc(k.unix_ms),
        count(k.walk.walks),
        num(k.walk.duration_ms, 1),
        count(k.walk.sockets_walked),
        count(k.map_errors)
    );
    out.push_str("<div><h3>Listeners</h3><table class=\"wide\"><tr><th>port</th><th>sockets</th><th>queue now / limit</th><th>peak (sampled)</th><th>overflows</th><th>SYN-ACK retrans.</th><th>children</th></tr>");
    for l in &k.listeners {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{} / {}</td><td>{}</td><td{}>{}</td><td>{}</td><td>{}</td></tr>",
            l.port,
            l.sockets,
            count(l.queue_depth),
            count(l.queue_limit),
            count(l.queue_peak_sampled),
            if l.accept_queue_overflows > 0 {
                " class=\"no\""
            } else {
                ""
            },
            count(l.accept_queue_overflows),
            opt(l.synack_retransmits, count),
            count(l.children)
        );
    }
    out.push_str("</table></div>");
    if let Some(m) = &k.memory {
        out.push_str("<div><h3>Kernel socket memory</h3><table class=\"wide\"><tr><th class=\"t\">side</th><th>sockets</th><th>full</th><th>TIME_WAIT</th><th>request</th><th>slab (derived)</th><th>buffers</th><th>total</th><th>per socket</th></tr>");
        for (name, s) in [
            ("server", &m.server),
            ("client", &m.client),
            ("other", &m.other),
            ("total", &m.total),
        ] {
            let _ = write!(
                out,
                "<tr{}><td class=\"t\">{name}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                if name == "total" {
                    " class=\"total\""
                } else {
                    ""
                },
                count(s.sockets),
                count(s.full_sockets),
                count(s.time_wait_sockets),
                count(s.request_sockets),
                bytes(s.slab_bytes_derived as f64),
                bytes(s.buffer_bytes as f64),
                bytes(s.total_bytes as f64),
                bytes(s.bytes_per_socket)
            );
        }
        out.push_str("</table>");
        if !m.slab_object_bytes.is_empty() {
            out.push_str("<h3>Slab caches</h3><table><tr><th class=\"t\">cache</th><th>object size</th><th>bytes used by the run</th></tr>");
            for (cache, size) in &m.slab_object_bytes {
                let _ = write!(
                    out,
                    "<tr><td class=\"t\">{}</td><td>{}</td><td>{}</td></tr>",
                    esc(cache),
                    bytes(*size as f64),
                    opt(m.slab_bytes_by_cache.get(cache), |b| bytes(*b as f64))
                );
            }
            out.push_str("</table>");
        }
        out.push_str("</div>");
    }
    if !k.unavailable.is_empty() {
        out.push_str("<p class=\"mut\">Not available on this kernel: ");
        out.push_str(&esc(&k.unavailable.join("; ")));
        out.push_str("</p>");
    }
    out
}
