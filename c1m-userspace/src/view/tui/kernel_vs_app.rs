//! The kernel-vs-app block: each row's equation and its explanation, wrapped between
//! words to the terminal's width, the rows that do not fit counted in the rule.

use ratatui::{
    layout::Rect,
    style::{Modifier, Style},
    text::{Line, Span},
    widgets::{Block, Borders, Paragraph},
};

use super::style::{APP, KERNEL, LABEL, MISSING, TITLE, WARN, figure_span, one_line};
use crate::{
    figures::{Figures, kernel_vs_app::app_source},
    fmt::{self, NA},
    model::Source,
};

/// The kernel-vs-app block is a titled rule and its lines.
pub(super) const KVA_BORDERS: u16 = 1;
/// Left of a kernel-vs-app row's first line: its mark; of the lines it wraps to: this.
const KVA_INDENT: &str = "   ";

/// Lines the kernel-vs-app block needs at this width to show everything, its rule
/// included.
pub(super) fn kernel_vs_app_height(f: &Figures, width: u16) -> u16 {
    let lines: usize = kva_rows(f, width).iter().map(Vec::len).sum();
    u16::try_from(lines.max(1) + usize::from(KVA_BORDERS)).unwrap_or(u16::MAX)
}

/// Columns a kernel-vs-app line has for its words: the width less the mark or indent.
fn kva_text_width(width: u16) -> usize {
    usize::from(width).saturating_sub(KVA_INDENT.len()).max(1)
}

/// A word: spans that stay on one line together (a value and its comma).
pub(super) type Word = Vec<Span<'static>>;

fn word_width(w: &Word) -> usize {
    w.iter().map(Span::width).sum()
}

/// `words` in lines of at most `width` columns, one space between words; a word longer
/// than a line is cut.
pub(super) fn wrap_words(words: Vec<Word>, width: usize) -> Vec<Vec<Span<'static>>> {
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
pub(super) fn kernel_vs_app(f: &Figures, area: Rect) -> Paragraph<'static> {
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

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;
    use crate::fmt::ellipsis;

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
