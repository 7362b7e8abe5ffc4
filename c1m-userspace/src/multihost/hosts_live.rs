//! `c1m run --hosts`, live: while the hosts run, one line per client host every
//! [`EVERY`] and once more when a host ends, beside the server host's relayed lines:
//!
//! ```text
//!   host-0      | idle · connected 2,000 of 2,000 · open 2,000 · kernel 2,000 = app 2,000 (eBPF) · failures 0 · 0.07 cores · RSS 46.7 MiB · 1.2 s old
//! ```
//!
//! Each line is read from the folder the client host rewrites every 5 s
//! ([`HostFolder`](super::client_host::HostFolder)): its `summary.json`, whose client
//! snapshot, kernel view and last sample are what the merge reads at the end, so the
//! kernel-vs-app figure is the merge's own
//! ([`host_kernel_vs_app`](super::merge::breakdown::host_kernel_vs_app)). The file is
//! written atomically (a rename) and read with the report's size cap; a folder not
//! there yet, or unreadable this time, is skipped for the tick, never an error. A host
//! without eBPF says where its kernel figure comes from and why; before its observer
//! started, that it has none yet: never a bare 0. `--json` prints the same as one JSON
//! object per host and tick, and the server host's own objects with `"host":"server"`.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use serde::Serialize;

use super::{
    merge::breakdown::{host_kernel_vs_app, most_established},
    model::KernelSource,
};
use crate::{
    figures::kernel_vs_app::CLIENT_OPEN,
    fmt,
    model::{Outcome, RunRecord, kernel_vs_app::KernelVsApp},
    observer::{LossDrops, Retransmits},
};

/// How often each running client host gets a line.
const EVERY: Duration = Duration::from_secs(5);

/// The client hosts' folders, and when each was last shown.
pub(super) struct HostsLive {
    hosts: Vec<Watched>,
    json: bool,
    last: Option<Instant>,
}

struct Watched {
    label: String,
    dir: PathBuf,
    /// Its last line was printed after it ended: nothing more to say.
    done: bool,
}

/// One client host as its folder showed it: what a line says (and `--json` prints).
#[derive(Debug, Serialize)]
struct HostNow<'a> {
    host: &'a str,
    /// The client's phase in its last snapshot (ramp, hold, closing, …).
    phase: &'a str,
    /// Whether the host's process has ended (its folder is final).
    ended: bool,
    /// The folder's outcome (`running` until the host ends).
    outcome: Outcome,
    /// Seconds between the folder's last snapshot and this line.
    age_s: f64,
    /// Connections this host was asked to open.
    share: u64,
    connected: u64,
    open: u64,
    failures: u64,
    /// Where the kernel figure comes from (None: the host's observer has not started).
    kernel_source: Option<KernelSource>,
    /// Why this host has no eBPF (None: it has, or it is not known yet).
    kernel_fallback: Option<&'a str>,
    /// The host's kernel against its app's `connected` (None: no kernel figure yet).
    kernel: Option<KernelVsApp>,
    cpu_cores: Option<f64>,
    rss_bytes: Option<u64>,
    /// The host's path since its start: conntrack, veth, softnet, neighbours (None:
    /// not read yet, or a folder of an older c1m).
    path: Option<crate::netpath::PathFigures>,
    /// What `--loss` dropped on this host's link so far (None: no loss injected).
    #[serde(skip_serializing_if = "Option::is_none")]
    loss: Option<&'a LossDrops>,
    /// The host's retransmits by kind (with its observer).
    #[serde(skip_serializing_if = "Option::is_none")]
    retransmits: Option<Retransmits>,
}

impl HostsLive {
    /// The client hosts in shard order: each one's label and run folder.
    pub(super) fn new(hosts: Vec<(String, PathBuf)>, json: bool) -> Self {
        let hosts = hosts
            .into_iter()
            .map(|(label, dir)| Watched {
                label,
                dir,
                done: false,
            })
            .collect();
        HostsLive {
            hosts,
            json,
            last: Some(Instant::now()),
        }
    }

    /// One pass of the wait loop: `ended[i]` says whether client host `i` has ended.
    /// Prints a line for each host that just ended and, every [`EVERY`], for each one
    /// still running.
    pub(super) fn tick(&mut self, ended: &[bool]) {
        let due = self.last.is_none_or(|t| t.elapsed() >= EVERY);
        if due {
            self.last = Some(Instant::now());
        }
        let now_ms = crate::util::unix_ms_now();
        for (h, &ended) in self.hosts.iter_mut().zip(ended) {
            if h.done || !(due || ended) {
                continue;
            }
            // Not there yet, or unreadable this time: the next tick reads it again.
            let Ok(run) = crate::report::load_run(&h.dir) else {
                continue;
            };
            let Some(now) = host_now(&h.label, &run, ended, now_ms) else {
                continue;
            };
            h.done = ended;
            if self.json {
                match serde_json::to_string(&now) {
                    Ok(line) => println!("{line}"),
                    Err(e) => eprintln!("c1m: {}: {e}", h.label),
                }
            } else {
                println!("{}", text(&now));
            }
        }
    }
}

/// The server host's `--json` line `{…}` as `{"host":"server",…}`, so every JSON line
/// of `--hosts` names its host (None: not a JSON object, relayed as text).
pub(super) fn server_json(line: &str) -> Option<String> {
    let mut object: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(line.trim()).ok()?;
    object.insert("host".to_owned(), "server".into());
    serde_json::to_string(&object).ok()
}

/// What `run` (client host `label`'s folder) says at `now_ms`; None while it holds no
/// client snapshot yet.
fn host_now<'a>(
    label: &'a str,
    run: &'a RunRecord,
    ended: bool,
    now_ms: u64,
) -> Option<HostNow<'a>> {
    let snap = run.client.as_ref()?;
    let c = &snap.counters;
    let info = run.host.as_ref();
    let source = info.and_then(|i| i.kernel_source);
    let sample = run.samples.last();
    Some(HostNow {
        host: label,
        phase: &snap.phase,
        ended,
        outcome: run.outcome,
        age_s: now_ms.saturating_sub(snap.unix_ns / 1_000_000) as f64 / 1e3,
        share: run.config.connections,
        connected: c.connected,
        open: c.open,
        failures: c.failures.total(),
        kernel_source: source,
        kernel_fallback: info.and_then(|i| i.kernel_fallback.as_deref()),
        kernel: source.map(|source| kernel_row(run, source, ended, c.connected)),
        cpu_cores: sample.and_then(|s| s.client_cpu_cores),
        rss_bytes: sample.and_then(|s| s.client_rss_bytes),
        path: info.and_then(|i| i.path()),
        loss: run.kernel.as_ref().and_then(|k| k.loss.as_ref()),
        retransmits: run.kernel.as_ref().map(|k| k.client.retransmits),
    })
}

/// While the host runs with its observer, its figures' own "client open" row of the last
/// snapshot (kernel ESTABLISHED against app open, a gap explained as a one-box run's
/// live view explains it: mid-ramp the two readings are apart); once it ended, or
/// without the observer, the merge's row (connections since attach against connected).
fn kernel_row(run: &RunRecord, source: KernelSource, ended: bool, connected: u64) -> KernelVsApp {
    let live = (!ended && source == KernelSource::Observer)
        .then(|| {
            run.phases
                .last()?
                .kernel_vs_app
                .iter()
                .find(|r| r.what == CLIENT_OPEN && r.kernel.is_some())
                .cloned()
        })
        .flatten();
    live.unwrap_or_else(|| host_kernel_vs_app(run, connected, most_established(run)))
}

/// The line, prefixed as the server host's relayed lines are.
fn text(h: &HostNow<'_>) -> String {
    let state = if h.ended {
        format!("ended {}", h.outcome)
    } else {
        h.phase.to_owned()
    };
    let mut parts = vec![
        state,
        format!(
            "connected {} of {}",
            fmt::count(h.connected),
            fmt::count(h.share)
        ),
        format!("open {}", fmt::count(h.open)),
        kernel_text(h),
        format!("failures {}", fmt::count(h.failures)),
    ];
    if let Some(cores) = h.cpu_cores {
        parts.push(format!("{} cores", fmt::num(cores, 2)));
    }
    if let Some(rss) = h.rss_bytes {
        parts.push(format!("RSS {}", fmt::bytes(rss as f64)));
    }
    if let Some(p) = &h.path {
        parts.push(p.conntrack_text());
        parts.extend(p.drops_text());
    }
    if let (Some(loss), Some(r)) = (h.loss, &h.retransmits) {
        let dropped = loss.both();
        parts.push(format!(
            "loss {}: dropped {} ({}) · retransmits {} ({})",
            crate::observer::loss::percent(loss.probability),
            fmt::count(dropped.total()),
            crate::observer::loss::classes(&dropped),
            fmt::count(r.total),
            crate::observer::loss::retransmit_kinds(r)
        ));
    }
    parts.push(format!("{} s old", fmt::num(h.age_s, 1)));
    format!("  {:<11} | {}", h.host, parts.join(" · "))
}

/// `kernel 2,000 = app 2,000 (eBPF)`, where the figure comes from, or why there is none.
fn kernel_text(h: &HostNow<'_>) -> String {
    let (Some(source), Some(k)) = (h.kernel_source, &h.kernel) else {
        return "kernel not read yet (the host's observer is starting)".to_owned();
    };
    let Some(kernel) = k.kernel else {
        return format!(
            "kernel not read ({}: {})",
            source.name(),
            k.explanation.as_deref().unwrap_or("no answer")
        );
    };
    let figures = format!(
        "{} {} app {}",
        fmt::signed(kernel),
        if k.agree { "=" } else { "≠" },
        k.app.map_or_else(|| "n/a".to_owned(), fmt::signed)
    );
    match source {
        KernelSource::Observer => match k.explanation.as_deref() {
            Some(why) => format!("kernel {figures} (eBPF: {why})"),
            None => format!("kernel {figures} (eBPF)"),
        },
        KernelSource::ProcNetTcp => format!(
            "kernel ({}, most at once) {figures} (no eBPF: {})",
            source.name(),
            h.kernel_fallback.unwrap_or("the observer did not start")
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;
    use crate::{
        model::Sample, multihost::model::HostInfo, workload::stats::snapshot::AppSnapshot,
    };

    fn folder(source: Option<KernelSource>, most: Option<i64>) -> RunRecord {
        let mut snap = AppSnapshot {
            phase: "hold".to_owned(),
            unix_ns: 10_000_000_000,
            ..AppSnapshot::default()
        };
        snap.counters.connected = 2000;
        snap.counters.open = 2000;
        let mut run = RunRecord {
            client: Some(snap),
            host: Some(HostInfo {
                kernel_source: source,
                kernel_fallback: (source == Some(KernelSource::ProcNetTcp))
                    .then(|| "no CAP_BPF".to_owned()),
                ..HostInfo::default()
            }),
            samples: vec![Sample {
                kernel_client_established: most,
                client_cpu_cores: Some(0.25),
                client_rss_bytes: Some(3 << 20),
                ..Sample::default()
            }],
            ..RunRecord::default()
        };
        run.config.connections = 2000;
        run
    }

    #[test]
    fn a_host_without_ebpf_names_its_source_and_why() {
        let run = folder(Some(KernelSource::ProcNetTcp), Some(2000));
        let line = text(&host_now("host-1", &run, false, 11_500).unwrap());
        assert_eq!(
            line,
            "  host-1      | hold · connected 2,000 of 2,000 · open 2,000 · kernel \
             (/proc/net/tcp, most at once) 2,000 = app 2,000 (no eBPF: no CAP_BPF) · \
             failures 0 · 0.25 cores · RSS 3.0 MiB · 1.5 s old"
        );
    }

    #[test]
    fn a_host_whose_observer_has_not_started_says_so_never_zero() {
        let run = folder(None, Some(0));
        let line = text(&host_now("host-0", &run, false, 10_000).unwrap());
        assert!(
            line.contains("· kernel not read yet (the host's observer is starting) ·"),
            "{line}"
        );
        assert!(!line.contains("kernel 0"), "{line}");
    }

    #[test]
    fn an_ended_host_says_its_outcome_and_json_keeps_every_figure() {
        let mut run = folder(Some(KernelSource::ProcNetTcp), Some(1990));
        run.outcome = Outcome::Complete;
        let now = host_now("host-0", &run, true, 10_000).unwrap();
        assert!(text(&now).starts_with("  host-0      | ended complete · "));
        assert!(text(&now).contains("1,990 ≠ app 2,000"), "{}", text(&now));
        let v: serde_json::Value = serde_json::to_value(&now).unwrap();
        assert_eq!(v["host"], "host-0");
        assert_eq!(v["ended"], true);
        assert_eq!(v["connected"], 2000);
        assert_eq!(v["kernel_source"], "proc_net_tcp");
        assert_eq!(v["kernel"]["kernel"], 1990);
        assert_eq!(v["kernel"]["agree"], false);
    }

    #[test]
    fn the_server_hosts_json_names_it_and_its_text_stays_text() {
        let v: serde_json::Value =
            serde_json::from_str(&server_json(r#"{"t_s":1.0,"phase":"idle"}"#).unwrap()).unwrap();
        assert_eq!(
            (v["host"].as_str(), v["phase"].as_str()),
            (Some("server"), Some("idle"))
        );
        assert_eq!(server_json("c1m run: 4,000 connections"), None);
        assert_eq!(server_json("[1,2]"), None);
    }

    /// Mid-ramp the host's kernel and app readings are apart: the line says so, as the
    /// one-box view does, never "another process" (the 1M run's live lines did).
    #[test]
    fn a_ramping_host_explains_its_gap_as_the_live_view_does() {
        let mut run = folder(Some(KernelSource::Observer), Some(2010));
        run.phases.push(crate::model::phase::Phase {
            name: "ramp".to_owned(),
            kernel_vs_app: vec![KernelVsApp {
                what: CLIENT_OPEN.to_owned(),
                kernel: Some(2010),
                app: Some(2000),
                agree: false,
                explanation: Some(
                    "counted between the two readings (250 ms apart at 40/s)".to_owned(),
                ),
            }],
            ..crate::model::phase::Phase::default()
        });
        let line = text(&host_now("host-0", &run, false, 10_000).unwrap());
        assert!(
            line.contains("kernel 2,010 ≠ app 2,000 (eBPF: counted between the two readings (250 ms apart at 40/s))"),
            "{line}"
        );
        // Ended, the merge's row: connections since attach against connected.
        let ended = host_now("host-0", &run, true, 10_000).unwrap();
        assert_eq!(ended.kernel.unwrap().what, "client connected (this host)");
    }

    #[test]
    fn a_folder_without_a_client_snapshot_gives_no_line() {
        let run = RunRecord::default();
        assert!(host_now("host-0", &run, false, 0).is_none());
    }
}
