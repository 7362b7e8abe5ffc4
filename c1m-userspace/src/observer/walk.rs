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

/// Every listening socket of this network namespace. Reads one record per read(),
/// so the walk stops where the listeners end (see `iter_listeners` in c1m-ebpf).
pub(crate) fn listeners(link: BorrowedFd<'_>) -> Result<Vec<ListenerRecord>, ObserverError> {
    let mut file = bpf_sys::iter_create(link).map_err(io("opening the listener iterator"))?;
    let mut out = Vec::new();
    let mut buf = [0u8; size_of::<ListenerRecord>()];
    loop {
        match file.read_exact(&mut buf) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(io("reading the listener iterator")(e)),
        }
        // SAFETY: ListenerRecord is repr(C), plain integers, exactly this size; the
        // kernel program wrote one whole record.
        let record: ListenerRecord = unsafe { std::ptr::read_unaligned(buf.as_ptr().cast()) };
        match record.kind {
            RECORD_LISTENER => out.push(record),
            RECORD_END => break,
            _ => {}
        }
    }
    Ok(out)
}

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
    let mut buf = vec![0u8; 64 * 1024];
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
