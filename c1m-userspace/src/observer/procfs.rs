//! The kernel's own counters in /proc and /sys, read beside the eBPF figures: slab
//! object costs (to turn socket counts into bytes), and `TcpExt`/`sockstat` (what the
//! kernel reports globally, for cross-checks).

use std::{collections::HashMap, fs, path::Path};

use c1m_common::LISTENER_DROP_FUNCTIONS;

/// Bytes one object of a slab cache really occupies: the slab's pages divided by the
/// objects per slab, so per-slab waste and metadata are included. Read from
/// /sys/kernel/slab, which also resolves caches merged into another (those are missing
/// from /proc/slabinfo).
pub fn slab_object_footprint(cache: &str) -> Option<u64> {
    let dir = Path::new("/sys/kernel/slab").join(cache);
    let read =
        |f: &str| -> Option<u64> { fs::read_to_string(dir.join(f)).ok()?.trim().parse().ok() };
    let per_slab = read("objs_per_slab")?;
    let order = read("order")?;
    if per_slab == 0 {
        return None;
    }
    Some((page_size() << order) / per_slab)
}

/// The system's page size in bytes (4096 if sysconf cannot tell).
pub fn page_size() -> u64 {
    rustix::param::page_size() as u64
}

/// One /proc/slabinfo line's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlabLine {
    /// Objects in use.
    pub active_objs: u64,
    /// Objects allocated (in use or free) in the cache's slabs.
    pub num_objs: u64,
    /// Bytes of one object, as the allocator sizes it (no per-slab waste).
    pub objsize: u64,
    /// Objects per slab.
    pub objperslab: u64,
    /// Pages per slab.
    pub pagesperslab: u64,
    /// Slabs the cache holds.
    pub num_slabs: u64,
}

impl SlabLine {
    /// Bytes held by the cache's slabs (what `slabtop` calls the cache size).
    #[cfg(test)]
    pub(crate) fn slab_bytes(&self) -> u64 {
        self.num_slabs * self.pagesperslab * page_size()
    }
}

pub(crate) fn parse_slabinfo(text: &str) -> HashMap<String, SlabLine> {
    let mut out = HashMap::new();
    for line in text.lines() {
        if line.starts_with('#') || line.starts_with("slabinfo") {
            continue;
        }
        let cols: Vec<&str> = line.split_whitespace().collect();
        // name active num objsize perslab pages : tunables l b s : slabdata active num shared
        if cols.len() < 16 {
            continue;
        }
        let n = |i: usize| cols[i].parse::<u64>().unwrap_or(0);
        out.insert(
            cols[0].to_owned(),
            SlabLine {
                active_objs: n(1),
                num_objs: n(2),
                objsize: n(3),
                objperslab: n(4),
                pagesperslab: n(5),
                num_slabs: n(14),
            },
        );
    }
    out
}

/// /proc/slabinfo keyed by cache name (it needs root to read).
pub fn read_slabinfo() -> std::io::Result<HashMap<String, SlabLine>> {
    Ok(parse_slabinfo(&fs::read_to_string("/proc/slabinfo")?))
}

/// `Prefix: name …` / `Prefix: value …` line pairs of /proc/net/netstat and /proc/net/snmp.
pub(crate) fn parse_netstat(text: &str) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let (Some((prefix, names)), Some((_, values))) =
            (names.split_once(':'), values.split_once(':'))
        else {
            continue;
        };
        for (name, value) in names.split_whitespace().zip(values.split_whitespace()) {
            if let Ok(v) = value.parse() {
                out.insert(format!("{prefix}{name}"), v);
            }
        }
    }
    out
}

/// /proc/net/netstat of the calling *thread's* network namespace (tests give each
/// test thread its own namespace), keyed like
/// `TcpExtListenOverflows`.
pub fn read_netstat() -> std::io::Result<HashMap<String, u64>> {
    Ok(parse_netstat(&fs::read_to_string(
        "/proc/thread-self/net/netstat",
    )?))
}

/// A `key:\tvalue` line of an fdinfo file as a number (`recursion_misses` of a BPF
/// program's fd, for one).
pub(crate) fn parse_fdinfo_field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// Runs of a loaded BPF program the kernel skipped since it loaded because the program
/// (or, for classic tracepoints, any tracing program) was already running on that CPU
/// (`recursion_misses`, in the fd's fdinfo since Linux 5.12; None before).
pub(crate) fn prog_recursion_misses(fd: std::os::fd::BorrowedFd<'_>) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let text = fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
    parse_fdinfo_field(&text, "recursion_misses")
}

/// /proc/net/sockstat's `TCP:` line: sockets in use, orphans, time-wait, allocated,
/// and `mem` (pages charged to TCP buffers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpSockstat {
    /// TCP sockets in use (IPv4 only; IPv6 ones are in sockstat6).
    pub inuse: u64,
    /// Orphaned sockets: closed by their process, still held by the kernel.
    pub orphan: u64,
    /// Sockets in TIME_WAIT.
    pub tw: u64,
    /// Sockets allocated, every state and family.
    pub alloc: u64,
    /// Pages charged to TCP buffers (`mem`), in pages, not bytes.
    pub mem_pages: u64,
}

pub(crate) fn parse_sockstat(text: &str) -> Option<TcpSockstat> {
    let line = text.lines().find(|l| l.starts_with("TCP:"))?;
    let cols: Vec<&str> = line.split_whitespace().collect();
    let get = |key: &str| -> Option<u64> {
        let i = cols.iter().position(|c| *c == key)?;
        cols.get(i + 1)?.parse().ok()
    };
    Some(TcpSockstat {
        inuse: get("inuse")?,
        orphan: get("orphan")?,
        tw: get("tw")?,
        alloc: get("alloc")?,
        mem_pages: get("mem")?,
    })
}

/// /proc/net/sockstat's `TCP:` line of the calling thread's network namespace; None
/// when unreadable or malformed.
pub fn read_sockstat() -> Option<TcpSockstat> {
    parse_sockstat(&fs::read_to_string("/proc/thread-self/net/sockstat").ok()?)
}

/// /proc/net/sockstat6's `TCP6: inuse N`: hashed IPv6 TCP sockets of the namespace
/// (sockstat's `TCP: inuse` counts only IPv4 ones; both share `mem` and `alloc`).
pub(crate) fn parse_sockstat6_tcp_inuse(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("TCP6:"))?;
    let mut cols = line.split_whitespace().skip_while(|c| *c != "inuse");
    cols.nth(1)?.parse().ok()
}

/// IPv6 TCP sockets in use in the calling thread's network namespace (/proc/net/sockstat6).
pub fn read_sockstat6_tcp_inuse() -> Option<u64> {
    parse_sockstat6_tcp_inuse(&fs::read_to_string("/proc/thread-self/net/sockstat6").ok()?)
}

/// Inode number of the calling thread's network namespace (`net:[4026531840]`).
pub(crate) fn own_netns_inum() -> Option<u32> {
    let link = fs::read_link("/proc/thread-self/ns/net").ok()?;
    let s = link.to_string_lossy();
    s.strip_prefix("net:[")?.strip_suffix(']')?.parse().ok()
}

/// Code ranges [start, end) of [`LISTENER_DROP_FUNCTIONS`] from /proc/kallsyms (end =
/// the next symbol), flattened as the eBPF config wants them. `None` when addresses are
/// hidden (not root, kptr_restrict) or the first function is missing; the others are
/// (0, 0) when absent (no IPv6; `tcp_drop_reason` inlined everywhere).
pub(crate) fn listener_drop_ranges() -> Option<[u64; 2 * LISTENER_DROP_FUNCTIONS.len()]> {
    let ranges = parse_kallsyms_ranges(
        &fs::read_to_string("/proc/kallsyms").ok()?,
        &LISTENER_DROP_FUNCTIONS,
    )?;
    let mut flat = [0; 2 * LISTENER_DROP_FUNCTIONS.len()];
    for (i, (start, end)) in ranges.iter().enumerate() {
        flat[2 * i] = *start;
        flat[2 * i + 1] = *end;
    }
    Some(flat)
}

/// The ranges of `names` in a kallsyms text; the first name is required.
fn parse_kallsyms_ranges<const N: usize>(text: &str, names: &[&str; N]) -> Option<[(u64, u64); N]> {
    let mut addrs: Vec<u64> = Vec::new();
    let mut found = [None; N];
    for line in text.lines() {
        let mut cols = line.split_whitespace();
        let (Some(addr), Some(_kind), Some(name)) = (cols.next(), cols.next(), cols.next()) else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        if addr == 0 {
            continue;
        }
        addrs.push(addr);
        for (i, want) in names.iter().enumerate() {
            // Module symbols carry a "[module]" column; the core ones don't.
            if name == *want && cols.next().is_none() {
                found[i] = Some(addr);
            }
        }
    }
    addrs.sort_unstable();
    addrs.dedup();
    let range = |start: u64| -> Option<(u64, u64)> {
        let i = addrs.partition_point(|&a| a <= start);
        Some((start, *addrs.get(i)?))
    };
    let ranges = found.map(|f| f.and_then(range).unwrap_or((0, 0)));
    (ranges[0] != (0, 0)).then_some(ranges)
}

/// An open directory fd of the cgroup v2 root. Uses the existing mount; where this
/// mount namespace has none (e.g. under `ip netns exec`, which remounts /sys), mounts
/// cgroup2 privately, opens it and detaches the mount again (the fd keeps it alive).
pub(crate) fn open_cgroup2_root() -> std::io::Result<fs::File> {
    if let Some(root) = cgroup2_root() {
        return fs::File::open(root);
    }
    let dir = std::env::temp_dir().join(format!("c1m-cgroup2-{}", std::process::id()));
    fs::create_dir_all(&dir)?;
    use rustix::mount::{MountFlags, UnmountFlags, mount, unmount};
    if let Err(e) = mount(c"none", &dir, c"cgroup2", MountFlags::empty(), None) {
        let _ = fs::remove_dir(&dir);
        return Err(e.into());
    }
    let file = fs::File::open(&dir);
    // MNT_DETACH lets the open fd keep the hierarchy reachable.
    let _ = unmount(&dir, UnmountFlags::DETACH);
    let _ = fs::remove_dir(&dir);
    file
}

/// Mount point of the cgroup v2 hierarchy's root (`/sys/fs/cgroup`, or
/// `/sys/fs/cgroup/unified` on hybrid systems).
pub(crate) fn cgroup2_root() -> Option<std::path::PathBuf> {
    let mounts = procfs::process::Process::myself().ok()?.mountinfo().ok()?;
    mounts
        .into_iter()
        .find(|m| m.fs_type == "cgroup2" && m.root == "/")
        .map(|m| m.mount_point)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_programs_recursion_misses_from_its_fdinfo() {
        let text = "pos:\t0\nflags:\t02000002\nprog_type:\t26\nrun_cnt:\t0\n\
                    recursion_misses:\t32\nverified_insns:\t410\n";
        assert_eq!(parse_fdinfo_field(text, "recursion_misses"), Some(32));
        assert_eq!(parse_fdinfo_field(text, "prog_type"), Some(26));
        assert_eq!(parse_fdinfo_field(text, "missing"), None);
        assert_eq!(
            parse_fdinfo_field("recursion_misses:\tx\n", "recursion_misses"),
            None
        );
    }

    #[test]
    fn parses_slabinfo() {
        let text = "slabinfo - version: 2.1\n# name <active_objs> …\n\
            TCP                   26     26   2368   13    8 : tunables    0    0    0 : slabdata      2      2      0\n";
        let s = parse_slabinfo(text);
        let tcp = s["TCP"];
        assert_eq!(
            (
                tcp.active_objs,
                tcp.objsize,
                tcp.objperslab,
                tcp.pagesperslab,
                tcp.num_slabs
            ),
            (26, 2368, 13, 8, 2)
        );
        assert_eq!(tcp.slab_bytes(), 2 * 8 * page_size());
    }

    #[test]
    fn parses_netstat_pairs() {
        let text = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 0 7 9\n\
                    IpExt: InNoRoutes\nIpExt: 3\n";
        let m = parse_netstat(text);
        assert_eq!(m["TcpExtListenOverflows"], 7);
        assert_eq!(m["TcpExtListenDrops"], 9);
        assert_eq!(m["IpExtInNoRoutes"], 3);
    }

    #[test]
    fn finds_function_ranges_in_kallsyms() {
        let text = "ffffffff82000000 T tcp_v4_rcv\nffffffff82000800 t __pfx_next\n\
                    ffffffff82001000 T tcp_v6_rcv\nffffffff82001100 t after\nffffffff82000100 t mid [mod]\n";
        let r = parse_kallsyms_ranges(text, &["tcp_v4_rcv", "tcp_v6_rcv", "absent"]).unwrap();
        assert_eq!(r[0], (0xffffffff82000000, 0xffffffff82000100));
        assert_eq!(r[1], (0xffffffff82001000, 0xffffffff82001100));
        assert_eq!(r[2], (0, 0));
        assert!(
            parse_kallsyms_ranges("0000000000000000 T tcp_v4_rcv\n", &["tcp_v4_rcv", "x"])
                .is_none()
        );
    }

    #[test]
    fn parses_sockstat() {
        let text =
            "sockets: used 9\nTCP: inuse 1 orphan 0 tw 2 alloc 3 mem 333\nUDP: inuse 0 mem 0\n";
        assert_eq!(
            parse_sockstat(text),
            Some(TcpSockstat {
                inuse: 1,
                orphan: 0,
                tw: 2,
                alloc: 3,
                mem_pages: 333
            })
        );
        assert_eq!(parse_sockstat("garbage"), None);
    }

    #[test]
    fn parses_sockstat6() {
        let text = "TCP6: inuse 4001\nUDP6: inuse 0\nFRAG6: inuse 0 memory 0\n";
        assert_eq!(parse_sockstat6_tcp_inuse(text), Some(4001));
        assert_eq!(parse_sockstat6_tcp_inuse("UDP6: inuse 3\n"), None);
    }
}
