//! The report's charts: the figures over time (one line per figure, stale readings drawn
//! apart, phases as bands) and the latency distributions; `compare.html` reuses them.

use crate::{
    model::{Outcome, RunRecord, Sample, Source as Figure},
    report::{
        RunHist,
        fmt::{count, int, ms},
        hgrm::TICKS_PER_HALF_DISTANCE,
        svg::{Band, Chart, Marks, Points, Series, Size, XAxis, YScale, YUnit},
    },
    workload::stats::histograms::Percentiles,
};

/// Colors: server blue, client orange, kernel dark and dashed, observer gray.
const SERVER: &str = "#2563eb";
const CLIENT: &str = "#ea580c";
const KERNEL_S: &str = "#1e3a8a";
const KERNEL_C: &str = "#7c2d12";
const KERNEL: &str = "#111827";
const OBSERVER: &str = "#6b7280";

type Get = fn(&Sample) -> Option<f64>;

/// One figure of a time chart.
pub(crate) struct Line {
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
    pub(crate) fn points(&self, samples: &[Sample]) -> (Points, Marks) {
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

pub(crate) struct TimeChart {
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

pub(crate) fn time_charts() -> Vec<TimeChart> {
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
pub(crate) fn phase_bands(run: &RunRecord) -> Vec<Band> {
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
                y_include: Vec::new(),
            }
        })
        .collect()
}

/// Percentile distribution points as the HdrHistogram plotter draws them:
/// (1/(1-p), value in ms), the same rows as the `.hgrm` without the last (p = 1).
pub(crate) fn distribution(h: &hdrhistogram::Histogram<u64>) -> Points {
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
pub(crate) fn distribution_note(h: &hdrhistogram::Histogram<u64>) -> String {
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
pub(crate) fn latency_chart(
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
        y_include: Vec::new(),
    }
}

/// One latency chart per histogram of the run.
pub(super) fn latency_charts(hists: &[RunHist]) -> Vec<Chart> {
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::report::html::report;

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
        let mut run = crate::report::sample_run();
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
            let svg = c.render().into_string();
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
        let teardown = &band_rects(&charts[0].render().into_string())[3];
        assert_eq!((teardown.1.as_str(), teardown.2.as_str()), ("530.0", "4.2"));
    }

    /// A stale figure is drawn, as a ring apart from its line, and the legend says what a
    /// ring is; a chart without one has no such entry.
    #[test]
    fn stale_samples_are_drawn_as_stale_with_a_legend_entry() {
        let mut run = crate::report::sample_run();
        for s in run
            .samples
            .iter_mut()
            .filter(|s| (30.0..34.0).contains(&s.t_s))
        {
            s.client_age_s = Some(3.0);
        }
        let charts = time_series_charts(&run);
        let svg = |id: &str| {
            charts
                .iter()
                .find(|c| c.id == id)
                .unwrap()
                .render()
                .into_string()
        };
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
        let mut run = crate::report::sample_run();
        let html = report(&run).unwrap();
        assert!(html.contains("kernel TIME_WAIT (this run's ports, both ends)"));
        assert!(!html.contains("all sides"));
        assert!(!html.contains("before this run's first connection"));
        run.samples[0].kernel_time_wait = Some(1_234);
        run.samples[0].client_connected = Some(0);
        let html = report(&run).unwrap();
        assert!(html.contains(
            "1,234 TIME_WAIT sockets were on these ports before this run's first connection"
        ));
    }

    /// A report written mid-run bands the phase under way from its first row to the last.
    #[test]
    fn the_phase_under_way_is_banded_to_the_last_row() {
        let mut run = crate::report::sample_run();
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
