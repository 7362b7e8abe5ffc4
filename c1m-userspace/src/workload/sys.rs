//! Thin safe wrappers over the few Linux calls the engines make directly: epoll, clocks,
//! non-blocking read/write/accept, and errno, all by rustix (its epoll, send and accept4
//! are the same syscalls libc makes, without `unsafe` on our side).

use std::{
    io,
    os::fd::{AsFd, BorrowedFd, OwnedFd},
};

use rustix::{
    event::{EventfdFlags, epoll},
    net::{SendFlags, SocketFlags},
    time::{ClockId, Timespec},
};

/// An epoll instance.
pub(crate) struct Epoll {
    fd: OwnedFd,
}

/// Events per `epoll_wait`: enough to amortise the syscall at 30k conn/s and 250k echo/s,
/// small enough (12 KiB) to stay in cache and keep the time per batch short.
pub(crate) const MAX_EVENTS: usize = 1024;

/// A reusable array for [`Epoll::wait`].
pub(crate) struct Events {
    buf: Vec<epoll::Event>,
    len: usize,
}

impl Default for Events {
    fn default() -> Events {
        let none = epoll::Event {
            flags: epoll::EventFlags::empty(),
            data: epoll::EventData::new_u64(0),
        };
        Events {
            buf: vec![none; MAX_EVENTS],
            len: 0,
        }
    }
}

impl Events {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The i-th ready (event mask, token) pair. epoll_event is packed on x86_64, so the
    /// fields are copied out rather than borrowed.
    pub(crate) fn get(&self, i: usize) -> (u32, u64) {
        let epoll::Event { flags, data } = self.buf[i];
        (flags.bits(), data.u64())
    }
}

impl Epoll {
    pub(crate) fn new() -> io::Result<Epoll> {
        Ok(Epoll {
            fd: epoll::create(epoll::CreateFlags::CLOEXEC)?,
        })
    }

    pub(crate) fn add(&self, fd: BorrowedFd<'_>, events: u32, token: u64) -> io::Result<()> {
        Ok(epoll::add(
            &self.fd,
            fd,
            epoll::EventData::new_u64(token),
            epoll::EventFlags::from_bits_retain(events),
        )?)
    }

    pub(crate) fn modify(&self, fd: BorrowedFd<'_>, events: u32, token: u64) -> io::Result<()> {
        Ok(epoll::modify(
            &self.fd,
            fd,
            epoll::EventData::new_u64(token),
            epoll::EventFlags::from_bits_retain(events),
        )?)
    }

    /// Waits up to `timeout_ms` (0: just poll, negative: no limit) and fills `events`.
    /// rustix makes this the same `epoll_pwait(.., NULL sigmask)` syscall libc's
    /// `epoll_wait` makes, the milliseconds passed through unchanged.
    pub(crate) fn wait(&self, events: &mut Events, timeout_ms: i32) -> io::Result<()> {
        let timeout = (timeout_ms >= 0).then(|| Timespec {
            tv_sec: i64::from(timeout_ms / 1000),
            tv_nsec: i64::from(timeout_ms % 1000) * 1_000_000,
        });
        events.len = match epoll::wait(&self.fd, &mut events.buf[..], timeout.as_ref()) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => 0,
            Err(e) => return Err(e.into()),
        };
        Ok(())
    }
}

impl AsFd for Epoll {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// An eventfd: how a thread shard's supervisor wakes the shard's `epoll_wait` when it
/// queues a command (the fd sits in the shard's epoll set).
pub(crate) struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    pub(crate) fn new() -> io::Result<EventFd> {
        Ok(EventFd {
            fd: rustix::event::eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC)?,
        })
    }

    /// Makes the fd readable (a counter overflow cannot happen at one write per command).
    pub(crate) fn notify(&self) {
        let _ = rustix::io::write(&self.fd, &1u64.to_ne_bytes());
    }

    /// Resets the counter so the fd stops polling readable.
    pub(crate) fn drain(&self) {
        let mut v = [0u8; 8];
        // EAGAIN (nothing to drain) is fine.
        let _ = rustix::io::read(&self.fd, &mut v);
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Sets O_NONBLOCK on `fd` (a worker's stdin pipe, watched by its epoll set).
pub(crate) fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    let flags = rustix::fs::fcntl_getfl(fd)?;
    Ok(rustix::fs::fcntl_setfl(
        fd,
        flags | rustix::fs::OFlags::NONBLOCK,
    )?)
}

/// Milliseconds from `now` until `deadline` (both monotonic ns) for `epoll_wait`, rounded up
/// so a wait never ends just before its deadline and spins; 0 once it has passed.
pub(crate) fn ms_until(now: u64, deadline: u64) -> i32 {
    deadline
        .saturating_sub(now)
        .div_ceil(1_000_000)
        .min(i32::MAX as u64) as i32
}

pub(crate) const EPOLLIN: u32 = epoll::EventFlags::IN.bits();
pub(crate) const EPOLLOUT: u32 = epoll::EventFlags::OUT.bits();
pub(crate) const EPOLLERR: u32 = epoll::EventFlags::ERR.bits();
pub(crate) const EPOLLHUP: u32 = epoll::EventFlags::HUP.bits();

/// Both clocks always exist on Linux; rustix reads them through the vDSO, as libc does.
fn clock(id: ClockId) -> u64 {
    let ts = rustix::time::clock_gettime(id);
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// CLOCK_REALTIME in ns: comparable across processes, so push stamps written by a server
/// worker can be subtracted from receive times taken by a client worker.
pub(crate) fn realtime_ns() -> u64 {
    clock(ClockId::Realtime)
}

/// CLOCK_MONOTONIC in ns: one clock for all processes of the box, so the supervisor can
/// hand workers a common ramp epoch.
pub(crate) fn monotonic_ns() -> u64 {
    clock(ClockId::Monotonic)
}

/// Non-blocking read. `Ok(0)` is end of stream.
pub(crate) fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    Ok(rustix::io::read(fd, buf)?)
}

/// Non-blocking write; MSG_NOSIGNAL so a peer reset is an EPIPE error, not a SIGPIPE.
pub(crate) fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    Ok(rustix::net::send(fd, buf, SendFlags::NOSIGNAL)?)
}

/// The last write before `close()`: MSG_MORE holds the bytes (TCP_NODELAY or not) so
/// the FIN that `close()` sends rides in the same segment (`tcp_send_fin` tacks it onto
/// an unsent tail). Two segments in flight would arm the tail-loss probe at
/// 2·srtt + 2 jiffies, before a peer that delays its ACK answers (tests/workload_tlp.rs).
pub(crate) fn write_before_close(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    Ok(rustix::net::send(
        fd,
        buf,
        SendFlags::NOSIGNAL | SendFlags::MORE,
    )?)
}

/// Sends the FIN (after any unsent tail, in its segment) and keeps the socket readable.
pub(crate) fn shutdown_write(fd: BorrowedFd<'_>) -> io::Result<()> {
    Ok(rustix::net::shutdown(fd, rustix::net::Shutdown::Write)?)
}

/// accept4 with the accepted socket already non-blocking and close-on-exec.
pub(crate) fn accept(listener: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    Ok(rustix::net::accept_with(
        listener,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
    )?)
}

/// Fills `buf` from the kernel's CSPRNG (seeds for WebSocket keys and masks).
pub(crate) fn random_bytes(buf: &mut [u8]) {
    // A short or failed read leaves the time-based fallback.
    let n = rustix::rand::getrandom(&mut *buf, rustix::rand::GetRandomFlags::empty()).unwrap_or(0);
    if n < buf.len() {
        let t = realtime_ns() ^ u64::from(std::process::id()).rotate_left(32);
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (splitmix64(t.wrapping_add(i as u64)) & 0xFF) as u8;
        }
    }
}

/// SplitMix64: a fast, well-mixed 64-bit hash, used for deterministic echo payloads and
/// per-connection WebSocket keys, so neither has to be stored per connection.
pub(crate) fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The errno of an I/O error, if it has one.
pub(crate) fn errno(e: &io::Error) -> Option<rustix::io::Errno> {
    rustix::io::Errno::from_io_error(e)
}

pub(crate) fn would_block(e: &io::Error) -> bool {
    // The raw code, not `kind()`: that is an out-of-line table lookup, and this test runs
    // after nearly every read, accept and connect (0.2% of a 1M WebSocket ramp, perf).
    // An error built from a kind (TLS, tests) has no code: its kind answers.
    match e.raw_os_error() {
        Some(code) => code == rustix::io::Errno::AGAIN.raw_os_error(),
        None => e.kind() == io::ErrorKind::WouldBlock,
    }
}
