//! The end-of-run summary printed to the terminal: phases, kernel vs app, figures per
//! connection, setup rate per step, latency tables in the seeds' form.
//!
//! Every line fits the terminal's width ($COLUMNS, else the terminal's, as `c1m
//! compare`): tables split into blocks of columns that fit, prose wraps at spaces. Every
//! number goes through [`crate::fmt`], so each carries its thousands separators.

mod messages;
mod phase_latency;

use std::fmt::Write as _;

use crate::compare::fit::{self, Blocks, Line};
use crate::fmt::{bytes, count, num, pace, signed, whole};
use crate::model::{RunRecord, kernel_vs_app::KernelVsApp, phase::Phase};
use crate::observer::{audit::Verdict, view::Scope};
use crate::report::figures::{hist_title, messages_asked_line, push_rule_line, tls_line};
use crate::workload::stats::{
    histograms::{HIST_NAMES, Percentiles, SETUP_LATENCY_PAIRS},
    setup_rate::PeakRate,
};

/// The summary at the terminal's width.
pub(crate) fn text(run: &RunRecord) -> String {
    text_at(run, fit::width())
}

/// A line of prose (`format!` arguments) wrapped to the width, continuation lines
/// indented two more than `indent`.
macro_rules! wrapln {
    ($s:expr, $width:expr, $indent:expr, $($arg:tt)*) => {
        $s.push_str(&fit::wrap(&format!($($arg)*), $width, $indent))
    };
}

/// What the phase table's columns mean, said once under it.
const PHASE_LEGEND: &str = "secs: the phase's length; cpu: user/system CPU seconds the \
     process tree used in the phase (c1m: the lab and its kernel observer); RSS: resident \
     memory at the phase's end; kernel mem: the kernel memory of the watched sockets; free \
     mem: the box's MemAvailable";

/// The workload as the header says it: "ws mode", "wss mode" (ws over TLS), "echo mode
/// over TLS".
fn mode_phrase(c: &crate::model::config::RunConfig) -> String {
    match (c.mode.as_str(), &c.tls) {
        ("ws", Some(_)) => "wss mode".to_owned(),
        (m, Some(_)) => format!("{m} mode over TLS"),
        (m, None) => format!("{m} mode"),
    }
}

/// The summary with every line at most `width` columns.
pub(crate) fn text_at(run: &RunRecord, width: usize) -> String {
    let mut s = String::new();
    let c = &run.config;
    // Bad news first: the top line says how many warnings, and they follow it.
    let warned = match run.warnings.len() {
        0 => String::new(),
        1 => " (1 warning)".to_owned(),
        n => format!(" ({} warnings)", count(n as u64)),
    };
    s.push('\n');
    wrapln!(
        s,
        width,
        "",
        "== c1m run: {}{warned} — {} connections, {}, {} ==",
        run.outcome,
        count(c.connections),
        mode_phrase(c),
        match c.rate_per_s {
            0 => pace(0),
            r => format!("{} target", pace(r)),
        }
    );
    wrapln!(
        s,
        width,
        "",
        "server: {}; client: {}",
        run.server_label(),
        run.client_label()
    );
    if let Some(tls) = tls_line(run) {
        wrapln!(s, width, "", "{tls}");
    }
    if let Some(asked) = messages_asked_line(run) {
        wrapln!(s, width, "", "{asked}");
    }
    if let Some(start) = run.start_line() {
        wrapln!(s, width, "", "start: {start}");
    }
    for w in &run.warnings {
        wrapln!(s, width, "", "warning: {w}");
    }
    s.push_str(&phase_table(&run.phases).render(width));
    wrapln!(s, width, "", "{}", PHASE_LEGEND);
    if let Some(line) = crate::model::phase::end_walks_line(&run.phases) {
        wrapln!(s, width, "", "{}", &line);
    }
    s.push('\n');
    kernel_vs_app(&mut s, width, &run.phases);
    let pc = &run.per_connection;
    // A side that lost a worker has no honest figure: its memory left with the worker.
    let b = |v: Option<f64>| match v {
        Some(v) => format!("{} B", whole(v)),
        None => crate::fmt::NA.to_owned(),
    };
    s.push('\n');
    wrapln!(
        s,
        width,
        "",
        "per connection ({} held): server user {}, client user {}, kernel {} ({} per socket)",
        count(pc.connections),
        b(pc.server_user_bytes),
        b(pc.client_user_bytes),
        b(pc.kernel_bytes),
        b(pc.kernel_bytes_per_socket)
    );
    if let Some(client) = &run.client {
        if !client.setup_steps.is_empty() {
            let _ = writeln!(s, "\nsetup rate per step:");
            for step in &client.setup_steps {
                let _ = writeln!(
                    s,
                    "  {:>10} connections at {:>7} s: {:>9} conn/s",
                    count(step.connections),
                    num(step.at_s, 1),
                    whole(step.rate_per_s)
                );
            }
        }
        if let Some(r) = &client.setup_rate {
            let peak = match r.peak {
                PeakRate::Busiest {
                    per_s,
                    from_s,
                    to_s,
                } => format!(
                    "peak {}/s ({}–{} s)",
                    whole(per_s),
                    num(from_s, 2),
                    num(to_s, 2)
                ),
                other => format!("no peak: {}", other.why_none().unwrap_or_default()),
            };
            s.push('\n');
            wrapln!(
                s,
                width,
                "",
                "setup rate: asked {}, achieved {}/s ({} connected in {} s), {peak}",
                r.asked_per_s
                    .map(|a| format!("{}/s", whole(a)))
                    .unwrap_or_else(|| "unpaced".into()),
                whole(r.achieved_per_s.unwrap_or(0.0)),
                count(r.connected),
                num(r.duration_s, 2)
            );
            let mut lines = Vec::new();
            for (what, call, sched) in SETUP_LATENCY_PAIRS {
                let rows: Vec<Line> = [("  from the call", call), ("  from the schedule", sched)]
                    .into_iter()
                    .filter_map(|(from, name)| {
                        let h = client.histogram(name).ok().filter(|h| !h.is_empty())?;
                        let p = Percentiles::of(&h);
                        let ms = |us: u64| crate::fmt::ms(us as f64);
                        let cells = vec![
                            count(p.count).into(),
                            ms(p.p50).into(),
                            ms(p.p99).into(),
                            ms(p.max).into(),
                        ];
                        Some(Line::Cells(from.to_owned(), vec![cells]))
                    })
                    .collect();
                if !rows.is_empty() {
                    lines.push(Line::Title(what.to_owned()));
                    lines.extend(rows);
                }
            }
            if !lines.is_empty() {
                let table = Blocks {
                    head: "setup latency (ms)".to_owned(),
                    groups: vec![
                        ["count", "median", "p99", "max"]
                            .map(str::to_owned)
                            .to_vec(),
                    ],
                    lines,
                    keep: 0,
                };
                s.push_str(&table.render(width));
            }
        }
        if let Some(line) = push_rule_line(run) {
            s.push('\n');
            wrapln!(s, width, "", "{}", &line);
        }
        for p in &client.pushes {
            let after = run
                .config
                .push
                .map_or("the push began", |r| r.fanout_origin());
            wrapln!(
                s,
                width,
                "",
                "push {}: {} connections received it; the last {} s after {after}",
                p.push_id,
                count(p.count),
                num(p.complete_s, 2)
            );
        }
        if client.counters.push_undecodable > 0 {
            s.push('\n');
            wrapln!(
                s,
                width,
                "",
                "push frames that did not decode as the push format: {}",
                count(client.counters.push_undecodable)
            );
        }
    }
    for (side, snap) in [("client", &run.client), ("server", &run.server)] {
        let Some(snap) = snap else { continue };
        for name in HIST_NAMES {
            if let Ok(h) = snap.histogram(name)
                && !h.is_empty()
            {
                s.push('\n');
                let title = fit::wrap(&hist_title(run, side, name), width.saturating_sub(5), "");
                // The title's last line carries the unit, as the seeds' tables do.
                s.push_str(&Percentiles::of(&h).table(title.trim_end()));
            }
        }
    }
    if let Some(table) = phase_latency::table(run) {
        s.push('\n');
        s.push_str(&table.render(width));
    }
    for hb in crate::figures::heartbeat::of(run) {
        s.push('\n');
        wrapln!(s, width, "", "{}", heartbeat_line(&hb));
    }
    if let Some(ch) = crate::figures::churn::of(run) {
        s.push('\n');
        wrapln!(s, width, "", "{}", churn_line(&ch));
    }
    if let Some(m) = crate::figures::messages::of(run) {
        s.push('\n');
        wrapln!(s, width, "", "{}", messages::messages_line(&m));
    }
    if let Some(m) = crate::figures::messages::server_of(run) {
        s.push('\n');
        wrapln!(s, width, "", "{}", messages::server_messages_line(&m));
    }
    if let Some(line) = crate::report::empty_histograms_line(run) {
        s.push('\n');
        wrapln!(s, width, "", "{}", &line);
    }
    if let Some(k) = &run.kernel {
        s.push('\n');
        wrapln!(s, width, "", "retransmits: {}", k.retransmits_explained());
        if let Some(r) = k.resets_explained() {
            wrapln!(s, width, "", "resets: {r}");
        }
    }
    // `--loss`: each client host's drops beside the retransmits they caused there.
    if let Some(m) = &run.multihost {
        let lines: Vec<&str> = m
            .hosts
            .iter()
            .filter_map(|h| h.loss_explained.as_deref())
            .collect();
        if !lines.is_empty() {
            s.push('\n');
        }
        for line in lines {
            wrapln!(s, width, "", "{line}");
        }
    }
    if let Some(audit) = &run.audit {
        let scope = match audit.scope {
            Scope::Namespace => "every socket of the namespace",
            Scope::WatchedPorts => "the watched ports' sockets",
            Scope::AllNamespaces => "every namespace's sockets",
        };
        s.push('\n');
        wrapln!(
            s,
            width,
            "",
            "c1m against the kernel's own counters, moved since attach ({scope}):"
        );
        if let Some(why) = &audit.unavailable {
            wrapln!(s, width, "  ", "unavailable: {why}");
        }
        if !audit.rows.is_empty() {
            let lines = audit
                .rows
                .iter()
                .map(|r| {
                    let verdict = match r.verdict {
                        Verdict::Agrees => "agrees",
                        Verdict::Explained => "explained",
                        Verdict::Unexplained => "UNEXPLAINED",
                    };
                    let cells = vec![
                        count(r.c1m).into(),
                        count(r.kernel).into(),
                        verdict.to_owned().into(),
                    ];
                    Line::Cells(format!("  {}", r.figure.mib_name()), vec![cells])
                })
                .collect();
            let table = Blocks {
                head: "  kernel counter".to_owned(),
                groups: vec![["c1m", "kernel", "verdict"].map(str::to_owned).to_vec()],
                lines,
                keep: 0,
            };
            s.push_str(&table.render(width));
            for r in audit.rows.iter().filter(|r| !r.explanation.is_empty()) {
                wrapln!(s, width, "  ", "{}: {}", r.figure.mib_name(), r.explanation);
            }
        }
    }
    // Last, where CI reads: the verdicts the exit code follows.
    let checks = crate::lab::gate::lines(&run.checks);
    if !checks.is_empty() {
        s.push('\n');
    }
    for l in checks {
        let item = l.strip_prefix("  ");
        wrapln!(
            s,
            width,
            if item.is_some() { "  " } else { "" },
            "{}",
            item.unwrap_or(&l)
        );
    }
    s
}

/// The phases' length, CPU and memory: one table where the width allows, else a block
/// of CPU and a block of memory, each under the phase names.
/// "churn: 300,000 closed, 299,998 reopened (p99 setup 2.100 ms), 2 failed", then the
/// TIME_WAIT it left at most and the churning phase's CPU per churn.
fn churn_line(ch: &crate::figures::churn::ChurnFigures) -> String {
    let c = &ch.counts;
    let p99 = ch
        .setup
        .as_ref()
        .map(|p| format!(" (p99 setup {} ms)", crate::fmt::ms(p.p99 as f64)))
        .unwrap_or_default();
    let mut line = format!(
        "churn: {} closed, {} reopened{p99}, {} failed",
        count(c.closed),
        count(c.reopened),
        count(c.failed)
    );
    if c.reopening + c.closing > 0 {
        line.push_str(&format!(
            ", {} reopening and {} closing at the end",
            count(c.reopening),
            count(c.closing)
        ));
    }
    if let Some(tw) = ch.time_wait_peak {
        line.push_str(&format!(
            "; TIME_WAIT at most {} client, {} server",
            signed(tw.client),
            signed(tw.server)
        ));
    }
    if let Some(n) = ch.time_wait_overflow.filter(|&n| n > 0) {
        line.push_str(&format!(
            "; {} closes found no TIME_WAIT bucket (TCPTimeWaitOverflow: net.ipv4.tcp_max_tw_buckets)",
            count(n)
        ));
    }
    if let Some(n) = ch.time_wait_reused.filter(|&n| n > 0) {
        line.push_str(&format!("; {} TIME_WAIT reused (TWRecycled)", count(n)));
    }
    if let (Some(ms), Some((phase, n))) = (ch.cpu_ms_per_churn, &ch.phase) {
        line.push_str(&format!(
            "; {phase}: {} churns, server + client CPU {} ms per churn",
            count(*n),
            num(ms, 3)
        ));
    }
    line
}

/// "heartbeat (client): 1,000,000 pings, 1,000,000 pongs (p99 1.200 ms), 0 late, 0
/// missed", then what is unanswered or outstanding, and the idle phase's CPU per 1M pings.
fn heartbeat_line(hb: &crate::figures::heartbeat::HeartbeatFigures) -> String {
    let c = &hb.counts;
    let p99 = hb
        .pong
        .as_ref()
        .map(|p| format!(" (p99 {} ms)", crate::fmt::ms(p.p99 as f64)))
        .unwrap_or_default();
    let mut line = format!(
        "heartbeat ({}): {} pings, {} pongs{p99}, {} late, {} missed",
        hb.side,
        count(c.pings),
        count(c.pongs),
        count(c.late_pongs),
        count(c.missed)
    );
    for (what, n) in c
        .iter()
        .filter(|(k, _)| matches!(*k, "unanswered" | "outstanding" | "unsolicited_pongs"))
    {
        if n > 0 {
            let _ = write!(line, ", {} {}", count(n), what.replace('_', " "));
        }
    }
    let phase = hb.phase.as_ref().map_or("idle", |p| p.name.as_str());
    if let Some(p) = hb.phase.as_ref().filter(|p| p.switched) {
        let _ = write!(
            line,
            "; {}: {} pings, {} pongs, {} late, {} missed",
            p.name,
            count(p.pings),
            count(p.pongs),
            count(p.late_pongs),
            count(p.missed)
        );
    }
    if let Some(cpu) = hb.idle_cpu_s_per_million {
        let _ = write!(
            line,
            "; {phase} CPU {} s per 1M pings (server + client)",
            num(cpu, 2)
        );
    }
    if let Some(segs) = hb.idle_segments_per_ping {
        let _ = write!(
            line,
            ", {} TCP segments per ping (Tcp OutSegs, both sides)",
            num(segs, 2)
        );
    }
    line
}

fn phase_table(phases: &[Phase]) -> Blocks {
    // CPU comes in /proc's clock ticks (10 ms at CLK_TCK 100): to the tick.
    let cpu = |u: &crate::model::phase::ProcessUsage| {
        format!("{}/{}", num(u.cpu_user_s, 2), num(u.cpu_sys_s, 2))
    };
    let lines = phases
        .iter()
        .map(|p| {
            Line::Cells(
                p.name.clone(),
                vec![
                    vec![num(p.duration_s, 1).into()],
                    vec![
                        cpu(&p.server).into(),
                        cpu(&p.client).into(),
                        cpu(&p.observer).into(),
                    ],
                    vec![
                        bytes(p.server.rss_bytes as f64).into(),
                        bytes(p.client.rss_bytes as f64).into(),
                        p.kernel_socket_bytes
                            .map_or_else(|| crate::fmt::NA.to_owned(), |b| bytes(b as f64))
                            .into(),
                        bytes(p.box_mem_available_bytes as f64).into(),
                    ],
                ],
            )
        })
        .collect();
    let heads = |h: &[&str]| h.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>();
    Blocks {
        head: "phase".to_owned(),
        groups: vec![
            heads(&["secs"]),
            heads(&["server cpu", "client cpu", "c1m cpu"]),
            heads(&["server RSS", "client RSS", "kernel mem", "free mem"]),
        ],
        lines,
        keep: 0,
    }
}

/// Kernel vs app at the end of each phase: one line when they agreed after every phase,
/// else a line per count that differed, with its explanation.
fn kernel_vs_app(s: &mut String, width: usize, phases: &[Phase]) {
    // A row with neither figure is no count: it says where the counts are (the client
    // hosts' own folders), once.
    let (rows, elsewhere): (Vec<(&Phase, &KernelVsApp)>, Vec<_>) = phases
        .iter()
        .flat_map(|p| p.kernel_vs_app.iter().map(move |r| (p, r)))
        .partition(|(_, r)| r.kernel.is_some() || r.app.is_some());
    let mut said = std::collections::BTreeSet::new();
    for (_, r) in elsewhere {
        if said.insert(&r.what) {
            wrapln!(
                s,
                width,
                "",
                "{}: {}",
                r.what,
                r.explanation
                    .as_deref()
                    .unwrap_or("not counted on this host")
            );
        }
    }
    if rows.is_empty() {
        wrapln!(s, width, "", "kernel vs app: no phase recorded its counts");
    } else if rows.iter().all(|(_, r)| r.kernel.is_none()) {
        wrapln!(
            s,
            width,
            "",
            "kernel vs app: no kernel figures (the observer did not run); the app's counts are in summary.json"
        );
    } else if rows.iter().all(|(_, r)| r.agrees()) {
        // The most connections a count reached at a phase's end: what the agreement covers.
        let held = rows.iter().filter_map(|(_, r)| r.app).max().unwrap_or(0);
        wrapln!(
            s,
            width,
            "",
            "kernel = app after every phase: {} connections ({} counts over {} phases)",
            signed(held),
            count(rows.len() as u64),
            count(phases.len() as u64)
        );
    } else {
        let same = rows.iter().filter(|(_, r)| r.agrees()).count();
        wrapln!(
            s,
            width,
            "",
            "kernel vs app at the end of each phase: {} of {} counts agree; these differ:",
            count(same as u64),
            count(rows.len() as u64)
        );
        let n = |v: Option<i64>| v.map_or_else(|| crate::fmt::NA.to_owned(), signed);
        for (p, r) in rows.iter().filter(|(_, r)| !r.agrees()) {
            wrapln!(
                s,
                width,
                "  ",
                "{} {}: kernel {}, app {}{}",
                p.name,
                r.what,
                n(r.kernel),
                n(r.app),
                r.explanation
                    .as_ref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            );
        }
    }
    for p in phases {
        for note in &p.notes {
            wrapln!(s, width, "  ", "{} note: {note}", p.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use textwrap::core::display_width;

    use super::*;
    use crate::report::sample_run;

    #[test]
    fn every_line_fits_and_every_number_has_separators() {
        let run = sample_run();
        for width in [80, 100, 120, 200] {
            let text = text_at(&run, width);
            for line in text.lines() {
                assert!(display_width(line) <= width, "{width}: {line:?}\n{text}");
            }
            assert_eq!(
                crate::report::fixture::unseparated(&text),
                Vec::<String>::new(),
                "{text}"
            );
        }
        // At 80 the phase table splits into CPU and memory; at 120 it is one table.
        let at = |w| text_at(&run, w);
        assert_eq!(at(80).matches("\nphase ").count(), 2, "{}", at(80));
        assert_eq!(at(120).matches("\nphase ").count(), 1, "{}", at(120));
        assert!(at(80).contains("cpu: user/system CPU seconds"));
    }

    #[test]
    fn kernel_equal_to_app_after_every_phase_is_one_line() {
        let mut run = sample_run();
        // The fixture's rows differ at setup; make every one agree.
        for p in &mut run.phases {
            for r in &mut p.kernel_vs_app {
                r.kernel = Some(1_000_000);
                r.app = r.kernel;
                r.agree = true;
                r.explanation = None;
            }
        }
        let text = text_at(&run, 80);
        let rows: usize = run.phases.iter().map(|p| p.kernel_vs_app.len()).sum();
        assert!(
            text.contains(&format!(
                "kernel = app after every phase: 1,000,000 connections ({rows} counts over 4 \
                 phases)"
            )),
            "{text}"
        );
        assert!(!text.contains("differ:"), "{text}");
    }

    /// The sample run with kernel = app in every row.
    fn agreeing_run() -> RunRecord {
        let mut run = sample_run();
        for p in &mut run.phases {
            for r in &mut p.kernel_vs_app {
                r.app = r.kernel;
                r.agree = true;
                r.explanation = None;
            }
        }
        run
    }

    /// Issue 33: a server host of external clients said "8 of 12 counts agree; these
    /// differ" of its client rows, which have no figures on that host.
    #[test]
    fn a_row_without_figures_says_where_the_counts_are_once() {
        let mut run = agreeing_run();
        for p in &mut run.phases {
            p.kernel_vs_app
                .push(crate::figures::kernel_vs_app::client_hosts_elsewhere());
        }
        let text = text_at(&run, 200);
        assert!(text.contains("kernel = app after every phase"), "{text}");
        assert!(!text.contains("these differ"), "{text}");
        assert_eq!(
            text.matches("the clients run on other hosts").count(),
            1,
            "{text}"
        );
    }

    #[test]
    fn only_the_counts_that_differ_get_a_row_with_their_explanation() {
        let mut run = agreeing_run();
        let row = &mut run.phases[0].kernel_vs_app[0];
        row.app = row.kernel.map(|k| k - 412);
        row.agree = false;
        row.explanation = Some("412 established in the kernel, not yet accepted".to_owned());
        let text = text_at(&run, 80);
        let total: usize = run.phases.iter().map(|p| p.kernel_vs_app.len()).sum();
        assert!(
            text.contains(&format!(
                "{} of {total} counts agree; these differ:",
                total - 1
            )),
            "{text}"
        );
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("  setup ") || l.starts_with("  idle "))
            .collect();
        assert_eq!(rows.len(), 1, "{text}");
        assert!(text.contains("(412 established in the kernel,"), "{text}");
    }
}
