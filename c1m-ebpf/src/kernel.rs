//! Reads of kernel memory at offsets resolved from BTF by the loader.

use aya_ebpf::helpers::bpf_probe_read_kernel;

use crate::config::{cfg, known};

/// Reads a `T` at `base + offset`; `None` if the offset is unknown on this kernel or
/// the read faults (the socket may be going away under us).
#[inline(always)]
pub fn read<T>(base: u64, offset: u32) -> Option<T> {
    let offset = known(offset)?;
    if base == 0 {
        return None;
    }
    // SAFETY: bpf_probe_read_kernel validates the address and fails instead of faulting.
    unsafe { bpf_probe_read_kernel((base as usize + offset) as *const T).ok() }
}

/// Whether the socket at `sk` lives in the network namespace being watched.
#[inline(always)]
pub fn in_watched_netns(sk: u64) -> bool {
    let want = cfg!(netns_inum);
    if want == 0 {
        return true;
    }
    match netns_inum(sk) {
        Some(inum) => inum == want,
        // Fail closed: a socket we can't place is not ours to count.
        None => false,
    }
}

#[inline(always)]
pub fn netns_inum(sk: u64) -> Option<u32> {
    let net: u64 = read(sk, cfg!(offsets.skc_net))?;
    read(net, cfg!(offsets.net_ns_inum))
}

/// Whether the packet at `skb` arrived in the network namespace being watched (by its
/// device's namespace): for events that carry a packet but no socket.
#[inline(always)]
pub fn skb_in_watched_netns(skb: u64) -> bool {
    let want = cfg!(netns_inum);
    if want == 0 {
        return true;
    }
    let inum = read::<u64>(skb, cfg!(offsets.skb_dev))
        .and_then(|dev| read::<u64>(dev, cfg!(offsets.dev_nd_net)))
        .and_then(|net| read::<u32>(net, cfg!(offsets.net_ns_inum)));
    // Fail closed, as for sockets.
    inum == Some(want)
}
