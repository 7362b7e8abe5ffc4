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
    APP, LABEL, MISSING, Palette, TITLE, WARN, bytes, figure_span, n_i, n_u, per_s, value,
};
use crate::{
    figures::{Figures, SideFigures},
    fmt::{self, NA, ellipsis},
    model::Source,
    view::live_state::LiveState,
};

/// Width of the label cell in the columns.
const LABEL_WIDTH: u16 = 20;

/// Figures shared by both columns, in the same rows: memory and CPU.
fn common_rows(s: &SideFigures, p: Palette) -> [(&'static str, Span<'static>); 5] {
    [
        ("transitions", per_s(s.transitions_per_s, p.kernel)),
        (
            "kernel per socket",
            bytes(s.kernel_bytes_per_socket, p.walk),
        ),
        (
            "user per connection",
            bytes(s.user_bytes_per_connection, p.app),
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

pub(super) fn server_rows(f: &Figures) -> Vec<(&'static str, Span<'static>)> {
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
    rows.extend(common_rows(s, p));
    rows
}

pub(super) fn client_rows(f: &Figures) -> Vec<(&'static str, Span<'static>)> {
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
        ("setup rate", per_s(f.setup_per_s, p.app)),
        ("app connected total", n_u(c.app_total, p.app)),
    ];
    rows.extend(common_rows(c, p));
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
            "  peak {}  over {} ",
            peak.map_or_else(|| NA.to_owned(), |r| format!("{}/s", fmt::whole(r))),
            fmt::duration(state.history.len() as f64),
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
    let shown = rates.len().saturating_sub(usize::from(inner.width));
    let data: Vec<Option<u64>> = rates[shown..]
        .iter()
        .map(|r| r.map(|v| v.round() as u64))
        .collect();
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
