//! The summary's message lines: what `--message-rate`'s messages came to, and
//! `--server-message-rate`'s, each from `figures::messages`.

use std::fmt::Write as _;

use crate::{
    figures::messages::{MessageFigures, ServerMessageFigures},
    fmt::{bytes, count, num},
    workload::stats::{counters::ServerMessages, histograms::Percentiles},
};

/// "messages: 3,000,000 sent, 3,000,000 received (server echoed 3,000,000), 99,980
/// msg/s (6.4 MB/s) in idle, latency from the schedule p50/p99/p99.9 0.210/0.950/3.100 ms
/// (corrected for coordinated omission)", then what is late, lost, outstanding or
/// unmatched, and the idle phase's CPU per 1M messages.
pub(super) fn messages_line(m: &MessageFigures) -> String {
    let c = &m.counts;
    let mut line = format!(
        "messages: {} sent, {} received",
        count(c.sent),
        count(c.received)
    );
    if let Some(e) = m.echoed {
        let _ = write!(line, " (server echoed {})", count(e));
    }
    let phase = m.phase.as_ref().map_or("idle", |p| p.0.as_str());
    if let Some(r) = m.idle_per_s {
        let _ = write!(
            line,
            ", {} msg/s ({}/s) in {phase}",
            num(r, 0),
            bytes(r * m.size as f64)
        );
    }
    if let Some(p) = &m.latency {
        let _ = write!(
            line,
            ", latency {} (from the schedule: corrected for coordinated omission)",
            p50_p99_p999(p)
        );
    }
    for (what, n) in c
        .iter()
        .filter(|(k, _)| matches!(*k, "late" | "lost" | "outstanding" | "unmatched"))
    {
        if n > 0 {
            let _ = write!(line, ", {} {}", count(n), what);
        }
    }
    if let Some((name, sent, received)) = &m.phase
        && name != "idle"
    {
        let _ = write!(
            line,
            "; {name}: {} sent, {} received",
            count(*sent),
            count(*received)
        );
    }
    if let Some(cpu) = m.idle_cpu_s_per_million {
        let _ = write!(
            line,
            "; {phase} CPU {} s per 1M messages (server + client)",
            num(cpu, 2)
        );
    }
    line
}

/// "server messages: 3,000,000 sent, 3,000,000 received, each connection's in the
/// server's order, 99,980 msg/s in idle, latency p50/p99/p99.9 0.110/0.450/1.100 ms (one
/// way, from the schedule)", then what is late or capped.
pub(super) fn server_messages_line(m: &ServerMessageFigures) -> String {
    let mut line = format!("server messages: {} sent", count(m.server.sent));
    if let Some(c) = &m.client {
        let _ = write!(line, ", {} received, {}", count(c.received), order_words(c));
    }
    if let Some(r) = m.idle_per_s {
        let _ = write!(line, ", {} msg/s in idle", num(r, 0));
    }
    if let Some(p) = &m.latency {
        let _ = write!(
            line,
            ", latency {} (one way, from the schedule: corrected for coordinated omission)",
            p50_p99_p999(p)
        );
    }
    for (what, n) in [("late", m.server.late), ("capped", m.server.capped)] {
        if n > 0 {
            let _ = write!(line, ", {} {}", count(n), what);
        }
    }
    line
}

/// What the client's order check found, in words: "each connection's in the server's
/// order", or "out of the server's order: 1 gap (2 messages skipped), 1 out of order, 0
/// duplicates".
fn order_words(c: &ServerMessages) -> String {
    if c.gaps + c.out_of_order + c.duplicates == 0 {
        return "each connection's in the server's order".to_owned();
    }
    let n =
        |n: u64, one: &str, many: &str| format!("{} {}", count(n), if n == 1 { one } else { many });
    format!(
        "out of the server's order: {} ({} skipped), {} out of order, {}",
        n(c.gaps, "gap", "gaps"),
        n(c.skipped, "message", "messages"),
        count(c.out_of_order),
        n(c.duplicates, "duplicate", "duplicates")
    )
}

/// "p50/p99/p99.9 0.210/0.950/3.100 ms" of a latency histogram's µs percentiles.
fn p50_p99_p999(p: &Percentiles) -> String {
    format!(
        "p50/p99/p99.9 {}/{}/{} ms",
        crate::fmt::ms(p.p50 as f64),
        crate::fmt::ms(p.p99 as f64),
        crate::fmt::ms(p.p999 as f64)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_messages_line_says_whether_they_came_in_order() {
        let mut m = ServerMessageFigures {
            server: ServerMessages {
                sent: 4_000,
                ..Default::default()
            },
            client: Some(ServerMessages {
                received: 4_000,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            server_messages_line(&m),
            "server messages: 4,000 sent, 4,000 received, each connection's in the server's order"
        );
        m.client = Some(ServerMessages {
            received: 7,
            gaps: 1,
            skipped: 2,
            out_of_order: 1,
            duplicates: 1,
            ..Default::default()
        });
        assert_eq!(
            server_messages_line(&m),
            "server messages: 4,000 sent, 7 received, out of the server's order: 1 gap (2 \
             messages skipped), 1 out of order, 1 duplicate"
        );
    }
}
