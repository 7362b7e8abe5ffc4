//! The client hosts a server host sees: its ESTABLISHED server-side connections grouped
//! by the peer's address, from the kernel's socket tables ([`crate::proc_net_tcp`]).
//! Read every few seconds while the run waits for external clients; ~84 ms for 18k
//! sockets here, so it runs on a blocking thread and never every tick.

use std::{collections::BTreeMap, net::IpAddr, ops::ControlFlow};

use crate::proc_net_tcp::{self, ESTABLISHED, Row};

/// Which end of a connection the watched ports are on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// Server side: the local port is a server port.
    Server,
    /// Client side: the remote port is.
    Client,
}

/// ESTABLISHED connections per peer address whose `end` port is in `ports`.
pub(crate) fn by_peer_at(ports: &[u16], end: End) -> BTreeMap<IpAddr, u64> {
    let mut out = BTreeMap::new();
    proc_net_tcp::for_each_row(|row| {
        count(row, ports, end, &mut out);
        ControlFlow::Continue(())
    });
    out
}

/// Server side: the client hosts this host sees.
pub(crate) fn by_peer(ports: &[u16]) -> BTreeMap<IpAddr, u64> {
    by_peer_at(ports, End::Server)
}

/// Client side: this host's ESTABLISHED connections to the server's ports, as its
/// kernel counts them.
pub(crate) fn client_established(server_ports: &[u16]) -> i64 {
    by_peer_at(server_ports, End::Client).values().sum::<u64>() as i64
}

/// Counts one row if it is an ESTABLISHED connection with its `end` port in `ports`.
pub(crate) fn count(row: &Row, ports: &[u16], end: End, out: &mut BTreeMap<IpAddr, u64>) {
    let watched = match end {
        End::Server => row.local_port(),
        End::Client => row.remote_port(),
    };
    if row.state != ESTABLISHED || !watched.is_some_and(|p| ports.contains(&p)) {
        return;
    }
    if let Some(addr) = row.remote_ip() {
        *out.entry(addr).or_insert(0) += 1;
    }
}

/// `2 client hosts, 30,000 connections: 10.77.0.2 15,000, 10.77.0.3 15,000`.
pub(crate) fn line(peers: &BTreeMap<IpAddr, u64>) -> String {
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

    /// Counts the lines of one table's text.
    fn count_text(text: &str, v6: bool, ports: &[u16], end: End, out: &mut BTreeMap<IpAddr, u64>) {
        for line in text.lines().skip(1) {
            if let Some(row) = proc_net_tcp::parse_line(line, v6) {
                count(&row, ports, end, out);
            }
        }
    }

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
        count_text(text, false, &[8000], End::Server, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(out[&IpAddr::from([10, 77, 0, 2])], 2);
        assert_eq!(out[&IpAddr::from([10, 77, 0, 3])], 1);
        assert!(line(&out).starts_with("2 client host(s), 3 connections"));
        // A v4-mapped IPv6 peer is its IPv4 address.
        let mut m = BTreeMap::new();
        count_text(
            "h\n 0: 00000000000000000000000000000000:1F40 0000000000000000FFFF0000 02004D0A:1 01\n",
            true,
            &[8000],
            End::Server,
            &mut m,
        );
        assert!(m.is_empty(), "malformed line skipped");
        count_text(
            "h\n 0: 00000000000000000000000000000000:1F40 0000000000000000FFFF000002004D0A:1 01\n",
            true,
            &[8000],
            End::Server,
            &mut m,
        );
        assert_eq!(m[&IpAddr::from([10, 77, 0, 2])], 1);
        // From the client's end: the remote port is the server's.
        let mut c = BTreeMap::new();
        count_text(text, false, &[0x9C41], End::Client, &mut c);
        assert_eq!(c.values().sum::<u64>(), 2);
    }
}
