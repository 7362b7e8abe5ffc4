//! `report.html`: one self-contained page (inline CSS and SVG, no script, no network)
//! with the run's charts and tables; and the chart builders `c1m compare --html` reuses.

use std::fmt::Write as _;

use serde_json::Value;

use super::{
    ExportError, RunHist,
    figures::{Group, key_figures, push_rule_line, setup_rate},
    fmt::{bytes, count, esc, int, ms, num, secs, utc},
    hgrm::TICKS_PER_HALF_DISTANCE,
    histograms,
    svg::{Band, Chart, Marks, Points, Series, Size, XAxis, YScale, YUnit},
};
use crate::{
    lab::model::{Outcome, RunRecord, Sample, Source as Figure},
    observer::audit::Verdict,
    workload::stats::{
        histograms::{Percentiles, SETUP_LATENCY_PAIRS},
        snapshot::AppSnapshot,
    },
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

/// Colors: server blue, client orange, kernel dark and dashed, observer gray.
const SERVER: &str = "#2563eb";
const CLIENT: &str = "#ea580c";
const KERNEL_S: &str = "#1e3a8a";
const KERNEL_C: &str = "#7c2d12";
const KERNEL: &str = "#111827";
const OBSERVER: &str = "#6b7280";

type Get = fn(&Sample) -> Option<f64>;

/// One figure of a time chart.
pub(super) struct Line {
    pub label: &'static str,
    color: &'static str,
    dash: Option<&'static str>,
    width: f64,
    get: Get,
    /// Where the figure comes from: in a row where that source was stale the value is
    /// drawn as stale. `None`: the lab's own reading, taken with the row.
    source: Option<Figure>,
}

impl Line {
    /// The figure over `samples`: (the line, with a gap at each stale or missing value;
    /// the stale values, drawn apart).
    pub(super) fn points(&self, samples: &[Sample]) -> (Points, Marks) {
        let mut line = Vec::with_capacity(samples.len());
        let mut stale = Vec::new();
        for s in samples {
            let v = (self.get)(s).filter(|v| v.is_finite());
            match v {
                Some(v) if self.source.is_some_and(|src| !s.fresh(src)) => {
                    stale.push((s.t_s, v));
                    line.push((s.t_s, None));
                }
                v => line.push((s.t_s, v)),
            }
        }
        (line, stale)
    }
}

pub(super) struct TimeChart {
    pub id: &'static str,
    pub title: &'static str,
    pub note: &'static str,
    pub y: YUnit,
    pub y_scale: YScale,
    pub y_label: &'static str,
    pub lines: Vec<Line>,
    /// What the chart's note adds for a given run (e.g. TIME_WAIT sockets an earlier run
    /// left on the same ports).
    pub run_note: Option<fn(&RunRecord) -> Option<String>>,
}

fn u(v: Option<u64>) -> Option<f64> {
    v.map(|v| v as f64)
}

fn i(v: Option<i64>) -> Option<f64> {
    v.map(|v| v as f64)
}

fn line(
    label: &'static str,
    color: &'static str,
    dash: Option<&'static str>,
    source: Option<Figure>,
    get: Get,
) -> Line {
    Line {
        label,
        color,
        dash,
        width: if dash.is_some() { 1.6 } else { 2.0 },
        get,
        source,
    }
}

/// TIME_WAIT sockets on the run's ports before its first connection: an earlier run's,
/// counted until they expire (60 s), so the chart says so.
fn leftover_time_wait(run: &RunRecord) -> Option<String> {
    let first = run.samples.first()?;
    let n = first
        .kernel_time_wait
        .filter(|&n| n > 0 && first.client_connected.unwrap_or(0) == 0)?;
    Some(format!(
        "{} TIME_WAIT sockets were on these ports before this run's first connection (an earlier run's; each expires 60 s after its close)",
        int(i128::from(n))
    ))
}

pub(super) fn time_charts() -> Vec<TimeChart> {
    let (kernel, walk, server, client) = (
        Some(Figure::Kernel),
        Some(Figure::KernelWalk),
        Some(Figure::Server),
        Some(Figure::Client),
    );
    vec![
        TimeChart {
            id: "chart-conn-server",
            title: "Server connections: kernel vs app",
            note: "app: connections the server holds; kernel: server-side sockets in ESTABLISHED (accepted or not)",
            y: YUnit::Count,
            y_scale: YScale::Robust,
            y_label: "connections",
            lines: vec![
                line("app open", SERVER, None, server, |s| u(s.server_open)),
                line("kernel ESTABLISHED", KERNEL_S, Some("6 4"), kernel, |s| {
                    i(s.kernel_server_established)
                }),
            ],
            run_note: None,
        },
        TimeChart {
            id: "chart-conn-client",
            title: "Client connections: kernel vs app",
            note: "app: connections open (WebSocket: past the handshake); kernel: client-side sockets per state; TIME_WAIT: sockets on this run's ports, server and client ends",
            y: YUnit::Count,
            y_scale: YScale::Robust,
            y_label: "connections",
            lines: vec![
                line("app open", CLIENT, None, client, |s| u(s.client_open)),
                line("kernel ESTABLISHED", KERNEL_C, Some("6 4"), kernel, |s| {
                    i(s.kernel_client_established)
                }),
                line(
                    "kernel TIME_WAIT (this run's ports, both ends)",
                    OBSERVER,
                    Some("2 3"),
                    kernel,
                    |s| i(s.kernel_time_wait),
                ),
            ],
            run_note: Some(leftover_time_wait),
        },
        TimeChart {
            id: "chart-handshakes",
            title: "Handshakes in flight and the accept queue",
            note: "kernel: connections not yet established or not yet accepted; overflows: handshakes dropped because the accept queue was full (cumulative)",
            y: YUnit::Count,
            y_scale: YScale::Robust,
            y_label: "sockets",
            lines: vec![
                line("server accept-queue depth", SERVER, None, kernel, |s| {
                    u(s.kernel_accept_queue_depth)
                }),
                line("server SYN_RECV", KERNEL_S, Some("6 4"), kernel, |s| {
                    i(s.kernel_server_syn_recv)
                }),
                line("client SYN_SENT", CLIENT, None, kernel, |s| {
                    i(s.kernel_client_syn_sent)
                }),
                line(
                    "accept-queue overflows",
                    "#dc2626",
                    Some("2 3"),
                    kernel,
                    |s| u(s.kernel_accept_queue_overflows),
                ),
            ],
            run_note: None,
        },
        TimeChart {
            id: "chart-setup-rate",
            title: "Connection setup rate",
            note: "new connections per second over each sampling interval",
            y: YUnit::Count,
            y_scale: YScale::Robust,
            y_label: "connections / s",
            lines: vec![
                line("client app connected/s", CLIENT, None, client, |s| {
                    s.client_connect_per_s
                }),
                line(
                    "kernel reached ESTABLISHED/s",
                    KERNEL,
                    Some("6 4"),
                    kernel,
                    |s| s.kernel_established_per_s,
                ),
            ],
            run_note: None,
        },
        TimeChart {
            id: "chart-mem-per-conn",
            title: "Memory per connection",
            note: "user space: (RSS − RSS before the first connection) / open connections; kernel: socket memory / sockets",
            y: YUnit::Bytes,
            y_scale: YScale::Log,
            y_label: "bytes per connection (kernel: per socket)",
            lines: vec![
                line("server user space", SERVER, None, server, |s| {
                    s.server_rss_per_connection_bytes
                }),
                line("client user space", CLIENT, None, client, |s| {
                    s.client_rss_per_connection_bytes
                }),
                line("kernel per socket", KERNEL, Some("6 4"), walk, |s| {
                    s.kernel_bytes_per_socket
                }),
            ],
            run_note: None,
        },
        TimeChart {
            id: "chart-memory",
            title: "Memory",
            note: "resident set of each process group, and kernel memory of the watched sockets",
            y: YUnit::Bytes,
            y_scale: YScale::Robust,
            y_label: "bytes",
            lines: vec![
                line(
                    "server RSS",
                    SERVER,
                    None,
                    server,
                    |s| u(s.server_rss_bytes),
                ),
                line(
                    "client RSS",
                    CLIENT,
                    None,
                    client,
                    |s| u(s.client_rss_bytes),
                ),
                line("kernel socket memory", KERNEL, Some("6 4"), kernel, |s| {
                    u(s.kernel_socket_bytes)
                }),
                line("observer RSS", OBSERVER, None, None, |s| {
                    u(s.observer_rss_bytes)
                }),
            ],
            run_note: None,
        },
        TimeChart {
            id: "chart-cpu",
            title: "CPU",
            note: "CPU seconds (user + sys) per second of wall clock: 1.0 = one core busy",
            y: YUnit::Plain,
            y_scale: YScale::Robust,
            y_label: "cores busy",
            lines: vec![
                line("server", SERVER, None, server, |s| s.server_cpu_cores),
                line("client", CLIENT, None, client, |s| s.client_cpu_cores),
                line("observer", OBSERVER, None, None, |s| s.observer_cpu_cores),
            ],
            run_note: None,
        },
    ]
}

/// Each phase of `run` from its own start to its own end, in seconds since the run
/// started (the samples' clock). Rows are a second apart, so a phase's rows say little
/// of where it began or ended: a teardown shorter than a row had none. The walk the lab
/// makes after each phase lies between two bands. A report written mid-run adds the
/// phase under way, from its first row to the last.
pub(super) fn phase_bands(run: &RunRecord) -> Vec<Band> {
    let since_start = |ms: u64| ms.saturating_sub(run.started_unix_ms) as f64 / 1e3;
    let mut bands: Vec<Band> = run
        .phases
        .iter()
        .filter(|p| {
            run.started_unix_ms > 0
                && p.started_unix_ms >= run.started_unix_ms
                && p.ended_unix_ms >= p.started_unix_ms
        })
        .map(|p| Band {
            x0: since_start(p.started_unix_ms),
            x1: since_start(p.ended_unix_ms),
            label: p.name.clone(),
        })
        .collect();
    if run.outcome == Outcome::Running {
        let after = bands.last().map_or(f64::MIN, |b| b.x1);
        if let Some(last) = run.samples.last().filter(|s| !s.phase.is_empty()) {
            let first = run
                .samples
                .iter()
                .rev()
                .take_while(|s| s.t_s > after && s.phase == last.phase)
                .last();
            if let Some(first) = first {
                bands.push(Band {
                    x0: first.t_s,
                    x1: last.t_s,
                    label: last.phase.clone(),
                });
            }
        }
    }
    bands
}

/// The time charts of one run.
pub(crate) fn time_series_charts(run: &RunRecord) -> Vec<Chart> {
    let bands = phase_bands(run);
    time_charts()
        .into_iter()
        .map(|tc| {
            let series = tc
                .lines
                .iter()
                .map(|l| {
                    let (points, stale) = l.points(&run.samples);
                    Series {
                        label: l.label.to_owned(),
                        color: l.color,
                        dash: l.dash,
                        width: l.width,
                        marker: None,
                        points,
                        stale,
                    }
                })
                .collect();
            let note = match tc.run_note.and_then(|f| f(run)) {
                Some(extra) => format!("{}. {extra}", tc.note),
                None => tc.note.to_owned(),
            };
            Chart {
                id: tc.id.to_owned(),
                title: tc.title.to_owned(),
                note,
                size: Size::Wide,
                x: XAxis::Seconds,
                x_label: "seconds since the run started".to_owned(),
                y: tc.y,
                y_scale: tc.y_scale,
                y_label: tc.y_label.to_owned(),
                series,
                bands: bands.clone(),
                lanes: Vec::new(),
            }
        })
        .collect()
}

/// Percentile distribution points as the HdrHistogram plotter draws them:
/// (1/(1-p), value in ms), the same rows as the `.hgrm` without the last (p = 1).
pub(super) fn distribution(h: &hdrhistogram::Histogram<u64>) -> Points {
    h.iter_quantiles(TICKS_PER_HALF_DISTANCE)
        .filter(|v| v.quantile_iterated_to() < 1.0)
        .map(|v| {
            (
                1.0 / (1.0 - v.quantile_iterated_to()),
                Some(v.value_iterated_to() as f64 / 1000.0),
            )
        })
        .collect()
}

/// "N values, median … ms, max … ms" of a histogram.
pub(super) fn distribution_note(h: &hdrhistogram::Histogram<u64>) -> String {
    let p = Percentiles::of(h);
    format!(
        "{} values, median {} ms, max {} ms",
        count(p.count),
        ms(p.p50 as f64),
        ms(p.max as f64)
    )
}

/// A latency distribution chart of the histogram titled `title` (side, name and, for a
/// push histogram, the rule it was measured by: [`RunHist::title`]).
pub(super) fn latency_chart(
    id: String,
    title: &str,
    note: String,
    series: Vec<Series>,
    size: Size,
) -> Chart {
    Chart {
        id,
        title: format!("Latency distribution: {title}"),
        note,
        size,
        x: XAxis::Percentile,
        x_label: "percentile (log scale of 1/(1−p), as the HdrHistogram plotter)".to_owned(),
        y: YUnit::Plain,
        // The tail is the point of a latency distribution: never clipped.
        y_scale: YScale::Full,
        y_label: "latency (ms)".to_owned(),
        series,
        bands: Vec::new(),
        lanes: Vec::new(),
    }
}

/// One latency chart per histogram of the run.
fn latency_charts(hists: &[RunHist]) -> Vec<Chart> {
    hists
        .iter()
        .map(|h| {
            let color = if h.side == "server" { SERVER } else { CLIENT };
            latency_chart(
                format!("chart-lat-{}-{}", h.side, h.name),
                &h.title,
                distribution_note(&h.hist),
                vec![Series::line(
                    format!("{} {}", h.side, h.name),
                    color,
                    distribution(&h.hist),
                )],
                Size::Wide,
            )
        })
        .collect()
}

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
fn kv_table(rows: &[(String, String)]) -> String {
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

fn json_rows<T: serde::Serialize>(v: &T) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    if let Ok(v) = serde_json::to_value(v) {
        flatten("", &v, &mut rows);
    }
    rows
}

fn phase_table(run: &RunRecord) -> String {
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
    if let Some(line) = crate::lab::model::end_walks_line(&run.phases) {
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
fn hosts_table(m: &crate::multihost::model::Merged) -> String {
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

fn kernel_vs_app_table(run: &RunRecord) -> String {
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
fn setup_latency_table(run: &RunRecord, hists: &[RunHist]) -> String {
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
fn audit_table(run: &RunRecord) -> String {
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

fn per_connection_table(run: &RunRecord) -> String {
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

fn setup_and_pushes(run: &RunRecord) -> String {
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
fn counters_table(run: &RunRecord) -> String {
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

fn kernel_tables(run: &RunRecord) -> String {
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
        let run = crate::lab::export::sample_run();
        let html = report(&run).unwrap();
        // Offline: no external resource of any kind.
        for bad in ["<script", "src=\"http", "href=\"http", "@import", "url("] {
            assert!(!html.contains(bad), "{bad}");
        }
        for id in crate::lab::export::fixture::FIXTURE_CHARTS {
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

    /// (x, width) of every phase band rect of `svg`, by phase.
    fn band_rects(svg: &str) -> Vec<(String, String, String)> {
        svg.split("<rect class=\"band")
            .skip(1)
            .map(|r| {
                let attr = |name: &str| {
                    r.split(&format!("{name}=\""))
                        .nth(1)
                        .and_then(|v| v.split('"').next())
                        .unwrap()
                        .to_owned()
                };
                (attr("data-phase"), attr("x"), attr("width"))
            })
            .collect()
    }

    /// Phases that end between two rows (rows are a second apart) are drawn from their
    /// own start to their own end, and a teardown shorter than a row has its band; the
    /// rows' phase labels (which put that teardown's drop inside the push) play no part.
    #[test]
    fn phase_bands_are_drawn_at_each_phases_own_start_and_end() {
        let mut run = crate::lab::export::sample_run();
        let at = |s: f64| run.started_unix_ms + (s * 1000.0) as u64;
        let phases = [
            ("setup", 0.62, 20.48),
            ("idle", 21.3, 51.07),
            ("push", 51.9, 61.25),
            ("teardown", 61.74, 62.31),
        ];
        let times: Vec<(u64, u64)> = phases.iter().map(|p| (at(p.1), at(p.2))).collect();
        for (p, (start, end)) in run.phases.iter_mut().zip(times) {
            (p.started_unix_ms, p.ended_unix_ms) = (start, end);
        }
        let charts = time_series_charts(&run);
        assert_eq!(charts.len(), 7);
        for c in &charts {
            let svg = c.render();
            // Rows from 0 to 72 s: ticks 0..80 s over the plot's 596 px from x = 70.
            assert!(
                svg.contains("data-x-min=\"0\" data-x-max=\"80\""),
                "{}",
                c.id
            );
            let px = |t: f64| 70.0 + (t - 0.0) / 80.0 * 596.0;
            let want: Vec<(String, String, String)> = phases
                .iter()
                .map(|&(name, a, z)| {
                    (
                        name.to_owned(),
                        format!("{:.1}", px(a)),
                        format!("{:.1}", px(z) - px(a)),
                    )
                })
                .collect();
            assert_eq!(band_rects(&svg), want, "{}", c.id);
        }
        let teardown = &band_rects(&charts[0].render())[3];
        assert_eq!((teardown.1.as_str(), teardown.2.as_str()), ("530.0", "4.2"));
    }

    /// A stale figure is drawn, as a ring apart from its line, and the legend says what a
    /// ring is; a chart without one has no such entry.
    #[test]
    fn stale_samples_are_drawn_as_stale_with_a_legend_entry() {
        let mut run = crate::lab::export::sample_run();
        for s in run
            .samples
            .iter_mut()
            .filter(|s| (30.0..34.0).contains(&s.t_s))
        {
            s.client_age_s = Some(3.0);
        }
        let charts = time_series_charts(&run);
        let svg = |id: &str| charts.iter().find(|c| c.id == id).unwrap().render();
        let client = svg("chart-conn-client");
        // Four rows, one client figure in this chart (app open): four rings.
        assert!(client.contains("data-stale-points=\"4\""), "{client}");
        assert_eq!(client.matches("<circle class=\"stale\"").count(), 4 + 1);
        assert!(client.contains(
            "stale: the figure's source was more than 1 s old at that second (not joined to the line)"
        ));
        // The app's line breaks around the rings: two pieces.
        let app = client
            .split("<path d=\"")
            .find(|p| p.contains("<title>app open</title>"))
            .unwrap();
        assert_eq!(app.split('"').next().unwrap().matches('M').count(), 2);
        let server = svg("chart-conn-server");
        assert!(server.contains("data-stale-points=\"0\""));
        assert!(!server.contains("stalekey"));
    }

    /// The TIME_WAIT line says whose sockets it counts, and sockets an earlier run left
    /// on the ports are named in the note.
    #[test]
    fn time_wait_is_labelled_by_its_scope() {
        let mut run = crate::lab::export::sample_run();
        let html = report(&run).unwrap();
        assert!(html.contains("kernel TIME_WAIT (this run&#39;s ports, both ends)"));
        assert!(!html.contains("all sides"));
        assert!(!html.contains("before this run&#39;s first connection"));
        run.samples[0].kernel_time_wait = Some(1_234);
        run.samples[0].client_connected = Some(0);
        let html = report(&run).unwrap();
        assert!(html.contains(
            "1,234 TIME_WAIT sockets were on these ports before this run&#39;s first connection"
        ));
    }

    /// A report written mid-run bands the phase under way from its first row to the last.
    #[test]
    fn the_phase_under_way_is_banded_to_the_last_row() {
        let mut run = crate::lab::export::sample_run();
        run.outcome = Outcome::Running;
        run.phases.truncate(2);
        run.samples.retain(|s| s.t_s <= 55.0);
        let bands = phase_bands(&run);
        let last = bands.last().unwrap();
        assert_eq!(
            (last.label.as_str(), last.x0, last.x1),
            ("push", 52.0, 55.0)
        );
        assert_eq!(bands.len(), 3);
    }
}
