//! Every number, size, duration and date c1m prints for people, in one place: the live
//! views, the end-of-run summary, the report and `c1m compare` all call these.
//! Thousands separators for counts, binary units for bytes, "n/a" for a figure whose
//! source is missing (never a zero that was not measured). Two byte styles on purpose:
//! [`bytes`] (one decimal, steady width for the live view) and [`bytes_precise`] (three
//! significant digits, for reports and comparisons).

/// What a missing figure shows as.
pub(crate) const NA: &str = "n/a";

/// `-1234567` → `-1,234,567`: the one thousands-separator routine.
pub(crate) fn int(v: i128) -> String {
    let digits = v.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if v < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `1234567` → `1,234,567`.
pub fn count(n: u64) -> String {
    int(i128::from(n))
}

/// [`count`] for signed values (kernel gauges are signed: transitions can race a walk).
/// A setup pace for people: "25,000 conn/s", or "unpaced" for 0 (as fast as the
/// in-flight bound allows).
pub(crate) fn pace(rate_per_s: u64) -> String {
    if rate_per_s == 0 {
        "unpaced".to_owned()
    } else {
        format!("{} conn/s", count(rate_per_s))
    }
}

pub(crate) fn signed(n: i64) -> String {
    int(i128::from(n))
}

/// A rate or other non-negative float rounded to a whole number, with separators.
pub(crate) fn whole(v: f64) -> String {
    if !v.is_finite() {
        return NA.to_owned();
    }
    let r = v.round();
    if r < 0.0 {
        format!("-{}", count((-r) as u64))
    } else {
        count(r as u64)
    }
}

/// Bytes in binary units: `512 B`, `3.2 KiB`, `1.5 GiB`.
pub(crate) fn bytes(b: f64) -> String {
    if !b.is_finite() {
        return NA.to_owned();
    }
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if b.abs() < 1024.0 {
        return format!("{b:.0} B");
    }
    let mut v = b / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v.abs() < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

/// Seconds as `42.3 s`, `12 min 03 s` or `1 h 02 min`.
pub(crate) fn duration(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return NA.to_owned();
    }
    if s < 60.0 {
        return format!("{s:.1} s");
    }
    let total = s as u64;
    if total < 3600 {
        format!("{} min {:02} s", total / 60, total % 60)
    } else {
        format!("{} h {:02} min", total / 3600, (total % 3600) / 60)
    }
}

/// `text` cut to `max` characters, the last one "…" when something was cut.
pub(crate) fn ellipsis(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
/// Formats a figure, or [`NA`] when it is missing.
pub(crate) fn or_na<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map_or_else(|| NA.to_owned(), f)
}

/// A float with thousands separators and `decimals` decimals.
pub(crate) fn num(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return "–".to_owned();
    }
    let s = format!("{:.decimals$}", v.abs());
    let (whole, frac) = s.split_once('.').unwrap_or((&s, ""));
    let whole = int(whole.parse::<i128>().unwrap_or(0));
    let sign = if v < 0.0 && s.chars().any(|c| c.is_ascii_digit() && c != '0') {
        "-"
    } else {
        ""
    };
    if frac.is_empty() {
        format!("{sign}{whole}")
    } else {
        format!("{sign}{whole}.{frac}")
    }
}

/// A rate a second as people write it, to two decimals at most: "10/s", "0.5/s",
/// "1,000/s".
pub(crate) fn per_s(r: f64) -> String {
    let s = num(r, 2);
    let s = match s.contains('.') {
        true => s.trim_end_matches('0').trim_end_matches('.'),
        false => &s,
    };
    format!("{s}/s")
}

/// Bytes in binary units with 3 significant digits: `3.62 KiB`, `1.21 GiB`, `512 B`.
pub(crate) fn bytes_precise(v: f64) -> String {
    if !v.is_finite() {
        return "–".to_owned();
    }
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = v.abs();
    let mut u = 0;
    while x >= 1024.0 && u < UNITS.len() - 1 {
        x /= 1024.0;
        u += 1;
    }
    let sign = if v < 0.0 { "-" } else { "" };
    if u == 0 {
        format!("{sign}{} B", num(x, 0))
    } else {
        let d = if x >= 100.0 {
            0
        } else if x >= 10.0 {
            1
        } else {
            2
        };
        format!("{sign}{x:.d$} {}", UNITS[u])
    }
}

/// Seconds, readable: `310 ms`, `1.82 s`, `72.4 s`, `12 min 5 s`.
pub(crate) fn secs(v: f64) -> String {
    if !v.is_finite() {
        "–".to_owned()
    } else if v.abs() < 1.0 {
        format!("{} ms", num(v * 1000.0, if v.abs() < 0.01 { 2 } else { 0 }))
    } else if v.abs() < 600.0 {
        format!("{v:.2} s")
    } else {
        format!("{} min {:.0} s", (v / 60.0).floor(), v % 60.0)
    }
}

/// µs as ms with 3 decimals (the seeds' latency tables).
pub(crate) fn ms(us: f64) -> String {
    num(us / 1000.0, 3)
}

/// Unix ms as `2026-01-01 00:00:00 UTC`.
pub(crate) fn utc(unix_ms: u64) -> String {
    let ((y, m, d), (h, min, sec)) = civil(unix_ms);
    format!("{y:04}-{m:02}-{d:02} {h:02}:{min:02}:{sec:02} UTC")
}

/// Unix ms as `20260101-000000` (UTC), for names of run directories.
pub fn stamp(unix_ms: u64) -> String {
    let ((y, m, d), (h, min, sec)) = civil(unix_ms);
    format!("{y:04}{m:02}{d:02}-{h:02}{min:02}{sec:02}")
}

/// Unix ms as a UTC date and time of day.
fn civil(unix_ms: u64) -> ((i64, u32, u32), (u64, u64, u64)) {
    let secs = unix_ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    (
        civil_from_days(days as i64),
        (rem / 3600, rem % 3600 / 60, rem % 60),
    )
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_get_separators() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1_000_000), "1,000,000");
        assert_eq!(count(u64::MAX), "18,446,744,073,709,551,615");
        assert_eq!(signed(-1234), "-1,234");
        assert_eq!(signed(i64::MIN), "-9,223,372,036,854,775,808");
        assert_eq!(whole(29_411.7), "29,412");
        assert_eq!(whole(f64::NAN), NA);
    }

    #[test]
    fn bytes_use_binary_units() {
        assert_eq!(bytes(0.0), "0 B");
        assert_eq!(bytes(1023.0), "1023 B");
        assert_eq!(bytes(3328.0), "3.2 KiB");
        assert_eq!(bytes(1.5 * 1024.0 * 1024.0 * 1024.0), "1.5 GiB");
        assert_eq!(bytes(f64::INFINITY), NA);
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(12.34), "12.3 s");
        assert_eq!(duration(723.0), "12 min 03 s");
        assert_eq!(duration(3720.0), "1 h 02 min");
        assert_eq!(duration(-1.0), NA);
        assert_eq!(or_na(None::<u64>, count), NA);
        assert_eq!(or_na(Some(5u64), count), "5");
    }

    #[test]
    fn report_formats() {
        assert_eq!(int(-1234), "-1,234");
        assert_eq!(int(i128::from(u64::MAX) + 1), "18,446,744,073,709,551,616");
        assert_eq!(num(1234.5678, 2), "1,234.57");
        assert_eq!(num(-0.0001, 2), "0.00");
        assert_eq!(bytes_precise(3712.0), "3.62 KiB");
        assert_eq!(bytes_precise(512.0), "512 B");
        assert_eq!(bytes_precise(1.3e9), "1.21 GiB");
        assert_eq!(secs(0.31), "310 ms");
        assert_eq!(secs(72.42), "72.42 s");
        assert_eq!(ms(1234.0), "1.234");
    }

    #[test]
    fn dates_share_one_calendar() {
        assert_eq!(utc(1_767_225_600_000), "2026-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400_000 + 3_661_000), "2000-02-29 01:01:01 UTC");
        assert_eq!(stamp(1_767_225_600_000), "20260101-000000");
        assert_eq!(stamp(951_782_400_000 + 3_661_000), "20000229-010101");
        assert_eq!(stamp(0), "19700101-000000");
        assert_eq!(stamp(1_795_998_541_000), "20261130-002901");
    }
}
