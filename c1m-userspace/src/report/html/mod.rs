//! `report.html`: one self-contained page (inline CSS and SVG, no script, no network)
//! with the run's charts and tables; and the chart builders `c1m compare --html` reuses.
//! Written with maud: every string spliced in is escaped by construction (a run folder's
//! name, a server label, a warning may hold `<script>`); `PreEscaped` only for the CSS.
//!
//! This file is the page itself: its styles, its header and the order of its sections.
//! [`charts`] draws the run's time and latency charts, [`tables`] its cards and tables.

pub(super) mod charts;
pub(crate) mod tables;

use maud::{DOCTYPE, Markup, PreEscaped, html};

use self::{
    charts::{latency_charts, time_series_charts},
    tables::{
        audit_table, cards, counters_table, hosts_table, json_rows, kernel_tables,
        kernel_vs_app_table, kv_table, latency_table, per_connection_table, phase_latency_table,
        phase_table, setup_and_pushes, setup_latency_table, tls_table,
    },
};
use super::{
    ExportError, RunHist,
    figures::{PHASE_LATENCY_PREFIX, key_figures, messages_asked_line},
    fmt::{bytes, count, secs, utc},
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
.nodata,.fewpoints{color:var(--mut);font-size:12px;margin:6px 0}
.scroll{max-width:100%;overflow-x:auto}
td.best{font-weight:700}
td.wrap,li{overflow-wrap:anywhere}
ul.verdicts{margin:2px 0 8px;padding-left:18px}
"#;

fn outcome_badge(outcome: Outcome) -> Markup {
    let class = match outcome {
        Outcome::Complete => "ok",
        Outcome::Interrupted | Outcome::Degraded | Outcome::Running => "mid",
        Outcome::Failed => "bad",
    };
    html! { span class={ "badge " (class) } { (outcome) } }
}

/// Links to the run folder's other files (relative: they sit beside the report).
fn files_list(hists: &[RunHist]) -> Markup {
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
    html! {
        ul {
            @for (f, what) in &files {
                li { a href=(f) { code { (f) } } " — " (what) }
            }
        }
        p {
            "Regenerate this page (and the files derived from summary.json) with "
            code { "c1m report <this folder>" }
            "; compare runs with "
            code { "c1m compare <run>[=name] <run>[=name] …" }
            "."
        }
    }
}

/// A whole page: the document, its title and the styles around `body`.
pub(crate) fn page(title: &str, body: Markup) -> String {
    let mut out = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                // Our own constant, not input: nothing in it to escape.
                style { (PreEscaped(CSS)) }
            }
            body { main { (body) } }
        }
    }
    .into_string();
    out.push('\n');
    out
}

/// A one-line headline for a run: target, mode, server (with its versions), client,
/// host, when.
pub(crate) fn headline(run: &RunRecord) -> String {
    format!(
        "{} connections · {} · {} · {} · {} · {}",
        count(run.config.connections),
        run.config.protocol(),
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

/// The page's header: the headline, the run's machine, its command line and start state,
/// the section links and any warnings.
fn header(run: &RunRecord) -> Markup {
    let dur = run.ended_unix_ms.saturating_sub(run.started_unix_ms) as f64 / 1000.0;
    let sections = [
        ("figures", "key figures"),
        ("charts", "charts"),
        ("phases", "phases"),
        ("kva", "kernel vs app"),
        ("latency", "latency"),
        ("perconn", "per connection"),
        ("workload", "workload"),
        ("kernel", "kernel"),
        ("config", "config & machine"),
        ("files", "files"),
    ];
    html! {
        header {
            h1 { "c1m run · " (headline(run)) " " (outcome_badge(run.outcome)) }
            div.sub {
                (utc(run.started_unix_ms)) " → " (utc(run.ended_unix_ms)) " (" (secs(dur))
                ") · c1m " (run.c1m_version) " · " (run.machine.hostname) " · Linux "
                (run.machine.kernel) " · " (run.machine.cpus) " CPUs · "
                (bytes(run.machine.mem_total_bytes as f64)) " RAM"
            }
            @if !run.config.command_line.is_empty() {
                div style="margin-top:6px" { code { (run.config.command_line) } }
            }
            @if !run.config.connections_reason.is_empty() {
                div.sub { (run.config.connections_reason) }
            }
            @if let Some(asked) = messages_asked_line(run) {
                div.sub { (asked) }
            }
            @if let Some(start) = &run.start {
                div.sub { @if start.dirty() { "⚠ " } (start.describe()) }
            }
            nav {
                @for (id, name) in sections { a href={ "#" (id) } { (name) } }
            }
        }
        @if !run.warnings.is_empty() {
            div.warn {
                b { "Warnings" }
                ul { @for w in &run.warnings { li { (w) } } }
            }
        }
        @if !run.checks.is_empty() {
            @let failed = run.checks.iter().filter(|c| !c.passed).count();
            div class=(if failed > 0 { "warn" } else { "sub" }) {
                b {
                    @if failed > 0 { "Checks: " (failed) " of " (run.checks.len()) " failed (exit code 3)" }
                    @else { "Checks: all " (run.checks.len()) " passed" }
                }
                ul { @for c in &run.checks {
                    li { @if c.passed { "pass " } @else { b { "FAIL " } } (c.check) ": " (c.shown) }
                } }
            }
        }
    }
}

pub(crate) fn report(run: &RunRecord) -> Result<String, ExportError> {
    let hists = histograms(run)?;
    let mut groups = key_figures(run, false)?;
    // The phase tables have these.
    groups.retain(|g| !g.title.starts_with("CPU") && !g.title.starts_with(PHASE_LATENCY_PREFIX));
    let rows: Vec<(String, Percentiles)> = hists
        .iter()
        .map(|h| (h.title.clone(), Percentiles::of(&h.hist)))
        .collect();
    let mut machine = json_rows(&run.machine);
    for (k, v) in &mut machine {
        if k.ends_with("_bytes")
            && let Ok(n) = v.replace(',', "").parse::<f64>()
        {
            *v = format!("{} ({v} B)", bytes(n));
        }
    }
    let body = html! {
        (header(run))
        h2 #figures { "Key figures" }
        (cards(&groups))
        h2 #charts { "Over time" }
        div.charts {
            @for c in time_series_charts(run) { (c.render()) }
            @for c in latency_charts(&hists) { (c.render()) }
        }
        h2 #phases { "Phases: CPU, memory" }
        (phase_table(run))
        h2 #kva { "Kernel vs app, at the end of each phase" }
        (kernel_vs_app_table(run))
        @if let Some(m) = &run.multihost {
            h2 #hosts { "Client hosts" }
            (hosts_table(m))
        }
        h2 #latency { "Latency" }
        (setup_latency_table(run, &hists))
        (tls_table(run))
        @if rows.is_empty() {
            p.mut { "No latency was recorded in this run." }
        } @else {
            (latency_table(&rows))
        }
        (phase_latency_table(run))
        h2 #perconn { "Per connection, at the end of the idle phase" }
        (per_connection_table(run))
        h2 #workload { "Workload" }
        div.cols { (setup_and_pushes(run)) }
        h3 { "Counters" }
        (counters_table(run))
        h2 #kernel { "Kernel" }
        (kernel_tables(run))
        h2 #audit { "c1m against the kernel's own counters" }
        @if let Some(k) = &run.kernel {
            p { "Retransmits: " (k.retransmits_explained()) "." }
            @if let Some(r) = k.resets_explained() {
                p { "Resets: " (r) "." }
            }
        }
        (audit_table(run))
        h2 #config { "Config and machine" }
        div.cols {
            div { h3 { "Config" } (kv_table(&json_rows(&run.config))) }
            div { h3 { "Machine" } (kv_table(&machine)) }
        }
        h2 #files { "Files in this run folder" }
        (files_list(&hists))
        footer {
            "Generated by c1m " (env!("CARGO_PKG_VERSION")) " from summary.json. Units: bytes in IEC (1 KiB = 1024 B); latency in ms; CPU in seconds of user and system time."
        }
    };
    Ok(page(&format!("c1m run · {}", headline(run)), body))
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
        // No histogram spans phases in the fixture: no per-phase table.
        assert!(!html.contains("histogram, phase (ms)"));
        // An empty run still renders (charts say "no data").
        let empty = report(&RunRecord::default()).unwrap();
        assert!(empty.contains("No data: no run recorded a value of this figure."));
    }

    #[test]
    fn latency_per_phase_is_a_table_not_cards() {
        use crate::model::phase::{AppSide, PhaseLatency};
        let mut run = crate::report::sample_run();
        // Pongs through idle (1 ms) and push (30 ms).
        for (i, count, p50) in [(1, 200, 1_000), (2, 2_000, 30_000)] {
            run.phases[i].latency.push(PhaseLatency {
                side: AppSide::Client,
                histogram: "pong_us".into(),
                count,
                p50,
                p90: 2 * p50,
                ..PhaseLatency::default()
            });
        }
        let html = report(&run).unwrap();
        assert!(html.contains("histogram, phase (ms)"), "{html}");
        assert!(html.contains("<b>client pong</b>"), "{html}");
        assert!(
            html.contains("<td class=\"t\">push</td><td>2,000</td><td>30.000</td><td>60.000</td>"),
            "{html}"
        );
        assert!(!html.contains(PHASE_LATENCY_PREFIX));
    }
}
