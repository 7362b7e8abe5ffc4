//! `report.html`: one self-contained page (inline CSS and SVG, no script, no network)
//! with the run's charts and tables; and the chart builders `c1m compare --html` reuses.
//!
//! This file is the page itself: its styles, its header and the order of its sections.
//! [`charts`] draws the run's time and latency charts, [`tables`] its cards and tables.

pub(super) mod charts;
pub(crate) mod tables;

use std::fmt::Write as _;

use self::{
    charts::{latency_charts, time_series_charts},
    tables::{
        audit_table, cards, counters_table, hosts_table, json_rows, kernel_tables,
        kernel_vs_app_table, kv_table, latency_table, per_connection_table, phase_table,
        setup_and_pushes, setup_latency_table,
    },
};
use super::{
    ExportError, RunHist,
    figures::key_figures,
    fmt::{bytes, count, esc, secs, utc},
    histograms,
};
use crate::{
    model::{Outcome, RunRecord},
    workload::stats::histograms::Percentiles,
};

pub(crate) const CSS: &str = r#"
:root{--fg:#111827;--mut:#6b7280;--line:#e5e7eb}
*{box-sizing:border-box}
body{margin:0;font:13px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);background:#f6f7f9}
main{max-width:1400px;margin:0 auto;padding:18px 22px 40px}
h1{font-size:20px;margin:0 0 2px}
h2{font-size:15px;margin:26px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:13px;margin:14px 0 6px;color:#374151}
.sub{color:var(--mut)}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#eef1f5;padding:1px 5px;border-radius:3px}
nav{margin:10px 0 0;font-size:12px;display:flex;flex-wrap:wrap;gap:4px 12px}
nav a{color:#2563eb;text-decoration:none}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;vertical-align:middle}
.badge.ok{background:#dcfce7;color:#166534}.badge.bad{background:#fee2e2;color:#991b1b}.badge.mid{background:#fef3c7;color:#92400e}
.warn{background:#fffbeb;border:1px solid #fcd34d;border-radius:6px;padding:8px 12px;margin-top:12px}
.warn ul{margin:4px 0 0;padding-left:18px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(330px,1fr));gap:10px}
.card{background:#fff;border:1px solid var(--line);border-radius:6px;padding:8px 12px}
.card h3{margin:0 0 4px}
.card table{border:0;width:100%}.card td{border:0;padding:1px 0}.card td.t{white-space:normal;padding-right:10px}.card td.v{font-weight:600}
.charts{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:12px}
figure.chart{margin:0;background:#fff;border:1px solid var(--line);border-radius:6px;padding:8px 10px 4px}
figcaption b{display:block;font-size:14px}
figcaption span{color:var(--mut);font-size:12px}
.legend{display:flex;flex-wrap:wrap;gap:2px 14px;margin:4px 0 0;font-size:12px}
.legend span{display:inline-flex;align-items:center;gap:5px;white-space:nowrap}
figure>svg{display:block;width:100%;height:auto}
svg text{font-size:11px;fill:#374151}
svg .ytick{text-anchor:end}svg .xtick{text-anchor:middle}
svg .xlabel,svg .ylabel{text-anchor:middle;fill:#6b7280;font-size:11.5px}
svg .nodata{text-anchor:middle;fill:#9ca3af;font-size:14px}
svg .clipnote{text-anchor:end;fill:#6b7280;font-size:10.5px}
.grid{stroke:#eef0f3}.frame{fill:none;stroke:#cfd4dc}
.band{fill:#eceff3}.band.alt{fill:#f6f7f9}.bandedge{stroke:#b6c0cc;stroke-dasharray:2 3}
svg .bandlabel{fill:#94a3b8;font-size:10px;letter-spacing:.05em;text-transform:uppercase}
svg .lanelabel{text-anchor:end;font-size:9px;fill:#374151}svg .lanephase{font-size:9px;fill:#111827}
.legend .stalekey,.legend .lanekey{color:var(--mut)}
.multiples{display:grid;grid-template-columns:repeat(auto-fill,minmax(430px,1fr));gap:10px;margin-bottom:8px}
.runs{display:flex;flex-direction:column;gap:3px}.runs .swatch{vertical-align:middle;margin-right:4px}
table{border-collapse:collapse;background:#fff;border:1px solid var(--line);font-variant-numeric:tabular-nums}
.wide{width:100%}
th,td{padding:3px 9px;border-bottom:1px solid #f0f2f5;text-align:right;white-space:nowrap}
th{background:#f8fafc;font-weight:600;color:#374151}
th.t,td.t{text-align:left}
td.wrap{white-space:normal;text-align:left}
tr.total td{font-weight:600;border-top:1px solid var(--line)}
.no{color:#b91c1c;font-weight:600}.yes{color:#15803d}
.mut{color:var(--mut)}
.cols{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:12px;align-items:start}
footer{margin-top:30px;color:var(--mut);font-size:12px}
"#;

fn outcome_badge(outcome: Outcome) -> String {
    let class = match outcome {
        Outcome::Complete => "ok",
        Outcome::Interrupted | Outcome::Degraded | Outcome::Running => "mid",
        Outcome::Failed => "bad",
    };
    format!("<span class=\"badge {class}\">{outcome}</span>")
}

/// Links to the run folder's other files (relative: they sit beside the report).
fn files_list(hists: &[RunHist]) -> String {
    let mut files = vec![
        (
            super::SUMMARY.to_owned(),
            "the run record (this report's source)",
        ),
        (super::SCHEMA.to_owned(), "JSON Schema of summary.json"),
        (super::TIMESERIES.to_owned(), "one row per sample"),
    ];
    for h in hists {
        files.push((
            format!("{}-{}.hgrm", h.side, h.name),
            "percentile distribution",
        ));
        files.push((
            format!("{}-{}.hlog", h.side, h.name),
            "interval log (when recorded)",
        ));
    }
    let mut out = String::from("<ul>");
    for (f, what) in files {
        let _ = write!(
            out,
            "<li><a href=\"{}\"><code>{}</code></a> — {what}</li>",
            esc(&f),
            esc(&f)
        );
    }
    out.push_str(
        "</ul><p>Regenerate this page (and the files derived from summary.json) with <code>c1m report &lt;this folder&gt;</code>; compare runs with <code>c1m compare &lt;run&gt;[=name] &lt;run&gt;[=name] …</code>.</p>",
    );
    out
}

pub(crate) fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{}</title><style>{CSS}</style></head><body><main>{body}</main></body></html>\n",
        esc(title)
    )
}

/// A one-line headline for a run: target, mode, server (with its versions), client,
/// host, when.
pub(crate) fn headline(run: &RunRecord) -> String {
    format!(
        "{} connections · {} · {} · {} · {} · {}",
        count(run.config.connections),
        if run.config.mode.is_empty() {
            "?"
        } else {
            &run.config.mode
        },
        run.server_label(),
        run.client_label(),
        if run.machine.hostname.is_empty() {
            "?"
        } else {
            &run.machine.hostname
        },
        utc(run.started_unix_ms)
    )
}

pub(crate) fn report(run: &RunRecord) -> Result<String, ExportError> {
    let hists = histograms(run)?;
    let mut b = String::new();
    let dur = run.ended_unix_ms.saturating_sub(run.started_unix_ms) as f64 / 1000.0;
    let _ = write!(
        b,
        "<header><h1>c1m run · {} {}</h1><div class=\"sub\">{} → {} ({}) · c1m {} · {} · Linux {} · {} CPUs · {} RAM</div>",
        esc(&headline(run)),
        outcome_badge(run.outcome),
        utc(run.started_unix_ms),
        utc(run.ended_unix_ms),
        secs(dur),
        esc(&run.c1m_version),
        esc(&run.machine.hostname),
        esc(&run.machine.kernel),
        run.machine.cpus,
        bytes(run.machine.mem_total_bytes as f64),
    );
    if !run.config.command_line.is_empty() {
        let _ = write!(
            b,
            "<div style=\"margin-top:6px\"><code>{}</code></div>",
            esc(&run.config.command_line)
        );
    }
    if !run.config.connections_reason.is_empty() {
        let _ = write!(
            b,
            "<div class=\"sub\">{}</div>",
            esc(&run.config.connections_reason)
        );
    }
    if let Some(start) = &run.start {
        let _ = write!(
            b,
            "<div class=\"sub\">{}{}</div>",
            if start.dirty() { "⚠ " } else { "" },
            esc(&start.describe())
        );
    }
    b.push_str("<nav><a href=\"#figures\">key figures</a><a href=\"#charts\">charts</a><a href=\"#phases\">phases</a><a href=\"#kva\">kernel vs app</a><a href=\"#latency\">latency</a><a href=\"#perconn\">per connection</a><a href=\"#workload\">workload</a><a href=\"#kernel\">kernel</a><a href=\"#config\">config &amp; machine</a><a href=\"#files\">files</a></nav></header>");
    if !run.warnings.is_empty() {
        b.push_str("<div class=\"warn\"><b>Warnings</b><ul>");
        for w in &run.warnings {
            let _ = write!(b, "<li>{}</li>", esc(w));
        }
        b.push_str("</ul></div>");
    }
    b.push_str("<h2 id=\"figures\">Key figures</h2>");
    let mut groups = key_figures(run, false)?;
    groups.retain(|g| !g.title.starts_with("CPU")); // the phase table has it
    b.push_str(&cards(&groups));
    b.push_str("<h2 id=\"charts\">Over time</h2><div class=\"charts\">");
    for c in time_series_charts(run) {
        b.push_str(&c.render());
    }
    for c in latency_charts(&hists) {
        b.push_str(&c.render());
    }
    b.push_str("</div>");
    b.push_str("<h2 id=\"phases\">Phases: CPU, memory</h2>");
    b.push_str(&phase_table(run));
    b.push_str("<h2 id=\"kva\">Kernel vs app, at the end of each phase</h2>");
    b.push_str(&kernel_vs_app_table(run));
    if let Some(m) = &run.multihost {
        b.push_str("<h2 id=\"hosts\">Client hosts</h2>");
        b.push_str(&hosts_table(m));
    }
    b.push_str("<h2 id=\"latency\">Latency</h2>");
    let rows: Vec<(String, Percentiles)> = hists
        .iter()
        .map(|h| (h.title.clone(), Percentiles::of(&h.hist)))
        .collect();
    b.push_str(&setup_latency_table(run, &hists));
    if rows.is_empty() {
        b.push_str("<p class=\"mut\">No latency was recorded in this run.</p>");
    } else {
        b.push_str(&latency_table(&rows));
    }
    b.push_str("<h2 id=\"perconn\">Per connection, at the end of the idle phase</h2>");
    b.push_str(&per_connection_table(run));
    b.push_str("<h2 id=\"workload\">Workload</h2><div class=\"cols\">");
    b.push_str(&setup_and_pushes(run));
    b.push_str("</div><h3>Counters</h3>");
    b.push_str(&counters_table(run));
    b.push_str("<h2 id=\"kernel\">Kernel</h2>");
    b.push_str(&kernel_tables(run));
    b.push_str("<h2 id=\"audit\">c1m against the kernel's own counters</h2>");
    if let Some(k) = &run.kernel {
        let _ = write!(
            b,
            "<p>Retransmits: {}.</p>",
            esc(&k.retransmits_explained())
        );
        if let Some(r) = k.resets_explained() {
            let _ = write!(b, "<p>Resets: {}.</p>", esc(&r));
        }
    }
    b.push_str(&audit_table(run));
    b.push_str("<h2 id=\"config\">Config and machine</h2><div class=\"cols\"><div><h3>Config</h3>");
    b.push_str(&kv_table(&json_rows(&run.config)));
    b.push_str("</div><div><h3>Machine</h3>");
    let mut machine = json_rows(&run.machine);
    for (k, v) in &mut machine {
        if k.ends_with("_bytes")
            && let Ok(n) = v.replace(',', "").parse::<f64>()
        {
            *v = format!("{} ({v} B)", bytes(n));
        }
    }
    b.push_str(&kv_table(&machine));
    b.push_str("</div></div><h2 id=\"files\">Files in this run folder</h2>");
    b.push_str(&files_list(&hists));
    let _ = write!(
        b,
        "<footer>Generated by c1m {} from summary.json. Units: bytes in IEC (1 KiB = 1024 B); latency in ms; CPU in seconds of user and system time.</footer>",
        env!("CARGO_PKG_VERSION")
    );
    Ok(page(&format!("c1m run · {}", headline(run)), &b))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn report_is_offline_and_has_every_chart() {
        let run = crate::report::sample_run();
        let html = report(&run).unwrap();
        // Offline: no external resource of any kind.
        for bad in ["<script", "src=\"http", "href=\"http", "@import", "url("] {
            assert!(!html.contains(bad), "{bad}");
        }
        for id in crate::report::fixture::FIXTURE_CHARTS {
            let at = html
                .find(&format!("id=\"{id}\""))
                .unwrap_or_else(|| panic!("{id}"));
            let rest = &html[at..];
            let n: usize = rest
                .split("data-points=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .and_then(|n| n.parse().ok())
                .unwrap();
            assert!(n > 0, "{id}");
        }
        for s in [
            "412 established in the kernel, not yet accepted",
            "99.9%",
            "accept queue overflowed",
            "Setup rate: asked <b>50,000/s</b>, achieved <b>50,000/s</b>",
            "<td class=\"t\">from the schedule</td>",
            "id=\"audit\"",
            "TcpExt TCPLossProbes",
        ] {
            assert!(html.contains(s), "{s}");
        }
        // An empty run still renders (charts say "no data").
        let empty = report(&RunRecord::default()).unwrap();
        assert!(empty.contains("no data in this run"));
    }
}
