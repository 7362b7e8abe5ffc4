//! Shards: a thread of this process, or a worker process (this binary re-exec'd as the
//! hidden `c1m worker`), both driven the same way: commands in, [`WorkerReport`]s out.
//! Either way the shard is one OS thread running its engine loop, with no async runtime
//! (see `engine` for why).
//!
//! A worker process reads its [`ShardConfig`] as the first JSON line on stdin, then
//! commands as JSON lines; it writes reports as JSON lines on stdout; stderr is shared with
//! the supervisor for messages. It is started in its own process group so a terminal's
//! Ctrl-C reaches only the supervisor, which then stops the workers in order and keeps
//! their last numbers. If the supervisor dies, the kernel kills the worker (PR_SET_PDEATHSIG).

use std::{
    io::Read,
    process::Stdio,
    sync::{Arc, atomic::AtomicU64, mpsc as std_mpsc},
};

use anyhow::{Context, Result};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    sync::mpsc,
};

use super::{
    config::{EngineKind, ShardCommand, ShardConfig},
    engine::{self, Commands, ShardEvent, ShardIo, Sink},
    stats::report::WorkerReport,
    sys::{self, EventFd},
    tokio_engine,
};

/// The supervisor's handle on one shard.
pub(crate) struct ShardHandle {
    pub shard: u32,
    pub pid: u32,
    pub process: bool,
    cmd: CommandTx,
}

enum CommandTx {
    /// A thread shard: the channel, then the eventfd in its epoll set.
    Thread(std_mpsc::Sender<ShardCommand>, Arc<EventFd>),
    /// A worker process: a task that writes JSON lines to its stdin.
    Process(mpsc::UnboundedSender<ShardCommand>),
}

impl ShardHandle {
    /// Sends a command; a shard that is gone is already reported by its `Exited` event.
    pub(crate) fn send(&self, c: ShardCommand) {
        match &self.cmd {
            CommandTx::Thread(tx, wake) => {
                if tx.send(c).is_ok() {
                    wake.notify();
                }
            }
            CommandTx::Process(tx) => {
                let _ = tx.send(c);
            }
        }
    }
}

fn run_engine(cfg: ShardConfig, io: ShardIo, open: Arc<AtomicU64>) -> Result<()> {
    match cfg {
        ShardConfig::Server(c) => match c.engine {
            EngineKind::Epoll => engine::server::run(c, io, open),
            EngineKind::Tokio => tokio_engine::server::run(c, io, open),
            EngineKind::Uring => engine::uring::server::run(c, io, open),
        },
        ShardConfig::Client(c) => match c.engine {
            // The uring engine's client is the epoll client: its ramp is connect-bound,
            // and the frames io_uring batches are the server's (see `engine::uring`).
            EngineKind::Epoll | EngineKind::Uring => engine::client::run(c, io, open),
            EngineKind::Tokio => tokio_engine::client::run(c, io, open),
        },
    }
}

fn shard_of(cfg: &ShardConfig) -> u32 {
    match cfg {
        ShardConfig::Server(c) => c.shard,
        ShardConfig::Client(c) => c.shard,
    }
}

/// Starts a shard as a thread of this process. `open` is shared by all thread shards: they
/// share the process's fd limit.
pub(crate) fn spawn_thread(
    cfg: ShardConfig,
    events: mpsc::UnboundedSender<ShardEvent>,
    open: Arc<AtomicU64>,
) -> Result<ShardHandle> {
    let shard = shard_of(&cfg);
    let (tx, rx) = std_mpsc::channel();
    let wake = Arc::new(EventFd::new().context("eventfd for a shard thread")?);
    let io = ShardIo {
        commands: Commands::Channel {
            rx,
            wake: wake.clone(),
        },
        sink: Sink::Channel(events.clone()),
    };
    std::thread::Builder::new()
        .name(format!("c1m-shard-{shard}"))
        .spawn(move || {
            crate::priority::load();
            let why = match run_engine(cfg, io, open) {
                Ok(()) => "stopped".to_owned(),
                Err(e) => format!("error: {e:#}"),
            };
            let _ = events.send(ShardEvent::Exited { shard, why });
        })
        .context("spawn shard thread")?;
    Ok(ShardHandle {
        shard,
        pid: std::process::id(),
        process: false,
        cmd: CommandTx::Thread(tx, wake),
    })
}

/// Starts a shard as a worker process.
pub(crate) async fn spawn_process(
    cfg: ShardConfig,
    events: mpsc::UnboundedSender<ShardEvent>,
) -> Result<ShardHandle> {
    let shard = shard_of(&cfg);
    let exe = crate::util::own_exe();
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("worker")
        .arg("--shard")
        .arg(shard.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .kill_on_drop(true);
    // A worker must not outlive its supervisor (a `kill -9` of it left workers holding
    // 30,000 connections): stdin EOF only reaches a worker that reads it.
    let supervisor = std::process::id();
    // SAFETY: setpriority, prctl and getppid are async-signal-safe. A worker makes the
    // load: it runs at the default weight, not its supervisor's raised one.
    unsafe {
        cmd.pre_exec(move || {
            crate::priority::load();
            crate::util::die_with_parent(supervisor)
        });
    }
    let mut child = cmd.spawn().context("start worker process")?;
    let pid = child.id().unwrap_or(0);
    let mut stdin = child.stdin.take().context("worker stdin")?;
    let stdout = child.stdout.take().context("worker stdout")?;
    let mut first = serde_json::to_vec(&cfg)?;
    first.push(b'\n');
    stdin
        .write_all(&first)
        .await
        .context("send config to worker")?;
    let (tx, mut rx) = mpsc::unbounded_channel::<ShardCommand>();
    tokio::spawn(async move {
        while let Some(c) = rx.recv().await {
            let Ok(mut line) = serde_json::to_vec(&c) else {
                continue;
            };
            line.push(b'\n');
            if stdin.write_all(&line).await.is_err()
                || stdin.flush().await.is_err()
                || c == ShardCommand::Stop
            {
                break;
            }
        }
        // Dropping stdin: EOF tells the worker to stop.
    });
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            match serde_json::from_str::<WorkerReport>(&line) {
                Ok(r) => {
                    let _ = events.send(ShardEvent::Report(Box::new(r)));
                }
                Err(e) => eprintln!("c1m: worker {shard}: unreadable report ({e}): {line:.200}"),
            }
        }
        let why = match child.wait().await {
            Ok(st) if st.success() => "stopped".to_owned(),
            Ok(st) => format!("exited: {st}"),
            Err(e) => format!("wait failed: {e}"),
        };
        let _ = events.send(ShardEvent::Exited { shard, why });
    });
    Ok(ShardHandle {
        shard,
        pid,
        process: true,
        cmd: CommandTx::Process(tx),
    })
}

/// The body of `c1m worker`: one shard in this process, driven over stdin/stdout. The
/// process stays single-threaded: one thread means an unshared fd table, so socket syscalls
/// skip taking file references.
pub(crate) fn worker_main() -> Result<()> {
    super::limits::raise_nofile().context("RLIMIT_NOFILE")?;
    // Straight from fd 0, not through std's buffered stdin: bytes after the first line must
    // not be left in a buffer the engine never reads.
    let (first, rest) = read_first_line(&mut RawStdin)?;
    let cfg: ShardConfig = serde_json::from_slice(&first).context("parse worker config")?;
    if let ShardConfig::Server(c) = &cfg {
        let mut ports: Vec<u16> = c.listen.iter().map(|a| a.port()).collect();
        ports.sort_unstable();
        ports.dedup();
        super::port_lock::verify_owner(&ports, std::os::unix::process::parent_id())?;
    }
    sys::set_nonblocking(rustix::stdio::stdin()).context("stdin non-blocking")?;
    let io = ShardIo {
        commands: Commands::Stdin { pending: rest },
        sink: Sink::Stdout(std::io::stdout()),
    };
    match run_engine(cfg, io, Arc::new(AtomicU64::new(0))) {
        // The supervisor is gone (killed, or gave up waiting): nobody is left to tell.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            Ok(())
        }
        other => other,
    }
}

struct RawStdin;

impl Read for RawStdin {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        sys::read(rustix::stdio::stdin(), buf)
    }
}

/// Reads up to the first newline without buffering past what it returns: the bytes after
/// the newline (commands already sent) come back as the second value.
fn read_first_line(r: &mut impl Read) -> Result<(Vec<u8>, Vec<u8>)> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(nl) = got.iter().position(|&b| b == b'\n') {
            let rest = got.split_off(nl + 1);
            got.pop();
            return Ok((got, rest));
        }
        let n = match r.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("read config"),
        };
        if n == 0 {
            anyhow::bail!("no config on stdin");
        }
        got.extend_from_slice(&buf[..n]);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn first_line_keeps_what_follows() {
        let mut input: &[u8] = b"{\"a\":1}\n\"Stop\"\n";
        let (first, rest) = read_first_line(&mut input).unwrap();
        assert_eq!(
            (&first[..], &rest[..]),
            (&b"{\"a\":1}"[..], &b"\"Stop\"\n"[..])
        );
        assert!(read_first_line(&mut &b"no newline"[..]).is_err());
    }

    #[test]
    fn commands_from_a_channel_and_a_closed_channel_is_stop() {
        let (tx, rx) = std_mpsc::channel();
        let wake = Arc::new(EventFd::new().unwrap());
        let mut c = Commands::Channel {
            rx,
            wake: wake.clone(),
        };
        tx.send(ShardCommand::Close).unwrap();
        wake.notify();
        let mut out = Vec::new();
        c.drain(&mut out);
        assert_eq!(out, vec![ShardCommand::Close]);
        drop(tx);
        out.clear();
        c.drain(&mut out);
        assert_eq!(out, vec![ShardCommand::Stop]);
    }
}
