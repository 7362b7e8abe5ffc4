//! A connection's byte stream in the tokio engine: plain TCP, or TLS over it through
//! tokio-rustls, as a tokio program writes wss (`TlsAcceptor::accept`,
//! `TlsConnector::connect`, then `AsyncRead`/`AsyncWrite` on the `TlsStream`).
//!
//! Unlike the epoll engine's unbuffered sessions, tokio-rustls keeps rustls's buffered
//! connection: each TLS connection owns rustls's record buffers for good once it has
//! read or written (the cost the idle-memory figure of a wss run shows). The session is
//! boxed, so a plain connection's task does not grow by a TLS session's size.
//!
//! Writes never wait here: [`Stream::try_write`] polls with a no-op waker (the task
//! waits for `writable` itself, as for plain TCP), and rustls keeps what it sealed but
//! the socket did not take ([`Stream::tls_pending`]) until [`Stream::try_flush`].
//! Byte counters count what crosses this type: ciphertext on TCP is not seen, so under
//! TLS the tokio engine counts plaintext bytes.

use std::{
    io::{self, Write},
    os::fd::AsFd,
    pin::Pin,
    task::{Context, Poll, Waker, ready},
};

use rustls::HandshakeKind;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
};
use tokio_rustls::TlsStream;

use crate::workload::{
    stats::counters::{TlsErrors, TlsHandshakes},
    sys,
    tls::failure::TlsFailure,
};

/// A connection's stream, either kind.
pub(crate) enum Stream {
    Tcp(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// Polls `f` once without a waker: the caller waits for readiness itself.
fn now<T>(f: impl FnOnce(&mut Context<'_>) -> Poll<io::Result<T>>) -> io::Result<T> {
    match f(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(r) => r,
        Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
    }
}

impl Stream {
    /// A finished TLS handshake's stream; counts it by kind.
    pub(crate) fn tls(t: impl Into<TlsStream<TcpStream>>, c: &mut TlsHandshakes) -> Stream {
        let t = t.into();
        match t.get_ref().1.handshake_kind() {
            Some(HandshakeKind::Resumed) => c.resumed += 1,
            _ => c.full += 1,
        }
        Stream::Tls(Box::new(t))
    }

    pub(crate) fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }

    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Tcp(s) => s,
            Stream::Tls(t) => t.get_ref().0,
        }
    }

    /// Reads what is there into `rb` (plaintext under TLS). An end without close_notify
    /// reads as the end, as on plain TCP (rustls calls it UnexpectedEof): the peer's
    /// goodbye is counted by what came before it, in both engines.
    pub(crate) fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        rb: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, rb),
            Stream::Tls(t) => match ready!(Pin::new(&mut **t).poll_read(cx, rb)) {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Poll::Ready(Ok(())),
                r => Poll::Ready(r),
            },
        }
    }

    /// Writes what the socket (or, under TLS, rustls's buffer) takes now; WouldBlock if
    /// nothing.
    pub(crate) fn try_write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.try_write(bytes),
            Stream::Tls(t) => now(|cx| Pin::new(&mut **t).poll_write(cx, bytes)),
        }
    }

    /// Records rustls sealed that the socket has not taken yet.
    pub(crate) fn tls_pending(&self) -> bool {
        match self {
            Stream::Tcp(_) => false,
            Stream::Tls(t) => t.get_ref().1.wants_write(),
        }
    }

    /// Writes the records rustls holds; true when none is left.
    pub(crate) fn try_flush(&mut self) -> io::Result<bool> {
        match self {
            Stream::Tcp(_) => Ok(true),
            Stream::Tls(t) => match now(|cx| Pin::new(&mut **t).poll_flush(cx)) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
                Err(e) => Err(e),
            },
        }
    }

    /// Flushes what rustls holds, then writes `bytes` (if any), waiting for the socket.
    pub(crate) fn poll_send(
        &mut self,
        cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, bytes),
            Stream::Tls(t) => {
                ready!(Pin::new(&mut **t).poll_flush(cx))?;
                if bytes.is_empty() {
                    return Poll::Ready(Ok(0));
                }
                Pin::new(&mut **t).poll_write(cx, bytes)
            }
        }
    }

    /// The last bytes this side sends, in one write: `bytes`, then under TLS a
    /// close_notify (a clean close). `fin`: the FIN follows at once, so it rides in the
    /// same segment (see `sys::write_before_close`). Returns how many of `bytes` went:
    /// under TLS all or none, as a record cut short is no message.
    pub(crate) fn write_last(&mut self, bytes: &[u8], fin: bool) -> io::Result<usize> {
        let send = |fd, b: &[u8]| {
            if fin {
                sys::write_before_close(fd, b)
            } else {
                sys::write(fd, b)
            }
        };
        let (tcp, conn) = match self {
            Stream::Tcp(s) => return send(s.as_fd(), bytes),
            Stream::Tls(t) => match &mut **t {
                TlsStream::Server(s) => {
                    let (tcp, c) = s.get_mut();
                    (&*tcp, seal_last(c, bytes))
                }
                TlsStream::Client(s) => {
                    let (tcp, c) = s.get_mut();
                    (&*tcp, seal_last(c, bytes))
                }
            },
        };
        let wire = conn?;
        let n = send(tcp.as_fd(), &wire)?;
        Ok(if n == wire.len() { bytes.len() } else { 0 })
    }
}

/// Everything the session still has to send, `bytes` sealed and a close_notify, as
/// ciphertext.
fn seal_last<D>(c: &mut rustls::ConnectionCommon<D>, bytes: &[u8]) -> io::Result<Vec<u8>> {
    if !bytes.is_empty() {
        c.writer().write_all(bytes)?;
    }
    c.send_close_notify();
    let mut wire = Vec::new();
    while c.wants_write() {
        c.write_tls(&mut wire)?;
    }
    Ok(wire)
}

/// The rustls error inside a tokio-rustls I/O error (it wraps them as InvalidData).
pub(crate) fn tls_error(e: &io::Error) -> Option<TlsFailure> {
    e.get_ref()?
        .downcast_ref::<rustls::Error>()
        .cloned()
        .map(TlsFailure::Rustls)
}

/// A failed handshake counted by its cause: rustls's, or, when the stream ended or broke
/// before rustls found anything wrong, truncated (as the epoll engine counts a read that
/// ends a handshake). Returns rustls's reason, for a first failure printed.
pub(crate) fn count_handshake_failure(e: &io::Error, c: &mut TlsErrors) -> Option<TlsFailure> {
    match tls_error(e) {
        Some(f) => {
            f.count(c);
            Some(f)
        }
        None => {
            c.truncated += 1;
            None
        }
    }
}
