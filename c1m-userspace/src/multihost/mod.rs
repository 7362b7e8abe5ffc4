//! Runs past one box: one server host, many client hosts.
//!
//! - A client host (`c1m client --shard I/N`) takes its share of the connections, the
//!   setup rate and the source addresses
//!   ([`host_share`](crate::workload::host_share)), measures its clock against the
//!   server host's ([`clock`](crate::workload::control::clock)), writes a run folder ([`client_host`]) and serves its
//!   Prometheus metrics ([`client_metrics`]).
//! - The server host (`c1m run --clients external --expect N`) runs the phases without
//!   a client and counts the clients it sees by address ([`peers`]).
//! - `c1m merge` ([`merge`]) makes one run folder of them, exactly: histograms added
//!   bucket by bucket, counters summed.
//! - `c1m run --hosts 1+K` ([`hosts_run`]) makes the hosts as network namespaces on a
//!   bridge ([`topology`]), runs both sides in them and merges the result, with a row
//!   per host (`hosts_table`); while they run, a line per client host every 5 s read
//!   from its folder (`hosts_live`).

pub(crate) mod client_host;
pub(crate) mod client_metrics;
pub(crate) mod client_run;
mod hosts_live;
pub(crate) mod hosts_run;
mod hosts_table;
pub(crate) mod merge;
pub mod model;
pub(crate) mod peers;
pub(crate) mod topology;
