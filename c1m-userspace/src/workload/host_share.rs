//! One client host's share of a run spread over N hosts: connections, setup rate and
//! source addresses, computed from the host's index alone so that no coordinator is
//! needed (Kubernetes starts, places and restarts the pods; c1m only splits by index).

use std::{
    net::IpAddr,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use thiserror::Error;

use crate::args::Connections;

/// The index a Kubernetes Indexed Job gives each pod (`completionMode: Indexed`).
pub const INDEX_ENV: &str = "JOB_COMPLETION_INDEX";
/// The number of client hosts. Kubernetes sets no variable for a Job's `completions`,
/// so the manifest sets this one to the same number (the manifest test checks they agree).
pub const COUNT_ENV: &str = "C1M_SHARDS";

/// Host `index` of `count` (0-based, `index < count`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardOf {
    /// This host's index, from 0.
    pub index: u64,
    /// How many client hosts share the run.
    pub count: u64,
}

/// Why this host's share of the run could not be worked out; each message names the fix.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ShareError {
    /// A `--shard` that is not `I/N` with `0 <= I < N`.
    #[error("--shard {0:?}: write I/N with 0 <= I < N, e.g. 0/2")]
    BadShard(String),
    /// The Job index variable is set but the host count variable is missing or not a
    /// number (the index, then the count's value).
    #[error(
        "${INDEX_ENV}={0:?} is set but ${COUNT_ENV} is not a count ({1:?}): set {COUNT_ENV} to the Job's completions"
    )]
    BadEnv(String, Option<String>),
    /// Fewer connections than hosts: some host would open none.
    #[error(
        "{total} connections cannot be split over {count} hosts: give -n at least the number of hosts"
    )]
    TooFewConnections {
        /// Connections asked for the whole run.
        total: u64,
        /// Client hosts.
        count: u64,
    },
    /// Fewer `--source` addresses than hosts: some host would have none.
    #[error(
        "{sources} --source addresses cannot be split over {count} hosts: give each host at least one, or none (the host's own address)"
    )]
    TooFewSources {
        /// `--source` addresses given.
        sources: usize,
        /// Client hosts.
        count: u64,
    },
    /// A `--start-at` that is neither an RFC 3339 instant nor unix seconds.
    #[error(
        "--start-at {0:?}: write an RFC 3339 instant (2026-11-30T15:00:00Z) or unix seconds (1795998600)"
    )]
    BadStartAt(String),
}

/// Parses `I/N` (a clap value parser).
pub(crate) fn parse_shard(s: &str) -> Result<ShardOf, ShareError> {
    let bad = || ShareError::BadShard(s.to_owned());
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let index: u64 = i.trim().parse().map_err(|_| bad())?;
    let count: u64 = n.trim().parse().map_err(|_| bad())?;
    if count == 0 || index >= count {
        return Err(bad());
    }
    Ok(ShardOf { index, count })
}

/// The shard from `--shard`, else from [`INDEX_ENV`] and [`COUNT_ENV`] when the index is
/// set; `None` when this host is the only one.
pub fn resolve(
    flag: Option<ShardOf>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<ShardOf>, ShareError> {
    if flag.is_some() {
        return Ok(flag);
    }
    let Some(index) = env(INDEX_ENV) else {
        return Ok(None);
    };
    let count = env(COUNT_ENV);
    let shard = format!("{index}/{}", count.clone().unwrap_or_default());
    parse_shard(&shard)
        .map(Some)
        .map_err(|_| ShareError::BadEnv(index, count))
}

impl ShardOf {
    /// This host's connections: `total / count`, the remainder spread one each over the
    /// first hosts, so the shares sum to `total` exactly.
    pub fn connections(self, total: Connections) -> Result<Connections, ShareError> {
        let too_few = ShareError::TooFewConnections {
            total: total.get(),
            count: self.count,
        };
        if total.get() < self.count {
            return Err(too_few);
        }
        Connections::new(self.part(total.get())).ok_or(too_few)
    }

    /// This host's part of `total` items: `total / count`, the remainder one each to
    /// the first hosts (0 when there are fewer items than hosts).
    fn part(self, total: u64) -> u64 {
        total / self.count.max(1) + u64::from(self.index < total % self.count.max(1))
    }

    /// Global index of this host's first connection (the hosts before it, summed).
    pub(crate) fn first(self, total: u64) -> u64 {
        let (q, r) = (total / self.count, total % self.count);
        self.index * q + self.index.min(r)
    }

    /// This host's share of the setup rate: proportional to its connections, so every
    /// host ramps for the same time and the hosts together ramp at `rate`.
    pub(crate) fn rate(self, rate: f64, total: Connections) -> Result<f64, ShareError> {
        Ok(rate * self.connections(total)?.get() as f64 / total.get() as f64)
    }

    /// This host's source addresses: a contiguous slice, the remainder spread as for
    /// connections. None given: the host's own address (empty stays empty).
    pub(crate) fn sources(self, all: &[IpAddr]) -> Result<Vec<IpAddr>, ShareError> {
        if all.is_empty() {
            return Ok(Vec::new());
        }
        let n = all.len() as u64;
        if n < self.count {
            return Err(ShareError::TooFewSources {
                sources: all.len(),
                count: self.count,
            });
        }
        let first = self.first(n) as usize;
        let len = self.part(n) as usize;
        Ok(all[first..first + len].to_vec())
    }
}

/// Parses `--start-at`: RFC 3339 (`2026-11-30T15:00:00Z`) or unix seconds (decimals allowed).
pub(crate) fn parse_start_at(s: &str) -> Result<SystemTime, ShareError> {
    let t = s.trim();
    if let Ok(secs) = t.parse::<f64>() {
        return Duration::try_from_secs_f64(secs)
            .map(|d| UNIX_EPOCH + d)
            .map_err(|_| ShareError::BadStartAt(s.to_owned()));
    }
    humantime::parse_rfc3339_weak(t).map_err(|_| ShareError::BadStartAt(s.to_owned()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn shares_sum_exactly_with_the_remainder_first() {
        for (total, count) in [(30_000, 2), (10, 3), (1_000_003, 7), (5, 5)] {
            let n = Connections::of(total);
            let shares: Vec<u64> = (0..count)
                .map(|index| ShardOf { index, count }.connections(n).unwrap().get())
                .collect();
            assert_eq!(shares.iter().sum::<u64>(), total);
            assert!(shares.windows(2).all(|w| w[0] >= w[1] && w[0] - w[1] <= 1));
            for index in 0..count {
                let s = ShardOf { index, count };
                assert_eq!(s.first(total), shares[..index as usize].iter().sum::<u64>());
            }
            let rates: f64 = (0..count)
                .map(|index| ShardOf { index, count }.rate(10_000.0, n).unwrap())
                .sum();
            assert!((rates - 10_000.0).abs() < 1e-6);
        }
        assert_eq!(
            ShardOf { index: 0, count: 3 }.connections(Connections::of(2)),
            Err(ShareError::TooFewConnections { total: 2, count: 3 })
        );
    }

    #[test]
    fn sources_are_split_into_disjoint_slices() {
        let all: Vec<IpAddr> = (1..=5).map(|i| IpAddr::from([10, 0, 0, i])).collect();
        let parts: Vec<Vec<IpAddr>> = (0..2)
            .map(|index| ShardOf { index, count: 2 }.sources(&all).unwrap())
            .collect();
        assert_eq!(parts[0], all[..3]);
        assert_eq!(parts[1], all[3..]);
        assert!(
            ShardOf { index: 0, count: 2 }
                .sources(&[])
                .unwrap()
                .is_empty()
        );
        assert!(ShardOf { index: 0, count: 9 }.sources(&all).is_err());
    }

    #[test]
    fn shard_from_flag_or_job_index() {
        assert_eq!(parse_shard("1/2"), Ok(ShardOf { index: 1, count: 2 }));
        for bad in ["2/2", "0/0", "1", "a/2", "-1/2"] {
            assert!(parse_shard(bad).is_err(), "{bad}");
        }
        let env = |k: &str| match k {
            INDEX_ENV => Some("3".to_owned()),
            COUNT_ENV => Some("4".to_owned()),
            _ => None,
        };
        assert_eq!(
            resolve(None, env).unwrap(),
            Some(ShardOf { index: 3, count: 4 })
        );
        let flag = Some(ShardOf { index: 0, count: 1 });
        assert_eq!(resolve(flag, env).unwrap(), flag);
        assert_eq!(resolve(None, |_| None).unwrap(), None);
        let no_count = |k: &str| (k == INDEX_ENV).then(|| "0".to_owned());
        assert!(resolve(None, no_count).is_err());
    }

    #[test]
    fn start_at_takes_rfc3339_or_unix_seconds() {
        let a = parse_start_at("2026-11-30T15:00:00Z").unwrap();
        let b = parse_start_at("1796050800").unwrap();
        assert_eq!(a, b);
        assert_eq!(
            parse_start_at("1796050800.5").unwrap(),
            b + Duration::from_millis(500)
        );
        assert!(parse_start_at("tomorrow").is_err());
    }
}
