//! `c1m compare RUN_A RUN_B`: two runs side by side — a plain text table for the
//! terminal and, with `--html`, a page with both runs' charts overlaid.

use std::fmt::Write as _;

use super::{
    ExportError,
    figures::{Group, Unit, key_figures},
    fmt::{bytes, count, esc, int, ms, num, pct_change, secs},
    histograms,
    html::{RUN_COLORS, flatten, headline, latency_charts, page, time_series_charts},
};
use crate::{lab::model::RunRecord, workload::stats::Percentiles};

/// One row of the key-figure table.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub group: String,
    pub label: String,
    pub unit: Unit,
    pub a: Option<f64>,
    pub b: Option<f64>,
}

impl Row {
    fn delta(&self) -> Option<f64> {
        Some(self.b? - self.a?)
    }

    fn pct(&self) -> Option<f64> {
        pct_change(self.a?, self.b?)
    }
}

/// Signed difference in the row's unit.
fn show_delta(unit: Unit, d: f64) -> String {
    if d == 0.0 {
        return "0".to_owned();
    }
    let sign = if d > 0.0 { "+" } else { "" };
    match unit {
        Unit::Count => format!("{sign}{}", int(d.round() as i128)),
        Unit::PerSecond => format!("{sign}{}/s", num(d, if d.abs() < 100.0 { 1 } else { 0 })),
        Unit::Bytes => format!("{sign}{}", bytes(d)),
        Unit::Micros => format!("{sign}{} ms", ms(d)),
        Unit::Seconds => format!("{sign}{}", secs(d)),
    }
}

/// Both runs' key figures, matched by group and label (A's order, then B's extras).
pub(crate) fn rows(a: &RunRecord, b: &RunRecord) -> Result<Vec<Row>, ExportError> {
    let (ga, gb) = (key_figures(a, true)?, key_figures(b, true)?);
    let find = |gs: &[Group], g: &str, l: &str| {
        gs.iter()
            .find(|x| x.title == g)
            .and_then(|x| x.figures.iter().find(|f| f.label == l))
            .and_then(|f| f.value)
    };
    // Titles that carry a run-specific count ("Memory per connection (1,000 open)")
    // match on the part before the parenthesis.
    let key = |t: &str| t.split(" (").next().unwrap_or(t).to_owned();
    let mut out: Vec<Row> = Vec::new();
    for (mine, other, mine_is_a) in [(&ga, &gb, true), (&gb, &ga, false)] {
        for g in mine.iter() {
            let og = other.iter().find(|o| key(&o.title) == key(&g.title));
            for f in &g.figures {
                let group = key(&g.title);
                if out.iter().any(|r| r.group == group && r.label == f.label) {
                    continue;
                }
                let theirs = og.and_then(|o| find(other, &o.title, &f.label));
                let (a, b) = if mine_is_a {
                    (f.value, theirs)
                } else {
                    (theirs, f.value)
                };
                out.push(Row {
                    group,
                    label: f.label.clone(),
                    unit: f.unit,
                    a,
                    b,
                });
            }
        }
    }
    Ok(out)
}

/// Config and machine facts that differ: (key, A, B).
pub(crate) fn config_diff(a: &RunRecord, b: &RunRecord) -> Vec<(String, String, String)> {
    let facts = |r: &RunRecord| {
        let mut rows = vec![
            ("c1m_version".to_owned(), r.c1m_version.clone()),
            ("outcome".to_owned(), r.outcome.to_string()),
        ];
        for (prefix, v) in [
            ("config", serde_json::to_value(&r.config)),
            ("machine", serde_json::to_value(&r.machine)),
        ] {
            if let Ok(v) = v {
                flatten(prefix, &v, &mut rows);
            }
        }
        rows.retain(|(k, _)| k != "machine.mem_available_bytes");
        rows
    };
    let (fa, fb) = (facts(a), facts(b));
    let mut keys: Vec<&String> = fa.iter().chain(&fb).map(|(k, _)| k).collect();
    keys.dedup();
    let mut seen: Vec<&String> = Vec::new();
    let mut out = Vec::new();
    for k in keys {
        if seen.contains(&k) {
            continue;
        }
        seen.push(k);
        let get = |f: &[(String, String)]| {
            f.iter()
                .find(|(x, _)| x == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| "–".into())
        };
        let (va, vb) = (get(&fa), get(&fb));
        if va != vb {
            out.push((k.clone(), va, vb));
        }
    }
    out
}

fn cells(r: &Row) -> [String; 4] {
    let show = |v: Option<f64>| v.map(|v| r.unit.show(v)).unwrap_or_else(|| "–".into());
    [
        show(r.a),
        show(r.b),
        r.delta().map(|d| show_delta(r.unit, d)).unwrap_or_default(),
        r.pct().map(|p| format!("{p:+.1}%")).unwrap_or_default(),
    ]
}

/// The plain text comparison.
pub(crate) fn text(names: [&str; 2], a: &RunRecord, b: &RunRecord) -> Result<String, ExportError> {
    let mut out = String::new();
    for (tag, name, r) in [("A", names[0], a), ("B", names[1], b)] {
        let _ = writeln!(out, "{tag}: {name}\n   {} ({})", headline(r), r.outcome);
    }
    let diff = config_diff(a, b);
    out.push_str("\nConfig and machine differences\n");
    if diff.is_empty() {
        out.push_str("  (none)\n");
    } else {
        let kw = diff.iter().map(|d| d.0.chars().count()).max().unwrap_or(0);
        let aw = diff
            .iter()
            .map(|d| d.1.chars().count())
            .max()
            .unwrap_or(0)
            .max(1);
        for (k, va, vb) in &diff {
            let _ = writeln!(out, "  {k:<kw$}  A {va:<aw$}  B {vb}");
        }
    }
    let rows = rows(a, b)?;
    let table: Vec<[String; 4]> = rows.iter().map(cells).collect();
    let lw = rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0)
        + 2;
    let mut w = [1usize, 1, 1, 2];
    for c in &table {
        for (w, s) in w.iter_mut().zip(c) {
            *w = (*w).max(s.chars().count());
        }
    }
    let [w0, w1, w2, w3] = w;
    let _ = writeln!(
        out,
        "\n{:lw$}  {:>w0$}  {:>w1$}  {:>w2$}  {:>w3$}",
        "Key figures", "A", "B", "Δ", "Δ%"
    );
    let mut group = "";
    for (r, c) in rows.iter().zip(&table) {
        if r.group != group {
            group = &r.group;
            let _ = writeln!(out, "{group}");
        }
        let _ = writeln!(
            out,
            "  {:<w$}  {:>w0$}  {:>w1$}  {:>w2$}  {:>w3$}",
            r.label,
            c[0],
            c[1],
            c[2],
            c[3],
            w = lw - 2
        );
    }
    Ok(out)
}

/// The HTML comparison: both runs' charts overlaid, the key-figure table, differences.
pub(crate) fn html(names: [&str; 2], a: &RunRecord, b: &RunRecord) -> Result<String, ExportError> {
    let mut body = String::from("<header><h1>c1m compare</h1>");
    for (i, (tag, name, r)) in [("A", names[0], a), ("B", names[1], b)]
        .into_iter()
        .enumerate()
    {
        let _ = write!(
            body,
            "<div><span class=\"badge\" style=\"background:{};color:#fff\">{tag}</span> <code>{}</code> <span class=\"sub\">{} · {}</span></div>",
            RUN_COLORS[i],
            esc(name),
            esc(&headline(r)),
            esc(r.outcome.name())
        );
    }
    body.push_str("</header><h2>Config and machine differences</h2>");
    let diff = config_diff(a, b);
    if diff.is_empty() {
        body.push_str("<p class=\"mut\">None.</p>");
    } else {
        body.push_str("<table class=\"wide\"><tr><th class=\"t\">key</th><th class=\"t\">A</th><th class=\"t\">B</th></tr>");
        for (k, va, vb) in &diff {
            let _ = write!(
                body,
                "<tr><td class=\"t\">{}</td><td class=\"wrap\">{}</td><td class=\"wrap\">{}</td></tr>",
                esc(k),
                esc(va),
                esc(vb)
            );
        }
        body.push_str("</table>");
    }
    body.push_str("<h2>Charts (A blue, B orange; line styles tell the figures apart)</h2><div class=\"charts\">");
    for c in time_series_charts(&[("A", a), ("B", b)]) {
        body.push_str(&c.render());
    }
    let (ha, hb) = (histograms(a)?, histograms(b)?);
    for c in latency_charts(&[("A", &ha), ("B", &hb)]) {
        body.push_str(&c.render());
    }
    body.push_str("</div><h2>Key figures</h2><table class=\"wide\"><tr><th class=\"t\">figure</th><th>A</th><th>B</th><th>Δ</th><th>Δ%</th></tr>");
    let mut group = String::new();
    for r in rows(a, b)? {
        if r.group != group {
            group.clone_from(&r.group);
            let _ = write!(
                body,
                "<tr><th class=\"t\" colspan=\"5\">{}</th></tr>",
                esc(&group)
            );
        }
        let c = cells(&r);
        let _ = write!(
            body,
            "<tr><td class=\"t\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.label),
            esc(&c[0]),
            esc(&c[1]),
            esc(&c[2]),
            esc(&c[3])
        );
    }
    body.push_str("</table><h2>Latency (ms), the seeds' table</h2>");
    let mut lat: Vec<(String, Percentiles)> = Vec::new();
    for (tag, hs) in [("A", &ha), ("B", &hb)] {
        for h in hs {
            lat.push((
                format!("{tag}: {} {}", h.side, h.name),
                Percentiles::of(&h.hist),
            ));
        }
    }
    lat.sort_by(|x, y| x.0[3..].cmp(&y.0[3..]).then(x.0.cmp(&y.0)));
    body.push_str(&super::html::latency_table(&lat));
    let _ = write!(
        body,
        "<footer>Generated by c1m {} from the two runs' summary.json. A = {} connections, B = {} connections.</footer>",
        env!("CARGO_PKG_VERSION"),
        count(a.config.connections),
        count(b.config.connections)
    );
    Ok(page("c1m compare", &body))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn two() -> (RunRecord, RunRecord) {
        let a = crate::lab::export::sample_run();
        let mut b = a.clone();
        b.config.rate_per_s = 100_000;
        b.per_connection.server_user_bytes = Some(2_000.0);
        b.machine.hostname = "other".into();
        (a, b)
    }

    #[test]
    fn text_shows_differences_and_deltas() {
        let (a, b) = two();
        let t = text(["runs/a", "runs/b"], &a, &b).unwrap();
        assert!(t.contains("config.rate_per_s"), "{t}");
        assert!(t.contains("machine.hostname"), "{t}");
        let line = t
            .lines()
            .find(|l| l.contains("server, user space"))
            .unwrap();
        assert!(line.contains("-350 B") && line.contains("-14.9%"), "{line}");
        let p99 = t
            .lines()
            .find(|l| l.trim_start().starts_with("99%"))
            .unwrap();
        assert!(p99.contains("+0.0%"), "{p99}");
        for g in [
            "Connections",
            "Setup",
            "Memory per connection",
            "Latency: client connect_us",
            "CPU time per phase",
        ] {
            assert!(t.lines().any(|l| l.starts_with(g)), "{g}\n{t}");
        }
    }

    #[test]
    fn html_overlays_both_runs() {
        let (a, b) = two();
        let h = html(["runs/a", "runs/b"], &a, &b).unwrap();
        assert!(h.contains("A: app open") && h.contains("B: app open"));
        assert!(h.contains("id=\"chart-lat-client-connect_us\""));
        assert!(!h.contains("<script"));
    }
}
