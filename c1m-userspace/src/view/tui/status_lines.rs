//! The lines around the columns: the header (run, phase, time, totals), the warnings
//! and notes under it, and the footer of keys and colours.

use ratatui::{
    style::{Modifier, Style},
    text::{Line, Span},
};

use super::style::{APP, KERNEL, NOTE, TITLE, WARN, figure_span, one_line};
use crate::{
    figures::Figures,
    fmt::{self, NA, ellipsis},
    model::Source,
    view::live_state::LiveState,
};

/// At most this many warning lines; the rest are counted in the last one.
const MAX_WARNINGS: usize = 4;

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

pub(super) fn footer_line(width: u16) -> Line<'static> {
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

pub(super) fn header_line(state: &LiveState, f: &Figures, width: u16) -> Line<'static> {
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
    // A stale source matters more than the target: the figures below are old. Named
    // in the user's words, all in one piece: each source's age when that fits beside
    // the title, phase and elapsed time, else how many and the oldest.
    let late: Vec<(Source, f64)> = Source::ALL
        .into_iter()
        .filter_map(|s| f.readings.of(s).filter(|r| r.stale()).map(|r| (s, r.age_s)))
        .collect();
    if let Some(oldest) = late.iter().map(|(_, age)| *age).reduce(f64::max) {
        let long = match late.as_slice() {
            [(s, age)] => format!("  {} {age:.1} s old", source_words(*s)),
            _ => format!(
                "  late: {}",
                late.iter()
                    .map(|(s, age)| format!("{} {age:.1} s", source_words(*s)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let first: usize = pieces
            .iter()
            .filter(|p| p.priority <= 1)
            .map(Piece::width)
            .sum();
        let text = if first + long.chars().count() <= usize::from(width) {
            long
        } else if late.len() == 1 {
            format!("  late {oldest:.1} s")
        } else {
            format!("  {} sources late, up to {oldest:.1} s", late.len())
        };
        pieces.push(Piece::new(2, vec![Span::styled(text, WARN)]));
    }
    fit_line(pieces, width)
}

/// A source as the header names it: what its figures are, not the module they come
/// from (`kernel_walk figures 1.5 s old` read as an internal name).
fn source_words(source: Source) -> &'static str {
    match source {
        Source::Kernel => "kernel",
        Source::KernelWalk => "kernel memory",
        Source::Server => "server",
        Source::Client => "client",
    }
}

/// Keeps `lines` within `max` lines (the last one counting the rest) and `width` columns.
pub(super) fn fit_warnings(lines: &mut Vec<(Style, String)>, max: usize, width: u16) {
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

pub(super) fn warning_lines(lines: Vec<(Style, String)>) -> Vec<Line<'static>> {
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
pub(super) fn warnings(state: &LiveState) -> Vec<(Style, String)> {
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
            if !k.skipped_runs.is_empty() {
                let each: Vec<String> = k
                    .skipped_runs
                    .iter()
                    .map(|(name, n)| format!("{name} {}", fmt::count(*n)))
                    .collect();
                all.push((
                    WARN,
                    format!(
                        "events the kernel ran none of c1m's programs for (already running on that CPU): {}",
                        each.join(", ")
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
