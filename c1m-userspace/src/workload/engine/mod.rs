//! The connection engines: one per shard (a thread, or a worker process), each a plain loop
//! on one OS thread that owns an epoll instance and a slab of compact connection states.
//!
//! Why not a tokio task per connection: measured on this box with 15,000 idle
//! connections, a task per connection that awaits `readable()` and reads into a shared
//! per-thread buffer costs 850–1,020 bytes of RSS per connection (multi-thread and
//! current-thread runtime respectively: task cell, `TcpStream` registration, waker and
//! allocator overhead), twice the 512-byte budget, before any buffer. Here an idle
//! connection is one slab entry (24–48 bytes) plus its kernel epoll item; the read buffer
//! is one per shard, and a connection owns heap ([`Spill`]) only while it has a partial
//! frame, a fragmented message or unsent output. Measured at 1,000,000 connections: 27
//! bytes per connection on the server, 78 on the client (which also keeps histograms).
//!
//! Why not tokio at all in a shard: the shard blocks in `epoll_wait` on its own set, with
//! its command source in the same set (a worker's stdin pipe, or an eventfd a thread
//! shard's supervisor signals) and its timers as deadlines that bound the wait. The first
//! design registered that epoll fd with a current-thread tokio runtime (`AsyncFd`), and
//! at 1M connections over ~120 processes on two cores that cost a third of the setup
//! rate: every wakeup went through tokio's park/driver/select! (~6 µs of user CPU per
//! connection, most accepts being one per wakeup), three `epoll_wait`s instead of one,
//! tokio's blocking-pool threads for stdin/stdout (futex wakeups, and a shared fd table
//! that makes every socket syscall take file references), and, because the set was
//! itself watched by tokio's epoll, every `EPOLL_CTL_ADD` took the kernel's global
//! `epnested_mutex` for a loop check, contended across all workers. Measured against a
//! minimal C epoll program on the same box: 60 vs 42 µs of CPU per connection early in
//! the ramp. Connections are level-triggered: a read takes at most one buffer per event,
//! so a busy connection cannot starve the others and no ready list is needed.

pub(crate) mod client;
pub(crate) mod pace;
pub mod server;
pub(crate) mod shard_loop;
pub(crate) mod uring;

use std::{
    io::{self, Write},
    os::fd::{AsFd, BorrowedFd, OwnedFd},
    sync::{Arc, mpsc as std_mpsc},
};

use rustix::io::Errno;
use tokio::sync::mpsc;

use super::{
    config::ShardCommand,
    stats::report::WorkerReport,
    sys::{self, EPOLLIN, EPOLLOUT, Epoll, EventFd},
    tls::{
        failure::TlsFailure,
        session::{Input, TlsConn},
    },
    ws::Fragment,
};

/// Shared read buffer per shard: the largest loopback segment batch a read returns in
/// practice, so one read drains a typical burst.
pub(crate) const READ_BUF: usize = 64 * 1024;

/// The longest TLS record on the wire (16 KiB of data plus TLS 1.2's largest overhead
/// and the header): a TLS connection's read leaves this much of [`READ_BUF`] free, so
/// its plaintext, with the tail of a record a previous read kept, fits the buffer.
pub(crate) const TLS_RECORD_MAX: usize = 16_384 + 2_048 + 5;

/// How much one read takes on a connection.
pub(crate) fn read_len(tls: bool) -> usize {
    if tls {
        READ_BUF - TLS_RECORD_MAX
    } else {
        READ_BUF
    }
}

/// How often a shard reports (if anything changed). The lab polls twice a second; 250 ms
/// keeps the supervisor's view at most a quarter second old. Idle shards send nothing.
/// In monotonic ns: the engine loop's tick deadline.
pub(crate) const REPORT_EVERY_NS: u64 = 250_000_000;

/// Unsent output past this is a peer not reading: close it rather than buffer without bound.
pub(crate) const MAX_PENDING_OUT: usize = 4 * 1024 * 1024;

/// A slab of connection states. Tokens carry the slot index (low 32 bits) and a
/// generation (high 32 bits): a slot freed and reused within one epoll batch cannot receive
/// the old connection's events.
pub(crate) struct Slab<T> {
    slots: Vec<(u32, Option<T>)>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Slab<T> {
    pub(crate) fn with_capacity(n: usize) -> Slab<T> {
        Slab {
            slots: Vec::with_capacity(n),
            free: Vec::new(),
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[cfg(test)]
    pub(crate) fn insert(&mut self, v: T) -> u64 {
        self.insert_get(v).0
    }

    /// Inserts `v` and hands it back with its token (to register its fd under the token).
    pub(crate) fn insert_get(&mut self, v: T) -> (u64, &mut T) {
        self.len += 1;
        let i = match self.free.pop() {
            Some(i) => {
                let slot = &mut self.slots[i as usize];
                slot.0 = slot.0.wrapping_add(1);
                i
            }
            None => {
                self.slots.push((0, None));
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[i as usize];
        (token(i, slot.0), slot.1.insert(v))
    }

    pub(crate) fn get_mut(&mut self, tok: u64) -> Option<&mut T> {
        let (i, g) = untoken(tok);
        match self.slots.get_mut(i as usize) {
            Some((gen_, Some(v))) if *gen_ == g => Some(v),
            _ => None,
        }
    }

    pub(crate) fn remove(&mut self, tok: u64) -> Option<T> {
        let (i, g) = untoken(tok);
        match self.slots.get_mut(i as usize) {
            Some((gen_, slot @ Some(_))) if *gen_ == g => {
                self.len -= 1;
                self.free.push(i);
                slot.take()
            }
            _ => None,
        }
    }

    /// Token of every occupied slot at or after `from`, up to `max` of them, and where to
    /// continue (for work spread over several loop turns, like a push).
    pub(crate) fn tokens_from(&self, from: usize, max: usize) -> (Vec<u64>, usize) {
        let mut out = Vec::with_capacity(max.min(self.len));
        let mut i = from;
        while i < self.slots.len() && out.len() < max {
            if let (g, Some(_)) = &self.slots[i] {
                out.push(token(i as u32, *g));
            }
            i += 1;
        }
        (out, i)
    }

    /// The token of slot `i` if it holds something of a generation whose low bits (under
    /// `mask`) are `gen_low`: how a completion that carries fewer generation bits than a
    /// token finds its entry (io_uring's user data also names the operation).
    pub(crate) fn token_masked(&self, i: u32, gen_low: u32, mask: u32) -> Option<u64> {
        match self.slots.get(i as usize) {
            Some((g, Some(_))) if g & mask == gen_low => Some(token(i, *g)),
            _ => None,
        }
    }

    /// The token of slot `i` if it holds something.
    pub(crate) fn token_at(&self, i: usize) -> Option<u64> {
        match self.slots.get(i) {
            Some((g, Some(_))) => Some(token(i as u32, *g)),
            _ => None,
        }
    }

    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }
}

/// Listener and control tokens live above every slab token (slot indices stay < 2^32 - 2^16).
pub(crate) const LISTENER_BASE: u64 = u64::MAX - (1 << 16);

/// The token of the shard's command source in its epoll set (above every listener token:
/// a port range has at most 65,535 ports).
pub(crate) const COMMAND_TOKEN: u64 = u64::MAX;

fn token(i: u32, g: u32) -> u64 {
    (u64::from(g) << 32) | u64::from(i)
}

fn untoken(t: u64) -> (u32, u32) {
    (t as u32, (t >> 32) as u32)
}

/// Per-connection heap, present only while needed.
#[derive(Default)]
pub(crate) struct Spill {
    /// Received bytes not yet forming a complete frame or handshake head.
    pub inbuf: Vec<u8>,
    /// Bytes accepted for sending that the socket did not take yet.
    pub out: Vec<u8>,
    pub out_off: usize,
    /// A fragmented WebSocket message being reassembled.
    pub frag: Option<Box<Fragment>>,
    /// TLS: the start of a record the last read cut (ciphertext).
    pub tls_in: Vec<u8>,
}

impl Spill {
    pub(crate) fn is_empty(&self) -> bool {
        self.inbuf.is_empty()
            && self.out_off >= self.out.len()
            && self.frag.is_none()
            && self.tls_in.is_empty()
    }

    pub(crate) fn has_out(&self) -> bool {
        self.out_off < self.out.len()
    }
}

/// The input a previous read left, taken out of `spill` for the next parse: the bytes
/// not yet a whole frame or head, and a fragmented message.
pub(crate) fn take_input(spill: &mut Option<Box<Spill>>) -> (Vec<u8>, Option<Box<Fragment>>) {
    let inbuf = spill
        .as_mut()
        .map(|s| std::mem::take(&mut s.inbuf))
        .unwrap_or_default();
    let frag = spill.as_mut().and_then(|s| s.frag.take());
    (inbuf, frag)
}

/// What to parse after reading `fresh`: `fresh` itself (no copy, the common case), or
/// `fresh` appended to the input a previous read left.
pub(crate) fn joined<'a>(inbuf: &'a mut Vec<u8>, fresh: &'a mut [u8]) -> &'a mut [u8] {
    if inbuf.is_empty() {
        fresh
    } else {
        inbuf.extend_from_slice(fresh);
        inbuf
    }
}

/// Keeps for the next read what the parse of [`joined`]`(inbuf, fresh)` did not use
/// (from byte `used` on), and the fragmented message.
pub(crate) fn keep_input(
    spill: &mut Option<Box<Spill>>,
    mut inbuf: Vec<u8>,
    fresh: &[u8],
    used: usize,
    frag: Option<Box<Fragment>>,
) {
    let s = spill.get_or_insert_with(Box::default);
    if inbuf.is_empty() {
        s.inbuf.extend_from_slice(&fresh[used..]);
    } else {
        inbuf.drain(..used);
        s.inbuf = inbuf;
    }
    s.frag = frag;
}

/// Drops the spill if it holds nothing, so idle connections return to zero heap.
pub(crate) fn shrink(spill: &mut Option<Box<Spill>>) {
    if spill.as_ref().is_some_and(|s| s.is_empty()) {
        *spill = None;
    }
}

/// Decrypts what a read left in `buf[..n]`, after the record tail an earlier read kept:
/// the plaintext is then `buf[..m]` (m returned), the records this side must send
/// (handshake, alerts) are in `wire`, and a cut record's start waits in the spill.
pub(crate) fn tls_read(
    tls: &mut TlsConn,
    spill: &mut Option<Box<Spill>>,
    buf: &mut [u8],
    n: usize,
    plain: &mut Vec<u8>,
    wire: &mut Vec<u8>,
) -> Result<(usize, Input), TlsFailure> {
    plain.clear();
    let mut tail = spill
        .as_mut()
        .map(|s| std::mem::take(&mut s.tls_in))
        .unwrap_or_default();
    let input = if tail.is_empty() {
        let i = tls.input(&mut buf[..n], plain, wire)?;
        if i.consumed < n {
            spill
                .get_or_insert_with(Box::default)
                .tls_in
                .extend_from_slice(&buf[i.consumed..n]);
        }
        i
    } else {
        tail.extend_from_slice(&buf[..n]);
        let i = tls.input(&mut tail, plain, wire)?;
        tail.drain(..i.consumed);
        if !tail.is_empty() {
            spill.get_or_insert_with(Box::default).tls_in = tail;
        }
        i
    };
    let m = plain.len();
    // Bounded by `read_len`: a record tail and one read's worth.
    let dst = buf
        .get_mut(..m)
        .ok_or_else(|| TlsFailure::Local(format!("{m} bytes of plaintext in one read")))?;
    dst.copy_from_slice(plain);
    shrink(spill);
    Ok((m, input))
}

/// [`send`] through the connection's TLS session when it has one: `bytes` sealed into
/// `wire` (a shard's scratch) first.
pub(crate) fn send_sealed(
    fd: BorrowedFd<'_>,
    tls: Option<&mut TlsConn>,
    wire: &mut Vec<u8>,
    spill: &mut Option<Box<Spill>>,
    bytes: &[u8],
    written: &mut u64,
) -> io::Result<Sent> {
    match tls {
        None => send(fd, spill, bytes, written),
        Some(t) => {
            wire.clear();
            t.seal(bytes, wire)
                .map_err(|e| io::Error::other(e.to_string()))?;
            send(fd, spill, wire, written)
        }
    }
}

/// [`send_before_close`] through the TLS session when there is one: `bytes` sealed and
/// the session's close_notify after them, in the same segment as the FIN.
pub(crate) fn send_sealed_before_close(
    fd: BorrowedFd<'_>,
    tls: Option<&mut TlsConn>,
    wire: &mut Vec<u8>,
    spill: &Option<Box<Spill>>,
    bytes: &[u8],
    written: &mut u64,
) {
    match tls {
        None => send_before_close(fd, spill, bytes, written),
        Some(t) => {
            wire.clear();
            if t.handshaking() || (!bytes.is_empty() && t.seal(bytes, wire).is_err()) {
                return;
            }
            t.close_notify(wire);
            send_before_close(fd, spill, wire, written);
        }
    }
}

/// How writing went.
pub(crate) enum Sent {
    /// Everything is in the socket.
    All,
    /// Some is queued in the spill; the caller watches EPOLLOUT.
    Queued,
}

/// Writes `bytes` after anything already queued; queues what the socket does not take.
/// Returns the bytes written now; an error is a broken connection.
pub(crate) fn send(
    fd: BorrowedFd<'_>,
    spill: &mut Option<Box<Spill>>,
    bytes: &[u8],
    written: &mut u64,
) -> io::Result<Sent> {
    if let Some(s) = spill.as_mut().filter(|s| s.has_out()) {
        if s.out.len() - s.out_off + bytes.len() > MAX_PENDING_OUT {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "peer not reading: output queue full",
            ));
        }
        s.out.extend_from_slice(bytes);
        return Ok(Sent::Queued);
    }
    let n = match sys::write(fd, bytes) {
        Ok(n) => n,
        Err(e) if sys::would_block(&e) => 0,
        Err(e) => return Err(e),
    };
    *written += n as u64;
    if n == bytes.len() {
        return Ok(Sent::All);
    }
    let s = spill.get_or_insert_with(Box::default);
    s.out.clear();
    s.out_off = 0;
    s.out.extend_from_slice(&bytes[n..]);
    Ok(Sent::Queued)
}

/// A goodbye (a WebSocket close frame) written just before the socket is closed, in one
/// segment with the FIN ([`sys::write_before_close`]). Best effort: behind queued output
/// it is dropped, as the close discards that output too.
pub(crate) fn send_before_close(
    fd: BorrowedFd<'_>,
    spill: &Option<Box<Spill>>,
    bytes: &[u8],
    written: &mut u64,
) {
    if spill.as_ref().is_some_and(|s| s.has_out()) {
        return;
    }
    if let Ok(n) = sys::write_before_close(fd, bytes) {
        *written += n as u64;
    }
}

/// Flushes queued output on EPOLLOUT. `Ok(true)`: all sent.
pub(crate) fn flush(
    fd: BorrowedFd<'_>,
    spill: &mut Option<Box<Spill>>,
    written: &mut u64,
) -> io::Result<bool> {
    let Some(s) = spill.as_mut() else {
        return Ok(true);
    };
    while s.has_out() {
        match sys::write(fd, &s.out[s.out_off..]) {
            Ok(n) => {
                s.out_off += n;
                *written += n as u64;
            }
            Err(e) if sys::would_block(&e) => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    s.out.clear();
    s.out_off = 0;
    shrink(spill);
    Ok(true)
}

/// Interest for a connection: reading while nothing is queued; only writing while output is
/// queued (so a peer that does not read stops us reading from it: backpressure).
pub(crate) fn interest(spill: &Option<Box<Spill>>) -> u32 {
    if spill.as_ref().is_some_and(|s| s.has_out()) {
        EPOLLOUT
    } else {
        EPOLLIN
    }
}

/// Re-registers `fd` if its interest changed.
pub(crate) fn rearm(
    ep: &Epoll,
    fd: &OwnedFd,
    tok: u64,
    before: u32,
    spill: &Option<Box<Spill>>,
) -> io::Result<()> {
    let now = interest(spill);
    if now != before {
        ep.modify(fd.as_fd(), now, tok)
    } else {
        Ok(())
    }
}

/// What the supervisor hears from its shards.
#[derive(Debug)]
pub(crate) enum ShardEvent {
    Report(Box<WorkerReport>),
    /// The shard ended (thread returned, or worker process exited), and why.
    Exited {
        shard: u32,
        why: String,
    },
}

/// Where a shard sends its reports.
pub(crate) enum Sink {
    /// A thread shard: straight to the supervisor.
    Channel(mpsc::UnboundedSender<ShardEvent>),
    /// A worker process: JSON lines on stdout, a pipe the supervisor reads. The write
    /// blocks if the supervisor falls a pipe's worth (64 KiB) behind, which pauses the
    /// shard rather than losing reports.
    Stdout(io::Stdout),
}

impl Sink {
    pub(crate) fn send(&mut self, r: WorkerReport) -> io::Result<()> {
        match self {
            Sink::Channel(tx) => tx
                .send(ShardEvent::Report(Box::new(r)))
                .map_err(|_| io::Error::other("supervisor gone")),
            Sink::Stdout(out) => {
                let mut line = serde_json::to_vec(&r).map_err(io::Error::other)?;
                line.push(b'\n');
                let mut out = out.lock();
                out.write_all(&line)?;
                out.flush()
            }
        }
    }
}

/// Where a shard's commands come from. Its fd sits in the shard's epoll set under
/// [`COMMAND_TOKEN`]; the shard also drains it at every report tick, which is how a
/// closed channel is noticed.
pub(crate) enum Commands {
    /// A thread shard: a channel, and an eventfd the sender signals after each command.
    Channel {
        rx: std_mpsc::Receiver<ShardCommand>,
        wake: Arc<EventFd>,
    },
    /// A worker process: JSON lines on stdin (a pipe, non-blocking), and the bytes of a
    /// line not yet complete.
    Stdin { pending: Vec<u8> },
}

impl Commands {
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Commands::Channel { wake, .. } => wake.as_fd(),
            Commands::Stdin { .. } => rustix::stdio::stdin(),
        }
    }

    /// Appends every command that arrived to `out`; a supervisor that is gone (channel
    /// closed, stdin at EOF or broken) reads as `Stop`.
    pub(crate) fn drain(&mut self, out: &mut Vec<ShardCommand>) {
        match self {
            Commands::Channel { rx, wake } => {
                wake.drain();
                loop {
                    match rx.try_recv() {
                        Ok(c) => out.push(c),
                        Err(std_mpsc::TryRecvError::Empty) => break,
                        Err(std_mpsc::TryRecvError::Disconnected) => {
                            out.push(ShardCommand::Stop);
                            break;
                        }
                    }
                }
            }
            Commands::Stdin { pending } => {
                let mut buf = [0u8; 4096];
                let mut gone = false;
                loop {
                    match sys::read(rustix::stdio::stdin(), &mut buf) {
                        Ok(0) => {
                            gone = true;
                            break;
                        }
                        Ok(n) => pending.extend_from_slice(&buf[..n]),
                        Err(e) if sys::would_block(&e) => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => {
                            gone = true;
                            break;
                        }
                    }
                }
                let mut used = 0;
                while let Some(nl) = pending[used..].iter().position(|&b| b == b'\n') {
                    let line = &pending[used..used + nl];
                    used += nl + 1;
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    match serde_json::from_slice::<ShardCommand>(line) {
                        Ok(c) => out.push(c),
                        Err(e) => eprintln!(
                            "c1m worker: bad command ({e}): {:.200}",
                            String::from_utf8_lossy(line)
                        ),
                    }
                }
                pending.drain(..used);
                if gone {
                    out.push(ShardCommand::Stop);
                }
            }
        }
    }
}

/// A shard's link to its supervisor.
pub(crate) struct ShardIo {
    pub commands: Commands,
    pub sink: Sink,
}

/// The errno of a failed connect/accept, as a failure cause.
pub(crate) fn failure_of(e: &io::Error, f: &mut super::stats::counters::Failures) {
    match sys::errno(e) {
        Some(Errno::CONNREFUSED) => f.refused += 1,
        Some(Errno::ADDRNOTAVAIL | Errno::ADDRINUSE) => f.addr_not_avail += 1,
        Some(Errno::TIMEDOUT) => f.timed_out += 1,
        Some(Errno::MFILE | Errno::NFILE) => f.emfile += 1,
        Some(Errno::CONNRESET | Errno::PIPE) => f.reset += 1,
        Some(Errno::NETUNREACH | Errno::HOSTUNREACH) => f.unreachable += 1,
        _ => f.other += 1,
    }
}

/// The errno of a failed read/write on an open connection, as a close cause.
pub(crate) fn closed_by(e: &io::Error, c: &mut super::stats::counters::Closed) {
    match sys::errno(e) {
        Some(Errno::CONNRESET | Errno::PIPE | Errno::TIMEDOUT) => c.reset += 1,
        _ => c.error += 1,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn slab_generations_reject_stale_tokens() {
        let mut s = Slab::with_capacity(4);
        let a = s.insert('a');
        assert_eq!(s.remove(a), Some('a'));
        let b = s.insert('b');
        assert_ne!(a, b);
        assert_eq!(s.get_mut(a), None);
        assert_eq!(s.get_mut(b), Some(&mut 'b'));
        let (toks, next) = s.tokens_from(0, 10);
        assert_eq!((toks, next, s.len()), (vec![b], 1, 1));
    }
}
