//! The two columns, server and client, each figure of the app next to the kernel's; and
//! the setup rate over time under them.

use ratatui::{
    Frame,
    layout::{Constraint, Rect},
    style::Style,
    text::{Line, Span},
    widgets::{Block, Borders, Cell, Paragraph, Row, Sparkline, Table},
};

use super::style::{
    APP, KERNEL, LABEL, MISSING, Palette, TITLE, WARN, bytes, figure_span, n_i, n_u, one_line,
    per_s, value,
};
use crate::{
    figures::{Figures, SideFigures},
    fmt::{self, NA, ellipsis},
    model::Source,
    view::live_state::LiveState,
};

/// Width of the label cell in the columns.
const LABEL_WIDTH: u16 = 20;

/// Memory per connection in whole bytes, as the run's summary prints it (so the live
/// and the final figure read alike), with the phase it is from when not now.
fn per_connection_bytes(v: Option<f64>, held: Option<&str>, style: Style) -> Span<'static> {
    value(
        v.map(|b| match held {
            Some(phase) => format!("{} B (end of {})", fmt::num(b, 0), one_line(phase)),
            None => format!("{} B", fmt::num(b, 0)),
        }),
        style,
    )
}

/// Figures shared by both columns, in the same rows: memory and CPU. `m` is the side's
/// memory figures: the latest, or once idle is over the end of idle's (`held` names it).
fn common_rows(
    s: &SideFigures,
    m: &SideFigures,
    held: Option<&str>,
    p: Palette,
) -> [(&'static str, Span<'static>); 5] {
    let (walk, app) = if held.is_some() {
        (KERNEL, APP)
    } else {
        (p.walk, p.app)
    };
    [
        ("transitions", per_s(s.transitions_per_s, p.kernel)),
        (
            "kernel per socket",
            per_connection_bytes(m.kernel_bytes_per_socket, held, walk),
        ),
        (
            "user per connection",
            per_connection_bytes(m.user_bytes_per_connection, held, app),
        ),
        (
            "resident memory",
            bytes(s.rss_bytes.map(|b| b as f64), p.app),
        ),
        (
            "CPU busy",
            value(s.cpu_cores.map(|c| format!("{c:.2} cores")), p.app),
        ),
    ]
}

pub(super) fn server_rows(state: &LiveState) -> Vec<(&'static str, Span<'static>)> {
    let f = &state.figures;
    let (m, held) = state.memory_figures();
    let s = &f.server;
    let p = Palette::of(f, Source::Server);
    let queue = f.queue_depth.map(|d| {
        format!(
            "{} / {}",
            fmt::count(d),
            f.queue_limit.map_or_else(|| NA.to_owned(), fmt::count)
        )
    });
    let overflows = f.queue_overflows.map(|o| match f.queue_overflow_acks {
        Some(a) if a > 0 => format!("{} ({} final ACKs)", fmt::count(o), fmt::count(a)),
        _ => fmt::count(o),
    });
    let overflow_style = if f.queue_overflows.is_some_and(|o| o > 0) {
        WARN
    } else {
        p.kernel
    };
    let mut rows = vec![
        ("app open", n_u(s.app_open, p.app)),
        ("kernel ESTABLISHED", n_i(s.kernel_established, p.kernel)),
        ("kernel CLOSE_WAIT", n_i(s.kernel_close_wait, p.kernel)),
        ("kernel SYN_RECV", n_i(s.kernel_syn_recv, p.kernel)),
        ("accept queue / limit", value(queue, p.kernel)),
        ("queue overflows", value(overflows, overflow_style)),
        ("app accepted total", n_u(s.app_total, p.app)),
    ];
    rows.extend(common_rows(s, &m.server, held, p));
    rows
}

pub(super) fn client_rows(state: &LiveState) -> Vec<(&'static str, Span<'static>)> {
    let f = &state.figures;
    let (m, held) = state.memory_figures();
    let c = &f.client;
    let p = Palette::of(f, Source::Client);
    let failures = c.app_failures.map(|n| {
        if c.app_failure_causes.is_empty() {
            fmt::count(n)
        } else {
            let causes: Vec<String> = c
                .app_failure_causes
                .iter()
                .map(|(cause, n)| format!("{cause} {}", fmt::count(*n)))
                .collect();
            format!("{} ({})", fmt::count(n), causes.join(", "))
        }
    });
    let failure_style = if c.app_failures.is_some_and(|n| n > 0) {
        WARN
    } else {
        p.app
    };
    let mut rows = vec![
        ("app open", n_u(c.app_open, p.app)),
        ("kernel ESTABLISHED", n_i(c.kernel_established, p.kernel)),
        ("kernel SYN_SENT", n_i(c.kernel_syn_sent, p.kernel)),
        ("app in flight", n_u(c.app_in_flight, p.app)),
        ("app failures", value(failures, failure_style)),
    ];
    // Why TLS handshakes failed, in words; only once one did.
    if !c.tls_failure_reasons.is_empty() {
        let words = crate::figures::tls_reasons_in_words(&c.tls_failure_reasons);
        rows.push(("app TLS failures", value(Some(words), WARN)));
    }
    rows.extend([
        ("setup rate", per_s(f.setup_per_s, p.app)),
        ("app connected total", n_u(c.app_total, p.app)),
    ]);
    // `--churn`: what it came to, and the TIME_WAIT it leaves (in ws mode the server's:
    // the server closes first); only once a connection was churned.
    if let Some(ch) = c.app_churn.filter(|ch| ch.closed > 0) {
        let tw = |v: Option<i64>| v.map_or_else(|| NA.to_owned(), |n| fmt::count(n.max(0) as u64));
        rows.push((
            "churned/reopened",
            value(
                Some(format!(
                    "{} / {} ({} failed)",
                    fmt::count(ch.closed),
                    fmt::count(ch.reopened),
                    fmt::count(ch.failed)
                )),
                if ch.failed > 0 { WARN } else { p.app },
            ),
        ));
        rows.push((
            "kernel TIME_WAIT c/s",
            value(
                Some(format!(
                    "{} / {}",
                    tw(c.kernel_time_wait),
                    tw(f.server.kernel_time_wait)
                )),
                p.kernel,
            ),
        ));
    }
    rows.extend(common_rows(c, &m.client, held, p));
    rows
}

pub(super) fn column(
    title: &'static str,
    rows: Vec<(&'static str, Span<'static>)>,
    width: u16,
) -> Table<'static> {
    // Borders, the label and the gap between cells; a value that does not fit ends in "…".
    let room = usize::from(width.saturating_sub(2 + LABEL_WIDTH + 1));
    let rows = rows.into_iter().map(|(label, v)| {
        let v = Span::styled(ellipsis(&v.content, room), v.style);
        Row::new([Cell::from(Span::styled(label, LABEL)), Cell::from(v)])
    });
    Table::new(rows, [Constraint::Length(LABEL_WIDTH), Constraint::Fill(1)]).block(
        Block::new()
            .borders(Borders::TOP | Borders::LEFT | Borders::RIGHT)
            .title(Span::styled(title, TITLE)),
    )
}

pub(super) fn setup_rate(frame: &mut Frame, area: Rect, state: &LiveState, f: &Figures) {
    let rates: Vec<Option<f64>> = state.history.iter().map(|s| s.setup_per_s()).collect();
    let peak = rates
        .iter()
        .flatten()
        .copied()
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
    // The headline rate is the client's own when there is one, else the kernel's.
    let source = if f.client_connect_per_s.is_some() {
        Source::Client
    } else {
        Source::Kernel
    };
    let title = Line::from(vec![
        Span::styled(" setup rate, connections/s ", TITLE),
        Span::raw("now "),
        f.setup_per_s.map_or_else(
            || Span::styled(NA, MISSING),
            |r| {
                figure_span(
                    format!("{}/s", fmt::whole(r)),
                    Style::new(),
                    f.stale(source),
                )
            },
        ),
        Span::raw(format!(
            "  peak {}",
            peak.map_or_else(|| NA.to_owned(), |r| format!("{}/s", fmt::whole(r))),
        )),
        // The client's setup time (first connect to last established, frozen when the
        // ramp ends), the summary's; the chart's span is not it.
        Span::raw("  setup time "),
        f.setup_duration_s.map_or_else(
            || Span::styled(NA, MISSING),
            |d| figure_span(format!("{d:.2} s"), Style::new(), f.stale(Source::Client)),
        ),
        Span::raw(format!(
            "  (chart: {}) ",
            fmt::duration(state.history.len() as f64)
        )),
    ]);
    let block = Block::bordered().title(title);
    let inner = block.inner(area);
    if rates.is_empty() {
        frame.render_widget(
            Paragraph::new(Span::styled("no samples yet", MISSING)).block(block),
            area,
        );
        return;
    }
    let data = resample(&rates, usize::from(inner.width));
    frame.render_widget(
        Sparkline::default()
            .block(block)
            .style(APP)
            .absent_value_symbol("·")
            .absent_value_style(MISSING)
            .data(data),
        area,
    );
}

/// `rates` (one a second) over `width` columns: a history shorter than the chart is
/// stretched (each second as wide as the chart allows), a longer one is averaged per
/// column; a column with no sample shows as absent. A 2-second ramp drew 2 of 196
/// columns before.
pub(super) fn resample(rates: &[Option<f64>], width: usize) -> Vec<Option<u64>> {
    let n = rates.len();
    if n == 0 || width == 0 {
        return Vec::new();
    }
    let round = |v: f64| v.max(0.0).round() as u64;
    if n <= width {
        return (0..width)
            .map(|x| rates[x * n / width].map(round))
            .collect();
    }
    (0..width)
        .map(|x| {
            let bucket = &rates[x * n / width..(x + 1) * n / width];
            let present: Vec<f64> = bucket.iter().flatten().copied().collect();
            (!present.is_empty()).then(|| round(present.iter().sum::<f64>() / present.len() as f64))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::resample;

    #[test]
    fn the_chart_spans_its_width() {
        // Stretched: two seconds over six columns, three each.
        assert_eq!(
            resample(&[Some(1.0), Some(2.0)], 6),
            [Some(1), Some(1), Some(1), Some(2), Some(2), Some(2)]
        );
        // Averaged: six seconds over three columns; an empty column stays absent.
        assert_eq!(
            resample(&[Some(1.0), Some(3.0), None, None, Some(5.0), None], 3),
            [Some(2), None, Some(5)]
        );
        assert_eq!(resample(&[Some(4.0); 600], 196).len(), 196);
        assert!(resample(&[], 10).is_empty());
        assert!(resample(&[Some(1.0)], 0).is_empty());
    }
}
