//! Which sockets are watched, and which side of a connection each one is.

use c1m_common::side;

use crate::{
    config::cfg,
    maps::{WATCH_ADDRS, WATCH_PORTS},
};

/// Side of a socket given its local/remote port (host order) and IPv4 address
/// (network order, 0 for IPv6); `None` when the socket is not watched.
#[inline(always)]
pub fn classify(lport: u16, rport: u16, laddr: u32, raddr: u32) -> Option<u32> {
    if is_watched_port(lport) && addr_ok(laddr, true) {
        return Some(side::SERVER);
    }
    if is_watched_port(rport) && addr_ok(raddr, false) {
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
    port != 0 && WATCH_PORTS.get_ptr(port as u32).is_some()
}

#[inline(always)]
fn addr_ok(addr: u32, local: bool) -> bool {
    if cfg!(addr_filter) == 0 {
        return true;
    }
    // A wildcard-bound listener has no local address yet; its children do.
    (local && addr == 0) || WATCH_ADDRS.get_ptr(addr).is_some()
}

/// With the ports filter off, a new listener's port becomes a server port at once
/// instead of at user space's next listener walk.
/// Returns true when the port was new.
#[inline(always)]
pub fn learn_listener(port: u16) -> bool {
    cfg!(ports_filter) == 0
        && port != 0
        && !is_watched_port(port)
        && WATCH_PORTS.insert(port as u32, 1, 0).is_ok()
}
