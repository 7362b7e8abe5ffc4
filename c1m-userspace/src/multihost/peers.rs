//! The client hosts a server host sees: its ESTABLISHED server-side connections grouped
//! by the peer's address, from the kernel's socket tables ([`crate::proc_net_tcp`]).
//! Read every few seconds while the run waits for external clients; ~84 ms for 18k
//! sockets here, so it runs on a blocking thread and never every tick.
//!
//! Each connection counts once, by its addresses and ports: the kernel writes the table
//! a page per `read()` and resumes at an offset into a hash bucket, so a connection
//! inserted at a bucket's head between two reads moves an already read one past the
//! offset, and it comes out twice. At 200,000 connections made during the read that
//! showed as "200,002 connections" for a moment.

use std::{
    collections::{BTreeMap, HashSet},
    net::IpAddr,
    ops::ControlFlow,
};

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
    let mut tally = Tally::default();
    proc_net_tcp::for_each_row(|row| {
        tally.count(row, ports, end);
        ControlFlow::Continue(())
    });
    tally.by_peer
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

/// The peers' addresses as `--source` takes them: `10.77.0.2,10.77.0.3`.
pub(crate) fn addresses(peers: &BTreeMap<IpAddr, u64>) -> String {
    peers
        .keys()
        .map(IpAddr::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Connections counted so far, each once.
#[derive(Default)]
pub(crate) struct Tally {
    /// (IPv6 table, local, remote) of every connection counted: a row read twice is
    /// the same connection.
    seen: HashSet<(bool, Box<str>, Box<str>)>,
    by_peer: BTreeMap<IpAddr, u64>,
}

impl Tally {
    /// Counts one row if it is an ESTABLISHED connection with its `end` port in `ports`,
    /// not counted before.
    pub(crate) fn count(&mut self, row: &Row, ports: &[u16], end: End) {
        let watched = match end {
            End::Server => row.local_port(),
            End::Client => row.remote_port(),
        };
        if row.state != ESTABLISHED || !watched.is_some_and(|p| ports.contains(&p)) {
            return;
        }
        let Some(addr) = row.remote_ip() else {
            return;
        };
        if self
            .seen
            .insert((row.v6, row.local.into(), row.remote.into()))
        {
            *self.by_peer.entry(addr).or_insert(0) += 1;
        }
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
    fn count_text(text: &str, v6: bool, ports: &[u16], end: End, out: &mut Tally) {
        for line in text.lines().skip(1) {
            if let Some(row) = proc_net_tcp::parse_line(line, v6) {
                out.count(&row, ports, end);
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
        let mut tally = Tally::default();
        count_text(text, false, &[8000], End::Server, &mut tally);
        let out = tally.by_peer;
        assert_eq!(out.len(), 2);
        assert_eq!(out[&IpAddr::from([10, 77, 0, 2])], 2);
        assert_eq!(out[&IpAddr::from([10, 77, 0, 3])], 1);
        assert!(line(&out).starts_with("2 client host(s), 3 connections"));
        assert_eq!(addresses(&out), "10.77.0.2,10.77.0.3");
        // The table read again in pieces while connections were added: rows 0 and 1 come
        // out twice. Each connection counts once (issue 33: 200,002 of 200,000).
        let mut twice = Tally::default();
        count_text(text, false, &[8000], End::Server, &mut twice);
        count_text(text, false, &[8000], End::Server, &mut twice);
        assert_eq!(twice.by_peer, out);
        // A v4-mapped IPv6 peer is its IPv4 address.
        let mut m = Tally::default();
        count_text(
            "h\n 0: 00000000000000000000000000000000:1F40 0000000000000000FFFF0000 02004D0A:1 01\n",
            true,
            &[8000],
            End::Server,
            &mut m,
        );
        assert!(m.by_peer.is_empty(), "malformed line skipped");
        count_text(
            "h\n 0: 00000000000000000000000000000000:1F40 0000000000000000FFFF000002004D0A:1 01\n",
            true,
            &[8000],
            End::Server,
            &mut m,
        );
        assert_eq!(m.by_peer[&IpAddr::from([10, 77, 0, 2])], 1);
        // From the client's end: the remote port is the server's.
        let mut c = Tally::default();
        count_text(text, false, &[0x9C41], End::Client, &mut c);
        assert_eq!(c.by_peer.values().sum::<u64>(), 2);
    }
}
