//! Shards: a thread of this process, or a worker process (this binary re-exec'd as the
//! hidden `c1m worker`), both driven the same way: commands in, [`WorkerReport`]s out.
//!
//! A worker process reads its [`ShardConfig`] as the first JSON line on stdin, then
//! commands as JSON lines; it writes reports as JSON lines on stdout; stderr is shared with
//! the supervisor for messages. It is started in its own process group so a terminal's
//! Ctrl-C reaches only the supervisor, which then stops the workers in order and keeps
//! their last numbers. If the supervisor dies, the worker's stdin reaches EOF and it exits.

use std::{
    process::Stdio,
    sync::{Arc, atomic::AtomicU64},
};

use anyhow::{Context, Result};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    sync::mpsc,
};

use super::{
    config::{ShardCommand, ShardConfig},
    engine::{self, ShardEvent, ShardIo, Sink},
    stats::WorkerReport,
};

/// The supervisor's handle on one shard.
pub struct ShardHandle {
    pub shard: u32,
    pub pid: u32,
    pub process: bool,
    cmd: mpsc::UnboundedSender<ShardCommand>,
}

impl ShardHandle {
    /// Sends a command; a shard that is gone is already reported by its `Exited` event.
    pub fn send(&self, c: ShardCommand) {
        let _ = self.cmd.send(c);
    }
}

async fn run_engine(cfg: ShardConfig, io: ShardIo, open: Arc<AtomicU64>) -> Result<()> {
    match cfg {
        ShardConfig::Server(c) => engine::server::run(c, io, open).await,
        ShardConfig::Client(c) => engine::client::run(c, io, open).await,
    }
}

fn shard_of(cfg: &ShardConfig) -> u32 {
    match cfg {
        ShardConfig::Server(c) => c.shard,
        ShardConfig::Client(c) => c.shard,
    }
}

/// Starts a shard as a thread of this process with its own current-thread runtime.
/// `open` is shared by all thread shards: they share the process's fd limit.
pub fn spawn_thread(
    cfg: ShardConfig,
    events: mpsc::UnboundedSender<ShardEvent>,
    open: Arc<AtomicU64>,
) -> Result<ShardHandle> {
    let shard = shard_of(&cfg);
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name(format!("c1m-shard-{shard}"))
        .spawn(move || {
            let io = ShardIo {
                commands: rx,
                sink: Sink::Channel(events.clone()),
            };
            let why = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => match rt.block_on(run_engine(cfg, io, open)) {
                    Ok(()) => "stopped".to_owned(),
                    Err(e) => format!("error: {e:#}"),
                },
                Err(e) => format!("error: tokio runtime: {e}"),
            };
            let _ = events.send(ShardEvent::Exited { shard, why });
        })
        .context("spawn shard thread")?;
    Ok(ShardHandle {
        shard,
        pid: std::process::id(),
        process: false,
        cmd: tx,
    })
}

/// Starts a shard as a worker process.
pub async fn spawn_process(
    cfg: ShardConfig,
    events: mpsc::UnboundedSender<ShardEvent>,
) -> Result<ShardHandle> {
    let shard = shard_of(&cfg);
    let exe = std::env::current_exe().context("find own executable to start workers")?;
    let mut child = tokio::process::Command::new(exe)
        .arg("worker")
        .arg("--shard")
        .arg(shard.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .context("start worker process")?;
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
        cmd: tx,
    })
}

/// The body of `c1m worker`: one shard in this process, driven over stdin/stdout.
pub fn worker_main() -> Result<()> {
    super::limits::raise_nofile().context("RLIMIT_NOFILE")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    let result = rt.block_on(async {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        let first = lines
            .next_line()
            .await
            .context("read config")?
            .context("no config on stdin")?;
        let cfg: ShardConfig = serde_json::from_str(&first).context("parse worker config")?;
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                match serde_json::from_str::<ShardCommand>(&line) {
                    Ok(c) => {
                        if tx.send(c).is_err() {
                            break;
                        }
                    }
                    Err(e) => eprintln!("c1m worker: bad command ({e}): {line:.200}"),
                }
            }
            // stdin closed (supervisor gone or done): dropping tx makes the engine stop.
        });
        let io = ShardIo {
            commands: rx,
            sink: Sink::Stdout(tokio::io::stdout()),
        };
        run_engine(cfg, io, Arc::new(AtomicU64::new(0))).await
    });
    // tokio reads stdin on a blocking thread that a normal runtime drop would wait for
    // (until the supervisor closes the pipe): do not wait, the engine is done.
    rt.shutdown_background();
    match result {
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
