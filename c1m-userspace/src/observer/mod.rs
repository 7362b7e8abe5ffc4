//! The kernel's view: loads the eBPF programs, attaches them, and reads their maps
//! and iterators into one consistent snapshot ([`KernelView`]).
//!
//! How a number travels: a tracepoint program bumps a per-CPU counter; [`Observer::snapshot`]
//! sums the CPUs, adds the latest socket walk, and hands out a `KernelView`.

mod addrs;
pub mod audit;
pub(crate) mod bpf_sys;
pub(crate) mod btf;
pub(crate) mod cli;
mod gauges;
mod handle;
mod listeners;
pub mod loss;
mod memory;
pub mod mib;
pub(crate) mod offsets;
pub mod privileges;
pub mod procfs;
pub(crate) mod resets;
pub mod retransmits;
pub mod tracefs;
pub(crate) mod view;
mod walk;
mod walker;

// `Observer`'s work, in rooms: its start (`load`) and its reads (`snapshot`).
mod load;
mod snapshot;

use std::{
    net::IpAddr,
    os::fd::OwnedFd,
    time::{Duration, Instant},
};

use aya::Ebpf;
pub(crate) use handle::ObserverHandle;
use thiserror::Error;
pub use view::{
    DroppedSegments, KernelMemory, KernelView, ListenerView, LossDrops, ResetCause, ResetSegment,
    Retransmits, Scope, SideMemory, SideView,
};

use self::{btf::BtfError, tracefs::TracefsError};

/// Why the kernel observer could not start or read its maps.
#[derive(Debug, Error)]
pub enum ObserverError {
    /// Not root and lacking capabilities; the payload names the missing ones.
    #[error(
        "the kernel observer needs root, or CAP_BPF + CAP_PERFMON + CAP_NET_ADMIN (missing: {0}); \
         run as root, e.g. `sudo c1m …`"
    )]
    NotPrivileged(String),
    /// The binary was built without an eBPF object (`cargo xtask build-ebpf` was not run).
    #[error(
        "this c1m binary has no eBPF object built in; run `cargo xtask build-ebpf` and rebuild \
         (`cargo xtask build` does both)"
    )]
    NoObject,
    /// The eBPF object was left out of the build because a kernel-side source was newer;
    /// the payload names that source.
    #[error(
        "this c1m binary was built without its eBPF object: the object was older than {0}; \
         run `cargo xtask build-ebpf` and rebuild (`cargo xtask build` does both)"
    )]
    StaleObject(&'static str),
    /// A program or map the loader needs is not in the built-in eBPF object.
    #[error(
        "program {0} is missing from the eBPF object built into c1m: rebuild with \
         `cargo xtask build`"
    )]
    MissingProgram(String),
    /// The kernel's BTF could not be read or lacks a needed type or field.
    #[error("reading kernel BTF: {0}")]
    Btf(#[from] BtfError),
    /// tracefs is missing or unreadable, or lacks a tracepoint or field a program needs.
    #[error(transparent)]
    Tracefs(#[from] TracefsError),
    /// aya failed to load the eBPF object into the kernel.
    #[error("loading the eBPF object: {0}")]
    Load(#[from] aya::EbpfError),
    /// Loading or attaching one program failed.
    #[error("{what}: {source}")]
    Program {
        /// Which program or step.
        what: String,
        /// The error aya gave.
        source: aya::programs::ProgramError,
    },
    /// Opening or reading one eBPF map failed.
    #[error("{what}: {source}")]
    Map {
        /// Which map or step.
        what: String,
        /// The error aya gave.
        source: aya::maps::MapError,
    },
    /// A system call or file read the observer needs failed.
    #[error("{what}: {source}")]
    Io {
        /// Which call or file.
        what: String,
        /// The error the OS gave.
        source: std::io::Error,
    },
}

fn map_err(what: &str) -> impl FnOnce(aya::maps::MapError) -> ObserverError + '_ {
    move |source| ObserverError::Map {
        what: what.to_owned(),
        source,
    }
}

/// What to watch.
#[derive(Debug, Clone, Default)]
pub struct ObserverConfig {
    /// Watched ports. A socket whose local port is one is server side, whose remote
    /// port is one is client side. Empty: every TCP socket is watched, and the ports
    /// that have a listener decide the side.
    pub ports: Vec<u16>,
    /// With addresses, server-side sockets must be bound to one of them and
    /// client-side sockets connected to one. IPv4, IPv6, and IPv4-mapped IPv6
    /// (the same as its IPv4 address: it matches dual-stack sockets' mapped peers).
    pub addrs: Vec<IpAddr>,
    /// Count sockets of every network namespace, not only the observer's own.
    pub all_netns: bool,
    /// Fixed interval between full socket walks; `None` adapts it to what the walk
    /// costs (see `Observer::walk_due`).
    pub walk_interval: Option<Duration>,
    /// Drop segments of the watched ports on a link of this namespace (`--loss`).
    pub loss: Option<LossInjection>,
}

/// The loss injector's settings (`c1m client --loss P --loss-link IFACE`).
#[derive(Debug, Clone, PartialEq)]
pub struct LossInjection {
    /// The probability asked, 0 < p ≤ 0.5 (shown with what was dropped).
    pub probability: f64,
    /// What the program compares a random u32 with (`c1m_common::loss::THRESHOLD`).
    pub threshold: u32,
    /// The link of the observer's namespace it drops on, both ways.
    pub link: String,
}

/// A hook that could not be attached, and the figures that are therefore missing.
struct Missing {
    hook: usize,
    reason: String,
}

/// The running kernel observer: its eBPF programs attached, its maps and socket walks
/// read into [`KernelView`] snapshots.
pub struct Observer {
    ebpf: Ebpf,
    /// Kept alive: dropping it closes the log ring and breaks the programs' logging.
    logger: Option<aya_log::EbpfLogger<&'static dyn log::Log>>,
    listener_link: OwnedFd,
    walker: walker::Walker,
    config: ObserverConfig,
    started: Instant,
    unavailable: Vec<String>,
    missing_hooks: Vec<Missing>,
    listeners: listeners::Tracker,
    gauges: gauges::Gauges,
    memory: memory::MemoryModel,
    last_walk: Option<walk::SocketWalk>,
    /// The namespace's TCP sockets by sockstat when the walk under way (`.0`) and the
    /// last one (`.1`) began: the next walk's cost is projected from their growth.
    walk_sizes: (Option<u64>, Option<u64>),
    walks: u64,
    previous: Option<(Instant, Counters)>,
    /// Transitions into CLOSE seen so far, and the snapshot that first saw the latest:
    /// TIME_WAIT moves without transitions for [`snapshot::TIME_WAIT_LEN`] after a close.
    closes: (u64, Option<Instant>),
    rcv_ranges_known: bool,
    /// The kernel's counters at attach, and the namespace they belong to (a snapshot
    /// taken by a thread of another namespace reads another MIB: not comparable).
    mib_base: Result<(mib::MibCounters, Option<u32>), String>,
    /// No `sock.sk_shutdown` offset: failed handshakes can't be told from closes.
    attempt_fails_unknown: bool,
    /// This kernel's reset reasons by value (`tracefs::reset_reason_names`).
    reset_reasons: Vec<String>,
    /// Listening ports this side has flagged in `WATCH_PORTS`, by port: each snapshot
    /// writes only a new listener's flag (a map update each, ~100 listeners a run).
    ports_flagged: Vec<bool>,
}

/// Raw counter totals read from the maps.
#[derive(Clone)]
struct Counters {
    transitions: Vec<u64>,
    events: Vec<u64>,
    retransmits: Vec<u64>,
    resets: Vec<u64>,
    /// `(reset_cause_key, resets)` for every cause seen since attach.
    reset_causes: Vec<(u32, u64)>,
}

/// An error and its sources on one line (aya's errors keep the errno in `source()`).
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
