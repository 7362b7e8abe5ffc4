//! What a client shard says once about its failures: one line per kind (a storm of
//! EADDRNOTAVAIL is one clear message with the fix, not a million), for both engines.

use std::sync::atomic::Ordering;

use rustix::io::Errno;

use super::{CLOSE_STALL_NS, Proto};
use crate::workload::{engine::failure_of, sys};

/// [`Proto`]'s warning bits for the failures said here; `server_messages.rs` holds bits 5–7.
const WARN_FD_LIMIT: u32 = 1 << 0;
const WARN_SOURCE_PORTS: u32 = 1 << 1;
const WARN_REFUSED: u32 = 1 << 2;
const WARN_OTHER: u32 = 1 << 3;
const WARN_CLOSE_UNANSWERED: u32 = 1 << 4;

impl Proto {
    /// A teardown gave up waiting for the server to close `n` connections.
    pub(crate) fn warn_close_unanswered(&mut self, n: u64) {
        self.warn_once(WARN_CLOSE_UNANSWERED, || {
            format!(
                "teardown: the server did not close {n} connection(s) within {} s of our close \
                 frame (RFC 6455 §7.1.1: the server closes first); closed them, and the rest \
                 right after their close frame",
                CLOSE_STALL_NS / 1_000_000_000
            )
        });
    }

    /// One warning line per kind of failure (bit per kind), so a storm of EADDRNOTAVAIL
    /// is one clear message, not a million.
    pub(super) fn warn_once(&mut self, bit: u32, msg: impl FnOnce() -> String) {
        if self.warned & bit == 0 {
            self.warned |= bit;
            self.rep.warnings.push(msg());
        }
    }

    /// Counts a failed connect (or a failure before the connection opened) and says why once.
    pub(crate) fn connect_failed(&mut self, e: &std::io::Error, g: u64) {
        failure_of(e, &mut self.c.failures);
        let (src, dst) = self.cfg.endpoints(g);
        self.warn_failure(e, src, dst);
    }

    fn warn_failure(
        &mut self,
        e: &std::io::Error,
        src: Option<std::net::SocketAddr>,
        dst: std::net::SocketAddr,
    ) {
        let from = src
            .map(|s| s.ip().to_string())
            .unwrap_or_else(|| "the default source".into());
        match sys::errno(e) {
            Some(Errno::MFILE | Errno::NFILE) => {
                let open = self.open_in_process.load(Ordering::Relaxed);
                self.warn_once(WARN_FD_LIMIT, || {
                    format!(
                        "connect: {e} with {open} sockets open in this process (RLIMIT_NOFILE): \
                         the client shards by itself only up to what it was asked for; raise `ulimit -n` \
                         or pass --workers to spread over more processes"
                    )
                })
            }
            Some(Errno::ADDRNOTAVAIL | Errno::ADDRINUSE) => self.warn_once(WARN_SOURCE_PORTS, || {
                format!(
                    "connect {from} -> {dst}: {e}: the source address/port space for this destination is \
                     exhausted (one source address gives each server port one ephemeral range, \
                     net.ipv4.ip_local_port_range): add --source addresses (e.g. --source 127.0.0.2-127.0.0.41) \
                     or more server --ports"
                )
            }),
            Some(Errno::CONNREFUSED) => self.warn_once(WARN_REFUSED, || {
                format!("connect {from} -> {dst}: connection refused: is the server listening on every --ports port?")
            }),
            _ => self.warn_once(WARN_OTHER, || format!("connect {from} -> {dst}: {e}")),
        }
    }
}
