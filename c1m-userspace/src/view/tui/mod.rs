//! The terminal UI: server and client side by side, each with the app's count next to the
//! kernel's, then the setup rate over time and the kernel-vs-app rows with their
//! explanations.
//!
//! [`render`] draws one frame from a [`LiveState`] and does no I/O, so tests render into
//! ratatui's `TestBackend`. [`Tui`](terminal::Tui) owns the real terminal: raw mode and
//! the alternate screen, restored on drop and, through a panic hook, before a panic
//! message is printed.
//!
//! A figure whose source is missing shows as "n/a" (dim), never as 0. A terminal smaller
//! than [`MIN_WIDTH`] × [`MIN_HEIGHT`] gets a compact summary instead of the full view.
//!
//! This file lays the frame out; [`style`] holds the styles and figure spans every part
//! shares, [`status_lines`] the header, warnings and footer, [`sides`] the two columns
//! and the setup rate, [`kernel_vs_app`] the rows and explanations, [`help`] the
//! overlay, [`terminal`] the real terminal and its keys.

mod help;
mod kernel_vs_app;
mod latency;
mod sides;
mod status_lines;
pub mod style;
pub mod terminal;

use ratatui::{
    Frame, Terminal,
    backend::TestBackend,
    layout::{Constraint, Layout, Rect},
    text::{Line, Span},
    widgets::{Paragraph, Wrap},
};

use self::{
    help::help_overlay,
    kernel_vs_app::{KVA_BORDERS, kernel_vs_app, kernel_vs_app_height, wrap_words},
    latency::{latency_rows, latency_words},
    sides::{client_rows, column, server_rows, setup_rate},
    status_lines::{fit_warnings, footer_line, header_line, warning_lines, warnings},
    style::{MISSING, Palette, n_i, n_u},
};
use crate::{
    figures::{Figures, SideFigures},
    fmt::{self, NA},
    model::Source,
    view::live_state::LiveState,
};

/// Below this size the full view cannot be read; a compact summary is drawn instead.
pub(crate) const MIN_WIDTH: u16 = 60;
pub(crate) const MIN_HEIGHT: u16 = 18;
/// Rows in each side's column (both columns have the same number, so rows line up).
const COLUMN_ROWS: u16 = 12;
/// The columns' box has no bottom line: what follows draws its own top line.
const COLUMN_BORDERS: u16 = 1;
/// The rows a short terminal keeps: the counts (memory and CPU rows go first).
const COLUMN_MIN_ROWS: u16 = 7;
/// Heights of the setup-rate chart, borders included: below the minimum it is left out.
const SPARK_MIN: u16 = 4;
const SPARK_MAX: u16 = 14;
/// The widest a side's column gets: a label and its value stay within a glance of each
/// other (at 200 columns, a half-width panel put them 80 cells apart from the border).
pub(crate) const COLUMN_MAX: u16 = 60;
/// The latency panel beside the columns: a label, a value in ms, borders.
const LATENCY_WIDTH: u16 = 38;
/// A side's column is at least this wide when the latency panel is beside it; a
/// narrower terminal shows the latencies as lines under the columns instead.
const COLUMN_BESIDE_LATENCY: u16 = 48;

/// The latency panel goes beside the columns (true) or under them as lines.
fn latency_beside(width: u16) -> bool {
    width >= 2 * COLUMN_BESIDE_LATENCY + LATENCY_WIDTH
}

/// Width of each side's column.
fn column_width(width: u16) -> u16 {
    let room = if latency_beside(width) {
        width - LATENCY_WIDTH
    } else {
        width
    };
    (room / 2).min(COLUMN_MAX)
}

/// Draws the whole live view into `frame`, without the help overlay.
pub fn render(frame: &mut Frame, state: &LiveState) {
    render_view(frame, state, false);
}

/// Draws the live view and, when `help` is on, the help overlay above it.
pub(crate) fn render_view(frame: &mut Frame, state: &LiveState, help: bool) {
    let area = frame.area();
    let figures = &state.figures;
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        compact(frame, area, state, figures);
    } else {
        full(frame, area, state, figures);
    }
    if help {
        help_overlay(frame, area);
    }
}

/// Heights of the regions of the full view, from what the terminal has: every region gets
/// its minimum first (so 80×24 shows them all), then the spare lines go, in order, to the
/// kernel-vs-app explanations (so 80×24 shows every one of the demo's), the latency
/// lines (when the panel is not beside the columns), the columns' lower rows, the
/// warnings and the chart.
struct Heights {
    warn: u16,
    columns: u16,
    latency: u16,
    spark: u16,
    kva: u16,
}

fn heights(area: Rect, f: &Figures, warnings: usize, latency_lines: u16) -> Heights {
    let mut spare = area.height.saturating_sub(2); // header and footer
    // Up to `want` lines, or none when fewer than `at_least` are left.
    let mut take = |at_least: u16, want: u16| {
        if spare < at_least {
            return 0;
        }
        let got = want.min(spare);
        spare -= got;
        got
    };
    let row_count = u16::try_from(f.kernel_vs_app.len()).unwrap_or(u16::MAX);
    let mut columns = take(0, COLUMN_MIN_ROWS + COLUMN_BORDERS);
    let mut kva = take(0, row_count.max(1) + KVA_BORDERS);
    let warnings = u16::try_from(warnings).unwrap_or(u16::MAX);
    let mut warn = take(0, warnings.min(1));
    kva += take(0, kernel_vs_app_height(f, area.width).saturating_sub(kva));
    let latency = take(0, latency_lines);
    columns += take(0, COLUMN_ROWS - COLUMN_MIN_ROWS);
    warn += take(0, warnings.saturating_sub(warn));
    let spark = take(SPARK_MIN, SPARK_MAX);
    kva += take(0, u16::MAX); // whatever is left
    Heights {
        warn,
        columns,
        latency,
        spark,
        kva,
    }
}

fn full(frame: &mut Frame, area: Rect, state: &LiveState, figures: &Figures) {
    let mut warnings = warnings(state);
    let beside = latency_beside(area.width);
    let latency_lines = if beside {
        Vec::new()
    } else {
        wrap_words(
            latency_words(figures),
            usize::from(area.width.saturating_sub(2)),
        )
    };
    let h = heights(
        area,
        figures,
        warnings.len(),
        u16::try_from(latency_lines.len()).unwrap_or(u16::MAX),
    );
    fit_warnings(&mut warnings, usize::from(h.warn), area.width);
    let warnings = warning_lines(warnings);
    let [header, warn, columns, latency, spark, kva, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(h.warn),
        Constraint::Length(h.columns),
        Constraint::Length(h.latency),
        Constraint::Length(h.spark),
        Constraint::Length(h.kva),
        Constraint::Length(1),
    ])
    .areas(area);
    frame.render_widget(
        Paragraph::new(header_line(state, figures, area.width)),
        header,
    );
    frame.render_widget(Paragraph::new(warnings), warn);
    let cw = column_width(area.width);
    let [left, right, beside_area] = Layout::horizontal([
        Constraint::Length(cw),
        Constraint::Length(cw),
        Constraint::Length(if beside { LATENCY_WIDTH } else { 0 }),
    ])
    .areas(columns);
    frame.render_widget(column(" server ", server_rows(state), left.width), left);
    frame.render_widget(column(" client ", client_rows(state), right.width), right);
    if beside {
        frame.render_widget(
            column(" latency ", latency_rows(figures), beside_area.width),
            beside_area,
        );
    } else {
        let lines: Vec<Line> = latency_lines
            .into_iter()
            .map(|spans| Line::from([vec![Span::raw(" ")], spans].concat()))
            .collect();
        frame.render_widget(Paragraph::new(lines), latency);
    }
    if spark.height > 0 {
        setup_rate(frame, spark, state, figures);
    }
    frame.render_widget(kernel_vs_app(figures, kva), kva);
    frame.render_widget(Paragraph::new(footer_line(area.width)), footer);
}

/// The view for a terminal too small for the columns: the two key rows and a hint.
fn compact(frame: &mut Frame, area: Rect, state: &LiveState, f: &Figures) {
    let side = |name: &str, s: &SideFigures, app: Source| {
        let p = Palette::of(f, app);
        Line::from(vec![
            Span::raw(format!("{name} app ")),
            n_u(s.app_open, p.app),
            Span::raw(" kernel "),
            n_i(s.kernel_established, p.kernel),
        ])
    };
    let lines = vec![
        Line::from(format!(
            "{} {} {}",
            if state.title.is_empty() {
                "c1m"
            } else {
                &state.title
            },
            if state.phase.is_empty() {
                NA
            } else {
                &state.phase
            },
            fmt::duration(state.elapsed_s)
        )),
        side("server", &f.server, Source::Server),
        side("client", &f.client, Source::Client),
        Line::from(Span::styled(
            format!("(enlarge to {MIN_WIDTH}x{MIN_HEIGHT} for the full view)"),
            MISSING,
        )),
    ];
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: true }), area);
}

/// The view as plain text, `width` × `height` cells, one string per row (styles dropped):
/// for tests, and for printing one frame without a terminal (e.g. a `--once` snapshot).
pub fn text_screen(state: &LiveState, width: u16, height: u16) -> Vec<String> {
    text_screen_view(state, width, height, false)
}

/// [`text_screen`] with the help overlay on or off.
pub fn text_screen_view(state: &LiveState, width: u16, height: u16, help: bool) -> Vec<String> {
    let Ok(mut terminal) = Terminal::new(TestBackend::new(width, height));
    let Ok(_) = terminal.draw(|frame| render_view(frame, state, help));
    let buffer = terminal.backend().buffer();
    (0..height)
        .map(|y| (0..width).map(|x| buffer[(x, y)].symbol()).collect())
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::{text_screen as screen, *};
    use crate::view::demo;

    #[test]
    fn never_panics_at_any_size_or_state() {
        let mut odd = demo::state();
        odd.phase = "x".repeat(500);
        odd.title = "\n\r\t".into();
        odd.elapsed_s = f64::NAN;
        odd.target = u64::MAX;
        if let Some(k) = odd.kernel.as_mut() {
            k.unavailable = (0..50).map(|i| format!("figure {i}\nbroken")).collect();
            k.server.transitions_per_s = f64::INFINITY;
            k.listeners = (1..2000)
                .map(|p| crate::observer::ListenerView {
                    port: p,
                    queue_depth: u64::MAX / 4,
                    queue_limit: 1,
                    accept_queue_overflows: u64::MAX / 2,
                    ..Default::default()
                })
                .collect();
        }
        for s in odd.history.iter_mut() {
            s.client_connect_per_s = Some(f64::MAX);
        }
        let states = [demo::state(), LiveState::default(), odd];
        for state in &states {
            for w in [1, 2, 10, 40, 59, 60, 61, 80, 120, 160, 300] {
                for h in [1, 2, 5, 17, 18, 19, 25, 30, 40, 50, 80] {
                    screen(state, w, h);
                }
            }
        }
    }

    #[test]
    fn small_terminals_get_the_compact_view() {
        let lines = screen(&demo::state(), 50, 10);
        let text = lines.join("\n");
        assert!(text.contains("server app 600,000 kernel 600,407"), "{text}");
        assert!(text.contains("client app 600,300 kernel 600,349"), "{text}");
        assert!(text.contains("enlarge"), "{text}");
    }
}
