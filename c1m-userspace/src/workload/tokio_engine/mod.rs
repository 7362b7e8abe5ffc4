//! The tokio engine: the same shards (a thread, or a worker process), the same commands in
//! and [`WorkerReport`](crate::workload::stats::report::WorkerReport)s out, the same protocol and
//! stats as the epoll engine (`engine`), but written the way a tokio server is written:
//! each shard runs a current-thread runtime, and tasks own connections on `tokio::net`
//! sockets. Why a runtime per shard rather than one multi-thread runtime per process: a
//! worker process stays single-threaded (an unshared fd table, so socket syscalls skip file
//! references), and the supervisor already starts one shard per CPU.
//!
//! What both engines share, and so cannot drift apart: the WebSocket codec (`ws`), the
//! server's reply to a connection's input ([`crate::workload::engine::server::ws_input`]),
//! counters and the report builder ([`Reporter`]), the pacing arithmetic and the errno
//! classifiers.

mod churn_board;
pub(crate) mod client;
pub(crate) mod server;
mod slots;
pub(crate) mod stream;

use std::{
    io,
    os::fd::{AsRawFd, RawFd},
};

use anyhow::{Context, Result};
use bytes::BytesMut;
use tokio::io::unix::AsyncFd;

use super::{config::ShardCommand, engine::Commands, ws::Fragment};

pub(crate) use super::engine::{REPORT_EVERY_NS, ShardIo, Sink, shard_loop::Reporter};

/// The shard's runtime: one thread (the shard's own), I/O and timers, running `!Send`
/// tasks (`spawn_local`) itself. A `LocalRuntime` rather than a `LocalSet` on a runtime:
/// a task woken by the I/O driver goes straight to the runtime's run queue, where a
/// `LocalSet` queued it, woke the runtime and had the `block_on` future (the shard's
/// loop) polled again at every turn. Server user CPU a connection over 300k-connection
/// WebSocket ramps, interleaved: 6.6, 6.8, 6.7, 7.4 µs against 7.9, 7.0, 8.0, 7.9 µs.
pub(crate) fn runtime() -> Result<tokio::runtime::LocalRuntime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build_local(Default::default())
        .context("tokio runtime for a shard")
}

/// The fd of the command source (an eventfd, or a worker's stdin pipe), registered with
/// the runtime. The source itself stays in [`Commands`], which knows how to drain it.
struct CommandFd(RawFd);

impl AsRawFd for CommandFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// The shard's commands as an async source. Must be created inside the runtime.
pub(crate) struct AsyncCommands {
    fd: AsyncFd<CommandFd>,
    commands: Commands,
}

impl AsyncCommands {
    pub(crate) fn new(commands: Commands) -> io::Result<AsyncCommands> {
        super::sys::set_nonblocking(commands.fd())?;
        let fd = commands.fd().as_raw_fd();
        // SAFETY: the fd belongs to `commands` (its eventfd, kept alive by the Arc it
        // holds, or the process's stdin), which this struct owns and drops after `fd`
        // (fields drop in declaration order); nothing closes or replaces it meanwhile.
        let fd = unsafe {
            AsyncFd::register_with_interest(CommandFd(fd), tokio::io::Interest::READABLE)
        }
        .map_err(io::Error::from)?;
        Ok(AsyncCommands { fd, commands })
    }

    /// Waits until at least one command arrived and appends all that did to `out`. A
    /// supervisor that is gone reads as `Stop` (see [`Commands::drain`]).
    pub(crate) async fn next(&mut self, out: &mut Vec<ShardCommand>) -> io::Result<()> {
        loop {
            // Drain first: a worker's config line may have arrived with commands behind it.
            self.commands.drain(out);
            if !out.is_empty() {
                return Ok(());
            }
            let mut guard = self.fd.readable().await?;
            // Tokio clears readiness only if no new event arrived since `readable()`
            // returned, so a command landing between drain and clear is not lost.
            self.commands.drain(out);
            guard.clear_ready();
            if !out.is_empty() {
                return Ok(());
            }
        }
    }
}

/// A connection's heap, present only while needed (the tokio twin of `engine::Spill`):
/// an idle connection has none.
#[derive(Default)]
pub(crate) struct Spill {
    /// Received bytes not yet forming a complete frame or handshake head.
    pub inbuf: BytesMut,
    /// Bytes accepted for sending that the socket did not take yet.
    pub out: BytesMut,
    /// A fragmented WebSocket message being reassembled.
    pub frag: Option<Box<Fragment>>,
}

impl Spill {
    pub(crate) fn is_empty(&self) -> bool {
        self.inbuf.is_empty() && self.out.is_empty() && self.frag.is_none()
    }
}
