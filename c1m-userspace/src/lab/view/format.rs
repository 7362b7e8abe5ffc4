//! Number formatting for people: thousands separators, binary byte units, and "n/a" for
//! a figure whose source is missing (never a zero that was not measured).

/// What a missing figure shows as.
pub const NA: &str = "n/a";

/// `1234567` → `1,234,567`.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// [`count`] for signed values (kernel gauges are signed: transitions can race a walk).
pub fn signed(n: i64) -> String {
    if n < 0 {
        format!("-{}", count(n.unsigned_abs()))
    } else {
        count(n.unsigned_abs())
    }
}

/// A rate or other non-negative float rounded to a whole number, with separators.
pub fn whole(v: f64) -> String {
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
pub fn bytes(b: f64) -> String {
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
pub fn duration(s: f64) -> String {
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

/// Formats a figure, or [`NA`] when it is missing.
pub fn or_na<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map_or_else(|| NA.to_owned(), f)
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
}
