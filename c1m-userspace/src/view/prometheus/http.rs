//! The metrics endpoint's HTTP/1.1 on hyper: bind (errors name the flag), serve on a
//! tokio listener, answer `GET`/`HEAD /metrics`. Hostile clients are bounded: a request
//! head within [`HEAD_TIMEOUT`] and [`MAX_HEAD_BYTES`], a whole connection within
//! [`CONN_TIMEOUT`], and slots per peer and in all ([`admit`](super::admit)) so clients
//! trickling heads from many addresses cannot keep a scraper out.

use std::{
    convert::Infallible,
    future::Future,
    io,
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode, Uri, header, server::conn::http1};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{
    net::{TcpListener, TcpStream},
    task::JoinSet,
};

use super::{
    admit::{self, Evicted, Slot, Slots},
    families::Detail,
    keep::Kept,
};
use crate::view::live_state::LiveState;

/// The flag this server answers to, named in its errors.
pub const FLAG: &str = "--metrics-addr";
/// Where the metrics are (what a scrape config's `metrics_path` says).
pub const PATH: &str = "/metrics";
/// `Content-Type` of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// A request head larger than this is refused with 431 (hyper's smallest buffer).
const MAX_HEAD_BYTES: usize = 8192;
/// A scraper sends its request head in one packet; a client that has not sent all of
/// it this long after connecting (hyper times it from the first poll) is dropped.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(2);
/// A whole connection, request to the last byte of the answer (a client that does not
/// read its answer is dropped). Prometheus's own scrape timeout is 10 s by default.
pub const CONN_TIMEOUT: Duration = Duration::from_secs(10);
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
    detail: Detail,
    shutdown: impl Future,
) -> io::Result<()> {
    let listener = bind(addr).await?;
    serve_listener(listener, state, detail, shutdown).await
}

/// What a scrape reads: the live state, and what earlier scrapes exported ([`Kept`]).
struct Scraped {
    state: Arc<Mutex<LiveState>>,
    detail: Detail,
    kept: Mutex<Kept>,
}

impl Scraped {
    /// One scrape, under the state's lock, so the answer is one consistent state.
    fn render(&self) -> Result<String, std::fmt::Error> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.scrape(&state, self.detail)
    }
}

/// Serves on a listener already bound (tests bind `127.0.0.1:0`). A series, once
/// exported, stays until `shutdown` ([`Kept`]).
pub async fn serve_listener(
    listener: TcpListener,
    state: Arc<Mutex<LiveState>>,
    detail: Detail,
    shutdown: impl Future,
) -> io::Result<()> {
    let scraped = Arc::new(Scraped {
        state,
        detail,
        kept: Mutex::new(Kept::default()),
    });
    tokio::pin!(shutdown);
    let slots = Slots::new(admit::PER_PEER, admit::TOTAL);
    let mut clients = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            Some(_) = clients.join_next(), if !clients.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let Some((slot, evicted)) = slots.admit(peer.ip()) else {
                        continue; // every slot in question is answering: close this one
                    };
                    clients.spawn(connection(stream, slot, evicted, Arc::clone(&scraped)));
                }
                Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
            },
        }
    }
    clients.shutdown().await;
    Ok(())
}

/// One connection, one request (`Connection: close`), until answered, evicted or late.
async fn connection(stream: TcpStream, slot: Slot, evicted: Evicted, scraped: Arc<Scraped>) {
    let slot = Arc::new(slot);
    let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
        slot.answering();
        let response = respond(req.method(), req.uri(), || scraped.render());
        async move { Ok::<_, Infallible>(response) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .keep_alive(false)
        .title_case_headers(true)
        .serve_connection(TokioIo::new(stream), service);
    // A failed, evicted or late connection concerns only that client.
    tokio::select! {
        _ = tokio::time::timeout(CONN_TIMEOUT, conn) => {}
        _ = evicted => {}
    }
}

/// The answer to a request; `body` renders the metrics when asked for. Only the
/// origin form (`/path`) is served: a full URL or `*` is a bad request.
pub fn respond(
    method: &Method,
    uri: &Uri,
    body: impl FnOnce() -> Result<String, std::fmt::Error>,
) -> Response<Full<Bytes>> {
    if uri.authority().is_some() || !uri.path().starts_with('/') {
        return plain(
            StatusCode::BAD_REQUEST,
            "text/plain",
            "bad request\n".into(),
        );
    }
    if method != Method::GET && method != Method::HEAD {
        let mut r = plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET and HEAD\n".into(),
        );
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    // For HEAD hyper writes the same head (Content-Length included) and no body.
    match uri.path() {
        PATH => match body() {
            Ok(text) => plain(StatusCode::OK, CONTENT_TYPE, text),
            Err(_) => plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain",
                "the metrics could not be encoded\n".into(),
            ),
        },
        "/" => plain(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            "c1m live view: metrics at /metrics\n".into(),
        ),
        _ => plain(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: try /metrics\n".into(),
        ),
    }
}

fn plain(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let len = body.len();
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    h.insert(header::CONTENT_LENGTH, header::HeaderValue::from(len));
    h.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    h.insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    r
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use http_body_util::BodyExt as _;

    use super::*;

    /// Status, header lines and body of the answer to `method target`.
    async fn answer(
        method: &str,
        target: &str,
        body: fn() -> Result<String, std::fmt::Error>,
    ) -> (u16, String, String) {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let uri: Uri = target.parse().unwrap();
        let r = respond(&method, &uri, body);
        let status = r.status().as_u16();
        let heads = r
            .headers()
            .iter()
            .map(|(k, v)| format!("{k}: {}\n", v.to_str().unwrap()))
            .collect();
        let bytes = r.into_body().collect().await.unwrap().to_bytes();
        (status, heads, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn http_answers() {
        let body = || Ok("c1m_x 1\n".to_owned());
        let (status, heads, text) = answer("GET", "/metrics", body).await;
        assert_eq!(status, 200);
        assert!(
            heads.contains(&format!("content-type: {CONTENT_TYPE}\n")),
            "{heads}"
        );
        assert!(heads.contains("content-length: 8\n"), "{heads}");
        assert!(heads.contains("connection: close\n"), "{heads}");
        assert_eq!(text, "c1m_x 1\n");
        let (status, heads, _) = answer("HEAD", "/metrics?x=1", body).await;
        assert_eq!(status, 200);
        assert!(heads.contains("content-length: 8\n"), "{heads}");
        for (method, target, want) in [
            ("GET", "/nope", 404),
            ("GET", "/../metrics", 404),
            ("POST", "/metrics", 405),
            ("GET", "http://x/metrics", 400),
            ("OPTIONS", "*", 400),
            ("GET", "/", 200),
        ] {
            assert_eq!(
                answer(method, target, body).await.0,
                want,
                "{method} {target}"
            );
        }
        let (_, heads, _) = answer("POST", "/metrics", body).await;
        assert!(heads.contains("allow: GET, HEAD\n"), "{heads}");
        let failed = answer("GET", "/metrics", || Err(std::fmt::Error)).await;
        assert_eq!(failed.0, 500);
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
