//! The network of `c1m run --hosts 1+K`: a bridge namespace, a server namespace and K
//! client namespaces, each host joined to the bridge by a veth pair, with real
//! addresses on one /16 (the server 10.99.0.1, client host i 10.99.(i+1).1 and up, as
//! many source addresses as its share needs). Each host has its own loopback, MIB,
//! ephemeral range, TIME_WAIT and conntrack table; nothing is made in the box's own
//! namespace (each veth pair is created straight into its two namespaces).
//!
//! Made with iproute2's `ip`: a run makes it once, 2(K+2) + 2 + 4(K+1) commands (22
//! for 1+2: 41 ms on this box, 149 ms beside another lab's load), where the
//! `rtnetlink` crate would bring an async netlink stack and a `setns` per namespace for
//! the same few messages. Every name is
//! recorded in the lab's journal before it is made, so a `kill -9` leaves nothing the
//! next run cannot remove.

use std::net::Ipv4Addr;

use thiserror::Error;

use crate::{lab::run::journal::JournalFile, netns};

/// The first two octets of every host address: a private /16 of the run's own bridge,
/// which no other namespace sees (two runs at once reuse it without meeting).
const NET: [u8; 2] = [10, 99];

/// `--conntrack`'s nftables rules: a counter on every tracked packet leaving the host,
/// whatever its state (the rule only has to use conntrack, never to drop).
const TRACKING_RULES: &str = "add table inet c1m_conntrack\n\
    add chain inet c1m_conntrack out { type filter hook output priority 0; }\n\
    add rule inet c1m_conntrack out ct state new,established,related,untracked counter\n";

/// Source addresses one client host may have: one /24 of the /16 each (.1 to .254).
pub(crate) const MAX_SOURCES_PER_HOST: u64 = 254;

/// Why the network could not be made: one line naming the step and its cause.
#[derive(Debug, Error)]
pub(crate) enum TopologyError {
    /// A command of iproute2 (or the journal that records it) failed.
    #[error("making the hosts' network: {0}")]
    Make(#[from] std::io::Error),
    /// A client host's share needs more source addresses than one host gets.
    #[error(
        "{share} connections per client host need {needed} source addresses ({ports} server port(s) × {ephemeral} ephemeral ports each), more than the {MAX_SOURCES_PER_HOST} a host gets: add --ports or client hosts (--hosts 1+K)"
    )]
    TooManySources {
        /// Connections of the largest share.
        share: u64,
        /// Addresses it needs.
        needed: u64,
        /// Server ports.
        ports: u64,
        /// Ephemeral ports per (source, destination) pair in a client namespace.
        ephemeral: u64,
    },
}

/// The source addresses a client host needs for `share` connections: each (source,
/// server port) pair holds one ephemeral range of connections (the check `c1m client`
/// warns with).
pub(crate) fn sources_needed(share: u64, ports: u64, ephemeral: u64) -> u64 {
    share.div_ceil(ports.max(1) * ephemeral.max(1)).max(1)
}

/// The names of one run's namespaces and links, from the lab's pid.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    prefix: String,
    clients: u32,
}

impl Names {
    /// The names of lab `pid`'s topology with `clients` client hosts.
    pub(crate) fn new(pid: u32, clients: u32) -> Self {
        Names {
            prefix: netns::hosts_prefix(pid),
            clients,
        }
    }

    fn bridge_ns(&self) -> String {
        format!("{}br", self.prefix)
    }

    /// The server host's namespace.
    pub(crate) fn server_ns(&self) -> String {
        format!("{}srv", self.prefix)
    }

    /// Client host `i`'s namespace.
    pub(crate) fn client_ns(&self, i: u32) -> String {
        format!("{}c{i}", self.prefix)
    }

    /// Every namespace: the bridge's, the server's, then the clients'.
    fn namespaces(&self) -> Vec<String> {
        [self.bridge_ns(), self.server_ns()]
            .into_iter()
            .chain((0..self.clients).map(|i| self.client_ns(i)))
            .collect()
    }

    /// Each host's namespace with its veth pair (host end, bridge end): the server's,
    /// then the clients'.
    fn veths(&self) -> Vec<(String, String, String)> {
        let p = &self.prefix;
        std::iter::once((self.server_ns(), format!("{p}s"), format!("{p}bs")))
            .chain(
                (0..self.clients)
                    .map(|i| (self.client_ns(i), self.client_link(i), format!("{p}b{i}"))),
            )
            .collect()
    }

    /// Client host `i`'s end of its veth pair, inside its namespace: where `--loss`
    /// drops (the namespace, and the program with it, goes at the run's end).
    pub(crate) fn client_link(&self, i: u32) -> String {
        format!("{}h{i}", self.prefix)
    }

    fn bridge(&self) -> String {
        format!("{}br", self.prefix)
    }
}

/// The server host's address.
pub(crate) fn server_addr() -> Ipv4Addr {
    Ipv4Addr::new(NET[0], NET[1], 0, 1)
}

/// Client host `i`'s addresses, `per_host` of them (at most [`MAX_SOURCES_PER_HOST`]).
pub(crate) fn client_addrs(i: u32, per_host: u64) -> Vec<Ipv4Addr> {
    let third = u8::try_from(i + 1).unwrap_or(u8::MAX);
    (1..=per_host.min(MAX_SOURCES_PER_HOST))
        .map(|d| Ipv4Addr::new(NET[0], NET[1], third, d as u8))
        .collect()
}

/// The namespaces made so far; dropping it (an error, a panic, the end) deletes them,
/// and with them their links.
pub(crate) struct Topology {
    names: Names,
    made: Vec<String>,
}

impl Topology {
    /// Makes the namespaces, each with `lo` up, each recorded in `journal` first.
    pub(crate) fn namespaces(
        names: Names,
        journal: &mut JournalFile,
    ) -> Result<Topology, TopologyError> {
        let mut t = Topology {
            names,
            made: Vec::new(),
        };
        for ns in t.names.namespaces() {
            journal.add_namespace(&ns)?;
            netns::ip(&["netns", "add", &ns])?;
            t.made.push(ns.clone());
            netns::ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(t)
    }

    /// The ephemeral ports per (source, destination) pair in a client host (a new
    /// namespace has the kernel's default range, whatever the box's own says).
    pub(crate) fn ephemeral_ports(&self) -> std::io::Result<u64> {
        let ns = netns::open_named(&self.names.client_ns(0))?;
        netns::run_in(&ns, crate::workload::limits::ephemeral_ports)?
            .ok_or_else(|| std::io::Error::other("no net.ipv4.ip_local_port_range"))
    }

    /// The bridge, a veth pair per host onto it, and the addresses: the server's and
    /// `per_host` for each client host. Each link is recorded in `journal` first.
    pub(crate) fn wire(
        &self,
        per_host: u64,
        journal: &mut JournalFile,
    ) -> Result<(), TopologyError> {
        let br_ns = self.names.bridge_ns();
        let bridge = self.names.bridge();
        journal.add_link(&bridge)?;
        netns::ip(&["-n", &br_ns, "link", "add", &bridge, "type", "bridge"])?;
        netns::ip(&["-n", &br_ns, "link", "set", &bridge, "up"])?;
        for (i, (ns, inner, outer)) in self.names.veths().into_iter().enumerate() {
            journal.add_link(&inner)?;
            journal.add_link(&outer)?;
            #[rustfmt::skip]
            netns::ip(&[
                "link", "add", &inner, "netns", &ns, "type", "veth",
                "peer", "name", &outer, "netns", &br_ns,
            ])?;
            netns::ip(&["-n", &br_ns, "link", "set", &outer, "master", &bridge, "up"])?;
            let addrs = match i {
                0 => vec![server_addr()],
                n => client_addrs(n as u32 - 1, per_host),
            };
            let batch: String = addrs
                .iter()
                .map(|a| format!("address add {a}/16 dev {inner}\n"))
                .collect();
            netns::ip_batch(&ns, &batch)?;
            netns::ip(&["-n", &ns, "link", "set", &inner, "up"])?;
        }
        Ok(())
    }

    /// Makes each client host's namespace track its connections (`--conntrack`): an
    /// nftables table with one output rule matching `ct state`, which registers the
    /// family's conntrack hooks there (without such a rule a namespace makes no entry on
    /// 6.18). It goes with the namespace.
    pub(crate) fn track_clients(&self) -> Result<(), TopologyError> {
        for i in 0..self.names.clients {
            netns::nft(&self.names.client_ns(i), TRACKING_RULES)?;
        }
        Ok(())
    }

    /// Deletes every namespace made (and so their links); one line per failure.
    pub(crate) fn remove(&mut self) -> Vec<String> {
        let mut failed = Vec::new();
        for ns in self.made.drain(..).rev() {
            if let Err(e) = netns::delete_named(&ns) {
                failed.push(format!("could not delete network namespace {ns}: {e}"));
            }
        }
        failed
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for line in self.remove() {
            eprintln!("c1m: {line}");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_ifnamsiz_and_carry_the_labs_pid() {
        let n = Names::new(4_194_304, 16);
        assert_eq!(n.server_ns(), "c1mh4194304-srv");
        assert_eq!(n.namespaces().len(), 18);
        for (ns, inner, outer) in n.veths() {
            assert!(ns.starts_with("c1mh4194304-"));
            for link in [inner, outer, n.bridge()] {
                assert!(link.len() <= 15, "{link}");
                assert!(link.starts_with("c1mh4194304-"), "{link}");
            }
        }
    }

    #[test]
    fn a_host_gets_the_sources_its_share_needs() {
        // 28,232 ephemeral ports (the default range) × 4 ports per source address.
        assert_eq!(sources_needed(2_000, 4, 28_232), 1);
        assert_eq!(sources_needed(112_928, 4, 28_232), 1);
        assert_eq!(sources_needed(112_929, 4, 28_232), 2);
        assert_eq!(sources_needed(500_000, 1, 28_232), 18);
        assert_eq!(
            client_addrs(1, 3),
            [
                Ipv4Addr::new(10, 99, 2, 1),
                Ipv4Addr::new(10, 99, 2, 2),
                Ipv4Addr::new(10, 99, 2, 3)
            ]
        );
        assert_eq!(server_addr(), Ipv4Addr::new(10, 99, 0, 1));
    }
}
