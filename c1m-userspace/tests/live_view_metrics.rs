//! `--metrics-addr` end to end: the Prometheus endpoint on a real socket, scraped with a
//! raw HTTP/1.1 GET and with curl when it is installed; every answer is checked line by
//! line against the exposition syntax; a taken port fails with one line naming the flag;
//! hundreds of slow clients from many loopback addresses do not keep a scraper out.
#![allow(clippy::unwrap_used)] // panics are the assertions in tests

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use c1m::view::{demo, live_state::LiveState, prometheus};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpSocket, TcpStream},
    sync::oneshot,
    task::JoinSet,
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

/// The body of a whole 200 answer to a scrape of the demo state.
fn full_scrape(resp: &str) -> &str {
    let (head, body) = split(resp);
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
    body
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
    // Per port, as `--metrics-per-port` asks.
    let task = tokio::spawn(prometheus::serve_listener(
        listener,
        Arc::clone(&state),
        prometheus::Detail { per_port: true },
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
    let body = full_scrape(&resp);
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
        // The figures are computed from the sources once per tick: recompute them.
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
    // A series once scraped stays, at its last value, until the endpoint closes.
    assert_eq!(
        value(
            body,
            r#"c1m_connections_open{side="server",source="kernel"}"#
        ),
        demo::SERVER_KERNEL_ESTABLISHED as f64
    );

    // Other paths and methods.
    let resp = request(r.addr, "GET /other HTTP/1.1\r\n\r\n").await;
    assert!(resp.starts_with("HTTP/1.1 404 Not Found\r\n"), "{resp}");
    let resp = request(r.addr, "DELETE /metrics HTTP/1.1\r\n\r\n").await;
    assert!(
        resp.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
        "{resp}"
    );
    assert!(resp.contains("Allow: GET, HEAD\r\n"));
    let resp = request(r.addr, "HEAD /metrics?x=1 HTTP/1.1\r\n\r\n").await;
    let (head, body) = split(&resp);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        head.contains("Content-Length: ") && body.is_empty(),
        "{resp}"
    );
    for traversal in [
        "GET /../metrics HTTP/1.1\r\n\r\n",
        "GET /metrics/../../etc/passwd HTTP/1.1\r\n\r\n",
        "GET //metrics HTTP/1.1\r\n\r\n",
    ] {
        let resp = request(r.addr, traversal).await;
        assert!(resp.starts_with("HTTP/1.1 404 Not Found\r\n"), "{resp}");
    }
    for bad in [
        "hello\r\n\r\n",
        "GET metrics HTTP/1.1\r\n\r\n",
        "GET http://localhost/metrics HTTP/1.1\r\n\r\n",
        "GET /metrics HTTP/9.9\r\n\r\n",
    ] {
        let resp = request(r.addr, bad).await;
        assert!(
            resp.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{bad}: {resp}"
        );
    }
    let huge = format!(
        "GET /metrics HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(64 * 1024)
    );
    let resp = request(r.addr, &huge).await;
    assert!(
        resp.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
        "{resp}"
    );

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
    let err = prometheus::serve(
        addr,
        state,
        prometheus::Detail::default(),
        std::future::pending::<()>(),
    )
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

/// Attackers come from 127.0.0.2 up to this address's last byte + 1: each its own peer.
const ATTACK_PEERS: u8 = 200;
/// Connections each attacking peer keeps trickling at once.
const ATTACK_CONNS_PER_PEER: usize = 2;
/// The attack's hard bound, whatever the scrapes do.
const ATTACK_MAX: Duration = Duration::from_secs(30);
/// Scrapes made while the attack runs; every one must be answered.
const SCRAPES: usize = 10;

/// Slow clients, each connection sending a request head one byte a second and never
/// finishing it, and reconnecting when dropped. Dropped (or at [`ATTACK_MAX`]) it stops.
struct Attack {
    stop: Arc<AtomicBool>,
    tasks: JoinSet<()>,
    /// Attacking connections that have connected and sent their first byte at least once.
    started: Arc<AtomicUsize>,
}

impl Attack {
    fn start(addr: SocketAddr) -> Attack {
        let stop = Arc::new(AtomicBool::new(false));
        let started = Arc::new(AtomicUsize::new(0));
        let until = Instant::now() + ATTACK_MAX;
        let mut tasks = JoinSet::new();
        for peer in 2..2 + ATTACK_PEERS {
            for _ in 0..ATTACK_CONNS_PER_PEER {
                let from = IpAddr::V4(Ipv4Addr::new(127, 0, 0, peer));
                let (stop, started) = (Arc::clone(&stop), Arc::clone(&started));
                tasks.spawn(trickle(addr, from, until, stop, started));
            }
        }
        Attack {
            stop,
            tasks,
            started,
        }
    }

    /// Waits until every attacking connection has connected and sent a byte.
    async fn underway(&self) {
        let all = usize::from(ATTACK_PEERS) * ATTACK_CONNS_PER_PEER;
        timeout(LIMIT, async {
            while self.started.load(Ordering::Relaxed) < all {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "only {} of {all} attacking connections got under way",
                self.started.load(Ordering::Relaxed)
            )
        });
    }
}

impl Drop for Attack {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.tasks.abort_all();
    }
}

async fn connect_from(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    socket.connect(to).await
}

/// One slow client: a head that never ends, one byte a second; reconnects when dropped.
async fn trickle(
    addr: SocketAddr,
    from: IpAddr,
    until: Instant,
    stop: Arc<AtomicBool>,
    started: Arc<AtomicUsize>,
) {
    let prefix = b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
    let mut counted = false;
    let going = || !stop.load(Ordering::Relaxed) && Instant::now() < until;
    while going() {
        if let Ok(mut s) = connect_from(from, addr).await {
            let bytes = prefix.iter().copied().chain(std::iter::repeat(b'a'));
            for byte in bytes {
                if !going() || s.write_all(&[byte]).await.is_err() {
                    break;
                }
                if !counted {
                    counted = true;
                    started.fetch_add(1, Ordering::Relaxed);
                }
                // A second before the next byte, unless the server closes meanwhile.
                let mut buf = [0u8; 256];
                match timeout(Duration::from_secs(1), s.read(&mut buf)).await {
                    Err(_) => {}
                    Ok(_) => break, // closed, reset, or answered: reconnect
                }
            }
        }
        // A pause before reconnecting, so the attack is slow clients, not a connect flood.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A scrape from `from`: the whole answer, or why there is none.
async fn scrape_from(from: IpAddr, addr: SocketAddr) -> Result<String, String> {
    let scrape = async {
        let mut s = connect_from(from, addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut out = Vec::new();
        s.read_to_end(&mut out)
            .await
            .map_err(|e| format!("read: {e} after {} bytes", out.len()))?;
        String::from_utf8(out).map_err(|e| format!("not UTF-8: {e}"))
    };
    timeout(Duration::from_secs(5), scrape)
        .await
        .map_err(|_| "no answer within 5 s".to_owned())?
}

/// Issue 30, case 3: 200 peers (127.0.0.2 to .201), two slow connections each, trickle
/// request heads and reconnect when dropped; scrapes from 127.0.0.1 and from another
/// address each get the whole 200 answer, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_do_not_hold_the_endpoint_shut() {
    let mut r = start().await;
    let attack = Attack::start(r.addr);
    attack.underway().await;
    let scrapers = [
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 250)),
    ];
    let mut failed = Vec::new();
    for i in 0..SCRAPES {
        let from = scrapers[i % scrapers.len()];
        match scrape_from(from, r.addr).await {
            Ok(resp) if resp.starts_with("HTTP/1.1 200 OK\r\n") => {
                full_scrape(&resp);
            }
            Ok(resp) if resp.is_empty() => {
                failed.push(format!("scrape {i} from {from}: closed with no answer"));
            }
            Ok(resp) => failed.push(format!(
                "scrape {i} from {from}: {}",
                resp.lines().next().unwrap_or("")
            )),
            Err(why) => failed.push(format!("scrape {i} from {from}: {why}")),
        }
        // Spread the scrapes over the attack, past the server's head deadline, when
        // the dropped attackers reconnect.
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    drop(attack);
    assert!(
        failed.is_empty(),
        "{} of {SCRAPES} scrapes failed while slow clients held the endpoint:\n{}",
        failed.len(),
        failed.join("\n")
    );
    r.stop.take().unwrap().send(()).unwrap();
    timeout(LIMIT, r.task).await.unwrap().unwrap().unwrap();
}
