//! The server's warnings, worded once for both engines.

pub(crate) fn listen_error(addr: &std::net::SocketAddr, e: &std::io::Error) -> String {
    format!("cannot listen on {addr}: {e} (is another program on that port? choose --ports)")
}

pub(crate) fn cap_warning(shard: u32, cap: u64) -> String {
    format!(
        "shard {shard} reached its cap of {cap} connections per process: it stopped listening, so \
         SO_REUSEPORT spreads new connections over the other workers (a larger --max-conns \
         gives every worker more room)"
    )
}

pub(crate) fn push_ignored(id: u64) -> String {
    format!("push {id} ignored: pushes need --mode ws")
}

/// The warning for an accept that ran out of descriptors, naming what holds them. The
/// cap was sized so that `cap` connections plus the reserves fit RLIMIT_NOFILE: running
/// out below it means descriptors that are not data connections took the room.
pub(crate) fn emfile_warning(e: &std::io::Error, conns: u64, cap: u64) -> String {
    if conns < cap {
        format!(
            "accept: {e} with only {conns} of this process's {cap} connection slots in use: descriptors \
             that are not data connections (files, pipes or sockets opened beside them) took the room \
             the connections were sized for; a larger --max-conns or `ulimit -n` would not help"
        )
    } else {
        format!(
            "accept: {e} with {conns} connections open in this process (RLIMIT_NOFILE): start the \
             server with a larger --max-conns so it shards over more workers, or raise `ulimit -n`"
        )
    }
}

/// A server teardown whose peers stopped ending their side of the goodbyes.
pub(crate) fn goodbye_unanswered(waiting: u64, stall_ns: u64) -> String {
    format!(
        "teardown: {waiting} peer(s) did not end their side within {} s of our goodbye (gone, or \
         not reading); closed them, and the rest right after their goodbye",
        stall_ns / 1_000_000_000
    )
}
