//! The epoll shard's push frames, [`PUSH_SUBMIT`] to an `io_uring_enter` instead of a
//! `write` each. A push writes one small frame to every connection: the C programs c1m is
//! measured against (and this shard before) pay a syscall per frame, on a path that is
//! CPU-bound at 1M on this box's two cores.
//!
//! Each send is `MSG_DONTWAIT`: the kernel issues it inline at the submit and posts its
//! completion before `io_uring_enter` returns, so a batch is finished when its submit is,
//! and a connection's stream order is the epoll shard's as before. A send the socket did
//! not take whole (a full send buffer) or one that failed is handed back as a
//! [`PushLeft`] for the shared code's usual path (the rest into the spill with `EPOLLOUT`,
//! or the close). Frames go here only on a connection with nothing queued and no TLS;
//! the tokio server's push writer sends through one too.
//! Without io_uring (disabled by sysctl, an old kernel) every frame is a `write`, as before.

use std::{io, os::fd::AsRawFd};

use io_uring::{IoUring, opcode, types};

use super::{
    proto::PushFrame,
    state::{PUSH_SUBMIT, PushLeft},
};

/// A frame's bytes stay here until its completion (the ring reads them at the submit).
type Frames = [PushFrame; PUSH_SUBMIT];

/// The shard's push ring, made at its first push.
pub(crate) struct PushBatch {
    ring: Ring,
    /// The connections of the frames held: entry `i` is `frames[i]`.
    held: Vec<u64>,
}

/// A ring and the frames its sends point at, on the heap only once a shard pushes (3.3 KB).
struct Sending {
    ring: IoUring,
    frames: Frames,
}

enum Ring {
    Untried,
    Ready(Box<Sending>),
    /// No io_uring here, or it failed once: frames are written one by one.
    Unavailable,
}

impl Ring {
    /// The ring, made at the first call.
    fn ready(&mut self) -> Option<&mut Sending> {
        if let Ring::Untried = self {
            *self = match IoUring::builder()
                .setup_single_issuer()
                .setup_coop_taskrun()
                .build(PUSH_SUBMIT as u32)
                .or_else(|_| IoUring::new(PUSH_SUBMIT as u32))
            {
                Ok(ring) => Ring::Ready(Box::new(Sending {
                    ring,
                    frames: [[0; size_of::<PushFrame>()]; PUSH_SUBMIT],
                })),
                Err(_) => Ring::Unavailable,
            };
        }
        match self {
            Ring::Ready(r) => Some(r),
            _ => None,
        }
    }
}

impl Default for PushBatch {
    fn default() -> PushBatch {
        PushBatch {
            ring: Ring::Untried,
            held: Vec::new(),
        }
    }
}

impl PushBatch {
    /// Holds `frame` for `fd` (connection `tok`) until [`PushBatch::flush`]; gives it back
    /// when it must go by `write`: not `bare` (TLS, or output already queued), no ring, or
    /// a full batch.
    pub(crate) fn hold(
        &mut self,
        tok: u64,
        fd: &impl AsRawFd,
        bare: bool,
        frame: &PushFrame,
    ) -> bool {
        let i = self.held.len();
        if !bare || i >= PUSH_SUBMIT {
            return false;
        }
        let Some(Sending { ring, frames }) = self.ring.ready() else {
            return false;
        };
        frames[i] = *frame;
        let e = opcode::Send::new(
            types::Fd(fd.as_raw_fd()),
            frames[i].as_ptr(),
            frame.len() as u32,
        )
        .flags(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
        .build()
        .user_data(i as u64);
        // SAFETY: the entry points into `frames[i]`, on the heap and unchanged until `flush` has
        // reaped its completion (or, if that fails, never freed: see `flush`).
        if unsafe { ring.submission().push(&e) }.is_err() {
            // Never at fewer than PUSH_SUBMIT held (the queue's size): write it instead.
            return false;
        }
        self.held.push(tok);
        true
    }

    /// Sends the frames held, adding what the sockets took to `sent`; what a socket did not
    /// take whole, or refused, goes to `left`.
    pub(crate) fn flush(&mut self, sent: &mut u64, left: &mut Vec<PushLeft>) -> io::Result<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        let Ring::Ready(sending) = &mut self.ring else {
            self.held.clear();
            return Ok(());
        };
        let want = self.held.len();
        let (mut reaped, mut unusable) = (0, false);
        // Every send completes inline (MSG_DONTWAIT), so one enter does it; the loop
        // only covers an interrupted one.
        for _ in 0..16 {
            match sending.ring.submit_and_wait(want - reaped) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(self.broken(e)),
            }
            for c in sending.ring.completion() {
                reaped += 1;
                let Some((&tok, frame)) = usize::try_from(c.user_data())
                    .ok()
                    .and_then(|i| Some((self.held.get(i)?, sending.frames.get(i)?)))
                else {
                    continue;
                };
                match usize::try_from(c.result()) {
                    Ok(n) if n >= frame.len() => *sent += n as u64,
                    Ok(n) => {
                        *sent += n as u64;
                        left.push(PushLeft::Rest(tok, frame[n..].to_vec()));
                    }
                    Err(_) if c.result() == -libc::EAGAIN => {
                        left.push(PushLeft::Rest(tok, frame.to_vec()));
                    }
                    Err(_) if matches!(-c.result(), libc::EINVAL | libc::EOPNOTSUPP) => {
                        // A ring without the send operation (before Linux 5.6): the frame
                        // goes by `write`, and every later one.
                        unusable = true;
                        left.push(PushLeft::Rest(tok, frame.to_vec()));
                    }
                    Err(_) => left.push(PushLeft::Failed(
                        tok,
                        io::Error::from_raw_os_error(-c.result()),
                    )),
                }
            }
            if reaped >= want {
                self.held.clear();
                if unusable {
                    // Nothing in flight: every send was reaped.
                    self.ring = Ring::Unavailable;
                }
                return Ok(());
            }
        }
        Err(self.broken(io::Error::other(format!(
            "{} of {want} push sends did not complete",
            want - reaped
        ))))
    }

    /// The ring failed with sends maybe still in flight: the frames they point at are
    /// never freed, and no frame goes by the ring again.
    fn broken(&mut self, e: io::Error) -> io::Error {
        if let Ring::Ready(r) = std::mem::replace(&mut self.ring, Ring::Unavailable) {
            std::mem::forget(r);
        }
        self.held.clear();
        io::Error::new(e.kind(), format!("io_uring_enter (push): {e}"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use std::{
        io::{Read, Write},
        net::{TcpListener, TcpStream},
        os::fd::AsFd,
    };

    use super::*;
    use crate::workload::sys;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        (server, client)
    }

    fn frame(b: u8) -> PushFrame {
        [b; size_of::<PushFrame>()]
    }

    #[test]
    fn held_frames_arrive_whole_in_order_and_are_counted() {
        let (server, mut client) = pair();
        let (mut batch, mut sent, mut left) = (PushBatch::default(), 0, Vec::new());
        assert!(batch.hold(7, &server, true, &frame(1)));
        assert!(batch.hold(7, &server, true, &frame(2)));
        batch.flush(&mut sent, &mut left).unwrap();
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(sent, 2 * size_of::<PushFrame>() as u64);
        let mut got = [0u8; 2 * size_of::<PushFrame>()];
        client.read_exact(&mut got).unwrap();
        assert_eq!(got[..size_of::<PushFrame>()], frame(1));
        assert_eq!(got[size_of::<PushFrame>()..], frame(2));
    }

    #[test]
    fn a_frame_behind_tls_or_queued_output_and_a_full_batch_go_by_write() {
        let (server, _client) = pair();
        let mut batch = PushBatch::default();
        assert!(!batch.hold(1, &server, false, &frame(1)), "TLS or queued");
        for _ in 0..PUSH_SUBMIT {
            assert!(batch.hold(1, &server, true, &frame(1)));
        }
        assert!(!batch.hold(1, &server, true, &frame(1)), "full");
    }

    /// No io_uring (`kernel.io_uring_disabled`, a seccomp filter, an old kernel: the
    /// ring's setup failed): every frame is given back for `write`, a flush does nothing.
    /// The sysctl is box-wide, so the suite cannot switch it off under a running server.
    #[test]
    fn without_io_uring_every_frame_goes_by_write() {
        let (server, _client) = pair();
        let mut batch = PushBatch {
            ring: Ring::Unavailable,
            held: Vec::new(),
        };
        assert!(!batch.hold(1, &server, true, &frame(1)));
        let (mut sent, mut left) = (0, Vec::new());
        batch.flush(&mut sent, &mut left).unwrap();
        assert_eq!((sent, left.len()), (0, 0));
    }

    /// A socket whose send buffer is full takes none of the frame: it comes back whole,
    /// and once the peer has read, the usual write sends it; a reset peer's send fails.
    #[test]
    fn a_full_socket_gives_the_frame_back_and_a_reset_one_fails() {
        let (mut server, client) = pair();
        let filler = [0u8; 65536];
        let mut filled = 0usize;
        loop {
            match server.write(&filler) {
                Ok(n) => filled += n,
                Err(e) if sys::would_block(&e) => break,
                Err(e) => panic!("{e}"),
            }
        }
        let (mut batch, mut sent, mut left) = (PushBatch::default(), 0, Vec::new());
        assert!(batch.hold(9, &server, true, &frame(3)));
        batch.flush(&mut sent, &mut left).unwrap();
        let rest = match left.pop() {
            Some(PushLeft::Rest(9, rest)) => rest,
            other => panic!("{other:?} ({sent} bytes sent)"),
        };
        assert!(left.is_empty());
        assert_eq!(sent as usize + rest.len(), size_of::<PushFrame>());
        assert_eq!(rest[..], frame(3)[sent as usize..]);

        // The peer resets (unread data at its close): the next send fails.
        drop(client);
        let mut reset = false;
        for _ in 0..50 {
            let mut buf = [0u8; 1];
            if matches!(server.read(&mut buf), Err(e) if !sys::would_block(&e)) {
                reset = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(
            reset,
            "the peer's close reset the connection ({filled} bytes unread)"
        );
        let (mut sent, mut left) = (0, Vec::new());
        assert!(batch.hold(9, &server.as_fd(), true, &frame(4)));
        batch.flush(&mut sent, &mut left).unwrap();
        assert!(
            matches!(left.as_slice(), [PushLeft::Failed(9, _)]),
            "{left:?}"
        );
    }
}
