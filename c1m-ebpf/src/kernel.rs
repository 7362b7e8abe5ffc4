//! Reads of kernel memory at offsets resolved from BTF by the loader.

use aya_ebpf::helpers::bpf_probe_read_kernel;
use c1m_common::family::AF_INET6;

use crate::{
    config::{cfg, known},
    watch::{Addrs, Ip},
};

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

/// The addresses of the socket at `sk`, read from its `sock_common`.
/// https://github.com/torvalds/linux/blob/v6.18/include/net/sock.h (struct sock_common: skc_daddr, skc_rcv_saddr, skc_v6_daddr, skc_v6_rcv_saddr)
pub struct SockAddrs {
    sk: u64,
    /// 0: read `skc_family` when an address is first asked for.
    family: u16,
}

impl SockAddrs {
    /// Addresses of a full or time-wait socket, whose `skc_family` is its own.
    #[inline(always)]
    pub fn of(sk: u64) -> Self {
        Self { sk, family: 0 }
    }

    /// Addresses of a socket whose family the caller already knows.
    #[inline(always)]
    pub fn with_family(sk: u64, family: u16) -> Self {
        Self { sk, family }
    }

    #[inline(always)]
    fn is_v6(&self) -> Option<bool> {
        let family = if self.family != 0 {
            self.family
        } else {
            read(self.sk, cfg!(offsets.skc_family))?
        };
        Some(family == AF_INET6)
    }

    #[inline(always)]
    fn addr(&self, v4: u32, v6: u32) -> Option<Ip> {
        if self.is_v6()? {
            Some(Ip::v6(read(self.sk, v6)?))
        } else {
            Some(Ip::V4(read(self.sk, v4)?))
        }
    }
}

impl Addrs for SockAddrs {
    #[inline(always)]
    fn local(&self) -> Option<Ip> {
        self.addr(cfg!(offsets.skc_rcv_saddr), cfg!(offsets.skc_v6_rcv_saddr))
    }

    #[inline(always)]
    fn remote(&self) -> Option<Ip> {
        self.addr(cfg!(offsets.skc_daddr), cfg!(offsets.skc_v6_daddr))
    }
}

/// The family of a request socket's ops: `AF_INET` for a SYN that came as IPv4 (also
/// on a dual-stack IPv6 listener, whose request socket then holds IPv4 addresses and
/// comes from `request_sock_TCP`), `AF_INET6` for an IPv6 one. The socket's own
/// `skc_family` is the listener's (`inet_reqsk_alloc`), so it can't tell.
/// https://github.com/torvalds/linux/blob/v6.18/net/ipv4/inet_connection_sock.c (inet_reqsk_alloc: ireq_family = sk_listener->sk_family)
/// https://github.com/torvalds/linux/blob/v6.18/net/ipv6/tcp_ipv6.c (tcp_v6_conn_request: IPv4 SYN -> tcp_v4_conn_request)
#[inline(always)]
pub fn request_family(req: u64) -> Option<u16> {
    let ops: u64 = read(req, cfg!(offsets.rsk_ops))?;
    let family: i32 = read(ops, cfg!(offsets.rsk_ops_family))?;
    Some(family as u16)
}
