//! Socket creation with the options C1M needs and std does not expose: SO_REUSEPORT
//! listeners, `IP_BIND_ADDRESS_NO_PORT` source binding, non-blocking connect.

use std::{
    io,
    net::SocketAddr,
    os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd},
    time::Duration,
};

use rustix::net::{self as rnet, AddressFamily, SocketFlags, SocketType, sockopt};

use crate::util::cvt;

fn tcp_socket(addr: &SocketAddr) -> io::Result<OwnedFd> {
    let domain = if addr.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    Ok(rnet::socket_with(
        domain,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?)
}

/// IP_BIND_ADDRESS_NO_PORT by hand: rustix 1.1 has no setter for it (nor a raw
/// setsockopt), and std none either.
fn set_bind_address_no_port(fd: BorrowedFd<'_>) -> io::Result<()> {
    let v: libc::c_int = 1;
    // SAFETY: v lives across the call and its size is passed.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&v as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// A non-blocking listener with SO_REUSEPORT, so every worker process binds the same
/// ports and the kernel spreads incoming connections over them (see `limits.rs`).
/// `backlog` is capped by the kernel at `net.core.somaxconn`. `nodelay`: TCP_NODELAY on
/// the listener, which every accepted socket inherits (the kernel clones the listener's
/// socket): a setsockopt per accepted connection saved, one of the ~17 syscalls a
/// WebSocket connection costs both sides.
pub(crate) fn listener(addr: &SocketAddr, backlog: i32, nodelay: bool) -> io::Result<OwnedFd> {
    let fd = tcp_socket(addr)?;
    sockopt::set_socket_reuseaddr(&fd, true)?;
    sockopt::set_socket_reuseport(&fd, true)?;
    if nodelay {
        sockopt::set_tcp_nodelay(&fd, true)?;
    }
    rnet::bind(&fd, addr)?;
    rnet::listen(&fd, backlog)?;
    Ok(fd)
}

/// Outcome of starting a non-blocking connect.
pub(crate) enum Connecting {
    /// The handshake is under way: wait for EPOLLOUT, then check [`take_error`].
    InProgress(OwnedFd),
    /// Connected at once (possible on loopback).
    Done(OwnedFd),
}

/// Starts a connect to `dst`, from `src` if given.
///
/// A source address with port 0 is bound with `IP_BIND_ADDRESS_NO_PORT`: a plain
/// `bind(ip, 0)` would reserve a port for the socket's lifetime and cap one source address
/// at ~28k connections in total; with the option the kernel picks the port at `connect()`
/// per 4-tuple, so each (source, destination) pair has the whole ephemeral range.
/// An explicit source port is bound with SO_REUSEADDR so TIME_WAIT remnants do not block it.
pub(crate) fn connect(
    src: Option<&SocketAddr>,
    dst: &SocketAddr,
    nodelay: bool,
) -> io::Result<Connecting> {
    let fd = tcp_socket(dst)?;
    if let Some(src) = src {
        if src.port() == 0 {
            set_bind_address_no_port(fd.as_fd())?;
        } else {
            sockopt::set_socket_reuseaddr(&fd, true)?;
        }
        rnet::bind(&fd, src)?;
    }
    if nodelay {
        set_nodelay(fd.as_fd())?;
    }
    match rnet::connect(&fd, dst) {
        Ok(()) => Ok(Connecting::Done(fd)),
        Err(rustix::io::Errno::INPROGRESS) => Ok(Connecting::InProgress(fd)),
        Err(e) => Err(e.into()),
    }
}

/// TCP_NODELAY: echo and WebSocket traffic is small request/response writes, which Nagle
/// would delay by up to one RTT of the peer's delayed ACK.
pub(crate) fn set_nodelay(fd: BorrowedFd<'_>) -> io::Result<()> {
    Ok(sockopt::set_tcp_nodelay(fd, true)?)
}

/// The pending error of a socket (SO_ERROR), e.g. the result of a non-blocking connect.
pub(crate) fn take_error(fd: BorrowedFd<'_>) -> io::Result<Option<io::Error>> {
    Ok(sockopt::socket_error(fd)?.err().map(io::Error::from))
}

/// Closes with RST instead of FIN (SO_LINGER 0): used for over-capacity rejections so the
/// client sees a reset at once and no TIME_WAIT is left behind.
pub(crate) fn set_linger_zero(fd: BorrowedFd<'_>) -> io::Result<()> {
    // Some(0 s): l_onoff 1, l_linger 0.
    Ok(sockopt::set_socket_linger(fd, Some(Duration::ZERO))?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    /// The servers set TCP_NODELAY once, on the listener: every accepted socket must have
    /// it, and a `hold` listener's none.
    #[test]
    fn accepted_sockets_inherit_the_listeners_nodelay() {
        for nodelay in [true, false] {
            let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
            let l = listener(&addr, 16, nodelay).unwrap();
            let bound = rnet::getsockname(&l).unwrap();
            let bound = SocketAddr::try_from(bound).unwrap();
            let _client = std::net::TcpStream::connect(bound).unwrap();
            let accepted = loop {
                match rnet::accept(&l) {
                    Ok(fd) => break fd,
                    Err(rustix::io::Errno::AGAIN) => std::thread::yield_now(),
                    Err(e) => panic!("{e}"),
                }
            };
            assert_eq!(sockopt::tcp_nodelay(&accepted).unwrap(), nodelay);
        }
    }
}
