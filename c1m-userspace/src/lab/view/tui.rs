//! The terminal UI: server and client side by side, each with the app's count next to the
//! kernel's, then the setup rate over time and the kernel-vs-app rows with their
//! explanations.
//!
//! [`render`] draws one frame from a [`LiveState`] and does no I/O, so tests render into
//! ratatui's `TestBackend`. [`Tui`] owns the real terminal: raw mode and the alternate
//! screen, restored on drop and, through a panic hook, before a panic message is printed.
//!
//! A figure whose source is missing shows as "n/a" (dim), never as 0. A terminal smaller
//! than [`MIN_WIDTH`] × [`MIN_HEIGHT`] gets a compact summary instead of the full view.

use std::{
    io::{self, IsTerminal, Stdout},
    sync::{
        Once,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use ratatui::{
    Frame, Terminal,
    backend::{CrosstermBackend, TestBackend},
    crossterm::{
        cursor::{Hide, Show},
        event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers},
        execute,
        terminal::{EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode},
    },
    layout::{Constraint, Layout, Rect},
    style::{Color, Modifier, Style},
    text::{Line, Span},
    widgets::{Block, Cell, Paragraph, Row, Sparkline, Table, Wrap},
};

use super::format::{self, NA};
use crate::lab::{
    figures::{Figures, SideFigures, Source},
    model::{KernelVsApp, LiveState},
};

/// Below this size the full view cannot be read; a compact summary is drawn instead.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 18;

/// Rows in each side's column (both columns have the same number, so rows line up).
const COLUMN_ROWS: u16 = 12;
/// Width of the label cell in the columns.
const LABEL_WIDTH: u16 = 20;
/// At most this many warning lines; the rest are counted in the last one.
const MAX_WARNINGS: usize = 4;
/// Heights of the setup-rate chart, borders included: below the minimum it is left out.
const SPARK_MIN: u16 = 4;
const SPARK_MAX: u16 = 14;
/// Indentation of an explanation under its kernel-vs-app row.
const EXPLAIN_INDENT: &str = "     ";

const APP: Style = Style::new().fg(Color::Green);
const KERNEL: Style = Style::new().fg(Color::Cyan);
const MISSING: Style = Style::new().fg(Color::DarkGray);
const WARN: Style = Style::new().fg(Color::Yellow);
const LABEL: Style = Style::new().fg(Color::Gray);
const NOTE: Style = Style::new().fg(Color::Gray).add_modifier(Modifier::ITALIC);
const TITLE: Style = Style::new().add_modifier(Modifier::BOLD);
/// A figure older than two ticks: dimmed, never shown as if fresh.
const STALE: Style = Style::new()
    .fg(Color::DarkGray)
    .add_modifier(Modifier::CROSSED_OUT);

/// The styles of one column's figures: each source's colour, or [`STALE`] when that
/// source's figures are stale.
#[derive(Clone, Copy)]
struct Palette {
    kernel: Style,
    walk: Style,
    app: Style,
}

impl Palette {
    fn of(f: &Figures, app: Source) -> Palette {
        let pick = |source, fresh| if f.stale(source) { STALE } else { fresh };
        Palette {
            kernel: pick(Source::Kernel, KERNEL),
            walk: if f.kernel_memory_derived {
                STALE
            } else {
                pick(Source::KernelWalk, KERNEL)
            },
            app: pick(app, APP),
        }
    }
}

/// Draws the whole live view into `frame`.
pub fn render(frame: &mut Frame, state: &LiveState) {
    let area = frame.area();
    let figures = &state.figures;
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        compact(frame, area, state, figures);
        return;
    }
    let rows = &figures.kernel_vs_app;
    let warnings = warnings(state);
    let warn_h = warnings.len() as u16;
    // Fixed parts first; the kernel-vs-app rows get what their text needs and the setup
    // rate chart the rest (it is the first thing to go on a short terminal).
    let rest = area.height.saturating_sub(1 + warn_h + COLUMN_ROWS + 2 + 1);
    let kva_need = kernel_vs_app_height(rows, area.width);
    let spark_h = if rest >= kva_need + SPARK_MIN {
        (rest - kva_need).min(SPARK_MAX)
    } else {
        0
    };
    let [header, warn, columns, spark, kva, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(warn_h),
        Constraint::Length(COLUMN_ROWS + 2),
        Constraint::Length(spark_h),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(header_line(state, figures)), header);
    frame.render_widget(Paragraph::new(warnings), warn);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(columns);
    frame.render_widget(column(" server ", server_rows(figures)), left);
    frame.render_widget(column(" client ", client_rows(figures)), right);
    if spark.height > 0 {
        setup_rate(frame, spark, state, figures);
    }
    frame.render_widget(kernel_vs_app(rows), kva);
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(" q", TITLE),
            Span::raw(" or "),
            Span::styled("Ctrl-C", TITLE),
            Span::raw(": quit   "),
            Span::styled("app", APP),
            Span::raw(" = the c1m process's own count, "),
            Span::styled("kernel", KERNEL),
            Span::raw(" = the eBPF observer's"),
        ])),
        footer,
    );
}

fn header_line(state: &LiveState, f: &Figures) -> Line<'static> {
    let title = if state.title.is_empty() {
        "c1m"
    } else {
        &state.title
    };
    let phase = if state.phase.is_empty() {
        NA
    } else {
        &state.phase
    };
    let mut spans = vec![
        Span::styled(format!(" {title} "), TITLE.add_modifier(Modifier::REVERSED)),
        Span::raw("  phase "),
        Span::styled(phase.to_owned(), TITLE),
        Span::raw("  elapsed "),
        Span::styled(format::duration(state.elapsed_s), TITLE),
        Span::raw("  target "),
        Span::styled(
            if state.target > 0 {
                format::count(state.target)
            } else {
                NA.to_owned()
            },
            TITLE,
        ),
    ];
    if let (Some(open), true) = (f.client.app_open.or(f.server.app_open), state.target > 0) {
        spans.push(Span::raw(format!(
            "  ({:.1}% open)",
            open as f64 * 100.0 / state.target as f64
        )));
    }
    if let Some(b) = f.mem_available_bytes {
        spans.push(Span::raw(format!(
            "  box memory available {}",
            format::bytes(b as f64)
        )));
    }
    for source in Source::ALL {
        if let Some(r) = f.readings.of(source).filter(|r| r.stale()) {
            spans.push(Span::styled(
                format!("  {} figures {:.1} s old", source.name(), r.age_s),
                WARN,
            ));
        }
    }
    Line::from(spans)
}

/// The `unavailable` list and other things the user should know, one line each.
fn warnings(state: &LiveState) -> Vec<Line<'static>> {
    let mut all: Vec<(Style, String)> = Vec::new();
    match &state.kernel {
        None => all.push((
            WARN,
            "no kernel view: the observer is not running, kernel figures show n/a".into(),
        )),
        Some(k) => {
            for u in &k.unavailable {
                all.push((WARN, format!("unavailable: {u}")));
            }
            if k.map_errors > 0 {
                all.push((
                    WARN,
                    format!(
                        "{} kernel counter updates lost: a map was full",
                        format::count(k.map_errors)
                    ),
                ));
            }
        }
    }
    if let Some(r) = &state.figures.retransmits {
        all.push((NOTE, format!("retransmits: {r}")));
    }
    for n in &state.notes {
        all.push((NOTE, format!("note: {n}")));
    }
    if all.len() > MAX_WARNINGS {
        let more = all.len() - (MAX_WARNINGS - 1);
        all.truncate(MAX_WARNINGS - 1);
        all.push((WARN, format!("… and {more} more")));
    }
    all.into_iter()
        .map(|(style, text)| {
            Line::from(vec![
                Span::styled(if style == NOTE { " · " } else { " ⚠ " }, style),
                Span::styled(text.replace(['\n', '\r'], " "), style),
            ])
        })
        .collect()
}

/// A value cell: the text in the source's colour, or a dim "n/a".
fn value(v: Option<String>, style: Style) -> Span<'static> {
    match v {
        Some(s) => Span::styled(s, style),
        None => Span::styled(NA, MISSING),
    }
}

fn n_u(v: Option<u64>, style: Style) -> Span<'static> {
    value(v.map(format::count), style)
}

fn n_i(v: Option<i64>, style: Style) -> Span<'static> {
    value(v.map(format::signed), style)
}

fn per_s(v: Option<f64>, style: Style) -> Span<'static> {
    value(v.map(|r| format!("{}/s", format::whole(r))), style)
}

fn bytes(v: Option<f64>, style: Style) -> Span<'static> {
    value(v.map(format::bytes), style)
}

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

fn server_rows(f: &Figures) -> Vec<(&'static str, Span<'static>)> {
    let s = &f.server;
    let p = Palette::of(f, Source::Server);
    let queue = f.queue_depth.map(|d| {
        format!(
            "{} / {}",
            format::count(d),
            f.queue_limit.map_or_else(|| NA.to_owned(), format::count)
        )
    });
    let overflows = f.queue_overflows.map(|o| match f.queue_overflow_acks {
        Some(a) if a > 0 => format!("{} ({} final ACKs)", format::count(o), format::count(a)),
        _ => format::count(o),
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

fn client_rows(f: &Figures) -> Vec<(&'static str, Span<'static>)> {
    let c = &f.client;
    let p = Palette::of(f, Source::Client);
    let failures = c.app_failures.map(|n| {
        if c.app_failure_causes.is_empty() {
            format::count(n)
        } else {
            let causes: Vec<String> = c
                .app_failure_causes
                .iter()
                .map(|(cause, n)| format!("{cause} {}", format::count(*n)))
                .collect();
            format!("{} ({})", format::count(n), causes.join(", "))
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

fn column(title: &'static str, rows: Vec<(&'static str, Span<'static>)>) -> Table<'static> {
    let rows = rows
        .into_iter()
        .map(|(label, v)| Row::new([Cell::from(Span::styled(label, LABEL)), Cell::from(v)]));
    Table::new(rows, [Constraint::Length(LABEL_WIDTH), Constraint::Fill(1)])
        .block(Block::bordered().title(Span::styled(title, TITLE)))
}

fn setup_rate(frame: &mut Frame, area: Rect, state: &LiveState, f: &Figures) {
    let rates: Vec<Option<f64>> = state.history.iter().map(|s| s.setup_per_s()).collect();
    let peak = rates
        .iter()
        .flatten()
        .copied()
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
    let title = Line::from(vec![
        Span::styled(" setup rate, connections/s ", TITLE),
        Span::raw(format!(
            "now {}  peak {}  over {} ",
            f.setup_per_s
                .map_or_else(|| NA.to_owned(), |r| format!("{}/s", format::whole(r))),
            peak.map_or_else(|| NA.to_owned(), |r| format!("{}/s", format::whole(r))),
            format::duration(state.history.len() as f64),
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

/// Lines the kernel-vs-app block needs at this width, borders included (an estimate:
/// word wrapping may take a line more per explanation, which is counted).
fn kernel_vs_app_height(rows: &[KernelVsApp], width: u16) -> u16 {
    let inner = usize::from(width.saturating_sub(2)).max(1);
    let lines: usize = rows
        .iter()
        .map(|r| {
            1 + r.explanation.as_ref().map_or(0, |e| {
                (EXPLAIN_INDENT.len() + e.chars().count()).div_ceil(inner) + 1
            })
        })
        .sum();
    u16::try_from(lines.max(1) + 2).unwrap_or(u16::MAX)
}

fn kernel_vs_app(rows: &[KernelVsApp]) -> Paragraph<'static> {
    let block = Block::bordered().title(Span::styled(" kernel vs app ", TITLE));
    if rows.is_empty() {
        return Paragraph::new(Span::styled(
            "nothing to compare yet: no kernel view and no app stats",
            MISSING,
        ))
        .block(block);
    }
    let mut lines = Vec::new();
    for r in rows {
        let (mark, mark_style) = match (r.kernel, r.app) {
            (Some(_), Some(_)) if r.agree => ("=", APP),
            (Some(_), Some(_)) => ("≠", WARN),
            _ => ("?", MISSING),
        };
        lines.push(Line::from(vec![
            Span::styled(format!(" {mark} "), mark_style.add_modifier(Modifier::BOLD)),
            Span::styled(format!("{:<18}", r.what), TITLE),
            Span::raw(" kernel "),
            value(r.kernel.map(format::signed), KERNEL),
            Span::raw("  app "),
            value(r.app.map(format::signed), APP),
        ]));
        if let Some(e) = &r.explanation {
            lines.push(Line::from(Span::styled(
                format!("{EXPLAIN_INDENT}{}", e.replace(['\n', '\r'], " ")),
                if r.agree { LABEL } else { WARN },
            )));
        }
    }
    Paragraph::new(lines)
        .block(block)
        .wrap(Wrap { trim: false })
}

/// The view for a terminal too small for the columns: the two key rows and a hint.
fn compact(frame: &mut Frame, area: Rect, state: &LiveState, f: &Figures) {
    let side = |name: &str, s: &SideFigures| {
        Line::from(vec![
            Span::raw(format!("{name} app ")),
            n_u(s.app_open, APP),
            Span::raw(" kernel "),
            n_i(s.kernel_established, KERNEL),
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
            format::duration(state.elapsed_s)
        )),
        side("server", &f.server),
        side("client", &f.client),
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
    let Ok(mut terminal) = Terminal::new(TestBackend::new(width, height));
    let Ok(_) = terminal.draw(|frame| render(frame, state));
    let buffer = terminal.backend().buffer();
    (0..height)
        .map(|y| (0..width).map(|x| buffer[(x, y)].symbol()).collect())
        .collect()
}

// ---- the real terminal ----

/// Whether raw mode and the alternate screen are on (so the panic hook knows to undo them).
static ACTIVE: AtomicBool = AtomicBool::new(false);
static PANIC_HOOK: Once = Once::new();

/// The live view on the real terminal. Dropping it (or a panic anywhere) restores the
/// terminal. One at a time per process.
pub struct Tui {
    terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl Tui {
    /// Enters raw mode and the alternate screen. Fails when stdout is not a terminal (use
    /// [`super::plain::line`] then) or when a `Tui` is already running.
    pub fn start() -> io::Result<Tui> {
        if !io::stdout().is_terminal() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the live view needs a terminal on stdout (use the plain lines instead)",
            ));
        }
        install_panic_hook();
        if ACTIVE.swap(true, Ordering::SeqCst) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "the live view is already running",
            ));
        }
        let started = (|| {
            enable_raw_mode()?;
            execute!(io::stdout(), EnterAlternateScreen, Hide)?;
            let mut terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
            terminal.clear()?;
            Ok(Tui { terminal })
        })();
        if started.is_err() {
            restore_terminal();
        }
        started
    }

    /// Draws one frame (only the cells that changed reach the terminal).
    pub fn draw(&mut self, state: &LiveState) -> io::Result<()> {
        self.terminal.draw(|frame| render(frame, state))?;
        Ok(())
    }

    /// Waits up to `timeout` for a key: `true` for q or Ctrl-C (raw mode turns Ctrl-C
    /// into a key, not a SIGINT). Returns early, `false`, when the terminal was resized,
    /// so the caller redraws at once; use it as the loop's pause.
    pub fn poll_quit(&mut self, timeout: Duration) -> io::Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if !event::poll(left)? {
                return Ok(false);
            }
            match event::read()? {
                Event::Key(k) if is_quit(&k) => return Ok(true),
                Event::Resize(..) => {
                    self.terminal.autoresize()?;
                    return Ok(false);
                }
                _ => {}
            }
            if left.is_zero() {
                return Ok(false);
            }
        }
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// q, Q or Ctrl-C, on press (not on release, where terminals report it).
pub fn is_quit(k: &KeyEvent) -> bool {
    k.kind != KeyEventKind::Release
        && match k.code {
            KeyCode::Char('q' | 'Q') => true,
            KeyCode::Char('c' | 'C') => k.modifiers.contains(KeyModifiers::CONTROL),
            _ => false,
        }
}

/// Leaves the alternate screen and raw mode, once, whoever calls first (drop or panic).
fn restore_terminal() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        // Best effort: the terminal may be gone; nothing better to do with an error here.
        let _ = disable_raw_mode();
        let _ = execute!(io::stdout(), LeaveAlternateScreen, Show);
    }
}

/// Restores the terminal before the previous hook prints the panic, so the message lands
/// on the normal screen instead of vanishing with the alternate one.
fn install_panic_hook() {
    PANIC_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            previous(info);
        }));
    });
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use ratatui::crossterm::event::KeyEventState;

    use super::{text_screen as screen, *};
    use crate::lab::view::demo;

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

    #[test]
    fn quit_keys() {
        let key = |code, modifiers, kind| KeyEvent {
            code,
            modifiers,
            kind,
            state: KeyEventState::NONE,
        };
        let press = KeyEventKind::Press;
        assert!(is_quit(&key(KeyCode::Char('q'), KeyModifiers::NONE, press)));
        assert!(is_quit(&key(
            KeyCode::Char('Q'),
            KeyModifiers::SHIFT,
            press
        )));
        assert!(is_quit(&key(
            KeyCode::Char('c'),
            KeyModifiers::CONTROL,
            press
        )));
        assert!(!is_quit(&key(
            KeyCode::Char('c'),
            KeyModifiers::NONE,
            press
        )));
        assert!(!is_quit(&key(
            KeyCode::Char('x'),
            KeyModifiers::NONE,
            press
        )));
        assert!(!is_quit(&key(
            KeyCode::Char('q'),
            KeyModifiers::NONE,
            KeyEventKind::Release
        )));
    }
}
