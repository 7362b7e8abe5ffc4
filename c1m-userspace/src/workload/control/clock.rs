//! How far a client host's clock is from the server host's, NTP-style: several `time`
//! round trips to the server's control endpoint, the one with the smallest round trip
//! kept. Its midpoint is the best guess of when the server read its clock; the true
//! offset lies within ± half that round trip (the answer was read somewhere in it).

use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
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

/// The answer to a `time` line: `{"unix_ns":T}`.
#[derive(Serialize, Deserialize)]
pub(crate) struct TimeAnswer {
    pub unix_ns: u64,
}

/// Estimates the offset to the control endpoint at `addr` (HOST:PORT), over one TCP
/// connection, within `limit`.
pub(crate) async fn measure(addr: &str, limit: Duration) -> Result<ClockOffset> {
    tokio::time::timeout(limit, measure_inner(addr))
        .await
        .with_context(|| format!("clock query to {addr}: no answer within {limit:?}"))?
}

async fn measure_inner(addr: &str) -> Result<ClockOffset> {
    let s = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("clock query: connect {addr}"))?;
    s.set_nodelay(true)?;
    let (r, mut w) = s.into_split();
    let mut lines = BufReader::new(r).lines();
    let mut ex = Vec::with_capacity(ROUND_TRIPS);
    for _ in 0..ROUND_TRIPS {
        let sent_ns = sys::realtime_ns();
        w.write_all(b"time\n").await?;
        let line = lines
            .next_line()
            .await?
            .context("clock query: the endpoint closed")?;
        let received_ns = sys::realtime_ns();
        let a: TimeAnswer = serde_json::from_str(&line).with_context(|| {
            format!(
                "clock query: {addr} answered {line:?}, not a time (is it c1m's control endpoint?)"
            )
        })?;
        ex.push(Exchange {
            sent_ns,
            server_ns: a.unix_ns,
            received_ns,
        });
    }
    match best(&ex) {
        Some(o) => Ok(o),
        None => bail!("clock query: this host's clock went backwards during every exchange"),
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
