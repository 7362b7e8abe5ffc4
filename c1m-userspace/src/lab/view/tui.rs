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
    widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Sparkline, Table, Wrap},
};

use crate::fmt::{self, NA, ellipsis};
use crate::lab::{
    figures::{Figures, SideFigures, kernel_vs_app::app_source},
    model::Source,
    view::live_state::LiveState,
};

/// Below this size the full view cannot be read; a compact summary is drawn instead.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 18;

/// Rows in each side's column (both columns have the same number, so rows line up).
const COLUMN_ROWS: u16 = 12;
/// The columns' box has no bottom line: what follows draws its own top line.
const COLUMN_BORDERS: u16 = 1;
/// The kernel-vs-app block is a titled rule and its lines.
const KVA_BORDERS: u16 = 1;
/// The rows a short terminal keeps: the counts (memory and CPU rows go first).
const COLUMN_MIN_ROWS: u16 = 7;
/// Width of the label cell in the columns.
const LABEL_WIDTH: u16 = 20;
/// At most this many warning lines; the rest are counted in the last one.
const MAX_WARNINGS: usize = 4;
/// Heights of the setup-rate chart, borders included: below the minimum it is left out.
const SPARK_MIN: u16 = 4;
const SPARK_MAX: u16 = 14;
/// Left of a kernel-vs-app row's first line: its mark; of the lines it wraps to: this.
const KVA_INDENT: &str = "   ";

const APP: Style = Style::new().fg(Color::Green);
const KERNEL: Style = Style::new().fg(Color::Cyan);
const MISSING: Style = Style::new().fg(Color::DarkGray);
const WARN: Style = Style::new().fg(Color::Yellow);
const LABEL: Style = Style::new().fg(Color::Gray);
const NOTE: Style = Style::new().fg(Color::Gray).add_modifier(Modifier::ITALIC);
const TITLE: Style = Style::new().add_modifier(Modifier::BOLD);
/// A figure older than two ticks: dimmed, never shown as if fresh.
pub const STALE: Style = Style::new()
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

/// Draws the whole live view into `frame`, without the help overlay.
pub fn render(frame: &mut Frame, state: &LiveState) {
    render_view(frame, state, false);
}

/// Draws the live view and, when `help` is on, the help overlay above it.
pub fn render_view(frame: &mut Frame, state: &LiveState, help: bool) {
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
/// kernel-vs-app explanations (so 80×24 shows every one of the demo's), the columns'
/// lower rows, the warnings and the chart.
struct Heights {
    warn: u16,
    columns: u16,
    spark: u16,
    kva: u16,
}

fn heights(area: Rect, f: &Figures, warnings: usize) -> Heights {
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
    columns += take(0, COLUMN_ROWS - COLUMN_MIN_ROWS);
    warn += take(0, warnings.saturating_sub(warn));
    let spark = take(SPARK_MIN, SPARK_MAX);
    kva += take(0, u16::MAX); // whatever is left
    Heights {
        warn,
        columns,
        spark,
        kva,
    }
}

fn full(frame: &mut Frame, area: Rect, state: &LiveState, figures: &Figures) {
    let mut warnings = warnings(state);
    let h = heights(area, figures, warnings.len());
    fit_warnings(&mut warnings, usize::from(h.warn), area.width);
    let warnings = warning_lines(warnings);
    let [header, warn, columns, spark, kva, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(h.warn),
        Constraint::Length(h.columns),
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
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(columns);
    frame.render_widget(column(" server ", server_rows(figures), left.width), left);
    frame.render_widget(column(" client ", client_rows(figures), right.width), right);
    if spark.height > 0 {
        setup_rate(frame, spark, state, figures);
    }
    frame.render_widget(kernel_vs_app(figures, kva), kva);
    frame.render_widget(Paragraph::new(footer_line(area.width)), footer);
}

/// A piece of a one-line header or footer: shown whole or not at all (never cut
/// mid-word), by `priority` (0 first) while the line has room, in its place in the line.
struct Piece {
    priority: u8,
    spans: Vec<Span<'static>>,
}

impl Piece {
    fn new(priority: u8, spans: Vec<Span<'static>>) -> Piece {
        Piece { priority, spans }
    }

    fn width(&self) -> usize {
        self.spans.iter().map(Span::width).sum()
    }
}

/// The pieces that fit in `width`, most important first, in their order in the line.
fn fit_line(pieces: Vec<Piece>, width: u16) -> Line<'static> {
    let mut order: Vec<usize> = (0..pieces.len()).collect();
    order.sort_by_key(|&i| pieces[i].priority);
    let mut left = usize::from(width);
    let mut keep = vec![false; pieces.len()];
    for i in order {
        let w = pieces[i].width();
        if w <= left {
            left -= w;
            keep[i] = true;
        }
    }
    Line::from(
        pieces
            .into_iter()
            .zip(keep)
            .filter(|(_, k)| *k)
            .flat_map(|(p, _)| p.spans)
            .collect::<Vec<_>>(),
    )
}

fn footer_line(width: u16) -> Line<'static> {
    let keys = || {
        [
            Piece::new(
                0,
                vec![
                    Span::styled(" q", TITLE),
                    Span::raw(" or "),
                    Span::styled("Ctrl-C", TITLE),
                    Span::raw(": quit"),
                ],
            ),
            Piece::new(
                0,
                vec![
                    Span::raw("  "),
                    Span::styled("?", TITLE),
                    Span::raw(": help"),
                ],
            ),
        ]
    };
    let legend = |app: &'static str, kernel: &'static str| {
        Piece::new(
            1,
            vec![
                Span::raw("   "),
                Span::styled("app", APP),
                Span::raw(app),
                Span::styled("kernel", KERNEL),
                Span::raw(kernel),
            ],
        )
    };
    let long = legend(" = the c1m process's own count, ", " = the eBPF observer's");
    let fits = keys().iter().map(Piece::width).sum::<usize>() + long.width() <= usize::from(width);
    let legend = if fits {
        long
    } else {
        legend(" = c1m's count, ", " = eBPF's")
    };
    let mut pieces: Vec<Piece> = keys().into();
    pieces.push(legend);
    fit_line(pieces, width)
}

fn header_line(state: &LiveState, f: &Figures, width: u16) -> Line<'static> {
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
    // Title and phase come from the run: keep them short enough to leave room.
    let room = usize::from(width / 4).max(8);
    let mut pieces = vec![
        Piece::new(
            0,
            vec![Span::styled(
                format!(" {} ", ellipsis(&one_line(title), room)),
                TITLE.add_modifier(Modifier::REVERSED),
            )],
        ),
        Piece::new(
            0,
            vec![
                Span::raw("  phase "),
                Span::styled(ellipsis(&one_line(phase), room), TITLE),
            ],
        ),
        Piece::new(
            1,
            vec![
                Span::raw("  elapsed "),
                Span::styled(fmt::duration(state.elapsed_s), TITLE),
            ],
        ),
        Piece::new(
            3,
            vec![
                Span::raw("  target "),
                Span::styled(
                    if state.target > 0 {
                        fmt::count(state.target)
                    } else {
                        NA.to_owned()
                    },
                    TITLE,
                ),
            ],
        ),
    ];
    let open = match (f.client.app_open, f.server.app_open) {
        (Some(c), _) => Some((c, Source::Client)),
        (None, Some(s)) => Some((s, Source::Server)),
        _ => None,
    };
    if let (Some((open, source)), true) = (open, state.target > 0) {
        pieces.push(Piece::new(
            4,
            vec![
                Span::raw("  ("),
                figure_span(
                    format!("{:.1}%", open as f64 * 100.0 / state.target as f64),
                    Style::new(),
                    f.stale(source),
                ),
                Span::raw(" open)"),
            ],
        ));
    }
    if let Some(b) = f.mem_available_bytes {
        pieces.push(Piece::new(
            5,
            vec![Span::raw(format!(
                "  box memory available {}",
                fmt::bytes(b as f64)
            ))],
        ));
    }
    // A stale source matters more than the target: the figures below are old.
    for source in Source::ALL {
        if let Some(r) = f.readings.of(source).filter(|r| r.stale()) {
            pieces.push(Piece::new(
                2,
                vec![Span::styled(
                    format!("  {} figures {:.1} s old", source.name(), r.age_s),
                    WARN,
                )],
            ));
        }
    }
    fit_line(pieces, width)
}

/// `text` on one line: line breaks and tabs become spaces.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r', '\t'], " ")
}

/// Keeps `lines` within `max` lines (the last one counting the rest) and `width` columns.
fn fit_warnings(lines: &mut Vec<(Style, String)>, max: usize, width: u16) {
    if max == 1 && lines.len() > 1 {
        let more = lines.len() - 1;
        lines.truncate(1);
        // The count goes first so a long warning cannot push it off the line.
        lines[0].1 = format!("(+{more} more) {}", lines[0].1);
    } else if lines.len() > max {
        let more = lines.len() + 1 - max.max(1);
        lines.truncate(max.saturating_sub(1));
        lines.push((WARN, format!("… and {more} more")));
        lines.truncate(max);
    }
    for (_, text) in lines.iter_mut() {
        *text = ellipsis(text, usize::from(width.saturating_sub(3)));
    }
}

fn warning_lines(lines: Vec<(Style, String)>) -> Vec<Line<'static>> {
    lines
        .into_iter()
        .map(|(style, text)| {
            Line::from(vec![
                Span::styled(if style == NOTE { " · " } else { " ⚠ " }, style),
                Span::styled(text, style),
            ])
        })
        .collect()
}

/// The `unavailable` list and other things the user should know, one line each.
fn warnings(state: &LiveState) -> Vec<(Style, String)> {
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
                        fmt::count(k.map_errors)
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
        fit_warnings(&mut all, MAX_WARNINGS, u16::MAX);
    }
    for (_, text) in all.iter_mut() {
        *text = one_line(text);
    }
    all
}

/// A figure in its source's style, or in [`STALE`] when that source is stale: the one way
/// every stale figure of the view is marked.
fn figure_span(text: String, fresh: Style, stale: bool) -> Span<'static> {
    Span::styled(text, if stale { STALE } else { fresh })
}

/// A value cell: the text in the source's colour, or a dim "n/a".
fn value(v: Option<String>, style: Style) -> Span<'static> {
    match v {
        Some(s) => Span::styled(s, style),
        None => Span::styled(NA, MISSING),
    }
}

fn n_u(v: Option<u64>, style: Style) -> Span<'static> {
    value(v.map(fmt::count), style)
}

fn n_i(v: Option<i64>, style: Style) -> Span<'static> {
    value(v.map(fmt::signed), style)
}

fn per_s(v: Option<f64>, style: Style) -> Span<'static> {
    value(v.map(|r| format!("{}/s", fmt::whole(r))), style)
}

fn bytes(v: Option<f64>, style: Style) -> Span<'static> {
    value(v.map(fmt::bytes), style)
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

fn client_rows(f: &Figures) -> Vec<(&'static str, Span<'static>)> {
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

fn column(
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

fn setup_rate(frame: &mut Frame, area: Rect, state: &LiveState, f: &Figures) {
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

/// Lines the kernel-vs-app block needs at this width to show everything, its rule
/// included.
fn kernel_vs_app_height(f: &Figures, width: u16) -> u16 {
    let lines: usize = kva_rows(f, width).iter().map(Vec::len).sum();
    u16::try_from(lines.max(1) + usize::from(KVA_BORDERS)).unwrap_or(u16::MAX)
}

/// Columns a kernel-vs-app line has for its words: the width less the mark or indent.
fn kva_text_width(width: u16) -> usize {
    usize::from(width).saturating_sub(KVA_INDENT.len()).max(1)
}

/// A word: spans that stay on one line together (a value and its comma).
type Word = Vec<Span<'static>>;

fn word_width(w: &Word) -> usize {
    w.iter().map(Span::width).sum()
}

/// `words` in lines of at most `width` columns, one space between words; a word longer
/// than a line is cut.
fn wrap_words(words: Vec<Word>, width: usize) -> Vec<Vec<Span<'static>>> {
    let mut lines: Vec<Vec<Span<'static>>> = Vec::new();
    let mut line: Vec<Span<'static>> = Vec::new();
    let mut used = 0;
    for word in words {
        let w = word_width(&word);
        if used > 0 && used + 1 + w > width {
            lines.push(std::mem::take(&mut line));
            used = 0;
        }
        if used > 0 {
            line.push(Span::raw(" "));
            used += 1;
        }
        if w > width {
            // Only a single long span can be this wide: cut it into lines.
            let style = word.first().map_or_else(Style::new, |s| s.style);
            let text: String = word.iter().map(|s| s.content.as_ref()).collect();
            let chars: Vec<char> = text.chars().collect();
            for piece in chars.chunks(width) {
                if used > 0 {
                    lines.push(std::mem::take(&mut line));
                }
                line.push(Span::styled(piece.iter().collect::<String>(), style));
                used = piece.len();
            }
            continue;
        }
        line.extend(word);
        used += w;
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Plain words of `text` in one style.
fn words(text: &str, style: Style) -> Vec<Word> {
    one_line(text)
        .split_whitespace()
        .map(|w| vec![Span::styled(w.to_owned(), style)])
        .collect()
}

/// Each kernel-vs-app row as its lines at this width: the mark, the row's name and both
/// figures (each in its source's style, stale ones marked as everywhere), then the
/// explanation, as one paragraph. One paragraph, not a headline over an indented
/// explanation: at 80×24 that layout hid 11 of the demo's lines, the client's all.
fn kva_rows(f: &Figures, width: u16) -> Vec<Vec<Line<'static>>> {
    let text_width = kva_text_width(width);
    f.kernel_vs_app
        .iter()
        .map(|r| {
            let (mark, mark_style) = match (r.kernel, r.app) {
                (Some(_), Some(_)) if r.agree => ("=", APP),
                (Some(_), Some(_)) => ("≠", WARN),
                _ => ("?", MISSING),
            };
            let app_stale = app_source(&r.what).is_some_and(|s| f.stale(s));
            let figure = |v: Option<i64>, fresh: Style, stale: bool, after: &str| -> Word {
                let mut w = vec![match v {
                    Some(v) => figure_span(fmt::signed(v), fresh, stale),
                    None => Span::styled(NA, MISSING),
                }];
                w.push(Span::raw(after.to_owned()));
                w
            };
            let mut all = words(&r.what, TITLE);
            if let Some(last) = all.last_mut() {
                last.push(Span::styled(":", TITLE));
            }
            all.push(vec![Span::raw("kernel")]);
            all.push(figure(r.kernel, KERNEL, f.stale(Source::Kernel), ","));
            all.push(vec![Span::raw("app")]);
            all.push(figure(r.app, APP, app_stale, "."));
            let style = if r.agree { LABEL } else { WARN };
            all.extend(words(r.explanation.as_deref().unwrap_or(""), style));
            wrap_words(all, text_width)
                .into_iter()
                .enumerate()
                .map(|(i, spans)| {
                    let lead = if i == 0 {
                        Span::styled(format!(" {mark} "), mark_style.add_modifier(Modifier::BOLD))
                    } else {
                        Span::raw(KVA_INDENT)
                    };
                    Line::from([vec![lead], spans].concat())
                })
                .collect()
        })
        .collect()
}

/// `line` ending in "…" within `width` columns: it was cut after it.
fn cut(line: &Line<'static>, width: usize) -> Line<'static> {
    let mut spans = line.spans.clone();
    while spans.iter().map(Span::width).sum::<usize>() + 1 > width {
        let Some(last) = spans.last_mut() else { break };
        let mut text = last.content.to_string();
        if text.pop().is_none() || text.is_empty() {
            spans.pop();
        } else {
            last.content = text.into();
        }
    }
    spans.push(Span::styled("…", MISSING));
    Line::from(spans)
}

/// The kernel-vs-app rows in `area`: every row's first line when they fit, then as much
/// of each row as the lines allow, in row order (a row cut ends in "…"); the title counts
/// the lines left out.
fn kernel_vs_app(f: &Figures, area: Rect) -> Paragraph<'static> {
    let title = |hidden: usize| {
        let mut spans = vec![Span::styled(" kernel vs app ", TITLE)];
        if hidden > 0 {
            spans.push(Span::styled(
                format!("… {hidden} more lines: enlarge the terminal "),
                MISSING,
            ));
        }
        Line::from(spans)
    };
    let block = |hidden| Block::new().borders(Borders::TOP).title(title(hidden));
    if f.kernel_vs_app.is_empty() {
        return Paragraph::new(Span::styled(
            "nothing to compare yet: no kernel view and no app stats",
            MISSING,
        ))
        .block(block(0));
    }
    let rows = kva_rows(f, area.width);
    let room = usize::from(area.height.saturating_sub(KVA_BORDERS));
    let total: usize = rows.iter().map(Vec::len).sum();
    // How many lines of each row are shown: the first of each, then the rest in order.
    let shown_rows = rows.len().min(room);
    let mut left = room - shown_rows;
    let mut give = vec![1usize; shown_rows];
    for (g, r) in give.iter_mut().zip(&rows) {
        let got = (r.len() - *g).min(left);
        *g += got;
        left -= got;
    }
    let mut lines = Vec::new();
    for (r, &g) in rows.iter().zip(&give) {
        for (i, line) in r.iter().take(g).enumerate() {
            lines.push(if i + 1 == g && g < r.len() {
                cut(line, usize::from(area.width))
            } else {
                line.clone()
            });
        }
    }
    let hidden = total - lines.len();
    Paragraph::new(lines).block(block(hidden))
}

/// What the help overlay says: every row of the view, the marks and the keys.
const HELP: &[(&str, &str)] = &[
    ("keys", "q or Ctrl-C: quit    ?: this help on and off"),
    (
        "columns",
        "one per side: the server accepts, the client connects",
    ),
    ("app", "the c1m process's own count (green)"),
    ("kernel", "what the eBPF observer sees in the kernel (cyan)"),
    ("ESTABLISHED", "handshake done, the connection is open"),
    ("SYN_SENT", "client: SYN sent, waiting for the SYN-ACK"),
    (
        "SYN_RECV",
        "server: half-open handshakes (request sockets too)",
    ),
    ("CLOSE_WAIT", "the peer closed, the app has not noticed yet"),
    (
        "accept queue",
        "connections done in the kernel, not yet accepted",
    ),
    (
        "queue overflows",
        "handshakes dropped since start: accept queue full",
    ),
    (
        "in flight",
        "connects and WebSocket handshakes not finished",
    ),
    ("failures", "connections that never opened, by cause"),
    ("setup rate", "connections established per second"),
    ("transitions", "TCP state changes per second"),
    (
        "kernel per socket",
        "kernel memory per socket, from the socket walk",
    ),
    (
        "user per connection",
        "(resident memory - baseline) / open connections",
    ),
    (
        "= ≠ ?",
        "kernel vs app: agree, differ (why follows), one missing",
    ),
    (
        "dimmed, crossed",
        "stale: the source is older than 1 s (age in header)",
    ),
    (
        "derived",
        "memory between walks: sockets now x last bytes/socket",
    ),
    ("n/a", "the source is not there (never shown as 0)"),
];

/// The help overlay, over the middle of `area`.
fn help_overlay(frame: &mut Frame, area: Rect) {
    let label_w = HELP
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0);
    let lines: Vec<Line> = HELP
        .iter()
        .map(|(label, text)| {
            Line::from(vec![
                Span::styled(format!(" {label:<label_w$}  "), TITLE),
                Span::raw(*text),
            ])
        })
        .collect();
    let want_w = lines.iter().map(Line::width).max().unwrap_or(0) + 3;
    let want_h = lines.len() + 2;
    let w = u16::try_from(want_w).unwrap_or(u16::MAX).min(area.width);
    let h = u16::try_from(want_h).unwrap_or(u16::MAX).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(Span::styled(" help: ? closes ", TITLE))),
        popup,
    );
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

// ---- the real terminal ----

/// Whether raw mode and the alternate screen are on (so the panic hook knows to undo them).
static ACTIVE: AtomicBool = AtomicBool::new(false);
static PANIC_HOOK: Once = Once::new();

/// The live view on the real terminal. Dropping it (or a panic anywhere) restores the
/// terminal. One at a time per process.
pub struct Tui {
    terminal: Terminal<CrosstermBackend<Stdout>>,
    /// Whether the help overlay is on (`?` toggles it).
    help: bool,
    /// The state last drawn, to redraw at once when a key changes the view (boxed: a
    /// `LiveState` is large and `Tui` sits in an enum beside small variants).
    last: Option<Box<LiveState>>,
}

/// Why this process may not take the terminal, if it may not: raw mode and the alternate
/// screen are `tcsetattr`s, and one from outside the terminal's foreground process group
/// (`c1m run … &`, or under `timeout`, which runs its command in a group of its own)
/// stops the whole process with SIGTTOU, a stop that SIGTERM does not end.
fn not_in_foreground() -> Option<&'static str> {
    let me = rustix::process::getpgrp();
    let stdin = io::stdin();
    let stdout = io::stdout();
    let owned =
        |fd: std::os::fd::BorrowedFd<'_>| rustix::termios::tcgetpgrp(fd).is_ok_and(|g| g == me);
    use std::os::fd::AsFd;
    let stdout_ok = owned(stdout.as_fd());
    let stdin_ok = !stdin.is_terminal() || owned(stdin.as_fd());
    (!(stdout_ok && stdin_ok))
        .then_some("not in the terminal's foreground process group (started in the background?)")
}

impl Tui {
    /// Enters raw mode and the alternate screen. Fails when stdout is not a terminal (use
    /// [`super::plain::line`] then), when this process is not in the terminal's
    /// foreground group, or when a `Tui` is already running.
    pub fn start() -> io::Result<Tui> {
        if !io::stdout().is_terminal() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the live view needs a terminal on stdout (use the plain lines instead)",
            ));
        }
        if let Some(why) = not_in_foreground() {
            return Err(io::Error::new(io::ErrorKind::Unsupported, why));
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
            Ok(Tui {
                terminal,
                help: false,
                last: None,
            })
        })();
        if started.is_err() {
            restore_terminal();
        }
        started
    }

    /// Draws one frame (only the cells that changed reach the terminal).
    pub fn draw(&mut self, state: &LiveState) -> io::Result<()> {
        let help = self.help;
        self.terminal
            .draw(|frame| render_view(frame, state, help))?;
        self.last = Some(Box::new(state.clone()));
        Ok(())
    }

    /// Waits up to `timeout` for keys and acts on them: `true` for quit (q or Ctrl-C; raw
    /// mode turns Ctrl-C into a key, not a SIGINT); `?` toggles the help and redraws.
    /// Returns early, `false`, when the terminal was resized, so the caller redraws at
    /// once; use it as the loop's pause.
    pub fn poll_quit(&mut self, timeout: Duration) -> io::Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if !event::poll(left)? {
                return Ok(false);
            }
            match event::read()? {
                Event::Key(k) => match key_action(&k) {
                    Some(Action::Quit) => return Ok(true),
                    Some(Action::ToggleHelp) => {
                        self.help = !self.help;
                        if let Some(state) = self.last.take() {
                            self.draw(&state)?;
                        }
                    }
                    None => {}
                },
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

/// What a key asks of the live view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// q, Q or Ctrl-C.
    Quit,
    /// `?`: the help overlay on or off.
    ToggleHelp,
}

/// The one place keys are read, on press (not on release, where terminals report it).
pub fn key_action(k: &KeyEvent) -> Option<Action> {
    if k.kind == KeyEventKind::Release {
        return None;
    }
    match k.code {
        KeyCode::Char('q' | 'Q') => Some(Action::Quit),
        KeyCode::Char('c' | 'C') if k.modifiers.contains(KeyModifiers::CONTROL) => {
            Some(Action::Quit)
        }
        KeyCode::Char('?') => Some(Action::ToggleHelp),
        _ => None,
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
    fn keys() {
        let key = |code, modifiers, kind| KeyEvent {
            code,
            modifiers,
            kind,
            state: KeyEventState::NONE,
        };
        let press = KeyEventKind::Press;
        let none = KeyModifiers::NONE;
        let quit = Some(Action::Quit);
        assert_eq!(key_action(&key(KeyCode::Char('q'), none, press)), quit);
        assert_eq!(
            key_action(&key(KeyCode::Char('Q'), KeyModifiers::SHIFT, press)),
            quit
        );
        assert_eq!(
            key_action(&key(KeyCode::Char('c'), KeyModifiers::CONTROL, press)),
            quit
        );
        assert_eq!(
            key_action(&key(KeyCode::Char('?'), KeyModifiers::SHIFT, press)),
            Some(Action::ToggleHelp)
        );
        assert_eq!(key_action(&key(KeyCode::Char('c'), none, press)), None);
        assert_eq!(key_action(&key(KeyCode::Char('x'), none, press)), None);
        assert_eq!(
            key_action(&key(KeyCode::Char('q'), none, KeyEventKind::Release)),
            None
        );
    }

    #[test]
    fn wrap_breaks_between_words_and_cuts_long_ones() {
        let wrap = |text: &str, width| -> Vec<String> {
            wrap_words(words(text, Style::new()), width)
                .into_iter()
                .map(|spans| spans.iter().map(|s| s.content.as_ref()).collect())
                .collect()
        };
        assert_eq!(wrap("aa bb cc", 5), ["aa bb", "cc"]);
        assert_eq!(wrap("abcdefgh", 3), ["abc", "def", "gh"]);
        assert_eq!(wrap("a\nb", 10), ["a b"]);
        assert!(wrap("", 4).is_empty());
        assert_eq!(ellipsis("abcdef", 4), "abc…");
        assert_eq!(ellipsis("abc", 4), "abc");
    }
}
