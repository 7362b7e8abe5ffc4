//! The key figures of a run, computed once for the report's summary cards and for
//! `c1m compare`'s side-by-side table.

use super::{
    ExportError, RunHist,
    fmt::{bytes, count, ms, num, secs},
    histograms,
};
use crate::{
    figures::phase_latency,
    model::{RunRecord, Sample, phase::compared_names},
    procstat::clock_tick_s,
    workload::stats::{
        histograms::{HIST_NAMES, MESSAGE, PUSH_FANOUT, PUSH_MESSAGE, Percentiles, hist_label},
        setup_rate::{PEAK_WINDOW_MS, PeakRate, SetupRate},
    },
};

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Unit {
    Count,
    PerSecond,
    Bytes,
    /// Stored in µs, shown in ms.
    Micros,
    Seconds,
    /// CPU seconds counted in /proc's clock ticks (10 ms at CLK_TCK 100): shown no finer
    /// than a tick, so 0 and one tick read "0 ms" and "10 ms", not "0.00 ms" beside
    /// "10 ms".
    CpuSeconds,
    /// A plain quantity with two decimals (segments per ping).
    Ratio,
}

impl Unit {
    /// The unit's name in compare.csv and compare.json.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Unit::Count => "count",
            Unit::PerSecond => "per_s",
            Unit::Bytes => "bytes",
            Unit::Micros => "us",
            Unit::Seconds | Unit::CpuSeconds => "s",
            Unit::Ratio => "ratio",
        }
    }

    pub(crate) fn show(self, v: f64) -> String {
        match self {
            Unit::Count => count(v.max(0.0).round() as u64),
            Unit::Ratio => num(v, 2),
            Unit::PerSecond => format!("{}/s", num(v, if v.abs() < 100.0 { 1 } else { 0 })),
            Unit::Bytes => bytes(v),
            Unit::Micros => format!("{} ms", ms(v)),
            Unit::Seconds => secs(v),
            Unit::CpuSeconds => cpu(v, clock_tick_s()),
        }
    }
}

/// CPU seconds at the resolution of a `tick` (s): whole ms below a second (a mean over
/// repeats may fall between ticks), hundredths of a second above, never finer than the
/// tick.
fn cpu(v: f64, tick: f64) -> String {
    if !v.is_finite() {
        return "–".to_owned();
    }
    if v.abs() < 1.0 {
        let ms_digits = if tick < 0.001 { 1 } else { 0 };
        format!("{} ms", num(v * 1000.0, ms_digits))
    } else {
        secs(v)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Figure {
    pub label: String,
    pub value: Option<f64>,
    pub unit: Unit,
    /// Why there is no value, in a few words, where one is known (views show it in
    /// place of the value: never a misleading number, never a bare dash).
    pub why_none: Option<String>,
    /// A latency percentile's quantile (0.5 for the median): `c1m compare` redraws it
    /// from the histogram's connections for its intervals.
    pub quantile: Option<f64>,
    /// The smallest difference the measurement can tell, where it is coarse.
    pub resolution: Option<f64>,
}

/// CPU times come from /proc in clock ticks; a phase's CPU figure adds two differences
/// of tick counts (user, sys), so it can be 2 ticks off.
fn cpu_resolution_s() -> f64 {
    2.0 * clock_tick_s()
}

/// The server's CPU time over every phase of the run.
pub(crate) const SERVER_CPU_ALL_PHASES: &str = "all phases: server";

/// The group of a run's start state: the box's, shown as context, not the server's.
pub(crate) const START_GROUP: &str = "Start (before any process of the run)";

#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub title: String,
    pub figures: Vec<Figure>,
    /// A latency group's histogram: its index in the histograms the figures came from.
    pub hist: Option<usize>,
}

fn fig(label: impl Into<String>, value: Option<f64>, unit: Unit) -> Figure {
    Figure {
        label: label.into(),
        value: value.filter(|v| v.is_finite()),
        unit,
        why_none: None,
        quantile: None,
        resolution: None,
    }
}

/// The title of a run's histogram: side and name, and for a push histogram the instant
/// it was measured from (the run's [`PushRule`](crate::workload::push_rule::PushRule)).
/// Runs measured by different rules get different titles, so `c1m compare` puts them in
/// different rows instead of mixing them.
pub(crate) fn hist_title(run: &RunRecord, side: &str, name: &str) -> String {
    let message = name == HIST_NAMES[PUSH_MESSAGE];
    let fanout = name == HIST_NAMES[PUSH_FANOUT];
    let tail = match run.config.push {
        Some(r) if message => r.message_title(),
        Some(r) if fanout => r.fanout_title().to_owned(),
        None if message || fanout => ", rule not recorded".to_owned(),
        _ if name == HIST_NAMES[MESSAGE] => {
            ", from its scheduled send (coordinated omission corrected)".to_owned()
        }
        _ => String::new(),
    };
    format!("{side} {}{tail}", hist_label(name))
}

/// The run's push rule in one line (the summary's and the report's push section), or
/// None for a run that measured no push.
pub(crate) fn push_rule_line(run: &RunRecord) -> Option<String> {
    let pushed = run
        .client
        .as_ref()
        .is_some_and(|c| !c.pushes.is_empty() || c.counters.pushes_received > 0);
    if !pushed {
        return None;
    }
    Some(match run.config.push {
        Some(r) => r.line(),
        None => "push latency: the rule it was measured by was not recorded (a run from before c1m recorded it): not comparable with runs that record theirs".to_owned(),
    })
}

/// The run's TLS in one line (the summary's and the report's), or None for a plain run:
/// the certificate's key, resumption, the client's handshakes by kind and the failures
/// of each side by reason in words.
pub(crate) fn tls_line(run: &RunRecord) -> Option<String> {
    let t = run.config.tls?;
    let mut s = format!(
        "TLS: {} certificate, resumption {}",
        t.key.map_or("a", |k| k.name()),
        if t.resumption { "on" } else { "off" }
    );
    if let Some(c) = &run.client {
        let h = &c.counters.tls_handshakes;
        s.push_str(&format!(
            "; client handshakes {} full, {} resumed",
            count(h.full),
            count(h.resumed)
        ));
    }
    for (side, snap) in [("client", &run.client), ("server", &run.server)] {
        let reasons: Vec<_> = snap
            .iter()
            .flat_map(|a| a.counters.tls_errors.iter())
            .filter(|(_, n)| *n > 0)
            .collect();
        if !reasons.is_empty() {
            s.push_str(&format!(
                "; {side} failed: {}",
                crate::figures::tls_reasons_in_words(&reasons)
            ));
        }
    }
    Some(s)
}

/// What the run asked of messages, in one line (the summary's and the report's
/// headers), or None when it asked for none: "messages asked: the client 10/s per
/// connection (1,000/s in all) of 64 B; the server 20/s per connection of 100 B" (the
/// server's rate is per connection by definition: it does not know how many come).
pub(crate) fn messages_asked_line(run: &RunRecord) -> Option<String> {
    let c = &run.config;
    let mut parts = Vec::new();
    if c.message_rate_per_s > 0.0 {
        parts.push(format!(
            "the client {} per connection ({} in all) of {} B",
            crate::fmt::per_s(c.message_rate_per_s),
            crate::fmt::per_s(c.message_rate_per_s * c.connections as f64),
            count(c.message_size)
        ));
    }
    if c.server_message_rate_per_s > 0.0 {
        parts.push(format!(
            "the server {} per connection of {} B",
            crate::fmt::per_s(c.server_message_rate_per_s),
            count(c.server_message_size)
        ));
    }
    (!parts.is_empty()).then(|| format!("messages asked: {}", parts.join("; ")))
}

type Get = fn(&Sample) -> Option<f64>;

/// Largest value of a sample field over the run.
pub(crate) fn peak(samples: &[Sample], f: impl Fn(&Sample) -> Option<f64>) -> Option<f64> {
    samples
        .iter()
        .filter_map(f)
        .filter(|v| v.is_finite())
        .reduce(f64::max)
}

/// The client's asked vs achieved setup rate, as the client computed it (see
/// [`SetupRate`]): views read it, none recomputes it.
pub(crate) fn setup_rate(run: &RunRecord) -> Option<SetupRate> {
    run.client.as_ref()?.setup_rate
}

/// The run's key figures, grouped. `full_latency`: every percentile of the seeds' table
/// (for `c1m compare`), else count, median, 99%, 99.9% and max.
pub(crate) fn key_figures(run: &RunRecord, full_latency: bool) -> Result<Vec<Group>, ExportError> {
    Ok(key_figures_of(run, &histograms(run)?, full_latency))
}

/// [`key_figures`] from the run's histograms, decoded once by the caller.
pub(crate) fn key_figures_of(run: &RunRecord, hists: &[RunHist], full_latency: bool) -> Vec<Group> {
    let s = &run.samples;
    let mut groups = Vec::new();
    let overflows = run
        .kernel
        .as_ref()
        .map(|k| crate::figures::counts::accept_queue_overflows(k).value as f64)
        .or_else(|| peak(s, |x| x.kernel_accept_queue_overflows.map(|v| v as f64)));
    let failures = run
        .client
        .as_ref()
        .map(|c| c.counters.failures.total() as f64)
        .or_else(|| peak(s, |x| x.client_failures.map(|v| v as f64)));
    let peaks: [(&str, Get); 4] = [
        ("peak open, server app", |x| x.server_open.map(|v| v as f64)),
        ("peak ESTABLISHED, server kernel", |x| {
            x.kernel_server_established.map(|v| v as f64)
        }),
        ("peak open, client app", |x| x.client_open.map(|v| v as f64)),
        ("peak ESTABLISHED, client kernel", |x| {
            x.kernel_client_established.map(|v| v as f64)
        }),
    ];
    let mut figures = vec![fig(
        "target",
        Some(run.config.connections as f64),
        Unit::Count,
    )];
    figures.extend(peaks.map(|(label, get)| fig(label, peak(s, get), Unit::Count)));
    figures.push(fig("client failures", failures, Unit::Count));
    figures.push(fig("accept-queue overflows", overflows, Unit::Count));
    groups.push(Group {
        title: "Connections".into(),
        figures,
        hist: None,
    });
    let setup = run.phases.iter().find(|p| p.name == "setup");
    groups.push(Group {
        title: "Setup".into(),
        figures: vec![
            fig("setup phase", setup.map(|p| p.duration_s), Unit::Seconds),
            fig(
                "asked rate (--rate)",
                setup_rate(run).and_then(|r| r.asked_per_s),
                Unit::PerSecond,
            ),
            fig(
                "achieved rate (connected / ramp)",
                setup_rate(run).and_then(|r| r.achieved_per_s),
                Unit::PerSecond,
            ),
            peak_setup_rate(run),
        ],
        hist: None,
    });
    if run.config.tls.is_some() {
        // The handshakes' latency is the client tls_handshake card; here how they went.
        let c = run.client.as_ref().map(|c| &c.counters);
        let server = run.server.as_ref().map(|s| &s.counters);
        groups.push(Group {
            title: "TLS handshakes".into(),
            figures: vec![
                fig(
                    "full, client",
                    c.map(|c| c.tls_handshakes.full as f64),
                    Unit::Count,
                ),
                fig(
                    "resumed, client",
                    c.map(|c| c.tls_handshakes.resumed as f64),
                    Unit::Count,
                ),
                fig(
                    "failed, client",
                    c.map(|c| c.tls_errors.total() as f64),
                    Unit::Count,
                ),
                fig(
                    "failed, server",
                    server.map(|c| c.tls_errors.total() as f64),
                    Unit::Count,
                ),
            ],
            hist: None,
        });
    }
    // The pong latency is its own card (the pong histogram); here what the pings came to
    // and what keepalive cost, per side that pinged.
    for h in crate::figures::heartbeat::of(run) {
        let c = h.counts;
        groups.push(Group {
            title: format!("Heartbeats, {} pings", h.side),
            figures: vec![
                fig("pings", Some(c.pings as f64), Unit::Count),
                fig("pongs", Some(c.pongs as f64), Unit::Count),
                fig("late pongs", Some(c.late_pongs as f64), Unit::Count),
                fig("missed (closed)", Some(c.missed as f64), Unit::Count),
                fig(
                    "idle CPU per 1M pings, both sides",
                    h.idle_cpu_s_per_million,
                    Unit::CpuSeconds,
                ),
                fig(
                    "idle TCP segments per ping, both sides",
                    h.idle_segments_per_ping,
                    Unit::Ratio,
                ),
            ],
            hist: None,
        });
    }
    let pc = &run.per_connection;
    groups.push(Group {
        title: format!("Memory per connection ({} open)", count(pc.connections)),
        figures: vec![
            fig("server, user space", pc.server_user_bytes, Unit::Bytes),
            fig("client, user space", pc.client_user_bytes, Unit::Bytes),
            fig("kernel, both sockets", pc.kernel_bytes, Unit::Bytes),
            fig(
                "kernel, per socket",
                pc.kernel_bytes_per_socket,
                Unit::Bytes,
            ),
            fig(
                "peak kernel socket memory",
                peak(s, |x| x.kernel_socket_bytes.map(|v| v as f64)),
                Unit::Bytes,
            ),
            fig(
                "lowest box MemAvailable",
                s.iter()
                    .map(|x| x.box_mem_available_bytes as f64)
                    .filter(|v| *v > 0.0)
                    .reduce(f64::min),
                Unit::Bytes,
            ),
        ],
        hist: None,
    });
    groups.extend(latency_groups(hists, full_latency));
    // Per phase, each figure is labelled by the phase's kind (`compared_names`), so
    // `c1m compare` lines up a fixed run's idle with a phase list's hold.
    let phase_names = compared_names(&run.phases);
    groups.extend(phase_latency_groups(run, &phase_names));
    let mut cpu = Vec::new();
    for (p, name) in run.phases.iter().zip(&phase_names) {
        for (who, u) in [
            ("server", &p.server),
            ("client", &p.client),
            ("observer", &p.observer),
        ] {
            cpu.push(Figure {
                resolution: Some(cpu_resolution_s()),
                ..fig(
                    format!("{name}: {who}"),
                    Some(u.cpu_user_s + u.cpu_sys_s),
                    Unit::CpuSeconds,
                )
            });
        }
    }
    if !cpu.is_empty() {
        // The server's whole run, what a comparison of servers chooses by: each phase's
        // tick rounding adds up, so its resolution is the phases'.
        let phases = run.phases.len() as f64;
        cpu.push(Figure {
            resolution: Some(phases * cpu_resolution_s()),
            ..fig(
                SERVER_CPU_ALL_PHASES,
                Some(run.server_cpu_s().map_or(0.0, |(u, s)| u + s)),
                Unit::CpuSeconds,
            )
        });
        groups.push(Group {
            title: format!(
                "CPU time per phase (user + sys, counted in {} ticks)",
                secs(clock_tick_s())
            ),
            figures: cpu,
            hist: None,
        });
    }
    if let Some(start) = &run.start {
        groups.push(Group {
            title: START_GROUP.into(),
            figures: vec![
                fig(
                    "sockets an earlier run left on its ports",
                    Some(start.leftovers() as f64),
                    Unit::Count,
                ),
                fig(
                    "TCP sockets in its network namespace",
                    Some(start.in_namespace() as f64),
                    Unit::Count,
                ),
                fig(
                    "conntrack entries",
                    start.conntrack_entries.map(|n| n as f64),
                    Unit::Count,
                ),
                fig(
                    "box MemAvailable",
                    Some(start.mem_available_bytes as f64),
                    Unit::Bytes,
                ),
            ],
            hist: None,
        });
    }
    groups
}

/// The busiest stretch of the ramp (see [`PeakRate`]), or why there is none.
fn peak_setup_rate(run: &RunRecord) -> Figure {
    let peak = setup_rate(run).map(|r| r.peak);
    Figure {
        why_none: peak.and_then(PeakRate::why_none),
        ..fig(
            format!("peak rate (busiest ≥ {} s)", PEAK_WINDOW_MS as f64 / 1000.0),
            peak.and_then(PeakRate::per_s),
            Unit::PerSecond,
        )
    }
}

/// The title of a per-phase latency group starts so: the report's cards leave these
/// out (its per-phase table has them).
pub(crate) const PHASE_LATENCY_PREFIX: &str = "Latency per phase: ";

/// A group per histogram the views show per phase ([`phase_latency::split`]): each
/// phase's count, median, 90%, 99%, 99.9% and max, labelled by the phase's name in
/// `phase_names`. No quantile to redraw from: a phase keeps its figures, not its
/// histogram.
fn phase_latency_groups(run: &RunRecord, phase_names: &[String]) -> Vec<Group> {
    phase_latency::split(&run.phases)
        .into_iter()
        .map(|s| {
            let mut figures = Vec::new();
            for (i, l) in &s.phases {
                let name = phase_names.get(*i).map_or("?", String::as_str);
                figures.push(fig(
                    format!("{name}: count"),
                    Some(l.count as f64),
                    Unit::Count,
                ));
                for (label, v) in [
                    ("median", l.p50),
                    ("90%", l.p90),
                    ("99%", l.p99),
                    ("99.9%", l.p999),
                    ("max", l.max),
                ] {
                    figures.push(fig(
                        format!("{name}: {label}"),
                        Some(v as f64),
                        Unit::Micros,
                    ));
                }
            }
            Group {
                title: format!(
                    "{PHASE_LATENCY_PREFIX}{}",
                    hist_title(run, s.side.name(), s.histogram)
                ),
                figures,
                hist: None,
            }
        })
        .collect()
}

fn latency_groups(hists: &[RunHist], full: bool) -> Vec<Group> {
    hists
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let p = Percentiles::of(&h.hist);
            let us = |label: &str, v: f64| fig(label, Some(v), Unit::Micros);
            // The quantile each percentile of [`Percentiles::of`] is taken at.
            let pct = |label: &str, q: f64, v: u64| Figure {
                quantile: Some(q),
                ..us(label, v as f64)
            };
            let mut figures = vec![fig("count", Some(p.count as f64), Unit::Count)];
            if full {
                figures.extend([
                    us("min", p.min as f64),
                    us("mean", p.mean),
                    us("stddev", p.stddev),
                    pct("median", 0.5, p.p50),
                    pct("75%", 0.75, p.p75),
                    pct("95%", 0.95, p.p95),
                    pct("98%", 0.98, p.p98),
                ]);
            } else {
                figures.push(pct("median", 0.5, p.p50));
            }
            figures.extend([
                pct("99%", 0.99, p.p99),
                pct("99.9%", 0.999, p.p999),
                us("max", p.max as f64),
            ]);
            Group {
                title: format!("Latency: {}", h.title),
                figures,
                hist: Some(i),
            }
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn figures_of_the_fixture() {
        let run = crate::report::sample_run();
        let g = key_figures(&run, false).unwrap();
        let get = |t: &str, l: &str| {
            g.iter()
                .find(|g| g.title.starts_with(t))
                .and_then(|g| g.figures.iter().find(|f| f.label == l))
                .and_then(|f| f.value)
        };
        assert_eq!(get("Connections", "peak open, client app"), Some(1e6));
        assert_eq!(get("Connections", "accept-queue overflows"), Some(37.0));
        assert_eq!(get("Setup", "asked rate (--rate)"), Some(50_000.0));
        assert_eq!(
            get("Setup", "achieved rate (connected / ramp)"),
            Some(50_000.0)
        );
        assert!(get("Latency: client connect", "99%").unwrap() > 0.0);
        assert_eq!(
            get("Setup", "peak rate (busiest ≥ 1 s)"),
            Some(51_230.0),
            "from the client's timeline, not the per-second samples"
        );
        assert!(
            get(
                "Latency: client push_message, from the broadcast start",
                "99%"
            )
            .is_some()
        );
        assert!(
            get(
                "Latency: client push_fanout, from the trigger, on the client's clock",
                "99%"
            )
            .is_some()
        );
        assert_eq!(
            get("Start", "sockets an earlier run left on its ports"),
            Some(0.0)
        );
        // At CLK_TCK 100: no hundredths of a ms beside whole ticks.
        assert_eq!(cpu(0.0, 0.01), "0 ms");
        assert_eq!(cpu(0.01 - 1e-12, 0.01), "10 ms");
        assert_eq!(cpu(0.0133, 0.01), "13 ms");
        assert_eq!(cpu(1.414, 0.01), "1.41 s");
        assert_eq!(Unit::PerSecond.show(50_123.4), "50,123/s");
        assert_eq!(Unit::Micros.show(1234.0), "1.234 ms");
    }

    #[test]
    fn the_messages_asked_are_said_for_each_direction() {
        let mut run = crate::report::sample_run();
        run.config.connections = 100;
        assert_eq!(messages_asked_line(&run), None);
        run.config.server_message_rate_per_s = 20.0;
        run.config.server_message_size = 100;
        assert_eq!(
            messages_asked_line(&run).unwrap(),
            "messages asked: the server 20/s per connection of 100 B"
        );
        run.config.message_rate_per_s = 0.5;
        run.config.message_size = 64;
        assert_eq!(
            messages_asked_line(&run).unwrap(),
            "messages asked: the client 0.5/s per connection (50/s in all) of 64 B; the \
             server 20/s per connection of 100 B"
        );
    }

    #[test]
    fn a_peak_that_cannot_be_measured_says_why_and_has_no_value() {
        let mut run = crate::report::sample_run();
        let peak = |run: &RunRecord| {
            key_figures(run, false)
                .unwrap()
                .into_iter()
                .flat_map(|g| g.figures)
                .find(|f| f.label == "peak rate (busiest ≥ 1 s)")
                .map(|f| (f.value, f.why_none))
                .unwrap()
        };
        let rate = run.client.as_mut().unwrap().setup_rate.as_mut().unwrap();
        rate.peak = PeakRate::RampShorter { ramp_s: 0.34 };
        assert_eq!(
            peak(&run),
            (None, Some("ramp 0.34 s, shorter than 1 s".to_owned()))
        );
        run.client
            .as_mut()
            .unwrap()
            .setup_rate
            .as_mut()
            .unwrap()
            .peak = PeakRate::NotRecorded;
        assert_eq!(
            peak(&run),
            (None, Some("not recorded by this run's c1m".to_owned()))
        );
    }

    #[test]
    fn push_histograms_are_titled_by_the_instant_they_were_measured_from() {
        use crate::workload::push_rule::{FanoutFrom, FrameStamps, PushInstant, PushRule};
        let mut run = crate::report::sample_run();
        let title = |run: &RunRecord, name: &str| hist_title(run, "client", name);
        assert_eq!(title(&run, "connect_us"), "client connect");
        run.config.push = Some(PushRule {
            latency_from: PushInstant::Write,
            stamps: FrameStamps::Broadcast,
            fanout_from: FanoutFrom::Trigger,
        });
        assert_eq!(
            title(&run, "push_message_us"),
            "client push_message, from the broadcast start, cannot follow write"
        );
        run.config.push = None;
        assert_eq!(
            title(&run, "push_fanout_us"),
            "client push_fanout, rule not recorded"
        );
        assert!(push_rule_line(&run).unwrap().contains("not recorded"));
    }
}
