//! `--metrics-addr ADDR`: the live state in the Prometheus text exposition format
//! (version 0.0.4), served by a tiny HTTP/1.1 server on a tokio listener.
//!
//! Conventions: one prefix `c1m_`; base units (`_seconds`, `_bytes`); `_total` for
//! counters; labels `side` (server, client, other), `source` (kernel, app), `state`,
//! `port` (listeners), `cause`; never a label per connection, so the number of series is
//! bounded whatever the connection count. A figure whose source is missing is left out
//! (no series), never exported as 0. Latencies are summaries built from the app's
//! percentiles (quantiles 0.5 … 0.999, `_sum`, `_count`).

use std::{
    fmt::Write as _,
    future::Future,
    io,
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use c1m_common::{side, tcp_state};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::Semaphore,
    task::JoinSet,
};

use crate::{
    lab::figures::Source,
    lab::model::LiveState,
    observer::{KernelView, view::GAUGE_STATES},
    workload::stats::{AppSnapshot, Percentiles},
};

/// The flag this server answers to, named in its errors.
pub const FLAG: &str = "--metrics-addr";
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

/// Latency histograms (µs in the app) and their metric names (seconds).
const LATENCIES: [(&str, &str, &str); 4] = [
    (
        "connect_us",
        "c1m_connect_latency_seconds",
        "Time from connect() to an open connection (WebSocket: the 101), per connection.",
    ),
    (
        "echo_rtt_us",
        "c1m_echo_rtt_seconds",
        "Echo round-trip time, verified byte for byte.",
    ),
    (
        "push_message_us",
        "c1m_push_latency_seconds",
        "Push receive time minus the time the server wrote that connection's frame.",
    ),
    (
        "push_fanout_us",
        "c1m_push_fanout_seconds",
        "Push receive time minus the time the broadcast began.",
    ),
];

const QUANTILES: [&str; 6] = ["0.5", "0.75", "0.95", "0.98", "0.99", "0.999"];

/// The whole exposition for one scrape.
pub fn render(state: &LiveState) -> String {
    let mut x = Exposition::default();
    run_metrics(&mut x, state);
    app_metrics(&mut x, state);
    if let Some(k) = &state.kernel {
        kernel_metrics(&mut x, k);
    }
    latency_metrics(&mut x, state);
    x.finish()
}

fn sides(state: &LiveState) -> [(&'static str, Option<&AppSnapshot>); 2] {
    [
        ("server", state.server.as_ref()),
        ("client", state.client.as_ref()),
    ]
}

fn run_metrics(x: &mut Exposition, state: &LiveState) {
    x.family(
        "c1m_run_info",
        Kind::Gauge,
        "The lab's current phase (value always 1).",
    )
    .sample(&[("phase", &state.phase)], 1u64);
    if state.target > 0 {
        x.family(
            "c1m_target_connections",
            Kind::Gauge,
            "Connections the run aims to hold.",
        )
        .sample(&[], state.target);
    }
    x.family(
        "c1m_elapsed_seconds",
        Kind::Gauge,
        "Seconds since the run started.",
    )
    .sample(&[], state.elapsed_s);
    x.family(
        "c1m_kernel_view_available",
        Kind::Gauge,
        "1 when the kernel observer is running (kernel series present), else 0.",
    )
    .sample(&[], u64::from(state.kernel.is_some()));
    let f = x.family(
        "c1m_app_stats_available",
        Kind::Gauge,
        "1 when the side's c1m stats are read (app series present), else 0.",
    );
    for (side, app) in sides(state) {
        f.sample(&[("side", side)], u64::from(app.is_some()));
    }
    if let Some(b) = state.figures.mem_available_bytes {
        x.family(
            "c1m_memory_available_bytes",
            Kind::Gauge,
            "Free memory of the box (/proc/meminfo MemAvailable).",
        )
        .sample(&[], b);
    }
    let f = x.family(
        "c1m_figures_age_seconds",
        Kind::Gauge,
        "How old each source's figures are (stale past 1 s, two ticks of the live view).",
    );
    for source in Source::ALL {
        if let Some(r) = state.figures.readings.of(source) {
            f.sample(&[("source", source.name())], r.age_s);
        }
    }
}

fn app_metrics(x: &mut Exposition, state: &LiveState) {
    let f = x.family(
        "c1m_connections_open",
        Kind::Gauge,
        "Open connections: the app's own count, or the kernel's ESTABLISHED sockets.",
    );
    for (side, app) in sides(state) {
        if let Some(a) = app {
            f.sample(&[("side", side), ("source", "app")], a.counters.open);
        }
        if let Some(k) = &state.kernel {
            let n = k.side(side_index(side)).state(tcp_state::ESTABLISHED);
            f.sample(&[("side", side), ("source", "kernel")], n);
        }
    }
    let f = x.family(
        "c1m_connections_established_total",
        Kind::Counter,
        "Connections that opened: app (server accepted, client connected) since it \
         started; kernel (reached ESTABLISHED) since the observer attached.",
    );
    for (side, app) in sides(state) {
        if let Some(a) = app {
            let n = if side == "server" {
                a.counters.accepted
            } else {
                a.counters.connected
            };
            f.sample(&[("side", side), ("source", "app")], n);
        }
        if let Some(k) = &state.kernel {
            let n = k.side(side_index(side)).established_total;
            f.sample(&[("side", side), ("source", "kernel")], n);
        }
    }
    if let Some(c) = &state.client {
        x.family(
            "c1m_connections_in_flight",
            Kind::Gauge,
            "Client connects and handshakes not finished.",
        )
        .sample(&[("side", "client")], c.counters.in_flight);
        x.family(
            "c1m_connect_attempts_total",
            Kind::Counter,
            "Client connects started.",
        )
        .sample(&[("side", "client")], c.counters.attempted);
    }
    let present: Vec<_> = sides(state)
        .into_iter()
        .filter_map(|(s, a)| Some((s, a?)))
        .collect();
    let f = x.family(
        "c1m_connect_failures_total",
        Kind::Counter,
        "Connections that never opened, by cause (client: connect or handshake; server: accept).",
    );
    for (side, a) in &present {
        for (cause, n) in a.counters.failures.iter() {
            f.sample(&[("side", side), ("cause", cause)], n);
        }
    }
    let f = x.family(
        "c1m_connections_closed_total",
        Kind::Counter,
        "Open connections that ended, by cause.",
    );
    for (side, a) in &present {
        for (cause, n) in a.counters.closed.iter() {
            f.sample(&[("side", side), ("cause", cause)], n);
        }
    }
    let f = x.family(
        "c1m_protocol_errors_total",
        Kind::Counter,
        "Protocol violations seen, by the answer the RFC prescribes.",
    );
    for (side, a) in &present {
        for (cause, n) in a.counters.protocol_errors.iter() {
            f.sample(&[("side", side), ("cause", cause)], n);
        }
    }
    let f = x.family(
        "c1m_received_bytes_total",
        Kind::Counter,
        "Bytes the app read.",
    );
    for (side, a) in &present {
        f.sample(&[("side", side)], a.counters.bytes_in);
    }
    let f = x.family(
        "c1m_sent_bytes_total",
        Kind::Counter,
        "Bytes the app wrote.",
    );
    for (side, a) in &present {
        f.sample(&[("side", side)], a.counters.bytes_out);
    }
    let f = x.family(
        "c1m_push_frames_total",
        Kind::Counter,
        "Push frames: written by the server, received by the client.",
    );
    for (side, a) in &present {
        let n = if *side == "server" {
            a.counters.pushes_sent
        } else {
            a.counters.pushes_received
        };
        f.sample(&[("side", side)], n);
    }
    let f = x.family(
        "c1m_workers_alive",
        Kind::Gauge,
        "Worker shards alive (of c1m_workers).",
    );
    for (side, a) in &present {
        f.sample(&[("side", side)], a.workers.alive);
    }
    let f = x.family("c1m_workers", Kind::Gauge, "Worker shards started.");
    for (side, a) in &present {
        f.sample(&[("side", side)], a.workers.count);
    }
    let f = x.family(
        "c1m_process_resident_bytes",
        Kind::Gauge,
        "Resident memory of the side's processes (supervisor plus live workers).",
    );
    for (side, a) in &present {
        if a.rss_bytes > 0 {
            f.sample(&[("side", side)], a.rss_bytes);
        }
    }
    if let Some(rss) = state.history.last().and_then(|s| s.observer_rss_bytes) {
        f.sample(&[("side", "observer")], rss);
    }
    let f = x.family(
        "c1m_user_bytes_per_connection",
        Kind::Gauge,
        "(Resident memory - memory before any connection) / open connections.",
    );
    for (side, a) in &present {
        if let Some(b) = a.rss_per_connection_bytes {
            f.sample(&[("side", side)], b);
        }
    }
    let f = x.family(
        "c1m_process_cpu_seconds_total",
        Kind::Counter,
        "CPU time of the side's processes, by mode.",
    );
    for (side, a) in &present {
        f.sample(&[("side", side), ("mode", "user")], a.cpu_user_s);
        f.sample(&[("side", side), ("mode", "system")], a.cpu_sys_s);
    }
}

fn side_index(name: &str) -> u32 {
    match name {
        "server" => side::SERVER,
        "client" => side::CLIENT,
        _ => side::OTHER,
    }
}

fn kernel_metrics(x: &mut Exposition, k: &KernelView) {
    let f = x.family(
        "c1m_tcp_sockets",
        Kind::Gauge,
        "Watched TCP sockets per side and state, as the kernel counts them.",
    );
    for (i, side) in side::NAMES.iter().enumerate() {
        let sv = k.side(i as u32);
        for state in GAUGE_STATES {
            let name = crate::observer::view::state_key(state);
            f.sample(&[("side", side), ("state", &name)], sv.state(state));
        }
    }
    let f = x.family(
        "c1m_tcp_transitions_total",
        Kind::Counter,
        "TCP state transitions of watched sockets since the observer attached.",
    );
    for (i, side) in side::NAMES.iter().enumerate() {
        f.sample(&[("side", side)], k.side(i as u32).transitions_total);
    }
    let f = x.family(
        "c1m_tcp_events_total",
        Kind::Counter,
        "Handshake and error signals of watched sockets since the observer attached.",
    );
    for (i, side) in side::NAMES.iter().enumerate() {
        for (e, event) in c1m_common::event::NAMES.iter().enumerate() {
            f.sample(
                &[("side", side), ("event", event)],
                k.side(i as u32).event(e as u32),
            );
        }
    }
    let f = x.family(
        "c1m_accept_queue_depth",
        Kind::Gauge,
        "Connections waiting in the port's accept queues (established, not yet accepted).",
    );
    for l in &k.listeners {
        f.sample(&[("port", &l.port.to_string())], l.queue_depth);
    }
    let f = x.family(
        "c1m_accept_queue_limit",
        Kind::Gauge,
        "Accept queue limits of the port's listeners, summed (listen backlog, capped by somaxconn).",
    );
    for l in &k.listeners {
        f.sample(&[("port", &l.port.to_string())], l.queue_limit);
    }
    let f = x.family(
        "c1m_accept_queue_overflows_total",
        Kind::Counter,
        "Handshakes the port's listeners dropped since the observer attached, mostly because \
         the accept queue was full (the kernel's ListenDrops for this port).",
    );
    for l in &k.listeners {
        f.sample(&[("port", &l.port.to_string())], l.accept_queue_overflows);
    }
    let f = x.family(
        "c1m_accept_queue_overflow_acks_total",
        Kind::Counter,
        "Final handshake ACKs dropped by a full accept queue: those clients believe they are connected.",
    );
    for l in &k.listeners {
        if let Some(n) = l.overflow_acks {
            f.sample(&[("port", &l.port.to_string())], n);
        }
    }
    let f = x.family(
        "c1m_listen_sockets",
        Kind::Gauge,
        "Listening sockets on the port (several with SO_REUSEPORT).",
    );
    for l in &k.listeners {
        f.sample(&[("port", &l.port.to_string())], l.sockets);
    }
    if let Some(m) = &k.memory {
        let mems = [
            ("server", &m.server),
            ("client", &m.client),
            ("other", &m.other),
        ];
        let f = x.family(
            "c1m_kernel_socket_bytes",
            Kind::Gauge,
            "Kernel memory of the side's watched sockets (slab objects plus buffers), at the last socket walk.",
        );
        for (side, sm) in mems {
            f.sample(&[("side", side)], sm.total_bytes);
        }
        let f = x.family(
            "c1m_kernel_socket_buffer_bytes",
            Kind::Gauge,
            "Receive, send and forward-allocated buffer bytes of the side's watched sockets.",
        );
        for (side, sm) in mems {
            f.sample(&[("side", side)], sm.buffer_bytes);
        }
        let f = x.family(
            "c1m_kernel_sockets",
            Kind::Gauge,
            "Watched sockets seen by the last socket walk.",
        );
        for (side, sm) in mems {
            f.sample(&[("side", side)], sm.sockets);
        }
    }
    if let Some(age) = k.walk.age_s {
        x.family(
            "c1m_kernel_walk_age_seconds",
            Kind::Gauge,
            "Seconds since the last full socket walk ended.",
        )
        .sample(&[], age);
    }
    x.family(
        "c1m_kernel_walk_duration_seconds",
        Kind::Gauge,
        "Duration of the last full socket walk.",
    )
    .sample(&[], k.walk.duration_ms / 1e3);
    x.family(
        "c1m_kernel_map_errors_total",
        Kind::Counter,
        "Counter updates lost because a kernel map was full (should stay 0).",
    )
    .sample(&[], k.map_errors);
    x.family(
        "c1m_kernel_unavailable_figures",
        Kind::Gauge,
        "Figures this kernel cannot give (missing hooks or fields); see the live view.",
    )
    .sample(&[], k.unavailable.len());
}

fn latency_metrics(x: &mut Exposition, state: &LiveState) {
    for (hist, name, help) in LATENCIES {
        let f = x.family(name, Kind::Summary, help);
        for (side, app) in sides(state) {
            let Some(p) = app.and_then(|a| a.percentiles.get(hist)) else {
                continue;
            };
            for (q, v) in QUANTILES.iter().zip(quantile_values(p)) {
                let v = if p.count == 0 {
                    f64::NAN
                } else {
                    v as f64 / 1e6
                };
                f.sample(&[("side", side), ("quantile", q)], v);
            }
            f.sample_suffixed("_sum", &[("side", side)], p.mean * p.count as f64 / 1e6);
            f.sample_suffixed("_count", &[("side", side)], p.count);
        }
    }
}

fn quantile_values(p: &Percentiles) -> [u64; 6] {
    [p.p50, p.p75, p.p95, p.p98, p.p99, p.p999]
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Gauge,
    Counter,
    Summary,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
            Kind::Summary => "summary",
        }
    }
}

/// A sample value: integers print exactly, floats in the format's spelling.
pub trait Value {
    fn text(&self) -> String;
}

macro_rules! int_value {
    ($($t:ty),*) => {$(impl Value for $t { fn text(&self) -> String { self.to_string() } })*};
}
int_value!(u32, u64, i64, usize);

impl Value for f64 {
    fn text(&self) -> String {
        if self.is_nan() {
            "NaN".into()
        } else if self.is_infinite() {
            if *self > 0.0 { "+Inf" } else { "-Inf" }.into()
        } else {
            self.to_string()
        }
    }
}

struct Family {
    name: &'static str,
    kind: Kind,
    help: &'static str,
    /// Rendered sample lines.
    lines: Vec<String>,
}

impl Family {
    fn sample(&mut self, labels: &[(&str, &str)], v: impl Value) {
        self.sample_suffixed("", labels, v);
    }

    fn sample_suffixed(&mut self, suffix: &str, labels: &[(&str, &str)], v: impl Value) {
        let mut line = format!("{}{suffix}", self.name);
        if !labels.is_empty() {
            line.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    line.push(',');
                }
                let _ = write!(line, "{k}=\"{}\"", escape_label(val));
            }
            line.push('}');
        }
        line.push(' ');
        line.push_str(&v.text());
        self.lines.push(line);
    }
}

/// Families in the order they were declared; one with no sample is left out.
#[derive(Default)]
struct Exposition {
    families: Vec<Family>,
}

impl Exposition {
    fn family(&mut self, name: &'static str, kind: Kind, help: &'static str) -> &mut Family {
        self.families.push(Family {
            name,
            kind,
            help,
            lines: Vec::new(),
        });
        let last = self.families.len() - 1;
        &mut self.families[last]
    }

    fn finish(self) -> String {
        let mut out = String::with_capacity(16 * 1024);
        for f in self.families.iter().filter(|f| !f.lines.is_empty()) {
            let _ = writeln!(out, "# HELP {} {}", f.name, escape_help(f.help));
            let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind.name());
            for l in &f.lines {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }
}

fn escape_label(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

// ---- HTTP ----

/// Binds the metrics listener; errors name the flag, e.g.
/// `--metrics-addr 127.0.0.1:9100: address in use`. Bind early (before a long run starts)
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

/// Parses the flag's value: `HOST:PORT` with an IP host, or `:PORT` for every IPv4
/// address. For clap: `#[arg(long, value_parser = prometheus::parse_addr)]`.
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    let full;
    let text = if let Some(port) = s.strip_prefix(':') {
        full = format!("0.0.0.0:{port}");
        full.as_str()
    } else {
        s
    };
    text.parse().map_err(|_| {
        format!("{FLAG} {s}: not an IP address and port (e.g. 127.0.0.1:9100 or :9100)")
    })
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
pub fn respond(head: &[u8], body: impl FnOnce() -> String) -> Vec<u8> {
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
        "/metrics" => http(200, "OK", CONTENT_TYPE, &body(), with_body, &[]),
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

/// A strict reader of the text exposition format, for tests (here and in
/// `tests/live_view_metrics.rs`): checks every line's syntax, HELP and TYPE before the
/// samples of each family, families contiguous and declared once, and every series
/// (name plus label set) unique. Returns the samples as (name, sorted labels, value).
pub mod check {
    use std::collections::{BTreeMap, BTreeSet};

    pub type Series = (String, BTreeMap<String, String>, f64);

    pub fn parse(text: &str) -> Result<Vec<Series>, String> {
        let mut out = Vec::new();
        let mut types: BTreeMap<String, String> = BTreeMap::new();
        let mut helped: BTreeSet<String> = BTreeSet::new();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut finished: BTreeSet<String> = BTreeSet::new();
        let mut current: Option<String> = None;
        if !text.is_empty() && !text.ends_with('\n') {
            return Err("the exposition must end with a newline".into());
        }
        for (no, line) in text.lines().enumerate() {
            let err = |m: &str| format!("line {}: {m}: {line:?}", no + 1);
            if let Some(rest) = line.strip_prefix("# ") {
                let mut parts = rest.splitn(3, ' ');
                let (kw, name, arg) = (
                    parts.next().unwrap_or(""),
                    parts.next().unwrap_or(""),
                    parts.next().unwrap_or(""),
                );
                if !valid_name(name) {
                    return Err(err("bad metric name"));
                }
                if current.as_deref() != Some(name) {
                    if let Some(c) = current.take() {
                        finished.insert(c);
                    }
                    if finished.contains(name) {
                        return Err(err("family declared twice or not contiguous"));
                    }
                    current = Some(name.to_owned());
                }
                match kw {
                    "HELP" => {
                        if !helped.insert(name.to_owned()) || arg.is_empty() {
                            return Err(err("HELP twice or empty"));
                        }
                    }
                    "TYPE" => {
                        if !["counter", "gauge", "summary", "histogram", "untyped"].contains(&arg) {
                            return Err(err("unknown type"));
                        }
                        if types.insert(name.to_owned(), arg.to_owned()).is_some() {
                            return Err(err("TYPE twice"));
                        }
                    }
                    _ => return Err(err("unknown comment keyword")),
                }
                continue;
            }
            if line.starts_with('#') || line.trim().is_empty() {
                return Err(err("stray comment or blank line"));
            }
            let (name, labels, value) = sample(line).map_err(|m| err(&m))?;
            let family = family_of(&name, &types).ok_or_else(|| err("sample before its TYPE"))?;
            if current.as_deref() != Some(family.as_str()) {
                return Err(err("sample outside its family's block"));
            }
            let kind = &types[&family];
            if kind == "counter" && !family.ends_with("_total") {
                return Err(err("counter without _total"));
            }
            if kind == "summary" && name == family && !labels.contains_key("quantile") {
                return Err(err("summary sample without quantile"));
            }
            let key = format!("{name}{labels:?}");
            if !seen.insert(key) {
                return Err(err("duplicate series"));
            }
            out.push((name, labels, value));
        }
        Ok(out)
    }

    fn family_of(name: &str, types: &BTreeMap<String, String>) -> Option<String> {
        if types.contains_key(name) {
            return Some(name.to_owned());
        }
        for suffix in ["_sum", "_count", "_bucket"] {
            if let Some(base) = name.strip_suffix(suffix)
                && types
                    .get(base)
                    .is_some_and(|t| t == "summary" || t == "histogram")
            {
                return Some(base.to_owned());
            }
        }
        None
    }

    fn valid_name(n: &str) -> bool {
        let mut chars = n.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    }

    fn valid_label_name(n: &str) -> bool {
        valid_name(n) && !n.contains(':') && !n.starts_with("__")
    }

    fn sample(line: &str) -> Result<(String, BTreeMap<String, String>, f64), String> {
        let name_end = line.find(['{', ' ']).ok_or_else(|| "no value".to_owned())?;
        let name = &line[..name_end];
        if !valid_name(name) {
            return Err("bad metric name".into());
        }
        let mut labels = BTreeMap::new();
        let mut rest = &line[name_end..];
        if let Some(r) = rest.strip_prefix('{') {
            rest = r;
            loop {
                if let Some(r) = rest.strip_prefix('}') {
                    rest = r;
                    break;
                }
                let eq = rest.find('=').ok_or("label without =")?;
                let lname = &rest[..eq];
                if !valid_label_name(lname) {
                    return Err(format!("bad label name {lname:?}"));
                }
                let r = rest[eq + 1..]
                    .strip_prefix('"')
                    .ok_or("label value not quoted")?;
                let mut value = String::new();
                let mut chars = r.char_indices();
                let end = loop {
                    match chars.next() {
                        None => return Err("unterminated label value".into()),
                        Some((i, '"')) => break i,
                        Some((_, '\\')) => match chars.next() {
                            Some((_, 'n')) => value.push('\n'),
                            Some((_, '\\')) => value.push('\\'),
                            Some((_, '"')) => value.push('"'),
                            _ => return Err("bad escape in label value".into()),
                        },
                        Some((_, c)) => value.push(c),
                    }
                };
                if labels.insert(lname.to_owned(), value).is_some() {
                    return Err(format!("label {lname} twice"));
                }
                rest = &r[end + 1..];
                if let Some(r) = rest.strip_prefix(',') {
                    rest = r;
                } else if !rest.starts_with('}') {
                    return Err("labels not separated by ','".into());
                }
            }
        }
        let value = rest.strip_prefix(' ').ok_or("no space before the value")?;
        let v = match value {
            "NaN" => f64::NAN,
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v if !v.is_empty()
                && v.chars()
                    .all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | 'e' | 'E' | '+')) =>
            {
                v.parse::<f64>().map_err(|_| format!("bad value {v:?}"))?
            }
            v => return Err(format!("bad value {v:?} (timestamps are not written)")),
        };
        Ok((name.to_owned(), labels, v))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::{check::parse, *};
    use crate::lab::view::demo;

    fn find(series: &[check::Series], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        series
            .iter()
            .find(|(n, l, _)| {
                n == name
                    && l.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.2)
    }

    #[test]
    fn demo_exposition_is_valid_and_complete() {
        let text = render(&demo::state());
        let series = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        for (name, labels, _) in &series {
            assert!(name.starts_with("c1m_"), "{name}");
            for k in labels.keys() {
                assert!(
                    [
                        "side", "source", "state", "port", "cause", "event", "mode", "quantile",
                        "phase"
                    ]
                    .contains(&k.as_str()),
                    "unexpected label {k} on {name}"
                );
            }
        }
        let v = |name: &str, labels: &[(&str, &str)]| {
            find(&series, name, labels).unwrap_or_else(|| panic!("no {name}{labels:?}\n{text}"))
        };
        assert_eq!(
            v(
                "c1m_connections_open",
                &[("side", "server"), ("source", "app")]
            ),
            600_000.0
        );
        assert_eq!(
            v(
                "c1m_connections_open",
                &[("side", "server"), ("source", "kernel")]
            ),
            demo::SERVER_KERNEL_ESTABLISHED as f64
        );
        assert_eq!(
            v(
                "c1m_connections_open",
                &[("side", "client"), ("source", "kernel")]
            ),
            demo::CLIENT_KERNEL_ESTABLISHED as f64
        );
        assert_eq!(
            v(
                "c1m_tcp_sockets",
                &[("side", "client"), ("state", "syn_sent")]
            ),
            37.0
        );
        assert_eq!(
            v(
                "c1m_tcp_sockets",
                &[("side", "server"), ("state", "close_wait")]
            ),
            5.0
        );
        assert_eq!(
            v("c1m_tcp_transitions_total", &[("side", "server")]),
            1_801_000.0
        );
        assert_eq!(v("c1m_accept_queue_depth", &[("port", "8001")]), 212.0);
        assert_eq!(
            v("c1m_accept_queue_overflows_total", &[("port", "8003")]),
            37.0
        );
        assert_eq!(
            v("c1m_accept_queue_overflow_acks_total", &[("port", "8003")]),
            30.0
        );
        assert_eq!(
            v("c1m_kernel_socket_bytes", &[("side", "server")]),
            ((demo::SERVER_KERNEL_ESTABLISHED + 15) as u64 * demo::SERVER_BYTES_PER_SOCKET) as f64
        );
        assert_eq!(
            v("c1m_process_resident_bytes", &[("side", "client")]),
            demo::CLIENT_RSS_BYTES as f64
        );
        assert_eq!(
            v(
                "c1m_connect_failures_total",
                &[("side", "client"), ("cause", "refused")]
            ),
            3.0
        );
        assert_eq!(
            v(
                "c1m_connect_latency_seconds",
                &[("side", "client"), ("quantile", "0.99")]
            ),
            0.0024
        );
        assert_eq!(
            v("c1m_connect_latency_seconds_count", &[("side", "client")]),
            demo::CLIENT_CONNECTED as f64
        );
        assert_eq!(v("c1m_run_info", &[("phase", "setup")]), 1.0);
        assert_eq!(v("c1m_kernel_view_available", &[]), 1.0);
        assert_eq!(v("c1m_memory_available_bytes", &[]), (17u64 << 30) as f64);
        assert!(text.contains("# TYPE c1m_connect_latency_seconds summary\n"));
        assert!(text.contains("# TYPE c1m_accept_queue_overflows_total counter\n"));
    }

    #[test]
    fn missing_sources_leave_series_out() {
        let text = render(&LiveState::default());
        let series = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(find(&series, "c1m_kernel_view_available", &[]), Some(0.0));
        assert_eq!(
            find(&series, "c1m_app_stats_available", &[("side", "client")]),
            Some(0.0)
        );
        for (name, ..) in &series {
            assert!(
                !name.starts_with("c1m_connections") && !name.starts_with("c1m_tcp_"),
                "{name} without a source\n{text}"
            );
        }
        // Server only: server app series, no kernel ones, no client ones.
        let mut s = demo::state();
        s.kernel = None;
        s.client = None;
        let text = render(&s);
        let series = parse(&text).unwrap();
        assert!(
            find(
                &series,
                "c1m_connections_open",
                &[("side", "server"), ("source", "app")]
            )
            .is_some()
        );
        assert!(
            find(
                &series,
                "c1m_connections_open",
                &[("side", "server"), ("source", "kernel")]
            )
            .is_none()
        );
        assert!(!text.contains("side=\"client\",source"));
        assert!(!text.contains("c1m_accept_queue"));
    }

    #[test]
    fn empty_histograms_are_nan_quantiles_and_label_values_are_escaped() {
        let mut s = demo::state();
        s.phase = "a \"quoted\"\\phase\nwith newline".into();
        if let Some(c) = s.client.as_mut() {
            c.percentiles
                .insert("push_fanout_us".into(), Percentiles::default());
        }
        let text = render(&s);
        let series = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let q = find(
            &series,
            "c1m_push_fanout_seconds",
            &[("side", "client"), ("quantile", "0.5")],
        );
        assert!(q.unwrap().is_nan());
        assert_eq!(
            find(
                &series,
                "c1m_push_fanout_seconds_count",
                &[("side", "client")]
            ),
            Some(0.0)
        );
        assert!(series.iter().any(|(n, l, _)| n == "c1m_run_info"
            && l.get("phase").map(String::as_str) == Some("a \"quoted\"\\phase\nwith newline")));
    }

    #[test]
    fn the_checker_rejects_what_prometheus_rejects() {
        let ok = "# HELP c1m_x_total x.\n# TYPE c1m_x_total counter\nc1m_x_total{side=\"a\"} 1\n";
        assert!(parse(ok).is_ok());
        for bad in [
            "c1m_x 1\n",                                         // no TYPE
            "# TYPE c1m_x gauge\nc1m_x 1\nc1m_x 2\n",            // duplicate
            "# TYPE c1m_x counter\nc1m_x 1\n",                   // counter name
            "# TYPE c1m_x gauge\nc1m_x{a=\"1\" } 1\n",           // bad label syntax
            "# TYPE c1m_x gauge\nc1m_x{a=1} 1\n",                // unquoted
            "# TYPE c1m_x gauge\nc1m_x one\n",                   // bad value
            "# TYPE c1m_x gauge\n# TYPE c1m_y gauge\nc1m_x 1\n", // not contiguous
            "# TYPE c1m_x gauge\nc1m_x 1",                       // no final newline
            "# TYPE 1x gauge\n",                                 // bad name
            "# TYPE c1m_x gauge\nc1m_x{a=\"\\q\"} 1\n",          // bad escape
            "# TYPE c1m_s summary\nc1m_s 1\n",                   // quantile missing
        ] {
            assert!(parse(bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn http_answers() {
        let body = || "c1m_x 1\n".to_owned();
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
    }

    #[test]
    fn addresses_and_their_errors() {
        assert_eq!(
            parse_addr("127.0.0.1:9100").unwrap(),
            "127.0.0.1:9100".parse().unwrap()
        );
        assert_eq!(
            parse_addr(":9100").unwrap(),
            "0.0.0.0:9100".parse().unwrap()
        );
        assert_eq!(
            parse_addr("[::1]:9100").unwrap(),
            "[::1]:9100".parse().unwrap()
        );
        assert_eq!(
            parse_addr("localhost").unwrap_err(),
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
