//! One owner per port. Every shard of a server binds every port with SO_REUSEPORT, and
//! the kernel lets any process of the same user join such a group: a second server on
//! the same ports would silently take a share of the first one's connections. So a
//! server takes an exclusive lock per port (a flock on a file under the runtime
//! directory, keyed by network namespace, since ports are per namespace) before any
//! shard binds, and holds it for its lifetime; the kernel releases it when the process
//! dies, however it dies. A listener of any other program is found by a plain bind
//! without SO_REUSEPORT, which the kernel refuses while anyone listens on the port.

use std::{
    fs::File,
    io::Write,
    net::{IpAddr, SocketAddr},
    path::PathBuf,
};

use rustix::fs::{FlockOperation, flock};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::procstat;

/// Who holds a port.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Holder {
    pub pid: u32,
    pub command_line: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.pid == 0 {
            return f.write_str("a process c1m cannot see (another user or namespace)");
        }
        write!(f, "pid {} ({})", self.pid, self.command_line)
    }
}

#[derive(Debug, Error)]
pub(crate) enum PortError {
    #[error(
        "port {port} is taken: {holder} listens on it; use other --ports, or stop it{}",
        stop_hint(holder)
    )]
    Taken { port: u16, holder: Holder },
    #[error(
        "port {port} is not held by this worker's supervisor (pid {owner}) but by {}: not joining its listeners",
        holder.as_ref().map(|h| h.to_string()).unwrap_or_else(|| "nobody".to_owned())
    )]
    NotOwner {
        port: u16,
        owner: u32,
        holder: Option<Holder>,
    },
    /// The cause is in the message, not a `source`: anyhow's chain would say it twice.
    #[error("port lock {}: {cause}", path.display())]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    /// Where the locks live is not usable (its own one-line error).
    #[error(transparent)]
    State(#[from] crate::state_dir::StateError),
}

fn stop_hint(h: &Holder) -> String {
    if h.pid == 0 {
        String::new()
    } else {
        format!(" (kill {})", h.pid)
    }
}

impl PortError {
    /// The holder, when the port is taken.
    pub(crate) fn holder(&self) -> Option<(u16, &Holder)> {
        match self {
            PortError::Taken { port, holder } => Some((*port, holder)),
            PortError::Io { .. } | PortError::State(_) | PortError::NotOwner { .. } => None,
        }
    }
}

/// The ports this process owns; dropping it (or dying) lets them go.
#[derive(Debug)]
pub(crate) struct PortLocks {
    _files: Vec<File>,
}

fn lock_path(port: u16) -> Result<PathBuf, PortError> {
    let dir = crate::state_dir::runtime_dir()?;
    let netns = crate::observer::procfs::own_netns_inum().unwrap_or(0);
    Ok(dir.join(format!("port-{netns}-{port}.lock")))
}

/// Removes the lock files of network namespaces that no longer exist: nobody can
/// listen there any more, so nobody can race for them (a private namespace per test
/// would otherwise leave a file per port behind).
fn sweep_dead_namespaces(dir: &std::path::Path, here: u32) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let files: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let ns = name
                .strip_prefix("port-")?
                .split_once('-')?
                .0
                .parse()
                .ok()?;
            Some((ns, e.path()))
        })
        .filter(|(ns, _)| *ns != here)
        .collect();
    if files.is_empty() {
        return;
    }
    let live = crate::netns::all_alive();
    for (ns, path) in files {
        if !live.contains(&ns) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Takes every port in `ports` for this process, or names the first holder. Call it
/// before any socket binds; keep the result as long as the listeners live.
pub(crate) fn lock(ports: &[u16], addrs: &[IpAddr]) -> Result<PortLocks, PortError> {
    if let (Ok(dir), Some(here)) = (
        crate::state_dir::runtime_dir(),
        crate::observer::procfs::own_netns_inum(),
    ) {
        sweep_dead_namespaces(&dir, here);
    }
    let me = Holder {
        pid: std::process::id(),
        command_line: procstat::command_line(std::process::id()).unwrap_or_default(),
    };
    let mut files = Vec::with_capacity(ports.len());
    for &port in ports {
        let path = lock_path(port)?;
        let io = |cause| PortError::Io {
            path: path.clone(),
            cause,
        };
        let mut file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        // LOCK_NB: returns at once.
        if let Err(err) = flock(&file, FlockOperation::NonBlockingLockExclusive) {
            if err != rustix::io::Errno::WOULDBLOCK {
                return Err(io(err.into()));
            }
            let holder = std::fs::read_to_string(&path)
                .ok()
                .and_then(|s| serde_json::from_str(&s).ok())
                .unwrap_or_default();
            return Err(PortError::Taken { port, holder });
        }
        file.set_len(0).map_err(io)?;
        let json = serde_json::to_vec(&me).unwrap_or_default();
        file.write_all(&json).map_err(io)?;
        files.push(file);
    }
    for &port in ports {
        for &addr in addrs {
            if let Some(holder) = kernel_listener(SocketAddr::new(addr, port)) {
                return Err(PortError::Taken { port, holder });
            }
        }
    }
    Ok(PortLocks { _files: files })
}

/// A worker's check before it binds: every port is locked, and by `owner` (its
/// supervisor), so a worker joins only the SO_REUSEPORT groups its own supervisor owns.
pub(crate) fn verify_owner(ports: &[u16], owner: u32) -> Result<(), PortError> {
    for &port in ports {
        let path = lock_path(port)?;
        let holder: Option<Holder> = std::fs::read_to_string(&path)
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok());
        // A lock we get is let go when the file closes.
        let held = File::open(&path)
            .is_ok_and(|f| flock(&f, FlockOperation::NonBlockingLockShared).is_err());
        match holder {
            Some(h) if held && h.pid == owner => {}
            other => {
                return Err(PortError::NotOwner {
                    port,
                    owner,
                    holder: other.filter(|_| held),
                });
            }
        }
    }
    Ok(())
}

/// Whether `ports` could be taken now (they are let go at once): for a preflight.
pub(crate) fn check(ports: &[u16], addrs: &[IpAddr]) -> Result<(), PortError> {
    lock(ports, addrs).map(drop)
}

/// Someone else listening on `addr`, found by a bind without SO_REUSEPORT (refused with
/// EADDRINUSE while a listener holds the port; SO_REUSEADDR lets TIME_WAIT leftovers
/// pass). Named from /proc when it is; a holder with pid 0 when not visible.
fn kernel_listener(addr: SocketAddr) -> Option<Holder> {
    let socket = std::net::TcpListener::bind(addr);
    match socket {
        Ok(_) => None,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            Some(listener_owner(addr.port()).unwrap_or_default())
        }
        // Not an address of this box (or no permission for it): the server says so.
        Err(_) => None,
    }
}

/// How long [`listener_owner`] looks for a holder among the processes' fds.
const SEARCH: std::time::Duration = std::time::Duration::from_secs(2);

/// The process holding a listening socket on `port`: its inode from /proc/net/tcp{,6},
/// then the process with that socket among its fds.
fn listener_owner(port: u16) -> Option<Holder> {
    use crate::proc_net_tcp::{LISTEN, for_each_row};
    let mut inodes = Vec::new();
    for_each_row(|row| {
        // Listeners are listed first: stop at the first other socket, so a box
        // holding a million connections is not read line by line.
        if row.state != LISTEN {
            return std::ops::ControlFlow::Break(());
        }
        if row.local_port() == Some(port)
            && let Ok(inode) = row.inode.parse::<u64>()
        {
            inodes.push(inode);
        }
        std::ops::ControlFlow::Continue(())
    });
    if inodes.is_empty() {
        return None;
    }
    // Naming the holder is a courtesy: at 1M sockets on the box the fds of every
    // process took minutes to read (a server refused its port only after them), so
    // the search gives up after SEARCH and the holder goes unnamed (pid 0).
    let deadline = std::time::Instant::now() + SEARCH;
    let all = procfs::process::all_processes().ok()?;
    for p in all.flatten() {
        if std::time::Instant::now() > deadline {
            return None;
        }
        let Ok(fds) = p.fd() else {
            continue;
        };
        let holds = fds.flatten().any(
            |fd| matches!(fd.target, procfs::process::FDTarget::Socket(i) if inodes.contains(&i)),
        );
        if holds && let Ok(pid) = u32::try_from(p.pid()) {
            return Some(owner_of(pid));
        }
    }
    None
}

/// A c1m worker's listener belongs to its supervisor: name that.
fn owner_of(pid: u32) -> Holder {
    let line = procstat::command_line(pid).unwrap_or_default();
    let pid = match procstat::parent(pid) {
        Some(parent) if line.contains(" worker ") || line.ends_with(" worker") => parent,
        _ => pid,
    };
    Holder {
        pid,
        command_line: procstat::command_line(pid).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    /// Ports are per network namespace: a private one keeps this test's ports its own.
    fn private_or_skip() -> bool {
        if crate::observer::privileges::is_root() && crate::netns::enter_private().is_ok() {
            return true;
        }
        eprintln!("SKIP port_lock test: needs root for a private network namespace");
        false
    }

    #[test]
    fn a_second_owner_is_refused_and_named_until_the_first_lets_go() {
        if !private_or_skip() {
            return;
        }
        let lo = [IpAddr::V4(Ipv4Addr::LOCALHOST)];
        let first = lock(&[21000, 21001], &lo).unwrap();
        let e = lock(&[21001], &lo).unwrap_err();
        let (port, holder) = e.holder().unwrap();
        assert_eq!((port, holder.pid), (21001, std::process::id()));
        assert!(e.to_string().contains("use other --ports"), "{e}");
        verify_owner(&[21000, 21001], std::process::id()).unwrap();
        assert!(verify_owner(&[21000], std::process::id() + 1).is_err());
        drop(first);
        check(&[21000, 21001], &lo).unwrap();
        let e = verify_owner(&[21000], std::process::id()).unwrap_err();
        assert!(e.to_string().contains("but by nobody"), "{e}");
    }

    #[test]
    fn a_listener_of_another_program_is_found_in_the_kernel() {
        if !private_or_skip() {
            return;
        }
        let lo = [IpAddr::V4(Ipv4Addr::LOCALHOST)];
        let _other = std::net::TcpListener::bind("127.0.0.1:21010").unwrap();
        let e = check(&[21010], &lo).unwrap_err();
        let (port, holder) = e.holder().unwrap();
        assert_eq!((port, holder.pid), (21010, std::process::id()));
    }
}
