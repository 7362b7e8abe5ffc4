//! The lab's default client source addresses, chosen by how the kernel picks ports.
//!
//! With `IP_BIND_ADDRESS_NO_PORT` the port is chosen at `connect()` per (source, server
//! address, server port): `__inet_hash_connect` walks the ephemeral range from a hashed
//! offset, even ports first, and checks every candidate 4-tuple in the established
//! hash. The walk costs about 1 / (1 − fill) probes, so a pair must stay far below
//! its even-port half, not merely fit in the range. Measured (issue 13): one source
//! for 1.5M over 100 ports (15,000 per pair, past the 14,116-port even half) fell from
//! 15.9k to ~250 conn/s and timed out; 32 sources held all 1.5M; at 1M, 16 sources
//! ramped the last 100k at 9.4k conn/s against 6.5k with one.

use std::net::Ipv4Addr;

/// Largest share of the ephemeral range one (source, server port) pair may fill: 10%
/// is 20% of the even half, ~1.25 candidates per `connect()`.
pub(crate) const PAIR_FILL_PERCENT: u64 = 10;

/// The first default source: 127.0.0.1 is the server's address.
const FIRST: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// Loopback addresses from [`FIRST`] to 127.255.255.254.
const LOOPBACK_SOURCES: u64 = (1 << 24) - 3;

/// The default sources for a run, and the figures that justify them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceChoice {
    pub count: u64,
    /// Connections each (source, server port) pair holds, at most.
    pub per_pair: u64,
    /// Ports in `net.ipv4.ip_local_port_range`.
    pub ephemeral: u64,
}

/// As few sources as keep every (source, server port) pair at or below
/// [`PAIR_FILL_PERCENT`] of the `ephemeral` range.
pub(crate) fn choose(connections: u64, server_ports: u64, ephemeral: u64) -> SourceChoice {
    let ports = server_ports.max(1);
    let pair_cap = (ephemeral * PAIR_FILL_PERCENT / 100).max(1);
    let count = connections
        .div_ceil(pair_cap)
        .div_ceil(ports)
        .clamp(1, LOOPBACK_SOURCES);
    SourceChoice {
        count,
        per_pair: connections.div_ceil(count * ports),
        ephemeral,
    }
}

impl SourceChoice {
    /// The `--source` range the client gets.
    pub(crate) fn range(&self) -> String {
        let last = Ipv4Addr::from(u32::from(FIRST) + (self.count - 1) as u32);
        format!("{FIRST}-{last}")
    }

    /// Why, in one line, said at start and kept in summary.json.
    pub(crate) fn reason(&self) -> String {
        let fill = self.per_pair as f64 * 100.0 / self.ephemeral.max(1) as f64;
        format!(
            "{} source address{} ({}): ≤ {} connections per (source, server port) pair, {fill:.1}% \
             of its {}-port ephemeral range (the kernel's connect() port search slows as a pair \
             fills; the lab keeps each ≤ {PAIR_FILL_PERCENT}%)",
            self.count,
            if self.count == 1 { "" } else { "es" },
            self.range(),
            crate::fmt::count(self.per_pair),
            crate::fmt::count(self.ephemeral),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_million_over_100_ports_takes_4_sources() {
        let c = choose(1_000_000, 100, 28_232);
        assert_eq!((c.count, c.per_pair), (4, 2_500));
        assert_eq!(c.range(), "127.0.0.2-127.0.0.5");
    }

    #[test]
    fn the_largest_target_here_takes_7() {
        let c = choose(1_700_000, 100, 28_232);
        assert_eq!((c.count, c.per_pair), (7, 2_429));
        assert_eq!(c.range(), "127.0.0.2-127.0.0.8");
        assert!(
            c.reason()
                .starts_with("7 source addresses (127.0.0.2-127.0.0.8): ≤ 2,429")
        );
    }

    #[test]
    fn every_pair_stays_at_or_below_a_tenth_of_the_range() {
        for (n, ports) in [
            (1, 1),
            (2_823, 1),
            (2_824, 1),
            (5_000, 10),
            (1_500_000, 100),
        ] {
            let c = choose(n, ports, 28_232);
            assert!(c.per_pair <= 2_823, "{n} over {ports}: {c:?}");
            // And no more sources than that needs.
            assert!(c.count == 1 || (c.count - 1) * ports * 2_823 < n, "{c:?}");
        }
        assert_eq!(choose(2_824, 1, 28_232).count, 2);
        assert_eq!(choose(5_000, 10, 28_232).count, 1);
    }

    #[test]
    fn few_ports_spill_past_the_last_octet() {
        let c = choose(1_000_000, 1, 28_232);
        assert_eq!(c.count, 355);
        assert_eq!(c.range(), "127.0.0.2-127.0.1.100");
    }

    #[test]
    fn a_tiny_range_still_gives_a_valid_choice() {
        let c = choose(10, 0, 0);
        assert_eq!((c.count, c.per_pair), (10, 1));
    }
}
