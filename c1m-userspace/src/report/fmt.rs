//! HTML escaping for the report and `c1m compare`; numbers, sizes,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(count(1_000_000), "1,000,000");
        assert_eq!(bytes(3712.0), "3.62 KiB");
        assert_eq!(esc("<a href=\"x\">&"), "&lt;a href=&quot;x&quot;&gt;&amp;");
    }
}
