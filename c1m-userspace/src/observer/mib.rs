//! The kernel's own TCP counters (SNMP MIB): `/proc/thread-self/net/snmp` (`Tcp:`) and
//! `/proc/thread-self/net/netstat` (`TcpExt:`), for the audit (audit.rs) to check
//! c1m's figures against. They count the whole network namespace of the reading
//! thread — `thread-self`, because tests move a single thread into a private one.
//! Reading both files costs 145-255 µs per snapshot, measured on the 2-core box at load
//! average 10 (`mib::tests::reading_the_counters_stays_well_under_a_millisecond` prints it).

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::procfs::parse_netstat;

/// Why the kernel's own TCP counters could not be read.
#[derive(Debug, Error)]
pub enum MibError {
    /// /proc/net/snmp or /proc/net/netstat could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: &'static str,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A counter the audit needs is not in the files (the name given).
    #[error("the kernel's counters have no {0}")]
    Missing(&'static str),
}

const SNMP: &str = "/proc/thread-self/net/snmp";
const NETSTAT: &str = "/proc/thread-self/net/netstat";

macro_rules! counters {
    ($($field:ident = $key:literal: $doc:literal,)+) => {
        /// The counters c1m audits, named after their MIB names (`Tcp` from
        /// /proc/net/snmp, `TcpExt` from /proc/net/netstat).
        #[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq, Eq)]
        pub struct MibCounters {
            $(#[doc = $doc] pub $field: u64,)+
        }

        impl MibCounters {
            /// From the `name -> value` pairs of both files (see `procfs::parse_netstat`).
            pub(crate) fn from_pairs(
                pairs: &std::collections::HashMap<String, u64>,
            ) -> Result<Self, MibError> {
                Ok(Self {
                    $($field: *pairs.get($key).ok_or(MibError::Missing($key))?,)+
                })
            }

            /// `self - base`, per counter (0 where the counter went back: a wrap).
            pub fn since(&self, base: &Self) -> Self {
                Self { $($field: self.$field.saturating_sub(base.$field),)+ }
            }
        }
    };
}

counters! {
    active_opens = "TcpActiveOpens": "connect()s that sent their SYN (`tcp_connect`).",
    passive_opens = "TcpPassiveOpens": "Child sockets created by listeners (`tcp_create_openreq_child`).",
    attempt_fails = "TcpAttemptFails": "`tcp_done` in SYN_SENT or SYN_RECV.",
    estab_resets = "TcpEstabResets": "ESTABLISHED or CLOSE_WAIT -> CLOSE (`tcp_set_state`).",
    out_rsts = "TcpOutRsts": "Resets sent.",
    out_segs = "TcpOutSegs": "Segments sent, retransmits excluded (what a workload's traffic costs in segments).",
    retrans_segs = "TcpRetransSegs": "Segments retransmitted, SYN-ACKs included.",
    loss_probes = "TcpExtTCPLossProbes": "Tail-loss probes sent (resent or new data).",
    timeouts = "TcpExtTCPTimeouts": "Retransmission timer firings, SYN-ACK timers included.",
    fast_retrans = "TcpExtTCPFastRetrans": "Segments resent by fast retransmit/recovery.",
    slow_start_retrans = "TcpExtTCPSlowStartRetrans": "Segments resent while recovering from a timeout.",
    syn_retrans = "TcpExtTCPSynRetrans": "SYN and SYN-ACK retransmits.",
    retrans_fail = "TcpExtTCPRetransFail": "Retransmits the local stack refused (not -EBUSY).",
    dsack_recv = "TcpExtTCPDSACKRecv": "DSACK blocks received (spurious retransmits).",
    dsack_recv_segs = "TcpExtTCPDSACKRecvSegs": "Segments those DSACKs covered.",
    spurious_rtos = "TcpExtTCPSpuriousRTOs": "Timeouts found spurious (F-RTO).",
    delayed_ack_lost = "TcpExtDelayedACKLost": "Duplicate data received while an ACK was delayed.",
    listen_overflows = "TcpExtListenOverflows": "Handshakes dropped: accept queue full.",
    listen_drops = "TcpExtListenDrops": "Handshakes a listener dropped, for any reason.",
    time_wait_overflow = "TcpExtTCPTimeWaitOverflow": "Closes that found no TIME_WAIT bucket (net.ipv4.tcp_max_tw_buckets): the socket closed at once, no TIME_WAIT.",
    time_wait_reused = "TcpExtTWRecycled": "TIME_WAIT sockets reused for a new connection's 4-tuple (tcp_tw_reuse).",
}

/// Both files of the calling thread's network namespace.
pub fn read() -> Result<MibCounters, MibError> {
    let read = |path: &'static str| {
        std::fs::read_to_string(path).map_err(|source| MibError::Read { path, source })
    };
    let mut pairs = parse_netstat(&read(SNMP)?);
    pairs.extend(parse_netstat(&read(NETSTAT)?));
    MibCounters::from_pairs(&pairs)
}

/// The counters' movement since the observer attached.
#[derive(
    Debug, Clone, Copy, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq, Eq,
)]
pub struct MibDelta {
    /// Wall clock of the read, milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// Each counter's movement since the observer attached.
    pub since_attach: MibCounters,
}

impl MibDelta {
    pub(crate) fn new(now: &MibCounters, base: &MibCounters) -> Self {
        Self {
            unix_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            since_attach: now.since(base),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP_TEXT: &str = "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n\
Tcp: 1 200 120000 -1 19 2 3 7 0 2783 1750 11 0 15 0\n";

    fn netstat_text() -> String {
        let names = [
            "TCPLossProbes",
            "TCPTimeouts",
            "TCPFastRetrans",
            "TCPSlowStartRetrans",
            "TCPSynRetrans",
            "TCPRetransFail",
            "TCPDSACKRecv",
            "TCPDSACKRecvSegs",
            "TCPSpuriousRTOs",
            "DelayedACKLost",
            "ListenOverflows",
            "ListenDrops",
            "TCPTimeWaitOverflow",
            "TWRecycled",
        ];
        let values: Vec<String> = (1..=names.len()).map(|v| v.to_string()).collect();
        format!(
            "TcpExt: {}\nTcpExt: {}\n",
            names.join(" "),
            values.join(" ")
        )
    }

    #[test]
    fn parses_both_files_by_name() {
        let mut pairs = parse_netstat(SNMP_TEXT);
        pairs.extend(parse_netstat(&netstat_text()));
        let c = MibCounters::from_pairs(&pairs).expect("all present");
        assert_eq!(
            (
                c.active_opens,
                c.passive_opens,
                c.attempt_fails,
                c.estab_resets
            ),
            (19, 2, 3, 7)
        );
        assert_eq!((c.retrans_segs, c.out_rsts), (11, 15));
        assert_eq!((c.loss_probes, c.timeouts, c.listen_drops), (1, 2, 12));
        assert_eq!((c.time_wait_overflow, c.time_wait_reused), (13, 14));
    }

    #[test]
    fn a_missing_counter_is_named() {
        let pairs = parse_netstat(SNMP_TEXT);
        let err = MibCounters::from_pairs(&pairs).expect_err("TcpExt missing");
        assert_eq!(
            err.to_string(),
            "the kernel's counters have no TcpExtTCPLossProbes"
        );
    }

    #[test]
    fn delta_is_per_counter_and_never_negative() {
        let base = MibCounters {
            active_opens: 10,
            retrans_segs: 5,
            ..MibCounters::default()
        };
        let now = MibCounters {
            active_opens: 2010,
            retrans_segs: 4,
            ..MibCounters::default()
        };
        let d = now.since(&base);
        assert_eq!((d.active_opens, d.retrans_segs), (2000, 0));
    }

    #[test]
    fn reading_the_counters_stays_well_under_a_millisecond() {
        let Ok(first) = read() else {
            eprintln!("SKIP: /proc/thread-self/net not readable");
            return;
        };
        const N: u32 = 200;
        let started = std::time::Instant::now();
        for _ in 0..N {
            let _ = read();
        }
        let each = started.elapsed() / N;
        eprintln!("one MIB read (snmp + netstat): {each:?}");
        assert!(first.active_opens <= read().expect("read").active_opens);
    }
}
