//! The comparison folder: `compare.csv` (one line per figure and name), `compare.json`
//! (the runs and every row with its spread) and `compare.html` (small multiples: one
//! chart per figure, one line per run, see `report::multiples`; and the tables).

use std::path::{Path, PathBuf};

use maud::html;
use serde::Serialize;

use super::{
    Comparison,
    headline::Headline,
    input::LoadedRun,
    interval::{CONFIDENCE, RESAMPLES},
    table::{MIN_REPEATS, Row, show},
    text::{LATENCY_COLUMNS, latency_tables},
};
use crate::model::{Outcome, ServerInfo, StartState};
use crate::report::{
    ExportError,
    atomic::write_atomic,
    histograms, hlog,
    html::{headline, page},
    multiples::{self, ComparedRun},
    palette::RunStyle,
};

/// The comparison as CSV, one line per figure and name, in the `--out` folder.
pub const CSV: &str = "compare.csv";
/// The runs and every row with its spread, as JSON, in the `--out` folder.
pub const JSON: &str = "compare.json";
/// The comparison as `c1m compare --verbose` prints it (at the width it printed), in the
/// `--out` folder: the answer, then every run and every figure.
pub const TXT: &str = "compare.txt";
/// The offline HTML comparison (one chart per figure, and the tables), in the `--out` folder.
pub const HTML: &str = "compare.html";

#[derive(Serialize)]
struct RunEntry<'a> {
    name: &'a str,
    dir: String,
    outcome: Outcome,
    connections: u64,
    started_unix_ms: u64,
    /// The server and what it runs on, as the run's header names it.
    server: String,
    server_info: Option<&'a ServerInfo>,
    /// What the run started from; `started_dirty` when an earlier run's sockets were
    /// still on its ports.
    start: Option<&'a StartState>,
    started_dirty: bool,
}

#[derive(Serialize)]
struct Document<'a> {
    c1m_version: &'static str,
    names: &'a [String],
    /// The name every difference is taken from; its percents are of its medians.
    baseline: &'a str,
    /// How the differences' intervals were made.
    method: Method,
    runs: Vec<RunEntry<'a>>,
    setup_differences: Vec<SetupDifference<'a>>,
    /// The answer: the table (a row per name, best per column), every pair's verdicts
    /// in words, and who is better at what.
    headline: &'a Headline,
    rows: &'a [Row],
}

#[derive(Serialize)]
struct Method {
    statistic: &'static str,
    confidence: f64,
    resamples: usize,
    min_repeats: usize,
    spread: &'static str,
}

const METHOD: Method = Method {
    statistic: "median over a name's runs; differences as median(name) - median(baseline), percents of median(baseline)",
    confidence: CONFIDENCE,
    resamples: RESAMPLES,
    min_repeats: MIN_REPEATS,
    spread: "the two names' ranges (max - min over their repeats) added, at least the figure's resolution",
};

#[derive(Serialize)]
struct SetupDifference<'a> {
    key: &'a str,
    values: &'a [String],
}

/// Writes the three files into `dir` (created if needed); returns their paths.
pub(crate) fn write(dir: &Path, cmp: &Comparison, txt: &str) -> Result<Vec<PathBuf>, ExportError> {
    std::fs::create_dir_all(dir).map_err(ExportError::io(dir))?;
    let files = [
        (CSV, csv(cmp)?),
        (JSON, json(cmp)?),
        (HTML, html(cmp)?),
        (TXT, txt.to_owned()),
    ];
    let mut written = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        write_atomic(&path, text.as_bytes())?;
        written.push(path);
    }
    Ok(written)
}

/// One line per figure and name: the name's values, then its difference from the
/// baseline (empty on the baseline's own line, whose verdict says `baseline`); on a
/// figure of the headline table, its column and whether the name is the best there.
/// Then one line per pair and headline column: group `Pairwise verdict`, the pair as
/// name and baseline, the call as verdict and its words.
fn csv(cmp: &Comparison) -> Result<String, ExportError> {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    w.write_record([
        "group",
        "figure",
        "unit",
        "name",
        "n",
        "mean",
        "sd",
        "min",
        "max",
        "median",
        "baseline",
        "delta",
        "delta_pct",
        "low",
        "high",
        "low_pct",
        "high_pct",
        "resampled",
        "spread",
        "spread_pct",
        "verdict",
        "headline",
        "best",
        "words",
    ])?;
    let num = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    let baseline = &cmp.names[cmp.baseline];
    for r in &cmp.rows {
        for c in &r.cells {
            let mut line = vec![
                text(&r.group),
                text(&r.figure),
                text(r.unit_name),
                text(&c.name),
                c.n.to_string(),
                num(c.mean),
                num(c.sd),
                num(c.min),
                num(c.max),
                num(c.median),
                text(baseline),
            ];
            match r.difference(&c.name) {
                Some(d) => line.extend([
                    num(d.delta),
                    num(d.delta_pct),
                    num(d.low),
                    num(d.high),
                    num(d.low_pct),
                    num(d.high_pct),
                    d.resampled.map(|x| text(x.key())).unwrap_or_default(),
                    num(d.spread),
                    num(d.spread_pct),
                    text(d.verdict.key()),
                ]),
                None => line
                    .extend(std::iter::repeat_n(String::new(), 9).chain(["baseline".to_owned()])),
            }
            let column = cmp
                .headline
                .columns
                .iter()
                .find(|h| h.group == r.group && h.figure == r.figure);
            match column {
                Some(h) => {
                    let k = cmp.names.iter().position(|n| *n == c.name);
                    let best = k.and_then(|k| h.cells.get(k)).is_some_and(|x| x.best);
                    line.extend([text(h.header), best.to_string(), String::new()]);
                }
                None => line.extend([String::new(), String::new(), String::new()]),
            }
            w.write_record(&line)?;
        }
    }
    for v in &cmp.headline.verdicts {
        let unit = cmp
            .headline
            .columns
            .iter()
            .find(|c| c.column == v.column)
            .map_or("", |c| c.unit);
        let mut line = vec![
            "Pairwise verdict".to_owned(),
            text(v.column.what()),
            text(unit),
            text(&v.a),
        ];
        line.extend(std::iter::repeat_n(String::new(), 6));
        line.push(text(&v.b));
        line.extend(std::iter::repeat_n(String::new(), 9));
        line.push(text(v.call.word()));
        line.extend([String::new(), String::new(), text(&v.words)]);
        w.write_record(&line)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| ExportError::Csv(e.into_error().into()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A text cell a spreadsheet will not run: one that starts like a formula (`=`, `+`,
/// `-`, `@`, or a tab or CR before one) gets a leading `'` (OWASP's CSV injection rule),
/// so a run named `+HYPERLINK(…)` reads as its name. Numbers are not text cells: a
/// negative one stays a number.
fn text(s: &str) -> String {
    if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{s}")
    } else {
        s.to_owned()
    }
}

fn json(cmp: &Comparison) -> Result<String, ExportError> {
    let (runs, names, config, rows) = (&cmp.runs, &cmp.names, &cmp.config, &cmp.rows);
    let doc = Document {
        c1m_version: env!("CARGO_PKG_VERSION"),
        names,
        baseline: &names[cmp.baseline],
        method: METHOD,
        runs: runs
            .iter()
            .map(|r| RunEntry {
                name: &r.spec.name,
                dir: r.spec.dir.display().to_string(),
                outcome: r.run.outcome,
                connections: r.run.config.connections,
                started_unix_ms: r.run.started_unix_ms,
                server: r.run.server_label(),
                server_info: r.run.server_info.as_ref(),
                start: r.run.start.as_ref(),
                started_dirty: r.run.start.as_ref().is_some_and(StartState::dirty),
            })
            .collect(),
        setup_differences: config
            .iter()
            .map(|(key, values)| SetupDifference { key, values })
            .collect(),
        headline: &cmp.headline,
        rows,
    };
    serde_json::to_string_pretty(&doc).map_err(|error| ExportError::Encode {
        what: "the comparison",
        error,
    })
}

fn html(cmp: &Comparison) -> Result<String, ExportError> {
    let (runs, names, config, rows) = (&cmp.runs, &cmp.names, &cmp.config, &cmp.rows);
    let setup = |name: &str| names.iter().position(|n| n == name).unwrap_or(0);
    // The k-th run (from 0) of its name, and how many runs the name has.
    let repeat = |r: &LoadedRun| {
        let same: Vec<&LoadedRun> = runs.iter().filter(|x| x.spec.name == r.spec.name).collect();
        let k = same.iter().position(|x| std::ptr::eq(*x, r)).unwrap_or(0);
        (k, same.len())
    };
    let label = |r: &LoadedRun| match repeat(r) {
        (_, 1) => r.spec.name.clone(),
        (k, _) => format!("{} #{}", r.spec.name, k + 1),
    };
    let labels: Vec<String> = runs.iter().map(label).collect();
    let styles: Vec<RunStyle> = runs
        .iter()
        .map(|r| RunStyle::of(setup(&r.spec.name), repeat(r).0))
        .collect();
    let hists = runs
        .iter()
        .map(|r| histograms(&r.run))
        .collect::<Result<Vec<_>, _>>()?;
    let logs: Vec<(Vec<hlog::RunLog>, Vec<String>)> = runs
        .iter()
        .map(|r| hlog::read_run_logs(&r.spec.dir, &multiples::OVER_TIME_QUANTILES))
        .collect();
    let problems: Vec<&String> = logs.iter().flat_map(|(_, p)| p).collect();
    let compared: Vec<ComparedRun> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| ComparedRun {
            label: &labels[i],
            setup: setup(&r.spec.name),
            style: styles[i],
            run: &r.run,
            hists: &hists[i],
            logs: &logs[i].0,
        })
        .collect();
    let base = &names[cmp.baseline];
    let others: Vec<&String> = names.iter().filter(|n| *n != base).collect();
    // Each figure's row, with its group's name when the group begins there.
    let mut group = "";
    let figure_rows: Vec<(Option<&str>, &Row)> = rows
        .iter()
        .filter(|r| !r.is_latency())
        .map(|r| {
            let head = (r.group != group).then(|| {
                group = &r.group;
                group
            });
            (head, r)
        })
        .collect();
    let h = &cmp.headline;
    let body = html! {
        h1 { "c1m compare" }
        h2 #answer { "Who is better at what" }
        @if h.columns.is_empty() {
            p.mut { "No figure to compare." }
        } @else {
            div.scroll {
                table #headline {
                    tr {
                        th.t { "server" }
                        @for c in &h.columns { th { (c.header) } }
                    }
                    @for (k, n) in h.names.iter().enumerate() {
                        tr {
                            td.t { (n) }
                            @for c in &h.columns {
                                @let cell = &c.cells[k];
                                td.best[cell.best] {
                                    @if cell.best { "*" } (cell.text)
                                }
                            }
                        }
                    }
                }
            }
            p.mut {
                "Each cell: the median over the name's runs ± half their range, as % of the median (one run: no spread); "
                b { "* bold" } ": the best of its column (higher is better for held and setup rate, lower for the others). Verdicts: "
                b { "sure" } ": the 95% interval excludes no difference and the difference is beyond the runs' own spread; "
                b { "likely" } ": measurable, within that spread; no clear difference: the interval holds none; no call under "
                (MIN_REPEATS) " runs a name."
            }
        }
        @if h.names.len() > 1 {
            ul.verdicts {
                @for line in &h.who_is_better { li { (line) } }
            }
            h2 #pairs { "Every pair, figure by figure" }
            @for c in &h.columns {
                h3 { (c.column.what()) }
                ul.verdicts {
                    @for line in h.column_lines(c.column) {
                        li { (line) }
                    }
                }
            }
        }
        header {
            h2 { "Runs" }
            div.runs {
                @for ((r, l), style) in runs.iter().zip(&labels).zip(&styles) {
                    div {
                        (style.swatch())
                        b { (l) } " "
                        code { (r.spec.dir.display().to_string()) } " "
                        span.sub { (headline(&r.run)) " · " (r.run.outcome.name()) }
                    }
                    @if let Some(start) = &r.run.start {
                        div.sub style="margin-left:2em" {
                            @if start.dirty() { "⚠ " } (start.describe())
                        }
                    }
                }
                @if let Some(line) = super::dirty_starts(runs) {
                    div.warn { (line) }
                }
            }
            @if !problems.is_empty() {
                div.warn {
                    b { "Left out" }
                    ul { @for p in &problems { li { (p) } } }
                }
            }
        }
        h2 { "Setup differences (first run of each name)" }
        @if config.is_empty() {
            p.mut { "None." }
        } @else {
            table.wide style="table-layout:fixed" {
                tr { th.t { "key" } @for n in names { th.t { (n) } } }
                @for (k, values) in config {
                    tr {
                        td.wrap { (k) }
                        @for v in values { td.wrap { (v) } }
                    }
                }
            }
        }
        div #charts { (multiples::sections(&compared)) }
        h2 #detail {
            "Key figures (mean ± sd over repeats; vs " (base)
            ": the difference of the medians, its 95% interval and the verdict, as "
            code { "c1m compare" } " prints them)"
        }
        div.scroll { table.wide {
            tr {
                th.t { "figure" }
                @for n in names { th { (n) } }
                @for n in &others { th { (n) " vs " (base) } }
            }
            @for (head, r) in &figure_rows {
                @if let Some(group) = head {
                    tr { th.t colspan=(2 * names.len()) { (group) } }
                }
                tr {
                    td.t { (r.figure) }
                    @for c in &r.cells { td { (show(r.unit, c)) } }
                    @for d in &r.differences {
                        td { ([d.show_delta(r.unit), d.show_verdict(r.unit)].join(" ").trim()) }
                    }
                }
            }
        } }
        h2 { "Latency (ms), the seeds' table (mean±sd over repeats)" }
        div.scroll { table.wide {
            tr { th.t { "histogram" } @for (h, _) in LATENCY_COLUMNS { th { (h) } } }
            @for (title, lines) in latency_tables(rows, names) {
                @for (n, cells) in lines {
                    tr {
                        td.t { (n) ": " (title) }
                        @for c in cells { td { (c) } }
                    }
                }
            }
        } }
        footer {
            "Generated by c1m " (env!("CARGO_PKG_VERSION")) " from " (runs.len())
            " runs' summary.json; compare.csv and compare.json beside this page hold every value."
        }
    };
    Ok(page("c1m compare", body))
}
