//! The control endpoint: a line protocol on loopback TCP or a unix socket, through which the
//! lab (or a person with `nc`) drives a running server or client.
//!
//! | request | side   | answer (one line)                                   |
//! |---------|--------|-----------------------------------------------------|
//! | `stats` | both   | the [`AppSnapshot`](super::stats::AppSnapshot) JSON |
//! | `push`  | server | `{"push_id":N,"started_unix_ns":T}`                 |
//! | `close` | client | `{"ok":"closing"}`: tear down every connection      |
//! | `stop`  | both   | `{"ok":"stopping"}`: close everything and exit      |
//!
//! Anything else gets `{"error":"…"}`. Several clients may connect at once.

use std::path::PathBuf;

use anyhow::{Context, Result};
use tokio::{
    io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader},
    net::{TcpListener, UnixListener},
    sync::{mpsc, oneshot},
};

/// A request from a control client, with where to send the answer.
pub struct Request {
    pub line: String,
    pub reply: oneshot::Sender<String>,
}

/// Where the endpoint listens: `HOST:PORT` (TCP) or a filesystem path (unix socket).
pub enum Endpoint {
    Tcp(String),
    Unix(PathBuf),
}

impl Endpoint {
    pub fn parse(s: &str) -> Endpoint {
        if s.contains('/') {
            Endpoint::Unix(PathBuf::from(s))
        } else {
            Endpoint::Tcp(s.to_owned())
        }
    }
}

/// Binds the endpoint (so it answers as soon as this returns) and serves it in the
/// background, forwarding each line to `tx`.
pub async fn serve(ep: Endpoint, tx: mpsc::UnboundedSender<Request>) -> Result<()> {
    match ep {
        Endpoint::Tcp(addr) => {
            let l = TcpListener::bind(&addr)
                .await
                .with_context(|| format!("control endpoint: bind {addr}"))?;
            tokio::spawn(async move {
                while let Ok((s, _)) = l.accept().await {
                    let (r, w) = s.into_split();
                    tokio::spawn(session(r, w, tx.clone()));
                }
            });
        }
        Endpoint::Unix(path) => {
            // A socket file left by an earlier run would make bind fail with EADDRINUSE.
            if std::fs::metadata(&path).is_ok_and(|m| {
                use std::os::unix::fs::FileTypeExt;
                m.file_type().is_socket()
            }) {
                let _ = std::fs::remove_file(&path);
            }
            let l = UnixListener::bind(&path)
                .with_context(|| format!("control endpoint: bind {}", path.display()))?;
            tokio::spawn(async move {
                while let Ok((s, _)) = l.accept().await {
                    let (r, w) = s.into_split();
                    tokio::spawn(session(r, w, tx.clone()));
                }
            });
        }
    }
    Ok(())
}

async fn session<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    r: R,
    mut w: W,
    tx: mpsc::UnboundedSender<Request>,
) {
    let mut lines = BufReader::new(r).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let (reply, rx) = oneshot::channel();
        if tx
            .send(Request {
                line: line.trim().to_owned(),
                reply,
            })
            .is_err()
        {
            return;
        }
        let Ok(mut answer) = rx.await else { return };
        answer.push('\n');
        if w.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Sends one command to a control endpoint and returns the answer line (for tests, the
/// bench and the lab).
pub async fn call(ep: &str, line: &str) -> Result<String> {
    async fn talk<S: AsyncRead + AsyncWrite + Unpin>(s: S, line: &str) -> Result<String> {
        let (r, mut w) = tokio::io::split(s);
        w.write_all(format!("{line}\n").as_bytes()).await?;
        let mut lines = BufReader::new(r).lines();
        lines
            .next_line()
            .await?
            .context("control endpoint closed without answering")
    }
    match Endpoint::parse(ep) {
        Endpoint::Tcp(a) => {
            talk(
                tokio::net::TcpStream::connect(&a)
                    .await
                    .with_context(|| format!("connect {a}"))?,
                line,
            )
            .await
        }
        Endpoint::Unix(p) => {
            talk(
                tokio::net::UnixStream::connect(&p)
                    .await
                    .with_context(|| format!("connect {}", p.display()))?,
                line,
            )
            .await
        }
    }
}
