//! The human summary a side prints at exit, from its final snapshot.

use crate::workload::stats::snapshot::AppSnapshot;

/// The human summary printed at exit.
pub(super) fn summary(s: &AppSnapshot) -> String {
    let c = &s.counters;
    let mut out = String::new();
    let nz = |it: Vec<(&'static str, u64)>| {
        it.into_iter()
            .filter(|(_, v)| *v > 0)
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    out.push_str(&format!(
        "== {} ({}) after {:.1} s: {}\n",
        s.side, s.mode, s.uptime_s, s.split
    ));
    if s.side == "client" {
        out.push_str(&format!(
            "attempted={} connected={} open={} in_flight={}\n",
            c.attempted, c.connected, c.open, c.in_flight
        ));
    } else {
        out.push_str(&format!(
            "accepted={} open={} ws_open={}\n",
            c.accepted, c.open, c.ws_open
        ));
    }
    out.push_str(&format!("closed: {}\n", nz(c.closed.iter().collect())));
    out.push_str(&format!("failures: {}\n", nz(c.failures.iter().collect())));
    out.push_str(&format!(
        "protocol errors: {}\n",
        nz(c.protocol_errors.iter().collect())
    ));
    if c.tls_handshakes.total() + c.tls_errors.total() > 0 {
        out.push_str(&format!(
            "tls handshakes: {}; failed: {}\n",
            nz(c.tls_handshakes.iter().collect()),
            nz(c.tls_errors.iter().collect())
        ));
    }
    out.push_str(&format!(
        "bytes in={} out={} echo_round_trips={} pushes sent={} received={}\n",
        c.bytes_in, c.bytes_out, c.echo_round_trips, c.pushes_sent, c.pushes_received
    ));
    let m = &c.messages;
    if m.sent > 0 {
        out.push_str(&format!(
            "messages: {} sent, {} received, {:.0} msg/s over {:.1} s, late={} lost={} outstanding={} unmatched={} (latency in message_us: from each message's schedule, corrected for coordinated omission)\n",
            m.sent,
            m.received,
            m.received as f64 / s.uptime_s.max(1e-9),
            s.uptime_s,
            m.late,
            m.lost,
            m.outstanding,
            m.unmatched
        ));
    }
    if let Some(b) = s.rss_per_connection_bytes {
        out.push_str(&format!(
            "rss {} (baseline {}): {b:.0} bytes per open connection\n",
            crate::fmt::bytes(s.rss_bytes as f64),
            crate::fmt::bytes(s.rss_baseline_bytes as f64)
        ));
    }
    out.push_str(&format!(
        "cpu user {:.2} s, sys {:.2} s\n",
        s.cpu_user_s, s.cpu_sys_s
    ));
    if !s.setup_steps.is_empty() {
        out.push_str("setup: connections  at_s  step_s  conn/s\n");
        for st in &s.setup_steps {
            out.push_str(&format!(
                "       {:>11}  {:>5.2}  {:>6.2}  {:>7.0}\n",
                st.connections, st.at_s, st.step_s, st.rate_per_s
            ));
        }
    }
    for p in &s.pushes {
        out.push_str(&format!(
            "push {}: {} {} , last {:.3} s after {}\n",
            p.push_id,
            p.count,
            if s.side == "server" {
                "written"
            } else {
                "received"
            },
            p.complete_s,
            if s.side == "server" {
                "the broadcast began"
            } else {
                "the push's start (its trigger, when one was marked)"
            }
        ));
    }
    for (name, p) in &s.percentiles {
        if p.count > 0 {
            out.push_str(&p.table(name));
        }
    }
    out
}
