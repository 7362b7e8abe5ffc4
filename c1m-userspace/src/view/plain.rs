//! The live view when stdout is not a terminal (CI, pipes): one line per second of
//! `key=value` pairs separated by single spaces, keys always in the order of [`KEYS`],
//! values without spaces. A missing figure is `n/a`, never 0. Counts are plain integers,
//! bytes are in bytes, rates per second; `mismatch` lists the kernel-vs-app rows that
//! differ (`none` when all agree, `n/a` when no row has both sides).
//!
//! Latencies are µs, from the client's histograms (`n/a` until one holds a value);
//! `client_tls_failures` names the TLS handshakes that failed by reason
//! (`3_untrusted_certificate,1_timeout`; `none`);
//! `setup_s` is the client's setup time, frozen when the ramp ends. After idle, memory
//! per connection (`kernel_bytes_per_socket`, `*_user_bytes_per_conn`) is the end of
//! idle's and `memory_at` says `idle_end` (else `now`). A phase's last line, with the
//! figures the run records for it, has `phase_end=yes`.

use crate::figures::SideFigures;
use crate::fmt::NA;
use crate::model::Source;
use crate::view::live_state::LiveState;
use crate::workload::stats::histograms::Percentiles;

/// The keys of every line, in order.
pub(crate) const KEYS: [&str; 45] = [
    "t_s",
    "phase",
    "phase_end",
    "target",
    "server_app_open",
    "server_kernel_established",
    "server_kernel_close_wait",
    "server_kernel_syn_recv",
    "accept_queue",
    "accept_queue_limit",
    "accept_overflows",
    "client_app_open",
    "client_kernel_established",
    "client_kernel_syn_sent",
    "client_app_in_flight",
    "client_app_failures",
    "client_tls_failures",
    "setup_per_s",
    "setup_s",
    "server_transitions_per_s",
    "client_transitions_per_s",
    "kernel_socket_bytes",
    "kernel_bytes_per_socket",
    "server_rss_bytes",
    "server_user_bytes_per_conn",
    "client_rss_bytes",
    "client_user_bytes_per_conn",
    "memory_at",
    "connect_p50_us",
    "connect_p99_us",
    "tls_handshake_p50_us",
    "tls_handshake_p99_us",
    "ws_handshake_p50_us",
    "ws_handshake_p99_us",
    "push_message_p50_us",
    "push_message_p99_us",
    "push_message_max_us",
    "push_fanout_p50_us",
    "push_fanout_p99_us",
    "push_fanout_max_us",
    "server_cpu_s",
    "client_cpu_s",
    "mem_available_bytes",
    "stale",
    "mismatch",
];

/// One line (no newline) with the key figures of both sides.
pub(crate) fn line(state: &LiveState) -> String {
    let f = &state.figures;
    let mismatch = match f.mismatches() {
        None => NA.to_owned(),
        Some(differ) if differ.is_empty() => "none".to_owned(),
        Some(differ) => differ.join(","),
    };
    // Sources whose figures on this line are older than two ticks, with their age.
    let stale: Vec<String> = Source::ALL
        .into_iter()
        .filter_map(|src| {
            let r = f.readings.of(src).filter(|r| r.stale())?;
            Some(format!("{}:{:.1}s", src.name(), r.age_s))
        })
        .collect();
    let any_source = Source::ALL.iter().any(|&src| f.readings.of(src).is_some());
    let stale = if !any_source {
        NA.to_owned()
    } else if stale.is_empty() {
        "none".to_owned()
    } else {
        stale.join(",")
    };
    let (s, c): (&SideFigures, &SideFigures) = (&f.server, &f.client);
    let (m, held) = state.memory_figures();
    let l = &f.latency;
    let p = |p: Option<Percentiles>, q: fn(&Percentiles) -> u64| int(p.as_ref().map(q));
    let values: [String; KEYS.len()] = [
        float(Some(state.elapsed_s), 1),
        word(&state.phase),
        (if state.phase_end { "yes" } else { "no" }).to_owned(),
        int((state.target > 0).then_some(state.target)),
        int(s.app_open),
        int(s.kernel_established),
        int(s.kernel_close_wait),
        int(s.kernel_syn_recv),
        int(f.queue_depth),
        int(f.queue_limit),
        int(f.queue_overflows),
        int(c.app_open),
        int(c.kernel_established),
        int(c.kernel_syn_sent),
        int(c.app_in_flight),
        int(c.app_failures),
        tls_reasons(c),
        float(f.setup_per_s, 1),
        float(f.setup_duration_s, 3),
        float(s.transitions_per_s, 1),
        float(c.transitions_per_s, 1),
        int(f.kernel_socket_bytes),
        float(m.kernel_bytes_per_socket, 0),
        int(s.rss_bytes),
        float(m.server.user_bytes_per_connection, 0),
        int(c.rss_bytes),
        float(m.client.user_bytes_per_connection, 0),
        held.map_or_else(|| "now".to_owned(), |h| format!("{}_end", word(h))),
        p(l.connect, |p| p.p50),
        p(l.connect, |p| p.p99),
        p(l.tls_handshake, |p| p.p50),
        p(l.tls_handshake, |p| p.p99),
        p(l.ws_handshake, |p| p.p50),
        p(l.ws_handshake, |p| p.p99),
        p(l.push_message, |p| p.p50),
        p(l.push_message, |p| p.p99),
        p(l.push_message, |p| p.max),
        p(l.push_fanout, |p| p.p50),
        p(l.push_fanout, |p| p.p99),
        p(l.push_fanout, |p| p.max),
        float(s.cpu_s, 2),
        float(c.cpu_s, 2),
        int(f.mem_available_bytes),
        stale,
        mismatch,
    ];
    let mut out = String::with_capacity(600);
    for (k, v) in KEYS.iter().zip(values) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(k);
        out.push('=');
        out.push_str(&v);
    }
    out
}

/// TLS failures by reason, the words of [`crate::figures::tls_reasons_in_words`] made
/// one value: `3_untrusted_certificate,1_timeout` (`none` while there is none, `n/a`
/// without the side's app figures).
fn tls_reasons(side: &SideFigures) -> String {
    if side.app_failures.is_none() {
        return NA.to_owned();
    }
    if side.tls_failure_reasons.is_empty() {
        return "none".to_owned();
    }
    crate::figures::tls_reasons_in_words(&side.tls_failure_reasons)
        .split(", ")
        .map(word)
        .collect::<Vec<_>>()
        .join(",")
}

fn int<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| NA.to_owned(), |v| v.to_string())
}

fn float(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.decimals$}"),
        _ => NA.to_owned(),
    }
}

/// A free-form word (the phase) made safe for `key=value`: no spaces, no `=`.
fn word(s: &str) -> String {
    if s.is_empty() {
        return NA.to_owned();
    }
    s.chars()
        .map(|c| {
            if c.is_whitespace() || c == '=' {
                '_'
            } else {
                c
            }
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::view::demo;

    fn parse(line: &str) -> Vec<(String, String)> {
        line.split(' ')
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                assert!(!v.is_empty() && !v.contains('='), "{kv}");
                (k.to_owned(), v.to_owned())
            })
            .collect()
    }

    #[test]
    fn demo_line_has_every_key_in_order_with_both_sides() {
        let l = line(&demo::state());
        assert!(!l.contains('\n'));
        let kv = parse(&l);
        let keys: Vec<_> = kv.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, KEYS);
        let m: BTreeMap<_, _> = kv.into_iter().collect();
        assert_eq!(m["t_s"], "49.0");
        assert_eq!(m["phase"], "setup");
        assert_eq!(m["target"], "1000000");
        assert_eq!(m["server_app_open"], demo::SERVER_APP_OPEN.to_string());
        assert_eq!(
            m["server_kernel_established"],
            demo::SERVER_KERNEL_ESTABLISHED.to_string()
        );
        assert_eq!(m["accept_queue"], "412");
        assert_eq!(m["accept_queue_limit"], "40960");
        assert_eq!(m["accept_overflows"], "37");
        assert_eq!(m["client_app_open"], demo::CLIENT_APP_OPEN.to_string());
        assert_eq!(
            m["client_kernel_established"],
            demo::CLIENT_KERNEL_ESTABLISHED.to_string()
        );
        assert_eq!(m["client_kernel_syn_sent"], "37");
        assert_eq!(m["client_app_failures"], "5");
        assert_eq!(m["setup_per_s"], "12450.0");
        assert_eq!(m["server_rss_bytes"], demo::SERVER_RSS_BYTES.to_string());
        assert_eq!(m["server_user_bytes_per_conn"], "2050");
        assert_eq!(
            m["mismatch"],
            "server_open,server_accepted,client_open,client_connecting"
        );
    }

    #[test]
    fn missing_sources_show_na_never_zero() {
        let l = line(&LiveState::default());
        let kv = parse(&l);
        assert_eq!(kv.len(), KEYS.len());
        for (k, v) in &kv {
            // Words, never figures: whether this line ends a phase, and when its
            // memory per connection is from.
            if k == "phase_end" || k == "memory_at" {
                assert!(v == "no" || v == "now", "{k}={v}");
            } else if k != "t_s" {
                assert_eq!(v, NA, "{k}");
            }
        }
        // Server only, no observer: kernel and client figures are n/a.
        let mut s = demo::state();
        s.kernel = None;
        s.client = None;
        s.history.clear();
        demo::refigure(&mut s);
        let m: BTreeMap<_, _> = parse(&line(&s)).into_iter().collect();
        assert_eq!(m["server_app_open"], "600000");
        assert_eq!(m["server_kernel_established"], NA);
        assert_eq!(m["client_app_open"], NA);
        assert_eq!(m["accept_queue"], NA);
        assert_eq!(m["mismatch"], NA);
        assert_eq!(m["stale"], "none");
        // A source that stopped answering is named with its age.
        let mut s = demo::state();
        s.figures = crate::figures::Figures::of_sources(
            demo::UNIX_MS + 3_500,
            s.kernel.as_ref(),
            s.server.as_ref(),
            s.client.as_ref(),
        );
        let m: BTreeMap<_, _> = parse(&line(&s)).into_iter().collect();
        assert_eq!(
            m["stale"],
            "kernel:3.5s,kernel_walk:3.9s,server:3.5s,client:3.5s"
        );
    }

    #[test]
    fn tls_failures_are_named_in_words() {
        let mut s = demo::state();
        let m: BTreeMap<_, _> = parse(&line(&s)).into_iter().collect();
        assert_eq!(m["client_tls_failures"], "none");
        if let Some(c) = s.client.as_mut() {
            c.counters.tls_errors.untrusted_certificate = 3;
            c.counters.tls_errors.timeout = 1;
        }
        demo::refigure(&mut s);
        let m: BTreeMap<_, _> = parse(&line(&s)).into_iter().collect();
        assert_eq!(
            m["client_tls_failures"],
            "3_untrusted_certificate,1_timeout"
        );
        assert_eq!(
            crate::figures::tls_reasons_in_words(&s.figures.client.tls_failure_reasons),
            "3 untrusted certificate, 1 timeout"
        );
    }

    #[test]
    fn agreeing_counts_say_none_and_phase_is_one_word() {
        let mut s = demo::state();
        s.phase = "tear down = now".into();
        if let Some(k) = s.kernel.as_mut() {
            k.listeners.iter_mut().for_each(|l| l.queue_depth = 0);
            k.server.states.insert("established".into(), 600_000);
            k.server.states.insert("close_wait".into(), 0);
            k.server.established_total = demo::SERVER_ACCEPTED;
            k.client.states.insert("established".into(), 600_300);
            k.client.states.insert("syn_sent".into(), 86);
        }
        demo::refigure(&mut s);
        let m: BTreeMap<_, _> = parse(&line(&s)).into_iter().collect();
        assert_eq!(m["phase"], "tear_down___now");
        assert_eq!(m["mismatch"], "none");
    }
}
