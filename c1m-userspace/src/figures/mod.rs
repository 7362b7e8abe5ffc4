//! The figures of a run at one instant, computed once per tick from the three sources
//! (the kernel view, the server's and the client's app snapshots) and read by every view
//! and export: the terminal UI, the plain and JSON lines, Prometheus, `timeseries.csv`
//! and the report. None of them computes a figure of its own.
//!
//! Every source carries the instant it describes ([`Reading`]); a figure is as old as its
//! source, and one older than [`STALE_AFTER_S`] is *stale*: the views dim it, the CSV has
//! its age, the report draws it apart. Rates divide by the sources' own clocks (a late
//! answer makes a long interval, not a spike), and kernel memory between socket walks is
//! *derived* (sockets now × bytes per socket at the last walk) and marked so.

pub(crate) mod churn;
pub(crate) mod counts;
pub(crate) mod heartbeat;
pub(crate) mod kernel_vs_app;
pub(crate) mod latency;
pub(crate) mod messages;
pub(crate) mod phase_latency;

use std::collections::VecDeque;

use c1m_common::tcp_state;
use serde::{Deserialize, Serialize};

use self::{counts::Side, latency::Latencies};
use crate::{
    model::{
        PerConnection, STALE_AFTER_S, Sample, Source, headline_rate, kernel_vs_app::KernelVsApp,
    },
    observer::{KernelView, SideMemory, SideView},
    workload::stats::snapshot::AppSnapshot,
};

/// When a source's figures were true, and how old that is at the figures' instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    pub at_unix_ms: u64,
    pub age_s: f64,
}

impl Reading {
    fn at(at_unix_ms: u64, now_unix_ms: u64) -> Option<Reading> {
        (at_unix_ms > 0).then(|| Reading {
            at_unix_ms,
            age_s: now_unix_ms.saturating_sub(at_unix_ms) as f64 / 1e3,
        })
    }

    pub(crate) fn stale(&self) -> bool {
        self.age_s > STALE_AFTER_S
    }
}

/// The instant of each source (None: that source has not answered yet, or is not there).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Readings {
    pub kernel: Option<Reading>,
    pub kernel_walk: Option<Reading>,
    pub server: Option<Reading>,
    pub client: Option<Reading>,
}

impl Readings {
    pub(crate) fn of(&self, source: Source) -> Option<Reading> {
        match source {
            Source::Kernel => self.kernel,
            Source::KernelWalk => self.kernel_walk,
            Source::Server => self.server,
            Source::Client => self.client,
        }
    }

    /// True when the source is there and stale.
    pub(crate) fn stale(&self, source: Source) -> bool {
        self.of(source).is_some_and(|r| r.stale())
    }
}

/// One side (server or client) as both the kernel and the app see it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SideFigures {
    /// Connections the app holds open now.
    pub app_open: Option<u64>,
    /// Server: accepted since start. Client: connected since start.
    pub app_total: Option<u64>,
    /// Client: connects and handshakes not finished.
    pub app_in_flight: Option<u64>,
    /// Connections that never opened, all causes.
    pub app_failures: Option<u64>,
    /// Client `--churn`: closed, reopened, failed, in progress (all 0 without it).
    pub app_churn: Option<crate::workload::stats::counters::Churn>,
    /// Failures by cause, only the non-zero ones.
    pub app_failure_causes: Vec<(&'static str, u64)>,
    /// TLS handshakes that failed, by reason (the counters' JSON names), only the
    /// non-zero ones: the detail behind the `tls` cause of `app_failure_causes` (a TLS
    /// error on a connection already open counts here too, as a close).
    pub tls_failure_reasons: Vec<(&'static str, u64)>,
    pub kernel_established: Option<i64>,
    /// Connections of the side that reached ESTABLISHED since the observer attached.
    pub kernel_established_total: Option<u64>,
    pub kernel_syn_sent: Option<i64>,
    /// SYN_RECV plus NEW_SYN_RECV (request sockets): half-open handshakes.
    pub kernel_syn_recv: Option<i64>,
    pub kernel_close_wait: Option<i64>,
    pub kernel_time_wait: Option<i64>,
    /// Sockets closing, by state (FIN_WAIT1, FIN_WAIT2, CLOSING, LAST_ACK; CLOSE_WAIT and
    /// TIME_WAIT have their own figures): teardown shows where connections are.
    pub kernel_closing: Vec<(&'static str, i64)>,
    pub transitions_per_s: Option<f64>,
    /// Kernel memory of this side's sockets: at the last walk when it is fresh, else
    /// derived (see [`Figures::kernel_memory_derived`]).
    pub kernel_socket_bytes: Option<u64>,
    /// Kernel bytes per held socket of the side
    /// ([`counts::kernel_bytes_per_held_socket`]: TIME_WAIT and request sockets left
    /// out); `None` until a walk has seen a full socket of the side.
    pub kernel_bytes_per_socket: Option<f64>,
    /// Resident memory of the side's processes.
    pub rss_bytes: Option<u64>,
    /// (RSS - baseline) / open connections.
    pub user_bytes_per_connection: Option<f64>,
    /// CPU seconds, user plus system.
    pub cpu_s: Option<f64>,
    /// The system part of `cpu_s`.
    pub cpu_sys_s: Option<f64>,
    /// CPU seconds per second over the last second of the side's own clock (1.0 = a core).
    pub cpu_cores: Option<f64>,
    /// Threads and open fds of the side's processes (a foreign server's tree).
    pub threads: Option<u64>,
    pub open_fds: Option<u64>,
}

/// States a connection passes through while it closes, besides CLOSE_WAIT and TIME_WAIT.
const CLOSING_STATES: [u32; 4] = [
    tcp_state::FIN_WAIT1,
    tcp_state::FIN_WAIT2,
    tcp_state::CLOSING,
    tcp_state::LAST_ACK,
];

/// TLS failure reasons in words, the counts first: "3 untrusted certificate, 1
/// timeout" (empty when there are none). Every view that names them reads this.
pub(crate) fn tls_reasons_in_words(reasons: &[(&'static str, u64)]) -> String {
    reasons
        .iter()
        .map(|(why, n)| format!("{} {}", crate::fmt::count(*n), why.replace('_', " ")))
        .collect::<Vec<_>>()
        .join(", ")
}

impl SideFigures {
    fn of(
        kernel: Option<&KernelView>,
        side: Side,
        app: Option<&AppSnapshot>,
        derive_memory: bool,
    ) -> SideFigures {
        let k: Option<&SideView> = kernel.map(|k| side.of(k));
        let mem: Option<&SideMemory> = kernel.and_then(|k| k.memory.as_ref()).map(|m| match side {
            Side::Server => &m.server,
            Side::Client => &m.client,
        });
        let c = app.map(|a| &a.counters);
        // Between walks the side's bytes are carried forward by its sockets now, at the
        // last walk's average over every socket it counted.
        let per_socket = mem
            .filter(|m| m.sockets > 0)
            .map(|m| m.bytes_per_socket)
            .filter(|v| v.is_finite());
        SideFigures {
            app_open: c.map(|c| c.open),
            app_total: c.map(|c| match side {
                Side::Server => c.accepted,
                Side::Client => c.connected,
            }),
            app_in_flight: c.map(|c| c.in_flight),
            app_failures: c.map(|c| c.failures.total()),
            app_churn: c.map(|c| c.churn),
            app_failure_causes: c
                .map(|c| c.failures.iter().filter(|(_, n)| *n > 0).collect())
                .unwrap_or_default(),
            tls_failure_reasons: c
                .map(|c| c.tls_errors.iter().filter(|(_, n)| *n > 0).collect())
                .unwrap_or_default(),
            kernel_established: kernel.map(|k| counts::kernel_established(k, side).value),
            kernel_established_total: kernel
                .map(|k| counts::kernel_established_total(k, side).value),
            kernel_syn_sent: k.map(|s| s.state(tcp_state::SYN_SENT)),
            kernel_syn_recv: k.map(SideView::half_open),
            kernel_close_wait: k.map(|s| s.state(tcp_state::CLOSE_WAIT)),
            kernel_time_wait: k.map(|s| s.state(tcp_state::TIME_WAIT)),
            kernel_closing: k
                .map(|s| {
                    CLOSING_STATES
                        .iter()
                        .map(|&st| (tcp_state::NAMES[st as usize], s.state(st)))
                        .filter(|(_, n)| *n != 0)
                        .collect()
                })
                .unwrap_or_default(),
            transitions_per_s: k.map(|s| s.transitions_per_s).filter(|v| v.is_finite()),
            kernel_socket_bytes: match (derive_memory, k, per_socket) {
                (true, Some(k), Some(b)) => Some((sockets_now(k).max(0) as f64 * b) as u64),
                (true, _, _) => None,
                (false, _, _) => mem.map(|m| m.total_bytes),
            },
            kernel_bytes_per_socket: kernel
                .and_then(|k| counts::kernel_bytes_per_held_socket(k, Some(side)))
                .map(|a| a.value)
                .filter(|v| v.is_finite()),
            // A live process always has resident pages: 0 means "not measured".
            rss_bytes: app.map(|a| a.rss_bytes).filter(|&b| b > 0),
            user_bytes_per_connection: app
                .and_then(|a| a.rss_per_connection_bytes)
                .filter(|v| v.is_finite()),
            cpu_s: app
                .map(|a| a.cpu_user_s + a.cpu_sys_s)
                .filter(|v| v.is_finite()),
            cpu_sys_s: app.map(|a| a.cpu_sys_s).filter(|v| v.is_finite()),
            cpu_cores: None,
            threads: app.and_then(|a| a.threads),
            open_fds: app.and_then(|a| a.open_fds),
        }
    }
}

/// Sockets of a side now, every state the gauges count.
fn sockets_now(s: &SideView) -> i64 {
    s.states.values().copied().fold(0i64, i64::saturating_add)
}

/// Everything the views and exports show as numbers, at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Figures {
    /// The instant of these figures (the tick's), ms since the Unix epoch.
    pub at_unix_ms: u64,
    /// When each source's figures were true.
    pub readings: Readings,
    pub server: SideFigures,
    pub client: SideFigures,
    /// Watched listening ports.
    pub listeners: Option<usize>,
    /// Accept queues summed over the watched listeners.
    pub queue_depth: Option<u64>,
    pub queue_limit: Option<u64>,
    /// Handshakes dropped since the observer attached (mostly: accept queue full).
    pub queue_overflows: Option<u64>,
    /// ... of which final ACKs (the client believes it is connected).
    pub queue_overflow_acks: Option<u64>,
    /// Client connections established per second (client app's clock).
    pub client_connect_per_s: Option<f64>,
    /// Connections the kernel saw reach ESTABLISHED per second (kernel's clock): the
    /// client side's count when it has one, else the server side's.
    pub kernel_established_per_s: Option<f64>,
    /// The setup rate shown as the headline: the client's own when there is a c1m
    /// client, else the kernel's.
    pub setup_per_s: Option<f64>,
    /// Kernel memory of all watched sockets.
    pub kernel_socket_bytes: Option<u64>,
    /// Kernel bytes per held socket: `per_connection.kernel_bytes_per_socket`.
    pub kernel_bytes_per_socket: Option<f64>,
    /// Memory per held connection, as the run records it at the end of idle
    /// ([`counts::per_connection`]).
    pub per_connection: PerConnection,
    /// Seconds from the first connect to the last connection established, frozen when
    /// the ramp ends: the client's own setup time, the summary's "connected in".
    pub setup_duration_s: Option<f64>,
    /// The client's latencies so far.
    pub latency: Latencies,
    /// True when the socket walk is stale and memory figures are sockets now × bytes per
    /// socket at the last walk.
    pub kernel_memory_derived: bool,
    /// CPU of this process (observer and lab), cores busy over the last second.
    pub observer_cpu_cores: Option<f64>,
    /// Free memory of the box (/proc/meminfo MemAvailable).
    pub mem_available_bytes: Option<u64>,
    /// The kernel's counts beside the app's, with the reasons they differ.
    pub kernel_vs_app: Vec<KernelVsApp>,
    /// What the retransmits since attach were, in words; `None` without a kernel view
    /// or while there are none.
    pub retransmits: Option<String>,
}

impl Figures {
    /// The figures the sources give by themselves (no rates: those need history, see
    /// [`FiguresBuilder`]).
    pub(crate) fn of_sources(
        now_unix_ms: u64,
        kernel: Option<&KernelView>,
        server: Option<&AppSnapshot>,
        client: Option<&AppSnapshot>,
    ) -> Figures {
        let readings = Readings {
            kernel: kernel.and_then(|k| Reading::at(k.unix_ms, now_unix_ms)),
            kernel_walk: kernel
                .filter(|k| k.memory.is_some())
                .and_then(|k| Reading::at(k.walk.ended_unix_ms, now_unix_ms)),
            server: server.and_then(|a| Reading::at(a.counts_at_ns() / 1_000_000, now_unix_ms)),
            client: client.and_then(|a| Reading::at(a.counts_at_ns() / 1_000_000, now_unix_ms)),
        };
        // Walk figures older than the counters' by more than the stale limit are carried
        // forward by the gauges instead.
        let derive = match (readings.kernel, readings.kernel_walk) {
            (Some(k), Some(w)) => {
                k.at_unix_ms.saturating_sub(w.at_unix_ms) as f64 / 1e3 > STALE_AFTER_S
            }
            _ => false,
        };
        let server_f = SideFigures::of(kernel, Side::Server, server, derive);
        let client_f = SideFigures::of(kernel, Side::Client, client, derive);
        let total_mem = kernel.and_then(|k| k.memory.as_ref()).map(|m| &m.total);
        let kernel_socket_bytes = if derive {
            kernel
                .and_then(|k| total_mem.filter(|m| m.sockets > 0).map(|m| (k, m)))
                .map(|(k, m)| {
                    let now: i64 = [&k.server, &k.client, &k.other]
                        .into_iter()
                        .map(sockets_now)
                        .fold(0, i64::saturating_add);
                    (now.max(0) as f64 * m.bytes_per_socket) as u64
                })
        } else {
            total_mem.map(|m| m.total_bytes)
        };
        let per_connection = counts::per_connection(kernel, server, client);
        Figures {
            at_unix_ms: now_unix_ms,
            readings,
            server: server_f,
            client: client_f,
            listeners: kernel.map(|k| k.listeners.len()),
            queue_depth: kernel.map(KernelView::queue_depth),
            queue_limit: kernel.map(KernelView::queue_limit),
            queue_overflows: kernel.map(|k| counts::accept_queue_overflows(k).value),
            queue_overflow_acks: kernel.and_then(KernelView::queue_overflow_acks),
            kernel_socket_bytes,
            kernel_bytes_per_socket: per_connection
                .kernel_bytes_per_socket
                .filter(|v| v.is_finite()),
            per_connection,
            setup_duration_s: client
                .and_then(|c| c.setup_rate)
                .map(|r| r.duration_s)
                .filter(|v| v.is_finite()),
            latency: Latencies::of(client),
            kernel_memory_derived: derive && kernel_socket_bytes.is_some(),
            kernel_vs_app: kernel_vs_app::kernel_vs_app(kernel, server, client),
            retransmits: kernel
                .filter(|k| k.retransmits().total > 0)
                .map(KernelView::retransmits_explained),
            ..Figures::default()
        }
    }

    /// The kernel-vs-app rows that differ (see [`counts::mismatches`]).
    pub(crate) fn mismatches(&self) -> Option<Vec<String>> {
        counts::mismatches(&self.kernel_vs_app)
    }

    /// Is `source` there and older than the stale limit?
    pub fn stale(&self, source: Source) -> bool {
        self.readings.stale(source)
    }
}

/// A rate measured on a source's own clock: readings (instant, cumulative value) of the
/// last few seconds, the rate taken between the newest and the newest one at least a
/// second older. Readings that repeat an instant (the same answer seen again) are
/// ignored, so a late answer makes one long interval instead of a zero and a spike.
#[derive(Debug, Default, Clone)]
pub(crate) struct RateWindow {
    readings: VecDeque<(u64, f64)>,
}

/// The span a rate is measured over.
const RATE_SPAN_MS: u64 = 1000;

impl RateWindow {
    pub(crate) fn push(&mut self, at_ms: u64, value: f64) {
        if at_ms == 0 || !value.is_finite() {
            return;
        }
        if self.readings.back().is_some_and(|&(t, _)| at_ms <= t) {
            return;
        }
        self.readings.push_back((at_ms, value));
        // Keep one reading older than the span, no more.
        while self.readings.len() > 2
            && self
                .readings
                .get(1)
                .is_some_and(|&(t, _)| at_ms - t >= RATE_SPAN_MS)
        {
            self.readings.pop_front();
        }
    }

    /// Per second, between the newest reading and the newest one a span older (or the
    /// oldest there is, over at least a fifth of the span).
    pub(crate) fn rate(&self) -> Option<f64> {
        let &(t1, v1) = self.readings.back()?;
        let &(t0, v0) = self
            .readings
            .iter()
            .rev()
            .find(|&&(t, _)| t1 - t >= RATE_SPAN_MS)
            .or_else(|| self.readings.front())?;
        let dt = (t1 - t0) as f64 / 1e3;
        (dt >= RATE_SPAN_MS as f64 / 5e3).then(|| ((v1 - v0) / dt).max(0.0))
    }
}

/// Builds [`Figures`] tick after tick, keeping the readings rates need.
#[derive(Debug, Default)]
pub(crate) struct FiguresBuilder {
    client_connected: RateWindow,
    kernel_established: RateWindow,
    server_cpu: RateWindow,
    client_cpu: RateWindow,
    observer_cpu: RateWindow,
}

impl FiguresBuilder {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The figures now. `observer_cpu_s` is this process's CPU seconds, read now;
    /// `mem_available` the box's free memory.
    pub(crate) fn build(
        &mut self,
        now_unix_ms: u64,
        kernel: Option<&KernelView>,
        server: Option<&AppSnapshot>,
        client: Option<&AppSnapshot>,
        observer_cpu_s: Option<f64>,
        mem_available_bytes: Option<u64>,
    ) -> Figures {
        let mut f = Figures::of_sources(now_unix_ms, kernel, server, client);
        if let Some(c) = client {
            self.client_connected
                .push(c.counts_at_ns() / 1_000_000, c.counters.connected as f64);
            // CPU is read when the snapshot is assembled, not when the counts were.
            self.client_cpu
                .push(c.unix_ns / 1_000_000, c.cpu_user_s + c.cpu_sys_s);
        }
        if let Some(s) = server {
            self.server_cpu
                .push(s.unix_ns / 1_000_000, s.cpu_user_s + s.cpu_sys_s);
        }
        if let Some(k) = kernel {
            self.kernel_established
                .push(k.unix_ms, k.connections_established() as f64);
        }
        if let Some(cpu) = observer_cpu_s {
            self.observer_cpu.push(now_unix_ms, cpu);
        }
        f.client_connect_per_s = client.and(self.client_connected.rate());
        f.kernel_established_per_s = kernel.and(self.kernel_established.rate());
        f.setup_per_s = headline_rate(f.client_connect_per_s, f.kernel_established_per_s);
        f.server.cpu_cores = server.and(self.server_cpu.rate());
        f.client.cpu_cores = client.and(self.client_cpu.rate());
        f.observer_cpu_cores = self.observer_cpu.rate();
        f.mem_available_bytes = mem_available_bytes.filter(|&b| b > 0);
        f
    }
}

/// Both sides' figures added; one side's alone when the other has none on this host
/// (external clients: the server host's kernel has no client side); None when neither.
fn sides_sum<T>(server: Option<T>, client: Option<T>, add: fn(T, T) -> T) -> Option<T> {
    match (server, client) {
        (Some(a), Some(b)) => Some(add(a, b)),
        (a, b) => a.or(b),
    }
}

/// One row of the time series per second of the tick's clock: the latest figures, each
/// with its source's age.
#[derive(Debug)]
pub(crate) struct Rows {
    started_unix_ms: u64,
    last_unix_ms: Option<u64>,
}

impl Rows {
    pub(crate) fn new(started_unix_ms: u64) -> Self {
        Self {
            started_unix_ms,
            last_unix_ms: None,
        }
    }

    /// The next [`Rows::row`] is made however soon it comes: a run's last reading is
    /// its end, and must be in the series.
    pub(crate) fn force_next(&mut self) {
        self.last_unix_ms = None;
    }

    /// A row if a second has passed since the last one. `observer` is this process's
    /// (RSS bytes, CPU seconds) read now.
    pub(crate) fn row(&mut self, f: &Figures, phase: &str, observer: (u64, f64)) -> Option<Sample> {
        // Ticks come every 500 ms with some jitter: a tick a little early still makes the
        // second's row, or rows would come every 1.5 s.
        if self
            .last_unix_ms
            .is_some_and(|at| f.at_unix_ms.saturating_sub(at) < 900)
        {
            return None;
        }
        self.last_unix_ms = Some(f.at_unix_ms);
        let age = |source| f.readings.of(source).map(|r| r.age_s);
        let (server, client) = (&f.server, &f.client);
        Some(Sample {
            t_s: f.at_unix_ms.saturating_sub(self.started_unix_ms) as f64 / 1e3,
            unix_ms: f.at_unix_ms,
            phase: phase.to_owned(),
            kernel_server_established: server.kernel_established,
            kernel_client_established: client.kernel_established,
            kernel_server_syn_recv: server.kernel_syn_recv,
            kernel_client_syn_sent: client.kernel_syn_sent,
            kernel_time_wait: sides_sum(
                server.kernel_time_wait,
                client.kernel_time_wait,
                i64::saturating_add,
            ),
            kernel_accept_queue_depth: f.queue_depth,
            kernel_accept_queue_overflows: f.queue_overflows,
            kernel_transitions_per_s: sides_sum(
                server.transitions_per_s,
                client.transitions_per_s,
                |a, b| a + b,
            ),
            kernel_established_per_s: f.kernel_established_per_s,
            kernel_socket_bytes: f.kernel_socket_bytes,
            kernel_bytes_per_socket: f.kernel_bytes_per_socket,
            server_open: server.app_open,
            server_accepted: server.app_total,
            client_open: client.app_open,
            client_connected: client.app_total,
            client_failures: client.app_failures,
            client_connect_per_s: f.client_connect_per_s,
            server_rss_bytes: server.rss_bytes,
            client_rss_bytes: client.rss_bytes,
            server_rss_per_connection_bytes: server.user_bytes_per_connection,
            client_rss_per_connection_bytes: client.user_bytes_per_connection,
            server_cpu_s: server.cpu_s,
            client_cpu_s: client.cpu_s,
            client_cpu_sys_s: client.cpu_sys_s,
            server_threads: server.threads,
            server_open_fds: server.open_fds,
            observer_rss_bytes: Some(observer.0),
            observer_cpu_s: Some(observer.1),
            server_cpu_cores: server.cpu_cores,
            client_cpu_cores: client.cpu_cores,
            observer_cpu_cores: f.observer_cpu_cores,
            box_mem_available_bytes: f.mem_available_bytes.unwrap_or(0),
            kernel_age_s: age(Source::Kernel),
            kernel_walk_age_s: age(Source::KernelWalk),
            server_age_s: age(Source::Server),
            client_age_s: age(Source::Client),
            kernel_socket_bytes_derived: f.kernel_memory_derived,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;
    use crate::view::demo;

    /// Issue 32: live "kernel per socket" read 1.7–2.1 KiB beside a final 4,091 B: the
    /// live figure divided every socket of the walk, TIME_WAIT ones of an earlier run
    /// included, the run's only the held ones. Both are one function now.
    #[test]
    fn kernel_per_socket_live_is_the_runs_figure() {
        let mut state = demo::state();
        let k = state.kernel.as_mut().unwrap();
        let m = k.memory.as_mut().unwrap();
        m.slab_object_bytes.insert("tw_sock_TCP".into(), 256);
        // 2,000,000 TIME_WAIT sockets of an earlier run on the client side.
        let tw = 2_000_000u64;
        for side in [&mut m.client, &mut m.total] {
            side.sockets += tw;
            side.time_wait_sockets += tw;
            side.total_bytes += tw * 256;
            side.bytes_per_socket = side.total_bytes as f64 / side.sockets as f64;
        }
        let k = state.kernel.clone().unwrap();
        let f = Figures::of_sources(
            demo::UNIX_MS,
            Some(&k),
            state.server.as_ref(),
            state.client.as_ref(),
        );
        let run = counts::per_connection(Some(&k), state.server.as_ref(), state.client.as_ref());
        assert_eq!(f.per_connection, run);
        assert_eq!(f.kernel_bytes_per_socket, run.kernel_bytes_per_socket);
        // The held sockets' cost: as without the TIME_WAIT sockets, to the byte.
        let m = k.memory.as_ref().unwrap();
        let held = (m.total.total_bytes - tw * 256) as f64 / m.total.full_sockets as f64;
        assert_eq!(f.kernel_bytes_per_socket, Some(held));
        assert_eq!(
            f.client.kernel_bytes_per_socket,
            Some(demo::CLIENT_BYTES_PER_SOCKET as f64)
        );
        assert_eq!(
            f.server.kernel_bytes_per_socket,
            Some(demo::SERVER_BYTES_PER_SOCKET as f64)
        );
        // Divided by every socket it was a third of that.
        assert!(m.total.bytes_per_socket < held / 2.0);
        // The setup time and the latencies are the client's own figures.
        let c = state.client.as_ref().unwrap();
        assert_eq!(f.setup_duration_s, c.setup_rate.map(|r| r.duration_s));
        assert_eq!(f.latency.connect, c.percentiles.get("connect_us").copied());
        assert_eq!(f.latency.push_message, None);
    }

    #[test]
    fn demo_figures() {
        let f = demo::state().figures;
        assert_eq!(f.server.app_open, Some(demo::SERVER_APP_OPEN));
        assert_eq!(
            f.server.kernel_established,
            Some(demo::SERVER_KERNEL_ESTABLISHED)
        );
        assert_eq!(f.client.app_open, Some(demo::CLIENT_APP_OPEN));
        assert_eq!(
            f.client.kernel_established,
            Some(demo::CLIENT_KERNEL_ESTABLISHED)
        );
        assert_eq!(f.client.kernel_syn_sent, Some(demo::CLIENT_SYN_SENT));
        assert_eq!(f.queue_depth, Some(demo::QUEUE_DEPTH));
        assert_eq!(f.queue_overflows, Some(demo::OVERFLOWS));
        assert_eq!(f.client.app_failures, Some(5));
        assert_eq!(
            f.client.app_failure_causes,
            vec![("refused", 3), ("timed_out", 2)]
        );
        assert!(f.setup_per_s.unwrap() > 0.0);
        assert!(f.kernel_bytes_per_socket.unwrap() > 1000.0);
        assert!(!f.kernel_memory_derived);
        for source in Source::ALL {
            assert!(!f.stale(source), "{source:?} is fresh in the demo");
        }
    }

    #[test]
    fn missing_sources_are_none_not_zero() {
        let f = Figures::of_sources(demo::UNIX_MS, None, None, None);
        assert_eq!(f.server, SideFigures::default());
        assert_eq!(f.readings, Readings::default());
        assert_eq!(f.queue_depth, None);
        let s = demo::state();
        let f = Figures::of_sources(demo::UNIX_MS, None, s.server.as_ref(), None);
        assert_eq!(f.server.kernel_established, None);
        assert_eq!(f.client, SideFigures::default());
        assert_eq!(f.setup_per_s, None);
        assert_eq!(f.server.app_open, Some(demo::SERVER_APP_OPEN));
        // Before the first socket walk there is no memory figure.
        let mut k = s.kernel.clone().unwrap();
        k.memory = None;
        let f = Figures::of_sources(demo::UNIX_MS, Some(&k), None, None);
        assert_eq!(f.kernel_bytes_per_socket, None);
        assert_eq!(f.server.kernel_socket_bytes, None);
    }

    #[test]
    fn a_late_source_is_stale_with_its_age() {
        let s = demo::state();
        let now = demo::UNIX_MS + 3_000;
        let f = Figures::of_sources(now, s.kernel.as_ref(), s.server.as_ref(), None);
        let k = f.readings.kernel.unwrap();
        assert_eq!(k.at_unix_ms, demo::UNIX_MS);
        assert!((k.age_s - 3.0).abs() < 1e-9);
        assert!(f.stale(Source::Kernel) && f.stale(Source::Server));
        assert!(!f.stale(Source::Client), "an absent source is not stale");
    }

    #[test]
    fn memory_between_walks_is_derived_from_the_sockets_now() {
        let mut k = demo::state().kernel.unwrap();
        let per_socket = k.memory.as_ref().unwrap().total.bytes_per_socket;
        // The walk is 5 s older than the counters: memory is carried by the gauges.
        k.walk.ended_unix_ms = k.unix_ms - 5_000;
        let f = Figures::of_sources(k.unix_ms, Some(&k), None, None);
        assert!(f.kernel_memory_derived);
        let sockets: i64 = [&k.server, &k.client, &k.other]
            .into_iter()
            .map(sockets_now)
            .sum();
        assert_eq!(
            f.kernel_socket_bytes,
            Some((sockets as f64 * per_socket) as u64)
        );
        assert!(f.stale(Source::KernelWalk) || f.readings.kernel_walk.unwrap().age_s > 1.0);
    }

    #[test]
    fn rates_use_the_sources_clock_not_the_ticks() {
        // Answers at 0.0, 0.25 (late: the same reading seen again), 1.0, 2.0 s of the
        // source's clock at a steady 1,000/s: the rate never shows the catch-up.
        let mut w = RateWindow::default();
        w.push(10_000, 0.0);
        assert_eq!(w.rate(), None);
        w.push(10_000, 0.0);
        w.push(10_500, 500.0);
        assert_eq!(w.rate(), Some(1000.0));
        w.push(12_000, 2_000.0);
        assert_eq!(w.rate(), Some(1000.0));
        w.push(12_250, 2_250.0);
        w.push(12_500, 2_500.0);
        w.push(13_000, 3_000.0);
        assert_eq!(w.rate(), Some(1000.0));
        // A repeated or older instant changes nothing.
        w.push(12_900, 99_999.0);
        assert_eq!(w.rate(), Some(1000.0));
    }

    #[test]
    fn rows_carry_each_sources_age() {
        let s = demo::state();
        let mut rows = Rows::new(demo::UNIX_MS - 10_000);
        let f = Figures::of_sources(demo::UNIX_MS + 2_500, s.kernel.as_ref(), None, None);
        let row = rows.row(&f, "setup", (1, 0.5)).unwrap();
        assert_eq!(row.kernel_age_s, Some(2.5));
        assert!(!row.fresh(Source::Kernel));
        assert!(row.fresh(Source::Client), "no client: nothing stale");
        assert_eq!(row.t_s, 12.5);
        // The next row waits for the next second.
        assert!(rows.row(&f, "setup", (1, 0.5)).is_none());
    }
}
