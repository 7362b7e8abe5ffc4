//! Small helpers shared by several commands.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

/// The binary this process runs, to start more of itself. `/proc/self/exe` names the
/// running image even after a rebuild replaced the file on disk: a `--servers`
/// sequence lost its last two runs to ENOENT when `cargo build` ran beside it, since
/// `current_exe()` then reads "…/c1m (deleted)". Every child so runs the same c1m as
/// its parent. Only for this process's own exec: handed to another program (`ip netns
/// exec`), the path would name that program.
pub(crate) fn own_exe() -> std::path::PathBuf {
    std::path::PathBuf::from("/proc/self/exe")
}

/// The one check of a libc call that returns -1 and sets errno, for the few calls
/// rustix lacks (each caller says which): `Ok(r)` otherwise. Generic, so it covers
/// `c_int` returns (setsockopt, signal installs) and `syscall(2)`'s `c_long` alike.
pub(crate) fn cvt<T: PartialEq + From<i8>>(r: T) -> std::io::Result<T> {
    if r == T::from(-1) {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Wall-clock now, milliseconds since the Unix epoch (0 if the clock is before 1970).
pub fn unix_ms_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// This process's command line as one line for the record: lossy, since a path
/// argument need not be UTF-8 (`std::env::args` panicked on one, after the run folder
/// was made).
pub(crate) fn command_line() -> String {
    std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A port list argument (`8000-8099`, `80,443`): one clap value holding many ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortList(pub Vec<u16>);

/// Ranges where the ports are consecutive: `8000-8099,9000`, as `parse_ports` reads it.
impl std::fmt::Display for PortList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut first = true;
        let mut i = 0;
        while i < self.0.len() {
            let lo = self.0[i];
            let mut hi = lo;
            while i + 1 < self.0.len() && self.0[i + 1] == hi.saturating_add(1) {
                i += 1;
                hi = self.0[i];
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

impl std::str::FromStr for PortList {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut ports = crate::args::parse_ports(s).map_err(|e| format!("{e:#}"))?;
        ports.sort_unstable();
        ports.dedup();
        Ok(PortList(ports))
    }
}

/// Between fork and exec of a child: have the kernel SIGKILL it when its parent dies,
/// so a `kill -9` of the parent leaves no child holding connections. The signal fires
/// when the parent *thread* that forked exits: callers spawn from the main thread (the
/// lab's `block_on`, the supervisor's current-thread runtime), which lives as long as
/// the process. `parent` is the parent's pid taken before the fork: if it already died,
/// the child belongs to another process by now and must not start.
pub(crate) fn die_with_parent(parent: u32) -> std::io::Result<()> {
    end_with_parent(parent, rustix::process::Signal::KILL)
}

/// [`die_with_parent`] with another signal: SIGTERM lets a child that is a lab itself
/// (`c1m run --hosts`'s server host) conclude its run and clean up what it made.
pub(crate) fn end_with_parent(parent: u32, signal: rustix::process::Signal) -> std::io::Result<()> {
    // rustix's raw syscalls allocate nothing, so they are fine between fork and exec.
    rustix::process::set_parent_process_death_signal(Some(signal))?;
    if rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get() as u32) != parent {
        return Err(std::io::Error::other(
            "the parent exited before its child started",
        ));
    }
    Ok(())
}

/// The flag of [`shutdown_flag`], once installed.
static SHUTDOWN: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();

/// stdout and stderr as terminals, read by [`note_terminals`] (a hung-up terminal
/// answers no question, so [`leave_dead_terminal`] cannot ask then).
static ON_TERMINAL: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

/// Notes which of stdout and stderr are terminals, for [`leave_dead_terminal`].
pub(crate) fn note_terminals() {
    use std::io::IsTerminal;
    ON_TERMINAL[0].store(std::io::stdout().is_terminal(), Ordering::Relaxed);
    ON_TERMINAL[1].store(std::io::stderr().is_terminal(), Ordering::Relaxed);
}

/// After a hangup: stdout and stderr, where they were terminals, point at /dev/null.
/// The terminal is gone, and the next write to it (EIO) would panic the line that
/// tells a run's end. Async-signal-safe.
pub(crate) fn leave_dead_terminal() {
    // rustix makes raw syscalls (open, dup2, close: async-signal-safe) and a C string
    // path allocates nothing.
    use rustix::fs::{Mode, OFlags};
    let Ok(null) = rustix::fs::open(
        c"/dev/null",
        OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return;
    };
    if ON_TERMINAL[0].load(Ordering::Relaxed) {
        let _ = rustix::stdio::dup2_stdout(&null);
    }
    if ON_TERMINAL[1].load(Ordering::Relaxed) {
        let _ = rustix::stdio::dup2_stderr(&null);
    }
}

/// A flag set by SIGINT, SIGTERM or SIGHUP, for loops that end gracefully: one per
/// process, installed by the first call (`c1m run` calls it before anything else, so a
/// signal at any moment ends the run as `interrupted` with everything restored). A
/// hangup also [leaves the dead terminal](leave_dead_terminal).
pub(crate) fn shutdown_flag() -> std::io::Result<Arc<AtomicBool>> {
    let mut first = false;
    let flag = SHUTDOWN
        .get_or_init(|| {
            first = true;
            Arc::new(AtomicBool::new(false))
        })
        .clone();
    if !first {
        return Ok(flag);
    }
    extern "C" fn on_signal(sig: libc::c_int) {
        if let Some(f) = SHUTDOWN.get() {
            f.store(true, Ordering::Relaxed);
        }
        if sig == libc::SIGHUP {
            leave_dead_terminal();
        }
    }
    note_terminals();
    // Installing a handler by hand: rustix has no safe signal(2)/sigaction(2) (its
    // `runtime` module is for libc-free runtimes and unstable).
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only does atomic loads and stores and async-signal-safe
        // calls.
        let previous = unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
        if previous == libc::SIG_ERR {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(flag)
}

/// True once SIGINT, SIGTERM or SIGHUP came (after [`shutdown_flag`] installed them).
pub(crate) fn shutdown_requested() -> bool {
    SHUTDOWN.get().is_some_and(|f| f.load(Ordering::Relaxed))
}

/// A path in a JSON record as it is on disk: a string when it is UTF-8, else its bytes
/// (a folder named `runs-\xff` made serde_json refuse the whole lab journal, so a run
/// under it could not start: issue 30, case 9). `#[serde(with = "crate::util::os_path")]`.
pub(crate) mod os_path {
    use std::{
        ffi::OsString,
        os::unix::ffi::{OsStrExt, OsStringExt},
        path::{Path, PathBuf},
    };

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// A path as JSON holds it: its text, or its bytes when it is not UTF-8.
    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Repr<T, B> {
        Text(T),
        Bytes(B),
    }

    fn repr(p: &Path) -> Repr<&str, &[u8]> {
        match p.to_str() {
            Some(text) => Repr::Text(text),
            None => Repr::Bytes(p.as_os_str().as_bytes()),
        }
    }

    fn path(r: Repr<String, Vec<u8>>) -> PathBuf {
        match r {
            Repr::Text(t) => PathBuf::from(t),
            Repr::Bytes(b) => PathBuf::from(OsString::from_vec(b)),
        }
    }

    /// Writes `p` as a string, or as an array of bytes when it is not UTF-8.
    pub(crate) fn serialize<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
        repr(p).serialize(s)
    }

    /// Reads what [`serialize`] wrote.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        Ok(path(Repr::deserialize(d)?))
    }

    /// The same for a list of paths.
    pub(crate) mod vec {
        use super::*;

        /// Writes each path as [`super::serialize`] does.
        pub(crate) fn serialize<S: Serializer>(ps: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(ps.iter().map(|p| repr(p)))
        }

        /// Reads what [`serialize`] wrote.
        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Vec<PathBuf>, D::Error> {
            Ok(Vec::<Repr<String, Vec<u8>>>::deserialize(d)?
                .into_iter()
                .map(path)
                .collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_lists_are_sorted_and_deduplicated() {
        let p: PortList = "443, 80,80,8000-8002".parse().unwrap();
        assert_eq!(p.0, vec![80, 443, 8000, 8001, 8002]);
        assert!("9-1".parse::<PortList>().is_err());
        assert!("0".parse::<PortList>().is_err());
        assert!("70000".parse::<PortList>().is_err());
        assert!("".parse::<PortList>().is_err());
        assert_eq!(p.to_string(), "80,443,8000-8002");
        let q: PortList = "21000-21003,21005".parse().unwrap();
        assert_eq!(q.to_string().parse::<PortList>().unwrap(), q);
    }

    #[test]
    fn paths_round_trip_through_json_whether_utf8_or_not() {
        use std::os::unix::ffi::OsStrExt;
        #[derive(serde::Serialize, serde::Deserialize)]
        struct R {
            #[serde(with = "super::os_path")]
            p: std::path::PathBuf,
            #[serde(with = "super::os_path::vec")]
            ps: Vec<std::path::PathBuf>,
        }
        for raw in [&b"/tmp/runs"[..], &b"/tmp/runs-\xff"[..]] {
            let p = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(raw));
            let r = R {
                p: p.clone(),
                ps: vec![p.clone(), "/sys/fs/cgroup/c1m".into()],
            };
            let json = serde_json::to_string(&r).unwrap();
            let back: R = serde_json::from_str(&json).unwrap();
            assert_eq!(back.p, p, "{json}");
            assert_eq!(back.ps, r.ps, "{json}");
        }
    }
}
