//! The Prometheus text exposition format (version 0.0.4): families declared in order,
//! samples with escaped labels, and a strict checker for tests.

use std::fmt::Write as _;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
    Gauge,
    Counter,
    Summary,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
            Kind::Summary => "summary",
        }
    }
}

/// A sample value: integers print exactly, floats in the format's spelling.
pub trait Value {
    fn text(&self) -> String;
}

macro_rules! int_value {
    ($($t:ty),*) => {$(impl Value for $t { fn text(&self) -> String { self.to_string() } })*};
}
int_value!(u32, u64, i64, usize);

impl Value for f64 {
    fn text(&self) -> String {
        if self.is_nan() {
            "NaN".into()
        } else if self.is_infinite() {
            if *self > 0.0 { "+Inf" } else { "-Inf" }.into()
        } else {
            self.to_string()
        }
    }
}

pub(super) struct Family {
    name: &'static str,
    kind: Kind,
    help: &'static str,
    /// Rendered sample lines.
    lines: Vec<String>,
}

impl Family {
    pub(super) fn sample(&mut self, labels: &[(&str, &str)], v: impl Value) {
        self.sample_suffixed("", labels, v);
    }

    pub(super) fn sample_suffixed(&mut self, suffix: &str, labels: &[(&str, &str)], v: impl Value) {
        let mut line = format!("{}{suffix}", self.name);
        if !labels.is_empty() {
            line.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    line.push(',');
                }
                let _ = write!(line, "{k}=\"{}\"", escape_label(val));
            }
            line.push('}');
        }
        line.push(' ');
        line.push_str(&v.text());
        self.lines.push(line);
    }
}

/// Families in the order they were declared; one with no sample is left out.
#[derive(Default)]
pub(super) struct Exposition {
    families: Vec<Family>,
}

impl Exposition {
    pub(super) fn family(
        &mut self,
        name: &'static str,
        kind: Kind,
        help: &'static str,
    ) -> &mut Family {
        self.families.push(Family {
            name,
            kind,
            help,
            lines: Vec::new(),
        });
        let last = self.families.len() - 1;
        &mut self.families[last]
    }

    pub(super) fn finish(self) -> String {
        let mut out = String::with_capacity(16 * 1024);
        for f in self.families.iter().filter(|f| !f.lines.is_empty()) {
            let _ = writeln!(out, "# HELP {} {}", f.name, escape_help(f.help));
            let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind.name());
            for l in &f.lines {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }
}

fn escape_label(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A strict reader of the text exposition format, for tests (here and in
/// `tests/live_view_metrics.rs`): checks every line's syntax, HELP and TYPE before the
/// samples of each family, families contiguous and declared once, and every series
/// (name plus label set) unique. Returns the samples as (name, sorted labels, value).
pub mod check {
    use std::collections::{BTreeMap, BTreeSet};

    pub type Series = (String, BTreeMap<String, String>, f64);

    pub fn parse(text: &str) -> Result<Vec<Series>, String> {
        let mut out = Vec::new();
        let mut types: BTreeMap<String, String> = BTreeMap::new();
        let mut helped: BTreeSet<String> = BTreeSet::new();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut finished: BTreeSet<String> = BTreeSet::new();
        let mut current: Option<String> = None;
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
            let key = format!("{name}{labels:?}");
            if !seen.insert(key) {
                return Err(err("duplicate series"));
            }
            out.push((name, labels, value));
        }
        Ok(out)
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
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::check::parse;

    #[test]
    fn the_checker_rejects_what_prometheus_rejects() {
        let ok = "# HELP c1m_x_total x.\n# TYPE c1m_x_total counter\nc1m_x_total{side=\"a\"} 1\n";
        assert!(parse(ok).is_ok());
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
        ] {
            assert!(parse(bad).is_err(), "accepted {bad:?}");
        }
    }
}
