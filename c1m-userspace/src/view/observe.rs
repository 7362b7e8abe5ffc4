//! `c1m observe`'s human line: the kernel's figures of any server on this host, read
//! from the figures as every other view reads them. The observer's command takes it as
//! a callback, since the observer sits below the figures.

use crate::{
    figures::{Figures, SideFigures, counts},
    fmt::{NA, bytes},
    observer::KernelView,
};

/// One line: established per side, handshake states, accept queues, the setup rate,
/// kernel memory.
pub(crate) fn line(v: &KernelView) -> String {
    let f = Figures::of_sources(v.unix_ms, Some(v), None, None);
    let (s, c): (&SideFigures, &SideFigures) = (&f.server, &f.client);
    let n = |x: Option<i64>| x.map_or_else(|| NA.to_owned(), |x| x.to_string());
    let u = |x: Option<u64>| x.map_or_else(|| NA.to_owned(), |x| x.to_string());
    let mut line = format!(
        "t={:.0}s server: est {} syn_recv {} close_wait {} time_wait {} | client: est {} syn_sent {} time_wait {} | \
         accept queue {} overflows {} | est/s {:.0}",
        v.uptime_s,
        n(s.kernel_established),
        n(s.kernel_syn_recv),
        n(s.kernel_close_wait),
        n(s.kernel_time_wait),
        n(c.kernel_established),
        n(c.kernel_syn_sent),
        n(c.kernel_time_wait),
        u(f.queue_depth),
        u(f.queue_overflows),
        counts::kernel_established_per_s(v).value,
    );
    // Once a socket walk has run: between walks with no socket to scale by, n/a.
    if f.readings.kernel_walk.is_some() {
        let mem = f.kernel_socket_bytes.map(|b| bytes(b as f64));
        line.push_str(&format!(" | kernel mem {}", mem.as_deref().unwrap_or(NA)));
        if let Some(per) = f.kernel_bytes_per_socket {
            line.push_str(&format!(" ({per:.0} B/socket)"));
        }
        if f.kernel_memory_derived {
            line.push_str(", derived since the last walk");
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::demo;

    #[test]
    fn the_line_reads_the_figures() {
        let k = demo::kernel();
        let text = line(&k);
        assert!(
            text.contains(&format!("server: est {}", demo::SERVER_KERNEL_ESTABLISHED)),
            "{text}"
        );
        assert!(
            text.contains(&format!("overflows {}", demo::OVERFLOWS)),
            "{text}"
        );
        // The client side's rate alone: each connection counted once.
        assert!(
            text.contains(&format!("est/s {:.0}", demo::SETUP_PER_S)),
            "{text}"
        );
        assert!(text.contains("B/socket)"), "{text}");
        // Before the first walk there is no memory to show; after one, always a value.
        let mut k = demo::kernel();
        k.memory = None;
        assert!(!line(&k).contains("kernel mem"));
        let mut k = demo::kernel();
        k.walk.ended_unix_ms = k.unix_ms - 5_000;
        assert!(
            line(&k).contains(", derived since the last walk"),
            "{}",
            line(&k)
        );
    }
}
