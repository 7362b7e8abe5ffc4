//! Private network namespaces for tests and benchmarks: each gets its own loopback,
//! port space, sysctls and `/proc/net` counters, so runs can't see each other.
//! A namespace belongs to the calling *thread* (unshare(2) is per task): everything
//! the thread does or spawns afterwards lives in it.

use std::io;

/// Moves the calling thread into a new network namespace with `lo` up.
pub fn enter_private() -> io::Result<()> {
    // SAFETY: unshare only changes this thread's namespace membership.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    loopback_up()
}

fn loopback_up() -> io::Result<()> {
    // SAFETY: a plain datagram socket used only for the ioctls below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: ifreq is plain old data; zeroed is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: fd is open and req is a valid ifreq for both ioctls.
    let result = unsafe {
        if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) != 0 {
            Err(io::Error::last_os_error())
        } else {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            if libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) != 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        }
    };
    // SAFETY: fd was opened above and is closed once.
    unsafe { libc::close(fd) };
    result
}

/// Writes a sysctl of the calling thread's network namespace, e.g.
/// `("net/ipv4/ip_local_port_range", "40000 40999")`.
pub fn set_sysctl(path: &str, value: &str) -> io::Result<()> {
    std::fs::write(format!("/proc/sys/{path}"), value)
}

/// Whether any process is still in the namespace with nsfs inode `inode` (see
/// `observer::procfs::own_netns_inum`): it dies with the last one.
pub fn alive(inode: u32) -> bool {
    all_alive().contains(&inode)
}

/// Every network namespace some thread is in now (nsfs inodes). Per thread: a thread
/// that entered a private namespace (as tests do) is the only one in it.
pub fn all_alive() -> std::collections::HashSet<u32> {
    use std::os::unix::fs::MetadataExt;
    let mut out = std::collections::HashSet::new();
    for pid in crate::workload::procstat::all_pids() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            if let Ok(m) = std::fs::metadata(task.path().join("ns/net"))
                && let Ok(ino) = u32::try_from(m.ino())
            {
                out.insert(ino);
            }
        }
    }
    out
}
