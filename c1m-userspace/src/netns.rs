//! Private network namespaces for tests and benchmarks: each gets its own loopback,
//! port space, sysctls and `/proc/net` counters, so runs can't see each other.
//! A namespace belongs to the calling *thread* (unshare(2) is per task): everything
//! the thread does or spawns afterwards lives in it. A namespace lives as long as a
//! thread is in it, a process holds it open, or it is mounted (`ip netns add`): each
//! kind is a way back into it ([`open`], [`run_in`]).

use std::{
    io,
    os::{
        fd::{AsFd, OwnedFd},
        unix::fs::MetadataExt,
    },
    path::PathBuf,
};

/// Moves the calling thread into a new network namespace with `lo` up.
pub fn enter_private() -> io::Result<()> {
    // SAFETY: rustix marks unshare unsafe for CLONE_FILES (fds of other threads); only
    // the network namespace is unshared here, which moves no descriptor.
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNET) }?;
    loopback_up()
}

/// `lo` up by hand: rustix has no SIOCGIFFLAGS/SIOCSIFFLAGS (its netdevice module only
/// maps names and indexes), and a netlink RTM_NEWLINK would be longer for one flag.
fn loopback_up() -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = rustix::net::socket_with(
        rustix::net::AddressFamily::INET,
        rustix::net::SocketType::DGRAM,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )?;
    // SAFETY: ifreq is plain old data; zeroed is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: fd is open and req is a valid ifreq for the ioctl to fill.
    crate::util::cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) })?;
    // SAFETY: the flags member is the one SIOCGIFFLAGS just wrote.
    unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    // SAFETY: fd is open and req is a valid ifreq for the kernel to read.
    crate::util::cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCSIFFLAGS, &req) })?;
    Ok(())
}

/// Writes a sysctl of the calling thread's network namespace, e.g.
/// `("net/ipv4/ip_local_port_range", "40000 40999")`.
pub fn set_sysctl(path: &str, value: &str) -> io::Result<()> {
    std::fs::write(format!("/proc/sys/{path}"), value)
}

/// The calling thread's network namespace's cookie (SO_NETNS_COOKIE, the id sock_ops
/// programs can read). Unlike the nsfs inode number, which the kernel gives to the next
/// namespace once this one is gone, a cookie is never reused while the box runs.
/// By hand: rustix 1.1 reads SO_COOKIE (a socket's) but not SO_NETNS_COOKIE.
pub(crate) fn own_cookie() -> io::Result<u64> {
    const SO_NETNS_COOKIE: libc::c_int = 71;
    // The wildcard: a socket belongs to the namespace it was made in, loopback up or not.
    let socket =
        std::net::UdpSocket::bind("0.0.0.0:0").or_else(|_| std::net::UdpSocket::bind("[::]:0"))?;
    let mut cookie = 0u64;
    let mut len = size_of::<u64>() as libc::socklen_t;
    // SAFETY: cookie and len are valid for writes of the sizes given.
    crate::util::cvt(unsafe {
        libc::getsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&socket),
            libc::SOL_SOCKET,
            SO_NETNS_COOKIE,
            (&raw mut cookie).cast(),
            &mut len,
        )
    })?;
    Ok(cookie)
}

/// Every network namespace that exists now, as far as this process sees (nsfs inodes).
pub(crate) fn all_alive() -> std::collections::HashSet<u32> {
    holders().map(|(ino, _)| ino).collect()
}

/// The namespace with nsfs inode `inode`, opened (checked by the opened file's inode,
/// so a holder that changed meanwhile is not taken for it).
pub(crate) fn open(inode: u32) -> Option<OwnedFd> {
    holders()
        .filter(|(ino, _)| *ino == inode)
        .find_map(|(_, path)| {
            let f = std::fs::File::open(path).ok()?;
            (f.metadata().ok()?.ino() == u64::from(inode)).then(|| OwnedFd::from(f))
        })
}

/// Runs `f` on a thread moved into the namespace `ns` (the caller's thread stays where
/// it is): /proc/sys/net/* opened there are that namespace's sysctls.
pub(crate) fn run_in<T: Send>(ns: &OwnedFd, f: impl FnOnce() -> T + Send) -> io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            rustix::thread::move_into_link_name_space(
                ns.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )?;
            Ok(f())
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the thread in the namespace panicked")))
    })
}

/// (inode, a path that opens to it) for every network namespace held now: nsfs mounts
/// (/run/netns/NAME), then each thread's namespace, then open namespace fds.
fn holders() -> impl Iterator<Item = (u32, PathBuf)> {
    mounts().chain(threads()).chain(open_fds())
}

/// `net:[INODE]` as readlink and mountinfo write it.
fn nsfs_inode(s: &str) -> Option<u32> {
    s.strip_prefix("net:[")?.strip_suffix(']')?.parse().ok()
}

/// By hand: procfs 0.18's mountinfo leaves a mount point's octal escapes (`\040` for a
/// space) in place, and the path of an `ip netns add` mount is opened below.
fn mounts() -> impl Iterator<Item = (u32, PathBuf)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let found: Vec<(u32, PathBuf)> = text
        .lines()
        .filter_map(|line| {
            // id parent major:minor root mountpoint options ... - fstype source superopts
            let (left, right) = line.split_once(" - ")?;
            if right.split_whitespace().next()? != "nsfs" {
                return None;
            }
            let cols: Vec<&str> = left.split_whitespace().collect();
            Some((
                nsfs_inode(cols.get(3)?)?,
                PathBuf::from(unescape(cols.get(4)?)),
            ))
        })
        .collect();
    found.into_iter()
}

/// Mountinfo's octal escapes (`\040` for a space) undone.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let code = b
            .get(i + 1..i + 4)
            .filter(|_| b[i] == b'\\')
            .and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match code {
            Some(c) => {
                out.push(c);
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Per thread: a thread that entered a private namespace (as tests do) is the only one
/// in it.
fn threads() -> impl Iterator<Item = (u32, PathBuf)> {
    crate::procstat::all_pids()
        .into_iter()
        .flat_map(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/task"))
                .into_iter()
                .flatten()
                .flatten()
        })
        .filter_map(|task| {
            let path = task.path().join("ns/net");
            let ino = u32::try_from(std::fs::metadata(&path).ok()?.ino()).ok()?;
            Some((ino, path))
        })
}

fn open_fds() -> impl Iterator<Item = (u32, PathBuf)> {
    procfs::process::all_processes()
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|p| {
            let pid = p.pid();
            p.fd()
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(move |fd| match fd.target {
                    procfs::process::FDTarget::Net(ino) => Some((
                        u32::try_from(ino).ok()?,
                        PathBuf::from(format!("/proc/{pid}/fd/{}", fd.fd)),
                    )),
                    _ => None,
                })
        })
}

/// The prefix of every namespace and link `c1m run --hosts` of lab `pid` makes
/// (`c1mh4242-`): two labs never collide, and a journal's names are deleted only under
/// its own lab's prefix. At most 9 characters for a 7-digit pid, so a link named with it
/// and a 6-character tail fits IFNAMSIZ (15).
pub(crate) fn hosts_prefix(pid: u32) -> String {
    format!("c1mh{pid}-")
}

/// Where `ip netns add NAME` mounts a namespace.
pub(crate) fn named_path(name: &str) -> PathBuf {
    PathBuf::from("/run/netns").join(name)
}

/// The named namespace (`ip netns add`), opened.
pub(crate) fn open_named(name: &str) -> io::Result<OwnedFd> {
    Ok(OwnedFd::from(std::fs::File::open(named_path(name))?))
}

/// Moves the calling thread into `ns`. Async-signal-safe (one system call), so a child's
/// `pre_exec` can call it between fork and exec.
pub(crate) fn enter(ns: impl AsFd) -> io::Result<()> {
    rustix::thread::move_into_link_name_space(
        ns.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )?;
    Ok(())
}

/// `ip ARGS…` (iproute2), its error output in the error when it fails.
pub(crate) fn ip(args: &[&str]) -> io::Result<()> {
    let out = std::process::Command::new("ip")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("running ip (iproute2): {e}")))?;
    if out.status.success() {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

/// `ip -n NS -batch -` with `commands` (one a line) on its stdin: a host's many
/// addresses in one process instead of one each.
pub(crate) fn ip_batch(ns: &str, commands: &str) -> io::Result<()> {
    fed(&["-n", ns, "-batch", "-"], commands)
        .map_err(|e| io::Error::other(format!("ip -n {ns} -batch: {e}")))
}

/// Runs nftables' `nft -f -` with `rules` in the named namespace (`ip netns exec`).
pub(crate) fn nft(ns: &str, rules: &str) -> io::Result<()> {
    fed(&["netns", "exec", ns, "nft", "-f", "-"], rules).map_err(|e| {
        io::Error::other(format!(
            "nft in {ns} (--conntrack needs nftables' nft): {e}"
        ))
    })
}

/// Runs `ip ARGS` with `input` on its stdin; the error is its stderr.
fn fed(args: &[&str], input: &str) -> io::Result<()> {
    use std::io::Write as _;
    let mut child = std::process::Command::new("ip")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("running ip (iproute2): {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if out.status.success() {
        return Ok(());
    }
    Err(io::Error::other(
        String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    ))
}

/// Deletes the named namespace (false: there was none). Its links go with it once no
/// process holds it.
pub(crate) fn delete_named(name: &str) -> io::Result<bool> {
    if std::fs::symlink_metadata(named_path(name)).is_err() {
        return Ok(false);
    }
    ip(&["netns", "delete", name]).map(|()| true)
}

/// Deletes link `name` of this process's namespace (false: there is none).
pub(crate) fn delete_link(name: &str) -> io::Result<bool> {
    if std::fs::symlink_metadata(PathBuf::from("/sys/class/net").join(name)).is_err() {
        return Ok(false);
    }
    ip(&["link", "delete", name]).map(|()| true)
}
