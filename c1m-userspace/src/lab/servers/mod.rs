//! `c1m run --servers python,node,go,netty,c1m-epoll,c1m-tokio`: the same phases against each named
//! server in turn, one run folder each under one comparison folder, then the comparison
//! of `c1m compare` written there and printed. Here: how each server is started, how its
//! push is triggered and what its push frame looks like, the order of the runs, and the
//! sequence itself (each run is a `c1m run` process with the flags of its server, kept
//! apart from the others by `run/isolation.rs`). The
//! reference servers live in `reference-servers/` (their protocol:
//! `reference-servers/PROTOCOL.md`) and are built by `cargo xtask reference-servers` into
//! `target/reference-servers/<name>/run`.

mod order;
mod reference;
pub(crate) mod sequence;
