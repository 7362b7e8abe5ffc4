//! A child's output kept in the run folder at a bounded size: the first [`HEAD`] bytes as
//! they come, the last [`TAIL`] bytes, and one line between them saying how much was cut.
//! A foreign server may print without end: a test server wrote 200 MB to each of its two
//! logs, which the run folder then held. The head keeps how it started (its banner, the
//! first error), the tail how it ended (what the stall evidence and the error messages
//! quote). The file is rewritten at most every [`FLUSH_EVERY`], so it is readable during
//! the run.

use std::{
    collections::VecDeque,
    fs::File,
    io::{self, Seek, SeekFrom, Write},
    os::fd::{AsFd, OwnedFd},
    path::Path,
    sync::mpsc,
    time::{Duration, Instant},
};

use rustix::event::{PollFd, PollFlags, Timespec};

/// Bytes kept from the start of the output.
pub(crate) const HEAD: usize = 1 << 20;
/// Bytes kept from the end of the output.
pub(crate) const TAIL: usize = 1 << 20;
/// How stale the tail on disk may be while output keeps coming.
const FLUSH_EVERY: Duration = Duration::from_millis(500);

/// A log being written by a reader thread; the write end goes to the child.
pub(crate) struct CappedLog {
    done: mpsc::Receiver<()>,
}

impl CappedLog {
    /// Creates `path` and a pipe into it: give the returned fd to the child as its
    /// stdout or stderr (it is close-on-exec here, so no other child inherits it).
    pub(crate) fn create(path: &Path) -> io::Result<(CappedLog, OwnedFd)> {
        let file = File::create(path)?;
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let (tx, done) = mpsc::channel();
        std::thread::Builder::new()
            .name("c1m-log".into())
            .spawn(move || {
                let _ = copy(read, file);
                let _ = tx.send(());
            })?;
        Ok((CappedLog { done }, write))
    }

    /// Waits (at most `limit`) until every writer has closed its end and the file is
    /// final; a writer that outlives the wait leaves a tail at most [`FLUSH_EVERY`] old.
    pub(crate) fn finish(&self, limit: Duration) {
        let _ = self.done.recv_timeout(limit);
    }
}

/// What has been read and where it stands.
struct Capture {
    file: File,
    head: usize,
    tail: VecDeque<u8>,
    total: u64,
    dirty: bool,
    flushed: Instant,
}

impl Capture {
    fn take(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        self.total += bytes.len() as u64;
        if self.head < HEAD {
            let n = bytes.len().min(HEAD - self.head);
            self.file.write_all(&bytes[..n])?;
            self.head += n;
            bytes = &bytes[n..];
        }
        if !bytes.is_empty() {
            let over = (self.tail.len() + bytes.len()).saturating_sub(TAIL);
            let from_old = over.min(self.tail.len());
            self.tail.drain(..from_old);
            bytes = &bytes[over - from_old..];
            self.tail.extend(bytes);
            self.dirty = true;
        }
        Ok(())
    }

    /// Head, the cut line if anything was cut, and the tail, on disk.
    fn flush(&mut self) -> io::Result<()> {
        if !self.dirty {
            return Ok(());
        }
        let cut = self.total - self.head as u64 - self.tail.len() as u64;
        self.file.seek(SeekFrom::Start(self.head as u64))?;
        if cut > 0 {
            write!(
                self.file,
                "\n[c1m: {cut} bytes cut here; this log keeps the first {HEAD} and the last {TAIL} bytes of {}]\n",
                self.total
            )?;
        }
        let (a, b) = self.tail.as_slices();
        self.file.write_all(a)?;
        self.file.write_all(b)?;
        let end = self.file.stream_position()?;
        self.file.set_len(end)?;
        self.dirty = false;
        self.flushed = Instant::now();
        Ok(())
    }
}

/// Copies the pipe into the file until every writer has closed it.
fn copy(read: OwnedFd, file: File) -> io::Result<()> {
    let mut c = Capture {
        file,
        head: 0,
        tail: VecDeque::new(),
        total: 0,
        dirty: false,
        flushed: Instant::now(),
    };
    let mut buf = vec![0u8; 64 * 1024];
    let wait = Timespec {
        tv_sec: 0,
        tv_nsec: FLUSH_EVERY.as_nanos() as i64,
    };
    loop {
        let mut fds = [PollFd::new(&read, PollFlags::IN)];
        let ready = match rustix::event::poll(&mut fds, Some(&wait)) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        if ready > 0 {
            let n = match rustix::io::read(read.as_fd(), &mut buf) {
                Ok(n) => n,
                Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => continue,
                Err(e) => return Err(e.into()),
            };
            if n == 0 {
                break;
            }
            c.take(&buf[..n])?;
        }
        if c.dirty && (ready == 0 || c.flushed.elapsed() >= FLUSH_EVERY) {
            c.flush()?;
        }
    }
    c.flush()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn a_long_output_keeps_head_and_tail_and_says_what_was_cut() {
        let dir = crate::report::fixture::test_dir("capped-log");
        let path = dir.join("out.log");
        let (log, fd) = CappedLog::create(&path).unwrap();
        let mut w = File::from(fd);
        let line = |i: usize| format!("line {i:>10}\n");
        let lines = 3 * (HEAD + TAIL) / line(0).len();
        for i in 0..lines {
            w.write_all(line(i).as_bytes()).unwrap();
        }
        drop(w);
        log.finish(Duration::from_secs(30));
        let text = std::fs::read_to_string(&path).unwrap();
        let total = lines * line(0).len();
        assert!(text.starts_with(&line(0)));
        assert!(text.ends_with(&line(lines - 1)));
        let cut = total - HEAD - TAIL;
        assert!(
            text.contains(&format!("[c1m: {cut} bytes cut here;")),
            "{}",
            &text[HEAD..HEAD + 200]
        );
        assert!(text.len() < HEAD + TAIL + 200);

        // Short output: the file is the output.
        let short = dir.join("short.log");
        let (log, fd) = CappedLog::create(&short).unwrap();
        let mut w = File::from(fd);
        w.write_all(b"hello\n").unwrap();
        drop(w);
        log.finish(Duration::from_secs(30));
        assert_eq!(std::fs::read_to_string(&short).unwrap(), "hello\n");
    }
}
