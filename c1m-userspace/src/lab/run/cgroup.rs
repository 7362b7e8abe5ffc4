//! A cgroup v2 of the lab's own for a server it starts. Every descendant lands in it
//! whatever it does (setsid and a double fork leave the process tree and the process
//! group, not the cgroup), so the whole server is found (`cgroup.procs`), ended
//! (`cgroup.kill`) and its CPU read (`cpu.stat`, which keeps what exited processes
//! used) without walking /proc's parent links. Measured before: `setsid -f` left the
//! server listening after the lab ended, its connections counted nowhere.
//!
//! The cgroup is a child of the lab's own (creating it and moving a process there need
//! write access to both: root, or a delegated subtree). The v2 hierarchy is the one
//! sock_ops attaches to; on a hybrid box it has no memory controller, so memory stays
//! the RSS of the member processes.

use std::{
    fs::{File, OpenOptions},
    io::{self, Write},
    os::fd::{AsFd, BorrowedFd},
    path::{Path, PathBuf},
    sync::atomic::{AtomicU32, Ordering},
    time::{Duration, Instant},
};

use thiserror::Error;

#[derive(Debug, Error)]
pub(crate) enum CgroupError {
    #[error("no cgroup v2 hierarchy is mounted")]
    NoHierarchy,
    #[error("this process's cgroup v2 is not in /proc/self/cgroup")]
    Unknown,
    #[error("creating {}: {source}", path.display())]
    Create { path: PathBuf, source: io::Error },
    #[error("this kernel has no cgroup.kill (Linux 5.14 and later do)")]
    NoKill,
}

/// A cgroup this process made; removed (its members killed first) when dropped.
#[derive(Debug)]
pub(crate) struct Cgroup {
    path: PathBuf,
    /// `cgroup.procs`, open for writing before the fork: the child writes "0" there to
    /// move itself in before it execs, so nothing it starts is ever outside.
    procs: File,
}

/// Cgroups made by this process, so names never collide (`--servers` makes one per run).
static MADE: AtomicU32 = AtomicU32::new(0);

impl Cgroup {
    /// A new child of this process's own cgroup v2.
    pub(crate) fn create(purpose: &str) -> Result<Cgroup, CgroupError> {
        let root = crate::observer::procfs::cgroup2_root().ok_or(CgroupError::NoHierarchy)?;
        let own = own_path().ok_or(CgroupError::Unknown)?;
        let name = format!(
            "c1m-{purpose}-{}-{}",
            std::process::id(),
            MADE.fetch_add(1, Ordering::Relaxed)
        );
        let path = root.join(own.trim_start_matches('/')).join(name);
        let err = |source| CgroupError::Create {
            path: path.clone(),
            source,
        };
        std::fs::create_dir(&path).map_err(err)?;
        // Without cgroup.kill a process that leaves the tree could not be ended with the
        // rest: better the tree walk, which says so, than a cgroup that only looks safe.
        if !path.join("cgroup.kill").exists() {
            let _ = std::fs::remove_dir(&path);
            return Err(CgroupError::NoKill);
        }
        let procs = OpenOptions::new()
            .write(true)
            .open(path.join("cgroup.procs"))
            .map_err(|e| {
                let _ = std::fs::remove_dir(&path);
                err(e)
            })?;
        Ok(Cgroup { path, procs })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The path under the hierarchy's root, as /proc/PID/cgroup names it.
    pub(crate) fn name(&self) -> String {
        let root = crate::observer::procfs::cgroup2_root().unwrap_or_default();
        let rel = self.path.strip_prefix(&root).unwrap_or(&self.path);
        format!("/{}", rel.display())
    }

    /// The fd a child writes "0" to (in `pre_exec`, async-signal-safe) to join.
    pub(crate) fn procs_fd(&self) -> BorrowedFd<'_> {
        self.procs.as_fd()
    }

    /// Every process in it now.
    pub(crate) fn pids(&self) -> Vec<u32> {
        pids_of(&self.path)
    }

    /// User and system CPU seconds of everything that ran in it, exited or not.
    pub(crate) fn cpu_seconds(&self) -> Option<(f64, f64)> {
        let text = std::fs::read_to_string(self.path.join("cpu.stat")).ok()?;
        let field = |key: &str| -> Option<f64> {
            let us: u64 = text
                .lines()
                .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())?;
            Some(us as f64 / 1e6)
        };
        Some((field("user_usec ")?, field("system_usec ")?))
    }

    /// Whether any process is in it.
    pub(crate) fn populated(&self) -> bool {
        populated(&self.path)
    }

    /// SIGKILLs every process in it (the kernel does, atomically, new forks included).
    pub(crate) fn kill(&self) -> io::Result<()> {
        kill(&self.path)
    }

    /// Kills what is left, waits (at most `limit`) until it is empty, and removes it.
    pub(crate) fn remove(&self, limit: Duration) -> io::Result<()> {
        remove(&self.path, limit)
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = self.remove(Duration::from_secs(2));
    }
}

/// Kills every process in the cgroup at `path`, waits (bounded) until it is empty and
/// removes it; a cgroup already gone is fine. For a lab's leftovers too.
pub(crate) fn remove(path: &Path, limit: Duration) -> io::Result<()> {
    if !path.exists() {
        return Ok(());
    }
    if populated(path) {
        kill(path)?;
    }
    let until = Instant::now() + limit;
    while populated(path) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    match std::fs::remove_dir(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn kill(path: &Path) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .open(path.join("cgroup.kill"))?
        .write_all(b"1")
}

fn populated(path: &Path) -> bool {
    std::fs::read_to_string(path.join("cgroup.events"))
        .map(|t| t.lines().any(|l| l == "populated 1"))
        .unwrap_or(false)
}

/// The processes in the cgroup at `path`.
pub(crate) fn pids_of(path: &Path) -> Vec<u32> {
    std::fs::read_to_string(path.join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// This process's cgroup v2 path (`0::/path` in /proc/self/cgroup).
fn own_path() -> Option<String> {
    let groups = procfs::process::Process::myself().ok()?.cgroups().ok()?;
    groups
        .0
        .into_iter()
        .find(|g| g.hierarchy == 0)
        .map(|g| g.pathname)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use std::os::unix::process::CommandExt;

    use super::*;

    /// A child that joins before exec and forks a grandchild into another session is
    /// found, its CPU read, and everything ends with the cgroup.
    #[test]
    fn a_tree_that_leaves_its_session_stays_in_the_cgroup_and_ends_with_it() {
        if !crate::observer::privileges::is_root() {
            eprintln!("SKIP a_tree_that_leaves_its_session_stays_in_the_cgroup: needs root");
            return;
        }
        let cg = Cgroup::create("test").unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&cg.procs_fd());
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "setsid -f sleep 60; exec sleep 60"]);
        // SAFETY: write(2) on an fd opened before the fork; async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                let fd = BorrowedFd::borrow_raw(fd);
                rustix::io::write(fd, b"0")?;
                Ok(())
            });
        }
        let mut child = cmd.spawn().unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        while cg.pids().len() < 2 {
            assert!(Instant::now() < until, "{:?}", cg.pids());
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(cg.pids().contains(&child.id()));
        assert!(cg.cpu_seconds().is_some());
        assert!(cg.populated());
        cg.remove(Duration::from_secs(5)).unwrap();
        assert!(!cg.path().exists());
        let _ = child.wait();
    }
}
