//! The key figures of a run, computed once for the report's summary cards and for
//! `c1m compare`'s side-by-side table.

use super::{
    ExportError, RunHist,
    fmt::{bytes, count, ms, num, secs},
    histograms,
};
use crate::{
    lab::model::{RunRecord, Sample},
    workload::{
        procstat::clock_tick_s,
        stats::{Percentiles, SetupRate, hist_label},
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
}

impl Unit {
    /// The unit's name in compare.csv and compare.json.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Count => "count",
            Unit::PerSecond => "per_s",
            Unit::Bytes => "bytes",
            Unit::Micros => "us",
            Unit::Seconds | Unit::CpuSeconds => "s",
        }
    }

    pub fn show(self, v: f64) -> String {
        match self {
            Unit::Count => count(v.max(0.0).round() as u64),
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
}

#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub title: String,
    pub figures: Vec<Figure>,
}

fn fig(label: impl Into<String>, value: Option<f64>, unit: Unit) -> Figure {
    Figure {
        label: label.into(),
        value: value.filter(|v| v.is_finite()),
        unit,
    }
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
    let s = &run.samples;
    let mut groups = Vec::new();
    let overflows = run
        .kernel
        .as_ref()
        .map(|k| k.queue_overflows() as f64)
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
            fig(
                "peak rate (1 s)",
                peak(s, |x| x.client_connect_per_s),
                Unit::PerSecond,
            ),
        ],
    });
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
    });
    let hists = histograms(run)?;
    groups.extend(latency_groups(&hists, full_latency));
    let mut cpu = Vec::new();
    for p in &run.phases {
        for (who, u) in [
            ("server", &p.server),
            ("client", &p.client),
            ("observer", &p.observer),
        ] {
            cpu.push(fig(
                format!("{}: {who}", p.name),
                Some(u.cpu_user_s + u.cpu_sys_s),
                Unit::CpuSeconds,
            ));
        }
    }
    if !cpu.is_empty() {
        groups.push(Group {
            title: format!(
                "CPU time per phase (user + sys, counted in {} ticks)",
                secs(clock_tick_s())
            ),
            figures: cpu,
        });
    }
    if let Some(start) = &run.start {
        groups.push(Group {
            title: "Start (before any process of the run)".into(),
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
        });
    }
    Ok(groups)
}

fn latency_groups(hists: &[RunHist], full: bool) -> Vec<Group> {
    hists
        .iter()
        .map(|h| {
            let p = Percentiles::of(&h.hist);
            let us = |label: &str, v: f64| fig(label, Some(v), Unit::Micros);
            let mut figures = vec![fig("count", Some(p.count as f64), Unit::Count)];
            if full {
                figures.extend([
                    us("min", p.min as f64),
                    us("mean", p.mean),
                    us("stddev", p.stddev),
                    us("median", p.p50 as f64),
                    us("75%", p.p75 as f64),
                    us("95%", p.p95 as f64),
                    us("98%", p.p98 as f64),
                ]);
            } else {
                figures.push(us("median", p.p50 as f64));
            }
            figures.extend([
                us("99%", p.p99 as f64),
                us("99.9%", p.p999 as f64),
                us("max", p.max as f64),
            ]);
            Group {
                title: format!("Latency: {} {}", h.side, hist_label(h.name)),
                figures,
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
        let run = crate::lab::export::sample_run();
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
}
