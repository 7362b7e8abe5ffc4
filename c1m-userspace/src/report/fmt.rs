//! Numbers, sizes, durations and dates of the report and `c1m compare`, from
//! [`crate::fmt`] under the names the report uses. (HTML escaping is maud's: every
//! string a page splices in is escaped by construction.)

pub(crate) use crate::fmt::{bytes_precise as bytes, count, int, ms, num, secs, utc};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(count(1_000_000), "1,000,000");
        assert_eq!(bytes(3712.0), "3.62 KiB");
    }
}
