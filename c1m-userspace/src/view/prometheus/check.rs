//! A strict reader of the text exposition format, for tests (here and in `tests/`):
//! checks every line's syntax, HELP and TYPE before the samples of each family, families
//! contiguous and declared once, every series (name plus label set) unique, no `NaN`,
//! and each histogram whole: an `le` on every bucket, buckets cumulative up to a `+Inf`
//! one equal to `_count`, and a `_sum`. Returns the samples as (name, sorted labels, value).
//!
//! It is written apart from the encoder (the `prometheus-client` crate) on purpose: a
//! second, stricter opinion on the same text.

use std::collections::{BTreeMap, BTreeSet};

/// One sample: metric name, its labels, its value.
pub type Series = (String, BTreeMap<String, String>, f64);

/// The value of the first series named `name` whose labels include `labels`.
pub fn value(series: &[Series], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    series
        .iter()
        .find(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.2)
}

/// Every sample of an exposition, or the first line that breaks the format.
pub fn parse(text: &str) -> Result<Vec<Series>, String> {
    let mut out = Vec::new();
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut helped: BTreeSet<String> = BTreeSet::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut finished: BTreeSet<String> = BTreeSet::new();
    let mut current: Option<String> = None;
    let mut histograms: BTreeMap<(String, String), Histo> = BTreeMap::new();
    if !text.is_empty() && !text.ends_with('\n') {
        return Err("the exposition must end with a newline".into());
    }
    for (no, line) in text.lines().enumerate() {
        let err = |m: &str| format!("line {}: {m}: {line:?}", no + 1);
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kw, name, arg) = (
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
            );
            if !valid_name(name) {
                return Err(err("bad metric name"));
            }
            if current.as_deref() != Some(name) {
                if let Some(c) = current.take() {
                    finished.insert(c);
                }
                if finished.contains(name) {
                    return Err(err("family declared twice or not contiguous"));
                }
                current = Some(name.to_owned());
            }
            match kw {
                "HELP" => {
                    if !helped.insert(name.to_owned()) || arg.is_empty() {
                        return Err(err("HELP twice or empty"));
                    }
                }
                "TYPE" => {
                    if !["counter", "gauge", "summary", "histogram", "untyped"].contains(&arg) {
                        return Err(err("unknown type"));
                    }
                    if types.insert(name.to_owned(), arg.to_owned()).is_some() {
                        return Err(err("TYPE twice"));
                    }
                }
                _ => return Err(err("unknown comment keyword")),
            }
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            return Err(err("stray comment or blank line"));
        }
        let (name, labels, value) = sample(line).map_err(|m| err(&m))?;
        let family = family_of(&name, &types).ok_or_else(|| err("sample before its TYPE"))?;
        if current.as_deref() != Some(family.as_str()) {
            return Err(err("sample outside its family's block"));
        }
        let kind = &types[&family];
        if kind == "counter" && !family.ends_with("_total") {
            return Err(err("counter without _total"));
        }
        if kind == "summary" && name == family && !labels.contains_key("quantile") {
            return Err(err("summary sample without quantile"));
        }
        if value.is_nan() {
            return Err(err("NaN: a series without data is left out, not NaN"));
        }
        if family.ends_with("_info") && value != 1.0 {
            return Err(err("an info metric's value is 1"));
        }
        if kind == "histogram" {
            let h = histo(&mut histograms, &family, &labels);
            match &name[family.len()..] {
                "_bucket" => {
                    let le = labels.get("le").ok_or_else(|| err("bucket without le"))?;
                    let le = bound(le).ok_or_else(|| err("bad le"))?;
                    h.buckets.push((le, value));
                }
                "_sum" => h.sum = Some(value),
                "_count" => h.count = Some(value),
                _ => return Err(err("histogram sample without _bucket, _sum or _count")),
            }
        } else if labels.contains_key("le") {
            return Err(err("le outside a histogram's buckets"));
        }
        let key = format!("{name}{labels:?}");
        if !seen.insert(key) {
            return Err(err("duplicate series"));
        }
        out.push((name, labels, value));
    }
    for ((family, labels), h) in histograms {
        h.whole()
            .map_err(|m| format!("histogram {family}{{{labels}}}: {m}"))?;
    }
    Ok(out)
}

/// One histogram series: its buckets in the order written, its sum and count.
#[derive(Default)]
struct Histo {
    buckets: Vec<(f64, f64)>,
    sum: Option<f64>,
    count: Option<f64>,
}

impl Histo {
    fn whole(&self) -> Result<(), String> {
        let count = self.count.ok_or("no _count")?;
        if self.sum.is_none() {
            return Err("no _sum".into());
        }
        if !self.buckets.windows(2).all(|w| w[0].0 < w[1].0) {
            return Err("buckets not in ascending le order".into());
        }
        if !self.buckets.windows(2).all(|w| w[0].1 <= w[1].1) {
            return Err("bucket counts not cumulative".into());
        }
        match self.buckets.last() {
            Some(&(le, n)) if le == f64::INFINITY && n == count => Ok(()),
            _ => Err("the last bucket must be le=\"+Inf\" and equal _count".into()),
        }
    }
}

/// The histogram series a sample belongs to: its family and labels without `le`.
fn histo<'a>(
    all: &'a mut BTreeMap<(String, String), Histo>,
    family: &str,
    labels: &BTreeMap<String, String>,
) -> &'a mut Histo {
    let key: Vec<String> = labels
        .iter()
        .filter(|(k, _)| *k != "le")
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect();
    all.entry((family.to_owned(), key.join(","))).or_default()
}

fn bound(le: &str) -> Option<f64> {
    match le {
        "+Inf" => Some(f64::INFINITY),
        v => v.parse::<f64>().ok().filter(|f| f.is_finite()),
    }
}

fn family_of(name: &str, types: &BTreeMap<String, String>) -> Option<String> {
    if types.contains_key(name) {
        return Some(name.to_owned());
    }
    for suffix in ["_sum", "_count", "_bucket"] {
        if let Some(base) = name.strip_suffix(suffix)
            && types
                .get(base)
                .is_some_and(|t| t == "summary" || t == "histogram")
        {
            return Some(base.to_owned());
        }
    }
    None
}

fn valid_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn valid_label_name(n: &str) -> bool {
    valid_name(n) && !n.contains(':') && !n.starts_with("__")
}

fn sample(line: &str) -> Result<(String, BTreeMap<String, String>, f64), String> {
    let name_end = line.find(['{', ' ']).ok_or_else(|| "no value".to_owned())?;
    let name = &line[..name_end];
    if !valid_name(name) {
        return Err("bad metric name".into());
    }
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(r) = rest.strip_prefix('{') {
        rest = r;
        loop {
            if let Some(r) = rest.strip_prefix('}') {
                rest = r;
                break;
            }
            let eq = rest.find('=').ok_or("label without =")?;
            let lname = &rest[..eq];
            if !valid_label_name(lname) {
                return Err(format!("bad label name {lname:?}"));
            }
            let r = rest[eq + 1..]
                .strip_prefix('"')
                .ok_or("label value not quoted")?;
            let mut value = String::new();
            let mut chars = r.char_indices();
            let end = loop {
                match chars.next() {
                    None => return Err("unterminated label value".into()),
                    Some((i, '"')) => break i,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, 'n')) => value.push('\n'),
                        Some((_, '\\')) => value.push('\\'),
                        Some((_, '"')) => value.push('"'),
                        _ => return Err("bad escape in label value".into()),
                    },
                    Some((_, c)) => value.push(c),
                }
            };
            if labels.insert(lname.to_owned(), value).is_some() {
                return Err(format!("label {lname} twice"));
            }
            rest = &r[end + 1..];
            if let Some(r) = rest.strip_prefix(',') {
                rest = r;
            } else if !rest.starts_with('}') {
                return Err("labels not separated by ','".into());
            }
        }
    }
    let value = rest.strip_prefix(' ').ok_or("no space before the value")?;
    let v = match value {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v if !v.is_empty()
            && v.chars()
                .all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | 'e' | 'E' | '+')) =>
        {
            v.parse::<f64>().map_err(|_| format!("bad value {v:?}"))?
        }
        v => return Err(format!("bad value {v:?} (timestamps are not written)")),
    };
    Ok((name.to_owned(), labels, v))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::parse;

    #[test]
    fn the_checker_rejects_what_prometheus_rejects() {
        let ok = "# HELP c1m_x_total x.\n# TYPE c1m_x_total counter\nc1m_x_total{side=\"a\"} 1\n";
        assert!(parse(ok).is_ok());
        let histogram = "# TYPE c1m_h_seconds histogram\n\
                         c1m_h_seconds_bucket{le=\"0.5\"} 1\n\
                         c1m_h_seconds_bucket{le=\"+Inf\"} 2\n\
                         c1m_h_seconds_sum 1.5\nc1m_h_seconds_count 2\n";
        assert!(parse(histogram).is_ok(), "{:?}", parse(histogram));
        for bad in [
            "c1m_x 1\n",                                         // no TYPE
            "# TYPE c1m_x gauge\nc1m_x 1\nc1m_x 2\n",            // duplicate
            "# TYPE c1m_x counter\nc1m_x 1\n",                   // counter name
            "# TYPE c1m_x gauge\nc1m_x{a=\"1\" } 1\n",           // bad label syntax
            "# TYPE c1m_x gauge\nc1m_x{a=1} 1\n",                // unquoted
            "# TYPE c1m_x gauge\nc1m_x one\n",                   // bad value
            "# TYPE c1m_x gauge\n# TYPE c1m_y gauge\nc1m_x 1\n", // not contiguous
            "# TYPE c1m_x gauge\nc1m_x 1",                       // no final newline
            "# TYPE 1x gauge\n",                                 // bad name
            "# TYPE c1m_x gauge\nc1m_x{a=\"\\q\"} 1\n",          // bad escape
            "# TYPE c1m_s summary\nc1m_s 1\n",                   // quantile missing
            "# TYPE c1m_x gauge\nc1m_x NaN\n",                   // NaN
            "# TYPE c1m_x_info gauge\nc1m_x_info{a=\"b\"} 2\n",  // info value
            "# TYPE c1m_x gauge\nc1m_x{le=\"1\"} 1\n",           // le outside buckets
        ] {
            assert!(parse(bad).is_err(), "accepted {bad:?}");
        }
        let broken_histograms = [
            histogram.replace("c1m_h_seconds_sum 1.5\n", ""),
            histogram.replace("c1m_h_seconds_count 2\n", ""),
            histogram.replace("{le=\"+Inf\"} 2", "{le=\"+Inf\"} 3"),
            histogram.replace("{le=\"0.5\"} 1", "{le=\"0.5\"} 3"),
            histogram.replace("{le=\"0.5\"}", "{le=\"zero\"}"),
            histogram.replace("c1m_h_seconds_bucket{le=\"+Inf\"} 2\n", ""),
            histogram.replace("c1m_h_seconds_sum", "c1m_h_seconds"),
        ];
        for bad in &broken_histograms {
            assert!(parse(bad).is_err(), "accepted {bad:?}");
        }
    }
}
