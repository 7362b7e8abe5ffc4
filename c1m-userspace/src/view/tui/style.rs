//! The live view's styles and the spans a figure is drawn with (its source's colour, dim
//! when stale, "n/a" when missing): shared by every part of the view, so in a file apart.

use ratatui::{
    style::{Color, Modifier, Style},
    text::Span,
};

use crate::{
    figures::Figures,
    fmt::{self, NA},
    model::Source,
};

pub(super) const APP: Style = Style::new().fg(Color::Green);
pub(super) const KERNEL: Style = Style::new().fg(Color::Cyan);
pub(super) const MISSING: Style = Style::new().fg(Color::DarkGray);
pub(super) const WARN: Style = Style::new().fg(Color::Yellow);
pub(super) const LABEL: Style = Style::new().fg(Color::Gray);
pub(super) const NOTE: Style = Style::new().fg(Color::Gray).add_modifier(Modifier::ITALIC);
pub(super) const TITLE: Style = Style::new().add_modifier(Modifier::BOLD);
/// A figure older than two ticks: dimmed, never shown as if fresh.
pub const STALE: Style = Style::new()
    .fg(Color::DarkGray)
    .add_modifier(Modifier::CROSSED_OUT);

/// The styles of one column's figures: each source's colour, or [`STALE`] when that
/// source's figures are stale.
#[derive(Clone, Copy)]
pub(super) struct Palette {
    pub(super) kernel: Style,
    pub(super) walk: Style,
    pub(super) app: Style,
}

impl Palette {
    pub(super) fn of(f: &Figures, app: Source) -> Palette {
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

/// A figure in its source's style, or in [`STALE`] when that source is stale: the one way
/// every stale figure of the view is marked.
pub(super) fn figure_span(text: String, fresh: Style, stale: bool) -> Span<'static> {
    Span::styled(text, if stale { STALE } else { fresh })
}

/// A value cell: the text in the source's colour, or a dim "n/a".
pub(super) fn value(v: Option<String>, style: Style) -> Span<'static> {
    match v {
        Some(s) => Span::styled(s, style),
        None => Span::styled(NA, MISSING),
    }
}

pub(super) fn n_u(v: Option<u64>, style: Style) -> Span<'static> {
    value(v.map(fmt::count), style)
}

pub(super) fn n_i(v: Option<i64>, style: Style) -> Span<'static> {
    value(v.map(fmt::signed), style)
}

pub(super) fn per_s(v: Option<f64>, style: Style) -> Span<'static> {
    value(v.map(|r| format!("{}/s", fmt::whole(r))), style)
}

pub(super) fn bytes(v: Option<f64>, style: Style) -> Span<'static> {
    value(v.map(fmt::bytes), style)
}

/// `text` on one line: line breaks and tabs become spaces.
pub(super) fn one_line(text: &str) -> String {
    text.replace(['\n', '\r', '\t'], " ")
}
