//! The key figures of a [`LiveState`], each `None` when its source is missing (no observer,
//! no client yet, no socket walk yet), so every view shows "n/a" instead of a zero nobody
//! measured. The terminal UI and the plain lines both read these.

use c1m_common::tcp_state;

use super::compare;
use crate::{
    lab::model::{LiveState, Sample},
    observer::{KernelView, SideMemory, SideView},
    workload::stats::AppSnapshot,
};

/// One side (server or client) as both the kernel and the app see it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SideFigures {
    /// Connections the app holds open now.
    pub app_open: Option<u64>,
    /// Server: accepted since start. Client: connected since start.
    pub app_total: Option<u64>,
    /// Client: connects and handshakes not finished.
    pub app_in_flight: Option<u64>,
    /// Connections that never opened, all causes.
    pub app_failures: Option<u64>,
    /// Failures by cause, only the non-zero ones.
    pub app_failure_causes: Vec<(&'static str, u64)>,
    pub kernel_established: Option<i64>,
    pub kernel_syn_sent: Option<i64>,
    /// SYN_RECV plus NEW_SYN_RECV (request sockets): half-open handshakes.
    pub kernel_syn_recv: Option<i64>,
    pub kernel_close_wait: Option<i64>,
    pub kernel_time_wait: Option<i64>,
    pub transitions_per_s: Option<f64>,
    pub established_per_s: Option<f64>,
    /// Kernel memory of this side's sockets (from the last socket walk).
    pub kernel_socket_bytes: Option<u64>,
    /// `None` until a walk has seen at least one socket of the side.
    pub kernel_bytes_per_socket: Option<f64>,
    /// Resident memory of the side's processes.
    pub rss_bytes: Option<u64>,
    /// (RSS - baseline) / open connections.
    pub user_bytes_per_connection: Option<f64>,
    /// CPU seconds, user plus system.
    pub cpu_s: Option<f64>,
}

impl SideFigures {
    fn of(kernel: Option<&KernelView>, side: Side, app: Option<&AppSnapshot>) -> SideFigures {
        let k: Option<&SideView> = kernel.map(|k| match side {
            Side::Server => &k.server,
            Side::Client => &k.client,
        });
        let mem: Option<&SideMemory> = kernel.and_then(|k| k.memory.as_ref()).map(|m| match side {
            Side::Server => &m.server,
            Side::Client => &m.client,
        });
        let c = app.map(|a| &a.counters);
        SideFigures {
            app_open: c.map(|c| c.open),
            app_total: c.map(|c| match side {
                Side::Server => c.accepted,
                Side::Client => c.connected,
            }),
            app_in_flight: c.map(|c| c.in_flight),
            app_failures: c.map(|c| c.failures.total()),
            app_failure_causes: c
                .map(|c| c.failures.iter().filter(|(_, n)| *n > 0).collect())
                .unwrap_or_default(),
            kernel_established: k.map(|s| s.state(tcp_state::ESTABLISHED)),
            kernel_syn_sent: k.map(|s| s.state(tcp_state::SYN_SENT)),
            kernel_syn_recv: k.map(|s| {
                s.state(tcp_state::SYN_RECV)
                    .saturating_add(s.state(tcp_state::NEW_SYN_RECV))
            }),
            kernel_close_wait: k.map(|s| s.state(tcp_state::CLOSE_WAIT)),
            kernel_time_wait: k.map(|s| s.state(tcp_state::TIME_WAIT)),
            transitions_per_s: k.map(|s| s.transitions_per_s).filter(|v| v.is_finite()),
            established_per_s: k.map(|s| s.established_per_s).filter(|v| v.is_finite()),
            kernel_socket_bytes: mem.map(|m| m.total_bytes),
            kernel_bytes_per_socket: mem
                .filter(|m| m.sockets > 0)
                .map(|m| m.bytes_per_socket)
                .filter(|v| v.is_finite()),
            // A live process always has resident pages: 0 means "not measured".
            rss_bytes: app.map(|a| a.rss_bytes).filter(|&b| b > 0),
            user_bytes_per_connection: app
                .and_then(|a| a.rss_per_connection_bytes)
                .filter(|v| v.is_finite()),
            cpu_s: app
                .map(|a| a.cpu_user_s + a.cpu_sys_s)
                .filter(|v| v.is_finite()),
        }
    }
}

#[derive(Clone, Copy)]
enum Side {
    Server,
    Client,
}

/// Everything the views show as numbers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
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
    /// Connections set up per second now (see [`setup_rate`]).
    pub setup_per_s: Option<f64>,
    /// Kernel memory of all watched sockets, and per socket.
    pub kernel_socket_bytes: Option<u64>,
    pub kernel_bytes_per_socket: Option<f64>,
    /// Free memory of the box (/proc/meminfo MemAvailable) at the latest sample.
    pub mem_available_bytes: Option<u64>,
}

impl Figures {
    pub fn of(state: &LiveState) -> Figures {
        let k = state.kernel.as_ref();
        let total_mem = k.and_then(|k| k.memory.as_ref()).map(|m| &m.total);
        let last = state.history.last();
        Figures {
            server: SideFigures::of(k, Side::Server, state.server.as_ref()),
            client: SideFigures::of(k, Side::Client, state.client.as_ref()),
            listeners: k.map(|k| k.listeners.len()),
            queue_depth: k.map(compare::queue_depth),
            queue_limit: k.map(compare::queue_limit),
            queue_overflows: k.map(compare::queue_overflows),
            queue_overflow_acks: k.and_then(compare::queue_overflow_acks),
            setup_per_s: last.and_then(setup_rate).or_else(|| {
                k.map(|k| k.server.established_per_s.max(k.client.established_per_s))
                    .filter(|v| v.is_finite())
            }),
            kernel_socket_bytes: total_mem.map(|m| m.total_bytes),
            kernel_bytes_per_socket: total_mem
                .filter(|m| m.sockets > 0)
                .map(|m| m.bytes_per_socket)
                .filter(|v| v.is_finite()),
            mem_available_bytes: last.map(|s| s.box_mem_available_bytes).filter(|&b| b > 0),
        }
    }
}

/// Connections set up per second in one sample: the client's own rate when there is a c1m
/// client, else what the kernel saw established.
pub fn setup_rate(s: &Sample) -> Option<f64> {
    s.client_connect_per_s
        .or(s.kernel_established_per_s)
        .filter(|v| v.is_finite() && *v >= 0.0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;
    use crate::lab::view::demo;

    #[test]
    fn demo_figures() {
        let f = Figures::of(&demo::state());
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
    }

    #[test]
    fn missing_sources_are_none_not_zero() {
        let f = Figures::of(&LiveState::default());
        assert_eq!(f, Figures::default());
        let mut s = demo::state();
        s.kernel = None;
        s.client = None;
        s.history.clear();
        let f = Figures::of(&s);
        assert_eq!(f.server.kernel_established, None);
        assert_eq!(f.queue_depth, None);
        assert_eq!(f.client, SideFigures::default());
        assert_eq!(f.setup_per_s, None);
        assert_eq!(f.server.app_open, Some(demo::SERVER_APP_OPEN));
        // Before the first socket walk there is no memory figure.
        let mut s = demo::state();
        if let Some(k) = s.kernel.as_mut() {
            k.memory = None;
        }
        let f = Figures::of(&s);
        assert_eq!(f.kernel_bytes_per_socket, None);
        assert_eq!(f.server.kernel_socket_bytes, None);
    }
}
