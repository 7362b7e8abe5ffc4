//! `report.html`: one self-contained page (inline CSS and SVG, no script, no network)
//! with the run's charts and tables; and the chart builders `c1m compare --html` reuses.

use std::fmt::Write as _;

use serde_json::Value;

use super::{
    ExportError, RunHist,
    figures::{Group, key_figures, setup_rate},
    fmt::{bytes, count, esc, int, ms, num, secs, utc},
    hgrm::TICKS_PER_HALF_DISTANCE,
    histograms,
    svg::{Band, Chart, Series, XAxis, YScale, YUnit},
};
use crate::{
    lab::{
        figures::Source as Figure,
        model::{Outcome, RunRecord, Sample},
    },
    observer::audit::Verdict,
    workload::stats::{AppSnapshot, Percentiles, SETUP_LATENCY_PAIRS},
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
.band{fill:#f3f4f6}.bandedge{stroke:#cbd5e1;stroke-dasharray:2 3}
svg .bandlabel{fill:#94a3b8;font-size:10px;letter-spacing:.05em;text-transform:uppercase}
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
/// One color per compared setup in `c1m compare` (repeats of a setup share its color).
pub(crate) const RUN_COLORS: [&str; 8] = [
    "#2563eb", "#ea580c", "#16a34a", "#9333ea", "#dc2626", "#0891b2", "#ca8a04", "#db2777",
];
/// Line styles that tell the lines of one run apart when color is the run's.
const COMPARE_DASH: [Option<&str>; 4] = [None, Some("6 4"), Some("2 3"), Some("9 3 2 3")];

type Get = fn(&Sample) -> Option<f64>;

enum Source {
    Value(Get),
}

/// A stale figure (older than two ticks when its row was taken) is left out, so the
/// chart shows a gap rather than an old value drawn as if it were current.
fn fresh(s: &Sample, source: Figure, v: Option<f64>) -> Option<f64> {
    v.filter(|_| s.fresh(source))
}

struct Line {
    label: &'static str,
    color: &'static str,
    dash: Option<&'static str>,
    width: f64,
    source: Source,
}

struct TimeChart {
    id: &'static str,
    title: &'static str,
    note: &'static str,
    y: YUnit,
    y_scale: YScale,
    y_label: &'static str,
    lines: Vec<Line>,
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
    source: Source,
) -> Line {
    Line {
        label,
        color,
        dash,
        width: if dash.is_some() { 1.6 } else { 2.0 },
        source,
    }
}

fn time_charts() -> Vec<TimeChart> {
    use Source::Value;
    vec![
        TimeChart {
            id: "chart-conn-server",
            title: "Server connections: kernel vs app",
            note: "app: connections the server holds; kernel: server-side sockets in ESTABLISHED (accepted or not)",
            y: YUnit::Count,
            y_scale: YScale::Robust,
            y_label: "connections",
            lines: vec![
                line(
                    "app open",
                    SERVER,
                    None,
                    Value(|s| fresh(s, Figure::Server, u(s.server_open))),
                ),
                line(
                    "kernel ESTABLISHED",
                    KERNEL_S,
                    Some("6 4"),
                    Value(|s| fresh(s, Figure::Kernel, i(s.kernel_server_established))),
                ),
            ],
        },
        TimeChart {
            id: "chart-conn-client",
            title: "Client connections: kernel vs app",
            note: "app: connections open (WebSocket: past the handshake); kernel: client-side sockets per state",
            y: YUnit::Count,
            y_scale: YScale::Robust,
            y_label: "connections",
            lines: vec![
                line(
                    "app open",
                    CLIENT,
                    None,
                    Value(|s| fresh(s, Figure::Client, u(s.client_open))),
                ),
                line(
                    "kernel ESTABLISHED",
                    KERNEL_C,
                    Some("6 4"),
                    Value(|s| fresh(s, Figure::Kernel, i(s.kernel_client_established))),
                ),
                line(
                    "kernel TIME_WAIT (all sides)",
                    OBSERVER,
                    Some("2 3"),
                    Value(|s| fresh(s, Figure::Kernel, i(s.kernel_time_wait))),
                ),
            ],
        },
        TimeChart {
            id: "chart-handshakes",
            title: "Handshakes in flight and the accept queue",
            note: "kernel: connections not yet established or not yet accepted; overflows: handshakes dropped because the accept queue was full (cumulative)",
            y: YUnit::Count,
            y_scale: YScale::Robust,
            y_label: "sockets",
            lines: vec![
                line(
                    "server accept-queue depth",
                    SERVER,
                    None,
                    Value(|s| fresh(s, Figure::Kernel, u(s.kernel_accept_queue_depth))),
                ),
                line(
                    "server SYN_RECV",
                    KERNEL_S,
                    Some("6 4"),
                    Value(|s| fresh(s, Figure::Kernel, i(s.kernel_server_syn_recv))),
                ),
                line(
                    "client SYN_SENT",
                    CLIENT,
                    None,
                    Value(|s| fresh(s, Figure::Kernel, i(s.kernel_client_syn_sent))),
                ),
                line(
                    "accept-queue overflows",
                    "#dc2626",
                    Some("2 3"),
                    Value(|s| fresh(s, Figure::Kernel, u(s.kernel_accept_queue_overflows))),
                ),
            ],
        },
        TimeChart {
            id: "chart-setup-rate",
            title: "Connection setup rate",
            note: "new connections per second over each sampling interval",
            y: YUnit::Count,
            y_scale: YScale::Robust,
            y_label: "connections / s",
            lines: vec![
                line(
                    "client app connected/s",
                    CLIENT,
                    None,
                    Value(|s| fresh(s, Figure::Client, s.client_connect_per_s)),
                ),
                line(
                    "kernel reached ESTABLISHED/s",
                    KERNEL,
                    Some("6 4"),
                    Value(|s| fresh(s, Figure::Kernel, s.kernel_established_per_s)),
                ),
            ],
        },
        TimeChart {
            id: "chart-mem-per-conn",
            title: "Memory per connection",
            note: "user space: (RSS − RSS before the first connection) / open connections; kernel: socket memory / sockets",
            y: YUnit::Bytes,
            y_scale: YScale::Log,
            y_label: "bytes per connection (kernel: per socket)",
            lines: vec![
                line(
                    "server user space",
                    SERVER,
                    None,
                    Value(|s| fresh(s, Figure::Server, s.server_rss_per_connection_bytes)),
                ),
                line(
                    "client user space",
                    CLIENT,
                    None,
                    Value(|s| fresh(s, Figure::Client, s.client_rss_per_connection_bytes)),
                ),
                line(
                    "kernel per socket",
                    KERNEL,
                    Some("6 4"),
                    Value(|s| fresh(s, Figure::KernelWalk, s.kernel_bytes_per_socket)),
                ),
            ],
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
                    Value(|s| fresh(s, Figure::Server, u(s.server_rss_bytes))),
                ),
                line(
                    "client RSS",
                    CLIENT,
                    None,
                    Value(|s| fresh(s, Figure::Client, u(s.client_rss_bytes))),
                ),
                line(
                    "kernel socket memory",
                    KERNEL,
                    Some("6 4"),
                    Value(|s| fresh(s, Figure::Kernel, u(s.kernel_socket_bytes))),
                ),
                line(
                    "observer RSS",
                    OBSERVER,
                    None,
                    Value(|s| u(s.observer_rss_bytes)),
                ),
            ],
        },
        TimeChart {
            id: "chart-cpu",
            title: "CPU",
            note: "CPU seconds (user + sys) per second of wall clock: 1.0 = one core busy",
            y: YUnit::Plain,
            y_scale: YScale::Robust,
            y_label: "cores busy",
            lines: vec![
                line(
                    "server",
                    SERVER,
                    None,
                    Value(|s| fresh(s, Figure::Server, s.server_cpu_cores)),
                ),
                line(
                    "client",
                    CLIENT,
                    None,
                    Value(|s| fresh(s, Figure::Client, s.client_cpu_cores)),
                ),
                line("observer", OBSERVER, None, Value(|s| s.observer_cpu_cores)),
            ],
        },
    ]
}

fn points(samples: &[Sample], source: &Source) -> Vec<(f64, Option<f64>)> {
    match source {
        Source::Value(get) => samples.iter().map(|s| (s.t_s, get(s))).collect(),
    }
}

/// Contiguous runs of one phase in the samples, as shaded bands.
fn phase_bands(samples: &[Sample]) -> Vec<Band> {
    let mut bands: Vec<Band> = Vec::new();
    for s in samples {
        match bands.last_mut() {
            Some(b) if b.label == s.phase => b.x1 = s.t_s,
            last => {
                if let Some(b) = last {
                    b.x1 = s.t_s;
                }
                bands.push(Band {
                    x0: s.t_s,
                    x1: s.t_s,
                    label: s.phase.clone(),
                });
            }
        }
    }
    bands
        .into_iter()
        .filter(|b| !b.label.is_empty() && b.x1 > b.x0)
        .collect()
}

/// The time charts for one run (its own colors) or several: (label, color index into
/// [`RUN_COLORS`], run); line styles tell the figures apart, labels carry the run's.
pub(crate) fn time_series_charts(runs: &[(&str, usize, &RunRecord)]) -> Vec<Chart> {
    let single = runs.len() == 1;
    time_charts()
        .into_iter()
        .map(|tc| {
            let mut series = Vec::new();
            for (name, color, run) in runs {
                for (k, l) in tc.lines.iter().enumerate() {
                    series.push(Series {
                        label: if single {
                            l.label.to_owned()
                        } else {
                            format!("{name}: {}", l.label)
                        },
                        color: if single {
                            l.color
                        } else {
                            RUN_COLORS[color % RUN_COLORS.len()]
                        },
                        dash: if single { l.dash } else { COMPARE_DASH[k % 4] },
                        width: l.width,
                        points: points(&run.samples, &l.source),
                    });
                }
            }
            Chart {
                id: tc.id.to_owned(),
                title: tc.title.to_owned(),
                note: tc.note.to_owned(),
                x: XAxis::Seconds,
                x_label: "seconds since the run started".to_owned(),
                y: tc.y,
                y_scale: tc.y_scale,
                y_label: tc.y_label.to_owned(),
                series,
                bands: if single {
                    phase_bands(&runs[0].2.samples)
                } else {
                    Vec::new()
                },
            }
        })
        .collect()
}

/// Percentile distribution points as the HdrHistogram plotter draws them:
/// (1/(1-p), value in ms), the same rows as the `.hgrm` without the last (p = 1).
fn distribution(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, Option<f64>)> {
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

/// One latency chart per (side, histogram) present in any of the runs: (label, color
/// index into [`RUN_COLORS`], histograms).
pub(crate) fn latency_charts(runs: &[(&str, usize, &[RunHist])]) -> Vec<Chart> {
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for (_, _, hs) in runs {
        for h in *hs {
            if !keys.contains(&(h.side, h.name)) {
                keys.push((h.side, h.name));
            }
        }
    }
    keys.into_iter()
        .map(|(side, name)| {
            let mut series = Vec::new();
            let mut notes = Vec::new();
            for (run_name, color, hs) in runs {
                let Some(h) = hs.iter().find(|h| h.side == side && h.name == name) else {
                    continue;
                };
                let p = Percentiles::of(&h.hist);
                let prefix = if runs.len() > 1 {
                    format!("{run_name}: ")
                } else {
                    String::new()
                };
                notes.push(format!(
                    "{prefix}{} values, median {} ms, max {} ms",
                    count(p.count),
                    ms(p.p50 as f64),
                    ms(p.max as f64)
                ));
                series.push(Series {
                    label: format!("{prefix}{side} {name}"),
                    color: if runs.len() > 1 {
                        RUN_COLORS[color % RUN_COLORS.len()]
                    } else if side == "server" {
                        SERVER
                    } else {
                        CLIENT
                    },
                    dash: None,
                    width: 2.0,
                    points: distribution(&h.hist),
                });
            }
            Chart {
                id: format!("chart-lat-{side}-{name}"),
                title: format!("Latency distribution: {side} {name}"),
                note: notes.join("; "),
                x: XAxis::Percentile,
                x_label: "percentile (log scale of 1/(1−p), as the HdrHistogram plotter)"
                    .to_owned(),
                y: YUnit::Plain,
                // The tail is the point of a latency distribution: never clipped.
                y_scale: YScale::Full,
                y_label: "latency (ms)".to_owned(),
                series,
                bands: Vec::new(),
            }
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
                f.value
                    .map(|v| f.unit.show(v))
                    .unwrap_or_else(|| "–".into())
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
        out.push_str("<div><h3>Pushes (client: frames received)</h3><table class=\"wide\"><tr><th>push</th><th class=\"t\">started</th><th>received</th><th>first after</th><th>all received after</th></tr>");
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
    for c in time_series_charts(&[("run", 0, run)]) {
        b.push_str(&c.render());
    }
    for c in latency_charts(&[("run", 0, &hists)]) {
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
        .map(|h| {
            let name = crate::workload::stats::hist_label(h.name);
            (format!("{} {name}", h.side), Percentiles::of(&h.hist))
        })
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

    #[test]
    fn phase_bands_follow_samples() {
        let run = crate::lab::export::sample_run();
        let bands = phase_bands(&run.samples);
        let names: Vec<&str> = bands.iter().map(|b| b.label.as_str()).collect();
        assert_eq!(
            names,
            ["starting", "setup", "idle", "push", "teardown", "done"]
        );
        assert_eq!((bands[1].x0, bands[1].x1), (1.0, 21.0));
    }
}
