//! The lab's journal: what a `kill -9` of `c1m run` would leave behind, written before
//! it exists. The lab's pid, its run folder, the sysctls it changed and every child it
//! started (server, client, their workers), each with its start time from
//! /proc/PID/stat, so a pid the kernel has since given to another process is never
//! taken for the child. One copy sits in the run folder (`journal.json`), one in the
//! runtime directory (`labs/PID.json`), where `c1m run` and `c1m doctor` look for the
//! journals of labs that are gone; `c1m doctor --restore` ends what they left.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::lab::tuning::Changed;
use crate::procstat;

/// The journal's name in the run folder.
pub const FILE: &str = "journal.json";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Server,
    Client,
    ServerWorker,
    ClientWorker,
}

impl Role {
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
    pub pid: u32,
    /// Clock ticks since boot (/proc/PID/stat field 22).
    pub start_time: u64,
}

impl Proc {
    /// The process `pid` as it is now (None if gone).
    pub fn of(pid: u32) -> Option<Proc> {
        Some(Proc {
            pid,
            start_time: procstat::start_time(pid)?,
        })
    }

    pub fn alive(&self) -> bool {
        procstat::alive(self.pid, self.start_time)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Child {
    pub role: Role,
    #[serde(flatten)]
    pub proc: Proc,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Journal {
    pub lab: Proc,
    pub run_folder: PathBuf,
    pub command_line: String,
    /// Network namespace (nsfs inode) the lab ran in: its sysctls are that namespace's.
    pub netns: u32,
    pub sysctls: Vec<Changed>,
    pub children: Vec<Child>,
    /// Cgroups it made for a foreign server: whatever runs in one is that server's,
    /// however it forked (ended by `cgroup.kill`, then removed).
    #[serde(default)]
    pub cgroups: Vec<PathBuf>,
}

fn labs_dir() -> std::io::Result<PathBuf> {
    let dir = crate::util::runtime_dir()?.join("labs");
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The running lab's journal; the well-known copy goes when the lab ends normally.
pub struct JournalFile {
    journal: Journal,
    /// The copy in the runtime directory (None if that could not be made).
    well_known: Option<PathBuf>,
}

impl JournalFile {
    /// Writes the journal of this process's lab, before any child starts.
    pub fn create(run_folder: &Path, sysctls: &[Changed]) -> std::io::Result<Self> {
        let me = std::process::id();
        let journal = Journal {
            lab: Proc::of(me).ok_or_else(|| std::io::Error::other("no /proc/self/stat"))?,
            run_folder: std::path::absolute(run_folder)?,
            command_line: std::env::args().collect::<Vec<_>>().join(" "),
            netns: crate::observer::procfs::own_netns_inum().unwrap_or(0),
            sysctls: sysctls.to_vec(),
            children: Vec::new(),
            cgroups: Vec::new(),
        };
        let file = JournalFile {
            journal,
            well_known: labs_dir().ok().map(|d| d.join(format!("{me}.json"))),
        };
        file.write()?;
        Ok(file)
    }

    /// Records a child (once; a child already known is not written again).
    pub fn add(&mut self, role: Role, pid: u32) -> std::io::Result<()> {
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
    pub fn add_cgroup(&mut self, path: &Path) -> std::io::Result<()> {
        self.journal.cgroups.push(path.to_owned());
        self.write()
    }

    fn write(&self) -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(&self.journal).map_err(std::io::Error::other)?;
        crate::lab::export::atomic::write_atomic(&self.journal.run_folder.join(FILE), &json)
            .map_err(std::io::Error::other)?;
        if let Some(p) = &self.well_known {
            crate::lab::export::atomic::write_atomic(p, &json).map_err(std::io::Error::other)?;
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
pub struct Leftover {
    pub journal: Journal,
    pub path: PathBuf,
    /// Its children still running.
    pub alive: Vec<Child>,
    /// Processes still in its cgroups (a server that left its tree is one of them).
    pub in_cgroups: Vec<u32>,
}

impl Leftover {
    /// One line: which lab, what is still running, what it changed, and the fix.
    pub fn describe(&self) -> String {
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
        s.push_str("; clean up: c1m doctor --restore");
        s
    }

    /// SIGKILLs its children still running (each checked by start time right before)
    /// and everything in its cgroups (then removed), and forgets the journal. Returns
    /// the children it ended.
    pub fn end(self) -> Vec<Child> {
        let mut ended = Vec::new();
        for c in &self.alive {
            // A pid whose start time matched just now: a reused pid would have another.
            let kill = |p| rustix::process::kill_process(p, rustix::process::Signal::KILL);
            let pid = rustix::process::Pid::from_raw(c.proc.pid as i32);
            if c.proc.alive() && pid.is_some_and(|p| kill(p).is_ok()) {
                ended.push(*c);
            }
        }
        for cg in &self.journal.cgroups {
            let _ = super::cgroup::remove(cg, std::time::Duration::from_secs(5));
        }
        let _ = std::fs::remove_file(&self.path);
        ended
    }
}

/// The journals of labs that are no longer running.
pub fn leftovers() -> Vec<Leftover> {
    let Ok(dir) = labs_dir().and_then(std::fs::read_dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let path = entry.path();
        let Some(journal) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|s| serde_json::from_str::<Journal>(&s).ok())
        else {
            continue;
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
            .flat_map(|c| super::cgroup::pids_of(c))
            .collect();
        out.push(Leftover {
            journal,
            path,
            alive,
            in_cgroups,
        });
    }
    out
}

/// The journal of the running lab that started `pid` (a server, client or worker).
pub fn lab_of(pid: u32) -> Option<Journal> {
    let dir = labs_dir().ok()?;
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            serde_json::from_str::<Journal>(&std::fs::read_to_string(e.path()).ok()?).ok()
        })
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
            pid: me.pid,
            start_time: me.start_time + 1,
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
        assert!(left.end().is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
