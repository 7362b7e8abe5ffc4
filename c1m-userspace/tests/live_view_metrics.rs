//! `--metrics-addr` end to end: the Prometheus endpoint on a real socket, scraped with a
//! raw HTTP/1.1 GET and with curl when it is installed; every answer is checked line by
//! line against the exposition syntax; a taken port fails with one line naming the flag.
#![allow(clippy::unwrap_used)] // panics are the assertions in tests

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use c1m::lab::{
    model::LiveState,
    view::{demo, prometheus},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    sync::oneshot,
    time::timeout,
};

const LIMIT: Duration = Duration::from_secs(10);

/// One request on a fresh connection; the whole answer (the server closes after it).
async fn request(addr: SocketAddr, raw: &str) -> String {
    let mut s = timeout(LIMIT, TcpStream::connect(addr))
        .await
        .unwrap()
        .unwrap();
    s.write_all(raw.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    timeout(LIMIT, s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    String::from_utf8(out).unwrap()
}

fn split(resp: &str) -> (&str, &str) {
    resp.split_once("\r\n\r\n").unwrap()
}

fn value(body: &str, series: &str) -> f64 {
    let parsed = prometheus::check::parse(body).unwrap_or_else(|e| panic!("{e}\n{body}"));
    let line = body
        .lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{body}"));
    assert!(!parsed.is_empty());
    line[series.len() + 1..].parse().unwrap()
}

struct Running {
    addr: SocketAddr,
    state: Arc<Mutex<LiveState>>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn start() -> Running {
    let listener = prometheus::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let state = Arc::new(Mutex::new(demo::state()));
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(prometheus::serve_listener(
        listener,
        Arc::clone(&state),
        async move {
            let _ = stopped.await;
        },
    ));
    Running {
        addr,
        state,
        stop: Some(stop),
        task,
    }
}

#[tokio::test]
async fn scrape_over_a_real_socket() {
    let mut r = start().await;
    // A client that connects and says nothing must not hold up the others.
    let _silent = TcpStream::connect(r.addr).await.unwrap();

    let resp = request(
        r.addr,
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n",
    )
    .await;
    let (head, body) = split(&resp);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains(&format!("Content-Type: {}", prometheus::CONTENT_TYPE)));
    assert!(
        head.contains(&format!("Content-Length: {}", body.len())),
        "{head}"
    );
    assert_eq!(
        value(body, r#"c1m_connections_open{side="server",source="app"}"#),
        600_000.0
    );
    assert_eq!(
        value(
            body,
            r#"c1m_connections_open{side="server",source="kernel"}"#
        ),
        demo::SERVER_KERNEL_ESTABLISHED as f64
    );
    assert_eq!(
        value(body, r#"c1m_accept_queue_overflows_total{port="8003"}"#),
        37.0
    );

    // The next scrape sees the state as it is now.
    r.state
        .lock()
        .unwrap()
        .server
        .as_mut()
        .unwrap()
        .counters
        .open = 600_001;
    {
        // No observer: no kernel view, and so no kernel figures.
        let mut state = r.state.lock().unwrap();
        state.kernel = None;
        demo::refigure(&mut state);
    }
    let resp = request(r.addr, "GET /metrics HTTP/1.0\r\n\r\n").await;
    let (_, body) = split(&resp);
    assert_eq!(
        value(body, r#"c1m_connections_open{side="server",source="app"}"#),
        600_001.0
    );
    assert_eq!(value(body, "c1m_kernel_view_available"), 0.0);
    assert!(!body.contains("source=\"kernel\""), "{body}");

    // Other paths and methods.
    let resp = request(r.addr, "GET /other HTTP/1.1\r\n\r\n").await;
    assert!(resp.starts_with("HTTP/1.1 404 Not Found\r\n"), "{resp}");
    let resp = request(r.addr, "DELETE /metrics HTTP/1.1\r\n\r\n").await;
    assert!(
        resp.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
        "{resp}"
    );
    assert!(resp.contains("Allow: GET, HEAD\r\n"));

    // curl, when installed, as a scraper would.
    let url = format!("http://{}/metrics", r.addr);
    let curl = tokio::task::spawn_blocking(move || {
        std::process::Command::new("curl")
            .args(["-sS", "--fail", "--max-time", "10", &url])
            .output()
    })
    .await
    .unwrap();
    match curl {
        Ok(out) => {
            assert!(
                out.status.success(),
                "curl: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let body = String::from_utf8(out.stdout).unwrap();
            assert_eq!(
                value(&body, r#"c1m_connections_open{side="client",source="app"}"#),
                demo::CLIENT_APP_OPEN as f64
            );
        }
        Err(e) => eprintln!("curl not run ({e}); the raw GETs above cover the endpoint"),
    }

    // Shutdown ends the server promptly.
    r.stop.take().unwrap().send(()).unwrap();
    timeout(LIMIT, r.task).await.unwrap().unwrap().unwrap();
}

#[tokio::test]
async fn taken_port_fails_with_one_line_naming_the_flag() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let state = Arc::new(Mutex::new(LiveState::default()));
    let err = prometheus::serve(addr, state, std::future::pending::<()>())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("--metrics-addr {addr}: address in use")
    );
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
}

#[tokio::test]
async fn foreign_address_fails_with_one_line_naming_the_flag() {
    // TEST-NET-1 is never an address of this host; binding it fails without any traffic.
    let addr: SocketAddr = "192.0.2.1:9100".parse().unwrap();
    let err = prometheus::bind(addr).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "--metrics-addr 192.0.2.1:9100: address not available on this host"
    );
}
