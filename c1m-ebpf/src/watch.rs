//! Which sockets are watched, and which side of a connection each one is.

use c1m_common::side;

use crate::{
    config::cfg,
    maps::{WATCH_ADDRS, WATCH_ADDRS6, WATCH_PORTS},
};

/// A socket address as the address filter matches it, in network byte order.
#[derive(Clone, Copy)]
pub enum Ip {
    V4(u32),
    V6([u32; 4]),
}

/// Bytes 8..12 of an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`), read as a u32.
const V4_MAPPED: u32 = u32::to_be(0x0000_ffff);

impl Ip {
    /// An IPv6 address; an IPv4-mapped one (a dual-stack socket talking to an IPv4
    /// peer) is its IPv4 address, so `--addr 127.0.0.1` matches it.
    #[inline(always)]
    pub fn v6(a: [u32; 4]) -> Self {
        if a[0] == 0 && a[1] == 0 && a[2] == V4_MAPPED {
            Ip::V4(a[3])
        } else {
            Ip::V6(a)
        }
    }
}

/// Where a socket's addresses are read from. Called only with the address filter on,
/// so the hot path without it reads no address at all. `None`: unreadable.
pub trait Addrs {
    fn local(&self) -> Option<Ip>;
    fn remote(&self) -> Option<Ip>;
}

/// Side of a socket given its local/remote port (host order) and addresses; `None`
/// when the socket is not watched.
#[inline(always)]
pub fn classify(lport: u16, rport: u16, addrs: &impl Addrs) -> Option<u32> {
    if is_watched_port(lport) && addr_ok(|| addrs.local(), true) {
        return Some(side::SERVER);
    }
    if is_watched_port(rport) && addr_ok(|| addrs.remote(), false) {
        return Some(side::CLIENT);
    }
    if cfg!(ports_filter) != 0 {
        None
    } else {
        Some(side::OTHER)
    }
}

#[inline(always)]
pub fn is_watched_port(port: u16) -> bool {
    port != 0 && WATCH_PORTS.get(port as u32).is_some_and(|&v| v != 0)
}

#[inline(always)]
fn addr_ok(addr: impl FnOnce() -> Option<Ip>, local: bool) -> bool {
    if cfg!(addr_filter) == 0 {
        return true;
    }
    // Fail closed: a socket whose address we can't read is not ours to count.
    // A wildcard-bound listener has no local address yet; its children do.
    match addr() {
        Some(Ip::V4(a)) => (local && a == 0) || WATCH_ADDRS.get_ptr(a).is_some(),
        Some(Ip::V6(a)) => {
            (local && (a[0] | a[1] | a[2] | a[3]) == 0) || WATCH_ADDRS6.get_ptr(a).is_some()
        }
        None => false,
    }
}

/// With the ports filter off, a new listener's port becomes a server port at once
/// instead of at user space's next listener walk.
/// Returns true when the port was new (two CPUs may both say so: it only logs).
#[inline(always)]
pub fn learn_listener(port: u16) -> bool {
    if cfg!(ports_filter) != 0 || port == 0 {
        return false;
    }
    match WATCH_PORTS.get_ptr_mut(port as u32) {
        // SAFETY: the pointer is to a live element of an array map.
        Some(flag) if unsafe { *flag } == 0 => {
            unsafe { *flag = 1 };
            true
        }
        _ => false,
    }
}
