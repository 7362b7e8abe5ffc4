//! A client host's run folder (`c1m client --run-dir`): the same `summary.json`,
//! `timeseries.csv`, `.hgrm` and `.hlog` files a one-box run writes, with only the
//! client side filled and the host (shard, clock offset) named, so `c1m merge` reads
//! server and client folders with one reader.

use std::{
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{Context, Result};

use super::model::HostInfo;
use crate::{
    figures::{FiguresBuilder, Rows},
    model::{Outcome, RunConfig, RunRecord, Sample},
    report::{self, IntervalRecorder},
    workload::stats::snapshot::AppSnapshot,
};

/// How often the folder is rewritten while the run goes on.
const WRITE_EVERY_S: u64 = 5;

pub(crate) struct HostFolder {
    dir: PathBuf,
    record: RunRecord,
    figures: FiguresBuilder,
    rows: Rows,
    intervals: IntervalRecorder,
    last_write: Instant,
    /// The server's ports: this host's kernel count is of connections to them.
    server_ports: Vec<u16>,
}

impl HostFolder {
    /// Creates `dir` and writes a first summary, so a killed client leaves a readable one.
    pub(crate) fn create(
        dir: &Path,
        config: RunConfig,
        host: HostInfo,
        server_ports: Vec<u16>,
    ) -> Result<HostFolder> {
        let started = crate::util::unix_ms_now();
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
            server_ports,
        };
        report::write_run(&f.dir, &f.record)
            .with_context(|| format!("writing the run folder {}", dir.display()))?;
        Ok(f)
    }

    /// The server ports whose connections this host's kernel count covers.
    pub(crate) fn server_ports(&self) -> Vec<u16> {
        self.server_ports.clone()
    }

    /// Takes one snapshot: a time-series row (figures computed as the lab computes them)
    /// and the histograms' next interval. `kernel_established`: this host's kernel count
    /// of ESTABLISHED connections to the server, read just before.
    pub(crate) fn observe(&mut self, snap: &AppSnapshot, kernel_established: Option<i64>) {
        let now = crate::util::unix_ms_now();
        let f = self.figures.build(
            now,
            None,
            None,
            Some(snap),
            None,
            Some(crate::host::mem_available()),
        );
        let own = crate::host::own_cpu();
        if let Some(row) = self
            .rows
            .row(&f, &snap.phase, (crate::host::own_rss(), own.0 + own.1))
        {
            self.record.samples.push(Sample {
                kernel_client_established: kernel_established,
                ..row
            });
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

    /// The last snapshot, the outcome and any warnings; writes everything.
    pub(crate) fn finish(mut self, last: &AppSnapshot, warnings: Vec<String>) -> Result<()> {
        let kernel = crate::multihost::peers::client_established(&self.server_ports);
        self.observe(last, Some(kernel));
        self.record.ended_unix_ms = crate::util::unix_ms_now();
        self.record.outcome = if warnings.is_empty() {
            Outcome::Complete
        } else {
            Outcome::Degraded
        };
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
