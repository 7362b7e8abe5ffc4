//! Application statistics: what each shard counts, what it reports to its supervisor, and
//! [`snapshot::AppSnapshot`], the one JSON document the control endpoint's `stats` answers and
//! `--stats-json` writes at exit. The lab (issue 4) reads it twice a second.
//!
//! Exactness rules: counters are summed; histograms are merged bucket by bucket after a
//! lossless V2 round trip (never averaged percentiles); the setup timeline is summed per
//! 10 ms bin; so an N-worker run reports the same numbers one process would.
//!
//! | module        | concern                                                          |
//! |---------------|------------------------------------------------------------------|
//! | `counters`    | what a shard counts ([`counters::Counters`])                      |
//! | `histograms`  | latency histograms, their V2 encoding, [`histograms::Percentiles`] |
//! | `setup_rate`  | the setup timeline, its step table, asked/achieved/peak rates     |
//! | `report`      | what a shard sends its supervisor ([`report::WorkerReport`])      |
//! | `snapshot`    | what the supervisor aggregates ([`snapshot::AppSnapshot`])        |

pub mod counters;
pub mod histograms;
pub(crate) mod report;
pub mod setup_rate;
pub mod snapshot;
