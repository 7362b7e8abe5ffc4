//! The application side: `c1m server` and `c1m client`, sharded over worker processes
//! when one process's file-descriptor limit is too small.
//!
//! | module       | concern                                                              |
//! |--------------|----------------------------------------------------------------------|
//! | `ws`         | RFC 6455 codec: handshake and frames, pure, no I/O                    |
//! | `engine`     | per-shard connection engines (a plain epoll loop over a slab, one thread)|
//! | `tokio_engine` | the same shards on a tokio runtime each, a task per connection      |
//! | `shard`      | shards as threads or re-exec'd worker processes; the worker main     |
//! | `supervisor` | aggregation, lifecycle, signals, `connections: N`, summary           |
//! | `control`    | the line-protocol control endpoint (`stats`, `push`, `close`, `stop`), owner-only|
//! | `stats`      | counters, histograms, [`stats::snapshot::AppSnapshot`]                          |
//! | `churn`      | `--churn`: the flag, its checks, the pace; closed = reopened + failed  |
//! | `heartbeat`  | `--heartbeat`: pings, pongs matched by stamp, misses; the phase sweep  |
//! | `messages`   | `--message-rate`: stamped messages on a schedule, echoes matched, CO-corrected |
//! | `message_order` | the server's messages' numbers checked: gaps, out of order, duplicates |
//! | `push_rule`  | which instant push latency is measured from, one rule for every server |
//! | `limits`     | RLIMIT_NOFILE and the split decision (with the balance arithmetic)   |
//! | `config`     | what a shard is told (JSON to workers)                               |
//! | `port_lock`  | one owner per port: a flock per port, a listener check in the kernel |
//! | `sockopt`    | SO_REUSEPORT listeners, IP_BIND_ADDRESS_NO_PORT connects             |
//! | `sys`        | epoll, clocks, read/write/accept wrappers                            |
//! | `cli`        | `c1m server` / `c1m client` / `c1m worker` arguments                  |

pub mod churn;
pub(crate) mod cli;
pub mod config;
pub mod control;
pub mod engine;
pub(crate) mod heartbeat;
pub mod host_share;
pub mod limits;
pub(crate) mod message_order;
pub(crate) mod messages;
pub(crate) mod port_lock;
pub(crate) mod push_format;
pub mod push_rule;
pub(crate) mod push_trigger;
pub(crate) mod shard;
pub(crate) mod sockopt;
pub mod stats;
pub(crate) mod supervisor;
pub(crate) mod sys;
pub mod tls;
pub(crate) mod tokio_engine;
pub mod ws;
