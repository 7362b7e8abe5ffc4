//! One syntax for every duration flag: humantime's (`500ms`, `3s`, `2m`, `1h30m`), a plain
//! number meaning seconds (`--duration 3`, accepted before humantime), and a decimal with
//! one unit (`1.5s`, likewise).

use std::time::Duration;

/// What the error names, so a user sees the syntax beside the flag clap puts in front.
pub(crate) const SYNTAX: &str =
    "write a number with a unit, e.g. 500ms, 3s, 2m, 1h30m (a plain number means seconds)";

/// The longest any duration flag takes: far beyond any run, and short enough that
/// `Instant::now() + d` cannot overflow (an `--idle` of u64::MAX seconds panicked after
/// the setup phase and left its summary saying `running`).
pub(crate) const MAX: Duration = Duration::from_secs(7 * 24 * 3600);

/// Parses a duration flag's value (a clap `value_parser`), at most [`MAX`].
pub fn parse(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let d = parse_unbounded(s)?;
    if d > MAX {
        return Err(format!(
            "{s:?} is longer than 7 days (168h), the longest a duration flag takes"
        ));
    }
    Ok(d)
}

fn parse_unbounded(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration: {SYNTAX}");
    if let Ok(secs) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|_| bad());
    }
    if let Ok(d) = humantime::parse_duration(s) {
        return Ok(d);
    }
    // `1.5s`: a decimal and one of humantime's units, scaled from that unit's length.
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(bad)?;
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let one = humantime::parse_duration(&format!("1{unit}")).map_err(|_| bad())?;
    Duration::try_from_secs_f64(n * one.as_secs_f64()).map_err(|_| bad())
}

/// [`parse`] in seconds, for flags kept as `f64` seconds.
pub(crate) fn parse_secs(s: &str) -> Result<f64, String> {
    parse(s).map(|d| d.as_secs_f64())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn one_syntax() {
        let ok = [
            ("3s", 3_000),
            ("500ms", 500),
            ("2m", 120_000),
            ("1h30m", 5_400_000),
            ("3", 3_000),
            ("0.5", 500),
            ("1.5s", 1_500),
            ("0s", 0),
            ("0", 0),
        ];
        for (s, ms) in ok {
            assert_eq!(parse(s).unwrap(), Duration::from_millis(ms), "{s}");
        }
        for s in ["abc", "", "-1", "3x", "1.5.2s", "inf", "NaN", "s"] {
            let e = parse(s).unwrap_err();
            assert!(
                e.contains("is not a duration") && e.contains("1h30m"),
                "{s}: {e}"
            );
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        assert_eq!(parse("168h").unwrap(), MAX);
        for s in ["18446744073709551615s", "8d", "604801"] {
            let e = parse(s).unwrap_err();
            assert!(e.contains("longer than 7 days"), "{s}: {e}");
        }
    }
}
