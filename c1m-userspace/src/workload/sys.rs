//! Thin safe wrappers over the few Linux calls the engines make directly: epoll, clocks,
//! non-blocking read/write/accept, and errno. Everything `unsafe` in the workload lives here
//! and in `sockopt.rs`, each call with the one invariant it needs.

use std::{
    io,
    os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd},
};

/// Runs a libc call that returns -1 on error.
fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_size(r: libc::ssize_t) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// An epoll instance.
pub struct Epoll {
    fd: OwnedFd,
}

/// Events per `epoll_wait`: enough to amortise the syscall at 30k conn/s and 250k echo/s,
/// small enough (12 KiB) to stay in cache and keep the time per batch short.
pub const MAX_EVENTS: usize = 1024;

/// A reusable array for [`Epoll::wait`].
pub struct Events {
    buf: Vec<libc::epoll_event>,
    len: usize,
}

impl Default for Events {
    fn default() -> Events {
        Events {
            buf: vec![libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS],
            len: 0,
        }
    }
}

impl Events {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The i-th ready (event mask, token) pair. epoll_event is packed on x86_64, so the
    /// fields are copied out rather than borrowed.
    pub fn get(&self, i: usize) -> (u32, u64) {
        let e = self.buf[i];
        (e.events, e.u64)
    }
}

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 has no memory preconditions; the fd is owned from here on.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: fd is a fresh, valid descriptor nobody else owns.
        Ok(Epoll {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: ev is a valid epoll_event for the duration of the call.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) }).map(drop)
    }

    pub fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    pub fn modify(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
    }

    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Waits up to `timeout_ms` (0: just poll) and fills `events`.
    pub fn wait(&self, events: &mut Events, timeout_ms: i32) -> io::Result<()> {
        // SAFETY: the buffer holds MAX_EVENTS entries and the kernel writes at most that many.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                events.buf.as_mut_ptr(),
                MAX_EVENTS as i32,
                timeout_ms,
            )
        };
        events.len = match cvt(n) {
            Ok(n) => n as usize,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
            Err(e) => return Err(e),
        };
        Ok(())
    }
}

impl AsRawFd for Epoll {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// An eventfd: how a thread shard's supervisor wakes the shard's `epoll_wait` when it
/// queues a command (the fd sits in the shard's epoll set).
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: plain syscall; the fd is owned from here on.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: fd is a fresh, valid descriptor nobody else owns.
        Ok(EventFd {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Makes the fd readable (a counter overflow cannot happen at one write per command).
    pub fn notify(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: one is 8 readable bytes, the size an eventfd write takes.
        unsafe { libc::write(self.fd.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    /// Resets the counter so the fd stops polling readable.
    pub fn drain(&self) {
        let mut v = [0u8; 8];
        // SAFETY: v is 8 writable bytes; EAGAIN (nothing to drain) is fine.
        unsafe { libc::read(self.fd.as_raw_fd(), v.as_mut_ptr().cast(), v.len()) };
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Sets O_NONBLOCK on `fd` (a worker's stdin pipe, watched by its epoll set).
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we hold; F_GETFL/F_SETFL touch no memory.
    let flags = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) }).map(drop)
}

/// Milliseconds from `now` until `deadline` (both monotonic ns) for `epoll_wait`, rounded up
/// so a wait never ends just before its deadline and spins; 0 once it has passed.
pub fn ms_until(now: u64, deadline: u64) -> i32 {
    deadline
        .saturating_sub(now)
        .div_ceil(1_000_000)
        .min(i32::MAX as u64) as i32
}

pub const EPOLLIN: u32 = libc::EPOLLIN as u32;
pub const EPOLLOUT: u32 = libc::EPOLLOUT as u32;
pub const EPOLLERR: u32 = libc::EPOLLERR as u32;
pub const EPOLLHUP: u32 = libc::EPOLLHUP as u32;

fn clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; both clocks always exist on Linux (vDSO, no syscall).
    unsafe { libc::clock_gettime(id, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// CLOCK_REALTIME in ns: comparable across processes, so push stamps written by a server
/// worker can be subtracted from receive times taken by a client worker.
pub fn realtime_ns() -> u64 {
    clock(libc::CLOCK_REALTIME)
}

/// CLOCK_MONOTONIC in ns: one clock for all processes of the box, so the supervisor can
/// hand workers a common ramp epoch.
pub fn monotonic_ns() -> u64 {
    clock(libc::CLOCK_MONOTONIC)
}

/// Non-blocking read. `Ok(0)` is end of stream.
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for writes of buf.len() bytes.
    cvt_size(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) })
}

/// Non-blocking write; MSG_NOSIGNAL so a peer reset is an EPIPE error, not a SIGPIPE.
pub fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for reads of buf.len() bytes.
    cvt_size(unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) })
}

/// The last write before `close()`: MSG_MORE holds the bytes (TCP_NODELAY or not) so
/// the FIN that `close()` sends rides in the same segment (`tcp_send_fin` tacks it onto
/// an unsent tail). Two segments in flight would arm the tail-loss probe at
/// 2·srtt + 2 jiffies, before a peer that delays its ACK answers (tests/workload_tlp.rs).
pub fn write_before_close(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for reads of buf.len() bytes.
    cvt_size(unsafe {
        libc::send(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_NOSIGNAL | libc::MSG_MORE,
        )
    })
}

/// accept4 with the accepted socket already non-blocking and close-on-exec.
pub fn accept(listener: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: null address pointers are allowed (we do not need the peer address).
    let fd = cvt(unsafe {
        libc::accept4(
            listener,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    })?;
    // SAFETY: fd is a fresh descriptor from accept4.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Fills `buf` from the kernel's CSPRNG (seeds for WebSocket keys and masks).
pub fn random_bytes(buf: &mut [u8]) {
    // SAFETY: buf is valid for writes; a short or failed read leaves the time-based fallback.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < buf.len() as isize {
        let t = realtime_ns() ^ u64::from(std::process::id()).rotate_left(32);
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (splitmix64(t.wrapping_add(i as u64)) & 0xFF) as u8;
        }
    }
}

/// SplitMix64: a fast, well-mixed 64-bit hash, used for deterministic echo payloads and
/// per-connection WebSocket keys, so neither has to be stored per connection.
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The errno of an I/O error, 0 if it has none.
pub fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

pub fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}
