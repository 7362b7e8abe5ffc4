//! Running the two `iter/tcp` programs and reading what they produce.

use std::{
    io::{ErrorKind, Read},
    os::fd::BorrowedFd,
    time::{Duration, Instant},
};

use aya::maps::{Array, MapData};
use c1m_common::{ListenerRecord, RECORD_END, RECORD_LISTENER, SOCK_AGG_SLOTS, SockAgg};

use super::{ObserverError, bpf_sys, map_err};

pub(crate) struct SocketWalk {
    pub agg: Vec<SockAgg>,
    pub ended: Instant,
    /// Wall clock when the walk ended, ms since the Unix epoch: the instant its
    /// counts and memory describe (as closely as a walk of many sockets can).
    pub ended_unix_ms: u64,
    pub duration: Duration,
    pub sockets: u64,
}

fn io(what: &str) -> impl FnOnce(std::io::Error) -> ObserverError + '_ {
    move |source| ObserverError::Io {
        what: what.to_owned(),
        source,
    }
}

/// Every listening socket of this network namespace. Every socket past the listeners
/// writes an END record (see `iter_listeners` in c1m-ebpf), so a read fills its buffer
/// soon after the listeners end and the walk stops at the first END.
///
/// One record per `read()` used to stop exactly there, but each read resumes the
/// iterator, which re-batches the whole listening bucket: the ~97 SO_REUSEPORT
/// listeners of one port share a bucket, so at 100 ports × 97 worker processes a walk
/// took 9,700 reads × 97 socket refs, 4% of a core once a second during a 1.7M ramp
/// (perf: bpf_iter_tcp_listening_batch/resume/put_batch). A read of up to
/// [`LISTENER_READ`] takes ~800 records at once, and visits at most as many
/// established sockets past the end.
pub(crate) fn listeners(link: BorrowedFd<'_>) -> Result<Vec<ListenerRecord>, ObserverError> {
    const RECORD: usize = size_of::<ListenerRecord>();
    let mut file = bpf_sys::iter_create(link).map_err(io("opening the listener iterator"))?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; LISTENER_READ / RECORD * RECORD];
    // Bytes of a record split across reads (the kernel writes whole records, but a
    // read's size is not a promise of that).
    let mut held = 0;
    loop {
        let n = match file.read(&mut buf[held..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(io("reading the listener iterator")(e)),
        };
        let ready = held + n;
        let whole = ready / RECORD * RECORD;
        for chunk in buf[..whole].chunks_exact(RECORD) {
            // SAFETY: ListenerRecord is repr(C), plain integers, exactly RECORD bytes;
            // the kernel program wrote one whole record.
            let record: ListenerRecord = unsafe { std::ptr::read_unaligned(chunk.as_ptr().cast()) };
            match record.kind {
                RECORD_LISTENER => out.push(record),
                RECORD_END => return Ok(out),
                _ => {}
            }
        }
        buf.copy_within(whole..ready, 0);
        held = ready - whole;
    }
    Ok(out)
}

/// How much one read of the listener iterator asks for: the kernel's iterator buffer
/// (`bpf_seq_read`: 8 pages) returns no more per read.
const LISTENER_READ: usize = 32 * 1024;

/// Walks every TCP socket of the namespace, aggregating counts and memory per
/// (side, state) into `SOCK_AGG`.
pub(crate) fn sockets(
    link: BorrowedFd<'_>,
    agg: &mut Array<MapData, SockAgg>,
) -> Result<SocketWalk, ObserverError> {
    for i in 0..SOCK_AGG_SLOTS as u32 {
        agg.set(i, SockAgg::default(), 0)
            .map_err(map_err("SOCK_AGG"))?;
    }
    let started = Instant::now();
    let mut file = bpf_sys::iter_create(link).map_err(io("opening the socket iterator"))?;
    // One byte: the program writes one per 4,096 sockets (`PROGRESS_EVERY` in
    // c1m-ebpf), so each read returns after that many and the kernel can reschedule
    // between reads; a 64 KiB buffer let one read run to a million sockets.
    let mut buf = [0u8; 1];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            // A read that visited a million sockets without output: resume.
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(io("reading the socket iterator")(e)),
        }
    }
    let duration = started.elapsed();
    let agg: Vec<SockAgg> = agg
        .iter()
        .map(|r| r.map_err(map_err("SOCK_AGG")))
        .collect::<Result<_, _>>()?;
    let sockets = agg.iter().map(|a| a.sockets).sum();
    Ok(SocketWalk {
        agg,
        ended: Instant::now(),
        ended_unix_ms: crate::util::unix_ms_now(),
        duration,
        sockets,
    })
}
