//! `--tune`: the sysctls a run needs, set for its life and put back after it, also when
//! tuned labs overlap and when one is killed.
//!
//! Each tuning process keeps a restore record, `tuned-PID.json` in its own state
//! directory (`state_dir::runtime_dir`, /run/c1m as root): its network
//! namespace, what it set (`changed`) and what another tuner had set that it relies on
//! (`held`, its preflight passed on those values), each with the value from before any
//! tuner. A sysctl goes back only when no other record holds it (reference counting over
//! processes, every read-modify-write under one flock): two `--tune` labs in one
//! namespace once ended with the first restoring somaxconn 128 under the second.
//!
//! A record whose process is gone is restored by the sweep at every `c1m run`'s start
//! and by `c1m doctor --restore`, in the record's own namespace: entered by its inode
//! (through `/run/netns/NAME` or any process or fd in it, `netns::open`). It is consumed
//! only by restoring it; a namespace that cannot be entered now leaves it for later, and
//! only `doctor --restore` drops one whose namespace is gone (its values went with it).
//! Before, a namespace kept only by `ip netns add` counted as dead, and any run
//! elsewhere deleted the record unrestored (`tcp_max_syn_backlog` stayed 8192).
//!
//! Root writes what a record says, so a record is read only from root's own directory,
//! from a file of root's own (`state_dir::read_private`), and only if every name in it
//! is a sysctl `--tune` sets (`sysctl::TUNABLE`); nothing else is ever joined to
//! /proc/sys. In world-writable /tmp any user once planted one naming `/etc/crontab`
//! (issue 30, case 1). Records an older c1m left in /tmp are not read, only named.

use std::{
    fs::{File, OpenOptions},
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::check::Check;
use crate::sysctl::{self, tunable_path};
use crate::{
    observer::procfs,
    procstat,
    state_dir::{self, StateError},
};

/// A record is a few hundred bytes; anything much larger is not one.
const MAX_RECORD_BYTES: u64 = 64 << 10;

#[derive(Debug, Error)]
pub(crate) enum TuneError {
    /// The cause is in the message, not a `source`: anyhow's chain would say it twice
    /// ("Permission denied (os error 13) (needs root): Permission denied (os error 13)").
    #[error("setting {name} to {value}: {cause}{}", needs_root(cause))]
    Write {
        name: String,
        value: String,
        cause: std::io::Error,
    },
    #[error("locking {0}: {1}")]
    Lock(String, std::io::Error),
    #[error(transparent)]
    State(#[from] StateError),
}

fn needs_root(e: &std::io::Error) -> &'static str {
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        "; sysctls are root's to set: sudo -E c1m …"
    } else {
        ""
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Changed {
    pub name: String,
    /// The value before any tuner set it.
    pub old: String,
    pub new: String,
}

/// A network namespace: somaxconn, the port range and the SYN backlog are per
/// namespace, and a value from one must not be put into another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ns {
    /// Its nsfs inode, by which it is found (`netns::open`).
    inode: Option<u32>,
    /// Its cookie, by which it is told from a later namespace that got the same inode
    /// (the kernel hands out the lowest free one).
    cookie: Option<u64>,
}

impl Ns {
    /// The calling thread's.
    fn here() -> Ns {
        Ns {
            inode: procfs::own_netns_inum(),
            cookie: crate::netns::own_cookie().ok(),
        }
    }

    /// Whether both name one namespace (a record without a cookie, by inode alone).
    fn is(self, other: Ns) -> bool {
        self.inode == other.inode
            && match (self.cookie, other.cookie) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }
}

/// One tuning process's restore record.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Record {
    /// Network namespace (nsfs inode) it ran in.
    netns: Option<u32>,
    /// That namespace's cookie.
    #[serde(default)]
    netns_cookie: Option<u64>,
    /// Its start time (/proc/PID/stat), so a reused pid is not taken for it.
    #[serde(default)]
    start_time: Option<u64>,
    /// What it set.
    changed: Vec<Changed>,
    /// What other tuners set that it relies on.
    #[serde(default)]
    held: Vec<Changed>,
}

/// A record as written now, or as a bare list (before namespaces were recorded).
#[derive(Deserialize)]
#[serde(untagged)]
enum AnyRecord {
    Current(Record),
    Bare(Vec<Changed>),
}

fn records_dir() -> Result<PathBuf, StateError> {
    state_dir::runtime_dir()
}

fn record_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("tuned-{pid}.json"))
}

/// A record on disk.
struct Stored {
    pid: u32,
    path: PathBuf,
    record: Record,
}

impl Stored {
    fn alive(&self) -> bool {
        match self.record.start_time {
            Some(t) => procstat::alive(self.pid, t),
            None => Path::new(&format!("/proc/{}", self.pid)).exists(),
        }
    }

    fn entries(&self) -> impl Iterator<Item = &Changed> {
        self.record.changed.iter().chain(&self.record.held)
    }

    fn ns(&self) -> Ns {
        Ns {
            inode: self.record.netns,
            cookie: self.record.netns_cookie,
        }
    }

    /// Whether it holds `name` as a tuner in namespace `ns` would see it.
    fn holds(&self, name: &str, ns: Ns) -> bool {
        same_scope(name, self.ns(), ns) && self.entries().any(|c| c.name == name)
    }
}

/// Whether a sysctl set in namespace `a` is the one a process in `b` sees.
fn same_scope(name: &str, a: Ns, b: Ns) -> bool {
    !per_netns(name) || a.is(b)
}

/// The records in a directory, and one line per file that was not read.
#[derive(Default)]
struct Listing {
    stored: Vec<Stored>,
    ignored: Vec<String>,
}

/// Every record in `dir` except `except`'s; a file that is not the user's own, or
/// names anything but a sysctl c1m tunes, is refused with a line saying why.
fn stored(dir: &Path, except: u32) -> Listing {
    let mut out = Listing::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("tuned-")
            .and_then(|s| s.strip_suffix(".json"))
            .and_then(|s| s.parse::<u32>().ok())
            .filter(|p| *p != except)
        else {
            continue;
        };
        let path = entry.path();
        match read_record(&path) {
            Ok(record) => out.stored.push(Stored { pid, path, record }),
            Err(why) => out.ignored.push(format!("not read: {why}")),
        }
    }
    out
}

/// The record at `path`, or why it is not trusted.
fn read_record(path: &Path) -> Result<Record, String> {
    let bytes = state_dir::read_private(path, MAX_RECORD_BYTES).map_err(|e| e.to_string())?;
    let record = match serde_json::from_slice::<AnyRecord>(&bytes) {
        Ok(AnyRecord::Current(r)) => r,
        Ok(AnyRecord::Bare(changed)) => Record {
            changed,
            ..Record::default()
        },
        // Half-written by a process killed mid-write (the rename makes that rare).
        Err(e) => return Err(format!("{}: not a restore record ({e})", path.display())),
    };
    let foreign: Vec<&str> = record
        .changed
        .iter()
        .chain(&record.held)
        .map(|c| c.name.as_str())
        .filter(|n| tunable_path(n).is_none())
        .collect();
    if !foreign.is_empty() {
        return Err(format!(
            "{} names {}, not a sysctl --tune sets",
            path.display(),
            foreign.join(", ")
        ));
    }
    Ok(record)
}

/// Restore records an older c1m kept in /tmp: never read (anyone could have written
/// them), only named, so that one root left is put back with that version.
fn legacy_records() -> Vec<String> {
    let mut dirs = vec![PathBuf::from("/tmp"), std::env::temp_dir()];
    dirs.dedup();
    let mut found = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("c1m-tuned-") && name.ends_with(".json") {
                let owner = std::fs::symlink_metadata(e.path())
                    .map(|m| std::os::unix::fs::MetadataExt::uid(&m));
                found.push((e.path(), owner.ok()));
            }
        }
    }
    found.sort();
    found
        .iter()
        .map(|(p, owner)| {
            format!(
                "not read: {} (owned by uid {}): restore records live in c1m's own state directory now, never in /tmp; one an older c1m left as root is restored by that version's `c1m doctor --restore`",
                p.display(),
                owner.map_or_else(|| "?".to_owned(), |u| u.to_string())
            )
        })
        .collect()
}

fn save(path: &Path, record: &Record) {
    if let Ok(json) = serde_json::to_string_pretty(record) {
        let _ = state_dir::write_private(path, json.as_bytes());
    }
}

/// Writes a sysctl of c1m's own list; any other name is refused, never joined to
/// /proc/sys (an absolute one would escape it).
fn write_sysctl(name: &str, value: &str) -> std::io::Result<()> {
    let path = tunable_path(name).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{name} is not a sysctl --tune sets"),
        )
    })?;
    std::fs::write(path, value)
}

/// Held while records are read and changed: tuners starting or ending at once see each
/// other. The kernel lets go when the process dies.
struct Lock(#[allow(dead_code)] File);

fn lock(dir: &Path) -> Result<Lock, TuneError> {
    let path = dir.join("tuned.lock");
    let err = |e| TuneError::Lock(path.display().to_string(), e);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o600)
        .open(&path)
        .map_err(err)?;
    file.lock().map_err(err)?;
    Ok(Lock(file))
}

/// Sysctls set for a run; the old values come back when this is dropped, unless another
/// tuner still holds them (it then puts them back).
#[derive(Debug)]
pub(crate) struct Tuning {
    /// What this process set.
    pub changed: Vec<Changed>,
    /// What another tuner set that this run relies on.
    pub held: Vec<Changed>,
    ns: Ns,
    start_time: Option<u64>,
    /// The records' directory (this user's state directory).
    dir: PathBuf,
    path: PathBuf,
}

/// What ending a tuning did.
#[derive(Debug, Default)]
pub(crate) struct Restore {
    /// Sysctls that could not be written back (`name = value`).
    pub failed: Vec<String>,
    /// Sysctls left as they are because another tuner still holds them (with its pid).
    pub left_to: Vec<(Changed, u32)>,
}

impl Tuning {
    /// Sets what `checks` ask for, counting with every other tuner's record.
    pub(crate) fn apply(checks: &[Check]) -> Result<Self, TuneError> {
        let dir = records_dir()?;
        let _lock = lock(&dir)?;
        let me = std::process::id();
        let mut t = Tuning {
            changed: Vec::new(),
            held: Vec::new(),
            ns: Ns::here(),
            start_time: procstat::start_time(me),
            path: record_path(&dir, me),
            dir,
        };
        // Live or killed, another tuner's values are what this run's preflight saw: held
        // here too, each with the value from before that tuner. (A file refused here
        // was named by the sweep at the run's start.)
        let others = stored(&t.dir, me).stored;
        for c in others
            .iter()
            .flat_map(|o| o.entries().filter(|c| same_scope(&c.name, o.ns(), t.ns)))
        {
            if !t.held.iter().any(|h| h.name == c.name) {
                t.held.push(Changed {
                    new: sysctl::read(&c.name).unwrap_or_else(|| c.new.clone()),
                    ..c.clone()
                });
            }
        }
        for (name, value) in checks.iter().filter_map(|c| c.tune.clone()) {
            let old = match t.held.iter().position(|h| h.name == name) {
                Some(i) => t.held.remove(i).old,
                None => sysctl::read(&name).unwrap_or_default(),
            };
            t.changed.push(Changed {
                name: name.clone(),
                old,
                new: value.clone(),
            });
            // Recorded before writing, so even a crash right after leaves a restore file
            // (restoring a value never written writes what is there).
            t.save();
            if let Err(cause) = write_sysctl(&name, &value) {
                // Not written: not recorded either (a user's `doctor --tune` once left a
                // record claiming tcp_max_syn_backlog went 2048 -> 8192). Under the lock
                // already: the rest is undone here, so the drop has nothing to take.
                t.changed.pop();
                t.save();
                t.restore_locked();
                return Err(TuneError::Write { name, value, cause });
            }
        }
        t.save();
        Ok(t)
    }

    fn save(&self) {
        if self.changed.is_empty() && self.held.is_empty() {
            let _ = std::fs::remove_file(&self.path);
            return;
        }
        let record = Record {
            netns: self.ns.inode,
            netns_cookie: self.ns.cookie,
            start_time: self.start_time,
            changed: self.changed.clone(),
            held: self.held.clone(),
        };
        save(&self.path, &record);
    }

    /// Puts back every sysctl no other tuner holds (newest first).
    pub(crate) fn restore(&mut self) -> Restore {
        if self.changed.is_empty() && self.held.is_empty() {
            return Restore::default();
        }
        // Without the lock, restoring still beats not.
        let _lock = lock(&self.dir);
        self.restore_locked()
    }

    fn restore_locked(&mut self) -> Restore {
        let mine: Vec<Changed> = self.changed.drain(..).chain(self.held.drain(..)).collect();
        let others: Vec<Stored> = stored(&self.dir, std::process::id())
            .stored
            .into_iter()
            .filter(Stored::alive)
            .collect();
        let mut out = Restore::default();
        let mut back = Vec::new();
        for c in mine {
            match others.iter().find(|o| o.holds(&c.name, self.ns)) {
                Some(o) => out.left_to.push((c, o.pid)),
                None => back.push(c),
            }
        }
        let failed = restore_all(&back);
        out.failed = failed.iter().map(assignment).collect();
        // What is still to restore, and only that, stays recorded for a sweep.
        self.changed = failed;
        self.save();
        self.changed.clear();
        out
    }
}

impl Drop for Tuning {
    fn drop(&mut self) {
        for f in self.restore().failed {
            eprintln!("c1m: could not restore {f}");
        }
    }
}

/// Writes each old value back, newest first; returns the ones that failed.
fn restore_all(changed: &[Changed]) -> Vec<Changed> {
    changed
        .iter()
        .rev()
        .filter(|c| write_sysctl(&c.name, &c.old).is_err())
        .cloned()
        .collect()
}

/// `name = old`, as the restore lines name what failed.
fn assignment(c: &Changed) -> String {
    format!("{} = {}", c.name, c.old)
}

/// Who sweeps the records of tuners that are gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sweep {
    /// A run's start: what cannot be restored now is left for later.
    Run,
    /// `c1m doctor --restore`: also drops a record whose namespace is gone.
    Doctor,
}

/// What a sweep did.
#[derive(Debug, Default)]
pub(crate) struct Swept {
    /// Restored, with the namespace when it was another one than the sweeper's.
    pub restored: Vec<(Changed, Option<u32>)>,
    /// Dropped: their namespace is gone, and the values with it.
    pub gone: Vec<(Changed, u32)>,
    /// Left for later, one line each (why, and the fix).
    pub left: Vec<String>,
    /// Records restored or dropped, so removed.
    pub removed: Vec<PathBuf>,
    /// Files not read (not the user's own, naming something not a sysctl c1m tunes,
    /// or an older c1m's in /tmp), one line each.
    pub ignored: Vec<String>,
}

/// Restores the records of tuners that are gone (killed before they could), each in its
/// own namespace; a sysctl another tuner still holds stays (that one restores it).
pub(crate) fn restore_orphans(sweep: Sweep) -> Result<Swept, TuneError> {
    let mut out = Swept {
        ignored: legacy_records(),
        ..Swept::default()
    };
    let dir = records_dir()?;
    let _lock = lock(&dir)?;
    let here = Ns::here();
    let listing = stored(&dir, std::process::id());
    out.ignored.extend(listing.ignored);
    let (live, dead): (Vec<Stored>, Vec<Stored>) =
        listing.stored.into_iter().partition(Stored::alive);
    for d in dead {
        let ns = d.ns();
        let entries: Vec<Changed> = d
            .entries()
            .filter(|c| !live.iter().any(|l| l.holds(&c.name, ns)))
            .cloned()
            .collect();
        // Box-wide sysctls and this namespace's are written here; another namespace's
        // inside it.
        let (here_too, theirs): (Vec<Changed>, Vec<Changed>) = entries
            .into_iter()
            .partition(|c| !per_netns(&c.name) || ns.inode.is_none() || ns.is(here));
        let mut left = Vec::new();
        let failed = restore_all(&here_too);
        if !failed.is_empty() {
            out.left.push(format!(
                "could not restore {} (needs root): sudo c1m doctor --restore",
                assignments(&failed)
            ));
        }
        settle(here_too, &failed, None, &mut out.restored, &mut left);
        if let (Some(inode), false) = (ns.inode, theirs.is_empty()) {
            match enter_and_restore(ns, &theirs) {
                Reached::Restored(failed) => {
                    if !failed.is_empty() {
                        out.left.push(format!(
                            "could not restore {} in network namespace net:[{inode}] (needs root): sudo c1m doctor --restore",
                            assignments(&failed)
                        ));
                    }
                    settle(theirs, &failed, Some(inode), &mut out.restored, &mut left);
                }
                Reached::Unreachable(e) => {
                    out.left.push(format!(
                        "could not enter network namespace net:[{inode}] to restore {} ({e}): sudo c1m doctor --restore",
                        names(&theirs)
                    ));
                    left.extend(theirs);
                }
                Reached::Gone if sweep == Sweep::Doctor => {
                    out.gone.extend(theirs.into_iter().map(|c| (c, inode)));
                }
                Reached::Gone => {
                    out.left.push(format!(
                        "network namespace net:[{inode}] of lab pid {} is not found ({}): c1m doctor --restore drops the record if it is gone",
                        d.pid,
                        names(&theirs)
                    ));
                    left.extend(theirs);
                }
            }
        }
        if left.is_empty() {
            if std::fs::remove_file(&d.path).is_ok() {
                out.removed.push(d.path.clone());
            }
        } else {
            let keep = Record {
                changed: left,
                held: Vec::new(),
                ..d.record.clone()
            };
            save(&d.path, &keep);
        }
    }
    Ok(out)
}

fn assignments(changed: &[Changed]) -> String {
    changed
        .iter()
        .map(assignment)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Sorts `changed` into restored (with the namespace, when another) and left (failed).
fn settle(
    changed: Vec<Changed>,
    failed: &[Changed],
    inode: Option<u32>,
    restored: &mut Vec<(Changed, Option<u32>)>,
    left: &mut Vec<Changed>,
) {
    for c in changed {
        if failed.iter().any(|f| f.name == c.name) {
            left.push(c);
        } else {
            restored.push((c, inode));
        }
    }
}

/// How an attempt to restore inside another namespace went.
enum Reached {
    /// Written there; the ones that failed.
    Restored(Vec<Changed>),
    /// No namespace has the inode, or the one that has it now is a later one.
    Gone,
    Unreachable(std::io::Error),
}

fn enter_and_restore(ns: Ns, changed: &[Changed]) -> Reached {
    let Some(fd) = ns.inode.and_then(crate::netns::open) else {
        return Reached::Gone;
    };
    let inside = crate::netns::run_in(&fd, || {
        // The cookie tells the recorded namespace from a later one with its inode.
        let now = Ns {
            inode: ns.inode,
            cookie: crate::netns::own_cookie().ok(),
        };
        ns.is(now).then(|| restore_all(changed))
    });
    match inside {
        Ok(Some(failed)) => Reached::Restored(failed),
        Ok(None) => Reached::Gone,
        Err(e) => Reached::Unreachable(e),
    }
}

fn names(changed: &[Changed]) -> String {
    changed
        .iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether a sysctl has a value per network namespace (`net.core.somaxconn` and the
/// `net.ipv4` ones --tune sets) rather than one for the box (`fs.*`, and the conntrack
/// table size and the neighbour thresholds, which only the first namespace has).
pub(crate) fn per_netns(name: &str) -> bool {
    name == "net.core.somaxconn"
        || (name.starts_with("net.ipv4.") && !name.starts_with("net.ipv4.neigh."))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn only_network_sysctls_belong_to_a_namespace() {
        assert!(per_netns("net.core.somaxconn"));
        assert!(per_netns("net.ipv4.ip_local_port_range"));
        assert!(!per_netns("fs.file-max"));
        assert!(!per_netns("net.netfilter.nf_conntrack_max"));
        assert!(!per_netns("net.ipv4.neigh.default.gc_thresh3"));
        let ns = |inode, cookie| Ns {
            inode: Some(inode),
            cookie,
        };
        assert!(same_scope("fs.file-max", ns(1, None), ns(2, None)));
        assert!(!same_scope("net.core.somaxconn", ns(1, None), ns(2, None)));
        assert!(same_scope(
            "net.core.somaxconn",
            ns(1, None),
            ns(1, Some(7))
        ));
        // The same inode, a later namespace: not the same scope.
        assert!(!same_scope(
            "net.core.somaxconn",
            ns(1, Some(7)),
            ns(1, Some(8))
        ));
    }

    /// The cookie of a thread's namespace changes with the namespace, and a namespace
    /// is entered and read back by its inode.
    #[test]
    fn a_namespace_is_found_by_inode_and_told_apart_by_cookie() {
        if !crate::observer::privileges::is_root() {
            eprintln!("SKIP a_namespace_is_found_by_inode_and_told_apart_by_cookie: needs root");
            return;
        }
        let here = Ns::here();
        let private = std::thread::spawn(|| {
            crate::netns::enter_private().unwrap();
            let ns = Ns::here();
            let fd = crate::netns::open(ns.inode.unwrap()).unwrap();
            (ns, fd)
        })
        .join()
        .unwrap();
        let (ns, fd) = private;
        assert!(!ns.is(here) && ns.cookie != here.cookie);
        let inside = crate::netns::run_in(&fd, Ns::here).unwrap();
        assert!(inside.is(ns), "{inside:?} {ns:?}");
        assert_eq!(inside.cookie, ns.cookie);
    }

    /// A record is trusted for sysctls of c1m's own list only: a planted name (a path,
    /// or a sysctl --tune never sets) is refused, and never written (issue 30, case 1).
    #[test]
    fn a_record_naming_anything_but_a_tuned_sysctl_is_refused() {
        let dir = std::env::temp_dir().join(format!("c1m-tuned-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let proof = dir.join("proof");
        let record = |name: &str| {
            format!(r#"{{"netns":null,"changed":[{{"name":"{name}","old":"planted","new":"x"}}]}}"#)
        };
        let path = |pid: u32| record_path(&dir, pid);
        let planted = [
            proof.display().to_string(),
            "kernel.core_pattern".to_owned(),
        ];
        for (pid, name) in [(4_194_305, &planted[0]), (4_194_306, &planted[1])] {
            state_dir::write_private(&path(pid), record(name).as_bytes()).unwrap();
        }
        state_dir::write_private(&path(4_194_307), record("net.core.somaxconn").as_bytes())
            .unwrap();
        let listing = stored(&dir, 0);
        let kept: Vec<u32> = listing.stored.iter().map(|s| s.pid).collect();
        assert_eq!(kept, vec![4_194_307]);
        assert_eq!(listing.ignored.len(), 2, "{:?}", listing.ignored);
        for name in &planted {
            assert!(
                listing
                    .ignored
                    .iter()
                    .any(|l| l.contains(name.as_str()) && l.contains("not a sysctl --tune sets")),
                "{:?}",
                listing.ignored
            );
        }
        assert!(write_sysctl(&planted[0], "x").is_err());
        assert!(!proof.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The cause once, and the fix (issue 30, case 13).
    #[test]
    fn a_failed_write_says_its_cause_once() {
        let e = anyhow::Error::from(TuneError::Write {
            name: "net.core.somaxconn".into(),
            value: "4096".into(),
            cause: std::io::Error::from_raw_os_error(libc::EACCES),
        })
        .context("--tune");
        let line = format!("{e:#}");
        assert_eq!(line.matches("os error 13").count(), 1, "{line}");
        assert!(line.contains("sudo"), "{line}");
    }

    #[test]
    fn records_of_every_version_read_back() {
        let bare = r#"[{"name":"fs.file-max","old":"1","new":"2"}]"#;
        assert!(matches!(
            serde_json::from_str::<AnyRecord>(bare),
            Ok(AnyRecord::Bare(v)) if v.len() == 1
        ));
        let before_held = r#"{"netns":7,"changed":[{"name":"fs.file-max","old":"1","new":"2"}]}"#;
        let Ok(AnyRecord::Current(r)) = serde_json::from_str::<AnyRecord>(before_held) else {
            panic!("a record without held");
        };
        assert_eq!((r.netns, r.changed.len(), r.held.len()), (Some(7), 1, 0));
    }
}
