//! The key figures of a run, computed once for the report's summary cards and for
//! `c1m compare`'s side-by-side table.

use super::{
    ExportError, RunHist,
    fmt::{bytes, count, ms, num, secs},
    histograms,
};
use crate::{
    lab::model::{RunRecord, Sample},
    workload::stats::{Percentiles, SetupRate},
};

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Unit {
    Count,
    PerSecond,
    Bytes,
    /// Stored in µs, shown in ms.
    Micros,
    Seconds,
}

impl Unit {
    /// The unit's name in compare.csv and compare.json.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Count => "count",
            Unit::PerSecond => "per_s",
            Unit::Bytes => "bytes",
            Unit::Micros => "us",
            Unit::Seconds => "s",
        }
    }

    pub fn show(self, v: f64) -> String {
        match self {
            Unit::Count => count(v.max(0.0).round() as u64),
            Unit::PerSecond => format!("{}/s", num(v, if v.abs() < 100.0 { 1 } else { 0 })),
            Unit::Bytes => bytes(v),
            Unit::Micros => format!("{} ms", ms(v)),
            Unit::Seconds => secs(v),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Figure {
    pub label: String,
    pub value: Option<f64>,
    pub unit: Unit,
    /// A latency percentile's quantile (0.5 for the median): `c1m compare` redraws it
    /// from the histogram's connections for its intervals.
    pub quantile: Option<f64>,
    /// The smallest difference the measurement can tell, where it is coarse.
    pub resolution: Option<f64>,
}

/// CPU times come from /proc in USER_HZ ticks (1/100 s on every Linux ABI); a phase's
/// CPU figure adds two differences of tick counts (user, sys), so it can be 2 ticks off.
const CPU_RESOLUTION_S: f64 = 0.02;

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
        quantile: None,
        resolution: None,
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
    Ok(key_figures_of(run, &histograms(run)?, full_latency))
}

/// [`key_figures`] from the run's histograms, decoded once by the caller.
pub(crate) fn key_figures_of(run: &RunRecord, hists: &[RunHist], full_latency: bool) -> Vec<Group> {
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
            fig(
                "peak rate (1 s)",
                peak(s, |x| x.client_connect_per_s),
                Unit::PerSecond,
            ),
        ],
        hist: None,
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
        hist: None,
    });
    groups.extend(latency_groups(hists, full_latency));
    let mut cpu = Vec::new();
    for p in &run.phases {
        for (who, u) in [
            ("server", &p.server),
            ("client", &p.client),
            ("observer", &p.observer),
        ] {
            cpu.push(Figure {
                resolution: Some(CPU_RESOLUTION_S),
                ..fig(
                    format!("{}: {who}", p.name),
                    Some(u.cpu_user_s + u.cpu_sys_s),
                    Unit::Seconds,
                )
            });
        }
    }
    if !cpu.is_empty() {
        groups.push(Group {
            title: "CPU time per phase (user + sys)".into(),
            figures: cpu,
            hist: None,
        });
    }
    groups
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
                title: format!("Latency: {} {}", h.side, h.name),
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
        assert!(get("Latency: client connect_us", "99%").unwrap() > 0.0);
        assert_eq!(Unit::PerSecond.show(50_123.4), "50,123/s");
        assert_eq!(Unit::Micros.show(1234.0), "1.234 ms");
    }
}
