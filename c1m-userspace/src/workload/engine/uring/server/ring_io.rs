//! The io_uring server shard's writes and close for the shared server code
//! (`engine::server::state`): sends queued as submission entries behind the one in
//! flight, a close that cancels a connection's operations by user data, and a push
//! chunk's frames submitted at each of its flushes ([`state::PUSH_SUBMIT`] frames).

use std::{collections::HashMap, io, os::fd::AsFd};

use anyhow::{Context, Result};

use crate::workload::{
    engine::{
        server::state::{self, PushLeft, ServerIo},
        uring::{
            Op,
            outq::{self, OutQ},
            ring::Ring,
        },
    },
    sys,
};

/// The send in flight on a connection and what waits behind it; `None` while none is in
/// flight. (Its spill holds input only: output is here.)
pub(super) type Sends = Option<Box<OutQ>>;

pub(super) type Conn = state::Conn<Sends>;

/// The shard's ring, and the bytes of sends still in flight on connections already
/// closed.
pub(super) struct RingIo {
    pub ring: Ring,
    /// Sends still in flight on connections already closed, by user data: their bytes
    /// stay until the kernel's completion says it is done with them.
    pub orphans: HashMap<u64, Box<OutQ>>,
}

impl ServerIo<Sends> for RingIo {
    #[inline]
    fn send(&mut self, tok: u64, conn: &mut Conn, bytes: &[u8], _sent: &mut u64) -> io::Result<()> {
        // What a send wrote is counted at its completion (`Shard::sent`).
        send_on(&mut self.ring, tok, conn, bytes)
    }

    fn send_last(&mut self, conn: &mut Conn, bytes: &[u8], written: &mut u64) {
        if !bytes.is_empty() {
            write_before_close(conn, bytes, written);
        }
    }

    fn half_close(&mut self, _tok: u64, conn: &mut Conn) -> bool {
        // The receive stays armed: the peer's close reply is read and dropped, its end of
        // the stream ends the connection (`goodbye_end`).
        sys::shutdown_write(conn.fd.as_fd()).is_ok()
    }

    /// Cancels `conn`'s operations; a send in flight keeps its bytes in `orphans`. The
    /// socket itself goes when the kernel drops the operations' references to it, at the
    /// cancel, which the next submit carries.
    fn forget(&mut self, tok: u64, conn: &mut Conn) {
        if conn.io.is_some() {
            // Its send may still be only an entry in the submission queue, naming the
            // descriptor by number: submitted after the close, it would fail, or reach
            // whichever socket an accept gave that number next.
            let _ = self.ring.submit();
        }
        let _ = self.ring.cancel(Op::Recv.ud(tok), Op::Cancel.ud(0));
        if let Some(q) = conn.io.take() {
            let ud = Op::Send.ud(tok);
            let _ = self.ring.cancel(ud, Op::Cancel.ud(0));
            self.orphans.insert(ud, q);
        }
    }

    fn push_flush(&mut self, _sent: &mut u64, _left: &mut Vec<PushLeft>) -> Result<()> {
        // Sends complete in the shard's loop, behind the connection's queue (`Shard::sent`).
        self.ring.submit().context("io_uring_enter")
    }

    fn queued(&self, conn: &Conn) -> usize {
        conn.io.as_ref().map_or(0, |q| q.queued())
    }
}

/// Queues `bytes` on `conn`: a send entry now if none is in flight, else behind it.
pub(super) fn send_on(ring: &mut Ring, tok: u64, conn: &mut Conn, bytes: &[u8]) -> io::Result<()> {
    match outq::write(&mut conn.io, bytes) {
        Err(outq::Full) => Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "peer not reading: output queue full",
        )),
        Ok(None) => Ok(()),
        Ok(Some(s)) => {
            // SAFETY: `s` points into `conn.io`, unchanged until this send's completion
            // (kept in `orphans` if the connection closes first).
            let r = unsafe { ring.send(conn.fd.as_fd(), s.ptr, s.len, Op::Send.ud(tok)) };
            if r.is_err() {
                // Not queued: nothing in flight.
                conn.io = None;
            }
            r
        }
    }
}

/// A last write before the close, in one segment with the FIN
/// ([`sys::write_before_close`], a direct syscall: it is not on a hot path). Best
/// effort: behind a send in flight it is dropped, as the epoll shard drops it behind
/// queued output.
pub(super) fn write_before_close(conn: &Conn, bytes: &[u8], written: &mut u64) {
    if conn.io.is_some() {
        return;
    }
    if let Ok(n) = sys::write_before_close(conn.fd.as_fd(), bytes) {
        *written += n as u64;
    }
}
