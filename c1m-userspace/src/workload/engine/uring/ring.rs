//! One io_uring per shard: its setup (with the one-line error an unusable kernel gets),
//! the provided-buffer ring multishot receives take their buffers from, the operations a
//! shard queues, and the wait. Every `unsafe` of the engine is here.
//!
//! Ownership rule: an operation that points at user memory (a send's bytes, the
//! buffer ring) keeps that memory alive until its completion says it is done. The
//! shard keeps send buffers until their completion; this ring keeps the provided buffers
//! until no operation is left in flight ([`Ring::quiesce`]), and leaks them rather
//! than free them under a kernel that still holds them.

use std::{
    alloc::{self, Layout},
    io,
    os::fd::{AsRawFd, BorrowedFd},
    sync::atomic::{AtomicU16, Ordering},
    time::Duration,
};

use io_uring::{IoUring, cqueue, opcode, squeue, types};
use thiserror::Error;

/// Submission queue entries: a push chunk's sends (`engine::server::PUSH_CHUNK`)
/// with room for the receives and cancels of the same turn. A full queue is submitted
/// and refilled, never an error.
const SQ_ENTRIES: u32 = 4096;

/// Completion queue entries: a turn's completions (a send each, a receive per readable
/// connection). The kernel keeps overflow beyond this (IORING_FEAT_NODROP), slower.
const CQ_ENTRIES: u32 = 16_384;

/// The provided-buffer group multishot receives take from.
const BUF_GROUP: u16 = 0;

/// Provided buffers: 256 of 4 KiB (1 MiB a shard). A WebSocket upgrade request or a
/// push's ACK-sized input is far below 4 KiB; a larger input arrives as several
/// completions, which the protocol code already joins. Too few buffers make a receive
/// end with ENOBUFS, and the shard re-arms it at once: slower, never lost.
pub(crate) const BUF_COUNT: u16 = 256;
pub(crate) const BUF_LEN: usize = 4096;

/// Why a ring could not be made, as the one line a user reads.
#[derive(Debug, Error)]
pub(crate) enum RingError {
    #[error(
        "--engine uring: io_uring is disabled on this host (io_uring_setup: {0}); enable it \
         with `sysctl kernel.io_uring_disabled=0` (as root), or use --engine epoll"
    )]
    Disabled(io::Error),
    #[error(
        "--engine uring: this kernel has no io_uring (io_uring_setup: {0}; CONFIG_IO_URING \
         is off); use --engine epoll"
    )]
    Missing(io::Error),
    #[error(
        "--engine uring: io_uring setup failed ({0}); it needs Linux 6.0 or newer for \
         multishot receives and buffer rings; use --engine epoll"
    )]
    Other(io::Error),
}

impl RingError {
    fn of(e: io::Error) -> RingError {
        match e.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => RingError::Disabled(e),
            Some(libc::ENOSYS) => RingError::Missing(e),
            _ => RingError::Other(e),
        }
    }
}

/// One completion, copied out of the queue.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Completion {
    pub user_data: u64,
    pub res: i32,
    pub flags: u32,
}

impl Completion {
    /// The operation goes on posting completions (a multishot one still armed).
    pub(crate) fn more(&self) -> bool {
        cqueue::more(self.flags)
    }

    /// The provided buffer this completion filled, if any.
    pub(crate) fn buffer(&self) -> Option<u16> {
        cqueue::buffer_select(self.flags)
    }
}

/// The provided-buffer ring: its entries (page-aligned, shared with the kernel) and the
/// buffers they point at.
struct BufRing {
    entries: *mut types::BufRingEntry,
    layout: Layout,
    bufs: Vec<u8>,
    /// Our copy of the tail: entries handed to the kernel so far (wrapping).
    tail: u16,
}

impl BufRing {
    fn new() -> io::Result<BufRing> {
        let layout = Layout::from_size_align(
            usize::from(BUF_COUNT) * size_of::<types::BufRingEntry>(),
            4096,
        )
        .map_err(io::Error::other)?;
        // SAFETY: the layout has a non-zero size; zeroed entries are valid (the kernel
        // reads only the entries below the tail we publish).
        let entries = unsafe { alloc::alloc_zeroed(layout) }.cast::<types::BufRingEntry>();
        if entries.is_null() {
            return Err(io::Error::from(io::ErrorKind::OutOfMemory));
        }
        let mut r = BufRing {
            entries,
            layout,
            bufs: vec![0; usize::from(BUF_COUNT) * BUF_LEN],
            tail: 0,
        };
        for bid in 0..BUF_COUNT {
            r.put(bid);
        }
        r.publish();
        Ok(r)
    }

    /// Writes buffer `bid` into the next free entry (visible at [`BufRing::publish`]).
    fn put(&mut self, bid: u16) {
        let i = usize::from(self.tail & (BUF_COUNT - 1));
        let addr = self.bufs[usize::from(bid) * BUF_LEN..].as_ptr() as u64;
        // SAFETY: `i < BUF_COUNT`, the entries' length; the kernel does not read entries
        // past the published tail, so this one is ours until `publish`.
        let e = unsafe { &mut *self.entries.add(i) };
        e.set_addr(addr);
        e.set_len(BUF_LEN as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Hands the entries written since the last publish to the kernel.
    fn publish(&self) {
        // SAFETY: `entries` is the ring's first entry, initialized; its tail field is a
        // u16 the kernel reads with acquire semantics, so a release store publishes the
        // entries written before it.
        unsafe {
            let tail = types::BufRingEntry::tail(self.entries).cast::<AtomicU16>();
            (*tail).store(self.tail, Ordering::Release);
        }
    }
}

/// A shard's ring.
pub(crate) struct Ring {
    ring: IoUring,
    bufs: BufRing,
    /// Operations queued or in flight: one until its last completion (a multishot one's
    /// completion without `F_MORE`).
    in_flight: u64,
    /// The entries recycled since the last publish.
    recycled: bool,
}

impl Ring {
    pub(crate) fn new() -> Result<Ring, RingError> {
        // COOP_TASKRUN: completions are run when the shard enters the kernel anyway (it
        // does every turn), instead of interrupting it; SINGLE_ISSUER: one thread submits.
        let ring = IoUring::builder()
            .setup_cqsize(CQ_ENTRIES)
            .setup_coop_taskrun()
            .setup_single_issuer()
            .build(SQ_ENTRIES)
            .or_else(|_| {
                IoUring::builder()
                    .setup_cqsize(CQ_ENTRIES)
                    .build(SQ_ENTRIES)
            })
            .map_err(RingError::of)?;
        let bufs = BufRing::new().map_err(RingError::Other)?;
        // SAFETY: `bufs.entries` holds BUF_COUNT entries, page-aligned, and lives as long
        // as the ring (see `Drop`: it is leaked if operations are still in flight).
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                bufs.entries as u64,
                BUF_COUNT,
                BUF_GROUP,
                0,
            )
        }
        .map_err(RingError::Other)?;
        Ok(Ring {
            ring,
            bufs,
            in_flight: 0,
            recycled: false,
        })
    }

    /// Queues `e`, submitting first if the queue is full.
    ///
    /// # Safety
    /// Memory `e` points at must stay valid until its last completion.
    unsafe fn push(&mut self, e: &squeue::Entry) -> io::Result<()> {
        self.in_flight += 1;
        loop {
            // SAFETY: the caller's promise.
            if unsafe { self.ring.submission().push(e) }.is_ok() {
                return Ok(());
            }
            self.ring.submit()?;
        }
    }

    /// One accept on `listener` (not multishot: the kernel's multishot accept takes the
    /// whole queue at once, past the shard's fd cap; see `server::ACCEPT_DEPTH`).
    pub(crate) fn accept(&mut self, listener: BorrowedFd<'_>, ud: u64) -> io::Result<()> {
        let e = opcode::Accept::new(
            types::Fd(listener.as_raw_fd()),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
        .flags(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
        .build()
        .user_data(ud);
        // SAFETY: the entry points at no memory.
        unsafe { self.push(&e) }
    }

    /// A multishot receive on `fd` into the provided buffers: a completion per read.
    pub(crate) fn recv_multi(&mut self, fd: BorrowedFd<'_>, ud: u64) -> io::Result<()> {
        let e = opcode::RecvMulti::new(types::Fd(fd.as_raw_fd()), BUF_GROUP)
            .build()
            .user_data(ud);
        // SAFETY: the buffers are the ring's own, alive while it is.
        unsafe { self.push(&e) }
    }

    /// A multishot poll for input on `fd` (the command source).
    pub(crate) fn poll_in_multi(&mut self, fd: BorrowedFd<'_>, ud: u64) -> io::Result<()> {
        let e = opcode::PollAdd::new(types::Fd(fd.as_raw_fd()), libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(ud);
        // SAFETY: the entry points at no memory.
        unsafe { self.push(&e) }
    }

    /// Sends `len` bytes at `ptr` on `fd` (MSG_NOSIGNAL: a reset peer is EPIPE).
    ///
    /// # Safety
    /// `ptr..ptr+len` must stay valid and unchanged until the send's completion.
    pub(crate) unsafe fn send(
        &mut self,
        fd: BorrowedFd<'_>,
        ptr: *const u8,
        len: u32,
        ud: u64,
    ) -> io::Result<()> {
        let e = opcode::Send::new(types::Fd(fd.as_raw_fd()), ptr, len)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(ud);
        // SAFETY: the caller's promise.
        unsafe { self.push(&e) }
    }

    /// Cancels the operation(s) of user data `target`; the cancel's own completion comes
    /// under `ud`.
    pub(crate) fn cancel(&mut self, target: u64, ud: u64) -> io::Result<()> {
        let e = opcode::AsyncCancel2::new(types::CancelBuilder::user_data(target).all())
            .build()
            .user_data(ud);
        // SAFETY: the entry points at no memory.
        unsafe { self.push(&e) }
    }

    /// Cancels every operation in flight (at the end of a shard).
    fn cancel_everything(&mut self, ud: u64) -> io::Result<()> {
        let e = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(ud);
        // SAFETY: the entry points at no memory.
        unsafe { self.push(&e) }
    }

    /// Submits what is queued without waiting.
    pub(crate) fn submit(&mut self) -> io::Result<()> {
        self.publish_buffers();
        self.ring.submit().map(drop)
    }

    /// Submits what is queued and waits up to `timeout` for a completion (none: just
    /// submit). An expired wait or a signal is not an error.
    pub(crate) fn submit_and_wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.publish_buffers();
        let r = match timeout {
            None => self.ring.submit(),
            Some(t) => {
                let ts = types::Timespec::from(t);
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(1, &args)
            }
        };
        match r {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Moves every completion waiting into `out`.
    pub(crate) fn completions(&mut self, out: &mut Vec<Completion>) {
        for c in self.ring.completion() {
            let c = Completion {
                user_data: c.user_data(),
                res: c.result(),
                flags: c.flags(),
            };
            if !c.more() {
                self.in_flight = self.in_flight.saturating_sub(1);
            }
            out.push(c);
        }
    }

    /// The first `len` bytes of provided buffer `bid` (what its completion received).
    pub(crate) fn buffer(&self, bid: u16, len: usize) -> &[u8] {
        let start = usize::from(bid) * BUF_LEN;
        let end = start + len.min(BUF_LEN);
        self.bufs.bufs.get(start..end).unwrap_or_default()
    }

    /// Gives buffer `bid` back to the kernel (published at the next submit).
    pub(crate) fn recycle(&mut self, bid: u16) {
        if bid < BUF_COUNT {
            self.bufs.put(bid);
            self.recycled = true;
        }
    }

    fn publish_buffers(&mut self) {
        if self.recycled {
            self.recycled = false;
            self.bufs.publish();
        }
    }

    /// Cancels everything in flight and waits (at most `within`) until the kernel has
    /// finished with every operation, recycling the buffers of completions that came.
    /// `false`: some are still in flight.
    pub(crate) fn quiesce(&mut self, ud: u64, within: Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        let _ = self.cancel_everything(ud);
        let mut out = Vec::new();
        while self.in_flight > 0 && std::time::Instant::now() < deadline {
            if self
                .submit_and_wait(Some(Duration::from_millis(10)))
                .is_err()
            {
                break;
            }
            out.clear();
            self.completions(&mut out);
            for c in &out {
                if let Some(bid) = c.buffer() {
                    self.recycle(bid);
                }
            }
        }
        self.in_flight == 0
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        if self.in_flight > 0 {
            // The kernel may still write into the buffers: never free them under it.
            std::mem::forget(std::mem::take(&mut self.bufs.bufs));
            return;
        }
        let _ = self.ring.submitter().unregister_buf_ring(BUF_GROUP);
        // SAFETY: allocated with this layout in `BufRing::new`, unregistered above, and
        // no operation is in flight.
        unsafe { alloc::dealloc(self.bufs.entries.cast(), self.bufs.layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unusable_kernel_gets_one_line_naming_cause_and_fix() {
        let disabled = RingError::of(io::Error::from_raw_os_error(libc::EPERM)).to_string();
        assert!(
            disabled.contains("kernel.io_uring_disabled=0"),
            "{disabled}"
        );
        assert!(disabled.contains("--engine epoll"), "{disabled}");
        let missing = RingError::of(io::Error::from_raw_os_error(libc::ENOSYS)).to_string();
        assert!(missing.contains("CONFIG_IO_URING"), "{missing}");
        for e in [disabled, missing] {
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
