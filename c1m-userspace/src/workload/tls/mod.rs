//! TLS under every mode (wss, and TLS under hold/echo), for both engines: rustls on
//! ring. The epoll engine drives it through its unbuffered API (`session`), so a shard
//! owns every buffer; the tokio engine through tokio-rustls (`tokio_engine::stream`),
//! as tokio programs do. Both build from `config` and count by `failure`.
//!
//! | module    | concern                                                          |
//! |-----------|------------------------------------------------------------------|
//! | `chain_cache` | a client's verified chains, remembered for a second     |
//! | `compact_aead` | TLS 1.3 record keys kept as bytes, expanded per record  |
//! | `config`  | what a shard is told (PEM text), the rustls configs, self-signed |
//! | `session` | one connection's session: ciphertext in, plaintext and records out |
//! | `record_layer` | after the handshake: c1m seals and opens the records, rustls dropped |
//! | `failure` | a failed handshake as its counted cause                          |
//! | `record`  | what a run's record says of its TLS                              |
//! | `ticket_pool` | a client's tickets, as many as a ramp has in flight       |
//! | `tickets` | session tickets every shard and worker of a server opens         |
//! | `footprint` | (tests) the heap an idle session keeps, by size               |

pub mod args;
pub(crate) mod chain_cache;
pub(crate) mod compact_aead;
pub(crate) mod config;
pub(crate) mod failure;
#[cfg(test)]
pub(crate) mod footprint;
pub mod record;
pub(crate) mod record_layer;
pub(crate) mod session;
pub(crate) mod ticket_pool;
pub(crate) mod tickets;
