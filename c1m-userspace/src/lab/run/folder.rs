//! A run folder belongs to one lab. Its name has one-second resolution, so two labs with
//! the same `--out` started in the same second would pick the same one: the folder is
//! made with mkdir(2), which fails on a folder that exists, and a taken name gets the
//! next free suffix (`20261130-002901-2`). Measured before: two labs sharing a folder
//! lost a journal ("No such file or directory"), fought over `server.sock`, and left one
//! summary mixing both.
//!
//! A run that fails says so in its folder: `failed` and why, in place of `running`, even
//! when the folder took no more exports.

use std::{
    io,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};

use crate::model::{Outcome, RunRecord};

/// Suffixes tried before giving up: far more labs than a box starts in one second.
const MAX_SUFFIX: u32 = 1000;

/// Creates `<parent>/<stamp>` (or `<stamp>-2`, `-3`, … if taken) for this lab alone.
pub(crate) fn create_unique(parent: &Path, stamp: &str) -> io::Result<PathBuf> {
    std::fs::create_dir_all(parent)?;
    for i in 1..=MAX_SUFFIX {
        let name = match i {
            1 => stamp.to_owned(),
            _ => format!("{stamp}-{i}"),
        };
        let dir = parent.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("{MAX_SUFFIX} folders named {stamp}-N exist already"),
    ))
}

/// Why a given run folder is refused: it exists, so it is another lab's.
#[derive(Debug, thiserror::Error)]
#[error("it exists already: a run folder is never shared (another lab writes there)")]
pub(crate) struct Taken;

impl Taken {
    /// Whether `e` (anyhow's, with any context) is a given folder refused as taken.
    pub(crate) fn is(e: &anyhow::Error) -> bool {
        e.downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref)
            .is_some_and(|inner| inner.is::<Taken>())
    }
}

/// Creates `dir` (a folder chosen by the caller, e.g. one run of `--servers`) for this
/// lab alone: a folder that exists belongs to another lab and is refused.
pub(crate) fn create_given(dir: &Path) -> io::Result<()> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::create_dir(dir).map_err(|e| match e.kind() {
        io::ErrorKind::AlreadyExists => io::Error::new(e.kind(), Taken),
        _ => e,
    })
}

/// A run that stopped on an error before the lab could conclude it: its folder says
/// `failed` and why, so a comparison lists it beside the others.
pub(crate) fn record_failure(dir: &Path, error: &anyhow::Error) -> Result<()> {
    let mut record = crate::report::load_run(dir).unwrap_or_else(|_| RunRecord {
        c1m_version: env!("CARGO_PKG_VERSION").to_owned(),
        started_unix_ms: crate::util::unix_ms_now(),
        ..RunRecord::default()
    });
    if record.outcome == Outcome::Running {
        record.outcome = Outcome::Failed;
        record.ended_unix_ms = crate::util::unix_ms_now();
        record
            .warnings
            .insert(0, format!("the run failed: {error:#}"));
    }
    crate::report::write_run(dir, &record).with_context(|| format!("writing {}", dir.display()))?;
    Ok(())
}

/// The run folder did not take the exports (full, say): summary.json must not keep
/// saying `running`. It says `failed` with the reason, written alone after the files
/// `c1m report` rebuilds from it are removed to make room, or it is removed. Measured
/// before: a full 64 KiB tmpfs left `running` and exit 1.
pub(super) fn fail_in_place(dir: &Path, record: &mut RunRecord, e: &anyhow::Error) {
    use crate::report::{REPORT, SCHEMA, SUMMARY, TIMESERIES};
    match record.warnings.first() {
        Some(w) if w.starts_with("the run failed:") => {}
        _ => record.warnings.insert(0, format!("the run failed: {e:#}")),
    }
    record.outcome = Outcome::Failed;
    if record.ended_unix_ms == 0 {
        record.ended_unix_ms = crate::util::unix_ms_now();
    }
    for name in [REPORT, TIMESERIES, SCHEMA] {
        let _ = std::fs::remove_file(dir.join(name));
    }
    let summary = dir.join(SUMMARY);
    let written = serde_json::to_vec_pretty(&*record)
        .map_err(|e| e.to_string())
        .and_then(|json| {
            crate::report::atomic::write_atomic(&summary, &json).map_err(|e| e.to_string())
        });
    if written.is_err() {
        let _ = std::fs::remove_file(&summary);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn a_taken_name_gets_the_next_suffix_and_a_given_folder_is_never_shared() {
        let parent = crate::report::fixture::test_dir("run-folder");
        let a = create_unique(&parent, "20261130-002901").unwrap();
        let b = create_unique(&parent, "20261130-002901").unwrap();
        let c = create_unique(&parent, "20261130-002901").unwrap();
        assert_eq!(a, parent.join("20261130-002901"));
        assert_eq!(b, parent.join("20261130-002901-2"));
        assert_eq!(c, parent.join("20261130-002901-3"));
        let given = parent.join("servers/go-1");
        create_given(&given).unwrap();
        let e = create_given(&given).unwrap_err();
        assert!(e.to_string().contains("never shared"), "{e}");
        // Told apart from any other failure, through the context a caller adds: a run
        // refused another lab's folder never writes its failure there.
        let e = anyhow::Error::from(e).context("creating the run folder");
        assert!(Taken::is(&e));
        let other = anyhow::Error::from(create_given(&given.join("x/y\0")).unwrap_err());
        assert!(!Taken::is(&other.context("creating the run folder")));
    }
}
