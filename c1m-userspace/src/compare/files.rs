//! The comparison folder: `compare.csv` (one line per figure and name), `compare.json`
//! (the runs and every row with its spread) and `compare.html` (small multiples: one
//! chart per figure, one line per run, see `report::multiples`; and the tables).

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
};

use serde::Serialize;

use super::{
    Comparison,
    input::LoadedRun,
    interval::{CONFIDENCE, RESAMPLES},
    table::{MIN_REPEATS, Row, show},
    text::{LATENCY_COLUMNS, latency_tables},
};
use crate::model::{Outcome, ServerInfo, StartState};
use crate::report::{
    ExportError,
    atomic::write_atomic,
    fmt::esc,
    histograms, hlog,
    html::{headline, page},
    multiples::{self, ComparedRun},
    palette::RunStyle,
};

/// The comparison as CSV, one line per figure and name, in the `--out` folder.
pub const CSV: &str = "compare.csv";
/// The runs and every row with its spread, as JSON, in the `--out` folder.
pub const JSON: &str = "compare.json";
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
pub fn write(dir: &Path, cmp: &Comparison) -> Result<Vec<PathBuf>, ExportError> {
    std::fs::create_dir_all(dir).map_err(ExportError::io(dir))?;
    let files = [(CSV, csv(cmp)?), (JSON, json(cmp)?), (HTML, html(cmp)?)];
    let mut written = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        write_atomic(&path, text.as_bytes())?;
        written.push(path);
    }
    Ok(written)
}

/// One line per figure and name: the name's values, then its difference from the
/// baseline (empty on the baseline's own line, whose verdict says `baseline`).
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
            w.write_record(&line)?;
        }
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
    let mut body = String::from("<header><h1>c1m compare</h1><div class=\"runs\">");
    for ((r, l), style) in runs.iter().zip(&labels).zip(&styles) {
        let _ = write!(
            body,
            "<div>{}<b>{}</b> <code>{}</code> <span class=\"sub\">{} · {}</span></div>",
            style.swatch(),
            esc(l),
            esc(&r.spec.dir.display().to_string()),
            esc(&headline(&r.run)),
            esc(r.run.outcome.name())
        );
        if let Some(start) = &r.run.start {
            let _ = write!(
                body,
                "<div class=\"sub\" style=\"margin-left:2em\">{}{}</div>",
                if start.dirty() { "⚠ " } else { "" },
                esc(&start.describe())
            );
        }
    }
    if let Some(line) = super::dirty_starts(runs) {
        let _ = write!(body, "<div class=\"warn\">{}</div>", esc(&line));
    }
    body.push_str("</div>");
    let hists = runs
        .iter()
        .map(|r| histograms(&r.run))
        .collect::<Result<Vec<_>, _>>()?;
    let logs: Vec<(Vec<hlog::RunLog>, Vec<String>)> = runs
        .iter()
        .map(|r| hlog::read_run_logs(&r.spec.dir, &multiples::OVER_TIME_QUANTILES))
        .collect();
    let problems: Vec<&String> = logs.iter().flat_map(|(_, p)| p).collect();
    if !problems.is_empty() {
        body.push_str("<div class=\"warn\"><b>Left out</b><ul>");
        for p in problems {
            let _ = write!(body, "<li>{}</li>", esc(p));
        }
        body.push_str("</ul></div>");
    }
    body.push_str("</header><h2>Setup differences (first run of each name)</h2>");
    if config.is_empty() {
        body.push_str("<p class=\"mut\">None.</p>");
    } else {
        body.push_str("<table class=\"wide\"><tr><th class=\"t\">key</th>");
        for n in names {
            let _ = write!(body, "<th class=\"t\">{}</th>", esc(n));
        }
        body.push_str("</tr>");
        for (k, values) in config {
            let _ = write!(body, "<tr><td class=\"t\">{}</td>", esc(k));
            for v in values {
                let _ = write!(body, "<td class=\"wrap\">{}</td>", esc(v));
            }
            body.push_str("</tr>");
        }
        body.push_str("</table>");
    }
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
    body.push_str("<div id=\"charts\">");
    body.push_str(&multiples::sections(&compared));
    let base = &names[cmp.baseline];
    let _ = write!(
        body,
        "</div><h2>Key figures (mean ± sd over repeats; vs {}: the difference of the medians, its 95% interval and the verdict, as <code>c1m compare</code> prints them)</h2><table class=\"wide\"><tr><th class=\"t\">figure</th>",
        esc(base)
    );
    for n in names {
        let _ = write!(body, "<th>{}</th>", esc(n));
    }
    for n in names.iter().filter(|n| *n != base) {
        let _ = write!(body, "<th>{} vs {}</th>", esc(n), esc(base));
    }
    body.push_str("</tr>");
    let mut group = "";
    for r in rows.iter().filter(|r| !r.is_latency()) {
        if r.group != group {
            group = &r.group;
            let _ = write!(
                body,
                "<tr><th class=\"t\" colspan=\"{}\">{}</th></tr>",
                2 * names.len(),
                esc(group)
            );
        }
        let _ = write!(body, "<tr><td class=\"t\">{}</td>", esc(&r.figure));
        for c in &r.cells {
            let _ = write!(body, "<td>{}</td>", esc(&show(r.unit, c)));
        }
        for d in &r.differences {
            let cell = [d.show_delta(r.unit), d.show_verdict(r.unit)].join(" ");
            let _ = write!(body, "<td>{}</td>", esc(cell.trim()));
        }
        body.push_str("</tr>");
    }
    body.push_str("</table><h2>Latency (ms), the seeds' table (mean±sd over repeats)</h2><table class=\"wide\"><tr><th class=\"t\">histogram</th>");
    for (h, _) in LATENCY_COLUMNS {
        let _ = write!(body, "<th>{}</th>", esc(h));
    }
    body.push_str("</tr>");
    for (title, lines) in latency_tables(rows, names) {
        for (n, cells) in lines {
            let _ = write!(body, "<tr><td class=\"t\">{}: {}</td>", esc(n), esc(title));
            for c in cells {
                let _ = write!(body, "<td>{}</td>", esc(&c));
            }
            body.push_str("</tr>");
        }
    }
    let _ = write!(
        body,
        "</table><footer>Generated by c1m {} from {} runs' summary.json; compare.csv and compare.json beside this page hold every value.</footer>",
        env!("CARGO_PKG_VERSION"),
        runs.len()
    );
    Ok(page("c1m compare", &body))
}
