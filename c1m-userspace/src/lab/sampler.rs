//! Turns the latest kernel view and app snapshots into one time-series [`Sample`] per
//! second.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use c1m_common::tcp_state;

use super::model::Sample;
use crate::{observer::KernelView, workload::stats::AppSnapshot};

pub struct Sampler {
    started: Instant,
    last: Option<(Instant, u64)>,
    every: Duration,
}

impl Sampler {
    pub fn new(started: Instant) -> Self {
        Self {
            started,
            last: None,
            every: Duration::from_secs(1),
        }
    }

    /// A sample if a second has passed since the last one.
    pub fn sample(
        &mut self,
        phase: &str,
        kernel: Option<&KernelView>,
        server: Option<&AppSnapshot>,
        client: Option<&AppSnapshot>,
    ) -> Option<Sample> {
        let now = Instant::now();
        if self
            .last
            // Ticks come every 500 ms with some jitter: a tick a little early still
            // makes the second's sample, or rows would come every 1.5 s.
            .is_some_and(|(at, _)| now.duration_since(at) < self.every * 9 / 10)
        {
            return None;
        }
        let connected = client.map(|c| c.counters.connected).unwrap_or(0);
        let rate = self.last.map(|(at, before)| {
            connected.saturating_sub(before) as f64 / now.duration_since(at).as_secs_f64().max(1e-3)
        });
        self.last = Some((now, connected));
        Some(build(
            self.started,
            now,
            phase,
            kernel,
            server,
            client,
            rate,
        ))
    }
}

fn build(
    started: Instant,
    now: Instant,
    phase: &str,
    kernel: Option<&KernelView>,
    server: Option<&AppSnapshot>,
    client: Option<&AppSnapshot>,
    client_rate: Option<f64>,
) -> Sample {
    let k = kernel;
    Sample {
        t_s: now.duration_since(started).as_secs_f64(),
        unix_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
        phase: phase.to_owned(),
        kernel_server_established: k.map(|k| k.server.state(tcp_state::ESTABLISHED)),
        kernel_client_established: k.map(|k| k.client.state(tcp_state::ESTABLISHED)),
        kernel_server_syn_recv: k
            .map(|k| k.server.state(tcp_state::SYN_RECV) + k.server.state(tcp_state::NEW_SYN_RECV)),
        kernel_client_syn_sent: k.map(|k| k.client.state(tcp_state::SYN_SENT)),
        kernel_time_wait: k.map(|k| k.total(tcp_state::TIME_WAIT)),
        kernel_accept_queue_depth: k.map(|k| k.listeners.iter().map(|l| l.queue_depth).sum()),
        kernel_accept_queue_overflows: k
            .map(|k| k.listeners.iter().map(|l| l.accept_queue_overflows).sum()),
        kernel_transitions_per_s: k
            .map(|k| k.server.transitions_per_s + k.client.transitions_per_s),
        kernel_established_per_s: k.map(|k| k.client.established_per_s),
        kernel_socket_bytes: k
            .and_then(|k| k.memory.as_ref())
            .map(|m| m.total.total_bytes),
        kernel_bytes_per_socket: k
            .and_then(|k| k.memory.as_ref())
            .map(|m| m.total.bytes_per_socket),
        server_open: server.map(|s| s.counters.open),
        server_accepted: server.map(|s| s.counters.accepted),
        client_open: client.map(|c| c.counters.open),
        client_connected: client.map(|c| c.counters.connected),
        client_failures: client.map(|c| c.counters.failures.total()),
        client_connect_per_s: client_rate,
        server_rss_bytes: server.map(|s| s.rss_bytes),
        client_rss_bytes: client.map(|c| c.rss_bytes),
        server_rss_per_connection_bytes: server.and_then(|s| s.rss_per_connection_bytes),
        client_rss_per_connection_bytes: client.and_then(|c| c.rss_per_connection_bytes),
        server_cpu_s: server.map(|s| s.cpu_user_s + s.cpu_sys_s),
        client_cpu_s: client.map(|c| c.cpu_user_s + c.cpu_sys_s),
        observer_rss_bytes: Some(super::run::own_rss()),
        observer_cpu_s: Some({
            let (u, s) = super::run::own_cpu();
            u + s
        }),
        box_mem_available_bytes: super::doctor::mem_available(),
    }
}
