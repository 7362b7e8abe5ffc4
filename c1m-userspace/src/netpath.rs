//! The path a host's packets take, as its kernel counts it (issue 36, item 1): the
//! connection-tracking table against its limit and the table's own drop counters, the
//! drops of the host's interfaces (its veth end), the softnet backlog's drops and
//! squeezes, and the neighbour table against its garbage-collection thresholds.
//!
//! Every file is read through `/proc/self/net` or a network sysctl, so a process
//! `setns`'d into a host's namespace reads that host's figures (sysfs would still show
//! the namespace it was mounted in). Three figures are the box's, not the namespace's,
//! on 6.18: `nf_conntrack_max` (read-only in a child namespace, one limit each
//! namespace's table is held to), the neighbour thresholds (only under the box's own
//! /proc/sys) and softnet_stat (per CPU, every namespace's packets).
//!
//! A namespace tracks connections only when something asks for it: on this box (6.18,
//! conntrack built in) a fresh namespace's `nf_conntrack_count` stays 0 through a
//! loopback connection, and becomes 1 once an nftables rule matches `ct state`
//! (the rule registers the conntrack hooks of its family in that namespace).

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Why a kernel file could not be read as expected: the file and what was wrong.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ParseError {
    /// The file has no header line, or a row's field count differs from it.
    #[error("{file}: {why}")]
    Shape {
        /// The file, e.g. "/proc/net/stat/nf_conntrack".
        file: &'static str,
        /// What was wrong, in a few words.
        why: String,
    },
}

const CONNTRACK_STAT: &str = "/proc/net/stat/nf_conntrack";
const SOFTNET_STAT: &str = "/proc/net/softnet_stat";

/// The connection-tracking table's counters of one namespace, each summed over the
/// CPUs (the kernel keeps them per CPU and counts since the namespace was made).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(default)]
pub struct ConntrackCounters {
    /// Lookups that found an entry.
    pub found: u64,
    /// Packets conntrack could not make sense of (passed on, untracked).
    pub invalid: u64,
    /// Entries inserted into the table.
    pub insert: u64,
    /// Entries that could not be inserted (a clash with an existing one).
    pub insert_failed: u64,
    /// Packets dropped because no entry could be made: the table was full and no
    /// unassured entry could be evicted (or memory ran out).
    pub drop: u64,
    /// Unassured entries evicted to make room for a new one.
    pub early_drop: u64,
    /// ICMP errors that matched no entry.
    pub icmp_error: u64,
}

impl ConntrackCounters {
    /// The counters of a later reading less this one's (0 where a counter went back).
    pub fn since(&self, earlier: &ConntrackCounters) -> ConntrackCounters {
        ConntrackCounters {
            found: self.found.saturating_sub(earlier.found),
            invalid: self.invalid.saturating_sub(earlier.invalid),
            insert: self.insert.saturating_sub(earlier.insert),
            insert_failed: self.insert_failed.saturating_sub(earlier.insert_failed),
            drop: self.drop.saturating_sub(earlier.drop),
            early_drop: self.early_drop.saturating_sub(earlier.early_drop),
            icmp_error: self.icmp_error.saturating_sub(earlier.icmp_error),
        }
    }

    /// Packets the table turned away: `drop` plus `insert_failed`.
    pub fn refused(&self) -> u64 {
        self.drop.saturating_add(self.insert_failed)
    }
}

/// `/proc/net/stat/nf_conntrack`: a header of column names, then a row per CPU of hex
/// fields. Columns are found by name (their order and number changed across kernels:
/// 6.18 has `clashres` and `chainlength`, 4.x had `searched` and `new`). `entries` is
/// the namespace's count repeated on every row, so it is not summed (and not kept:
/// `nf_conntrack_count` is its home). A column this kernel lacks reads 0.
pub fn parse_conntrack_stat(text: &str) -> Result<ConntrackCounters, ParseError> {
    let shape = |why: String| ParseError::Shape {
        file: CONNTRACK_STAT,
        why,
    };
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines
        .next()
        .ok_or_else(|| shape("empty".to_owned()))?
        .split_whitespace()
        .collect();
    if header.first() != Some(&"entries") {
        return Err(shape(format!(
            "the header does not start with `entries`: {:?}",
            header.first()
        )));
    }
    let mut sums = vec![0u64; header.len()];
    for (cpu, line) in lines.enumerate() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() != header.len() {
            return Err(shape(format!(
                "CPU row {cpu} has {} fields, the header {}",
                fields.len(),
                header.len()
            )));
        }
        for (sum, field) in sums.iter_mut().zip(&fields) {
            let v = u64::from_str_radix(field, 16)
                .map_err(|_| shape(format!("CPU row {cpu}: {field:?} is not hex")))?;
            *sum = sum.saturating_add(v);
        }
    }
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .map_or(0, |i| sums[i])
    };
    Ok(ConntrackCounters {
        found: col("found"),
        invalid: col("invalid"),
        insert: col("insert"),
        insert_failed: col("insert_failed"),
        drop: col("drop"),
        early_drop: col("early_drop"),
        icmp_error: col("icmp_error"),
    })
}

/// The softnet backlog's counters, summed over the CPUs: the box's, every namespace's
/// packets together.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(default)]
pub struct Softnet {
    /// Packets processed.
    pub processed: u64,
    /// Packets dropped because a CPU's input backlog was full (`netdev_max_backlog`).
    pub dropped: u64,
    /// Times a receive pass ran out of budget or time with work left.
    pub time_squeeze: u64,
}

impl Softnet {
    /// A later reading less this one (0 where a counter went back: they are 32-bit).
    pub fn since(&self, earlier: &Softnet) -> Softnet {
        Softnet {
            processed: self.processed.saturating_sub(earlier.processed),
            dropped: self.dropped.saturating_sub(earlier.dropped),
            time_squeeze: self.time_squeeze.saturating_sub(earlier.time_squeeze),
        }
    }
}

/// `/proc/net/softnet_stat`: a row per CPU of hex fields, no header; the first three
/// are processed, dropped and time_squeeze on every kernel since 2.6.
pub fn parse_softnet(text: &str) -> Result<Softnet, ParseError> {
    let mut s = Softnet::default();
    for (cpu, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let f: Vec<u64> = line
            .split_whitespace()
            .take(3)
            .map(|x| u64::from_str_radix(x, 16))
            .collect::<Result<_, _>>()
            .map_err(|_| ParseError::Shape {
                file: SOFTNET_STAT,
                why: format!("CPU row {cpu} is not hex"),
            })?;
        let [processed, dropped, squeeze] = f[..] else {
            return Err(ParseError::Shape {
                file: SOFTNET_STAT,
                why: format!("CPU row {cpu} has fewer than 3 fields"),
            });
        };
        s.processed += processed;
        s.dropped += dropped;
        s.time_squeeze += squeeze;
    }
    Ok(s)
}

/// One interface's drop counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct InterfaceDrops {
    /// The interface, e.g. "c1mh123-h0" (a client host's veth end).
    pub name: String,
    /// Received packets the interface or its driver dropped.
    pub rx_dropped: u64,
    /// Packets to send it dropped.
    pub tx_dropped: u64,
}

/// `/proc/net/dev` of a namespace: its interfaces' drops (the 4th receive and 4th
/// transmit field, `drop`), loopback left out (a host's path is its veth).
pub fn parse_net_dev(text: &str) -> Vec<InterfaceDrops> {
    text.lines()
        .skip(2)
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let f: Vec<u64> = rest
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()?;
            let name = name.trim();
            (name != "lo" && f.len() >= 12).then(|| InterfaceDrops {
                name: name.to_owned(),
                rx_dropped: f[3],
                tx_dropped: f[11],
            })
        })
        .collect()
}

/// Entries of `/proc/net/arp` (the IPv4 neighbour table of the namespace), header left out.
pub fn count_arp(text: &str) -> u64 {
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .count() as u64
}

/// The neighbour table's garbage-collection thresholds: above `gc_thresh3` no entry is
/// made and a packet to a new peer is dropped ("neighbour table overflow").
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct GcThresh {
    /// Below it, no entry is collected.
    pub gc_thresh1: u64,
    /// Above it for 5 s, entries are collected.
    pub gc_thresh2: u64,
    /// The hard limit.
    pub gc_thresh3: u64,
}

impl GcThresh {
    /// The box's thresholds (only the box's own /proc/sys has them on 6.18; None in a
    /// child namespace, whose table the box's thresholds rule).
    pub fn read() -> Option<GcThresh> {
        let t = |n: &str| crate::sysctl::read_u64(&format!("net.ipv4.neigh.default.{n}"));
        Some(GcThresh {
            gc_thresh1: t("gc_thresh1")?,
            gc_thresh2: t("gc_thresh2")?,
            gc_thresh3: t("gc_thresh3")?,
        })
    }
}

/// Whether a namespace's table tracks connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Tracking {
    /// The kernel has no conntrack (no /proc/net/stat/nf_conntrack).
    Absent,
    /// Conntrack is there but nothing in the namespace uses it: no entry made, no
    /// packet counted, so no table to fill.
    NotTracking,
    /// The namespace has made entries: its table can fill.
    Tracking,
}

/// One namespace's conntrack table at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Conntrack {
    /// Whether it tracks.
    pub tracking: Tracking,
    /// `nf_conntrack_count`: entries in the namespace's table now.
    pub entries: u64,
    /// `nf_conntrack_max`: the most entries a namespace's table may hold (0: no limit).
    pub max: u64,
    /// The table's counters since the namespace was made.
    pub counters: ConntrackCounters,
}

impl Conntrack {
    /// Whether the table is at its limit: a new connection's first packet is dropped
    /// unless an unassured entry can be evicted.
    pub fn full(&self) -> bool {
        self.max > 0 && self.entries >= self.max
    }
}

/// The path figures of the reading process's namespace at one instant: a value travels
/// with its timestamp (as [`crate::procstat`]'s samples do).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct PathReading {
    /// When it was read, ms since the Unix epoch.
    pub unix_ms: u64,
    /// The conntrack table (None: not read, /proc/net/stat/nf_conntrack unreadable).
    pub conntrack: Option<Conntrack>,
    /// The namespace's interfaces but loopback, with their drops.
    pub interfaces: Vec<InterfaceDrops>,
    /// The box's softnet counters (None: unreadable).
    pub softnet: Option<Softnet>,
    /// Entries in the namespace's IPv4 neighbour table.
    pub neighbours: Option<u64>,
    /// The box's neighbour thresholds, when this namespace can read them.
    pub gc_thresh: Option<GcThresh>,
}

impl PathReading {
    /// Reads the calling thread's namespace now.
    pub fn read() -> PathReading {
        let file = |p: &str| std::fs::read_to_string(p).ok();
        let conntrack = match file("/proc/self/net/stat/nf_conntrack") {
            None => Some(Conntrack {
                tracking: Tracking::Absent,
                entries: 0,
                max: 0,
                counters: ConntrackCounters::default(),
            }),
            Some(text) => parse_conntrack_stat(&text).ok().map(|counters| {
                let entries = crate::sysctl::read_u64("net.netfilter.nf_conntrack_count");
                let entries = entries.unwrap_or(0);
                // Counters only move, and entries are only made, where hooks are on.
                let used = entries > 0 || counters != ConntrackCounters::default();
                Conntrack {
                    tracking: if used {
                        Tracking::Tracking
                    } else {
                        Tracking::NotTracking
                    },
                    entries,
                    max: crate::sysctl::read_u64(crate::sysctl::CONNTRACK_MAX).unwrap_or(0),
                    counters,
                }
            }),
        };
        PathReading {
            unix_ms: crate::util::unix_ms_now(),
            conntrack,
            interfaces: file("/proc/self/net/dev")
                .map(|t| parse_net_dev(&t))
                .unwrap_or_default(),
            softnet: file("/proc/self/net/softnet_stat").and_then(|t| parse_softnet(&t).ok()),
            neighbours: file("/proc/self/net/arp").map(|t| count_arp(&t)),
            gc_thresh: GcThresh::read(),
        }
    }

    /// Drops of the namespace's interfaces, received and sent, summed.
    pub fn interface_drops(&self) -> (u64, u64) {
        self.interfaces
            .iter()
            .fold((0, 0), |(rx, tx), i| (rx + i.rx_dropped, tx + i.tx_dropped))
    }
}

/// What a host's path did between two readings of its namespace: what the live line,
/// the summary and the metrics say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct PathFigures {
    /// The later reading's instant, ms since the Unix epoch.
    pub unix_ms: u64,
    /// Whether the namespace tracks connections (None: not read).
    pub conntrack_tracking: Option<Tracking>,
    /// Entries in the conntrack table at the later reading.
    pub conntrack_entries: Option<u64>,
    /// The table's limit, `nf_conntrack_max`.
    pub conntrack_max: Option<u64>,
    /// The table's counters between the readings.
    pub conntrack: Option<ConntrackCounters>,
    /// The interfaces' drops between the readings, received.
    pub interface_rx_dropped: u64,
    /// Sent.
    pub interface_tx_dropped: u64,
    /// The box's softnet counters between the readings.
    pub softnet: Option<Softnet>,
    /// Neighbour entries at the later reading.
    pub neighbours: Option<u64>,
    /// The box's hard neighbour limit, when known.
    pub gc_thresh3: Option<u64>,
}

impl PathFigures {
    /// From the first reading of a run to `now`.
    pub fn between(start: &PathReading, now: &PathReading) -> PathFigures {
        let ct = now.conntrack.filter(|c| c.tracking != Tracking::Absent);
        let (rx0, tx0) = start.interface_drops();
        let (rx1, tx1) = now.interface_drops();
        PathFigures {
            unix_ms: now.unix_ms,
            conntrack_tracking: now.conntrack.map(|c| c.tracking),
            conntrack_entries: ct.map(|c| c.entries),
            conntrack_max: ct.map(|c| c.max),
            conntrack: ct.map(|c| match start.conntrack {
                Some(s) => c.counters.since(&s.counters),
                None => c.counters,
            }),
            interface_rx_dropped: rx1.saturating_sub(rx0),
            interface_tx_dropped: tx1.saturating_sub(tx0),
            softnet: match (start.softnet, now.softnet) {
                (Some(a), Some(b)) => Some(b.since(&a)),
                _ => None,
            },
            neighbours: now.neighbours,
            gc_thresh3: now.gc_thresh.map(|g| g.gc_thresh3),
        }
    }

    /// Whether the conntrack table was at its limit at the later reading (its drops say
    /// whether it was before: the kernel drops only then).
    pub fn conntrack_full(&self) -> bool {
        matches!(
            (self.conntrack_entries, self.conntrack_max),
            (Some(e), Some(m)) if m > 0 && e >= m
        )
    }

    /// The conntrack table in words: "conntrack 12 of 262,144 entries", "conntrack table
    /// full (500 of 500): 1,500 connects dropped (insert_failed 0, drop 1,500)",
    /// "conntrack not tracking (no rule in the namespace uses it)".
    pub fn conntrack_text(&self) -> String {
        use crate::fmt::count;
        let Some(tracking) = self.conntrack_tracking else {
            return "conntrack not read".to_owned();
        };
        match tracking {
            Tracking::Absent => "conntrack absent (not in this kernel)".to_owned(),
            Tracking::NotTracking => {
                "conntrack not tracking (no rule in the namespace uses it)".to_owned()
            }
            Tracking::Tracking => {
                let entries = self.conntrack_entries.unwrap_or(0);
                let max = self.conntrack_max.unwrap_or(0);
                let c = self.conntrack.unwrap_or_default();
                let dropped = c.refused() > 0 || c.early_drop > 0;
                let counters = format!(
                    "{} connects dropped (insert_failed {}, drop {}, early_drop {})",
                    count(c.refused()),
                    count(c.insert_failed),
                    count(c.drop),
                    count(c.early_drop)
                );
                match (self.conntrack_full(), dropped) {
                    (true, true) => format!(
                        "conntrack table full ({} of {}): {counters}",
                        count(entries),
                        count(max)
                    ),
                    (true, false) => format!(
                        "conntrack table full ({} of {})",
                        count(entries),
                        count(max)
                    ),
                    // The kernel drops only with the table full: it was, and an entry
                    // has expired since (a closed one's, 10 s to 120 s after its close).
                    (false, true) => format!(
                        "conntrack table was full: {counters}; {} of {} entries now",
                        count(entries),
                        count(max)
                    ),
                    (false, false) => {
                        format!("conntrack {} of {} entries", count(entries), count(max))
                    }
                }
            }
        }
    }

    /// The other drops in words, only those that happened: "veth drops rx 3 tx 0 ·
    /// softnet dropped 2 squeezed 40 (box) · 1,100 neighbours, past gc_thresh3 1,024".
    pub fn drops_text(&self) -> Vec<String> {
        use crate::fmt::count;
        let mut out = Vec::new();
        if self.interface_rx_dropped + self.interface_tx_dropped > 0 {
            out.push(format!(
                "veth drops rx {} tx {}",
                count(self.interface_rx_dropped),
                count(self.interface_tx_dropped)
            ));
        }
        if let Some(s) = self.softnet.filter(|s| s.dropped + s.time_squeeze > 0) {
            out.push(format!(
                "softnet dropped {} squeezed {} (the box's)",
                count(s.dropped),
                count(s.time_squeeze)
            ));
        }
        if let (Some(n), Some(hard)) = (self.neighbours, self.gc_thresh3)
            && n >= hard
        {
            out.push(format!(
                "{} neighbours, at gc_thresh3 {}: new peers are dropped",
                count(n),
                count(hard)
            ));
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    fn data(name: &str) -> String {
        let p = format!("{}/tests/data/netpath/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    #[test]
    fn conntrack_counters_are_summed_over_cpus_by_column_name() {
        // 6.18, two CPUs, a table of 500 full: the drops on both CPUs.
        let c = parse_conntrack_stat(&data("nf_conntrack_6.18")).unwrap();
        assert_eq!(
            c,
            ConntrackCounters {
                found: 0x10 + 0x2,
                invalid: 3,
                insert: 0x1f4,
                insert_failed: 1,
                drop: 0x3e8 + 0x1c4,
                early_drop: 2,
                icmp_error: 0,
            }
        );
        assert_eq!(c.refused(), 0x3e8 + 0x1c4 + 1);
    }

    #[test]
    fn an_older_kernels_column_order_reads_the_same_names() {
        // 4.19: searched and new, no clashres; the order differs from 6.18's.
        let c = parse_conntrack_stat(&data("nf_conntrack_4.19")).unwrap();
        assert_eq!((c.found, c.insert, c.drop, c.early_drop), (5, 7, 0x20, 1));
        assert_eq!(c.insert_failed, 4);
    }

    #[test]
    fn a_malformed_conntrack_file_names_the_file_and_the_row() {
        let e = parse_conntrack_stat("entries found\n00000001\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "/proc/net/stat/nf_conntrack: CPU row 0 has 1 fields, the header 2"
        );
        assert!(parse_conntrack_stat("").is_err());
        assert!(parse_conntrack_stat("found drop\n1 2\n").is_err());
        assert!(parse_conntrack_stat("entries drop\n1 zz\n").is_err());
    }

    #[test]
    fn softnet_sums_dropped_and_squeezed_over_cpus() {
        let s = parse_softnet(&data("softnet_stat")).unwrap();
        assert_eq!(
            s,
            Softnet {
                processed: 0x12d74f02 + 0x12f8a14e,
                dropped: 0x3,
                time_squeeze: 0x1b1 + 0x16c,
            }
        );
        assert!(parse_softnet("00000001 00000002\n").is_err());
    }

    #[test]
    fn net_dev_gives_each_interfaces_drops_but_loopbacks() {
        let d = parse_net_dev(&data("net_dev"));
        assert_eq!(
            d,
            [InterfaceDrops {
                name: "c1mh77-h0".to_owned(),
                rx_dropped: 12,
                tx_dropped: 3,
            }]
        );
        assert_eq!(count_arp(&data("arp")), 2);
    }

    fn reading(entries: u64, max: u64, drop: u64) -> PathReading {
        PathReading {
            unix_ms: 1,
            conntrack: Some(Conntrack {
                tracking: Tracking::Tracking,
                entries,
                max,
                counters: ConntrackCounters {
                    drop,
                    ..ConntrackCounters::default()
                },
            }),
            ..PathReading::default()
        }
    }

    #[test]
    fn a_full_table_is_named_with_its_drops_since_the_start() {
        let f = PathFigures::between(&reading(0, 500, 7), &reading(500, 500, 1_211));
        assert!(f.conntrack_full());
        assert_eq!(
            f.conntrack_text(),
            "conntrack table full (500 of 500): 1,204 connects dropped (insert_failed 0, drop 1,204, early_drop 0)"
        );
        let f = PathFigures::between(&reading(0, 500, 0), &reading(12, 500, 0));
        assert_eq!(f.conntrack_text(), "conntrack 12 of 500 entries");
        // An entry expired after the drops: the table was full when they came.
        let f = PathFigures::between(&reading(0, 500, 0), &reading(499, 500, 501));
        assert!(!f.conntrack_full());
        assert_eq!(
            f.conntrack_text(),
            "conntrack table was full: 501 connects dropped (insert_failed 0, drop 501, early_drop 0); 499 of 500 entries now"
        );
        let mut idle = reading(0, 500, 0);
        idle.conntrack = idle.conntrack.map(|c| Conntrack {
            tracking: Tracking::NotTracking,
            ..c
        });
        assert_eq!(
            PathFigures::between(&idle, &idle).conntrack_text(),
            "conntrack not tracking (no rule in the namespace uses it)"
        );
    }
}
