//! The end-of-run summary printed to the terminal: phases, kernel vs app, figures per
//! connection, setup rate per step, latency tables in the seeds' form.

use std::fmt::Write as _;

use super::model::RunRecord;
use crate::{
    fmt::bytes,
    workload::stats::{HIST_NAMES, Percentiles},
};

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "n/a".to_owned())
}

pub fn text(run: &RunRecord) -> String {
    let mut s = String::new();
    let c = &run.config;
    let _ = writeln!(
        s,
        "\n== c1m run: {} — {} connections, {} mode, {} conn/s target ==",
        run.outcome, c.connections, c.mode, c.rate_per_s
    );
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
            format!("{:.1}/{:.1}", p.server.cpu_user_s, p.server.cpu_sys_s),
            format!("{:.1}/{:.1}", p.client.cpu_user_s, p.client.cpu_sys_s),
            format!("{:.1}/{:.1}", p.observer.cpu_user_s, p.observer.cpu_sys_s),
            bytes(p.server.rss_bytes as f64),
            bytes(p.client.rss_bytes as f64),
            p.kernel_socket_bytes
                .map(|b| bytes(b as f64))
                .unwrap_or_else(|| "n/a".into()),
            bytes(p.box_mem_available_bytes as f64),
        );
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
    let _ = writeln!(
        s,
        "\nper connection ({} held): server user {} B, client user {} B, kernel {} B ({} B per socket)",
        pc.connections,
        opt(pc.server_user_bytes.map(|v| v.round())),
        opt(pc.client_user_bytes.map(|v| v.round())),
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
        for p in &client.pushes {
            let _ = writeln!(
                s,
                "\npush {}: {} connections received it; the last {:.2} s after the broadcast began",
                p.push_id, p.count, p.complete_s
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
                    Percentiles::of(&h).table(&format!("{side} {name}"))
                );
            }
        }
    }
    for w in &run.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}
