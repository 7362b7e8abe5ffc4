//! A connection's output under io_uring: at most one send in flight, over bytes nothing
//! touches until its completion, and what was written meanwhile queued behind it. An idle
//! connection holds none (`None`: no send in flight), as the epoll engine's [`Spill`].
//!
//! [`Spill`]: crate::workload::engine::Spill

use crate::workload::engine::{MAX_PENDING_OUT, server::proto::Action};

/// The bytes of the send in flight and what waits behind them.
#[derive(Default)]
pub(crate) struct OutQ {
    /// What the send in flight points at: never changed until its completion.
    busy: Vec<u8>,
    /// How much of `busy` completions reported sent.
    done: usize,
    /// Written while `busy` was in flight.
    next: Vec<u8>,
    /// The close the connection's input asked for, once all is out (its last write
    /// queued behind a send); counted then, so a close for another cause meanwhile
    /// (a failed send, the shard's stop) is the only one counted.
    close_after: Option<Action>,
}

/// A send to submit: `len` bytes at `ptr`, inside the connection's [`OutQ`], valid until
/// that send's completion (the queue keeps them: see [`OutQ::busy`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ToSend {
    pub ptr: *const u8,
    pub len: u32,
}

/// The output queue is past [`MAX_PENDING_OUT`]: a peer that does not read.
#[derive(Debug)]
pub(crate) struct Full;

impl OutQ {
    /// Bytes queued behind the send in flight.
    pub(crate) fn queued(&self) -> usize {
        self.next.len()
    }

    /// Whether the connection is to close once all is out ([`close_when_out`]).
    pub(crate) fn closing(&self) -> bool {
        self.close_after.is_some()
    }

    fn to_send(&self) -> ToSend {
        let rest = &self.busy[self.done..];
        ToSend {
            ptr: rest.as_ptr(),
            // Bounded by MAX_PENDING_OUT (4 MiB) plus one write.
            len: rest.len().min(u32::MAX as usize) as u32,
        }
    }
}

/// Writes `bytes` after anything in flight: a send to submit now if none is in flight,
/// else queued behind it.
pub(crate) fn write(out: &mut Option<Box<OutQ>>, bytes: &[u8]) -> Result<Option<ToSend>, Full> {
    match out {
        Some(q) => {
            if q.next.len() + bytes.len() > MAX_PENDING_OUT {
                return Err(Full);
            }
            q.next.extend_from_slice(bytes);
            Ok(None)
        }
        None => {
            let q = out.insert(Box::new(OutQ {
                busy: bytes.to_vec(),
                done: 0,
                next: Vec::new(),
                close_after: None,
            }));
            Ok(Some(q.to_send()))
        }
    }
}

/// Marks the connection to close as `action` asks once its output is out; gives the
/// action back with nothing in flight (nothing to wait for: close now).
pub(crate) fn close_when_out(out: &mut Option<Box<OutQ>>, action: Action) -> Result<(), Action> {
    match out.as_mut() {
        Some(q) => {
            q.close_after = Some(action);
            Ok(())
        }
        None => Err(action),
    }
}

/// [`completed`], and the close asked for if that was the last of the output.
pub(crate) fn completed_closing(
    out: &mut Option<Box<OutQ>>,
    sent: usize,
) -> (Option<ToSend>, Option<Action>) {
    let close = out.as_mut().and_then(|q| q.close_after.take());
    let next = completed(out, sent);
    match (next, close) {
        (Some(n), Some(a)) => {
            if let Some(q) = out.as_mut() {
                q.close_after = Some(a);
            }
            (Some(n), None)
        }
        (next, close) => (next, close),
    }
}

/// The send in flight completed with `sent` bytes: the next send (the rest of a short
/// one, or what queued behind it), or `None` when all is out (the queue is dropped).
pub(crate) fn completed(out: &mut Option<Box<OutQ>>, sent: usize) -> Option<ToSend> {
    let q = out.as_mut()?;
    q.done = (q.done + sent).min(q.busy.len());
    if q.done < q.busy.len() {
        return Some(q.to_send());
    }
    if q.next.is_empty() {
        *out = None;
        return None;
    }
    q.busy = std::mem::take(&mut q.next);
    q.done = 0;
    Some(q.to_send())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn one_send_in_flight_the_rest_queued_in_order() {
        let mut out = None;
        let first = write(&mut out, b"abc").unwrap().unwrap();
        assert_eq!(first.len, 3);
        assert!(write(&mut out, b"de").unwrap().is_none());
        assert!(write(&mut out, b"f").unwrap().is_none());
        // A short send: the rest of "abc" goes first.
        let rest = completed(&mut out, 1).unwrap();
        assert_eq!(rest.len, 2);
        // SAFETY (test): the queue holds these bytes until the next completion.
        assert_eq!(unsafe { std::slice::from_raw_parts(rest.ptr, 2) }, b"bc");
        let next = completed(&mut out, 2).unwrap();
        assert_eq!(unsafe { std::slice::from_raw_parts(next.ptr, 3) }, b"def");
        assert!(completed(&mut out, 3).is_none());
        assert!(out.is_none(), "all out: the connection holds no queue");
    }

    #[test]
    fn a_close_waits_for_what_is_in_flight_and_queued() {
        let mut out = None;
        assert_eq!(
            close_when_out(&mut out, Action::CloseProtocol),
            Err(Action::CloseProtocol),
            "nothing in flight: close at once"
        );
        write(&mut out, b"101").unwrap();
        write(&mut out, b"close").unwrap();
        assert_eq!(close_when_out(&mut out, Action::CloseProtocol), Ok(()));
        assert!(out.as_ref().unwrap().closing());
        let (next, close) = completed_closing(&mut out, 3);
        assert!(
            next.is_some() && close.is_none(),
            "the close frame goes next"
        );
        assert!(out.as_ref().unwrap().closing());
        let (next, close) = completed_closing(&mut out, 5);
        assert!(next.is_none());
        assert_eq!(close, Some(Action::CloseProtocol));
        assert!(out.is_none());
    }

    #[test]
    fn a_peer_that_does_not_read_fills_the_queue() {
        let mut out = None;
        write(&mut out, b"x").unwrap();
        let big = vec![0; MAX_PENDING_OUT];
        write(&mut out, &big).unwrap();
        assert!(write(&mut out, b"y").is_err());
    }
}
