//! The lab's journal: what a `kill -9` of `c1m run` would leave behind, written before
//! it exists. The lab's pid, its run folder, the sysctls it changed and every child it
//! started (server, client, their workers), each with its start time from
//! /proc/PID/stat, so a pid the kernel has since given to another process is never
//! taken for the child. One copy sits in the run folder (`journal.json`), one in the
//! runtime directory (`labs/PID.json`), where `c1m run` and `c1m doctor` look for the
//! journals of labs that are gone; `c1m doctor --restore` ends what they left.
//!
//! Only journals in the user's own state directory, in files of the user's own, are
//! read (`state_dir`), and a child is signalled only while its pid, start time and
//! owner are still the journal's: a journal planted in another user's directory once
//! had `doctor --restore` kill the reader's own process (issue 30, case 2).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{
    lab::tuning::Changed,
    procstat,
    state_dir::{self, StateError},
};

/// A journal is a few KiB; anything much larger is not one.
const MAX_BYTES: u64 = 1 << 20;

/// The journal's name in the run folder.
pub const FILE: &str = "journal.json";

/// What a child of the lab was to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The server process: c1m's own server's supervisor, or a foreign server.
    Server,
    /// c1m's client supervisor process.
    Client,
    /// A worker process of the server: a process shard of c1m's, or a descendant of a
    /// foreign server.
    ServerWorker,
    /// A worker process of c1m's client (a process shard).
    ClientWorker,
}

impl Role {
    /// The role in words ("server worker"), for messages.
    pub fn name(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Client => "client",
            Role::ServerWorker => "server worker",
            Role::ClientWorker => "client worker",
        }
    }
}

/// One process, named for good by its pid and start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proc {
    /// The process id.
    pub pid: u32,
    /// Clock ticks since boot (/proc/PID/stat field 22).
    pub start_time: u64,
    /// Its real uid: a process is signalled only while it is still the journal's user's
    /// (None in journals of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
}

impl Proc {
    /// The process `pid` as it is now (None if gone).
    pub(crate) fn of(pid: u32) -> Option<Proc> {
        Some(Proc {
            pid,
            start_time: procstat::start_time(pid)?,
            uid: procstat::uid(pid),
        })
    }

    /// Whether the process still runs with the recorded start time (its pid not reused).
    pub fn alive(&self) -> bool {
        procstat::alive(self.pid, self.start_time)
    }

    /// Why the process with this pid now is not the one recorded (None when it is):
    /// another start time is another process, another owner is another user's.
    fn not_the_recorded_one(&self) -> Option<String> {
        if !self.alive() {
            return Some("it ended, or its pid is another process's now".to_owned());
        }
        match (self.uid, procstat::uid(self.pid)) {
            (Some(want), Some(found)) if want == found => None,
            (Some(want), Some(found)) => Some(format!(
                "it runs as uid {found}, its journal says uid {want}"
            )),
            (None, _) => Some(
                "its journal (an older c1m's) does not say whose it is; end it by hand if it is the lab's"
                    .to_owned(),
            ),
            (Some(_), None) => Some("its owner cannot be read".to_owned()),
        }
    }
}

/// A process of the run the lab is answerable for, and what it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Child {
    /// What the process was to the lab.
    pub role: Role,
    /// Its pid and start time.
    #[serde(flatten)]
    pub proc: Proc,
}

/// What `c1m run` leaves behind to be undone if it is killed: `journal.json` and
/// `labs/PID.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Journal {
    /// The lab process itself.
    pub lab: Proc,
    /// The run folder the lab writes.
    #[serde(with = "crate::util::os_path")]
    pub run_folder: PathBuf,
    /// The command line the lab was started with.
    pub command_line: String,
    /// Network namespace (nsfs inode) the lab ran in: its sysctls are that namespace's.
    pub netns: u32,
    /// The sysctls the lab changed, each with its value before.
    pub sysctls: Vec<Changed>,
    /// Every child process recorded (servers, clients, their workers), in the order seen.
    pub children: Vec<Child>,
    /// Cgroups it made for a foreign server: whatever runs in one is that server's,
    /// however it forked (ended by `cgroup.kill`, then removed).
    #[serde(default, with = "crate::util::os_path::vec")]
    pub cgroups: Vec<PathBuf>,
    /// Network namespaces it made (`c1m run --hosts`), by name under /run/netns, each
    /// recorded before it is made; only names of its own pid's prefix
    /// ([`crate::netns::hosts_prefix`]) are ever deleted on a journal's word.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// Links it made (veth pairs onto the hosts' bridge), by name, under the same rule.
    /// They live in the namespaces above and go with them; one found in the box's own
    /// namespace is deleted too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
}

fn labs_dir() -> Result<PathBuf, StateError> {
    state_dir::private_dir(&state_dir::runtime_dir()?.join("labs"))
}

/// The journal at `path`, if it is one and the user's own (else why not).
fn read(path: &Path) -> Result<Journal, String> {
    let bytes = state_dir::read_private(path, MAX_BYTES).map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{}: not a journal ({e})", path.display()))
}

/// Every journal file in the user's labs directory, read or refused.
/// A journal file, read, or why it was refused.
type Entry = (PathBuf, Result<Journal, String>);

fn journals() -> Result<Vec<Entry>, StateError> {
    let dir = labs_dir()?;
    let entries = std::fs::read_dir(&dir).map_err(|cause| StateError::Io {
        path: dir.clone(),
        cause,
    })?;
    Ok(entries
        .flatten()
        .map(|e| e.path())
        // A `.tmp` is a write in progress (or cut short): the rename publishes it.
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let j = read(&p);
            (p, j)
        })
        .collect())
}

/// The running lab's journal; the well-known copy goes when the lab ends normally.
pub(crate) struct JournalFile {
    journal: Journal,
    /// The copy in the runtime directory (None if that could not be made).
    well_known: Option<PathBuf>,
}

impl JournalFile {
    /// Writes the journal of this process's lab, before any child starts.
    pub(crate) fn create(run_folder: &Path, sysctls: &[Changed]) -> std::io::Result<Self> {
        let me = std::process::id();
        let journal = Journal {
            lab: Proc::of(me).ok_or_else(|| std::io::Error::other("no /proc/self/stat"))?,
            run_folder: std::path::absolute(run_folder)?,
            command_line: crate::util::command_line(),
            netns: crate::observer::procfs::own_netns_inum().unwrap_or(0),
            sysctls: sysctls.to_vec(),
            children: Vec::new(),
            cgroups: Vec::new(),
            namespaces: Vec::new(),
            links: Vec::new(),
        };
        let file = JournalFile {
            journal,
            well_known: labs_dir().ok().map(|d| d.join(format!("{me}.json"))),
        };
        file.write()?;
        Ok(file)
    }

    /// Records a child (once; a child already known is not written again).
    pub(crate) fn add(&mut self, role: Role, pid: u32) -> std::io::Result<()> {
        if self.journal.children.iter().any(|c| c.proc.pid == pid) {
            return Ok(());
        }
        let Some(proc) = Proc::of(pid) else {
            return Ok(());
        };
        self.journal.children.push(Child { role, proc });
        self.write()
    }

    /// Records a cgroup the lab made.
    pub(crate) fn add_cgroup(&mut self, path: &Path) -> std::io::Result<()> {
        self.journal.cgroups.push(path.to_owned());
        self.write()
    }

    /// Records a network namespace the lab is about to make.
    pub(crate) fn add_namespace(&mut self, name: &str) -> std::io::Result<()> {
        self.journal.namespaces.push(name.to_owned());
        self.write()
    }

    /// Records a link the lab is about to make.
    pub(crate) fn add_link(&mut self, name: &str) -> std::io::Result<()> {
        self.journal.links.push(name.to_owned());
        self.write()
    }

    fn write(&self) -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(&self.journal).map_err(std::io::Error::other)?;
        crate::report::atomic::write_atomic(&self.journal.run_folder.join(FILE), &json)
            .map_err(std::io::Error::other)?;
        if let Some(p) = &self.well_known {
            state_dir::write_private(p, &json).map_err(std::io::Error::other)?;
        }
        Ok(())
    }
}

impl Drop for JournalFile {
    fn drop(&mut self) {
        if let Some(p) = &self.well_known {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// What a lab that is gone left behind.
#[derive(Debug, Clone)]
pub(crate) struct Leftover {
    pub journal: Journal,
    pub path: PathBuf,
    /// Its children still running.
    pub alive: Vec<Child>,
    /// Processes still in its cgroups (a server that left its tree is one of them).
    pub in_cgroups: Vec<u32>,
}

impl Leftover {
    /// One line: which lab, what is still running, what it changed, and the fix.
    pub(crate) fn describe(&self) -> String {
        let j = &self.journal;
        let mut s = format!(
            "lab pid {} (run folder {}) ended without cleaning up",
            j.lab.pid,
            j.run_folder.display()
        );
        let mut names: Vec<String> = self
            .alive
            .iter()
            .map(|c| format!("{} pid {}", c.role.name(), c.proc.pid))
            .collect();
        names.extend(
            self.in_cgroups
                .iter()
                .filter(|p| !self.alive.iter().any(|c| c.proc.pid == **p))
                .map(|p| format!("server process pid {p} (in its cgroup)")),
        );
        if names.is_empty() {
            s.push_str("; none of its processes runs");
        } else {
            s.push_str(&format!("; still running: {}", names.join(", ")));
        }
        if !j.sysctls.is_empty() {
            let names: Vec<String> = j
                .sysctls
                .iter()
                .map(|c| format!("{} {} (was {})", c.name, c.new, c.old))
                .collect();
            s.push_str(&format!("; sysctls it set: {}", names.join(", ")));
        }
        if !j.namespaces.is_empty() {
            s.push_str(&format!(
                "; network namespaces it made: {}",
                j.namespaces.join(", ")
            ));
        }
        s.push_str("; clean up: c1m doctor --restore");
        s
    }

    /// SIGKILLs its children still running (each checked by start time and owner right
    /// before) and everything in its cgroups (then removed), and forgets the journal.
    pub(crate) fn end(self) -> Ended {
        let mut out = Ended::default();
        for c in &self.alive {
            // Checked just now: a reused pid has another start time, another user's
            // process another uid.
            if let Some(why) = c.proc.not_the_recorded_one() {
                out.spared.push((*c, why));
                continue;
            }
            let kill = |p| rustix::process::kill_process(p, rustix::process::Signal::KILL);
            let pid = rustix::process::Pid::from_raw(c.proc.pid as i32);
            match pid.map(kill) {
                Some(Ok(())) => out.ended.push(*c),
                Some(Err(e)) => out.spared.push((*c, e.to_string())),
                None => out.spared.push((*c, "not a pid".to_owned())),
            }
        }
        for cg in &self.journal.cgroups {
            if !made_by(cg, self.journal.lab.pid) {
                out.failed.push(format!(
                    "left cgroup {}: not one c1m makes for lab pid {}",
                    cg.display(),
                    self.journal.lab.pid
                ));
                continue;
            }
            if !cg.exists() {
                continue;
            }
            match super::cgroup::remove(cg, std::time::Duration::from_secs(5)) {
                Ok(()) => out.removed.push(cg.clone()),
                Err(e) => out
                    .failed
                    .push(format!("could not remove cgroup {}: {e}", cg.display())),
            }
        }
        self.remove_hosts(&mut out);
        match std::fs::remove_file(&self.path) {
            Ok(()) => out.removed.push(self.path.clone()),
            Err(e) => out.failed.push(format!(
                "could not remove the journal {}: {e}",
                self.path.display()
            )),
        }
        out
    }
}

impl Leftover {
    /// Deletes the namespaces and links of `c1m run --hosts` (named with the lab's own
    /// prefix; any other name is refused), after its processes were ended.
    fn remove_hosts(&self, out: &mut Ended) {
        let pid = self.journal.lab.pid;
        let prefix = crate::netns::hosts_prefix(pid);
        let links = self.journal.links.iter().map(|n| (Made::Link, n));
        let namespaces = self.journal.namespaces.iter().map(|n| (Made::Namespace, n));
        for (kind, name) in links.chain(namespaces) {
            if !name.starts_with(&prefix) {
                out.failed.push(format!(
                    "left {} {name}: not one c1m makes for lab pid {pid}",
                    kind.name()
                ));
                continue;
            }
            let deleted = match kind {
                Made::Link => crate::netns::delete_link(name),
                Made::Namespace => crate::netns::delete_named(name),
            };
            match deleted {
                Ok(true) => out.deleted.push(format!("{} {name}", kind.name())),
                Ok(false) => {}
                Err(e) => out
                    .failed
                    .push(format!("could not delete {} {name}: {e}", kind.name())),
            }
        }
    }
}

/// What `c1m run --hosts` makes that a journal records by name.
#[derive(Clone, Copy)]
enum Made {
    Link,
    Namespace,
}

impl Made {
    fn name(self) -> &'static str {
        match self {
            Made::Link => "link",
            Made::Namespace => "network namespace",
        }
    }
}

/// How long a swept lab's hosts get to conclude before they are killed: they were sent
/// SIGTERM when the lab died (a server host, itself a lab, then closes its connections
/// and removes its own journal).
const HOSTS_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a host just sent SIGKILL gets to be gone before its own journal is read: a
/// lab that still runs is not a leftover.
const KILLED_GONE: std::time::Duration = std::time::Duration::from_secs(5);

impl Leftover {
    /// Whether a `c1m run --hosts` lab left it (its journal names namespaces or links).
    pub(crate) fn is_hosts(&self) -> bool {
        !self.journal.namespaces.is_empty() || !self.journal.links.is_empty()
    }
}

/// A killed `c1m run --hosts` lab, ended.
#[derive(Debug)]
pub(crate) struct HostsEnded {
    /// The lab's pid.
    pub pid: u32,
    /// Its run folder.
    pub folder: PathBuf,
    /// Its hosts that were running when the sweep began and concluded in the grace.
    pub concluded: Vec<Child>,
    /// What ending it did.
    pub ended: Ended,
    /// Its server host's lab (a `c1m run` of its own) by pid, and what ending that did,
    /// when the host was killed before it concluded and left its own journal.
    pub host_lab: Option<(u32, Ended)>,
}

/// Ends killed `c1m run --hosts` labs: their hosts get [`HOSTS_GRACE`] to conclude
/// (those that do are not named), then what still runs is killed and the namespaces and
/// links are deleted. A host that was a lab itself and left a journal of its own is ended
/// with its parent (taken out of `others` when it is there): `c1m run --hosts` and
/// `c1m doctor --restore` both sweep this way, so neither leaves the host lab's journal
/// for the next one to find.
pub(crate) fn end_hosts(hosts: Vec<Leftover>, others: &mut Vec<Leftover>) -> Vec<HostsEnded> {
    let until = std::time::Instant::now() + HOSTS_GRACE;
    // Only the journal's own processes are waited for: a pid whose owner is not the
    // journal's is never the lab's host.
    while hosts.iter().any(|l| {
        l.alive
            .iter()
            .any(|c| c.proc.not_the_recorded_one().is_none())
    }) && std::time::Instant::now() < until
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let mut out = Vec::new();
    for mut l in hosts {
        // Those that concluded in the grace are not named as spared.
        let (running, concluded) = l.alive.into_iter().partition(|c| c.proc.alive());
        l.alive = running;
        let children = l.journal.children.clone();
        let (pid, folder) = (l.journal.lab.pid, l.journal.run_folder.clone());
        let ended = l.end();
        let gone_by = std::time::Instant::now() + KILLED_GONE;
        while ended.ended.iter().any(|c| c.proc.alive()) && std::time::Instant::now() < gone_by {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // A host that was a lab (the server host's `c1m run`), by pid and start time.
        let is_host = |o: &Leftover| children.iter().any(|c| c.proc == o.journal.lab);
        let inner = match others.iter().position(is_host) {
            Some(i) => Some(others.remove(i)),
            None => leftovers()
                .map(|f| f.leftovers)
                .unwrap_or_default()
                .into_iter()
                .find(is_host),
        };
        out.push(HostsEnded {
            pid,
            folder,
            concluded,
            ended,
            host_lab: inner.map(|i| (i.journal.lab.pid, i.end())),
        });
    }
    out
}

/// Ends what killed `c1m run --hosts` labs left (their processes, namespaces and links),
/// before a new one makes its own: one line per lab swept, or why it could not be read.
/// Labs still running, another `--hosts` run's among them, are not leftovers.
pub(crate) fn sweep_hosts() -> Vec<String> {
    let found = match leftovers() {
        Ok(f) => f,
        Err(e) => return vec![e.to_string()],
    };
    let (hosts, mut others): (Vec<Leftover>, Vec<Leftover>) =
        found.leftovers.into_iter().partition(Leftover::is_hosts);
    end_hosts(hosts, &mut others)
        .into_iter()
        .map(|h| {
            let mut what = ended_lines(h.ended);
            if let Some((inner, ended)) = h.host_lab {
                what.push(format!("and of its host lab pid {inner}:"));
                what.extend(ended_lines(ended));
            }
            format!(
                "swept the hosts of killed lab pid {}: {}",
                h.pid,
                what.join(", ")
            )
        })
        .collect()
}

/// What ending a leftover did, a phrase each.
fn ended_lines(ended: Ended) -> Vec<String> {
    let mut what: Vec<String> = ended
        .ended
        .iter()
        .map(|c| format!("ended {} pid {}", c.role.name(), c.proc.pid))
        .collect();
    what.extend(ended.deleted.iter().map(|d| format!("removed {d}")));
    what.extend(
        ended
            .removed
            .iter()
            .map(|p| format!("removed {}", p.display())),
    );
    what.extend(ended.failed);
    what.extend(
        ended
            .spared
            .iter()
            .map(|(c, why)| format!("left {} pid {}: {why}", c.role.name(), c.proc.pid)),
    );
    what
}

/// Whether `cgroup` is named as `cgroup::Cgroup::create` names the ones lab `pid` makes
/// (`c1m-PURPOSE-PID-N`): a journal's word alone never has another cgroup killed.
fn made_by(cgroup: &Path, pid: u32) -> bool {
    cgroup
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("c1m-"))
        .is_some_and(|n| n.contains(&format!("-{pid}-")))
}

/// What ending a leftover did, for one line each.
#[derive(Debug, Default)]
pub(crate) struct Ended {
    /// Children killed.
    pub ended: Vec<Child>,
    /// Children left running, and why.
    pub spared: Vec<(Child, String)>,
    /// Cgroups and the journal file, removed.
    pub removed: Vec<PathBuf>,
    /// Namespaces and links of `c1m run --hosts`, deleted, in words ("network
    /// namespace c1mh123-srv").
    pub deleted: Vec<String>,
    /// What could not be removed, one line each.
    pub failed: Vec<String>,
}

/// The labs that are gone, as their journals tell, and the files that were not read.
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub leftovers: Vec<Leftover>,
    /// One line per journal file refused (not the user's, not a journal).
    pub ignored: Vec<String>,
}

/// The journals of labs that are no longer running. Fails (one line naming the
/// directory, its owner and the fix) when the state directory is not the user's.
pub(crate) fn leftovers() -> Result<Found, StateError> {
    let mut out = Found::default();
    for (path, journal) in journals()? {
        let journal = match journal {
            Ok(j) => j,
            Err(why) => {
                out.ignored.push(format!("not read: {why}"));
                continue;
            }
        };
        if journal.lab.alive() {
            continue;
        }
        let alive = journal
            .children
            .iter()
            .filter(|c| c.proc.alive())
            .copied()
            .collect();
        let in_cgroups = journal
            .cgroups
            .iter()
            .filter(|c| made_by(c, journal.lab.pid))
            .flat_map(|c| super::cgroup::pids_of(c))
            .collect();
        out.leftovers.push(Leftover {
            journal,
            path,
            alive,
            in_cgroups,
        });
    }
    Ok(out)
}

/// What `c1m run` and `c1m doctor` say of other labs' leftovers before they start, one
/// line each: a refused file, a lab gone, or the state directory refused (which does not
/// stop them here; a run's port locks refuse it too, and fail the run there).
pub(crate) fn leftover_lines() -> Vec<String> {
    match leftovers() {
        Ok(found) => found
            .ignored
            .into_iter()
            .chain(
                found
                    .leftovers
                    .iter()
                    .map(|l| format!("leftover: {}", l.describe())),
            )
            .collect(),
        Err(e) => vec![e.to_string()],
    }
}

/// The journal of the running lab that started `pid` (a server, client or worker).
pub(crate) fn lab_of(pid: u32) -> Option<Journal> {
    journals()
        .ok()?
        .into_iter()
        .filter_map(|(_, j)| j.ok())
        .find(|j| {
            j.lab.alive() && (j.lab.pid == pid || j.children.iter().any(|c| c.proc.pid == pid))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_names_a_dead_labs_processes_and_never_a_reused_pid() {
        let dir = std::env::temp_dir().join(format!("c1m-journal-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let me = Proc::of(std::process::id()).unwrap();
        let stale = Proc {
            start_time: me.start_time + 1,
            ..me
        };
        let left = Leftover {
            journal: Journal {
                lab: stale,
                run_folder: dir.clone(),
                command_line: "c1m run".into(),
                netns: 0,
                sysctls: vec![Changed {
                    name: "net.core.somaxconn".into(),
                    old: "128".into(),
                    new: "4096".into(),
                }],
                children: vec![Child {
                    role: Role::Server,
                    proc: stale,
                }],
                cgroups: Vec::new(),
                namespaces: Vec::new(),
                links: Vec::new(),
            },
            path: dir.join("none.json"),
            alive: Vec::new(),
            in_cgroups: Vec::new(),
        };
        assert!(!stale.alive(), "another start time is another process");
        let line = left.describe();
        assert!(line.contains(&dir.display().to_string()), "{line}");
        assert!(line.contains("net.core.somaxconn 4096 (was 128)"), "{line}");
        assert!(line.contains("c1m doctor --restore"), "{line}");
        // Nothing alive to end: this process (same pid, other start time) survives.
        let ended = left.end();
        assert!(ended.ended.is_empty() && ended.spared.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A live process with the journal's pid and start time but another owner is not
    /// the journal's: spared, with the reason (issue 30, case 2).
    #[test]
    fn a_child_of_another_owner_is_never_signalled() {
        let mut sleep = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let real = Proc::of(sleep.id()).unwrap();
        let theirs = Proc {
            uid: real.uid.map(|u| u.wrapping_add(1)),
            ..real
        };
        let older = Proc { uid: None, ..real };
        let child = |proc| Child {
            role: Role::Server,
            proc,
        };
        let left = Leftover {
            journal: Journal {
                lab: Proc {
                    start_time: real.start_time + 1,
                    ..real
                },
                run_folder: std::env::temp_dir(),
                command_line: "c1m run".into(),
                netns: 0,
                sysctls: Vec::new(),
                children: vec![child(theirs), child(older)],
                // Not a name c1m gives its cgroups: never killed on a journal's word.
                cgroups: vec![PathBuf::from("/sys/fs/cgroup/system.slice")],
                // Not of this lab's prefix: never deleted on a journal's word.
                namespaces: vec!["c1mh1-srv".into()],
                links: Vec::new(),
            },
            path: std::env::temp_dir().join(format!("c1m-none-{}.json", real.pid)),
            alive: vec![child(theirs), child(older)],
            in_cgroups: Vec::new(),
        };
        let ended = left.end();
        let running = matches!(sleep.try_wait(), Ok(None));
        let _ = sleep.kill();
        let _ = sleep.wait();
        assert!(running, "a process of another owner was killed");
        assert!(ended.ended.is_empty());
        assert_eq!(ended.spared.len(), 2);
        assert!(
            ended.spared[0].1.contains("its journal says uid"),
            "{:?}",
            ended.spared
        );
        assert!(
            ended.spared[1].1.contains("does not say whose"),
            "{:?}",
            ended.spared
        );
        assert!(
            ended.failed[0].contains("not one c1m makes"),
            "{:?}",
            ended.failed
        );
        assert!(
            ended.failed[1].starts_with("left network namespace c1mh1-srv: not one c1m makes"),
            "{:?}",
            ended.failed
        );
        assert!(made_by(Path::new("/sys/fs/cgroup/x/c1m-server-42-0"), 42));
        assert!(!made_by(Path::new("/sys/fs/cgroup/x/c1m-server-421-0"), 42));
    }
}
