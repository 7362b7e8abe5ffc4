//! The address filter: which kernel map each watched address goes to, as the programs
//! read it (see `watch.rs` in c1m-ebpf).

use std::net::IpAddr;

/// Keys for `WATCH_ADDRS` (IPv4, the 4 bytes in network order read as a native u32)
/// and `WATCH_ADDRS6` (the 16 bytes of a `struct in6_addr`).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct WatchKeys {
    pub v4: Vec<u32>,
    pub v6: Vec<[u8; 16]>,
}

/// An IPv4-mapped IPv6 address (`::ffff:127.0.0.1`) is its IPv4 address: the kernel
/// side matches a dual-stack socket's mapped address against the IPv4 keys.
pub(crate) fn watch_keys(addrs: &[IpAddr]) -> WatchKeys {
    let mut keys = WatchKeys::default();
    for addr in addrs {
        let v4 = match addr {
            IpAddr::V4(a) => Some(*a),
            IpAddr::V6(a) => a.to_ipv4_mapped(),
        };
        match (v4, addr) {
            (Some(a), _) => keys.v4.push(u32::from_ne_bytes(a.octets())),
            (None, IpAddr::V6(a)) => keys.v6.push(a.octets()),
            (None, IpAddr::V4(_)) => {}
        }
    }
    keys.v4.sort_unstable();
    keys.v4.dedup();
    keys.v6.sort_unstable();
    keys.v6.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    #[test]
    fn v6_addresses_get_their_own_keys_and_mapped_ones_are_v4() {
        let keys = watch_keys(&[
            "::1".parse().unwrap(),
            "127.0.0.1".parse().unwrap(),
            "::ffff:127.0.0.1".parse().unwrap(),
            "fd00::2".parse().unwrap(),
        ]);
        assert_eq!(
            keys.v4,
            vec![u32::from_ne_bytes([127, 0, 0, 1])],
            "127.0.0.1 and ::ffff:127.0.0.1 are one key"
        );
        let mut want = vec![
            Ipv6Addr::LOCALHOST.octets(),
            "fd00::2".parse::<Ipv6Addr>().unwrap().octets(),
        ];
        want.sort_unstable();
        assert_eq!(keys.v6, want);
        assert_eq!(
            keys.v6[0][15], 1,
            "::1 is its in6_addr bytes, network order"
        );
    }

    #[test]
    fn v4_compatible_is_not_mapped() {
        // ::127.0.0.1 (deprecated "IPv4-compatible") is a real IPv6 address.
        let keys = watch_keys(&[IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_compatible())]);
        assert!(keys.v4.is_empty());
        assert_eq!(keys.v6.len(), 1);
    }
}
