//! `--churn R`: while the client holds, R connections a second are closed cleanly (a
//! WebSocket close frame, or a FIN in the raw modes, as a teardown closes one) and opened
//! again to the same target from the same source address (the connection's global index
//! `g` derives both, so a reopen is the same connection's next life).
//!
//! Pure parts both engines share: the flag's parsing and checks, the pace (the `k`-th
//! churn of a shard is due `k / R` s after churning began, started in [`PACE_NS`] ticks
//! as the ramp's connects are: evenly, no bursts), and the counts' identity
//! (`closed = reopened + failed + reopening`, see [`Churn`]). Which connection goes
//! ([`ChurnOrder`]) is each engine's: the epoll shard keeps its open tokens in open order,
//! the tokio shard a board of its open tasks (tokio_engine/churn_board.rs).
//!
//! [`PACE_NS`]: crate::workload::engine::client::PACE_NS

use serde::{Deserialize, Serialize};

use super::{engine::pace, stats::counters::Churn};

/// Which held connection a churn closes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ChurnOrder {
    /// The connection open longest (its reopen goes to the back of the line).
    #[default]
    Oldest,
    /// Any held connection, drawn at random each time (some live long, some briefly).
    Random,
}

impl ChurnOrder {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ChurnOrder::Oldest => "oldest",
            ChurnOrder::Random => "random",
        }
    }
}

/// When a client begins churning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ChurnStart {
    /// Once every shard's ramp is done (the hold phase), until the teardown.
    #[default]
    Hold,
    /// When told `churn on` on the control endpoint (`c1m run`: its idle phase), until
    /// `churn off`.
    Control,
}

impl ChurnStart {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ChurnStart::Hold => "hold",
            ChurnStart::Control => "control",
        }
    }
}

/// What a client shard is told: churn `per_s` of its connections a second, in `order`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ChurnConfig {
    /// This shard's share of `--churn` (proportional to its connections).
    pub per_s: f64,
    pub order: ChurnOrder,
    /// The shard's part of the client's connections: its share of a rate given at run
    /// time (`churn on RATE`, a `c1m run` churn phase).
    #[serde(default)]
    pub fraction: f64,
}

impl ChurnConfig {
    /// The shard's share of `total` churns a second, for `count` of `all` connections.
    pub(crate) fn share(
        total: Option<f64>,
        order: ChurnOrder,
        count: u64,
        all: u64,
    ) -> Option<Self> {
        let total = total?;
        let fraction = count as f64 / all.max(1) as f64;
        Some(ChurnConfig {
            per_s: total * fraction,
            order,
            fraction,
        })
    }

    /// The shard's churns a second: its share of `total` when the command names a rate,
    /// else of the configured `--churn`.
    pub(crate) fn per_s_at(&self, total: Option<ChurnRate>) -> f64 {
        total.map_or(self.per_s, |r| r.0 * self.fraction)
    }
}

/// `--churn`'s value: connections closed and reopened per second, over the whole run.
/// Compared by its bits, so the flags that hold it compare whole (a plan's rerun).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct ChurnRate(pub f64);

impl PartialEq for ChurnRate {
    fn eq(&self, o: &Self) -> bool {
        self.0.to_bits() == o.0.to_bits()
    }
}

impl Eq for ChurnRate {}

impl std::fmt::Display for ChurnRate {
    /// As [`parse`] reads it back exactly.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/s", self.0)
    }
}

/// Largest `--churn`, as `--rate`'s bound.
const MAX_CHURN: f64 = 10_000_000.0;

/// `--churn`: connections a second, `5000` or `5000/s` (thousands separators allowed).
pub(crate) fn parse(s: &str) -> Result<ChurnRate, String> {
    let t = s.trim();
    let t = t.strip_suffix("/s").unwrap_or(t);
    match crate::args::parse_rate(t) {
        Ok(r) if r > 0.0 && r <= MAX_CHURN => Ok(ChurnRate(r)),
        Ok(_) => Err(
            "--churn is connections closed and reopened per second, more than 0 and at most 10,000,000 (e.g. 5000 or 5000/s); leave it out to hold without churn"
                .to_owned(),
        ),
        Err(_) => Err(format!(
            "not a churn rate: {s:?} (connections per second, e.g. 5000 or 5000/s)"
        )),
    }
}

/// The checks of `--churn R` against the run: `n` connections held for `hold` (None:
/// until told), `hold_flag` naming the phase's flag in the message. One line each.
pub(crate) fn check(
    churn: Option<f64>,
    n: u64,
    hold: Option<std::time::Duration>,
    hold_flag: &str,
) -> Result<(), String> {
    let Some(r) = churn else {
        return Ok(());
    };
    if n == 0 {
        return Err("--churn needs connections to churn: -n is 0".into());
    }
    if r > n as f64 {
        return Err(format!(
            "--churn {}/s over {} connections would close each more than once a second: at most -n ({}) per second",
            crate::fmt::whole(r),
            crate::fmt::count(n),
            crate::fmt::count(n)
        ));
    }
    if hold.is_some_and(|h| h.is_zero()) {
        return Err(format!(
            "--churn churns while the connections are held, and {hold_flag} is 0: give {hold_flag} a duration"
        ));
    }
    Ok(())
}

/// A shard's churn pace: the `k`-th churn is due `k / per_s` s after `began_ns`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pace {
    began_ns: u64,
    per_s: f64,
    /// Churns started or given up since `began_ns`.
    done: u64,
}

impl Pace {
    pub(crate) fn new(per_s: f64, began_ns: u64) -> Pace {
        Pace {
            began_ns,
            per_s,
            done: 0,
        }
    }

    /// How many churns are due at `now_ns` beyond those taken; they are taken (a caller
    /// that finds no connection to close skips them: they are not caught up later).
    pub(crate) fn take(&mut self, now_ns: u64) -> u64 {
        let due = pace::due(self.per_s, u64::MAX, now_ns.saturating_sub(self.began_ns));
        let n = due.saturating_sub(self.done);
        self.done = self.done.max(due);
        n
    }

    /// The instant the next churn is due (monotonic ns).
    pub(crate) fn next_due_ns(&self) -> u64 {
        pace::scheduled_ns(self.per_s, self.done)
            .map_or(u64::MAX, |at| self.began_ns.saturating_add(at))
    }
}

/// Counts a churn close: the connection was open; its reopen starts now.
pub(crate) fn closing(c: &mut Churn) {
    c.closed += 1;
    c.reopening += 1;
}

/// The reopen of a churned connection is open.
pub(crate) fn reopened(c: &mut Churn) {
    c.reopening = c.reopening.saturating_sub(1);
    c.reopened += 1;
}

/// The reopen of a churned connection failed (its cause counted in `failures`).
pub(crate) fn failed(c: &mut Churn) {
    c.reopening = c.reopening.saturating_sub(1);
    c.failed += 1;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_flag_takes_a_rate_with_or_without_per_second() {
        assert_eq!(parse("5000"), Ok(ChurnRate(5000.0)));
        assert_eq!(parse("5,000/s"), Ok(ChurnRate(5000.0)));
        assert_eq!(parse("2.5/s"), Ok(ChurnRate(2.5)));
        assert_eq!(parse(&ChurnRate(1234.5).to_string()), Ok(ChurnRate(1234.5)));
        assert!(parse("0").unwrap_err().contains("more than 0"));
        assert!(parse("-3").is_err());
        assert!(parse("fast").unwrap_err().contains("not a churn rate"));
        assert!(parse("5000/m").is_err());
    }

    #[test]
    fn absurd_churns_are_refused_in_one_line() {
        let hold = Some(Duration::from_secs(60));
        assert!(check(None, 10, Some(Duration::ZERO), "--idle").is_ok());
        assert!(check(Some(100.0), 200, hold, "--idle").is_ok());
        assert!(check(Some(200.0), 200, None, "--hold").is_ok());
        for (r, n, h) in [
            (201.0, 200, hold),
            (1.0, 0, hold),
            (10.0, 200, Some(Duration::ZERO)),
        ] {
            let e = check(Some(r), n, h, "--idle").unwrap_err();
            assert!(!e.contains('\n'), "{e}");
        }
        assert!(
            check(Some(10.0), 200, Some(Duration::ZERO), "--idle")
                .unwrap_err()
                .contains("--idle is 0")
        );
    }

    #[test]
    fn a_pace_spreads_churns_evenly_and_skips_what_it_missed() {
        let mut p = Pace::new(100.0, 1_000);
        assert_eq!(p.take(1_000), 1);
        assert_eq!(p.take(1_000), 0);
        assert_eq!(p.next_due_ns(), 1_000 + 10_000_000);
        // 5 ms ticks take 0 or 1 at 100/s; a second takes 100 in all.
        let mut n = 1;
        for t in 1..=200u64 {
            let k = p.take(1_000 + t * 5_000_000);
            assert!(k <= 1, "{k} at tick {t}");
            n += k;
        }
        assert_eq!(n, 101);
    }

    #[test]
    fn shares_add_up_to_the_total() {
        let total: f64 = [(3, 10), (3, 10), (4, 10)]
            .iter()
            .map(|&(c, all)| {
                ChurnConfig::share(Some(5000.0), ChurnOrder::Oldest, c, all)
                    .unwrap()
                    .per_s
            })
            .sum();
        assert!((total - 5000.0).abs() < 1e-9);
        assert!(ChurnConfig::share(None, ChurnOrder::Random, 1, 1).is_none());
    }
}
