//! Socket creation with the options C1M needs and std does not expose: SO_REUSEPORT
//! listeners, `IP_BIND_ADDRESS_NO_PORT` source binding, non-blocking connect.

use std::{
    io, mem,
    net::SocketAddr,
    os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd},
};

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

fn tcp_socket(addr: &SocketAddr) -> io::Result<OwnedFd> {
    let domain = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain syscall; the result is owned below.
    let fd = cvt(unsafe {
        libc::socket(
            domain,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: fd is fresh and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: v lives across the call and its size is passed.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as u32,
        )
    })
    .map(drop)
}

fn bind(fd: RawFd, addr: &SocketAddr) -> io::Result<()> {
    let (ss, len) = sockaddr(addr);
    // SAFETY: ss holds a valid sockaddr of length len.
    cvt(unsafe { libc::bind(fd, (&ss as *const libc::sockaddr_storage).cast(), len) }).map(drop)
}

/// A non-blocking listener with SO_REUSEPORT, so every worker process binds the same
/// ports and the kernel spreads incoming connections over them (see `limits.rs`).
/// `backlog` is capped by the kernel at `net.core.somaxconn`.
pub fn listener(addr: &SocketAddr, backlog: i32) -> io::Result<OwnedFd> {
    let fd = tcp_socket(addr)?;
    let raw = fd.as_raw_fd();
    set_int(raw, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    set_int(raw, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    bind(raw, addr)?;
    // SAFETY: plain syscall on our own socket.
    cvt(unsafe { libc::listen(raw, backlog) })?;
    Ok(fd)
}

/// Outcome of starting a non-blocking connect.
pub enum Connecting {
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
pub fn connect(
    src: Option<&SocketAddr>,
    dst: &SocketAddr,
    nodelay: bool,
) -> io::Result<Connecting> {
    let fd = tcp_socket(dst)?;
    let raw = fd.as_raw_fd();
    if let Some(src) = src {
        if src.port() == 0 {
            set_int(raw, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1)?;
        } else {
            set_int(raw, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        }
        bind(raw, src)?;
    }
    if nodelay {
        set_nodelay(raw)?;
    }
    let (ss, len) = sockaddr(dst);
    // SAFETY: ss holds a valid sockaddr of length len.
    match cvt(unsafe { libc::connect(raw, (&ss as *const libc::sockaddr_storage).cast(), len) }) {
        Ok(_) => Ok(Connecting::Done(fd)),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(Connecting::InProgress(fd)),
        Err(e) => Err(e),
    }
}

/// TCP_NODELAY: echo and WebSocket traffic is small request/response writes, which Nagle
/// would delay by up to one RTT of the peer's delayed ACK.
pub fn set_nodelay(fd: RawFd) -> io::Result<()> {
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)
}

/// The pending error of a socket (SO_ERROR), e.g. the result of a non-blocking connect.
pub fn take_error(fd: RawFd) -> io::Result<Option<io::Error>> {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len are valid out-pointers of the sizes passed.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(if v == 0 {
        None
    } else {
        Some(io::Error::from_raw_os_error(v))
    })
}

/// Closes with RST instead of FIN (SO_LINGER 0): used for over-capacity rejections so the
/// client sees a reset at once and no TIME_WAIT is left behind.
pub fn set_linger_zero(fd: RawFd) -> io::Result<()> {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: l lives across the call and its size is passed.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            size_of::<libc::linger>() as u32,
        )
    })
    .map(drop)
}
