//! A tokio client connection's goodbye (a teardown or a churn): one of the `--in-flight`
//! slots, then, after our close frame, the wait for the server to close first (RFC 6455
//! §7.1.1), reading what it wrote before it read our close: the server's messages among
//! it are counted (`Proto::closing_input`), over wss too, so the server's `sent` is the
//! client's `received`.

use std::{
    future::poll_fn,
    io,
    pin::pin,
    task::{Poll, ready},
};

use tokio::{io::ReadBuf, sync::SemaphorePermit};

use super::Shared;
use crate::workload::{engine::client::proto::ConnProto, tokio_engine::stream::Stream};

/// One of the `--in-flight` slots a goodbye holds while it waits for its server, as in the
/// epoll engine (its `to_close` says why); None once the teardown stalled.
pub(super) async fn goodbye_slot(sh: &Shared) -> Option<SemaphorePermit<'_>> {
    let mut stalled = pin!(sh.close_stalled.notified());
    stalled.as_mut().enable();
    if sh.stalled.get() {
        return None;
    }
    tokio::select! {
        biased;
        () = &mut stalled => None,
        p = sh.slots.acquire() => p.ok(),
    }
}

/// After our close frame on `conn`: reads until the server ends the stream (its FIN, or
/// under TLS its close_notify), or the teardown stalled (`Shared::close_stalled`).
/// `frames` is the input the last read left unparsed; what comes after it is parsed
/// with it. Under TLS the reads go through the session, as before our close: the
/// server's messages on their way when our close frame left are in records only the
/// session opens, and reading the raw socket instead left them uncounted.
pub(super) async fn await_server_close(
    sh: &Shared,
    s: &mut Stream,
    conn: &mut ConnProto,
    mut frames: Vec<u8>,
) {
    let mut stalled = pin!(sh.close_stalled.notified());
    stalled.as_mut().enable();
    if sh.stalled.get() {
        return;
    }
    // Small: the future is on the heap of each connection saying goodbye.
    let mut buf = [0u8; 64];
    let mut frag = None;
    loop {
        let read = tokio::select! {
            biased;
            () = &mut stalled => return,
            r = poll_fn(|cx| {
                let mut rb = ReadBuf::new(&mut buf);
                ready!(s.poll_read(cx, &mut rb))?;
                Poll::Ready(io::Result::Ok(rb.filled().len()))
            }) => r,
        };
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut p = sh.p.borrow_mut();
        p.c.bytes_in += n as u64;
        frames.extend_from_slice(&buf[..n]);
        let used = p.closing_input(conn, &mut frames, &mut frag);
        frames.drain(..used);
    }
}
