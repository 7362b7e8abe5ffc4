//! A client's session tickets, kept for as many connections as a ramp starts at once.
//!
//! rustls's in-memory store keeps 8 TLS 1.3 tickets per server and drops the oldest: a
//! browser opens a few connections to a host, a lab client opens hundreds at a time to
//! one. With 64 connections in flight the tickets of a burst of completions overflowed
//! those 8, a connection that found none paid a full handshake, and a `--tls-resumption`
//! ramp resumed 38–54% of its connections (`cargo xtask bench tls`, 4,000 handshakes,
//! 2026-12-03) where OpenSSL's pair resumed all but 2. Here a server's queue holds up to
//! [`KEPT`] tickets, each used once (TLS 1.3 tickets must not be reused), oldest first.

use std::{
    collections::{HashMap, VecDeque},
    sync::Mutex,
};

use rustls::{
    NamedGroup,
    client::{ClientSessionStore, Tls12ClientSessionValue, Tls13ClientSessionValue},
    pki_types::ServerName,
};

/// Tickets kept per server name: more than a ramp keeps in flight (`--in-flight` is at
/// most 65,536 per client process, split over its shards); ~0.8 KiB each (the ticket,
/// its secret and the server's certificate), so at most ~13 MiB per shard.
const KEPT: usize = 16_384;

#[derive(Debug, Default)]
struct Server {
    kx_hint: Option<NamedGroup>,
    tls12: Option<Tls12ClientSessionValue>,
    tls13: VecDeque<Tls13ClientSessionValue>,
}

#[derive(Debug, Default)]
pub(crate) struct TicketPool {
    servers: Mutex<HashMap<ServerName<'static>, Server>>,
}

impl TicketPool {
    /// `f` on the server's entry, made if it is not there yet (for what stores).
    fn with<T>(&self, name: &ServerName<'_>, f: impl FnOnce(&mut Server) -> T) -> Option<T> {
        let mut servers = self.servers.lock().ok()?;
        Some(f(servers.entry(name.to_owned()).or_default()))
    }

    /// `f` on the server's entry if it has one: a lookup leaves no empty entry behind.
    fn read<T>(
        &self,
        name: &ServerName<'_>,
        f: impl FnOnce(&mut Server) -> Option<T>,
    ) -> Option<T> {
        let mut servers = self.servers.lock().ok()?;
        servers.get_mut(&name.to_owned()).and_then(f)
    }
}

impl ClientSessionStore for TicketPool {
    fn set_kx_hint(&self, name: ServerName<'static>, group: NamedGroup) {
        self.with(&name, |s| s.kx_hint = Some(group));
    }

    fn kx_hint(&self, name: &ServerName<'_>) -> Option<NamedGroup> {
        self.read(name, |s| s.kx_hint)
    }

    fn set_tls12_session(&self, name: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.with(&name, |s| s.tls12 = Some(value));
    }

    fn tls12_session(&self, name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.read(name, |s| s.tls12.clone())
    }

    fn remove_tls12_session(&self, name: &ServerName<'static>) {
        self.read(name, |s| s.tls12.take());
    }

    fn insert_tls13_ticket(&self, name: ServerName<'static>, value: Tls13ClientSessionValue) {
        self.with(&name, |s| {
            if s.tls13.len() >= KEPT {
                s.tls13.pop_front();
            }
            s.tls13.push_back(value);
        });
    }

    fn take_tls13_ticket(&self, name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        self.read(name, |s| s.tls13.pop_front())
    }
}
