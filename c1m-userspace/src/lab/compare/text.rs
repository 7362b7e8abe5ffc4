//! The comparison for the terminal: the runs, what differs in their setup, the key
//! figures (one column per name, `mean ± sd` over repeats, and whether the difference
//! is beyond the spread), then the seeds' latency table, one line per name.

use std::fmt::Write as _;

use super::{
    Comparison,
    input::LoadedRun,
    table::{LATENCY_PREFIX, Row, Spread, show},
};
use crate::lab::export::{fmt::ms, html::headline};

/// The latency columns of the seeds' table, in their order: (header, figure label).
pub const LATENCY_COLUMNS: [(&str, &str); 11] = [
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

/// A latency cell in ms without the unit (the header says it); `±sd` over repeats.
pub fn latency_cell(row: &Row, s: &Spread) -> String {
    if row.unit_name != "us" {
        return show(row.unit, s);
    }
    match (s.mean, s.sd) {
        (None, _) => "–".to_owned(),
        (Some(m), None) => ms(m),
        (Some(m), Some(sd)) => format!("{}±{}", ms(m), ms(sd)),
    }
}

/// Pads every column of `table` to its widest cell; the first column left-aligned.
fn aligned(table: &[Vec<String>], indent: &str) -> String {
    let cols = table.iter().map(Vec::len).max().unwrap_or(0);
    let mut w = vec![0usize; cols];
    for r in table {
        for (w, c) in w.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in table {
        let mut line = String::from(indent);
        for (i, c) in r.iter().enumerate() {
            let pad = w[i] - c.chars().count();
            if i == 0 {
                line.push_str(c);
                line.push_str(&" ".repeat(pad));
            } else {
                line.push_str("  ");
                line.push_str(&" ".repeat(pad));
                line.push_str(c);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

pub fn render(cmp: &Comparison) -> String {
    let (runs, names, config, rows) = (&cmp.runs, &cmp.names, &cmp.config, &cmp.rows);
    let mut out = String::from("Runs\n");
    for n in names {
        let mine: Vec<&LoadedRun> = runs.iter().filter(|r| r.spec.name == *n).collect();
        let _ = writeln!(
            out,
            "  {n}: {} run{}",
            mine.len(),
            if mine.len() == 1 { "" } else { "s" }
        );
        for r in mine {
            let _ = writeln!(
                out,
                "    {}  {} ({})",
                r.spec.dir.display(),
                headline(&r.run),
                r.run.outcome
            );
            if let Some(start) = r.run.start_line() {
                let _ = writeln!(out, "      {start}");
            }
        }
    }
    if let Some(line) = super::dirty_starts(runs) {
        let _ = writeln!(out, "  {line}");
    }
    out.push_str("\nSetup differences (first run of each name)\n");
    if config.is_empty() {
        out.push_str("  (none)\n");
    } else {
        let mut t = vec![
            std::iter::once(String::new())
                .chain(names.iter().cloned())
                .collect(),
        ];
        t.extend(config.iter().map(|(k, v)| {
            std::iter::once(k.clone())
                .chain(v.iter().cloned())
                .collect()
        }));
        out.push_str(&aligned(&t, "  "));
    }

    let multi = names.len() > 1;
    let mut t: Vec<Vec<String>> = Vec::new();
    let mut head = vec!["Key figures".to_owned()];
    head.extend(names.iter().cloned());
    if multi {
        head.push("spread".into());
    }
    t.push(head);
    let mut group = "";
    for r in rows.iter().filter(|r| !r.is_latency()) {
        if r.group != group {
            group = &r.group;
            t.push(vec![group.to_owned()]);
        }
        let mut line = vec![format!("  {}", r.figure)];
        line.extend(r.cells.iter().map(|c| show(r.unit, c)));
        if multi {
            line.push(r.spread());
        }
        t.push(line);
    }
    out.push('\n');
    out.push_str(&aligned(&t, ""));

    out.push_str("\nLatency (ms; mean±sd over repeats)\n");
    let tables = latency_tables(rows, names);
    if tables.is_empty() {
        out.push_str("  (no latency recorded)\n");
    }
    let mut t: Vec<Vec<String>> = Vec::new();
    for (title, lines) in tables {
        let mut head = vec![title.to_owned()];
        head.extend(LATENCY_COLUMNS.iter().map(|c| c.0.to_owned()));
        t.push(head);
        for (n, cells) in lines {
            t.push(std::iter::once(format!("  {n}")).chain(cells).collect());
        }
    }
    out.push_str(&aligned(&t, "  "));
    out
}

/// One histogram's part of the seeds' latency table: its title, and one line of
/// [`LATENCY_COLUMNS`] cells per name.
pub type LatencyTable<'a> = (&'a str, Vec<(&'a str, Vec<String>)>);

/// The seeds' latency table, per histogram.
pub fn latency_tables<'a>(rows: &'a [Row], names: &'a [String]) -> Vec<LatencyTable<'a>> {
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
