//! The comparison for the terminal, every line within the width (see [`fit`]): the runs,
//! what differs in their setup (long values as numbered notes below, never in a cell),
//! the key figures and the latency percentiles (a column per name, `mean ± sd` over
//! repeats, each name's difference from the baseline with its interval and verdict),
//! what the verdicts mean, and how many of each every name got.

use std::path::{Path, PathBuf};

use super::{
    Comparison,
    fit::{Blocks, Cell, Line, wrap},
    input::LoadedRun,
    interval::{CONFIDENCE, RESAMPLES},
    table::{LATENCY_PREFIX, MIN_REPEATS, Row, Spread, Verdict, show},
};
use crate::model::Outcome;
use crate::report::{fmt::ms, html::headline};

/// The latency columns of the seeds' table, in their order: (header, figure label).
pub(crate) const LATENCY_COLUMNS: [(&str, &str); 11] = [
    ("count", "count"),
    ("min", "min"),
    ("max", "max"),
    ("mean", "mean"),
    ("stddev", "stddev"),
    ("median", "median"),
    ("75%", "75%"),
    ("95%", "95%"),
    ("98%", "98%"),
    ("99%", "99%"),
    ("99.9%", "99.9%"),
];

/// A setup fact longer than this goes below the table as a numbered note.
const PROSE_AT: usize = 24;

/// A latency cell in ms without the unit (the header says it); `±sd` over repeats
/// that differ.
pub(crate) fn latency_cell(row: &Row, s: &Spread) -> String {
    if row.unit_name != "us" {
        return show(row.unit, s);
    }
    match (s.mean, s.sd) {
        (None, _) => "–".to_owned(),
        (Some(m), None | Some(0.0)) => ms(m),
        (Some(m), Some(sd)) => format!("{}±{}", ms(m), ms(sd)),
    }
}

/// `text` as a cell that a narrow terminal stacks at `at` (`3.74 s` over `± 270 ms`).
fn stackable(text: String, at: &str) -> Cell {
    match text.find(at) {
        Some(i) if i > 0 => {
            let joint = if at.starts_with(' ') { " " } else { "" };
            let pieces = vec![text[..i].to_owned(), text[i..].trim_start().to_owned()];
            Cell::new(pieces, joint)
        }
        _ => text.into(),
    }
}

/// The names' indices as the tables show them: the baseline first, then the others in
/// the order they were given.
fn columns(cmp: &Comparison) -> Vec<usize> {
    std::iter::once(cmp.baseline)
        .chain((0..cmp.names.len()).filter(|k| *k != cmp.baseline))
        .collect()
}

/// The folder every run folder is in, when they share one.
fn common_parent(runs: &[LoadedRun]) -> Option<PathBuf> {
    let mut parent = runs.first()?.spec.dir.parent()?.to_path_buf();
    while !runs.iter().all(|r| r.spec.dir.starts_with(&parent)) {
        parent = parent.parent()?.to_path_buf();
    }
    (!parent.as_os_str().is_empty()).then_some(parent)
}

fn runs_section(cmp: &Comparison, width: usize) -> String {
    let parent = common_parent(&cmp.runs);
    let mut out = match &parent {
        Some(p) => wrap(&format!("Runs, in {}", p.display()), width, ""),
        None => "Runs\n".to_owned(),
    };
    for n in &cmp.names {
        let mine: Vec<&LoadedRun> = cmp.runs.iter().filter(|r| r.spec.name == *n).collect();
        let base = if *n == cmp.names[cmp.baseline] && cmp.names.len() > 1 {
            " (baseline)"
        } else {
            ""
        };
        let runs = if mine.len() == 1 { "run" } else { "runs" };
        out.push_str(&wrap(
            &format!("{n}: {} {runs}{base}", mine.len()),
            width,
            "  ",
        ));
        for r in mine {
            let dir = parent
                .as_deref()
                .and_then(|p| r.spec.dir.strip_prefix(p).ok())
                .unwrap_or(&r.spec.dir);
            let line = format!(
                "{}: {} ({})",
                Path::new(dir).display(),
                headline(&r.run),
                r.run.outcome
            );
            out.push_str(&wrap(&line, width, "    "));
            if let Some(start) = r.run.start_line() {
                out.push_str(&wrap(&start, width, "      "));
            }
        }
    }
    if let Some(line) = super::dirty_starts(&cmp.runs) {
        out.push_str(&wrap(&line, width, "  "));
    }
    out
}

fn setup_section(cmp: &Comparison, width: usize) -> String {
    let mut out = wrap("Setup differences (first run of each name)", width, "");
    if cmp.config.is_empty() {
        out.push_str("  (none)\n");
        return out;
    }
    let order = columns(cmp);
    let mut notes: Vec<String> = Vec::new();
    let lines = cmp
        .config
        .iter()
        .map(|(key, values)| {
            let cells = order
                .iter()
                .map(|k| {
                    let v = values.get(*k).map_or("–", String::as_str);
                    if v.chars().count() <= PROSE_AT {
                        return vec![v.to_owned().into()];
                    }
                    notes.push(format!("{}, {key}: {v}", cmp.names[*k]));
                    vec![format!("[{}]", notes.len()).into()]
                })
                .collect();
            Line::Cells(format!("  {key}"), cells)
        })
        .collect();
    let table = Blocks {
        head: String::new(),
        groups: order.iter().map(|k| vec![cmp.names[*k].clone()]).collect(),
        lines,
        keep: 1,
    };
    out.push_str(&table.render(width));
    for (i, n) in notes.iter().enumerate() {
        out.push_str(&wrap(&format!("[{}] {n}", i + 1), width, "  "));
    }
    out
}

/// The figures table of `rows`: a column per name (the baseline first), and for every
/// other name its difference from the baseline and the verdict.
/// Why a cell has no value, when that is prose: it goes below the table as note `(n)`
/// (pushed onto `notes`), and the cell holds the marker, so no cell is a paragraph.
fn prose_note(
    cmp: &Comparison,
    r: &Row,
    k: usize,
    text: &str,
    notes: &mut Vec<String>,
) -> Option<Cell> {
    let c = &r.cells[k];
    if c.n > 0 || c.why_none.is_empty() || text.chars().count() <= PROSE_AT {
        return None;
    }
    notes.push(format!("{}, {}: {text}", cmp.names[k], r.figure));
    Some(format!("({})", notes.len()).into())
}

fn figures_table(
    cmp: &Comparison,
    head: &str,
    rows: &[&Row],
    latency: bool,
    notes: &mut Vec<String>,
) -> Blocks {
    let order = columns(cmp);
    let base = &cmp.names[cmp.baseline];
    let groups = order
        .iter()
        .map(|k| {
            if *k == cmp.baseline && cmp.names.len() > 1 {
                vec![format!("{base}\n(baseline)")]
            } else if *k == cmp.baseline {
                vec![base.clone()]
            } else {
                vec![
                    cmp.names[*k].clone(),
                    format!("Δ vs {base}"),
                    "verdict".into(),
                ]
            }
        })
        .collect();
    let mut lines = Vec::new();
    let mut group = "";
    for r in rows {
        if r.group != group {
            group = &r.group;
            lines.push(Line::Title(
                group
                    .strip_prefix(LATENCY_PREFIX)
                    .unwrap_or(group)
                    .to_owned(),
            ));
        }
        let cells = order
            .iter()
            .map(|k| {
                let c = &r.cells[*k];
                let text = if latency {
                    latency_cell(r, c)
                } else {
                    show(r.unit, c)
                };
                let value = prose_note(cmp, r, *k, &text, notes)
                    .unwrap_or_else(|| stackable(text, if latency { "±" } else { " ± " }));
                match r.difference(&cmp.names[*k]) {
                    Some(d) => vec![
                        value,
                        stackable(d.show_delta(r.unit), " ["),
                        d.show_verdict(r.unit).into(),
                    ],
                    None => vec![value],
                }
            })
            .collect();
        lines.push(Line::Cells(format!("  {}", r.figure), cells));
    }
    Blocks {
        head: head.to_owned(),
        groups,
        lines,
        keep: 1,
    }
}

/// What Δ and the verdicts mean, for the baseline's name.
fn legend(base: &str, width: usize) -> String {
    let pct = CONFIDENCE * 100.0;
    let mut out = wrap(
        &format!(
            "Δ: the difference of the medians over each name's runs, as % of {base}'s median, and its {pct:.0}% bootstrap interval [low, high] ({} resamples of the runs, and of each run's connections for a latency percentile; in the figure's unit where {base}'s median is 0).",
            crate::fmt::count(RESAMPLES as u64)
        ),
        width,
        "",
    );
    let words = [
        ("same", "every run of both gave the same value.".to_owned()),
        (
            "N runs",
            format!(
                "a name has fewer than {MIN_REPEATS} runs: no call. A latency percentile's interval then comes from the run's connections alone and says how precisely that run pins it, not where the next run would land."
            ),
        ),
        (
            "unclear",
            "the interval contains 0: not measurably different.".to_owned(),
        ),
        (
            "within S%",
            format!(
                "measurably different (the interval excludes 0), but by no more than S%, the run-to-run spread: the two names' ranges (max − min over their repeats) added, as % of {base}'s median, and never under {}% (figures computed exactly repeat to the byte). Runs of one setup on this box move that much by themselves.",
                super::table::SMALLEST_FINDING_PCT
            ),
        ),
        (
            "BEYOND S%",
            "measurably different, and by more than the run-to-run spread: a difference to act on."
                .to_owned(),
        ),
    ];
    for (word, meaning) in words {
        out.push_str(&wrap(&format!("{word}: {meaning}"), width, "  "));
    }
    out
}

/// How many figures got each verdict, per name.
fn summary(cmp: &Comparison, width: usize) -> String {
    let base = &cmp.names[cmp.baseline];
    let mut out = wrap(
        &format!("Verdicts vs {base}, over {} figures", cmp.rows.len()),
        width,
        "",
    );
    let kinds = [
        (Verdict::BeyondSpread, "beyond the run-to-run spread"),
        (Verdict::Different, "measurably different within it"),
        (Verdict::NotDifferent, "unclear"),
        (Verdict::FewRuns, "too few runs"),
        (Verdict::Same, "same"),
        (Verdict::NoData, "no data"),
    ];
    for (k, name) in cmp.names.iter().enumerate() {
        if k == cmp.baseline {
            continue;
        }
        let counts: Vec<String> = kinds
            .iter()
            .filter_map(|(v, words)| {
                let n = cmp
                    .rows
                    .iter()
                    .filter(|r| r.difference(name).is_some_and(|d| d.verdict == *v))
                    .count();
                (n > 0).then(|| format!("{n} {words}"))
            })
            .collect();
        out.push_str(&wrap(
            &format!("{name}: {}", counts.join(", ")),
            width,
            "  ",
        ));
    }
    out
}

/// The headline table: a row per name, a column per figure people choose by, each cell
/// `median ±spread` (half the range over the repeats, as % of the median), the best of
/// each column marked `*`.
fn headline_table(cmp: &Comparison) -> Blocks {
    let h = &cmp.headline;
    let lines = h
        .names
        .iter()
        .enumerate()
        .map(|(k, n)| {
            let cells = h
                .columns
                .iter()
                .map(|c| {
                    let cell = &c.cells[k];
                    let text = if cell.best {
                        format!("*{}", cell.text)
                    } else {
                        cell.text.clone()
                    };
                    vec![stackable(text, " ±")]
                })
                .collect();
            Line::Cells(n.clone(), cells)
        })
        .collect();
    Blocks {
        head: "server".into(),
        groups: h
            .columns
            .iter()
            .map(|c| vec![c.header.to_owned()])
            .collect(),
        lines,
        keep: 0,
    }
}

/// What the table's cells and the verdicts' words mean.
fn headline_legend(width: usize) -> String {
    wrap(
        &format!(
            "Each cell: the median over the name's runs ± half their range, as % of the median (a single run shows no spread); * the best of its column (higher is better for held and setup rate, lower for the others; memory: the server's user space per open connection, and the kernel's per server socket; server CPU: user + sys over every phase; push: per message, from the server's broadcast start). Verdicts: sure = the {:.0}% bootstrap interval excludes no difference and the difference is beyond the runs' own spread (the two names' ranges added); likely = measurable, but within that spread; no clear difference = the interval holds none; no call under {MIN_REPEATS} runs a name. One is N× the other where it is at least twice, else by a percent of the worse.",
            CONFIDENCE * 100.0
        ),
        width,
        "",
    )
}

/// The pairwise verdicts, one title per column.
fn pair_verdicts(cmp: &Comparison, width: usize) -> String {
    let mut out = String::new();
    for c in &cmp.headline.columns {
        let mine: Vec<_> = cmp
            .headline
            .verdicts
            .iter()
            .filter(|v| v.column == c.column)
            .collect();
        if mine.is_empty() {
            continue;
        }
        let title = c.column.what();
        let mut chars = title.chars();
        let title: String = chars
            .next()
            .map(|f| f.to_uppercase().chain(chars).collect())
            .unwrap_or_default();
        out.push_str(&wrap(&title, width, "  "));
        for line in cmp.headline.column_lines(c.column) {
            out.push_str(&wrap(&line, width, "    "));
        }
    }
    out
}

/// One line per name: its runs, how many ended each way, and why each run that did not
/// complete ended so (its folder and first warning: a failed run is out of the figures,
/// and a reader must not have to open its folder to learn why).
fn runs_brief(cmp: &Comparison, width: usize) -> String {
    let mut out = String::new();
    for n in &cmp.names {
        let mine: Vec<&LoadedRun> = cmp.runs.iter().filter(|r| r.spec.name == *n).collect();
        let mut outcomes: Vec<(Outcome, usize)> = Vec::new();
        for r in &mine {
            match outcomes.iter_mut().find(|(o, _)| *o == r.run.outcome) {
                Some((_, k)) => *k += 1,
                None => outcomes.push((r.run.outcome, 1)),
            }
        }
        let server = mine
            .first()
            .map(|r| r.run.server_label())
            .unwrap_or_default();
        let runs = if mine.len() == 1 { "run" } else { "runs" };
        let ended = match outcomes.as_slice() {
            [(o, _)] => o.to_string(),
            _ => outcomes
                .iter()
                .map(|(o, k)| format!("{k} {o}"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        out.push_str(&wrap(
            &format!("{n}: {} {runs} ({ended}), {server}", mine.len()),
            width,
            "  ",
        ));
        for r in mine.iter().filter(|r| r.run.outcome != Outcome::Complete) {
            let folder = r.spec.dir.file_name().map_or_else(
                || r.spec.dir.display().to_string(),
                |f| f.to_string_lossy().into_owned(),
            );
            let why = r
                .run
                .warnings
                .first()
                .map_or("no reason recorded", String::as_str);
            out.push_str(&wrap(
                &format!("{folder}: {}: {why}", r.run.outcome),
                width,
                "    ",
            ));
        }
    }
    if let Some(line) = super::dirty_starts(&cmp.runs) {
        out.push_str(&wrap(&line, width, "  "));
    }
    out
}

/// The answer: the runs in brief, the headline table, every pair's verdicts in words,
/// who is better at what, and what differed in the setups. Every line at most `width`.
pub(crate) fn answer(cmp: &Comparison, width: usize) -> String {
    let mut out = String::new();
    let runs = cmp.runs.len();
    out.push_str(&wrap(
        &format!(
            "Comparison of {} name{} over {runs} run{}",
            cmp.names.len(),
            if cmp.names.len() == 1 { "" } else { "s" },
            if runs == 1 { "" } else { "s" }
        ),
        width,
        "",
    ));
    out.push_str(&runs_brief(cmp, width));
    out.push('\n');
    if cmp.headline.columns.is_empty() {
        out.push_str("(no figure to compare)\n");
    } else {
        out.push_str(&headline_table(cmp).render(width));
        out.push_str(&headline_legend(width));
    }
    if cmp.names.len() > 1 {
        out.push('\n');
        out.push_str(&wrap("Who is better at what", width, ""));
        for line in &cmp.headline.who_is_better {
            out.push_str(&wrap(line, width, "  "));
        }
        out.push('\n');
        out.push_str(&wrap("Every pair, figure by figure", width, ""));
        out.push_str(&pair_verdicts(cmp, width));
    }
    out.push('\n');
    out.push_str(&setup_section(cmp, width));
    out
}

/// The whole detail: every run, every figure and its difference from the baseline
/// (compare.txt, and `--verbose`), every line at most `width` wide.
pub(crate) fn render(cmp: &Comparison, width: usize) -> String {
    let mut out = runs_section(cmp, width);
    out.push('\n');
    out.push_str(&setup_section(cmp, width));
    let (latency, key): (Vec<&Row>, Vec<&Row>) = cmp.rows.iter().partition(|r| r.is_latency());
    out.push('\n');
    let mut notes = Vec::new();
    out.push_str(
        &figures_table(cmp, "Key figures (mean ± sd)", &key, false, &mut notes).render(width),
    );
    out.push('\n');
    if latency.is_empty() {
        out.push_str("Latency\n  (no latency recorded)\n");
    } else {
        out.push_str(
            &figures_table(cmp, "Latency (ms; mean±sd)", &latency, true, &mut notes).render(width),
        );
    }
    for (i, n) in notes.iter().enumerate() {
        out.push_str(&wrap(&format!("({}) {n}", i + 1), width, "  "));
    }
    if cmp.names.len() > 1 {
        out.push('\n');
        out.push_str(&legend(&cmp.names[cmp.baseline], width));
        out.push('\n');
        out.push_str(&summary(cmp, width));
    }
    out
}

/// One histogram's part of the seeds' latency table: its title, and one line of
/// [`LATENCY_COLUMNS`] cells per name.
pub(crate) type LatencyTable<'a> = (&'a str, Vec<(&'a str, Vec<String>)>);

/// The seeds' latency table, per histogram (the HTML page shows it).
pub(crate) fn latency_tables<'a>(rows: &'a [Row], names: &'a [String]) -> Vec<LatencyTable<'a>> {
    let mut groups: Vec<&str> = Vec::new();
    for r in rows.iter().filter(|r| r.is_latency()) {
        if !groups.contains(&r.group.as_str()) {
            groups.push(&r.group);
        }
    }
    groups
        .into_iter()
        .map(|g| {
            let lines = names
                .iter()
                .enumerate()
                .map(|(k, n)| {
                    let cells = LATENCY_COLUMNS
                        .iter()
                        .map(|(_, label)| {
                            rows.iter()
                                .find(|r| r.group == g && r.figure == *label)
                                .and_then(|r| r.cells.get(k).map(|c| latency_cell(r, c)))
                                .unwrap_or_else(|| "–".into())
                        })
                        .collect();
                    (n.as_str(), cells)
                })
                .collect();
            (g.strip_prefix(LATENCY_PREFIX).unwrap_or(g), lines)
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::{super::fit::widest, *};
    use crate::compare::input::RunSpec;
    use crate::report::sample_run;

    /// `names` × `repeats` runs of the fixture, each a little different, and one long
    /// setup value per name.
    fn comparison(names: usize, repeats: usize) -> Comparison {
        let mut runs = Vec::new();
        let sample = sample_run();
        for r in 0..repeats {
            for n in 0..names {
                let mut run = sample.clone();
                let jitter = 1.0 + 0.01 * (r * names + n) as f64;
                run.per_connection.server_user_bytes = Some(1000.0 * jitter);
                for p in &mut run.phases {
                    p.server.cpu_user_s *= jitter;
                }
                run.config.push_writers = n as u64;
                run.config.sources_reason = format!(
                    "{n} source addresses: the ephemeral port range holds 28,231 ports per address"
                );
                runs.push(LoadedRun {
                    spec: RunSpec {
                        dir: format!("/tmp/a/rather/deep/folder/of/runs/server-number-{n}-{r}")
                            .into(),
                        name: format!("server-number-{n}"),
                    },
                    run,
                });
            }
        }
        Comparison::of(runs, None).unwrap()
    }

    #[test]
    fn six_names_with_repeats_fit_120_and_80_columns() {
        let cmp = comparison(6, 3);
        for width in [120, 80] {
            let text = render(&cmp, width);
            assert!(widest(&text) <= width, "{width}:\n{text}");
            // Prose is a note below the table, not a cell.
            assert!(
                text.contains("[6] server-number-5, config.sources_reason: 5 source"),
                "{text}"
            );
            assert!(
                text.contains("Verdicts vs server-number-0, over "),
                "{text}"
            );
            if width == 120 {
                eprintln!("{text}");
            }
        }
    }

    #[test]
    fn one_to_eight_names_fit() {
        for names in 1..=8 {
            let cmp = comparison(names, 3);
            for width in [120, 80, 60] {
                let text = render(&cmp, width);
                assert!(widest(&text) <= width, "{names} at {width}:\n{text}");
                let text = answer(&cmp, width);
                assert!(widest(&text) <= width, "{names} at {width}:\n{text}");
                if names == 3 && width == 120 {
                    eprintln!("{text}");
                }
            }
        }
    }
}
