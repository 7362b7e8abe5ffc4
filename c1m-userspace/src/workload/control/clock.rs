//! How far a client host's clock is from the server host's, NTP-style: several `time`
//! round trips to the server's control endpoint, the one with the smallest round trip
//! kept. Its midpoint is the best guess of when the server read its clock; the true
//! offset lies within ± half that round trip (the answer was read somewhere in it).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::workload::sys;

/// Round trips per estimate: enough that one of them is rarely delayed on a loaded box.
pub(crate) const ROUND_TRIPS: usize = 16;

/// The server's clock minus this host's, and how sure that is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClockOffset {
    /// Add to this host's CLOCK_REALTIME to get the server's.
    pub offset_ns: i64,
    /// The true offset lies within `offset_ns ± uncertainty_ns` (half the kept round trip).
    pub uncertainty_ns: u64,
    pub round_trips: u32,
    /// When it was measured (this host's clock).
    pub measured_unix_ns: u64,
}

/// One exchange: this host's clock before sending, the server's answer, this host's
/// clock after the answer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Exchange {
    pub sent_ns: u64,
    pub server_ns: u64,
    pub received_ns: u64,
}

/// The exchange with the smallest round trip, as an offset.
pub(crate) fn best(exchanges: &[Exchange]) -> Option<ClockOffset> {
    let e = exchanges
        .iter()
        .filter(|e| e.received_ns >= e.sent_ns)
        .min_by_key(|e| e.received_ns - e.sent_ns)?;
    let rtt = e.received_ns - e.sent_ns;
    let mid = i128::from(e.sent_ns) + i128::from(rtt / 2);
    Some(ClockOffset {
        offset_ns: i64::try_from(i128::from(e.server_ns) - mid).ok()?,
        uncertainty_ns: rtt.div_ceil(2),
        round_trips: exchanges.len() as u32,
        measured_unix_ns: e.received_ns,
    })
}

/// The answer to a `time` line: `{"unix_ns":T}`, and `"run_id"` when the endpoint's
/// process belongs to a run of several hosts (a server host's `c1m run --clients external`).
#[derive(Serialize, Deserialize)]
pub(crate) struct TimeAnswer {
    pub unix_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// What a clock query learnt: the offset, and the run the endpoint belongs to.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Measured {
    pub offset: ClockOffset,
    /// The server host's run id (None: an endpoint of a c1m before ids, or not a run's).
    pub run_id: Option<String>,
}

/// How long a connect to the endpoint may take before this try counts as "not up yet"
/// (a silent address drops SYNs; the caller tries again).
const CONNECT_WITHIN: Duration = Duration::from_secs(3);

/// How long an endpoint that accepted may take to answer the first `time`. c1m answers
/// it in the session task, before any auth: a peer silent this long is something else.
pub(crate) const FIRST_ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// Why a clock query failed, told apart by what the caller should do next.
#[derive(Debug, Error)]
pub(crate) enum ClockError {
    /// Nothing accepted the connection (refused, unreachable, unresolved or silent):
    /// the server host may still be starting.
    #[error("{addr}: {why}")]
    NotUp { addr: String, why: String },
    /// Something accepted the connection but did not answer as c1m's control endpoint
    /// does: a wrong address or port, which waiting will not fix.
    #[error(
        "{addr} is not c1m's control endpoint: it {what}; give --clock-from the server host's control endpoint (`c1m run --clients external`'s --control, by default its --addr and port 7999)"
    )]
    NotC1m { addr: String, what: String },
    /// c1m's endpoint answered, then the exchange broke off or took too long.
    #[error("{addr}: {why}")]
    Broken { addr: String, why: String },
}

impl ClockError {
    /// True when waiting may help: nothing accepted the connection yet.
    pub(crate) fn not_up_yet(&self) -> bool {
        matches!(self, ClockError::NotUp { .. })
    }
}

/// Estimates the offset to the control endpoint at `addr` (HOST:PORT), over one TCP
/// connection, within `limit`.
pub(crate) async fn measure(addr: &str, limit: Duration) -> Result<Measured, ClockError> {
    match tokio::time::timeout(limit, measure_inner(addr)).await {
        Ok(r) => r,
        Err(_) => Err(ClockError::Broken {
            addr: addr.to_owned(),
            why: format!("{ROUND_TRIPS} `time` round trips took longer than {limit:?}"),
        }),
    }
}

async fn measure_inner(addr: &str) -> Result<Measured, ClockError> {
    let not_up = |why: String| ClockError::NotUp {
        addr: addr.to_owned(),
        why,
    };
    let s = match tokio::time::timeout(CONNECT_WITHIN, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(not_up(e.to_string())),
        Err(_) => {
            return Err(not_up(format!(
                "no answer to connect within {CONNECT_WITHIN:?}"
            )));
        }
    };
    let _ = s.set_nodelay(true);
    let (r, mut w) = s.into_split();
    let mut lines = BufReader::new(r).lines();
    let mut ex = Vec::with_capacity(ROUND_TRIPS);
    let mut run_id = None;
    for i in 0..ROUND_TRIPS {
        // Until the first answer, a failure says the peer is not c1m; after, that the
        // exchange broke off.
        let fail = |what: String| match i {
            0 => ClockError::NotC1m {
                addr: addr.to_owned(),
                what,
            },
            _ => ClockError::Broken {
                addr: addr.to_owned(),
                why: what,
            },
        };
        let sent_ns = sys::realtime_ns();
        w.write_all(b"time\n")
            .await
            .map_err(|e| fail(format!("failed the `time` request ({e})")))?;
        let line = match tokio::time::timeout(FIRST_ANSWER_WITHIN, lines.next_line()).await {
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None)) => {
                return Err(fail(
                    "closed the connection without answering `time`".into(),
                ));
            }
            Ok(Err(e)) => {
                return Err(fail(format!(
                    "ended the connection without answering `time` ({e})"
                )));
            }
            Err(_) => {
                return Err(fail(format!(
                    "accepted, then answered nothing to `time` within {FIRST_ANSWER_WITHIN:?}"
                )));
            }
        };
        let received_ns = sys::realtime_ns();
        let a: TimeAnswer = serde_json::from_str(&line).map_err(|_| {
            let shown: String = line.chars().take(60).collect();
            fail(format!("answered {shown:?} to `time`"))
        })?;
        if i == 0 {
            run_id = a.run_id;
        }
        ex.push(Exchange {
            sent_ns,
            server_ns: a.unix_ns,
            received_ns,
        });
    }
    match best(&ex) {
        Some(offset) => Ok(Measured { offset, run_id }),
        None => Err(ClockError::Broken {
            addr: addr.to_owned(),
            why: "this host's clock went backwards during every exchange".into(),
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_shortest_round_trip_wins_and_bounds_the_offset() {
        // Server 1,000 ns ahead; the second exchange is the fastest.
        let ex = [
            Exchange {
                sent_ns: 0,
                server_ns: 1_400,
                received_ns: 1_000,
            },
            Exchange {
                sent_ns: 2_000,
                server_ns: 3_050,
                received_ns: 2_100,
            },
            Exchange {
                sent_ns: 5_000,
                server_ns: 6_100,
                received_ns: 5_900,
            },
        ];
        let o = best(&ex).unwrap();
        assert_eq!(o.offset_ns, 1_000);
        assert_eq!(o.uncertainty_ns, 50);
        assert_eq!(o.round_trips, 3);
        // Server behind: a negative offset.
        let o = best(&[Exchange {
            sent_ns: 10_000,
            server_ns: 4_000,
            received_ns: 10_010,
        }])
        .unwrap();
        assert_eq!(o.offset_ns, -6_005);
        assert!(best(&[]).is_none());
    }
}
