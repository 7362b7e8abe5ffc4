//! TLS under every mode (wss, and TLS under hold/echo), for both engines: rustls on
//! ring, through its unbuffered API so a shard owns every buffer.
//!
//! | module    | concern                                                          |
//! |-----------|------------------------------------------------------------------|
//! | `config`  | what a shard is told (PEM text), the rustls configs, self-signed |
//! | `session` | one connection's session: ciphertext in, plaintext and records out |
//! | `failure` | a failed handshake as its counted cause                          |
//! | `record`  | what a run's record says of its TLS                              |

pub mod args;
pub(crate) mod config;
pub(crate) mod failure;
pub mod record;
pub(crate) mod session;
