//! TLS under every mode (wss, and TLS under hold/echo), for both engines: rustls on
//! ring, through its unbuffered API so a shard owns every buffer.
//!
//! | module    | concern                                                          |
//! |-----------|------------------------------------------------------------------|
//! | `config`  | what a shard is told (PEM text), the rustls configs, self-signed |
//! | `session` | one connection's session: ciphertext in, plaintext and records out |
//! | `failure` | a failed handshake as its counted cause                          |

pub mod args;
pub(crate) mod config;
pub(crate) mod failure;
#[cfg(test)]
mod footprint;
pub(crate) mod session;
