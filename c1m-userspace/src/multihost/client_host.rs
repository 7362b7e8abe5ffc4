//! A client host's run folder (`c1m client --run-dir`): the same `summary.json`,
//! `timeseries.csv`, `.hgrm` and `.hlog` files a one-box run writes, with only the
//! client side filled and the host (shard, clock offset) named, so `c1m merge` reads
//! server and client folders with one reader.
//!
//! Its kernel side comes from the eBPF observer, as a one-box run's client side does:
//! scoped to the host's network namespace and the server's ports (every socket there
//! is a client socket: no listener of the run is on this host). Without the privileges
//! the host says so in one line and counts ESTABLISHED in `/proc/net/tcp` instead,
//! marked in the folder ([`KernelSource::ProcNetTcp`]).

use std::{
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{Context, Result};

use super::model::{HostInfo, KernelSource};
use crate::{
    figures::{FiguresBuilder, Rows, kernel_vs_app::app_source},
    model::{
        Outcome, RunRecord, Sample, Source,
        config::RunConfig,
        kernel_vs_app::KernelVsApp,
        phase::{Phase, ProcessUsage},
    },
    netpath::{PathFigures, PathReading},
    observer::{KernelView, LossInjection, ObserverConfig, ObserverHandle},
    report::{self, IntervalRecorder},
    workload::stats::snapshot::AppSnapshot,
};

/// This host's kernel at one instant.
pub(crate) enum HostKernel {
    /// The observer's view.
    View(Box<KernelView>),
    /// ESTABLISHED connections to the server's ports in `/proc/net/tcp` (no observer).
    Table(i64),
    /// Not read this time (the observer's answer did not come).
    Unread,
}

/// How this host reads its kernel: the observer, else the socket table.
pub(crate) enum KernelReader {
    /// The eBPF observer on its own thread.
    Observer(ObserverHandle),
    /// `/proc/net/tcp`, counting connections to these server ports.
    Table(Vec<u16>),
}

impl KernelReader {
    /// The observer on the server's ports, else the table with one line saying why:
    /// the reader, where its figures come from, and why it fell back (None: it did not).
    /// With `loss` the observer also drops segments on the host's link, and not
    /// starting it is an error: a run asked for loss must not run without it.
    pub(crate) fn start(
        server_ports: &[u16],
        loss: Option<LossInjection>,
    ) -> Result<(Self, KernelSource, Option<String>)> {
        let asked_loss = loss.is_some();
        match ObserverHandle::start_with(ObserverConfig {
            ports: server_ports.to_vec(),
            loss,
            ..ObserverConfig::default()
        }) {
            Ok(o) => Ok((Self::Observer(o), KernelSource::Observer, None)),
            Err(e) if asked_loss => Err(e.context(
                "--loss needs the eBPF observer on this host (its tc program drops the packets)",
            )),
            Err(e) => {
                let why = format!("{e:#}");
                eprintln!(
                    "c1m client: no eBPF observer on this host ({why}); counting ESTABLISHED in \
                     /proc/net/tcp instead (marked in the run folder)"
                );
                Ok((
                    Self::Table(server_ports.to_vec()),
                    KernelSource::ProcNetTcp,
                    Some(why),
                ))
            }
        }
    }

    /// The kernel now; `fresh` asks the observer for a socket walk first (memory of
    /// this moment). The table read grows with the connections: off this thread.
    pub(crate) async fn read(&self, fresh: bool) -> HostKernel {
        match self {
            Self::Observer(o) => {
                let view = if fresh {
                    o.snapshot_fresh().await
                } else {
                    o.snapshot().await
                };
                view.map_or(HostKernel::Unread, |v| HostKernel::View(Box::new(v)))
            }
            Self::Table(ports) => {
                let ports = ports.clone();
                tokio::task::spawn_blocking(move || {
                    crate::multihost::peers::client_established(&ports)
                })
                .await
                .map_or(HostKernel::Unread, HostKernel::Table)
            }
        }
    }
}

/// How often the folder is rewritten while the run goes on.
const WRITE_EVERY_S: u64 = 5;

pub(crate) struct HostFolder {
    dir: PathBuf,
    record: RunRecord,
    figures: FiguresBuilder,
    rows: Rows,
    intervals: IntervalRecorder,
    last_write: Instant,
    /// The client's CPU (user, system) when the current phase began, and at the last
    /// snapshot.
    phase_cpu: (f64, f64),
    last_cpu: (f64, f64),
}

impl HostFolder {
    /// Creates `dir` and writes a first summary, so a killed client leaves a readable one.
    pub(crate) fn create(dir: &Path, config: RunConfig, mut host: HostInfo) -> Result<HostFolder> {
        let started = crate::util::unix_ms_now();
        // The path's counters (the box's softnet ones, a reused namespace's) count from here.
        host.path_start = Some(PathReading::read());
        let record = RunRecord {
            c1m_version: env!("CARGO_PKG_VERSION").to_owned(),
            started_unix_ms: started,
            config,
            machine: crate::lab::run::host::machine(),
            host: Some(host),
            ..RunRecord::default()
        };
        let f = HostFolder {
            dir: dir.to_owned(),
            record,
            figures: FiguresBuilder::new(),
            rows: Rows::new(started),
            intervals: IntervalRecorder::new(started),
            last_write: Instant::now(),
            phase_cpu: (0.0, 0.0),
            last_cpu: (0.0, 0.0),
        };
        report::write_run(&f.dir, &f.record)
            .with_context(|| format!("writing the run folder {}", dir.display()))?;
        Ok(f)
    }

    /// Takes one snapshot: a time-series row (figures computed as the lab computes them,
    /// kernel vs app included) and the histograms' next interval. `kernel`: this host's
    /// kernel, read just before.
    pub(crate) fn observe(&mut self, snap: &AppSnapshot, kernel: HostKernel) {
        let now = crate::util::unix_ms_now();
        let view = match &kernel {
            HostKernel::View(v) => Some(v.as_ref()),
            _ => None,
        };
        let f = self.figures.build(
            now,
            view,
            None,
            Some(snap),
            None,
            Some(crate::host::mem_available()),
        );
        // No server on this host: its rows would compare the kernel with nothing.
        let rows = f
            .kernel_vs_app
            .iter()
            .filter(|r| app_source(&r.what) != Some(Source::Server))
            .cloned()
            .collect();
        let path = self.path();
        self.phase(snap, now, rows, path);
        let own = crate::host::own_cpu();
        if let Some(row) = self
            .rows
            .row(&f, &snap.phase, (crate::host::own_rss(), own.0 + own.1))
        {
            self.record.samples.push(Sample {
                kernel_client_established: match kernel {
                    HostKernel::Table(n) => Some(n),
                    _ => row.kernel_client_established,
                },
                ..row
            });
        }
        if let HostKernel::View(v) = kernel {
            self.record.kernel = Some(*v);
        }
        if let Err(e) = self.intervals.observe("client", snap) {
            eprintln!("c1m client: interval log: {e}");
        }
        self.record.client = Some(snap.clone());
        if self.last_write.elapsed().as_secs() >= WRITE_EVERY_S
            && let Err(e) = self.write()
        {
            eprintln!("c1m client: {e:#}");
        }
    }

    /// The client's phases as its snapshots name them (ramp, hold, closing, …), each
    /// with the kernel-vs-app rows of its last snapshot (the agreement at its end) and
    /// the client's CPU since the phase began and RSS now.
    fn phase(
        &mut self,
        snap: &AppSnapshot,
        now: u64,
        rows: Vec<KernelVsApp>,
        path: Option<PathFigures>,
    ) {
        let cpu = (snap.cpu_user_s, snap.cpu_sys_s);
        let phases = &mut self.record.phases;
        if phases.last().is_none_or(|p| p.name != snap.phase) {
            // The previous phase's end is this one's start.
            self.phase_cpu = self.last_cpu;
            phases.push(Phase {
                name: snap.phase.clone(),
                started_unix_ms: now,
                ..Phase::default()
            });
        }
        self.last_cpu = cpu;
        if let Some(p) = phases.last_mut() {
            p.ended_unix_ms = now;
            p.duration_s = now.saturating_sub(p.started_unix_ms) as f64 / 1e3;
            p.kernel_vs_app = rows;
            p.path = path;
            p.client = ProcessUsage {
                cpu_user_s: (cpu.0 - self.phase_cpu.0).max(0.0),
                cpu_sys_s: (cpu.1 - self.phase_cpu.1).max(0.0),
                rss_bytes: snap.rss_bytes,
                threads: snap.threads,
                open_fds: snap.open_fds,
            };
        }
    }

    /// This host's path now (its own namespace: the process runs in it), kept as the
    /// run's last reading, the first one kept as its start; the figures between them.
    fn path(&mut self) -> Option<PathFigures> {
        let now = PathReading::read();
        let h = self.record.host.as_mut()?;
        let start = h.path_start.get_or_insert_with(|| now.clone()).clone();
        h.path_last = Some(now);
        h.path_last
            .as_ref()
            .map(|n| PathFigures::between(&start, n))
    }

    /// Where this host's kernel figures come from, known once the observer tried to
    /// start (after the folder was first written, so a wrong clock endpoint is recorded).
    pub(crate) fn set_kernel_source(&mut self, source: KernelSource, fallback: Option<String>) {
        self.record.config.observer = source == KernelSource::Observer;
        if let Some(h) = self.record.host.as_mut() {
            h.kernel_source = Some(source);
            h.kernel_fallback = fallback;
        }
    }

    pub(crate) fn host_mut(&mut self) -> Option<&mut HostInfo> {
        self.record.host.as_mut()
    }

    fn write(&mut self) -> Result<()> {
        self.last_write = Instant::now();
        report::write_run(&self.dir, &self.record)
            .with_context(|| format!("writing the run folder {}", self.dir.display()))?;
        self.intervals
            .write(&self.dir)
            .with_context(|| format!("writing interval logs to {}", self.dir.display()))?;
        Ok(())
    }

    /// The last snapshot and kernel reading, the outcome (the client's verdict decides
    /// it, once) and its warnings; writes everything. The last kernel view is audited
    /// against the namespace's MIB.
    pub(crate) fn finish(
        mut self,
        last: &AppSnapshot,
        kernel: HostKernel,
        outcome: Outcome,
        warnings: Vec<String>,
    ) -> Result<()> {
        // The host's end is in its series: the merge reads its counts there.
        self.rows.force_next();
        self.observe(last, kernel);
        self.record.audit = self
            .record
            .kernel
            .as_ref()
            .map(crate::observer::audit::audit);
        self.record.ended_unix_ms = crate::util::unix_ms_now();
        self.record.outcome = outcome;
        self.record.warnings = warnings;
        self.write()
    }

    /// The run stopped before or during its connections on `reason`: written as
    /// `failed`, with the reason as its first warning (what the client saw so far stays).
    pub(crate) fn fail(mut self, reason: String) -> Result<()> {
        self.record.ended_unix_ms = crate::util::unix_ms_now();
        self.record.outcome = Outcome::Failed;
        self.record.warnings.insert(0, reason);
        self.write()
    }
}
