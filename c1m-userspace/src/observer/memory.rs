//! Kernel bytes held by the watched sockets: buffer bytes counted per socket by the
//! iterator, and slab bytes derived from socket counts × each cache's object size.

use std::collections::BTreeMap;

use c1m_common::{SockAgg, side, sock_agg_index, tcp_state};

use super::{
    procfs,
    view::{KernelMemory, SideMemory},
};

/// The slab caches of one family's TCP objects: full, time-wait and request sockets.
struct SockCaches {
    full: &'static str,
    time_wait: &'static str,
    request: &'static str,
}

/// `tcp_prot`'s caches, and `tcpv6_prot`'s, whose full object is larger (it adds
/// `ipv6_pinfo`: 2432 B vs 2304 B on 6.18, though both pack 13 to an 8-page slab).
/// https://github.com/torvalds/linux/blob/v6.18/net/ipv6/tcp_ipv6.c (tcpv6_prot, struct tcp6_sock, tcp6_request_sock_ops, tcp6_timewait_sock_ops)
const V4: SockCaches = SockCaches {
    full: "TCP",
    time_wait: "tw_sock_TCP",
    request: "request_sock_TCP",
};
const V6: SockCaches = SockCaches {
    full: "TCPv6",
    time_wait: "tw_sock_TCPv6",
    request: "request_sock_TCPv6",
};
/// What a socket with a file costs besides its TCP object: the socket inode, the
/// `struct file` and its dentry.
const WITH_FILE: [&str; 3] = ["sock_inode_cache", "filp", "dentry"];
/// Per epoll registration: the epitem and its wait-queue entry.
const IN_EPOLL: [&str; 2] = ["eventpoll_epi", "eventpoll_pwq"];
/// Per bound local port of a connecting socket: the port's bind buckets. Accepted
/// sockets share their listener's; client sockets rarely share a port, so one pair
/// per client-side socket is an upper bound.
const BIND_BUCKETS: [&str; 2] = ["tcp_bind_bucket", "tcp_bind2_bucket"];

pub(crate) struct MemoryModel {
    footprints: BTreeMap<String, u64>,
    pub missing: Vec<String>,
}

impl MemoryModel {
    pub(crate) fn from_sys() -> Self {
        let mut footprints = BTreeMap::new();
        let mut missing = Vec::new();
        // A kernel without IPv6 has no TCPv6 caches, and no IPv6 sockets to size.
        let v6 = procfs::slab_object_footprint(V6.full).is_some();
        for cache in [V4.full, V4.time_wait, V4.request]
            .into_iter()
            .chain(
                v6.then_some([V6.full, V6.time_wait, V6.request])
                    .into_iter()
                    .flatten(),
            )
            .chain(WITH_FILE)
            .chain(IN_EPOLL)
            .chain(BIND_BUCKETS)
        {
            match procfs::slab_object_footprint(cache) {
                Some(bytes) => {
                    footprints.insert(cache.to_owned(), bytes);
                }
                None => missing.push(format!(
                    "slab cache {cache}: not in /sys/kernel/slab, left out of slab_bytes_derived"
                )),
            }
        }
        Self {
            footprints,
            missing,
        }
    }

    fn cost(&self, caches: &[&str]) -> u64 {
        caches
            .iter()
            .map(|c| self.footprints.get(*c).copied().unwrap_or(0))
            .sum()
    }

    pub(crate) fn compute(&self, agg: &[SockAgg]) -> KernelMemory {
        let mut m = KernelMemory {
            slab_object_bytes: self.footprints.clone(),
            ..KernelMemory::default()
        };
        for s in 0..side::COUNT as u32 {
            let mut sm = SideMemory::default();
            // IPv6 sockets per kind: full, time-wait, request.
            let mut v6 = [0u64; 3];
            for state in 0..tcp_state::COUNT as u32 {
                let Some(a) = agg.get(sock_agg_index(s, state) as usize) else {
                    continue;
                };
                sm.sockets += a.sockets;
                sm.ipv6_sockets += a.v6_sockets;
                match state {
                    tcp_state::TIME_WAIT => {
                        sm.time_wait_sockets += a.sockets;
                        v6[1] += a.v6_sockets;
                    }
                    tcp_state::NEW_SYN_RECV => {
                        sm.request_sockets += a.sockets;
                        v6[2] += a.v6_sockets;
                    }
                    _ => {
                        sm.full_sockets += a.sockets;
                        v6[0] += a.v6_sockets;
                    }
                }
                sm.with_file += a.with_file;
                sm.in_epoll += a.in_epoll;
                sm.rmem_alloc += a.rmem_alloc;
                sm.wmem_queued += a.wmem_queued;
                sm.forward_alloc += a.forward_alloc;
            }
            // min: a count read mid-change can't make a negative IPv4 count.
            let v4 = |total: u64, v6: u64| total - v6.min(total);
            let mut objects: Vec<(&str, u64)> = vec![
                (V4.full, v4(sm.full_sockets, v6[0])),
                (V4.time_wait, v4(sm.time_wait_sockets, v6[1])),
                (V4.request, v4(sm.request_sockets, v6[2])),
                (V6.full, v6[0]),
                (V6.time_wait, v6[1]),
                (V6.request, v6[2]),
            ];
            objects.extend(WITH_FILE.iter().map(|c| (*c, sm.with_file)));
            objects.extend(IN_EPOLL.iter().map(|c| (*c, sm.in_epoll)));
            if s == side::CLIENT {
                objects.extend(
                    BIND_BUCKETS
                        .iter()
                        .map(|c| (*c, sm.full_sockets + sm.time_wait_sockets)),
                );
            }
            for (cache, count) in objects {
                let bytes = count * self.cost(&[cache]);
                sm.slab_bytes_derived += bytes;
                if bytes > 0 {
                    *m.slab_bytes_by_cache.entry(cache.to_owned()).or_default() += bytes;
                }
            }
            finish(&mut sm);
            add(&mut m.total, &sm);
            match s {
                side::SERVER => m.server = sm,
                side::CLIENT => m.client = sm,
                _ => m.other = sm,
            }
        }
        finish(&mut m.total);
        m
    }
}

fn finish(sm: &mut SideMemory) {
    sm.buffer_bytes = sm.rmem_alloc + sm.wmem_queued + sm.forward_alloc;
    sm.total_bytes = sm.slab_bytes_derived + sm.buffer_bytes;
    sm.bytes_per_socket = if sm.sockets > 0 {
        sm.total_bytes as f64 / sm.sockets as f64
    } else {
        0.0
    };
}

fn add(total: &mut SideMemory, x: &SideMemory) {
    total.sockets += x.sockets;
    total.ipv6_sockets += x.ipv6_sockets;
    total.full_sockets += x.full_sockets;
    total.time_wait_sockets += x.time_wait_sockets;
    total.request_sockets += x.request_sockets;
    total.with_file += x.with_file;
    total.in_epoll += x.in_epoll;
    total.slab_bytes_derived += x.slab_bytes_derived;
    total.rmem_alloc += x.rmem_alloc;
    total.wmem_queued += x.wmem_queued;
    total.forward_alloc += x.forward_alloc;
}

#[cfg(test)]
mod tests {
    use c1m_common::SOCK_AGG_SLOTS;

    use super::*;

    fn model(footprints: &[(&str, u64)]) -> MemoryModel {
        MemoryModel {
            footprints: footprints
                .iter()
                .map(|(k, v)| ((*k).to_owned(), *v))
                .collect(),
            missing: vec![],
        }
    }

    #[test]
    fn ipv6_sockets_are_sized_with_the_tcpv6_caches() {
        let model = model(&[
            ("TCP", 2000),
            ("TCPv6", 2100),
            ("tw_sock_TCP", 200),
            ("tw_sock_TCPv6", 210),
            ("request_sock_TCP", 300),
            ("request_sock_TCPv6", 310),
        ]);
        let mut agg = vec![SockAgg::default(); SOCK_AGG_SLOTS];
        let mut set = |state, sockets, v6_sockets| {
            let a = &mut agg[sock_agg_index(side::SERVER, state) as usize];
            a.sockets = sockets;
            a.v6_sockets = v6_sockets;
        };
        set(tcp_state::ESTABLISHED, 10, 4);
        set(tcp_state::LISTEN, 1, 1);
        set(tcp_state::TIME_WAIT, 3, 3);
        set(tcp_state::NEW_SYN_RECV, 2, 1);
        let m = model.compute(&agg);
        let by = |c: &str| m.slab_bytes_by_cache.get(c).copied();
        assert_eq!(by("TCP"), Some(6 * 2000));
        assert_eq!(by("TCPv6"), Some(5 * 2100), "4 established + the listener");
        assert_eq!(by("tw_sock_TCP"), None);
        assert_eq!(by("tw_sock_TCPv6"), Some(3 * 210));
        assert_eq!(by("request_sock_TCP"), Some(300));
        assert_eq!(by("request_sock_TCPv6"), Some(310));
        assert_eq!(m.server.ipv6_sockets, 9);
        assert_eq!(m.total.ipv6_sockets, 9);
        assert_eq!(m.server.sockets, 16);
        assert_eq!(
            m.server.slab_bytes_derived,
            6 * 2000 + 5 * 2100 + 3 * 210 + 300 + 310
        );
    }

    #[test]
    fn derives_slab_bytes_from_counts() {
        let model = MemoryModel {
            footprints: [
                ("TCP", 2000),
                ("tw_sock_TCP", 200),
                ("sock_inode_cache", 800),
                ("filp", 200),
                ("dentry", 200),
                ("eventpoll_epi", 128),
                ("eventpoll_pwq", 64),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
            missing: vec![],
        };
        let mut agg = vec![SockAgg::default(); SOCK_AGG_SLOTS];
        let est = &mut agg[sock_agg_index(side::SERVER, tcp_state::ESTABLISHED) as usize];
        est.sockets = 10;
        est.with_file = 10;
        est.in_epoll = 4;
        est.rmem_alloc = 1000;
        agg[sock_agg_index(side::CLIENT, tcp_state::TIME_WAIT) as usize].sockets = 3;
        let m = model.compute(&agg);
        assert_eq!(m.server.slab_bytes_derived, 10 * 2000 + 10 * 1200 + 4 * 192);
        assert_eq!(m.server.total_bytes, m.server.slab_bytes_derived + 1000);
        assert_eq!(
            m.client.slab_bytes_derived, 600,
            "no bind bucket sizes known in this model"
        );
        assert_eq!(m.total.sockets, 13);
        assert_eq!(m.total.total_bytes, m.server.total_bytes + 600);
    }
}
