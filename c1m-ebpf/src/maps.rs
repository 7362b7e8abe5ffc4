//! Every map the programs share with user space. Counters are per-CPU so hooks never
//! contend; user space sums the CPUs.

use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap, PerCpuArray, PerCpuHashMap},
};
use c1m_common::{EVENT_SLOTS, ListenEvents, SOCK_AGG_SLOTS, SockAgg, TRANSITION_SLOTS};

/// side × old state × new state.
#[map]
pub static TRANSITIONS: PerCpuArray<u64> = PerCpuArray::with_max_entries(TRANSITION_SLOTS as u32, 0);

/// side × event (see `c1m_common::event`).
#[map]
pub static EVENTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(EVENT_SLOTS as u32, 0);

/// Watched ports (host order). With the ports filter off, user space and the
/// set-state hook fill it with listening ports, which decide a socket's side.
#[map]
pub static WATCH_PORTS: HashMap<u32, u32> = HashMap::with_max_entries(65536, 0);

/// Watched IPv4 addresses (network order), used when `Config::addr_filter` is 1.
#[map]
pub static WATCH_ADDRS: HashMap<u32, u32> = HashMap::with_max_entries(65536, 0);

/// Per listening port: children created, SYN-ACK retransmits, overflowed final ACKs.
#[map]
pub static LISTEN_EVENTS: PerCpuHashMap<u32, ListenEvents> = PerCpuHashMap::with_max_entries(16384, 0);

/// Filled by the socket iterator; user space zeroes it before each walk. A walk runs
/// in the reading thread, one at a time, so plain adds are race-free.
#[map]
pub static SOCK_AGG: Array<SockAgg> = Array::with_max_entries(SOCK_AGG_SLOTS as u32, 0);

/// Times a counter could not be updated (a full map): never silently lost.
#[map]
pub static MAP_ERRORS: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
pub fn bump(map: &PerCpuArray<u64>, index: u32) {
    if let Some(slot) = map.get_ptr_mut(index) {
        // SAFETY: per-CPU slot, only this CPU writes it while preemption is off.
        unsafe { *slot += 1 };
    }
}

/// Adds to one listening port's counters, creating the entry on first use.
#[inline(always)]
pub fn bump_listener(port: u32, update: impl Fn(&mut ListenEvents)) {
    if let Some(entry) = LISTEN_EVENTS.get_ptr_mut(port) {
        // SAFETY: per-CPU value of this CPU.
        unsafe { update(&mut *entry) };
        return;
    }
    let mut fresh = ListenEvents::default();
    update(&mut fresh);
    if LISTEN_EVENTS.insert(port, fresh, 0).is_err() {
        bump(&MAP_ERRORS, 0);
    }
}
