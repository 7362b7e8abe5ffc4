//! The end-of-run summary printed to the terminal: phases, kernel vs app, figures per
//! connection, setup rate per step, latency tables in the seeds' form.

use std::fmt::Write as _;

use crate::model::RunRecord;
use crate::report::figures::{hist_title, push_rule_line};
use crate::{
    fmt::bytes,
    workload::stats::{
        histograms::{HIST_NAMES, Percentiles, SETUP_LATENCY_PAIRS},
        setup_rate::PeakRate,
    },
};

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "n/a".to_owned())
}

pub(crate) fn text(run: &RunRecord) -> String {
    let mut s = String::new();
    let c = &run.config;
    // Bad news first: the top line says how many warnings, and they follow it.
    let warned = match run.warnings.len() {
        0 => String::new(),
        1 => " (1 warning)".to_owned(),
        n => format!(" ({n} warnings)"),
    };
    let _ = writeln!(
        s,
        "\n== c1m run: {}{warned} — {} connections, {} mode, {} ==",
        run.outcome,
        c.connections,
        c.mode,
        match c.rate_per_s {
            0 => crate::fmt::pace(0),
            r => format!("{} target", crate::fmt::pace(r)),
        }
    );
    let _ = writeln!(
        s,
        "server: {}; client: {}",
        run.server_label(),
        run.client_label()
    );
    if let Some(start) = run.start_line() {
        let _ = writeln!(s, "start: {start}");
    }
    for w in &run.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    let _ = writeln!(
        s,
        "{:<9} {:>7} {:>16} {:>16} {:>14} {:>10} {:>10} {:>11} {:>10}",
        "phase",
        "secs",
        "server cpu u/s",
        "client cpu u/s",
        "c1m cpu u/s",
        "srv RSS",
        "cli RSS",
        "kernel mem",
        "free mem"
    );
    for p in &run.phases {
        let _ = writeln!(
            s,
            "{:<9} {:>7.1} {:>16} {:>16} {:>14} {:>10} {:>10} {:>11} {:>10}",
            p.name,
            p.duration_s,
            // CPU comes in /proc's clock ticks (10 ms at CLK_TCK 100): to the tick.
            format!("{:.2}/{:.2}", p.server.cpu_user_s, p.server.cpu_sys_s),
            format!("{:.2}/{:.2}", p.client.cpu_user_s, p.client.cpu_sys_s),
            format!("{:.2}/{:.2}", p.observer.cpu_user_s, p.observer.cpu_sys_s),
            bytes(p.server.rss_bytes as f64),
            bytes(p.client.rss_bytes as f64),
            p.kernel_socket_bytes
                .map(|b| bytes(b as f64))
                .unwrap_or_else(|| "n/a".into()),
            bytes(p.box_mem_available_bytes as f64),
        );
    }
    if let Some(line) = crate::model::end_walks_line(&run.phases) {
        let _ = writeln!(s, "{line}");
    }
    let _ = writeln!(s, "\nkernel vs app at the end of each phase:");
    for p in &run.phases {
        for row in &p.kernel_vs_app {
            let _ = writeln!(
                s,
                "  {:<9} {:<34} kernel {:>9}  app {:>9}  {}{}",
                p.name,
                row.what,
                opt(row.kernel),
                opt(row.app),
                if row.agree { "=" } else { "≠" },
                row.explanation
                    .as_ref()
                    .map(|e| format!("  ({e})"))
                    .unwrap_or_default()
            );
        }
        for note in &p.notes {
            let _ = writeln!(s, "  {:<9} note: {note}", p.name);
        }
    }
    let pc = &run.per_connection;
    // A side that lost a worker has no honest figure: its memory left with the worker.
    let user = |v: Option<f64>| match v {
        Some(v) => format!("{} B", v.round()),
        None => "n/a".to_owned(),
    };
    let _ = writeln!(
        s,
        "\nper connection ({} held): server user {}, client user {}, kernel {} B ({} B per socket)",
        pc.connections,
        user(pc.server_user_bytes),
        user(pc.client_user_bytes),
        opt(pc.kernel_bytes.map(|v| v.round())),
        opt(pc.kernel_bytes_per_socket.map(|v| v.round())),
    );
    if let Some(client) = &run.client {
        if !client.setup_steps.is_empty() {
            let _ = writeln!(s, "\nsetup rate per step:");
            for step in &client.setup_steps {
                let _ = writeln!(
                    s,
                    "  {:>10} connections at {:>7.1} s: {:>9.0} conn/s",
                    step.connections, step.at_s, step.rate_per_s
                );
            }
        }
        if let Some(r) = &client.setup_rate {
            let peak = match r.peak {
                PeakRate::Busiest {
                    per_s,
                    from_s,
                    to_s,
                } => format!("peak {per_s:.0}/s ({from_s:.2}–{to_s:.2} s)"),
                other => format!("no peak: {}", other.why_none().unwrap_or_default()),
            };
            let _ = writeln!(
                s,
                "\nsetup rate: asked {}, achieved {:.0}/s ({} connected in {:.2} s), {peak}",
                r.asked_per_s
                    .map(|a| format!("{a:.0}/s"))
                    .unwrap_or_else(|| "unpaced".into()),
                r.achieved_per_s.unwrap_or(0.0),
                r.connected,
                r.duration_s
            );
            let ms = |v: u64| v as f64 / 1000.0;
            for (what, call, sched) in SETUP_LATENCY_PAIRS {
                for (from, name) in [("the call", call), ("the schedule", sched)] {
                    if let Ok(h) = client.histogram(name)
                        && !h.is_empty()
                    {
                        let p = Percentiles::of(&h);
                        let _ = writeln!(
                            s,
                            "  {what}, from {from:<12} count={} median={:.3} ms p99={:.3} ms max={:.3} ms",
                            p.count,
                            ms(p.p50),
                            ms(p.p99),
                            ms(p.max)
                        );
                    }
                }
            }
        }
        if let Some(line) = push_rule_line(run) {
            let _ = writeln!(s, "\n{line}");
        }
        for p in &client.pushes {
            let after = run
                .config
                .push
                .map_or("the push began", |r| r.fanout_origin());
            let _ = writeln!(
                s,
                "push {}: {} connections received it; the last {:.2} s after {after}",
                p.push_id, p.count, p.complete_s
            );
        }
        if client.counters.push_undecodable > 0 {
            let _ = writeln!(
                s,
                "\npush frames that did not decode as the push format: {}",
                crate::fmt::count(client.counters.push_undecodable)
            );
        }
    }
    for (side, snap) in [("client", &run.client), ("server", &run.server)] {
        let Some(snap) = snap else { continue };
        for name in HIST_NAMES {
            if let Ok(h) = snap.histogram(name)
                && !h.is_empty()
            {
                let _ = write!(
                    s,
                    "\n{}",
                    Percentiles::of(&h).table(&hist_title(run, side, name))
                );
            }
        }
    }
    if let Some(k) = &run.kernel {
        let _ = writeln!(s, "\nretransmits: {}", k.retransmits_explained());
        if let Some(r) = k.resets_explained() {
            let _ = writeln!(s, "resets: {r}");
        }
    }
    if let Some(audit) = &run.audit {
        let _ = write!(
            s,
            "\nc1m against the kernel's own counters (since attach, {:?} scope):\n{}",
            audit.scope,
            audit.text_table()
        );
    }
    s
}
