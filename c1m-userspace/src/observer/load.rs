//! Loading the eBPF object and attaching its programs: [`Observer::start`] fills the
//! watch maps, attaches every hook this kernel has, and lists the ones it lacks.

use std::{
    os::fd::{AsFd, OwnedFd},
    time::Instant,
};

use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, HashMap as BpfHashMap, MapData},
    programs::{
        BtfTracePoint, CgroupAttachMode, Iter, SchedClassifier, SockOps, TcAttachType, TracePoint,
    },
};
use c1m_common::{Config, hook};

use super::{
    Missing, Observer, ObserverConfig, ObserverError, addrs, bpf_sys, btf, error_chain, gauges,
    listeners, map_err, memory, mib, offsets, privileges, procfs,
    tracefs::{self, TracefsError},
    walk, walker,
};

/// The eBPF object, embedded by build.rs (empty when `cargo xtask build-ebpf` has not run).
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/c1m-ebpf.o"));
/// The kernel-side source that was newer than the object build.rs found, which it then
/// left out rather than embed programs out of step with this binary.
const STALE_OBJECT: Option<&str> = option_env!("C1M_EBPF_STALE");

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

        watch_ports(&mut ebpf, config.ports.iter().copied())?;
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
        // A hook's BTF tracepoint is the cheap way in (no trace record to assemble) and
        // the exact one (no perf buffer that a softirq can find taken: tcp_events.rs);
        // it reads the socket at BTF offsets, so it needs those. The classic tracepoint
        // stays the fallback.
        let mut by_btf = Vec::new();
        for (index, program, tracepoint) in BTF_TWINS {
            let skipped = skip.split(',').any(|h| h.trim() == tracepoint);
            if !skipped
                && resolved.missing.is_empty()
                && attach_btf_tracepoint(&mut ebpf, program, tracepoint, &aya_btf).is_ok()
            {
                missing_hooks.retain(|m| m.hook != index);
                by_btf.push(index);
            }
        }
        for (index, layout) in tracefs::HOOKS.iter().enumerate() {
            if missing_hooks.iter().any(|m| m.hook == index) || by_btf.contains(&index) {
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

        if let Some(loss) = &config.loss {
            attach_loss(&mut ebpf, loss)?;
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
            walk_sizes: (None, None),
            walks: 0,
            previous: None,
            closes: (0, None),
            rcv_ranges_known,
            mib_base,
            attempt_fails_unknown,
            reset_reasons,
            ports_flagged: vec![false; 1 << 16],
        };
        // Baselines: listeners' drop counters as they are now, and the sockets that
        // already exist, so every later figure is "since attach".
        let records = walk::listeners(observer.listener_link.as_fd())?;
        observer.listeners.observe(&records, true);
        observer.learn_listening_ports(&records)?;
        observer.walk_now()?;
        Ok(observer)
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

/// Hooks with a BTF tracepoint twin: (hook, program, tracepoint).
const BTF_TWINS: [(usize, &str, &str); 2] = [
    (
        hook::SET_STATE,
        "inet_sock_set_state_btf",
        "inet_sock_set_state",
    ),
    (
        hook::RETRANSMIT_SYNACK,
        "tcp_retransmit_synack_btf",
        "tcp_retransmit_synack",
    ),
];

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

/// The loss injector on `loss.link`, both ways (probes/loss.rs): its threshold first,
/// then a TCX link per direction (kernel ≥ 6.6; clsact + a filter before), owned by the
/// loaded object, so the program leaves the link when the observer goes, or its
/// process dies (TCX links are not pinned). Failing is an error: the run asked for loss.
fn attach_loss(ebpf: &mut Ebpf, loss: &super::LossInjection) -> Result<(), ObserverError> {
    {
        let mut settings: Array<&mut MapData, u32> = Array::try_from(
            ebpf.map_mut("LOSS_SETTINGS")
                .ok_or_else(|| ObserverError::MissingProgram("map LOSS_SETTINGS".to_owned()))?,
        )
        .map_err(map_err("LOSS_SETTINGS"))?;
        settings
            .set(c1m_common::loss::THRESHOLD, loss.threshold, 0)
            .map_err(map_err("LOSS_SETTINGS"))?;
    }
    // Where TCX is missing aya falls back to a clsact filter, which needs the qdisc
    // (already there is fine).
    let _ = aya::programs::tc::qdisc_add_clsact(&loss.link);
    for (name, direction) in [
        ("c1m_loss_egress", TcAttachType::Egress),
        ("c1m_loss_ingress", TcAttachType::Ingress),
    ] {
        let what = format!("loss injector {name} on {}", loss.link);
        let p: &mut SchedClassifier = program(ebpf, name, &what)?;
        p.load().map_err(prog_err(&what))?;
        p.attach(&loss.link, direction).map_err(prog_err(&what))?;
    }
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

/// Marks ports as watched in `WATCH_PORTS` (a flag per port; marking twice is harmless).
pub(super) fn watch_ports(
    ebpf: &mut Ebpf,
    ports: impl IntoIterator<Item = u16>,
) -> Result<(), ObserverError> {
    let mut map: Array<_, u32> =
        Array::try_from(ebpf.map_mut("WATCH_PORTS").ok_or(ObserverError::NoObject)?)
            .map_err(map_err("WATCH_PORTS"))?;
    for port in ports {
        map.set(u32::from(port), 1, 0)
            .map_err(map_err("WATCH_PORTS"))?;
    }
    Ok(())
}
