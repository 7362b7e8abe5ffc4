//! `c1m merge SERVER_DIR CLIENT_DIR… --out DIR`: one run folder from a server host's
//! (`c1m run --clients external`) and the client hosts' (`c1m client --run-dir`), with
//! the files and report of a one-box run. Exact by construction:
//!
//! - histograms are added bucket by bucket from each host's `.hlog` intervals (never
//!   percentiles averaged), and each host's sum is checked against its final snapshot;
//! - counters are summed; pushes merged by id (counts summed, first/last on the server's
//!   clock);
//! - time series are aligned by wall clock, each host's moved onto the server's clock by
//!   its measured offset: a merged row sums each host's latest row at or before it;
//! - push latencies were corrected on each host as they were recorded (the shard knew
//!   the offset); the report states the largest bound.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use clap::Args;
use hdrhistogram::{
    Histogram,
    serialization::{
        V2DeflateSerializer,
        interval_log::{IntervalLogWriterBuilder, Tag},
    },
};
use thiserror::Error;

pub(crate) mod breakdown;
mod phases;

use super::model::{HostBreakdown, HostRole, Merged};
use crate::{
    infile::{Capped, InFileError},
    model::{Outcome, RunRecord, Sample},
    report::{self, hlog},
    workload::stats::{
        self,
        counters::Counters,
        histograms::{HIST_NAMES, Percentiles},
        report::PushStat,
        setup_rate::SetupRate,
        snapshot::{AppSnapshot, PushSummary, Workers},
    },
};
use breakdown::{breakdown, host_line, label};

#[derive(Args, Debug, Clone)]
pub struct MergeArgs {
    /// The server host's run folder (`c1m run --clients external`).
    pub server_dir: PathBuf,
    /// Each client host's run folder (`c1m client --run-dir`).
    #[arg(value_name = "DIR", required = true)]
    pub client_dirs: Vec<PathBuf>,
    /// Where to write the merged run folder.
    #[arg(value_name = "DIR", long)]
    pub out: PathBuf,
}

/// Bad input: one line naming the path and the fix (exit code 2).
#[derive(Debug, Error)]
pub(crate) enum MergeError {
    #[error("{0}")]
    Read(#[from] report::ExportError),
    #[error("{}: has a client side already: pass the server host's folder of `c1m run --clients external`", .0.display())]
    NotServer(PathBuf),
    #[error("{}: not a client host's folder: pass a folder written by `c1m client --run-dir`", .0.display())]
    NotClient(PathBuf),
    #[error("{}: shard {index} was given twice (also {}): pass each client host's folder once", .path.display(), .other.display())]
    Duplicate {
        path: PathBuf,
        other: PathBuf,
        index: u64,
    },
    #[error("{}: {what} ({error}): the folder is damaged; rerun that host or leave it out", .path.display())]
    Hist {
        path: PathBuf,
        what: String,
        error: String,
    },
    #[error("{}: {error}", .path.display())]
    Write { path: PathBuf, error: String },
    /// A client folder of another run than the server's (ids differ).
    #[error("{}: of run {id}, but the server host's folder {} is of run {server_id}: pass the client folders of run {server_id}", .path.display(), .server.display())]
    OtherRun {
        path: PathBuf,
        id: String,
        server: PathBuf,
        server_id: String,
    },
    /// A sum that does not fit a u64: never wrapped.
    #[error("{}: {field} overflows a 64-bit count when added to the other hosts' (is its summary.json damaged?): rerun that host or leave it out", .path.display())]
    Overflow { path: PathBuf, field: String },
    /// `--out` must be a new folder: merging into an input destroyed it.
    #[error("--out {}: exists already: pick another path or remove it{}", .path.display(), input_note(.input))]
    OutExists { path: PathBuf, input: bool },
    #[error("{0}")]
    Input(#[from] InFileError),
}

fn input_note(input: &bool) -> &'static str {
    if *input {
        " (it is an input of this merge)"
    } else {
        ""
    }
}

/// One interval of a host's log: (start ns on the server's clock, length ns, the
/// histogram as the log encodes it). Kept encoded, ~100 B, and decoded again as the
/// merged log is written: decoded, 20,000 intervals held 3.8 GB.
type Interval = (u64, u64, String);

/// The interval reader's word for a sum of values that overflowed.
const OVERFLOWS: &str = "overflows";

/// `a + b`, or the error naming the folder and the field whose sum overflowed.
fn sum(a: u64, b: u64, dir: &Path, field: &str) -> Result<u64, MergeError> {
    a.checked_add(b).ok_or_else(|| MergeError::Overflow {
        path: dir.to_owned(),
        field: field.to_owned(),
    })
}

/// One client host's folder, read.
struct Host {
    dir: PathBuf,
    run: RunRecord,
    snap: AppSnapshot,
    /// Histograms summed from the host's .hlog intervals.
    hists: BTreeMap<&'static str, Histogram<u64>>,
    /// (absolute start ns on the server's clock, length ns, histogram) per name.
    intervals: BTreeMap<&'static str, Vec<Interval>>,
    offset_ns: i64,
}

impl Host {
    /// This host's latest time-series row at or before `t_ms` on the server's clock.
    fn sample_at(&self, t_ms: u64) -> Option<&Sample> {
        let off_ms = self.offset_ns / 1_000_000;
        self.run
            .samples
            .iter()
            .rev()
            .find(|r| r.unix_ms.saturating_add_signed(off_ms) <= t_ms)
    }

    /// When this host ended, on the server's clock.
    fn ended_on_server_ms(&self) -> u64 {
        self.run
            .ended_unix_ms
            .saturating_add_signed(self.offset_ns / 1_000_000)
    }
}

/// `c1m merge`: the exit code (0, or 2 for bad input with one line on stderr).
pub(crate) fn main(a: MergeArgs) -> anyhow::Result<i32> {
    match merge(&a) {
        Ok(run) => {
            println!(
                "merged {} client host(s): {} connected, {}, written to {}",
                run.multihost.as_ref().map(|m| m.hosts.len()).unwrap_or(0),
                run.client
                    .as_ref()
                    .map(|c| c.counters.connected)
                    .unwrap_or(0),
                run.outcome,
                a.out.display()
            );
            for h in run.multihost.iter().flat_map(|m| &m.hosts) {
                println!("  {}", host_line(h));
            }
            for w in &run.warnings {
                println!("  {w}");
            }
            Ok(0)
        }
        Err(e) => {
            eprintln!("c1m merge: {e}");
            Ok(report::EXIT_BAD_INPUT)
        }
    }
}

fn read_host(dir: &Path) -> Result<Host, MergeError> {
    let run = report::load_run(dir)?;
    let is_client = run
        .host
        .as_ref()
        .is_some_and(|h| h.role == HostRole::Client);
    let Some(snap) = run
        .client
        .clone()
        .filter(|_| is_client && run.server.is_none())
    else {
        return Err(MergeError::NotClient(dir.to_owned()));
    };
    let offset_ns = run
        .host
        .as_ref()
        .and_then(|h| h.clock)
        .map(|c| c.offset_ns)
        .unwrap_or(0);
    let bad = |what: String, error: String| MergeError::Hist {
        path: dir.to_owned(),
        what,
        error,
    };
    let base_ns = run.started_unix_ms.saturating_mul(1_000_000);
    let mut hists = BTreeMap::new();
    let mut intervals = BTreeMap::new();
    for name in HIST_NAMES {
        let mut sum =
            stats::histograms::new_hist().map_err(|e| bad(name.to_owned(), e.to_string()))?;
        let mut list = Vec::new();
        let file = dir.join(format!("client-{name}.hlog"));
        if let Some(log) = hlog::open(&file)? {
            hlog::for_each_interval(log, |i| {
                let h = hlog::Interval::decode(i)?;
                // hdrhistogram saturates its counts: a total that fits keeps every bucket exact.
                if sum.len().checked_add(h.histogram.len()).is_none() {
                    return Err(OVERFLOWS.to_owned());
                }
                sum.add(&h.histogram).map_err(|e| e.to_string())?;
                let start = base_ns
                    .saturating_add((h.start_s * 1e9) as u64)
                    .saturating_add_signed(offset_ns);
                list.push((
                    start,
                    (h.length_s * 1e9) as u64,
                    i.encoded_histogram().to_owned(),
                ));
                Ok(())
            })
            .map_err(|e| match e.as_str() {
                OVERFLOWS => MergeError::Overflow {
                    path: dir.to_owned(),
                    field: format!("the values of client-{name}.hlog"),
                },
                _ => bad(file.display().to_string(), e),
            })?;
        }
        // The log must hold exactly what the host's final snapshot counted.
        let last = if snap.histograms.contains_key(name) {
            snap.histogram(name)
                .map_err(|e| bad(name.to_owned(), e.to_string()))?
                .len()
        } else {
            0
        };
        if sum.len() != last {
            return Err(bad(
                format!("client-{name}.hlog"),
                format!(
                    "its intervals hold {} values, the final snapshot {last}",
                    sum.len()
                ),
            ));
        }
        hists.insert(name, sum);
        intervals.insert(name, list);
    }
    Ok(Host {
        dir: dir.to_owned(),
        run,
        snap,
        hists,
        intervals,
        offset_ns,
    })
}

/// Reads, merges and writes; returns the merged record.
pub(crate) fn merge(a: &MergeArgs) -> Result<RunRecord, MergeError> {
    refuse_existing_out(a)?;
    let mut run = report::load_run(&a.server_dir)?;
    if run.client.is_some()
        || run.server.is_none()
        || run
            .host
            .as_ref()
            .is_some_and(|h| h.role != HostRole::Server)
    {
        return Err(MergeError::NotServer(a.server_dir.clone()));
    }
    let mut hosts = Vec::new();
    let mut seen: BTreeMap<u64, PathBuf> = BTreeMap::new();
    for dir in &a.client_dirs {
        let h = read_host(dir)?;
        if let Some(i) = h.run.host.as_ref().and_then(|h| h.shard_index)
            && let Some(other) = seen.insert(i, dir.clone())
        {
            return Err(MergeError::Duplicate {
                path: dir.clone(),
                other,
                index: i,
            });
        }
        hosts.push(h);
    }
    let unchecked = check_run_ids(&a.server_dir, &run, &hosts)?;
    run.warnings.extend(unchecked);
    let count = hosts
        .iter()
        .filter_map(|h| h.run.host.as_ref()?.shard_count)
        .max()
        .unwrap_or(hosts.len() as u64);
    for missing in (0..count).filter(|i| !seen.contains_key(i)) {
        run.warnings.push(format!(
            "client shard {missing}/{count} is missing from the merge: its connections are not counted"
        ));
    }

    let client = merged_snapshot(&hosts, &a.out)?;
    align_samples(&mut run.samples, &hosts)?;
    phases::merge(&mut run.phases, &hosts)?;
    let breakdown = hosts
        .iter()
        .map(|h| breakdown(h, run.per_connection.at_unix_ms))
        .collect::<Result<Vec<HostBreakdown>, MergeError>>()?;
    let bounds: Vec<Option<u64>> = hosts
        .iter()
        .map(|h| h.run.host.as_ref().and_then(|h| h.clock_bound_ns()))
        .collect();
    let clock_bound_ns = bounds
        .iter()
        .copied()
        .collect::<Option<Vec<u64>>>()
        .and_then(|b| b.into_iter().max());
    let clock_note = match clock_bound_ns {
        Some(b) => format!(
            "push latencies are on the server's clock: each client host measured its offset (min-RTT of 16 round trips, before and after) and corrected them as it recorded; they are exact to ± {:.3} ms",
            b as f64 / 1e6
        ),
        None => "some client host measured no clock offset (no --clock-from): push latencies assume synchronised clocks".to_owned(),
    };
    // The client hosts measured the pushes: the run's rule is theirs, if one.
    let rules: Vec<_> = hosts.iter().map(|h| h.run.config.push).collect();
    run.config.push = match rules.first() {
        Some(first) if rules.iter().all(|r| r == first) => *first,
        Some(_) => {
            run.warnings.push(
                "client hosts measured push latency by different rules (--push-latency, --push-stamp): the merged run records none".to_owned(),
            );
            None
        }
        None => run.config.push,
    };
    run.per_connection = phases::per_connection(&run.per_connection, &hosts);
    // The hosts' --source addresses; hosts that gave none connected from their own,
    // which the server host recorded as it saw them.
    let given: Vec<String> = hosts
        .iter()
        .map(|h| h.run.config.sources.clone())
        .filter(|s| !s.is_empty())
        .collect();
    if !given.is_empty() {
        run.config.sources = given.join(",");
    }
    run.ended_unix_ms = hosts
        .iter()
        .map(|h| h.run.ended_unix_ms)
        .chain([run.ended_unix_ms])
        .max()
        .unwrap_or(run.ended_unix_ms);
    // The merged run ends as its worst host, and says why each host ended as it did.
    if run.outcome == Outcome::Running {
        // Its lab never wrote an end: killed, or the host died.
        run.outcome = Outcome::Failed;
        run.warnings.push(format!(
            "the server host's run never ended (its folder {} still says running): it was killed or its host died",
            a.server_dir.display()
        ));
    }
    for h in &hosts {
        let outcome = h.run.outcome;
        if outcome != Outcome::Complete {
            run.warnings.push(format!(
                "{}: the client host's run ended {outcome}{}",
                label(h),
                match h.run.warnings.is_empty() {
                    true => " (no reason recorded)",
                    false => ":",
                }
            ));
        }
        for w in &h.run.warnings {
            run.warnings.push(format!("{}: {w}", label(h)));
        }
        run.outcome = run.outcome.worst(outcome);
    }
    if !run.warnings.is_empty() {
        run.outcome = run.outcome.worst(Outcome::Degraded);
    }
    let server_logs = server_logs(&a.server_dir)?;
    run.client = Some(client);
    run.multihost = Some(Merged {
        server_dir: a.server_dir.display().to_string(),
        hosts: breakdown,
        clock_bound_ns,
        clock_note,
    });
    write(a, &run, &hosts, server_logs)?;
    Ok(run)
}

/// Every client folder must be of the server's run: a client host records the id the
/// server host's control endpoint answered (`--clock-from`). A folder of another id is
/// refused; a folder without one (written before runs had ids, or a client host without
/// --clock-from) cannot be checked: merged, with a warning that says so (the merged run
/// is then `degraded`).
fn check_run_ids(
    server_dir: &Path,
    server: &RunRecord,
    hosts: &[Host],
) -> Result<Vec<String>, MergeError> {
    let Some(server_id) = server.host.as_ref().and_then(|h| h.run_id.clone()) else {
        return Ok(vec![format!(
            "unchecked: the server host's folder {} has no run id (written before c1m recorded one): every client folder is merged as if of its run",
            server_dir.display()
        )]);
    };
    let mut warnings = Vec::new();
    for h in hosts {
        match h.run.host.as_ref().and_then(|i| i.run_id.clone()) {
            Some(id) if id != server_id => {
                return Err(MergeError::OtherRun {
                    path: h.dir.clone(),
                    id,
                    server: server_dir.to_owned(),
                    server_id,
                });
            }
            Some(_) => {}
            None => warnings.push(format!(
                "unchecked: {} has no run id (written before c1m recorded one, or without --clock-from): merged as if of the server's run",
                h.dir.display()
            )),
        }
    }
    Ok(warnings)
}

/// `--out` is a new folder: one that exists (an input above all) is refused before
/// anything is read.
fn refuse_existing_out(a: &MergeArgs) -> Result<(), MergeError> {
    if std::fs::symlink_metadata(&a.out).is_err() {
        return Ok(());
    }
    let real = |p: &Path| std::fs::canonicalize(p).ok();
    let out = real(&a.out);
    let input = std::iter::once(&a.server_dir)
        .chain(&a.client_dirs)
        .any(|d| out.is_some() && real(d) == out);
    Err(MergeError::OutExists {
        path: a.out.clone(),
        input,
    })
}

/// The server host's interval logs, open (regular files within the cap): copied as they
/// are into the merged folder.
fn server_logs(dir: &Path) -> Result<Vec<(String, Capped)>, MergeError> {
    let werr = |error: std::io::Error| MergeError::Write {
        path: dir.to_owned(),
        error: error.to_string(),
    };
    let mut logs = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(werr)? {
        let entry = entry.map_err(werr)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("server-") && name.ends_with(".hlog") {
            logs.push((name, Capped::open(&entry.path(), hlog::HLOG_CAP)?));
        }
    }
    Ok(logs)
}

/// The client side as one snapshot: counters summed (checked), histograms added.
fn merged_snapshot(hosts: &[Host], out: &Path) -> Result<AppSnapshot, MergeError> {
    let hist_err = |error: String| MergeError::Hist {
        path: out.to_owned(),
        what: "merging histograms".to_owned(),
        error,
    };
    let mut counters = Counters::default();
    let mut hists: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
    let mut pushes: BTreeMap<u64, PushStat> = BTreeMap::new();
    let mut workers = Workers::default();
    let mut snap = AppSnapshot {
        side: "client".to_owned(),
        phase: "closed".to_owned(),
        split: format!("{} client hosts", hosts.len()),
        ..AppSnapshot::default()
    };
    let (mut asked, mut ramp_s) = (0.0, 0.0f64);
    for h in hosts {
        let s = &h.snap;
        let add = |a: u64, b: u64, field: &str| sum(a, b, &h.dir, field);
        counters
            .checked_add(&s.counters)
            .map_err(|field| MergeError::Overflow {
                path: h.dir.clone(),
                field: format!("counters.{field}"),
            })?;
        for (name, hist) in &h.hists {
            let m = match hists.get_mut(*name) {
                Some(m) => m,
                None => hists
                    .entry((*name).to_owned())
                    .or_insert(stats::histograms::new_hist().map_err(|e| hist_err(e.to_string()))?),
            };
            add(
                m.len(),
                hist.len(),
                &format!("the values of histogram {name}"),
            )?;
            m.add(hist).map_err(|e| hist_err(e.to_string()))?;
        }
        for p in &s.pushes {
            // Received on the host's clock: moved onto the server's.
            let on_server = |t: u64| t.saturating_add_signed(h.offset_ns);
            let merged = pushes.entry(p.push_id).or_default();
            add(
                merged.count,
                p.count,
                &format!("push {}'s count", p.push_id),
            )?;
            merged.merge(&PushStat {
                push_id: p.push_id,
                started_unix_ns: p.started_unix_ns,
                count: p.count,
                first_unix_ns: on_server(p.first_unix_ns),
                last_unix_ns: on_server(p.last_unix_ns),
            });
        }
        let add32 = |a: u32, b: u32, field: &str| {
            a.checked_add(b).ok_or_else(|| MergeError::Overflow {
                path: h.dir.clone(),
                field: field.to_owned(),
            })
        };
        workers.count = add32(workers.count, s.workers.count, "workers.count")?;
        workers.alive = add32(workers.alive, s.workers.alive, "workers.alive")?;
        workers.list.extend(s.workers.list.iter().cloned());
        if let Some(r) = &s.setup_rate {
            asked += r.asked_per_s.unwrap_or(0.0);
            // The hosts ramp together (--start-at): the run's ramp lasts the longest one.
            ramp_s = ramp_s.max(r.duration_s);
        }
        snap.mode.clone_from(&s.mode);
        snap.unix_ns = snap.unix_ns.max(s.unix_ns);
        snap.counts_unix_ns = snap.counts_unix_ns.max(s.counts_at_ns());
        snap.uptime_s = snap.uptime_s.max(s.uptime_s);
        snap.target = add(snap.target, s.target, "target")?;
        snap.rss_bytes = add(snap.rss_bytes, s.rss_bytes, "rss_bytes")?;
        snap.rss_baseline_bytes = add(
            snap.rss_baseline_bytes,
            s.rss_baseline_bytes,
            "rss_baseline_bytes",
        )?;
        snap.cpu_user_s += s.cpu_user_s;
        snap.cpu_sys_s += s.cpu_sys_s;
    }
    snap.setup_rate = (ramp_s > 0.0).then(|| SetupRate {
        peak: stats::setup_rate::PeakRate::AcrossHosts,
        ..SetupRate::new(asked, counters.connected, ramp_s)
    });
    snap.counters = counters;
    snap.workers = workers;
    snap.pushes = pushes.into_values().map(PushSummary::from).collect();
    for (k, h) in &hists {
        snap.percentiles.insert(k.clone(), Percentiles::of(h));
        snap.histograms.insert(
            k.clone(),
            stats::histograms::encode_hist(h).map_err(|e| hist_err(e.to_string()))?,
        );
    }
    Ok(snap)
}

/// Fills the client columns of the server's rows: each host's latest row at or before the
/// server's row (on the server's clock), summed (checked). A host with no row yet counts
/// as absent.
fn align_samples(samples: &mut [Sample], hosts: &[Host]) -> Result<(), MergeError> {
    for s in samples {
        let rows: Vec<(&Path, &Sample)> = hosts
            .iter()
            .filter_map(|h| Some((h.dir.as_path(), h.sample_at(s.unix_ms)?)))
            .collect();
        if rows.is_empty() {
            continue;
        }
        let sum_u = |f: fn(&Sample) -> Option<u64>, field: &str| {
            let mut total: Option<u64> = None;
            for (dir, r) in &rows {
                if let Some(v) = f(r) {
                    total = Some(sum(total.unwrap_or(0), v, dir, field)?);
                }
            }
            Ok::<_, MergeError>(total)
        };
        let sum_f = |f: fn(&Sample) -> Option<f64>| {
            rows.iter().filter_map(|(_, r)| f(r)).reduce(|a, b| a + b)
        };
        s.client_open = sum_u(|r| r.client_open, "timeseries client_open")?;
        s.client_connected = sum_u(|r| r.client_connected, "timeseries client_connected")?;
        s.client_failures = sum_u(|r| r.client_failures, "timeseries client_failures")?;
        s.client_connect_per_s = sum_f(|r| r.client_connect_per_s);
        s.client_rss_bytes = sum_u(|r| r.client_rss_bytes, "timeseries client_rss_bytes")?;
        s.client_cpu_s = sum_f(|r| r.client_cpu_s);
        s.client_cpu_sys_s = sum_f(|r| r.client_cpu_sys_s);
        s.client_cpu_cores = sum_f(|r| r.client_cpu_cores);
        s.kernel_client_established = match rows
            .iter()
            .map(|(dir, r)| Some((*dir, r.kernel_client_established?)))
            .collect::<Option<Vec<(&Path, i64)>>>()
        {
            None => None,
            Some(v) => {
                let mut total = 0i64;
                for (dir, n) in v {
                    total = total.checked_add(n).ok_or_else(|| MergeError::Overflow {
                        path: dir.to_owned(),
                        field: "timeseries kernel_client_established".to_owned(),
                    })?;
                }
                Some(total)
            }
        };
        s.client_age_s = rows
            .iter()
            .map(|(_, r)| s.unix_ms.saturating_sub(r.unix_ms) as f64 / 1e3)
            .reduce(f64::max);
    }
    Ok(())
}

fn write(
    a: &MergeArgs,
    run: &RunRecord,
    hosts: &[Host],
    server_logs: Vec<(String, Capped)>,
) -> Result<(), MergeError> {
    let out = &a.out;
    let werr = |path: &Path, error: String| MergeError::Write {
        path: path.to_owned(),
        error,
    };
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| werr(parent, e.to_string()))?;
    }
    // Made here, exclusively: a folder that appeared since the check is not written into.
    match std::fs::create_dir(out) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(MergeError::OutExists {
                path: out.clone(),
                input: false,
            });
        }
        Err(e) => return Err(werr(out, e.to_string())),
    }
    report::write_run(out, run).map_err(|e| werr(out, e.to_string()))?;
    // The server's interval logs as they are; the clients' re-based onto the run's start
    // on the server's clock, every host's intervals in time order.
    for (name, mut log) in server_logs {
        let path = out.join(&name);
        let copied = std::fs::File::create(&path).and_then(|mut f| std::io::copy(&mut log, &mut f));
        if let Err(e) = copied {
            let _ = std::fs::remove_file(&path);
            return Err(werr(log.path(), e.to_string()));
        }
    }
    let base_ns = run.started_unix_ms.saturating_mul(1_000_000);
    for name in HIST_NAMES {
        let mut all: Vec<&Interval> = hosts
            .iter()
            .flat_map(|h| h.intervals[name].iter())
            .collect();
        if all.is_empty() {
            continue;
        }
        all.sort_by_key(|i| i.0);
        let path = out.join(format!("client-{name}.hlog"));
        let mut text = Vec::new();
        let start = std::time::UNIX_EPOCH + Duration::from_nanos(base_ns);
        let mut ser = V2DeflateSerializer::new();
        let stem = format!("client-{name}");
        let mut w = IntervalLogWriterBuilder::new()
            .add_comment(&format!(
                "c1m {} merged interval log: client {name} of {} hosts (values in µs, on the server's clock)",
                env!("CARGO_PKG_VERSION"),
                hosts.len()
            ))
            .with_start_time(start)
            .with_base_time(start)
            .begin_log_with(&mut text, &mut ser)
            .map_err(|e| werr(&path, e.to_string()))?;
        for (at, len, encoded) in all {
            let h =
                stats::histograms::decode_hist(encoded).map_err(|e| werr(&path, e.to_string()))?;
            w.write_histogram(
                &h,
                Duration::from_nanos(at.saturating_sub(base_ns)),
                Duration::from_nanos(*len),
                Tag::new(&stem),
            )
            .map_err(|e| werr(&path, e.to_string()))?;
        }
        std::fs::write(&path, text).map_err(|e| werr(&path, e.to_string()))?;
    }
    Ok(())
}
