//! The client hosts a server host sees: its ESTABLISHED server-side connections grouped
//! by the peer's address, from `/proc/net/tcp` and `tcp6` of this network namespace.
//! Read every few seconds while the run waits for external clients; ~84 ms for 18k
//! sockets here, so it runs on a blocking thread and never every tick.

use std::{collections::BTreeMap, net::IpAddr};

/// TCP_ESTABLISHED as `/proc/net/tcp` writes it (`st` column, hex).
const ESTABLISHED: &str = "01";

/// Which end of a connection the watched ports are on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Server side: the local port is a server port.
    Server,
    /// Client side: the remote port is.
    Client,
}

/// ESTABLISHED connections per peer address whose `end` port is in `ports`.
pub fn by_peer_at(ports: &[u16], end: End) -> BTreeMap<IpAddr, u64> {
    let mut out = BTreeMap::new();
    for (file, v6) in [("/proc/net/tcp", false), ("/proc/net/tcp6", true)] {
        if let Ok(text) = std::fs::read_to_string(file) {
            count(&text, v6, ports, end, &mut out);
        }
    }
    out
}

/// Server side: the client hosts this host sees.
pub fn by_peer(ports: &[u16]) -> BTreeMap<IpAddr, u64> {
    by_peer_at(ports, End::Server)
}

/// Client side: this host's ESTABLISHED connections to the server's ports, as its
/// kernel counts them.
pub fn client_established(server_ports: &[u16]) -> i64 {
    by_peer_at(server_ports, End::Client).values().sum::<u64>() as i64
}

/// Counts the lines of one `/proc/net/tcp{,6}` text.
pub fn count(text: &str, v6: bool, ports: &[u16], end: End, out: &mut BTreeMap<IpAddr, u64>) {
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(local), Some(remote), Some(st)) = (f.get(1), f.get(2), f.get(3)) else {
            continue;
        };
        if *st != ESTABLISHED {
            continue;
        }
        let watched = match end {
            End::Server => local,
            End::Client => remote,
        };
        let Some(port) = watched
            .rsplit_once(':')
            .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
        else {
            continue;
        };
        if !ports.contains(&port) {
            continue;
        }
        if let Some(addr) = remote.split_once(':').and_then(|(a, _)| parse_addr(a, v6)) {
            *out.entry(addr).or_insert(0) += 1;
        }
    }
}

/// The kernel prints addresses as 32-bit words in host order, hex.
fn parse_addr(hex: &str, v6: bool) -> Option<IpAddr> {
    let word = |i: usize| {
        u32::from_str_radix(hex.get(i * 8..i * 8 + 8)?, 16)
            .ok()
            .map(|w| w.to_ne_bytes())
    };
    if !v6 {
        return (hex.len() == 8)
            .then(|| word(0))
            .flatten()
            .map(IpAddr::from);
    }
    if hex.len() != 32 {
        return None;
    }
    let mut b = [0u8; 16];
    for i in 0..4 {
        b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
    }
    let a = std::net::Ipv6Addr::from(b);
    Some(a.to_ipv4_mapped().map_or(IpAddr::V6(a), IpAddr::V4))
}

/// `2 client hosts, 30,000 connections: 10.77.0.2 15,000, 10.77.0.3 15,000`.
pub fn line(peers: &BTreeMap<IpAddr, u64>) -> String {
    let total: u64 = peers.values().sum();
    let each: Vec<String> = peers
        .iter()
        .map(|(a, n)| format!("{a} {}", crate::fmt::count(*n)))
        .collect();
    format!(
        "{} client host(s), {} connections: {}",
        peers.len(),
        crate::fmt::count(total),
        each.join(", ")
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn counts_established_by_peer_on_watched_ports() {
        // x86 (little endian): 10.77.0.2 is 02004D0A; port 8000 is 1F40.
        let text = "  sl  local_address rem_address   st\n\
           0: 0100000A:1F40 02004D0A:9C40 01 0\n\
           1: 0100000A:1F40 02004D0A:9C41 01 0\n\
           2: 0100000A:1F40 03004D0A:9C41 01 0\n\
           3: 0100000A:1F40 03004D0A:9C42 06 0\n\
           4: 0100000A:0050 03004D0A:9C43 01 0\n\
           5: 00000000:1F40 00000000:0000 0A 0\n";
        let mut out = BTreeMap::new();
        count(text, false, &[8000], End::Server, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(out[&IpAddr::from([10, 77, 0, 2])], 2);
        assert_eq!(out[&IpAddr::from([10, 77, 0, 3])], 1);
        assert!(line(&out).starts_with("2 client host(s), 3 connections"));
        // A v4-mapped IPv6 peer is its IPv4 address.
        let mut m = BTreeMap::new();
        count(
            "h\n 0: 00000000000000000000000000000000:1F40 0000000000000000FFFF0000 02004D0A:1 01\n",
            true,
            &[8000],
            End::Server,
            &mut m,
        );
        assert!(m.is_empty(), "malformed line skipped");
        count(
            "h\n 0: 00000000000000000000000000000000:1F40 0000000000000000FFFF000002004D0A:1 01\n",
            true,
            &[8000],
            End::Server,
            &mut m,
        );
        assert_eq!(m[&IpAddr::from([10, 77, 0, 2])], 1);
        // From the client's end: the remote port is the server's.
        let mut c = BTreeMap::new();
        count(text, false, &[0x9C41], End::Client, &mut c);
        assert_eq!(c.values().sum::<u64>(), 2);
    }
}
