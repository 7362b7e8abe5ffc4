//! The lab's c1m children (its server and its client): started with the lab's death
//! tied to theirs, killed when the run lets go of them, asked for their stats.

use std::{path::Path, process::Stdio, time::Duration};

use anyhow::{Context, Result};
use tokio::process::Child;

use super::ctl::Ctl;
use crate::workload::stats::snapshot::AppSnapshot;

/// The child processes of the run, killed if still alive when dropped.
pub(super) struct Children {
    /// c1m's own server (a foreign one is the lab's [`ForeignServer`]).
    pub(super) server: Option<Child>,
    pub(super) client: Option<Child>,
}

impl Drop for Children {
    fn drop(&mut self) {
        if let Some(s) = self.server.as_mut() {
            let _ = s.start_kill();
        }
        if let Some(c) = self.client.as_mut() {
            let _ = c.start_kill();
        }
    }
}

/// Starts `c1m ARGV…` with its output in `log`. Called from the lab's main thread (the
/// `block_on` of [`main`]), which lives as long as the lab: the child's death signal
/// is tied to the thread that forked it.
pub(super) fn spawn_c1m(argv: &[std::ffi::OsString], log: &Path) -> Result<Child> {
    let exe = crate::util::own_exe();
    let log = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args(argv)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true);
    let lab = std::process::id();
    // SAFETY: setpriority, prctl and getppid are async-signal-safe and touch no memory;
    // the workload runs at the default weight, not the lab's raised one, and dies with
    // the lab (a `kill -9` of the lab left server, client and workers running).
    unsafe {
        cmd.pre_exec(move || {
            crate::priority::load();
            crate::util::die_with_parent(lab)
        });
    }
    cmd.spawn().context("starting a c1m child process")
}

pub(super) async fn stats(ctl: &Ctl) -> Option<AppSnapshot> {
    stats_within(ctl, Duration::from_secs(5)).await
}

pub(super) async fn stats_within(ctl: &Ctl, limit: Duration) -> Option<AppSnapshot> {
    let line = tokio::time::timeout(limit, ctl.call("stats"))
        .await
        .ok()?
        .ok()?;
    serde_json::from_str(&line).ok()
}
