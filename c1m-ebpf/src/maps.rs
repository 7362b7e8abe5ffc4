//! Every map the programs share with user space. Counters are per-CPU so hooks never
//! contend; user space sums the CPUs.

use core::intrinsics::{AtomicOrdering, atomic_xadd};

use aya_ebpf::{
    EbpfContext,
    bindings::BPF_NOEXIST,
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray, PerCpuHashMap},
};
use aya_log_ebpf::error;
use c1m_common::{
    ClosedListener, EVENT_SLOTS, LOSS_SLOTS, ListenEvents, RESET_CAUSE_SLOTS, RESET_SLOTS,
    RETRANSMIT_SLOTS, SOCK_AGG_SLOTS, SockAgg, TRANSITION_SLOTS, loss,
};

/// side × old state × new state.
#[map]
pub static TRANSITIONS: PerCpuArray<u64> =
    PerCpuArray::with_max_entries(TRANSITION_SLOTS as u32, 0);

/// side × event (see `c1m_common::event`).
#[map]
pub static EVENTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(EVENT_SLOTS as u32, 0);

/// side × retransmit kind (see `c1m_common::retransmit`), in segments.
#[map]
pub static RETRANSMITS: PerCpuArray<u64> =
    PerCpuArray::with_max_entries(RETRANSMIT_SLOTS as u32, 0);

/// side × reset reason (see `c1m_common::reset_reason`), resets sent.
#[map]
pub static RESETS: PerCpuArray<u64> = PerCpuArray::with_max_entries(RESET_SLOTS as u32, 0);

/// `c1m_common::reset_cause_key` -> resets sent: what drew each (a hash, read by
/// iterating, because the few keys a run sees sit in a space of 3 × 32 × 8 × 256).
#[map]
pub static RESET_CAUSES: PerCpuHashMap<u32, u64> =
    PerCpuHashMap::with_max_entries(RESET_CAUSE_SLOTS as u32, 0);

/// direction × segment class (see `c1m_common::loss`): segments the loss injector dropped.
#[map]
pub static LOSS_DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(LOSS_SLOTS as u32, 0);

/// The loss injector's settings (see `c1m_common::loss::THRESHOLD`), written by user
/// space before it attaches the classifiers; all 0 (drop nothing) until then.
#[map]
pub static LOSS_SETTINGS: Array<u32> = Array::with_max_entries(loss::SETTINGS as u32, 0);

/// Watched ports (host order) as a flag per port, non-zero = watched. With the ports
/// filter off, user space and the set-state hook mark listening ports, which decide a
/// socket's side. An array, not a hash map: the verifier inlines an array lookup into a
/// bounds check and a load, where a hash lookup hashed and walked a bucket — 1.1% of the
/// box's CPU in an unpaced 1M ramp (perf, `lookup_nulls_elem_raw`), at several lookups
/// per connection.
#[map]
pub static WATCH_PORTS: Array<u32> = Array::with_max_entries(65536, 0);

/// Watched IPv4 addresses (network order), used when `Config::addr_filter` is 1;
/// also the IPv4 addresses of IPv4-mapped IPv6 sockets.
#[map]
pub static WATCH_ADDRS: HashMap<u32, u32> = HashMap::with_max_entries(65536, 0);

/// Watched IPv6 addresses (the 16 bytes of `struct in6_addr`), used likewise. Two
/// maps, not one of 16-byte keys, so an IPv4 socket's lookup costs what it did.
#[map]
pub static WATCH_ADDRS6: HashMap<[u32; 4], u32> = HashMap::with_max_entries(65536, 0);

/// Per listening port: children created, SYN-ACK retransmits, overflowed final ACKs.
#[map]
pub static LISTEN_EVENTS: PerCpuHashMap<u32, ListenEvents> =
    PerCpuHashMap::with_max_entries(16384, 0);

/// Listener address -> its last `sk_drops`, written as it closes; user space drains it.
#[map]
pub static LISTEN_CLOSED: LruHashMap<u64, ClosedListener> = LruHashMap::with_max_entries(4096, 0);

/// Filled by the socket iterator; user space zeroes it before each walk. A walk runs
/// in the reading thread, one at a time, so plain adds are race-free.
#[map]
pub static SOCK_AGG: Array<SockAgg> = Array::with_max_entries(SOCK_AGG_SLOTS as u32, 0);

/// Times a counter could not be updated (a full map): never silently lost.
#[map]
pub static MAP_ERRORS: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// User-space settings decided after load (see `c1m_common::settings`).
#[map]
pub static SETTINGS: Array<u32> = Array::with_max_entries(1, 0);

#[inline(always)]
pub fn setting(bit: u32) -> bool {
    SETTINGS.get(0).is_some_and(|v| v & bit != 0)
}

/// Atomic even though per-CPU: a hook can be interrupted by a softirq whose sock_ops
/// program bumps the same slot (cgroup programs have no recursion guard).
#[inline(always)]
fn add(slot: *mut u64) {
    add_n(slot, 1);
}

#[inline(always)]
fn add_n(slot: *mut u64, n: u64) {
    // SAFETY: `slot` points into a map value that outlives this program run. The
    // bpfel target exposes no `AtomicU64::fetch_add`; the intrinsic lowers to BPF's
    // atomic add.
    unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(slot, n) };
}

#[inline(always)]
pub fn bump(map: &PerCpuArray<u64>, index: u32) {
    bump_by(map, index, 1);
}

#[inline(always)]
pub fn bump_by(map: &PerCpuArray<u64>, index: u32, n: u64) {
    if let Some(slot) = map.get_ptr_mut(index) {
        add_n(slot, n);
    }
}

/// Which per-listening-port counter to bump.
#[derive(Clone, Copy)]
pub enum ListenCounter {
    Children,
    SynackRetransmits,
    OverflowAcks,
    RcvDiscards,
}

/// Adds one to a listening port's counter, creating the entry on first use; `ctx`
/// is any program context, for the error log.
#[inline(always)]
pub fn bump_listener<C: EbpfContext>(ctx: &C, port: u32, counter: ListenCounter) {
    // One lookup when the port is known (every child but the first): the map is a hash.
    let entry = LISTEN_EVENTS.get_ptr_mut(port).or_else(|| {
        let _ = LISTEN_EVENTS.insert(port, ListenEvents::default(), u64::from(BPF_NOEXIST));
        LISTEN_EVENTS.get_ptr_mut(port)
    });
    let Some(entry) = entry else {
        bump(&MAP_ERRORS, 0);
        // Per error, never per event: the log ring would drop at C1M rates.
        error!(
            ctx,
            "c1m: per-port listener map full, port {} not counted", port
        );
        return;
    };
    // SAFETY: entry points to this CPU's value of a live map element.
    let slot = unsafe {
        match counter {
            ListenCounter::Children => &raw mut (*entry).children,
            ListenCounter::SynackRetransmits => &raw mut (*entry).synack_retransmits,
            ListenCounter::OverflowAcks => &raw mut (*entry).overflow_acks,
            ListenCounter::RcvDiscards => &raw mut (*entry).rcv_discards,
        }
    };
    add(slot);
}

/// Adds one to a reset cause's counter, creating it on first use.
#[inline(always)]
pub fn bump_reset_cause<C: EbpfContext>(ctx: &C, key: u32) {
    let slot = RESET_CAUSES.get_ptr_mut(key).or_else(|| {
        let _ = RESET_CAUSES.insert(key, 0, u64::from(BPF_NOEXIST));
        RESET_CAUSES.get_ptr_mut(key)
    });
    let Some(slot) = slot else {
        bump(&MAP_ERRORS, 0);
        error!(
            ctx,
            "c1m: reset-cause map full, cause {:x} not counted", key
        );
        return;
    };
    add(slot);
}
