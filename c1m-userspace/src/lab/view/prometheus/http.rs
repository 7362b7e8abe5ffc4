//! The metrics endpoint's HTTP/1.1: bind (errors name the flag), serve on a tokio
//! listener with a bounded number of scrapers, answer `GET`/`HEAD /metrics`.

use std::{
    fmt::Write as _,
    future::Future,
    io,
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::Semaphore,
    task::JoinSet,
};

use super::render;
use crate::lab::model::LiveState;

/// The flag this server answers to, named in its errors.
pub const FLAG: &str = "--metrics-addr";
/// Where the metrics are (what a scrape config's `metrics_path` says).
pub const PATH: &str = "/metrics";
/// `Content-Type` of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Scrapes served at once; more are closed at once (a scraper retries).
const MAX_CLIENTS: usize = 32;
/// A request head larger than this is refused.
const MAX_HEAD_BYTES: usize = 8192;
/// A client that does not send its request (or read the answer) in time is dropped.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Back-off after a failed accept (e.g. EMFILE while a million sockets are open).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// so a bad address fails at once.
pub async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| flag_error(addr, &e))
}

/// One line naming the flag and the address, keeping the error's kind. [`bind`] already
/// returns such errors; applying it again changes nothing.
pub fn flag_error(addr: SocketAddr, e: &io::Error) -> io::Error {
    let prefix = format!("{FLAG} {addr}: ");
    if e.to_string().starts_with(&prefix) {
        return io::Error::new(e.kind(), e.to_string());
    }
    let why = match e.kind() {
        io::ErrorKind::AddrInUse => "address in use".to_owned(),
        io::ErrorKind::AddrNotAvailable => "address not available on this host".to_owned(),
        io::ErrorKind::PermissionDenied => {
            "permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)".to_owned()
        }
        _ => e.to_string(),
    };
    io::Error::new(e.kind(), format!("{prefix}{why}"))
}

/// Binds `addr` and serves `GET /metrics` from `state` until `shutdown` completes.
pub async fn serve(
    addr: SocketAddr,
    state: Arc<Mutex<LiveState>>,
    shutdown: impl Future,
) -> io::Result<()> {
    let listener = bind(addr).await?;
    serve_listener(listener, state, shutdown).await
}

/// Serves on a listener already bound (tests bind `127.0.0.1:0`). Each scrape renders
/// under the lock, so the answer is one consistent state.
pub async fn serve_listener(
    listener: TcpListener,
    state: Arc<Mutex<LiveState>>,
    shutdown: impl Future,
) -> io::Result<()> {
    tokio::pin!(shutdown);
    let slots = Arc::new(Semaphore::new(MAX_CLIENTS));
    let mut clients = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            Some(_) = clients.join_next(), if !clients.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                        continue; // too many scrapers at once: close this one
                    };
                    let state = Arc::clone(&state);
                    clients.spawn(async move {
                        let _slot = slot;
                        // A failed scrape concerns only that scraper.
                        let _ = answer(stream, &state).await;
                    });
                }
                Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
            },
        }
    }
    clients.shutdown().await;
    Ok(())
}

async fn answer(mut stream: TcpStream, state: &Mutex<LiveState>) -> io::Result<()> {
    let head = tokio::time::timeout(IO_TIMEOUT, read_head(&mut stream))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "request head timed out"))??;
    let response = respond(&head, || {
        render(&state.lock().unwrap_or_else(PoisonError::into_inner))
    });
    tokio::time::timeout(IO_TIMEOUT, stream.write_all(&response))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "response timed out"))??;
    stream.shutdown().await
}

/// Reads up to the blank line that ends the request head (a GET has no body).
async fn read_head(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(head);
        }
        head.extend_from_slice(&buf[..n]);
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.len() > MAX_HEAD_BYTES {
            return Ok(head);
        }
    }
}

/// The whole HTTP answer to a request head; `body` renders the metrics when asked for.
pub fn respond(head: &[u8], body: impl FnOnce() -> Result<String, std::fmt::Error>) -> Vec<u8> {
    let text = String::from_utf8_lossy(head);
    let mut request_line = text.lines().next().unwrap_or("").split(' ');
    let (method, target, version) = (
        request_line.next().unwrap_or(""),
        request_line.next().unwrap_or(""),
        request_line.next().unwrap_or(""),
    );
    let path = target.split('?').next().unwrap_or("");
    if head.len() > MAX_HEAD_BYTES {
        return http(
            431,
            "Request Header Fields Too Large",
            "text/plain",
            "request head too large\n",
            true,
            &[],
        );
    }
    if !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return http(400, "Bad Request", "text/plain", "bad request\n", true, &[]);
    }
    let with_body = match method {
        "GET" => true,
        "HEAD" => false,
        _ => {
            return http(
                405,
                "Method Not Allowed",
                "text/plain",
                "only GET and HEAD\n",
                true,
                &[("Allow", "GET, HEAD")],
            );
        }
    };
    match path {
        PATH => match body() {
            Ok(text) => http(200, "OK", CONTENT_TYPE, &text, with_body, &[]),
            Err(_) => http(
                500,
                "Internal Server Error",
                "text/plain",
                "the metrics could not be encoded\n",
                with_body,
                &[],
            ),
        },
        "/" => http(
            200,
            "OK",
            "text/plain; charset=utf-8",
            "c1m live view: metrics at /metrics\n",
            with_body,
            &[],
        ),
        _ => http(
            404,
            "Not Found",
            "text/plain",
            "not found: try /metrics\n",
            with_body,
            &[],
        ),
    }
}

fn http(
    status: u16,
    reason: &str,
    content_type: &str,
    body: &str,
    with_body: bool,
    extra: &[(&str, &str)],
) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in extra {
        let _ = write!(out, "{k}: {v}\r\n");
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    if with_body {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn http_answers() {
        let body = || Ok("c1m_x 1\n".to_owned());
        let r =
            String::from_utf8(respond(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", body)).unwrap();
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.contains(&format!("Content-Type: {CONTENT_TYPE}\r\n")));
        assert!(r.contains("Content-Length: 8\r\n"));
        assert!(r.ends_with("\r\n\r\nc1m_x 1\n"));
        let r = String::from_utf8(respond(b"HEAD /metrics?x=1 HTTP/1.0\r\n\r\n", body)).unwrap();
        assert!(
            r.starts_with("HTTP/1.1 200 OK\r\n") && r.ends_with("\r\n\r\n"),
            "{r}"
        );
        assert!(r.contains("Content-Length: 8\r\n"));
        let status = |req: &[u8]| {
            let r = respond(req, body);
            String::from_utf8(r)
                .unwrap()
                .lines()
                .next()
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            status(b"GET /nope HTTP/1.1\r\n\r\n"),
            "HTTP/1.1 404 Not Found"
        );
        assert_eq!(
            status(b"POST /metrics HTTP/1.1\r\n\r\n"),
            "HTTP/1.1 405 Method Not Allowed"
        );
        assert_eq!(status(b"hello\r\n\r\n"), "HTTP/1.1 400 Bad Request");
        assert_eq!(status(b""), "HTTP/1.1 400 Bad Request");
        assert_eq!(
            status(&[b'a'; MAX_HEAD_BYTES + 1]),
            "HTTP/1.1 431 Request Header Fields Too Large"
        );
        assert_eq!(status(b"GET / HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 OK");
        let failed = String::from_utf8(respond(b"GET /metrics HTTP/1.1\r\n\r\n", || {
            Err(std::fmt::Error)
        }))
        .unwrap();
        assert!(
            failed.starts_with("HTTP/1.1 500 Internal Server Error\r\n"),
            "{failed}"
        );
    }

    #[test]
    fn addresses_and_their_errors() {
        assert_eq!(
            crate::args::parse_metrics_addr("127.0.0.1:9100").unwrap(),
            "127.0.0.1:9100".parse().unwrap()
        );
        assert_eq!(
            crate::args::parse_metrics_addr(":9100").unwrap(),
            "0.0.0.0:9100".parse().unwrap()
        );
        assert_eq!(
            crate::args::parse_metrics_addr("[::1]:9100").unwrap(),
            "[::1]:9100".parse().unwrap()
        );
        assert_eq!(
            crate::args::parse_metrics_addr("localhost").unwrap_err(),
            "--metrics-addr localhost: not an IP address and port (e.g. 127.0.0.1:9100 or :9100)"
        );
        let addr: SocketAddr = "127.0.0.1:9100".parse().unwrap();
        let e = flag_error(addr, &io::Error::from(io::ErrorKind::AddrInUse));
        assert_eq!(
            e.to_string(),
            "--metrics-addr 127.0.0.1:9100: address in use"
        );
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        let odd = flag_error(addr, &io::Error::other("no route"));
        assert_eq!(odd.to_string(), "--metrics-addr 127.0.0.1:9100: no route");
        assert_eq!(flag_error(addr, &odd).to_string(), odd.to_string());
        assert_eq!(flag_error(addr, &e).to_string(), e.to_string());
    }
}
