//! The report's charts keep their scale when one spike would flatten them: a run whose
//! memory per connection starts at 100 KiB (RSS over a handful of connections) and whose
//! setup rate has one 400k/s interval still shows its 31 B / 72 B / 4 KiB lines and its
//! 25k/s ramp. The samples are `tests/data/spiky_samples.csv`.
#![allow(clippy::unwrap_used)] // panics are the assertions

use c1m::model::Sample;
use c1m::report::{REPORT, sample_run, write_run};

/// The CSV's rows as samples: each header names a `Sample` field; empty cells are unset.
fn spiky_samples() -> Vec<Sample> {
    let text = include_str!("data/spiky_samples.csv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|line| {
            let mut row = serde_json::Map::new();
            for (k, v) in header.iter().zip(line.split(',')) {
                if v.is_empty() {
                    continue;
                }
                let value = match v.parse::<f64>() {
                    Ok(n) => serde_json::json!(n),
                    Err(_) => serde_json::json!(v),
                };
                row.insert((*k).to_owned(), value);
            }
            serde_json::from_value(serde_json::Value::Object(row)).unwrap()
        })
        .collect()
}

/// `data-y-min` and `data-y-max` of the chart `id` in the report.
fn y_range(html: &str, id: &str) -> (f64, f64) {
    let at = html.find(&format!("id=\"{id}\"")).unwrap();
    let attr = |name: &str| -> f64 {
        html[at..]
            .split(&format!("{name}=\""))
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap()
            .parse()
            .unwrap()
    };
    (attr("data-y-min"), attr("data-y-max"))
}

fn chart<'a>(html: &'a str, id: &str) -> &'a str {
    let at = html.find(&format!("id=\"{id}\"")).unwrap();
    let end = html[at..].find("</figure>").unwrap();
    &html[at..at + end]
}

#[test]
fn one_spike_does_not_flatten_a_chart() {
    let mut run = sample_run();
    run.samples = spiky_samples();
    assert_eq!(run.samples.len(), 81);
    let scratch = tempfile::Builder::new()
        .prefix("c1m-test-report-scales-")
        .tempdir()
        .unwrap();
    let dir = scratch.path().join("run");
    write_run(&dir, &run).unwrap();
    let html = std::fs::read_to_string(dir.join(REPORT)).unwrap();

    // Memory per connection: log axis from 16 B (under the 31 B line) to 16 KiB (over
    // the 4 KiB one), not to the 100 KiB spike, which is marked as clipped.
    let (lo, hi) = y_range(&html, "chart-mem-per-conn");
    assert_eq!((lo, hi), (16.0, 16_384.0));
    let mem = chart(&html, "chart-mem-per-conn");
    assert!(mem.contains("▲ 4 above the axis (up to 100 KiB)"), "{mem}");
    assert!(mem.contains(">64 B<") && mem.contains(">4 KiB<"), "{mem}");

    // Setup rate: linear, topped near twice the 25k/s the ramp held, not at 400k/s.
    let (lo, hi) = y_range(&html, "chart-setup-rate");
    assert_eq!(lo, 0.0);
    assert!((25_000.0..=60_000.0).contains(&hi), "{hi}");
    assert!(chart(&html, "chart-setup-rate").contains("▲ 2 above the axis"));
}
