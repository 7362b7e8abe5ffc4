//! `timeseries.csv`: one row per [`Sample`], the header is the field names in
//! declaration order (taken from serde, so a new field is a new column without an edit
//! here), an empty cell for `None`.

use std::fmt::{self, Write as _};

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;

use super::ExportError;
use crate::lab::model::Sample;

/// A JSON object's entries in document order (serde_json's `Map` sorts its keys).
struct Ordered(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Ordered, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = m.next_entry::<String, Value>()? {
                    out.push(entry);
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(V)
    }
}

fn fields(s: &Sample) -> Result<Vec<(String, Value)>, ExportError> {
    let encode = |error| ExportError::Encode {
        what: "a time-series sample",
        error,
    };
    let json = serde_json::to_string(s).map_err(encode)?;
    Ok(serde_json::from_str::<Ordered>(&json).map_err(encode)?.0)
}

/// The column names, in order.
pub fn header() -> Result<Vec<String>, ExportError> {
    Ok(fields(&Sample::default())?
        .into_iter()
        .map(|(k, _)| k)
        .collect())
}

pub fn csv(samples: &[Sample]) -> Result<String, ExportError> {
    let mut out = header()?.join(",");
    out.push('\n');
    for s in samples {
        for (i, (_, v)) in fields(s)?.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            match v {
                Value::Null => {}
                Value::String(s) => out.push_str(&quote(s)),
                Value::Number(n) => {
                    let _ = write!(out, "{n}");
                }
                other => out.push_str(&quote(&other.to_string())),
            }
        }
        out.push('\n');
    }
    Ok(out)
}

/// RFC 4180 quoting, only where needed.
fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn csv_rows_and_empty_cells() {
        let run = crate::lab::export::sample_run();
        let text = csv(&run.samples).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines.len(),
            run.samples.len() + 1,
            "header + one row per sample"
        );
        let head: Vec<&str> = lines[0].split(',').collect();
        assert_eq!(&head[..3], ["t_s", "unix_ms", "phase"]);
        assert_eq!(head.last(), Some(&"box_mem_available_bytes"));
        for l in &lines[1..] {
            assert_eq!(l.split(',').count(), head.len(), "{l}");
        }
        // None is an empty cell; a phase with a comma is quoted.
        let s = Sample {
            phase: "a,b".into(),
            ..Sample::default()
        };
        let row = csv(&[s]).unwrap().lines().nth(1).unwrap().to_owned();
        assert!(row.starts_with("0.0,0,\"a,b\",,,"), "{row}");
    }
}
