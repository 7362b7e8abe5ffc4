//! `.hlog`: HdrHistogram interval logs, one per side and histogram, so the runs of
//! several clients merge interval by interval (Java `HistogramLogProcessor`, or
//! [`merge`] here).
//!
//! The workload reports cumulative histograms; [`IntervalRecorder`] turns successive
//! snapshots into per-interval histograms by subtraction (now − previous) and keeps each
//! interval encoded (V2 deflate, base64) as the crate's log writer prints it, so
//! [`IntervalRecorder::write`] is cheap enough to call after every poll.
//!
//! ```text
//! #c1m interval log: client connect_us (values in µs)
//! #[StartTime: 1767225600.000 (seconds since epoch)]
//! #[BaseTime: 1767225600.000 (seconds since epoch)]
//! "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
//! Tag=client-connect_us,2.000,1.000,4607.000,HISTFAAAA…
//! ```

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Read},
    path::{Path, PathBuf},
    time::{Duration, UNIX_EPOCH},
};

use hdrhistogram::{
    Histogram,
    serialization::{
        V2DeflateSerializer,
        interval_log::{
            IntervalLogHistogram, IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
        },
    },
};

use super::{ExportError, atomic::write_atomic};
use crate::infile::{Capped, InFileError};
use crate::workload::stats::{
    histograms::{HIST_NAMES, decode_hist, new_hist},
    snapshot::AppSnapshot,
};

const LEGEND: &str =
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n";

/// Per-interval histograms of every side and histogram name, built from the cumulative
/// [`AppSnapshot`]s the lab polls. Feed it every snapshot, in order, per side.
#[derive(Debug)]
pub struct IntervalRecorder {
    /// StartTime and BaseTime of the logs: interval timestamps are seconds since it.
    start_unix_ns: u64,
    /// Keyed by file stem (`client-connect_us`).
    streams: BTreeMap<String, Stream>,
}

#[derive(Debug)]
struct Stream {
    side: String,
    name: String,
    /// The cumulative histogram of the previous snapshot, and its blob to skip decoding
    /// an unchanged one.
    prev: Histogram<u64>,
    prev_blob: String,
    prev_unix_ns: u64,
    /// Interval lines as the crate's writer prints them.
    body: Vec<u8>,
    intervals: usize,
    /// Times the cumulative histogram shrank (a restarted side): the interval then holds
    /// the whole new cumulative histogram.
    resets: u32,
}

impl IntervalRecorder {
    /// `start_unix_ms`: the run's start (`RunRecord::started_unix_ms`).
    pub fn new(start_unix_ms: u64) -> IntervalRecorder {
        IntervalRecorder {
            start_unix_ns: start_unix_ms.saturating_mul(1_000_000),
            streams: BTreeMap::new(),
        }
    }

    /// Takes the next cumulative snapshot of `side` ("server" or "client"). The first
    /// interval of a histogram starts when the side's process started (`unix_ns −
    /// uptime_s`); each next one where the previous snapshot was taken. Intervals in
    /// which nothing was recorded are left out of the log.
    pub fn observe(&mut self, side: &str, snap: &AppSnapshot) -> Result<(), ExportError> {
        let side = tag_safe(side);
        for (name, blob) in &snap.histograms {
            let stem = format!("{side}-{}", tag_safe(name));
            let stream = match self.streams.get_mut(&stem) {
                Some(s) => s,
                None => {
                    let started = snap
                        .unix_ns
                        .saturating_sub((snap.uptime_s.max(0.0) * 1e9) as u64)
                        .max(self.start_unix_ns);
                    let prev = new_hist().map_err(ExportError::hist(&stem))?;
                    self.streams.entry(stem.clone()).or_insert(Stream {
                        side: side.clone(),
                        name: name.clone(),
                        prev,
                        prev_blob: String::new(),
                        prev_unix_ns: started,
                        body: Vec::new(),
                        intervals: 0,
                        resets: 0,
                    })
                }
            };
            if *blob == stream.prev_blob || snap.unix_ns < stream.prev_unix_ns {
                continue; // unchanged, or an old snapshot polled again
            }
            let now = decode_hist(blob).map_err(ExportError::hist(&stem))?;
            let mut interval = now.clone();
            if interval.subtract(&stream.prev).is_err() {
                stream.resets += 1;
                interval = now.clone();
            }
            if !interval.is_empty() {
                let start = stream.prev_unix_ns.saturating_sub(self.start_unix_ns);
                let len = snap.unix_ns.saturating_sub(stream.prev_unix_ns);
                let log_err = |error: String| ExportError::IntervalLog {
                    what: stem.clone(),
                    error,
                };
                let mut ser = V2DeflateSerializer::new();
                let mut w = IntervalLogWriterBuilder::new()
                    .begin_log_with(&mut stream.body, &mut ser)
                    .map_err(|e| log_err(e.to_string()))?;
                w.write_histogram(
                    &interval,
                    Duration::from_nanos(start),
                    Duration::from_nanos(len),
                    Tag::new(&stem),
                )
                .map_err(|e| log_err(e.to_string()))?;
                stream.intervals += 1;
            }
            stream.prev = now;
            stream.prev_blob.clone_from(blob);
            stream.prev_unix_ns = snap.unix_ns;
        }
        Ok(())
    }

    #[cfg(test)]
    /// Intervals logged so far, per file stem.
    pub(crate) fn intervals(&self) -> BTreeMap<String, usize> {
        self.streams
            .iter()
            .map(|(k, s)| (k.clone(), s.intervals))
            .collect()
    }

    /// Writes `<side>-<name>.hlog` for every histogram with at least one interval,
    /// atomically; returns the paths.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, ExportError> {
        std::fs::create_dir_all(dir).map_err(ExportError::io(dir))?;
        let mut written = Vec::new();
        for (stem, s) in &self.streams {
            if s.intervals == 0 {
                continue;
            }
            let mut text = Vec::with_capacity(s.body.len() + 512);
            let start = UNIX_EPOCH + Duration::from_nanos(self.start_unix_ns);
            let mut ser = V2DeflateSerializer::new();
            IntervalLogWriterBuilder::new()
                .add_comment(&format!(
                    "c1m {} interval log: {} {} (values in µs; intervals with no values left out)",
                    env!("CARGO_PKG_VERSION"),
                    s.side,
                    s.name
                ))
                .add_comment("[Histogram log format version 1.3]")
                .with_start_time(start)
                .with_base_time(start)
                .begin_log_with(&mut text, &mut ser)
                .map_err(ExportError::io(dir))?;
            if s.resets > 0 {
                text.extend_from_slice(
                    format!(
                        "#the cumulative histogram shrank {} time(s) (a restarted side): each such interval holds everything since the restart\n",
                        s.resets
                    )
                    .as_bytes(),
                );
            }
            text.extend_from_slice(LEGEND.as_bytes());
            text.extend_from_slice(&s.body);
            let path = dir.join(format!("{stem}.hlog"));
            write_atomic(&path, &text)?;
            written.push(path);
        }
        Ok(written)
    }
}

/// A tag may not hold ',', ' ', '\r' or '\n'.
fn tag_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if matches!(c, ',' | ' ' | '\r' | '\n') {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// The most of a `.hlog` read back: an interval line is ~275 B, so 256 MiB is ~1M
/// intervals (a poll a second for 11 days); a crafted file stops here.
pub(crate) const HLOG_CAP: u64 = 256 << 20;

/// The longest line read: one interval's histogram, V2-deflated and base64'd (a full
/// [`new_hist`] is ~250 KB so).
const LINE_CAP: u64 = 4 << 20;

/// One interval read back from a log.
#[derive(Debug, Clone)]
pub(crate) struct Interval {
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "read back by the writer's test")
    )]
    pub tag: Option<String>,
    /// Seconds since the log's BaseTime (or the epoch without one).
    pub start_s: f64,
    pub length_s: f64,
    pub histogram: Histogram<u64>,
}

impl Interval {
    /// Decodes one line the crate's reader parsed.
    pub(crate) fn decode(i: &IntervalLogHistogram<'_>) -> Result<Interval, String> {
        Ok(Interval {
            tag: i.tag().map(|t| t.as_str().to_owned()),
            start_s: i.start_timestamp().as_secs_f64(),
            length_s: i.duration().as_secs_f64(),
            histogram: decode_hist(i.encoded_histogram()).map_err(|e| e.to_string())?,
        })
    }
}

/// Hands every interval of an interval log to `f`, in file order, one line at a time:
/// memory is one line and what `f` keeps, never the file (decoded, each interval is a
/// whole histogram, ~185 KB: 40,000 of them once took 7.4 GB). Lines are parsed by the
/// crate's reader; a line it cannot read ends it, naming the line.
pub(crate) fn for_each_interval(
    mut input: impl BufRead,
    mut f: impl FnMut(&IntervalLogHistogram<'_>) -> Result<(), String>,
) -> Result<(), String> {
    let mut line = Vec::new();
    for number in 1usize.. {
        line.clear();
        let n = Read::take(&mut input, LINE_CAP + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        if n as u64 > LINE_CAP {
            return Err(format!(
                "line {number} is longer than {} MiB, more than any interval",
                LINE_CAP >> 20
            ));
        }
        for entry in IntervalLogIterator::new(&line) {
            match entry {
                Ok(LogEntry::Interval(i)) => f(&i).map_err(|e| format!("line {number}: {e}"))?,
                Ok(_) => {}
                Err(_) => return Err(format!("line {number} does not parse")),
            }
        }
    }
    Ok(())
}

/// A `.hlog` of a run folder, open: a regular file within [`HLOG_CAP`].
pub(crate) fn open(path: &Path) -> Result<Option<BufReader<Capped>>, InFileError> {
    match Capped::open(path, HLOG_CAP) {
        Ok(f) => Ok(Some(BufReader::new(f))),
        Err(e) if e.is_missing() => Ok(None),
        Err(e) => Err(e),
    }
}

/// One interval of a run's log, as a comparison plots it.
#[derive(Debug, Clone)]
pub(crate) struct IntervalAt {
    /// Seconds since the log's BaseTime at the interval's end (its values were recorded
    /// within it).
    pub end_s: f64,
    /// The interval's value at each quantile asked for, in µs.
    pub at: Vec<u64>,
}

/// One `.hlog` of a run folder, read back: what a comparison plots over time.
#[derive(Clone)]
pub(crate) struct RunLog {
    pub side: &'static str,
    pub name: &'static str,
    pub intervals: Vec<IntervalAt>,
}

/// Every `<side>-<name>.hlog` in `dir` with at least one interval (absent ones are
/// skipped), each interval kept as its values at `quantiles`. A log that does not read
/// is named in the second list, with what is lost, and left out: one bad file costs
/// one line, not the comparison.
pub(crate) fn read_run_logs(dir: &Path, quantiles: &[f64]) -> (Vec<RunLog>, Vec<String>) {
    let mut logs = Vec::new();
    let mut problems = Vec::new();
    for side in ["server", "client"] {
        for name in HIST_NAMES {
            let path = dir.join(format!("{side}-{name}.hlog"));
            let file = match open(&path) {
                Ok(Some(f)) => f,
                Ok(None) => continue,
                Err(e) => {
                    problems.push(format!("{e}; its latency over time is left out"));
                    continue;
                }
            };
            let mut intervals = Vec::new();
            let read = for_each_interval(file, |i| {
                let h = Interval::decode(i)?;
                intervals.push(IntervalAt {
                    end_s: h.start_s + h.length_s,
                    at: quantiles
                        .iter()
                        .map(|q| h.histogram.value_at_quantile(*q))
                        .collect(),
                });
                Ok(())
            });
            match read {
                Ok(()) if intervals.is_empty() => {}
                Ok(()) => logs.push(RunLog {
                    side,
                    name,
                    intervals,
                }),
                Err(e) => problems.push(format!(
                    "{}: not an interval log c1m can read ({e}); its latency over time is left out",
                    path.display()
                )),
            }
        }
    }
    (logs, problems)
}

/// Every interval of an interval log, decoded (tests: a long log is to be streamed).
#[cfg(test)]
pub(crate) fn read(text: &str) -> Result<Vec<Interval>, String> {
    let mut out = Vec::new();
    for_each_interval(text.as_bytes(), |i| {
        out.push(Interval::decode(i)?);
        Ok(())
    })?;
    Ok(out)
}

/// Merges every interval of several logs (e.g. one per client box) into one histogram,
/// one interval in memory at a time.
pub fn merge(texts: &[&str]) -> Result<Histogram<u64>, String> {
    let mut all = new_hist().map_err(|e| e.to_string())?;
    for t in texts {
        for_each_interval(t.as_bytes(), |i| {
            all.add(&Interval::decode(i)?.histogram)
                .map_err(|e| e.to_string())
        })?;
    }
    Ok(all)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{report::fixture, workload::stats::histograms::encode_hist};

    #[test]
    fn merged_intervals_equal_final_cumulative() {
        let (run, snaps) = fixture::sample_run_with_snapshots();
        let mut rec = IntervalRecorder::new(run.started_unix_ms);
        for (side, s) in &snaps {
            rec.observe(side, s).unwrap();
            rec.observe(side, s).unwrap(); // polled twice: no new interval
        }
        let dir = fixture::test_dir("hlog");
        let paths = rec.write(&dir).unwrap();
        assert!(!paths.is_empty());
        let client = run.client.as_ref().unwrap();
        for (name, blob) in &client.histograms {
            let path = dir.join(format!("client-{name}.hlog"));
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.contains("#[StartTime: ") && text.contains("#[BaseTime: "));
            assert!(text.contains(LEGEND));
            let intervals = read(&text).unwrap();
            assert_eq!(intervals.len(), rec.intervals()[&format!("client-{name}")]);
            assert!(intervals.len() > 1, "{name}: several intervals");
            let mut last_end = 0.0;
            for i in &intervals {
                assert_eq!(i.tag.as_deref(), Some(format!("client-{name}").as_str()));
                assert!(i.start_s + 1e-3 >= last_end, "ordered, not overlapping");
                assert!(!i.histogram.is_empty());
                last_end = i.start_s + i.length_s;
            }
            let merged = merge(&[&text]).unwrap();
            assert_eq!(merged, decode_hist(blob).unwrap(), "{name}");
            // Two clients' logs merge into their sum.
            let twice = merge(&[&text, &text]).unwrap();
            assert_eq!(twice.len(), 2 * merged.len());
        }
    }

    #[test]
    fn shrinking_cumulative_counts_as_restart() {
        let mut rec = IntervalRecorder::new(1_000);
        let snap = |vals: &[u64], t_s: u64| {
            let mut h = new_hist().unwrap();
            for v in vals {
                h.record(*v).unwrap();
            }
            AppSnapshot {
                unix_ns: t_s * 1_000_000_000,
                uptime_s: t_s as f64 - 1.0,
                histograms: [("connect_us".to_owned(), encode_hist(&h).unwrap())].into(),
                ..AppSnapshot::default()
            }
        };
        rec.observe("client", &snap(&[10, 20, 30], 2)).unwrap();
        rec.observe("client", &snap(&[10, 20, 30, 40], 3)).unwrap();
        rec.observe("client", &snap(&[50], 4)).unwrap(); // restarted
        let dir = fixture::test_dir("hlog-restart");
        rec.write(&dir).unwrap();
        let text = std::fs::read_to_string(dir.join("client-connect_us.hlog")).unwrap();
        let iv = read(&text).unwrap();
        let lens: Vec<u64> = iv.iter().map(|i| i.histogram.len()).collect();
        assert_eq!(lens, [3, 1, 1]);
        assert!((iv[0].start_s - 0.0).abs() < 1e-9 && (iv[0].length_s - 1.0).abs() < 1e-9);
        assert!((iv[1].start_s - 1.0).abs() < 1e-9);
        assert!(text.contains("shrank 1 time(s)"));
    }
}
