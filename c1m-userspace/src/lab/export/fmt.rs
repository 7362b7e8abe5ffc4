//! HTML escaping and percent changes for the report and `c1m compare`; numbers, sizes,
//! durations and dates come from [`crate::fmt`] (re-exported here under the names the
//! report uses).

pub(crate) use crate::fmt::{bytes_precise as bytes, count, int, ms, num, secs, utc};

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
        assert_eq!(bytes(3712.0), "3.62 KiB");
        assert_eq!(esc("<a href=\"x\">&"), "&lt;a href=&quot;x&quot;&gt;&amp;");
        assert_eq!(pct_change(200.0, 250.0), Some(25.0));
        assert_eq!(pct_change(0.0, 1.0), None);
    }
}
