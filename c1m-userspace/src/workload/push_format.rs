//! How a server stamps its pushes: c1m's own 24-byte frame, or what a foreign server
//! sends (the seeds' servers sent `System.currentTimeMillis()` as text; a Go gorilla
//! broadcast sent 8 little-endian bytes of µs). The client decodes every data frame by
//! the format it was told; a frame that does not decode is counted, never ignored.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};

/// The payload of a push frame.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PushFormat {
    /// c1m's own binary frame: push id, broadcast start, write time (ns, big-endian).
    #[default]
    C1m,
    /// 8 bytes, little-endian µs since the Unix epoch.
    U64leUs,
    /// 8 bytes, big-endian ms since the Unix epoch.
    U64beMs,
    /// Decimal ms since the Unix epoch, as text (Java's `System.currentTimeMillis()`).
    TextMs,
    /// Decimal µs since the Unix epoch, as text.
    TextUs,
    /// A JSON object whose field FIELD holds the stamp; its unit is read from its size
    /// (s, ms, µs or ns since the Unix epoch).
    Json(String),
}

/// What one data frame said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stamp {
    /// c1m's frame: push id, broadcast start and write time, ns since the epoch.
    C1m {
        id: u64,
        started_unix_ns: u64,
        written_unix_ns: u64,
    },
    /// A foreign server's stamp, ns since the epoch.
    At(u64),
}

const FORMATS: &str = "c1m, u64le-us, u64be-ms, text-ms, text-us, json:FIELD";

impl FromStr for PushFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "c1m" => PushFormat::C1m,
            "u64le-us" => PushFormat::U64leUs,
            "u64be-ms" => PushFormat::U64beMs,
            "text-ms" => PushFormat::TextMs,
            "text-us" => PushFormat::TextUs,
            _ => match s.strip_prefix("json:") {
                Some(field) if !field.is_empty() => PushFormat::Json(field.to_owned()),
                _ => return Err(format!("unknown push format {s:?}; one of: {FORMATS}")),
            },
        })
    }
}

impl fmt::Display for PushFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushFormat::C1m => f.write_str("c1m"),
            PushFormat::U64leUs => f.write_str("u64le-us"),
            PushFormat::U64beMs => f.write_str("u64be-ms"),
            PushFormat::TextMs => f.write_str("text-ms"),
            PushFormat::TextUs => f.write_str("text-us"),
            PushFormat::Json(field) => write!(f, "json:{field}"),
        }
    }
}

/// A clap value parser: one line naming the formats.
pub(crate) fn parse(s: &str) -> Result<PushFormat, String> {
    s.parse()
}

fn u64_at(p: &[u8]) -> Option<[u8; 8]> {
    p.try_into().ok()
}

/// A stamp of unknown unit read by its size: a µs stamp of today is ~1.8e15, a ms one
/// ~1.8e12, so the decades between them tell the unit apart until the year 5138.
/// Whole numbers stay integers (an f64 cannot hold today's ns exactly).
fn by_magnitude(v: &serde_json::Value) -> Option<u64> {
    let scale = |x: f64| match x {
        x if x >= 1e17 => 1,
        x if x >= 1e14 => 1000,
        x if x >= 1e11 => 1_000_000,
        _ => 1_000_000_000,
    };
    if let Some(n) = v
        .as_u64()
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
    {
        return (n > 0).then(|| n.checked_mul(scale(n as f64))).flatten();
    }
    let x = v.as_f64()?;
    (x.is_finite() && x > 0.0).then(|| (x * scale(x) as f64) as u64)
}

impl PushFormat {
    /// The stamp in a data frame, or None when the frame is not a push of this format.
    pub(crate) fn decode(&self, text: bool, p: &[u8]) -> Option<Stamp> {
        let decimal = |scale: u64| {
            std::str::from_utf8(p)
                .ok()?
                .trim()
                .parse::<u64>()
                .ok()?
                .checked_mul(scale)
        };
        match self {
            PushFormat::C1m if !text && p.len() == 24 => {
                let word = |i: usize| u64_at(&p[i * 8..i * 8 + 8]).map(u64::from_be_bytes);
                Some(Stamp::C1m {
                    id: word(0)?,
                    started_unix_ns: word(1)?,
                    written_unix_ns: word(2)?,
                })
            }
            PushFormat::C1m => None,
            PushFormat::U64leUs => {
                Some(Stamp::At(u64::from_le_bytes(u64_at(p)?).checked_mul(1000)?))
            }
            PushFormat::U64beMs => Some(Stamp::At(
                u64::from_be_bytes(u64_at(p)?).checked_mul(1_000_000)?,
            )),
            PushFormat::TextMs => decimal(1_000_000).map(Stamp::At),
            PushFormat::TextUs => decimal(1000).map(Stamp::At),
            PushFormat::Json(field) => {
                let v: serde_json::Value = serde_json::from_slice(p).ok()?;
                by_magnitude(v.get(field)?).map(Stamp::At)
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    const NS: u64 = 1_796_000_000_123_456_000;

    #[test]
    fn every_format_reads_back_the_stamp_it_was_written_with() {
        let us = NS / 1000;
        let ms = NS / 1_000_000;
        let cases: [(&str, bool, Vec<u8>, u64); 6] = [
            ("u64le-us", false, us.to_le_bytes().to_vec(), us * 1000),
            ("u64be-ms", false, ms.to_be_bytes().to_vec(), ms * 1_000_000),
            ("text-ms", true, ms.to_string().into_bytes(), ms * 1_000_000),
            ("text-us", true, format!("{us}\n").into_bytes(), us * 1000),
            (
                "json:ts",
                true,
                format!("{{\"ts\":{ms},\"n\":1}}").into_bytes(),
                ms * 1_000_000,
            ),
            (
                "json:t",
                true,
                format!("{{\"t\":{us}}}").into_bytes(),
                us * 1000,
            ),
        ];
        for (name, text, payload, want) in cases {
            let f: PushFormat = name.parse().unwrap();
            assert_eq!(f.to_string(), name);
            assert_eq!(f.decode(text, &payload), Some(Stamp::At(want)), "{name}");
        }
    }

    #[test]
    fn c1m_frames_keep_their_id() {
        let mut p = Vec::new();
        for w in [7u64, NS, NS + 5] {
            p.extend_from_slice(&w.to_be_bytes());
        }
        assert_eq!(
            PushFormat::C1m.decode(false, &p),
            Some(Stamp::C1m {
                id: 7,
                started_unix_ns: NS,
                written_unix_ns: NS + 5
            })
        );
        assert_eq!(PushFormat::C1m.decode(true, &p), None);
    }

    #[test]
    fn frames_of_another_shape_do_not_decode() {
        for (name, text, payload) in [
            ("u64le-us", false, &b"1234567"[..]),
            ("u64be-ms", true, &b"connections: 5"[..]),
            ("text-ms", true, &b"connections: 5"[..]),
            ("text-us", true, &b"-5"[..]),
            ("json:ts", true, &b"{\"other\":1}"[..]),
            ("json:ts", true, &b"not json"[..]),
        ] {
            let f: PushFormat = name.parse().unwrap();
            assert_eq!(f.decode(text, payload), None, "{name} {payload:?}");
        }
    }

    #[test]
    fn an_unknown_format_is_one_line_naming_the_known_ones() {
        let e = "u32".parse::<PushFormat>().unwrap_err();
        assert!(!e.contains('\n') && e.contains("text-ms") && e.contains("json:FIELD"));
        assert!("json:".parse::<PushFormat>().is_err());
    }
}
