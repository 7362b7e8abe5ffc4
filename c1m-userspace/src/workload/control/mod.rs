//! The control endpoint: a line protocol on TCP or a unix socket, through which the lab
//! (or a person with `nc`) drives a running server or client.
//!
//! | request | side   | answer (one line)                                   |
//! |---------|--------|-----------------------------------------------------|
//! | `stats` | both   | the [`AppSnapshot`](super::stats::snapshot::AppSnapshot) JSON |
//! | `push`  | server | `{"push_id":N,"started_unix_ns":T}`                 |
//! | `mark ID NS` | client | `{"ok":"marked"}`: id-less pushes from now are push ID, triggered at NS |
//! | `close` | client | `{"ok":"closing"}`: tear down every connection      |
//! | `stop`  | both   | `{"ok":"stopping"}`: close everything and exit      |
//! | `close` | server | `{"ok":"closing"}`: close every connection (external clients) |
//! | `time`  | both   | `{"unix_ns":T}`: this host's clock (and `"run_id"` on a server host); before `auth` too |
//!
//! Anything else gets `{"error":"…"}` quoting at most a short prefix of the request.
//!
//! Who may drive it: its owner. A unix socket is created 0600 and checks its peer with
//! `SO_PEERCRED`; a loopback TCP endpoint looks the peer's socket up in the kernel
//! ([`peer`]); either admits the same euid or root, and tells anyone else why and closes.
//! Any other address is reachable from places no uid describes, so it needs
//! `--control-token-file`: a random per-run token ([`token`]) that every connection must
//! send first as `auth <token>`.
//!
//! What it may cost: lines are at most [`line::MAX_LINE`] bytes (a longer one is refused
//! and the connection closed, so memory per connection is bounded), a line cut off by EOF
//! is dropped, not run, and at most [`MAX_SESSIONS`] connections are served at once;
//! further ones are told so and closed at once. Their descriptors are reserved up front
//! ([`super::limits::CONTROL_FDS`]), so control connections never cost data connections.

pub(crate) mod clock;
pub(crate) mod line;
mod peer;
pub(crate) mod token;
mod unix;

use std::{
    io,
    net::{SocketAddr, ToSocketAddrs},
    os::fd::AsFd,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use anyhow::{Context, Result, bail};
use line::{LineBuf, LineError};
pub(crate) use token::{Token, TokenFile};
use tokio::{
    io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpSocket, UnixListener},
    sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot},
    task::JoinHandle,
};

/// Control connections served at once. The lab holds at most two (a poll and a command);
/// 64 leaves room for people and scripts while keeping the reserve small.
pub(crate) const MAX_SESSIONS: usize = 64;

/// A token-guarded connection must authenticate within this long, so silent peers
/// cannot sit on session slots.
const AUTH_TIMEOUT: Duration = Duration::from_secs(10);

/// The clock query: answered with `{"unix_ns":T}`, this host's CLOCK_REALTIME, and the
/// run's id when the process was given one (`"run_id":"…"`).
pub(crate) const TIME: &str = "time";

fn time_line(run_id: Option<&str>) -> String {
    let t = clock::TimeAnswer {
        unix_ns: super::sys::realtime_ns(),
        run_id: run_id.map(str::to_owned),
    };
    format!("{}\n", serde_json::to_string(&t).unwrap_or_default())
}

/// The environment variable [`call`] reads a token file's path from.
pub(crate) const TOKEN_ENV: &str = "C1M_CONTROL_TOKEN_FILE";

/// A request from a control client, with where to send the answer.
pub(crate) struct Request {
    /// The request line as received, e.g. "stats".
    pub line: String,
    /// Where the answer line goes.
    pub reply: oneshot::Sender<String>,
}

/// Where the endpoint listens: `HOST:PORT` (TCP) or a filesystem path (unix socket).
pub(crate) enum Endpoint {
    Tcp(String),
    Unix(PathBuf),
}

impl Endpoint {
    pub(crate) fn parse(s: &str) -> Endpoint {
        if s.contains('/') {
            Endpoint::Unix(PathBuf::from(s))
        } else {
            Endpoint::Tcp(s.to_owned())
        }
    }
}

/// What a connection must show before its lines are run.
#[derive(Clone)]
struct Access {
    /// Check the peer's uid against this owner (unix and loopback TCP).
    owner: Option<u32>,
    /// Require `auth <token>` as the first line.
    token: Option<Token>,
    /// The run this process belongs to, told with every `time` answer (client hosts
    /// record it; `c1m merge` checks it).
    run_id: Option<Arc<str>>,
}

/// A served endpoint. Dropping it stops accepting and removes the socket file and the
/// token file this process made, so a normal exit, a signal handled by the supervisor
/// and `stop` all leave nothing of theirs behind (and nothing of anyone else's gone).
pub(crate) struct Serving {
    task: JoinHandle<()>,
    _socket: Option<unix::SocketFile>,
    token_file: Option<TokenFile>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(f) = &self.token_file {
            f.remove();
        }
    }
}

/// Binds the endpoint (so it answers as soon as this returns) and serves it in the
/// background, forwarding each line to `tx`. With `token_file`, the token claimed there
/// ([`TokenFile::claim`]: a fresh one, or a token file of this user's found there) is
/// required on every connection; without one, only loopback TCP and unix sockets are
/// accepted.
pub(crate) async fn serve(
    ep: Endpoint,
    token_file: Option<&Path>,
    run_id: Option<&str>,
    tx: mpsc::UnboundedSender<Request>,
) -> Result<Serving> {
    let run_id: Option<Arc<str>> = run_id.map(Arc::from);
    let sessions = Arc::new(Semaphore::new(MAX_SESSIONS));
    let token_file = match token_file {
        None => None,
        Some(p) => {
            let f = TokenFile::claim(p)?;
            let (how, after) = match f.made() {
                true => ("written to", ""),
                false => ("read from", ", which is not ours and stays at exit"),
            };
            eprintln!(
                "c1m: control token {how} {}{after} (send `auth <token>` first; c1m reads it from ${TOKEN_ENV})",
                p.display()
            );
            Some(f)
        }
    };
    let token = token_file.as_ref().map(|f| f.token().clone());
    match ep {
        Endpoint::Tcp(addr) => {
            let addrs: Vec<SocketAddr> = addr
                .to_socket_addrs()
                .with_context(|| format!("control endpoint {addr}: not HOST:PORT"))?
                .collect();
            let loopback = !addrs.is_empty() && addrs.iter().all(peer::is_loopback);
            if !loopback && token.is_none() {
                bail!(
                    "control endpoint {addr} is not a loopback address, so anyone who reaches it could stop this \
                     process: add --control-token-file PATH (connections then send `auth <token>` first), or use 127.0.0.1"
                );
            }
            let l = bind_tcp(&addrs).with_context(|| format!("control endpoint: bind {addr}"))?;
            let local = l.local_addr()?;
            let access = Access {
                owner: peer::is_loopback(&local).then(peer::euid),
                token,
                run_id,
            };
            let task = tokio::spawn(async move {
                loop {
                    let (s, from) = match l.accept().await {
                        Ok(c) => c,
                        Err(_) => {
                            // EMFILE and the like: the reserve frees up as sessions end.
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    };
                    let Some(permit) = admit(&sessions, &s) else {
                        continue;
                    };
                    let uid = access.owner.map(|_| peer::tcp_peer_uid(local, from));
                    tokio::spawn(session(s, uid, access.clone(), tx.clone(), permit));
                }
            });
            Ok(Serving {
                task,
                _socket: None,
                token_file,
            })
        }
        Endpoint::Unix(path) => {
            let (l, file) = unix::bind_private(&path)?;
            let l = UnixListener::from_std(l)
                .with_context(|| format!("control endpoint {}", path.display()))?;
            let access = Access {
                owner: Some(peer::euid()),
                token,
                run_id,
            };
            let task = tokio::spawn(async move {
                loop {
                    let s = match l.accept().await {
                        Ok((s, _)) => s,
                        Err(_) => {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    };
                    let Some(permit) = admit(&sessions, &s) else {
                        continue;
                    };
                    let uid = Some(peer::unix_peer_uid(s.as_fd()));
                    tokio::spawn(session(s, uid, access.clone(), tx.clone(), permit));
                }
            });
            Ok(Serving {
                task,
                _socket: Some(file),
                token_file,
            })
        }
    }
}

/// Room for a burst of connects: beyond [`MAX_SESSIONS`] they are accepted only to be
/// refused, and a full queue would drop SYNs and stall each connect for a 1 s retransmit
/// (std's 128 did: 10,000 connects took 70 s, against 4 s at 1024).
const BACKLOG: u32 = 1024;

/// Binds the first of `addrs` that binds, listening with [`BACKLOG`].
fn bind_tcp(addrs: &[SocketAddr]) -> io::Result<TcpListener> {
    let mut last = io::Error::new(io::ErrorKind::InvalidInput, "no address");
    for a in addrs {
        let s = if a.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        }?;
        s.set_reuseaddr(true)?;
        match s.bind(*a).and_then(|()| s.listen(BACKLOG)) {
            Ok(l) => return Ok(l),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// A session slot, or (all taken) a one-line refusal and the connection dropped.
fn admit<S: TryWrite>(sessions: &Arc<Semaphore>, s: &S) -> Option<OwnedSemaphorePermit> {
    let p = sessions.clone().try_acquire_owned().ok();
    if p.is_none() {
        // A fresh socket's send buffer is empty: this never blocks, and a peer that
        // cannot take it loses nothing but the explanation.
        let msg = err_line(&format!(
            "too many control connections ({MAX_SESSIONS} at once); try again"
        ));
        let _ = s.try_write_line(msg.as_bytes());
    }
    p
}

trait TryWrite {
    fn try_write_line(&self, b: &[u8]) -> io::Result<usize>;
}
impl TryWrite for tokio::net::TcpStream {
    fn try_write_line(&self, b: &[u8]) -> io::Result<usize> {
        self.try_write(b)
    }
}
impl TryWrite for tokio::net::UnixStream {
    fn try_write_line(&self, b: &[u8]) -> io::Result<usize> {
        self.try_write(b)
    }
}

/// `{"error":msg}` and a newline.
fn err_line(msg: &str) -> String {
    format!("{}\n", serde_json::json!({ "error": msg }))
}

enum Next {
    Line(String),
    Eof,
    TooLong,
    BadUtf8,
}

/// The next whole line; never holds more than [`line::MAX_LINE`] + 1 bytes.
async fn next_line<R: AsyncRead + Unpin>(r: &mut R, buf: &mut LineBuf) -> io::Result<Next> {
    let mut tmp = [0u8; 1024];
    loop {
        match buf.next_line() {
            Ok(Some(l)) => return Ok(Next::Line(l)),
            Err(LineError::TooLong) => return Ok(Next::TooLong),
            Err(LineError::NotUtf8) => return Ok(Next::BadUtf8),
            Ok(None) => {}
        }
        let want = buf.room().min(tmp.len());
        let n = r.read(&mut tmp[..want]).await?;
        if n == 0 {
            return Ok(Next::Eof); // a partial line is dropped, never run
        }
        buf.extend(&tmp[..n]);
    }
}

async fn session<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    peer_uid: Option<io::Result<u32>>,
    access: Access,
    tx: mpsc::UnboundedSender<Request>,
    _permit: OwnedSemaphorePermit,
) {
    if let (Some(owner), Some(uid)) = (access.owner, peer_uid) {
        let refusal = match uid {
            Ok(uid) if peer::allowed(uid, owner) => None,
            Ok(uid) => Some(format!(
                "uid {uid} may not use this control endpoint: only its owner (uid {owner}) or root may"
            )),
            Err(e) => Some(format!(
                "cannot tell which user is connecting ({e}); refused"
            )),
        };
        if let Some(why) = refusal {
            let _ = s.write_all(err_line(&why).as_bytes()).await;
            return;
        }
    }
    let mut buf = LineBuf::default();
    if let Some(token) = &access.token {
        // `time` before `auth`: client hosts measure their clock offset with it and hold
        // no token (it tells nothing but this host's clock). Bounded like auth itself.
        let auth_by = tokio::time::Instant::now() + AUTH_TIMEOUT;
        let first = loop {
            let line = tokio::time::timeout_at(auth_by, next_line(&mut s, &mut buf)).await;
            match line {
                Ok(Ok(Next::Line(l))) if l.trim() == TIME => {
                    if s.write_all(time_line(access.run_id.as_deref()).as_bytes())
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                other => break other,
            }
        };
        let reply = match first {
            Ok(Ok(Next::Line(l))) if token.admits(&l) => "{\"ok\":\"auth\"}\n".to_owned(),
            Ok(Ok(Next::TooLong)) => err_line(&LineError::TooLong.to_string()),
            _ => err_line(
                "send `auth <token>` first: the token is in the file the endpoint's --control-token-file names",
            ),
        };
        let ok = reply.starts_with("{\"ok\"");
        if s.write_all(reply.as_bytes()).await.is_err() || !ok {
            let _ = s.shutdown().await;
            return;
        }
    }
    loop {
        let line = match next_line(&mut s, &mut buf).await {
            Ok(Next::Line(l)) => l,
            Ok(Next::BadUtf8) => {
                if s.write_all(err_line(&LineError::NotUtf8.to_string()).as_bytes())
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            Ok(Next::TooLong) => {
                let _ = s
                    .write_all(err_line(&LineError::TooLong.to_string()).as_bytes())
                    .await;
                let _ = s.shutdown().await;
                return;
            }
            Ok(Next::Eof) | Err(_) => return,
        };
        if line.trim() == TIME {
            // Answered here, not by the supervisor: the stamp is taken as close to the
            // write as possible, so the round trip bounds it.
            if s.write_all(time_line(access.run_id.as_deref()).as_bytes())
                .await
                .is_err()
            {
                return;
            }
            continue;
        }
        let (reply, rx) = oneshot::channel();
        if tx.send(Request { line, reply }).is_err() {
            return;
        }
        let Ok(mut answer) = rx.await else { return };
        answer.push('\n');
        if s.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// The token named by `$C1M_CONTROL_TOKEN_FILE`, if set.
pub(crate) fn token_from_env() -> Result<Option<Token>> {
    match std::env::var_os(TOKEN_ENV) {
        None => Ok(None),
        Some(p) => Ok(Some(Token::read(Path::new(&p))?)),
    }
}

/// Sends one command to a control endpoint and returns the answer line (for tests, the
/// bench and the lab). Authenticates with the token in `$C1M_CONTROL_TOKEN_FILE` if set.
pub async fn call(ep: &str, line: &str) -> Result<String> {
    call_with_token(ep, token_from_env()?.as_ref(), line).await
}

/// [`call`] with an explicit token (sent as `auth <token>` first).
pub(crate) async fn call_with_token(ep: &str, token: Option<&Token>, line: &str) -> Result<String> {
    async fn talk<S: AsyncRead + AsyncWrite + Unpin>(
        s: S,
        token: Option<&Token>,
        line: &str,
    ) -> Result<String> {
        let (r, mut w) = tokio::io::split(s);
        let mut lines = BufReader::new(r).lines();
        if let Some(t) = token {
            w.write_all(format!("auth {}\n", t.as_str()).as_bytes())
                .await?;
            let answer = lines
                .next_line()
                .await?
                .context("control endpoint closed without answering auth")?;
            if !answer.starts_with("{\"ok\"") {
                bail!("control endpoint refused the token: {answer}");
            }
        }
        w.write_all(format!("{line}\n").as_bytes()).await?;
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
                token,
                line,
            )
            .await
        }
        Endpoint::Unix(p) => {
            talk(
                tokio::net::UnixStream::connect(&p)
                    .await
                    .with_context(|| format!("connect {}", p.display()))?,
                token,
                line,
            )
            .await
        }
    }
}
