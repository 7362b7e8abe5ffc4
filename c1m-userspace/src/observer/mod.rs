//! The kernel's view: loads the eBPF programs, attaches them, and reads their maps
//! and iterators into one consistent snapshot ([`KernelView`]).
//!
//! How a number travels: a tracepoint program bumps a per-CPU counter; [`Observer::snapshot`]
//! sums the CPUs, adds the latest socket walk, and hands out a `KernelView`.

mod addrs;
pub mod audit;
pub mod bpf_sys;
pub mod btf;
pub mod cli;
mod gauges;
mod handle;
mod listeners;
mod memory;
pub mod mib;
pub mod offsets;
pub mod privileges;
pub mod procfs;
pub mod resets;
pub mod retransmits;
pub mod tracefs;
pub mod view;
mod walk;
mod walker;

use std::{
    collections::BTreeMap,
    net::IpAddr,
    os::fd::{AsFd, OwnedFd},
    time::{Duration, Instant},
};

use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, HashMap as BpfHashMap, MapData, PerCpuArray, PerCpuHashMap},
    programs::{BtfTracePoint, CgroupAttachMode, Iter, SockOps, TracePoint},
};
use c1m_common::{
    ClosedListener, Config, EVENT_SLOTS, ListenEvents, RESET_SLOTS, RETRANSMIT_SLOTS,
    TRANSITION_SLOTS, event, event_index, hook, reset_index, reset_reason, retransmit,
    retransmit_index, side, tcp_state, transition_index,
};
pub use handle::ObserverHandle;
use thiserror::Error;
pub use view::{KernelMemory, KernelView, ListenerView, Retransmits, Scope, SideMemory, SideView};

use self::{btf::BtfError, tracefs::TracefsError};

/// The eBPF object, embedded by build.rs (empty when `cargo xtask build-ebpf` has not run).
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/c1m-ebpf.o"));
/// The kernel-side source that was newer than the object build.rs found, which it then
/// left out rather than embed programs out of step with this binary.
const STALE_OBJECT: Option<&str> = option_env!("C1M_EBPF_STALE");

#[derive(Debug, Error)]
pub enum ObserverError {
    #[error(
        "the kernel observer needs root, or CAP_BPF + CAP_PERFMON + CAP_NET_ADMIN (missing: {0}); \
         run as root, e.g. `sudo c1m …`"
    )]
    NotPrivileged(String),
    #[error(
        "this c1m binary has no eBPF object built in; run `cargo xtask build-ebpf` and rebuild \
         (`cargo xtask build` does both)"
    )]
    NoObject,
    #[error(
        "this c1m binary was built without its eBPF object: the object was older than {0}; \
         run `cargo xtask build-ebpf` and rebuild (`cargo xtask build` does both)"
    )]
    StaleObject(&'static str),
    #[error(
        "program {0} is missing from the eBPF object built into c1m: rebuild with \
         `cargo xtask build`"
    )]
    MissingProgram(String),
    #[error("reading kernel BTF: {0}")]
    Btf(#[from] BtfError),
    #[error(transparent)]
    Tracefs(#[from] TracefsError),
    #[error("loading the eBPF object: {0}")]
    Load(#[from] aya::EbpfError),
    #[error("{what}: {source}")]
    Program {
        what: String,
        source: aya::programs::ProgramError,
    },
    #[error("{what}: {source}")]
    Map {
        what: String,
        source: aya::maps::MapError,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
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
    /// Fixed interval between full socket walks; `None` adapts it so walks cost at
    /// most ~5% of one core.
    pub walk_interval: Option<Duration>,
}

/// A hook that could not be attached, and the figures that are therefore missing.
struct Missing {
    hook: usize,
    reason: String,
}

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
    walks: u64,
    previous: Option<(Instant, Counters)>,
    rcv_ranges_known: bool,
    /// The kernel's counters at attach, and the namespace they belong to (a snapshot
    /// taken by a thread of another namespace reads another MIB: not comparable).
    mib_base: Result<(mib::MibCounters, Option<u32>), String>,
    /// No `sock.sk_shutdown` offset: failed handshakes can't be told from closes.
    attempt_fails_unknown: bool,
    /// This kernel's reset reasons by value (`tracefs::reset_reason_names`).
    reset_reasons: Vec<String>,
}

/// Raw counter totals read from the maps.
#[derive(Clone)]
struct Counters {
    transitions: Vec<u64>,
    events: Vec<u64>,
    retransmits: Vec<u64>,
    resets: Vec<u64>,
}

impl Observer {
    /// Loads and attaches everything; hooks this kernel lacks are reported as
    /// unavailable and the rest keep running.
    pub fn start(config: ObserverConfig) -> Result<Self, ObserverError> {
        privileges::check_bpf().map_err(ObserverError::NotPrivileged)?;
        if let Some(newer) = STALE_OBJECT {
            return Err(ObserverError::StaleObject(newer));
        }
        if OBJECT.is_empty() {
            return Err(ObserverError::NoObject);
        }
        let kernel_btf = btf::Btf::from_sys_fs()?;
        let resolved = offsets::resolve(&kernel_btf);
        let mut unavailable: Vec<String> = resolved
            .missing
            .iter()
            .map(|m| format!("kernel field: {m}"))
            .collect();
        let o = &resolved.offsets;
        if [
            o.icsk_pending,
            o.icsk_ca_state_byte,
            o.ca_state_loss,
            o.ca_state_recovery,
        ]
        .contains(&c1m_common::OFFSET_UNKNOWN)
        {
            unavailable.push(
                "retransmit kinds (tail-loss probe, timeout, slow start, fast): every retransmit \
                 counts as `other` (kernel fields above missing)"
                    .to_owned(),
            );
        }
        if o.tcp_dsack_dups == c1m_common::OFFSET_UNKNOWN {
            unavailable.push("retransmits.spurious_dsack: no tcp_sock.dsack_dups".to_owned());
        }
        let attempt_fails_unknown = o.sk_shutdown == c1m_common::OFFSET_UNKNOWN;
        let tracing = tracefs::ensure_mounted()?;
        let reset_reasons = tracefs::reset_reason_names(&tracing);

        let mut cfg = Config::DEFAULT;
        cfg.offsets = resolved.offsets;
        let mut missing_hooks = Vec::new();
        // C1M_SKIP_HOOKS=name,name: behave as on a kernel without those tracepoints
        // (to see, and test, what c1m reports then).
        let skip = std::env::var("C1M_SKIP_HOOKS").unwrap_or_default();
        for (index, layout) in tracefs::HOOKS.iter().enumerate() {
            if skip.split(',').any(|h| h.trim() == layout.name) {
                missing_hooks.push(Missing {
                    hook: index,
                    reason: "skipped by C1M_SKIP_HOOKS".to_owned(),
                });
                continue;
            }
            match tracefs::read_hook(&tracing, layout) {
                Ok(fields) => cfg.tracepoints[index] = fields,
                Err(e) => missing_hooks.push(Missing {
                    hook: index,
                    reason: e.to_string(),
                }),
            }
        }
        if !config.all_netns {
            cfg.netns_inum = procfs::own_netns_inum().ok_or_else(|| ObserverError::Io {
                what: "reading /proc/thread-self/ns/net".to_owned(),
                source: std::io::Error::other("unreadable"),
            })?;
            let cookie = bpf_sys::own_netns_cookie().map_err(|source| ObserverError::Io {
                what: "reading this network namespace's cookie (SO_NETNS_COOKIE)".to_owned(),
                source,
            })?;
            cfg.netns_cookie_lo = cookie as u32;
            cfg.netns_cookie_hi = (cookie >> 32) as u32;
        }
        let rcv_ranges = procfs::listener_drop_ranges();
        let rcv_ranges_known = rcv_ranges.is_some();
        match rcv_ranges {
            Some(r) => cfg.listener_drop_ranges = r,
            None => unavailable.push(
                "exact accept_queue_overflows: no tcp_v4_rcv address in /proc/kallsyms (needs root and \
                 kptr_restrict < 2); the figure may include a few non-listen drops"
                    .to_owned(),
            ),
        }
        cfg.ports_filter = u32::from(!config.ports.is_empty());
        cfg.addr_filter = u32::from(!config.addrs.is_empty());

        let mut ebpf = EbpfLoader::new()
            .override_global("CONFIG", &cfg, true)
            .load(OBJECT)?;
        let logger = aya_log::EbpfLogger::init(&mut ebpf).ok();

        {
            let mut ports: BpfHashMap<_, u32, u32> =
                BpfHashMap::try_from(ebpf.map_mut("WATCH_PORTS").ok_or(ObserverError::NoObject)?)
                    .map_err(map_err("WATCH_PORTS"))?;
            for &port in &config.ports {
                ports
                    .insert(u32::from(port), 1, 0)
                    .map_err(map_err("WATCH_PORTS"))?;
            }
        }
        let keys = addrs::watch_keys(&config.addrs);
        {
            let mut map: BpfHashMap<_, u32, u32> =
                BpfHashMap::try_from(ebpf.map_mut("WATCH_ADDRS").ok_or(ObserverError::NoObject)?)
                    .map_err(map_err("WATCH_ADDRS"))?;
            for key in keys.v4 {
                map.insert(key, 1, 0).map_err(map_err("WATCH_ADDRS"))?;
            }
        }
        {
            let mut map: BpfHashMap<_, [u8; 16], u32> = BpfHashMap::try_from(
                ebpf.map_mut("WATCH_ADDRS6")
                    .ok_or(ObserverError::NoObject)?,
            )
            .map_err(map_err("WATCH_ADDRS6"))?;
            for key in keys.v6 {
                map.insert(key, 1, 0).map_err(map_err("WATCH_ADDRS6"))?;
            }
        }

        let aya_btf = aya::Btf::from_sys_fs().map_err(|e| ObserverError::Io {
            what: "reading kernel BTF for the BTF tracepoint and the iterators".to_owned(),
            source: std::io::Error::other(e.to_string()),
        })?;
        // The BTF tracepoint is the cheap way in (no trace record to assemble); it
        // reads the socket at BTF offsets, so it needs those.
        let btf_set_state = resolved.missing.is_empty()
            && attach_btf_tracepoint(
                &mut ebpf,
                "inet_sock_set_state_btf",
                "inet_sock_set_state",
                &aya_btf,
            )
            .is_ok();
        if btf_set_state {
            missing_hooks.retain(|m| m.hook != hook::SET_STATE);
        }
        for (index, layout) in tracefs::HOOKS.iter().enumerate() {
            if missing_hooks.iter().any(|m| m.hook == index)
                || (index == hook::SET_STATE && btf_set_state)
            {
                continue;
            }
            if let Err(e) = attach_tracepoint(&mut ebpf, layout.name, layout.category) {
                missing_hooks.push(Missing {
                    hook: index,
                    reason: e.to_string(),
                });
            }
        }
        if let Some(m) = missing_hooks.iter().find(|m| m.hook == hook::SET_STATE) {
            return Err(ObserverError::Tracefs(TracefsError::NoTracepoint(format!(
                "sock:inet_sock_set_state is required ({})",
                m.reason
            ))));
        }
        for m in &missing_hooks {
            unavailable.push(format!(
                "{}: {} (hook missing: {})",
                hook_figures(m.hook),
                tracefs::HOOKS[m.hook].name,
                m.reason
            ));
        }

        match attach_sock_ops(&mut ebpf) {
            Ok(()) => {
                let mut settings: Array<&mut MapData, u32> =
                    Array::try_from(ebpf.map_mut("SETTINGS").ok_or(ObserverError::NoObject)?)
                        .map_err(map_err("SETTINGS"))?;
                settings
                    .set(0, c1m_common::settings::SOCKOPS_ACTIVE, 0)
                    .map_err(map_err("SETTINGS"))?;
            }
            Err(e) => unavailable.push(format!(
                "exact transition and retransmit counts under load: sock_ops not attached ({}); \
                 the tracepoints alone skip runs nested in a softirq, and count a retransmit \
                 as one segment",
                error_chain(&e)
            )),
        }

        let listener_link = attach_iter(&mut ebpf, "iter_listeners", &aya_btf)?;
        let socket_link = attach_iter(&mut ebpf, "iter_sockets", &aya_btf)?;
        let sock_agg = Array::try_from(
            ebpf.take_map("SOCK_AGG")
                .ok_or_else(|| ObserverError::MissingProgram("map SOCK_AGG".to_owned()))?,
        )
        .map_err(map_err("SOCK_AGG"))?;
        let transitions = walker::duplicate_per_cpu(
            ebpf.map("TRANSITIONS").ok_or(ObserverError::NoObject)?,
            "TRANSITIONS",
        )?;
        let walker = walker::Walker::start(walker::WalkerMaps {
            socket_link,
            sock_agg,
            transitions,
        })?;

        let memory = memory::MemoryModel::from_sys();
        unavailable.extend(memory.missing.iter().cloned());

        let listener_filter = config.ports.clone();
        let mib_base = mib::read()
            .map(|c| (c, procfs::own_netns_inum()))
            .map_err(|e| e.to_string());
        let mut observer = Self {
            ebpf,
            logger,
            listener_link,
            walker,
            config,
            started: Instant::now(),
            unavailable,
            missing_hooks,
            listeners: listeners::Tracker::with_filter(listener_filter),
            gauges: gauges::Gauges::default(),
            memory,
            last_walk: None,
            walks: 0,
            previous: None,
            rcv_ranges_known,
            mib_base,
            attempt_fails_unknown,
            reset_reasons,
        };
        // Baselines: listeners' drop counters as they are now, and the sockets that
        // already exist, so every later figure is "since attach".
        let records = walk::listeners(observer.listener_link.as_fd())?;
        observer.listeners.observe(&records, true);
        observer.learn_listening_ports(&records)?;
        observer.walk_now()?;
        Ok(observer)
    }

    pub fn config(&self) -> &ObserverConfig {
        &self.config
    }

    /// [`Self::snapshot`] after a full socket walk started now, however recent the last
    /// one: for figures that must be of this moment (the end of a lab phase).
    pub fn snapshot_fresh(&mut self) -> Result<KernelView, ObserverError> {
        // A walk under way started before this moment: let it finish, then walk afresh.
        if self.walker.busy() {
            let r = self.walker.wait()?;
            self.apply_walk(r);
        }
        self.walk_now()?;
        self.snapshot()
    }

    /// Reads every counter map and walks the listeners (cheap: they come first and the
    /// walk stops at the first non-listener), and returns the kernel's view now. Never
    /// waits for a socket walk: one that is due is started on the walker thread, and one
    /// that finished re-bases the gauges.
    pub fn snapshot(&mut self) -> Result<KernelView, ObserverError> {
        if let Some(logger) = self.logger.as_mut() {
            logger.flush();
        }
        let closed = self.drain_closed_listeners()?;
        self.listeners.closed(&closed);
        let records = walk::listeners(self.listener_link.as_fd())?;
        self.listeners.observe(&records, false);
        self.learn_listening_ports(&records)?;
        if let Some(r) = self.walker.try_take() {
            self.apply_walk(r?);
        }
        if self.walk_due() {
            self.walker.request();
        }
        let counters = self.read_counters()?;
        let now = Instant::now();
        let mut view = KernelView {
            // The instant the counters (and so the gauges) describe.
            unix_ms: crate::util::unix_ms_now(),
            uptime_s: self.started.elapsed().as_secs_f64(),
            unavailable: self.unavailable.clone(),
            map_errors: self.read_map_errors()?,
            scope: self.scope(),
            ..KernelView::default()
        };
        match self.read_mib() {
            Ok(delta) => view.mib = Some(delta),
            Err(why) => view
                .unavailable
                .push(format!("the kernel's own counters (audit): {why}")),
        }
        let elapsed = self
            .previous
            .as_ref()
            .map(|(at, _)| now.duration_since(*at).as_secs_f64())
            .unwrap_or(0.0);
        for s in 0..side::COUNT as u32 {
            let previous = self.previous.as_ref().map(|(_, c)| c);
            *view.side_mut(s) = self.side_view(s, &counters, previous, elapsed);
        }
        let listen_events = self.read_listen_events()?;
        let acks = !self.hook_missing(hook::KFREE_SKB);
        let synacks = !self.hook_missing(hook::RETRANSMIT_SYNACK);
        view.listeners = self
            .listeners
            .views(&listen_events, acks, self.rcv_ranges_known, synacks);
        if let Some(walk) = &self.last_walk {
            view.memory = Some(self.memory.compute(&walk.agg));
            view.walk = view::WalkInfo {
                age_s: Some(walk.ended.elapsed().as_secs_f64()),
                ended_unix_ms: walk.ended_unix_ms,
                duration_ms: walk.duration.as_secs_f64() * 1000.0,
                sockets_walked: walk.sockets,
                walks: self.walks,
            };
        }
        self.previous = Some((now, counters));
        Ok(view)
    }

    fn scope(&self) -> Scope {
        if self.config.all_netns {
            Scope::AllNamespaces
        } else if self.config.ports.is_empty() && self.config.addrs.is_empty() {
            Scope::Namespace
        } else {
            Scope::WatchedPorts
        }
    }

    /// The MIB's movement since attach, read now in the calling thread's namespace.
    fn read_mib(&self) -> Result<mib::MibDelta, String> {
        let (base, netns) = self.mib_base.as_ref().map_err(Clone::clone)?;
        if procfs::own_netns_inum() != *netns {
            return Err(
                "this snapshot was taken by a thread of another network namespace than the \
                 observer's start"
                    .to_owned(),
            );
        }
        let now = mib::read().map_err(|e| e.to_string())?;
        Ok(mib::MibDelta::new(&now, base))
    }

    fn hook_missing(&self, index: usize) -> bool {
        self.missing_hooks.iter().any(|m| m.hook == index)
    }

    fn walk_due(&self) -> bool {
        if self.walker.busy() {
            return false;
        }
        let Some(last) = &self.last_walk else {
            return true;
        };
        let interval = self.config.walk_interval.unwrap_or_else(|| {
            // A walk costs ~1 µs per socket of the namespace (measured: 570k sockets in
            // 0.45-0.75 s; at 1M connections it took 6% of the ramp's CPU at 20×):
            // keep it near 2% of one core, at least every second when cheap, never
            // older than a minute. Gauges don't wait for walks (transitions carry
            // them) and the lab walks afresh at every phase end.
            (last.duration * 50).clamp(Duration::from_secs(1), Duration::from_secs(60))
        });
        last.ended.elapsed() >= interval
    }

    /// A walk started now, waited for (at attach, and at phase ends).
    fn walk_now(&mut self) -> Result<(), ObserverError> {
        let r = self.walker.wait()?;
        self.apply_walk(r);
        Ok(())
    }

    fn apply_walk(&mut self, r: walker::WalkResult) {
        let walker::WalkResult {
            walk,
            transitions_before,
            transitions_after,
        } = r;
        // A socket that changed state while the walk passed it may be in both the walk
        // and the transitions: only a quiet walk may replace the gauges' base. Between
        // quiet walks the transitions (exact) carry the gauges; the states no
        // transition reaches are taken from every walk.
        if transitions_before == transitions_after || self.last_walk.is_none() {
            self.gauges.rebase(&walk.agg, transitions_before);
        } else {
            self.gauges.refresh_walk_only(&walk.agg);
        }
        self.last_walk = Some(walk);
        self.walks += 1;
    }

    /// With no ports given, every listening port counts as a server port; the
    /// set-state hook learns new ones at once, this catches those that existed before.
    fn learn_listening_ports(
        &mut self,
        records: &[c1m_common::ListenerRecord],
    ) -> Result<(), ObserverError> {
        if !self.config.ports.is_empty() {
            return Ok(());
        }
        let mut ports: BpfHashMap<_, u32, u32> = BpfHashMap::try_from(
            self.ebpf
                .map_mut("WATCH_PORTS")
                .ok_or(ObserverError::NoObject)?,
        )
        .map_err(map_err("WATCH_PORTS"))?;
        for r in records {
            if ports.get(&r.port, 0).is_err() {
                ports.insert(r.port, 1, 0).map_err(map_err("WATCH_PORTS"))?;
            }
        }
        Ok(())
    }

    fn read_counters(&self) -> Result<Counters, ObserverError> {
        let sum = |name: &str, len: usize| -> Result<Vec<u64>, ObserverError> {
            walker::sum_per_cpu(
                self.ebpf.map(name).ok_or(ObserverError::NoObject)?,
                name,
                len,
            )
        };
        Ok(Counters {
            transitions: sum("TRANSITIONS", TRANSITION_SLOTS)?,
            events: sum("EVENTS", EVENT_SLOTS)?,
            retransmits: sum("RETRANSMITS", RETRANSMIT_SLOTS)?,
            resets: sum("RESETS", RESET_SLOTS)?,
        })
    }

    fn drain_closed_listeners(&mut self) -> Result<Vec<(u64, ClosedListener)>, ObserverError> {
        let mut map: BpfHashMap<&mut MapData, u64, ClosedListener> = BpfHashMap::try_from(
            self.ebpf
                .map_mut("LISTEN_CLOSED")
                .ok_or(ObserverError::NoObject)?,
        )
        .map_err(map_err("LISTEN_CLOSED"))?;
        let entries: Vec<(u64, ClosedListener)> = map.iter().filter_map(Result::ok).collect();
        for (sk, _) in &entries {
            // Already gone (LRU eviction) is fine.
            let _ = map.remove(sk);
        }
        Ok(entries)
    }

    fn read_map_errors(&self) -> Result<u64, ObserverError> {
        let map: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(self.ebpf.map("MAP_ERRORS").ok_or(ObserverError::NoObject)?)
                .map_err(map_err("MAP_ERRORS"))?;
        Ok(map.get(&0, 0).map_err(map_err("MAP_ERRORS"))?.iter().sum())
    }

    fn read_listen_events(&self) -> Result<BTreeMap<u16, ListenEvents>, ObserverError> {
        let map: PerCpuHashMap<&MapData, u32, ListenEvents> = PerCpuHashMap::try_from(
            self.ebpf
                .map("LISTEN_EVENTS")
                .ok_or(ObserverError::NoObject)?,
        )
        .map_err(map_err("LISTEN_EVENTS"))?;
        let mut out = BTreeMap::new();
        for entry in map.iter() {
            let (port, values) = entry.map_err(map_err("LISTEN_EVENTS"))?;
            let mut total = ListenEvents::default();
            for v in values.iter() {
                total.children += v.children;
                total.synack_retransmits += v.synack_retransmits;
                total.overflow_acks += v.overflow_acks;
                total.rcv_discards += v.rcv_discards;
            }
            out.insert(port as u16, total);
        }
        Ok(out)
    }

    fn side_view(
        &self,
        s: u32,
        now: &Counters,
        previous: Option<&Counters>,
        elapsed: f64,
    ) -> SideView {
        let mut v = SideView::default();
        let established = |c: &Counters| -> u64 {
            c.transitions[transition_index(s, tcp_state::SYN_SENT, tcp_state::ESTABLISHED) as usize]
                + c.transitions
                    [transition_index(s, tcp_state::SYN_RECV, tcp_state::ESTABLISHED) as usize]
        };
        let total = |c: &Counters| -> u64 {
            (0..tcp_state::COUNT as u32)
                .flat_map(|o| (0..tcp_state::COUNT as u32).map(move |n| transition_index(s, o, n)))
                .map(|i| c.transitions[i as usize])
                .sum()
        };
        for old in 0..tcp_state::COUNT as u32 {
            for new in 0..tcp_state::COUNT as u32 {
                let n = now.transitions[transition_index(s, old, new) as usize];
                if n > 0 {
                    v.transitions.insert(
                        format!("{}->{}", view::state_key(old), view::state_key(new)),
                        n,
                    );
                }
            }
        }
        v.transitions_total = total(now);
        v.established_total = established(now);
        if let Some(prev) = previous.filter(|_| elapsed > 0.0) {
            v.transitions_per_s = (v.transitions_total - total(prev)) as f64 / elapsed;
            v.established_per_s = (v.established_total - established(prev)) as f64 / elapsed;
        }
        for state in view::GAUGE_STATES {
            v.states.insert(
                view::state_key(state),
                self.gauges.value(s, state, &now.transitions),
            );
        }
        let mut kinds = [0u64; retransmit::COUNT];
        for (kind, slot) in kinds.iter_mut().enumerate() {
            *slot = now.retransmits[retransmit_index(s, kind as u32) as usize];
        }
        v.retransmits = Retransmits::from_kinds(&kinds);
        if !self.event_missing(event::RESET_SENT) {
            for reason in 0..reset_reason::COUNT as u32 {
                let n = now.resets[reset_index(s, reason) as usize];
                if n > 0 {
                    v.resets_sent_by_reason
                        .insert(self.reset_reason_name(reason), n);
                }
            }
        }
        for (index, name) in event::NAMES.iter().enumerate() {
            // Retransmits live in `v.retransmits` (sock_ops and the tracepoint both).
            if index as u32 != event::RETRANSMIT && !self.event_missing(index as u32) {
                // Resets are counted once, by reason (`RESETS`).
                let n = if index as u32 == event::RESET_SENT {
                    v.resets_sent_by_reason.values().sum()
                } else {
                    now.events[event_index(s, index as u32) as usize]
                };
                v.events.insert((*name).to_owned(), n);
            }
        }
        v
    }

    /// The kernel's name of a reset reason (`NO_SOCKET`, …), as its tracepoint prints it.
    fn reset_reason_name(&self, reason: u32) -> String {
        match self.reset_reasons.get(reason as usize) {
            _ if reason == reset_reason::UNKNOWN => "UNKNOWN".to_owned(),
            Some(name) if !name.is_empty() => name.clone(),
            _ => format!("REASON_{reason}"),
        }
    }

    fn event_missing(&self, event_index: u32) -> bool {
        let hook_index = match event_index {
            event::SYNACK_RETRANSMIT => hook::RETRANSMIT_SYNACK,
            event::RESET_SENT => hook::SEND_RESET,
            event::RESET_RECEIVED => hook::RECEIVE_RESET,
            event::RETRANSMIT => hook::RETRANSMIT_SKB,
            event::EXCEED_BUF_LIMIT => hook::EXCEED_BUF_LIMIT,
            event::ATTEMPT_FAIL => return self.attempt_fails_unknown,
            _ => hook::KFREE_SKB,
        };
        self.hook_missing(hook_index)
    }
}

/// The figures a hook feeds, for the "unavailable" list.
fn hook_figures(index: usize) -> &'static str {
    match index {
        hook::SET_STATE => "state gauges and transitions",
        hook::RETRANSMIT_SYNACK => "synack_retransmits",
        hook::SEND_RESET => "resets_sent",
        hook::RECEIVE_RESET => "resets_received",
        hook::RETRANSMIT_SKB => {
            "retransmits of sockets born before attach (sock_ops counts the others)"
        }
        hook::KFREE_SKB => {
            "listen_overflow_acks (accept_queue_overflows falls back to raw sk_drops)"
        }
        _ => "exceed_buf_limit",
    }
}

fn prog_err(what: &str) -> impl FnOnce(aya::programs::ProgramError) -> ObserverError + '_ {
    move |source| ObserverError::Program {
        what: what.to_owned(),
        source,
    }
}

/// The program `name` of the object, as its type.
fn program<'a, T>(ebpf: &'a mut Ebpf, name: &str, what: &str) -> Result<&'a mut T, ObserverError>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    ebpf.program_mut(name)
        .ok_or_else(|| ObserverError::MissingProgram(name.to_owned()))?
        .try_into()
        .map_err(prog_err(what))
}

fn attach_tracepoint(ebpf: &mut Ebpf, name: &str, category: &str) -> Result<(), ObserverError> {
    let what = format!("tracepoint {category}:{name}");
    let p: &mut TracePoint = program(ebpf, name, &what)?;
    p.load().map_err(prog_err(&what))?;
    p.attach(category, name).map_err(prog_err(&what))?;
    Ok(())
}

/// Attaches the sock_ops program to the root of the cgroup v2 hierarchy, so it sees
/// the sockets of every process.
fn attach_sock_ops(ebpf: &mut Ebpf) -> Result<(), ObserverError> {
    let cgroup = procfs::open_cgroup2_root().map_err(|source| ObserverError::Io {
        what: "opening the cgroup v2 root (mount -t cgroup2 none /sys/fs/cgroup)".to_owned(),
        source,
    })?;
    let what = "sock_ops program";
    let p: &mut SockOps = program(ebpf, "c1m_sock_ops", what)?;
    p.load().map_err(prog_err(what))?;
    // With bpf_link (every kernel c1m supports) a cgroup link is always one of many
    // and the kernel rejects explicit flags, so "Single" here displaces nobody.
    p.attach(&cgroup, CgroupAttachMode::Single)
        .map_err(prog_err(what))?;
    Ok(())
}

fn attach_btf_tracepoint(
    ebpf: &mut Ebpf,
    name: &str,
    tracepoint: &str,
    btf: &aya::Btf,
) -> Result<(), ObserverError> {
    let what = format!("BTF tracepoint {tracepoint}");
    let p: &mut BtfTracePoint = program(ebpf, name, &what)?;
    p.load(tracepoint, btf).map_err(prog_err(&what))?;
    p.attach().map_err(prog_err(&what))?;
    Ok(())
}

/// Loads an `iter/tcp` program and creates its link; each walk opens a new iterator.
fn attach_iter(ebpf: &mut Ebpf, name: &str, btf: &aya::Btf) -> Result<OwnedFd, ObserverError> {
    let what = format!("iterator {name} (iter/tcp)");
    let p: &mut Iter = program(ebpf, name, &what)?;
    p.load("tcp", btf).map_err(prog_err(&what))?;
    let fd = p.fd().map_err(prog_err(&what))?;
    bpf_sys::iter_link_create(fd.as_fd()).map_err(|source| ObserverError::Io { what, source })
}

/// An error and its sources on one line (aya's errors keep the errno in `source()`).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
