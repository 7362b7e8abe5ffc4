//! Text that fits the terminal: tables split into blocks of columns that fit the width
//! (comfy-table wraps what a narrow terminal still cannot fit), and prose wrapped at
//! spaces. No line is wider than the width.

use comfy_table::{CellAlignment, ColumnConstraint, ContentArrangement, Table, Width, presets};
use textwrap::core::display_width;

/// Without $COLUMNS and without a terminal (a pipe, a file, CI logs).
pub(crate) const DEFAULT_WIDTH: usize = 120;
/// The narrowest width honoured: a figure's label and one setup's three cells need it.
pub(crate) const MIN_WIDTH: usize = 40;
/// Spaces between two columns.
const GAP: usize = 2;
/// The narrowest the label column is wrapped to when a block is too wide (wider when
/// a word of a label is).
const LABEL_MIN: usize = 16;

/// The width to fit: $COLUMNS, else the terminal's when stdout is one, else 120.
pub(crate) fn width() -> usize {
    use std::io::IsTerminal as _;
    let tty = || {
        std::io::stdout()
            .is_terminal()
            .then(|| ratatui::crossterm::terminal::size().ok())
            .flatten()
            .map(|(w, _)| usize::from(w))
    };
    width_from(std::env::var("COLUMNS").ok().as_deref(), tty)
}

fn width_from(columns: Option<&str>, tty: impl FnOnce() -> Option<usize>) -> usize {
    columns
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|w| *w > 0)
        .or_else(tty)
        .unwrap_or(DEFAULT_WIDTH)
        .max(MIN_WIDTH)
}

/// `text` wrapped to `width`, every line starting with `indent` and continuation lines
/// indented two more; a word longer than a line is broken.
pub(crate) fn wrap(text: &str, width: usize, indent: &str) -> String {
    let more = format!("{indent}  ");
    // No hyphenation: a date or a range (2026-12-01, 127.0.0.2-127.0.0.41) stays whole.
    let opts = textwrap::Options::new(width)
        .initial_indent(indent)
        .subsequent_indent(&more)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    let mut out = textwrap::fill(text, opts);
    out.push('\n');
    out
}

/// A label wrapped to `width`, continuation lines indented two more than its first, so
/// a wrapped figure still reads as one under its title.
fn wrap_label(label: &str, width: usize) -> String {
    let trimmed = label.trim_start();
    let lead = &label[..label.len() - trimmed.len()];
    let more = format!("{lead}  ");
    let opts = textwrap::Options::new(width)
        .initial_indent(lead)
        .subsequent_indent(&more)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    textwrap::fill(trimmed, opts)
}

/// A cell's text in pieces: side by side where the width allows, one under the other
/// (`3.74 s` over `± 270 ms`) where it does not, so a number is never broken.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Cell {
    pieces: Vec<String>,
    /// Between the pieces side by side.
    joint: &'static str,
}

impl Cell {
    pub(crate) fn new(pieces: Vec<String>, joint: &'static str) -> Cell {
        Cell { pieces, joint }
    }

    fn text(&self, stacked: bool) -> String {
        self.pieces.join(if stacked { "\n" } else { self.joint })
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Cell {
        Cell::new(vec![s], "")
    }
}

/// One line of a [`Blocks`] table.
#[derive(Debug, Clone)]
pub(crate) enum Line {
    /// A title over the rows below it, in the label column.
    Title(String),
    /// A label, then each column group's cells.
    Cells(String, Vec<Vec<Cell>>),
}

/// A table of labelled rows whose other columns come in groups that stay together (one
/// setup's value, difference and verdict). Too wide for the width, it prints in blocks,
/// each with the label column, the first `keep` groups (the baseline) and as many of the
/// others as fit.
#[derive(Debug, Clone)]
pub(crate) struct Blocks {
    /// The label column's header.
    pub head: String,
    /// Each group's column headers.
    pub groups: Vec<Vec<String>>,
    pub lines: Vec<Line>,
    pub keep: usize,
}

impl Blocks {
    fn label_width(&self) -> usize {
        self.lines
            .iter()
            .map(|l| match l {
                Line::Title(t) | Line::Cells(t, _) => display_width(t),
            })
            .chain([display_width(&self.head)])
            .max()
            .unwrap_or(0)
    }

    /// The narrowest the labels wrap to without breaking a word: the longest word and
    /// the indent of a continuation line.
    fn label_floor(&self) -> usize {
        let labels = self.lines.iter().map(|l| match l {
            Line::Title(t) | Line::Cells(t, _) => t.as_str(),
        });
        labels
            .chain([self.head.as_str()])
            .flat_map(|l| {
                let indent = l.len() - l.trim_start().len() + 2;
                l.split_whitespace().map(move |w| display_width(w) + indent)
            })
            .max()
            .unwrap_or(0)
            .max(LABEL_MIN)
    }

    /// The widest cell of each of a group's columns, header included, plus the gaps.
    fn group_width(&self, g: usize, stacked: bool) -> usize {
        let heads = &self.groups[g];
        (0..heads.len())
            .map(|c| {
                let cells = self.lines.iter().filter_map(|l| match l {
                    Line::Cells(_, groups) => Some(groups.get(g)?.get(c)?.text(stacked)),
                    Line::Title(_) => None,
                });
                cells
                    .chain([heads[c].clone()])
                    .flat_map(|s| s.lines().map(display_width).collect::<Vec<_>>())
                    .max()
                    .unwrap_or(0)
                    + GAP
            })
            .sum()
    }

    /// The groups of each block: the kept ones, then as many others as fit side by
    /// side (one at least, stacked or wrapped when even that is too wide).
    fn blocks(&self, width: usize) -> Vec<Vec<usize>> {
        let keep: Vec<usize> = (0..self.keep.min(self.groups.len())).collect();
        let base = self.label_width()
            + keep
                .iter()
                .map(|g| self.group_width(*g, false))
                .sum::<usize>();
        let mut blocks: Vec<Vec<usize>> = Vec::new();
        let mut used = usize::MAX;
        for g in self.keep..self.groups.len() {
            let w = self.group_width(g, false);
            match blocks.last_mut() {
                Some(b) if used + w <= width => {
                    b.push(g);
                    used += w;
                }
                _ => {
                    blocks.push(keep.iter().copied().chain([g]).collect());
                    used = base + w;
                }
            }
        }
        if blocks.is_empty() {
            blocks.push(keep);
        }
        blocks
    }

    /// The table in blocks, a blank line between two; every line at most `width` wide.
    /// A block too wide stacks its cells' pieces, then wraps its labels (to no less than
    /// [`LABEL_MIN`]); what still does not fit, comfy-table wraps.
    pub(crate) fn render(&self, width: usize) -> String {
        let mut out = String::new();
        let natural = self.label_width();
        for (i, groups) in self.blocks(width).iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            let others = |stacked: bool| -> usize {
                groups.iter().map(|g| self.group_width(*g, stacked)).sum()
            };
            let stacked = natural + others(false) > width;
            let others = others(stacked);
            let label_width = if natural + others <= width {
                natural
            } else {
                width
                    .saturating_sub(others)
                    .clamp(self.label_floor().min(natural), natural)
            };
            let label = |l: &str| {
                if label_width < natural {
                    wrap_label(l, label_width)
                } else {
                    l.to_owned()
                }
            };
            let mut t = Table::new();
            t.load_style(presets::NOTHING)
                .set_content_arrangement(ContentArrangement::Dynamic)
                .set_width(u16::try_from(width).unwrap_or(u16::MAX));
            let mut head = vec![label(&self.head)];
            head.extend(groups.iter().flat_map(|g| self.groups[*g].iter().cloned()));
            let columns = head.len();
            t.set_header(head);
            for l in &self.lines {
                let row: Vec<String> = match l {
                    Line::Title(title) => std::iter::once(label(title))
                        .chain(std::iter::repeat_n(String::new(), columns - 1))
                        .collect(),
                    Line::Cells(name, cells) => std::iter::once(label(name))
                        .chain(groups.iter().flat_map(|g| {
                            let n = self.groups[*g].len();
                            let mine = cells.get(*g);
                            (0..n).map(move |c| {
                                mine.and_then(|m| m.get(c))
                                    .map(|cell| cell.text(stacked))
                                    .unwrap_or_default()
                            })
                        }))
                        .collect(),
                };
                t.add_row(row);
            }
            for (c, col) in t.column_iter_mut().enumerate() {
                let last = c + 1 == columns;
                col.set_padding((0, if last { 0 } else { GAP as u16 }));
                if c > 0 {
                    col.set_cell_alignment(CellAlignment::Right);
                } else if label_width < natural {
                    // Wrapped already: comfy-table wraps the other columns, not this one.
                    let w = u16::try_from(label_width + GAP).unwrap_or(u16::MAX);
                    col.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(w)));
                }
            }
            for line in t.lines() {
                out.push_str(line.trim_end());
                out.push('\n');
            }
        }
        out
    }
}

/// The widest line of `text`.
#[cfg(test)]
pub(crate) fn widest(text: &str) -> usize {
    text.lines().map(display_width).max().unwrap_or(0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn width_is_columns_else_the_tty_else_120() {
        assert_eq!(width_from(Some("80"), || Some(200)), 80);
        assert_eq!(width_from(Some(" 100 "), || None), 100);
        assert_eq!(width_from(Some("wide"), || Some(200)), 200);
        assert_eq!(width_from(None, || None), DEFAULT_WIDTH);
        assert_eq!(width_from(Some("10"), || None), MIN_WIDTH);
        assert_eq!(width_from(Some("0"), || None), DEFAULT_WIDTH);
    }

    #[test]
    fn prose_wraps_and_breaks_long_words() {
        let path = "/tmp/".to_owned() + &"x".repeat(100);
        let text = wrap(
            &format!("a run in {path} with more words after it"),
            40,
            "    ",
        );
        assert!(widest(&text) <= 40, "{text}");
        assert!(text.lines().all(|l| l.starts_with("    ")), "{text}");
    }

    #[test]
    fn blocks_keep_the_baseline_and_fit_the_width() {
        let groups: Vec<Vec<String>> = (0..6)
            .map(|i| {
                vec![
                    format!("setup-{i}"),
                    "Δ vs setup-0".into(),
                    "verdict".into(),
                ]
            })
            .collect();
        let cells = |i: usize| -> Vec<Vec<Cell>> {
            (0..6)
                .map(|_| {
                    vec![
                        Cell::new(vec![format!("{i},000/s"), "± 1,234/s".into()], " "),
                        Cell::new(vec!["+12.3%".into(), "[+8.1, +15.0]".into()], " "),
                        "BEYOND 8.4%".to_owned().into(),
                    ]
                })
                .collect()
        };
        let table = Blocks {
            head: "Key figures".into(),
            groups,
            lines: vec![
                Line::Title("Setup".into()),
                Line::Cells("  achieved rate (connected / ramp)".into(), cells(1)),
                Line::Cells("  peak rate (1 s)".into(), cells(2)),
            ],
            keep: 1,
        };
        for width in [200, 120, 80, 60, 40] {
            let text = table.render(width);
            assert!(widest(&text) <= width, "{width}:\n{text}");
            if width < 80 {
                continue;
            }
            // Each block repeats the baseline; every other setup is in one of them.
            for block in text.split("\n\n") {
                assert!(
                    block.lines().next().unwrap().contains("setup-0"),
                    "{width}:\n{text}"
                );
            }
            for i in 1..6 {
                assert!(text.contains(&format!("setup-{i}")), "{width}:\n{text}");
            }
        }
        assert_eq!(table.render(400).split("\n\n").count(), 1);
        // Side by side where a block fits; at 100 (two groups need 124 side by side, 94
        // stacked), stacked rather than broken in a number.
        assert!(table.render(200).contains("2,000/s ± 1,234/s"));
        let narrow = table.render(100);
        assert!(widest(&narrow) <= 100, "{narrow}");
        assert!(!narrow.contains("2,000/s ± 1,234/s"), "{narrow}");
        for piece in ["2,000/s", "± 1,234/s", "+12.3%", "[+8.1, +15.0]"] {
            assert!(narrow.contains(piece), "{piece}:\n{narrow}");
        }
    }
}
