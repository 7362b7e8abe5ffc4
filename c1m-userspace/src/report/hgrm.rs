//! `.hgrm`: the percentile distribution exactly as HdrHistogram's Java
//! `outputPercentileDistribution` prints it (5 ticks per half distance), which is what
//! the HdrHistogram plotter (`plotFiles.html`) and wrk2 users read:
//!
//! ```text
//!        Value     Percentile TotalCount 1/(1-Percentile)
//!
//!      187.000 0.000000000000          1           1.00
//!      …
//!    90111.000 1.000000000000    1000000
//! #[Mean    =     2391.118, StdDeviation   =     4529.554]
//! #[Max     =    90111.000, Total count    =      1000000]
//! #[Buckets =           22, SubBuckets     =         2048]
//! ```

use std::fmt::Write as _;

use hdrhistogram::Histogram;

/// Ticks per half distance to 100%, the Java default.
pub(crate) const TICKS_PER_HALF_DISTANCE: u32 = 5;

/// The distribution of `h`, values divided by `divisor` (1.0 keeps the recorded unit).
pub(crate) fn percentile_distribution(h: &Histogram<u64>, divisor: f64) -> String {
    let digits = usize::from(h.sigfig());
    let mut out = format!(
        "{:>12} {:>14} {:>10} {:>14}\n\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let mut total = 0u64;
    if !h.is_empty() {
        for v in h.iter_quantiles(TICKS_PER_HALF_DISTANCE) {
            total += v.count_since_last_iteration();
            let value = v.value_iterated_to() as f64 / divisor;
            let q = v.quantile_iterated_to();
            if q < 1.0 {
                let _ = writeln!(
                    out,
                    "{value:12.digits$} {q:2.12} {total:10} {:14.2}",
                    1.0 / (1.0 - q)
                );
            } else {
                let _ = writeln!(out, "{value:12.digits$} {q:2.12} {total:10}");
            }
        }
    }
    let (mean, sd, max) = if h.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (
            h.mean() / divisor,
            h.stdev() / divisor,
            h.max() as f64 / divisor,
        )
    };
    let _ = writeln!(
        out,
        "#[Mean    = {mean:12.digits$}, StdDeviation   = {sd:12.digits$}]"
    );
    let _ = writeln!(
        out,
        "#[Max     = {max:12.digits$}, Total count    = {:12}]",
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:12}, SubBuckets     = {:12}]",
        h.buckets(),
        sub_bucket_count(h.sigfig())
    );
    out
}

/// Java's `subBucketCount`: the power of two that holds 2 × 10^sigfig values at unit
/// resolution (2048 for 3 digits).
fn sub_bucket_count(sigfig: u8) -> u64 {
    let largest = 2 * 10u64.pow(u32::from(sigfig));
    let magnitude = (largest as f64).log2().ceil() as u32;
    1 << magnitude.max(1)
}

/// One row of a parsed `.hgrm`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    /// The value at this quantile, in the file's unit (µs, or ms for `_ms.hgrm`).
    pub value: f64,
    /// The quantile, 0 to 1.
    pub quantile: f64,
    /// Values at or below `value`, cumulative.
    pub total_count: u64,
    /// `None` on the last row (quantile 1).
    pub inverse: Option<f64>,
}

/// A parsed `.hgrm`: rows and the footer figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    /// The percentile rows, in file order.
    pub rows: Vec<Row>,
    /// The footer's `Mean`, in the file's unit.
    pub mean: f64,
    /// The footer's `StdDeviation`, in the file's unit.
    pub stddev: f64,
    /// The footer's `Max`, in the file's unit.
    pub max: f64,
    /// The footer's `Total count`: values recorded.
    pub total_count: u64,
    /// The footer's `Buckets` (HdrHistogram's bucket count).
    pub buckets: u64,
    /// The footer's `SubBuckets` (HdrHistogram's sub-bucket count).
    pub sub_buckets: u64,
}

/// Reads a `.hgrm` back (for tests and `c1m compare` of foreign files); `Err` names the
/// first line it could not read.
pub fn parse(text: &str) -> Result<Parsed, String> {
    let mut p = Parsed::default();
    for (i, line) in text.lines().enumerate() {
        let bad = || format!("line {}: cannot read `{line}`", i + 1);
        let t = line.trim();
        if t.is_empty() || t.starts_with("Value") {
            continue;
        }
        if let Some(footer) = t.strip_prefix("#[").and_then(|f| f.strip_suffix(']')) {
            for part in footer.split(',') {
                let (k, v) = part.split_once('=').ok_or_else(bad)?;
                let v = v.trim();
                let num = || v.parse::<f64>().map_err(|_| bad());
                let int = || v.parse::<u64>().map_err(|_| bad());
                match k.trim() {
                    "Mean" => p.mean = num()?,
                    "StdDeviation" => p.stddev = num()?,
                    "Max" => p.max = num()?,
                    "Total count" => p.total_count = int()?,
                    "Buckets" => p.buckets = int()?,
                    "SubBuckets" => p.sub_buckets = int()?,
                    _ => return Err(bad()),
                }
            }
            continue;
        }
        let cols: Vec<&str> = t.split_whitespace().collect();
        if !(3..=4).contains(&cols.len()) {
            return Err(bad());
        }
        p.rows.push(Row {
            value: cols[0].parse().map_err(|_| bad())?,
            quantile: cols[1].parse().map_err(|_| bad())?,
            total_count: cols[2].parse().map_err(|_| bad())?,
            inverse: match cols.get(3) {
                Some(c) => Some(c.parse().map_err(|_| bad())?),
                None => None,
            },
        });
    }
    Ok(p)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;
    use crate::workload::stats::histograms::new_hist;

    /// Checks a parsed distribution against its source histogram, exactly: every row's
    /// value is a recorded value and is the value at the row's percentile, its total count
    /// is the number of values at or below it, the rows are the Java iteration's, and the
    /// footer matches.
    pub(crate) fn assert_matches(p: &Parsed, h: &Histogram<u64>, divisor: f64) {
        let expected: Vec<(u64, f64)> = {
            let mut total = 0;
            h.iter_quantiles(TICKS_PER_HALF_DISTANCE)
                .map(|v| {
                    total += v.count_since_last_iteration();
                    (v.value_iterated_to(), v.quantile_iterated_to())
                })
                .collect()
        };
        assert_eq!(p.rows.len(), expected.len());
        for (row, (value, q)) in p.rows.iter().zip(&expected) {
            let v = (row.value * divisor).round() as u64;
            assert_eq!(v, *value);
            assert!((row.quantile - q).abs() < 1e-12, "{row:?} vs {q}");
            assert_eq!(v, h.highest_equivalent(v), "{row:?}: a bucket's top");
            assert!(h.count_at(v) > 0, "{row:?}: a recorded value");
            let at_or_below: u64 = h
                .iter_recorded()
                .take_while(|r| r.value_iterated_to() <= v)
                .map(|r| r.count_at_value())
                .sum();
            assert_eq!(row.total_count, at_or_below, "{row:?}");
            // The value at the row's percentile, as value_at_quantile defines it: the
            // first value whose cumulative count reaches the quantile.
            let n = h.len() as f64;
            assert!(row.total_count as f64 >= q * n - 1e-6, "{row:?}");
            let below = row.total_count - h.count_at(v);
            assert!((below as f64) < (q * n).max(1.0) + 1e-6, "{row:?}");
            if *q < 1.0 {
                assert!((row.inverse.unwrap() - 1.0 / (1.0 - q)).abs() < 0.006);
            } else {
                assert_eq!(row.inverse, None);
            }
        }
        let last = p.rows.last().unwrap();
        assert_eq!((last.quantile, last.total_count), (1.0, h.len()));
        assert_eq!((last.value * divisor).round() as u64, h.max());
        assert_eq!(p.total_count, h.len());
        assert!((p.max * divisor - h.max() as f64).abs() < 1e-9 * divisor.max(1.0));
        // Printed with 3 decimals.
        assert!((p.mean - h.mean() / divisor).abs() <= 0.0005 + 1e-9);
        assert!((p.stddev - h.stdev() / divisor).abs() <= 0.0005 + 1e-9);
        assert_eq!(p.buckets, u64::from(h.buckets()));
        // The seeds' percentiles read off the file equal the histogram's.
        for q in [0.5, 0.75, 0.95, 0.98, 0.99, 0.999] {
            let need = (q * h.len() as f64).ceil() as u64;
            if let Some(row) = p.rows.iter().find(|r| r.total_count >= need)
                && row.total_count - h.count_at((row.value * divisor).round() as u64) < need
            {
                assert_eq!((row.value * divisor).round() as u64, h.value_at_quantile(q));
            }
        }
    }

    #[test]
    fn hgrm_header_rows_and_footer_in_java_format() {
        let mut h = new_hist().unwrap();
        for v in 1..=10_000u64 {
            h.record(v * 10).unwrap();
        }
        let text = percentile_distribution(&h, 1.0);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "       Value     Percentile TotalCount 1/(1-Percentile)"
        );
        assert_eq!(lines[1], "");
        assert_eq!(
            lines[2],
            "      10.000 0.000000000000          1           1.00"
        );
        assert!(lines[lines.len() - 3].starts_with("#[Mean    = "));
        assert!(lines[lines.len() - 2].starts_with("#[Max     = "));
        assert_eq!(
            lines[lines.len() - 1],
            "#[Buckets =           22, SubBuckets     =         2048]"
        );
        // The last row has three columns (the plotter skips it).
        assert_eq!(lines[lines.len() - 4].split_whitespace().count(), 3);
        let p = parse(&text).unwrap();
        assert_matches(&p, &h, 1.0);
        // Scaled to ms: same rows, values / 1000.
        let ms = parse(&percentile_distribution(&h, 1000.0)).unwrap();
        assert_matches(&ms, &h, 1000.0);
    }

    #[test]
    fn empty_histogram_is_header_and_footer() {
        let h = new_hist().unwrap();
        let p = parse(&percentile_distribution(&h, 1.0)).unwrap();
        assert!(p.rows.is_empty());
        assert_eq!(p.total_count, 0);
    }

    #[test]
    fn parse_names_the_bad_line() {
        let err = parse("       Value\n\n  12.0 x 3 1.0\n").unwrap_err();
        assert!(err.starts_with("line 3:"), "{err}");
    }
}
