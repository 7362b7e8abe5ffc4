//! Number, time and HTML formatting shared by the report and `c1m compare`: every value
//! printed with its unit, IEC for bytes, thousands separators for counts.

/// Escapes text for HTML element content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `1234567` → `1,234,567`.
pub(crate) fn int(v: i128) -> String {
    let digits = v.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0 { format!("-{out}") } else { out }
}

pub(crate) fn count(v: u64) -> String {
    int(i128::from(v))
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

/// IEC bytes with 3 significant digits: `3.62 KiB`, `1.21 GiB`, `512 B`.
pub(crate) fn bytes(v: f64) -> String {
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
    let secs = unix_ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
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

/// Change from `a` to `b` in percent of `a`, when it means something.
pub(crate) fn pct_change(a: f64, b: f64) -> Option<f64> {
    (a != 0.0 && a.is_finite() && b.is_finite()).then(|| (b - a) / a.abs() * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(count(1_000_000), "1,000,000");
        assert_eq!(int(-1234), "-1,234");
        assert_eq!(num(1234.5678, 2), "1,234.57");
        assert_eq!(num(-0.0001, 2), "0.00");
        assert_eq!(bytes(3712.0), "3.62 KiB");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(1.3e9), "1.21 GiB");
        assert_eq!(secs(0.31), "310 ms");
        assert_eq!(secs(72.42), "72.42 s");
        assert_eq!(ms(1234.0), "1.234");
        assert_eq!(utc(1_767_225_600_000), "2026-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400_000 + 3_661_000), "2000-02-29 01:01:01 UTC");
        assert_eq!(esc("<a href=\"x\">&"), "&lt;a href=&quot;x&quot;&gt;&amp;");
        assert_eq!(pct_change(200.0, 250.0), Some(25.0));
        assert_eq!(pct_change(0.0, 1.0), None);
    }
}
