//! The run folder (`c1m-runs/<timestamp>/`): what `c1m run` leaves behind, and what
//! `c1m report` and `c1m compare` read back. Pure: a [`RunRecord`] in, files out.
//!
//! | file | written by | what |
//! |---|---|---|
//! | `summary.json` | [`write_run`] | the [`RunRecord`], pretty |
//! | `summary.schema.json` | [`write_run`], [`write_derived`] | JSON Schema of `summary.json` |
//! | `timeseries.csv` | [`write_run`], [`write_derived`] | one row per [`Sample`](super::model::Sample) |
//! | `<side>-<name>.hgrm` | [`write_run`], [`write_derived`] | percentile distribution (HdrHistogram plotter, wrk2) |
//! | `<side>-<name>.hlog` | [`IntervalRecorder::write`] | HdrHistogram interval log, mergeable across clients |
//! | `report.html` | [`write_run`], [`write_derived`] | offline report: inline SVG charts and tables |
//!
//! Every file is written atomically (`name.tmp`, then rename), so calling the writers
//! again and again during a run is how a Ctrl-C or a crashed worker still leaves
//! complete files of what was measured.

pub(crate) mod atomic;
pub(crate) mod cli;
pub(crate) mod figures;
#[cfg(any(test, feature = "testkit"))]
pub mod fixture;
pub(crate) mod fmt;
pub mod hgrm;
pub mod hlog;
pub(crate) mod html;
pub(crate) mod multiples;
pub(crate) mod palette;
pub(crate) mod schema;
mod svg;
pub(crate) mod timeseries;

use std::{
    io,
    path::{Path, PathBuf},
};

#[cfg(any(test, feature = "testkit"))]
pub use fixture::{sample_run, sample_run_with_snapshots};
pub use hlog::IntervalRecorder;
use serde::Deserialize as _;
use thiserror::Error;

use self::atomic::write_atomic;
use super::model::RunRecord;
use crate::workload::stats::histograms::{HIST_NAMES, HistError, hist_label};

/// The run's [`RunRecord`] as pretty JSON, in the run folder.
pub const SUMMARY: &str = "summary.json";
pub(crate) const SCHEMA: &str = "summary.schema.json";
/// One row per second of the run ([`Sample`](super::model::Sample)), in the run folder.
pub const TIMESERIES: &str = "timeseries.csv";
/// The offline HTML report (inline SVG charts and tables), in the run folder.
pub const REPORT: &str = "report.html";

/// The exit code of `c1m report`, `c1m compare` and `c1m merge` when an input is not a
/// run folder they can read (one line on stderr names the file and the fix).
pub(crate) const EXIT_BAD_INPUT: i32 = 2;

/// The most of a `summary.json` read back. A summary grows ~1.7 KB a sample (one a
/// second): 256 MiB is a run of ~40 hours; a crafted file stops here, not in memory.
pub(crate) const SUMMARY_CAP: u64 = 256 << 20;

/// Keys a `summary.json` of any c1m version has; a JSON file without them is not one
/// (`RunRecord` reads missing keys as defaults, so `{}` would read as a run of zeros).
const REQUIRED_KEYS: [&str; 3] = ["c1m_version", "config", "phases"];

/// Why an export or a read-back failed. Each message is one line naming the cause and
/// the fix.
#[derive(Debug, Error)]
pub enum ExportError {
    /// The path given has no summary.json: not a run folder.
    #[error(
        "{} not found: pass a run folder written by c1m run (c1m-runs/<timestamp>/)",
        .0.display()
    )]
    NotARun(PathBuf),
    /// Reading or writing a file of the run folder failed.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        error: io::Error,
    },
    /// An input that is not a regular file of a sane size (a FIFO, a device, a link).
    #[error("{0}")]
    Input(crate::infile::InFileError),
    /// A JSON file without the keys every summary.json has (`c1m_version`, `config`,
    /// `config.connections`, `phases`).
    #[error(
        "{}: lacks {missing}: not a c1m run summary (schema mismatch); pass a summary.json written by c1m run",
        path.display()
    )]
    Schema {
        /// The file read.
        path: PathBuf,
        /// The keys it lacks, comma-separated.
        missing: String,
    },
    /// A summary.json that is not valid JSON or does not parse as a [`RunRecord`].
    #[error(
        "{}: not a c1m run summary ({error}): pass a summary.json written by c1m run",
        path.display()
    )]
    BadSummary {
        /// The file read.
        path: PathBuf,
        /// Where and why parsing failed.
        error: serde_json::Error,
    },
    /// Encoding the summary or its schema as JSON failed.
    #[error("encoding {what} as JSON: {error}")]
    Encode {
        /// What was being encoded.
        what: &'static str,
        /// serde_json's error.
        error: serde_json::Error,
    },
    /// Writing timeseries.csv failed.
    #[error("writing timeseries.csv: {0}")]
    Csv(#[from] csv::Error),
    /// A histogram of an app snapshot could not be decoded or made.
    #[error("{what}: histogram: {error}")]
    Hist {
        /// Which histogram: side and name, e.g. "client connect_us".
        what: String,
        /// Why.
        error: HistError,
    },
    /// Writing an HdrHistogram interval log (`.hlog`) failed.
    #[error("{what}: interval log: {error}")]
    IntervalLog {
        /// Which log: `<side>-<name>`.
        what: String,
        /// The encoder's error, in words.
        error: String,
    },
}

impl From<atomic::WriteError> for ExportError {
    fn from(e: atomic::WriteError) -> Self {
        ExportError::Io {
            path: e.path,
            error: e.error,
        }
    }
}

impl ExportError {
    pub(crate) fn io(path: &Path) -> impl FnOnce(io::Error) -> ExportError + '_ {
        move |error| ExportError::Io {
            path: path.to_owned(),
            error,
        }
    }

    pub(crate) fn hist(what: impl Into<String>) -> impl FnOnce(HistError) -> ExportError {
        let what = what.into();
        move |error| ExportError::Hist { what, error }
    }
}

/// Unit of the values in a `.hgrm` file. The histograms record µs; `Ms` divides by
/// 1000 (what wrk2 prints) and names the file `…_ms.hgrm`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum HgrmUnit {
    /// Microseconds, as recorded.
    #[default]
    Us,
    /// Milliseconds (values divided by 1000, as wrk2 prints them).
    Ms,
}

impl HgrmUnit {
    /// What a recorded value (µs) is divided by.
    pub(crate) fn divisor(self) -> f64 {
        match self {
            HgrmUnit::Us => 1.0,
            HgrmUnit::Ms => 1000.0,
        }
    }

    /// The file stem for histogram `name` (`connect_us`) of `side`.
    pub(crate) fn stem(self, side: &str, name: &str) -> String {
        match self {
            HgrmUnit::Us => format!("{side}-{name}"),
            HgrmUnit::Ms => format!("{side}-{}_ms", name.strip_suffix("_us").unwrap_or(name)),
        }
    }
}

/// Options of [`write_derived_with`]; [`write_run`] uses the defaults.
#[derive(Debug, Clone, Default)]
pub(crate) struct ExportOptions {
    /// Also write `.hgrm` files in these units (µs files are always written).
    pub extra_hgrm_units: Vec<HgrmUnit>,
    /// Leave a `timeseries.csv` that exists as it is (`c1m report`: the run wrote it as it
    /// went, and a summary that lost its samples once cut it to its header).
    pub keep_timeseries: bool,
}

/// Writes the whole run folder from `run`: `summary.json` and everything derived from
/// it (see the module table; `.hlog` files come from [`IntervalRecorder::write`]).
/// Creates `dir` if needed. Returns the paths written, in a stable order.
pub fn write_run(dir: &Path, run: &RunRecord) -> Result<Vec<PathBuf>, ExportError> {
    std::fs::create_dir_all(dir).map_err(ExportError::io(dir))?;
    let json = serde_json::to_vec_pretty(run).map_err(|error| ExportError::Encode {
        what: "the run summary",
        error,
    })?;
    let path = dir.join(SUMMARY);
    write_atomic(&path, &json)?;
    let mut written = vec![path];
    written.extend(write_derived(dir, run)?);
    Ok(written)
}

/// Writes every file derived from `run`, leaving `summary.json` and the `.hlog` files
/// (raw measurements) alone: what `c1m report` regenerates.
pub(crate) fn write_derived(dir: &Path, run: &RunRecord) -> Result<Vec<PathBuf>, ExportError> {
    write_derived_with(dir, run, &ExportOptions::default())
}

pub(crate) fn write_derived_with(
    dir: &Path,
    run: &RunRecord,
    opts: &ExportOptions,
) -> Result<Vec<PathBuf>, ExportError> {
    std::fs::create_dir_all(dir).map_err(ExportError::io(dir))?;
    let mut written = Vec::new();
    let mut put = |name: String, bytes: &[u8]| -> Result<(), ExportError> {
        let path = dir.join(name);
        write_atomic(&path, bytes)?;
        written.push(path);
        Ok(())
    };
    let schema = schema::summary_schema().map_err(|error| ExportError::Encode {
        what: "the summary's schema",
        error,
    })?;
    put(SCHEMA.to_owned(), schema.as_bytes())?;
    let kept = opts.keep_timeseries && std::fs::symlink_metadata(dir.join(TIMESERIES)).is_ok();
    if !kept {
        put(
            TIMESERIES.to_owned(),
            timeseries::csv(&run.samples)?.as_bytes(),
        )?;
    }
    let mut units = vec![HgrmUnit::Us];
    units.extend(opts.extra_hgrm_units.iter().filter(|u| **u != HgrmUnit::Us));
    // An empty histogram gets no file: the summary says which and why
    // ([`empty_histograms_line`]).
    for h in histograms(run)? {
        for unit in &units {
            let text = hgrm::percentile_distribution(&h.hist, unit.divisor());
            put(
                format!("{}.hgrm", unit.stem(h.side, h.name)),
                text.as_bytes(),
            )?;
        }
    }
    put(REPORT.to_owned(), html::report(run)?.as_bytes())?;
    Ok(written)
}

/// Reads `dir/summary.json` back: a regular file within [`SUMMARY_CAP`], JSON within
/// serde_json's nesting limit, with the keys every summary has. A missing file says how
/// to find a run folder; values a crashed writer left as `null` (NaN) read back as their
/// defaults.
pub fn load_run(dir: &Path) -> Result<RunRecord, ExportError> {
    let path = dir.join(SUMMARY);
    let bytes = match crate::infile::read(&path, SUMMARY_CAP) {
        Ok(b) => b,
        Err(e) if e.is_missing() => return Err(ExportError::NotARun(path)),
        Err(e) => return Err(ExportError::Input(e)),
    };
    // As a value first, which is what holds the nesting limit: into `RunRecord` an
    // unknown key is skipped however deep it goes, so a 200-level `{"x": [[[…]]]}` read
    // as a run of zeros.
    let value: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(error) => return Err(ExportError::BadSummary { path, error }),
    };
    drop(bytes);
    let missing: Vec<&str> = REQUIRED_KEYS
        .into_iter()
        .filter(|k| value.get(*k).is_none())
        .chain(
            value
                .get("config")
                .filter(|c| c.get("connections").is_none())
                .map(|_| "config.connections"),
        )
        .collect();
    if !missing.is_empty() {
        return Err(ExportError::Schema {
            path,
            missing: missing.join(", "),
        });
    }
    match RunRecord::deserialize(&value) {
        Ok(run) => Ok(run),
        // serde_json writes NaN/inf as null, which no f64 reads back; dropping nulls
        // lets `#[serde(default)]` and `Option` fill them in.
        Err(error) => serde_json::from_value::<RunRecord>(drop_nulls(value))
            .map_err(|_| ExportError::BadSummary { path, error }),
    }
}

fn drop_nulls(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, drop_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(drop_nulls).collect()),
        v => v,
    }
}

/// One decoded histogram of a run.
pub(crate) struct RunHist {
    pub side: &'static str,
    pub name: &'static str,
    /// What views title it by: side, name and, for a push histogram, the instant it was
    /// measured from ([`figures::hist_title`]).
    pub title: String,
    pub hist: hdrhistogram::Histogram<u64>,
}

/// The run's non-empty histograms, server first, in [`HIST_NAMES`] order: what the
/// report and the comparison show.
pub(crate) fn histograms(run: &RunRecord) -> Result<Vec<RunHist>, ExportError> {
    let mut all = present_histograms(run)?;
    all.retain(|h| !h.hist.is_empty());
    Ok(all)
}

/// Why a run's histogram is empty, from what the run was asked to do.
fn why_empty(run: &RunRecord, side: &str, name: &str) -> String {
    let c = &run.config;
    let label = hist_label(name);
    if side == "server" {
        return "c1m's server times nothing: every latency is the client's".to_owned();
    }
    let ws = c.mode == "ws";
    match label {
        "tls_handshake" | "tls_open_from_schedule" if c.tls.is_none() => {
            "no --tls: plain TCP".to_owned()
        }
        "ws_handshake" | "ws_open_from_schedule" if !ws => {
            format!("--mode {}: no WebSocket handshake", c.mode)
        }
        "echo_rtt" if c.mode == "hold" => "--mode hold: no echoes".to_owned(),
        "echo_rtt" if ws && c.echo_count == 0 => "--mode ws with --echo-count 0".to_owned(),
        "push_message" | "push_fanout" if !ws => format!("--mode {}: no pushes", c.mode),
        "push_message" | "push_fanout" if c.push_count == 0 => "--pushes 0".to_owned(),
        "push_message" | "push_fanout" => "no push arrived".to_owned(),
        _ => "nothing was recorded".to_owned(),
    }
}

/// One line naming the run's empty histograms and why each is empty (none of them gets
/// an `.hgrm`), or None when every histogram has data.
pub(crate) fn empty_histograms_line(run: &RunRecord) -> Option<String> {
    let hists = present_histograms(run).ok()?;
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    // A plain run's TLS histograms, the pong's of a run without heartbeats, the churn
    // setup's of a run without churn, the message's of a run without --message-rate and
    // the server message's of a server without one say nothing worth a word.
    let plain_tls =
        |h: &RunHist| run.config.tls.is_none() && hist_label(h.name).starts_with("tls_");
    let no_pings = [run.server.as_ref(), run.client.as_ref()]
        .into_iter()
        .flatten()
        .all(|s| s.counters.heartbeat.pings == 0);
    // And the churn setup's of a run that churned nothing.
    let no_churn = run
        .client
        .as_ref()
        .is_none_or(|c| c.counters.churn.closed == 0);
    let no_messages = [run.server.as_ref(), run.client.as_ref()]
        .into_iter()
        .flatten()
        .all(|s| s.counters.messages.sent == 0);
    // And the server messages' of a run whose server sent none.
    let no_server_messages = [run.server.as_ref(), run.client.as_ref()]
        .into_iter()
        .flatten()
        .all(|s| s.counters.server_messages.sent == 0 && s.counters.server_messages.received == 0);
    let unasked = |h: &RunHist| {
        plain_tls(h)
            || (no_pings && hist_label(h.name) == "pong")
            || (no_churn && hist_label(h.name) == "churn_setup")
            || (no_messages && hist_label(h.name) == "message")
            || (no_server_messages && hist_label(h.name) == "server_message")
    };
    for h in hists.iter().filter(|h| h.hist.is_empty() && !unasked(h)) {
        let why = why_empty(run, h.side, h.name);
        let what = format!("{} {}", h.side, hist_label(h.name));
        match groups.iter_mut().find(|(w, _)| *w == why) {
            Some((_, names)) => names.push(what),
            None => groups.push((why, vec![what])),
        }
    }
    if groups.is_empty() {
        return None;
    }
    let parts: Vec<String> = groups
        .into_iter()
        .map(|(why, names)| {
            if names.len() > 2 && names.iter().all(|n| n.starts_with("server ")) {
                format!(
                    "the server's {} ({why})",
                    crate::fmt::count(names.len() as u64)
                )
            } else {
                format!("{} ({why})", names.join(", "))
            }
        })
        .collect();
    Some(format!(
        "empty histograms, no .hgrm written: {}",
        parts.join("; ")
    ))
}

/// Every histogram the snapshots carry, empty ones too.
fn present_histograms(run: &RunRecord) -> Result<Vec<RunHist>, ExportError> {
    let mut out = Vec::new();
    for (side, snap) in [("server", &run.server), ("client", &run.client)] {
        let Some(snap) = snap else { continue };
        for name in HIST_NAMES {
            if !snap.histograms.contains_key(name) {
                continue;
            }
            let hist = snap
                .histogram(name)
                .map_err(ExportError::hist(format!("{side} {name}")))?;
            out.push(RunHist {
                side,
                name,
                title: figures::hist_title(run, side, name),
                hist,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The whole folder, read back from disk: every file parses and agrees with the
    /// record it was written from.
    #[test]
    fn run_folder_round_trip() {
        let (run, snaps) = sample_run_with_snapshots();
        let dir = fixture::test_dir("round-trip");
        let mut rec = IntervalRecorder::new(run.started_unix_ms);
        // As the lab does: observe, write everything, again and again.
        let started = std::time::Instant::now();
        let mut written = Vec::new();
        for (i, (side, snap)) in snaps.iter().enumerate() {
            rec.observe(side, snap).unwrap();
            if i % 40 == 0 || i + 1 == snaps.len() {
                written = write_run(&dir, &run).unwrap();
                written.extend(rec.write(&dir).unwrap());
            }
        }
        eprintln!("observe + 5 writes: {:?}", started.elapsed());
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
        assert_eq!(names.len(), written.len(), "{names:?}");

        // summary.json: valid against the schema, and reads back to the same record.
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(SUMMARY)).unwrap()).unwrap();
        let schema: serde_json::Value =
            serde_json::from_str(&schema::summary_schema().unwrap()).unwrap();
        assert!(jsonschema::is_valid(&schema, &json));
        let back = load_run(&dir).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), json);
        assert_eq!(
            std::fs::read_to_string(dir.join(SCHEMA)).unwrap(),
            schema::summary_schema().unwrap()
        );

        // timeseries.csv: a header and one row per sample.
        let csv = std::fs::read_to_string(dir.join(TIMESERIES)).unwrap();
        assert_eq!(csv.lines().count(), run.samples.len() + 1);

        // Every histogram: its .hgrm parses back to exactly the source histogram's
        // distribution, its .hlog merges back to exactly the final histogram.
        let hists = histograms(&run).unwrap();
        assert_eq!(hists.len(), 4);
        for h in &hists {
            let stem = format!("{}-{}", h.side, h.name);
            let text = std::fs::read_to_string(dir.join(format!("{stem}.hgrm"))).unwrap();
            let parsed = hgrm::parse(&text).unwrap();
            assert_eq!(parsed.total_count, h.hist.len());
            hgrm::tests::assert_matches(&parsed, &h.hist, 1.0);
            let log = std::fs::read_to_string(dir.join(format!("{stem}.hlog"))).unwrap();
            assert_eq!(hlog::merge(&[&log]).unwrap(), h.hist, "{stem}");
        }
        assert!(names.contains(&REPORT.to_owned()));
    }

    #[test]
    fn an_empty_histogram_gets_no_hgrm_and_no_chart_and_the_summary_says_why() {
        let dir = fixture::test_dir("empty-hist");
        let mut run = sample_run();
        let empty = crate::workload::stats::histograms::new_hist().unwrap();
        let blob = crate::workload::stats::histograms::encode_hist(&empty).unwrap();
        if let Some(c) = run.client.as_mut() {
            c.histograms.insert("echo_rtt_us".into(), blob);
        }
        run.config.mode = "ws".to_owned();
        run.config.echo_count = 0;
        write_run(&dir, &run).unwrap();
        assert!(!dir.join("client-echo_rtt_us.hgrm").exists());
        // Regenerated as `c1m report` does: still none, and no error for its absence.
        write_derived(&dir, &run).unwrap();
        assert!(!dir.join("client-echo_rtt_us.hgrm").exists());
        assert_eq!(
            empty_histograms_line(&run).as_deref(),
            Some(
                "empty histograms, no .hgrm written: client echo_rtt (--mode ws with --echo-count 0)"
            )
        );
        let html = std::fs::read_to_string(dir.join(REPORT)).unwrap();
        assert!(!html.contains("chart-lat-client-echo_rtt_us"));
    }

    #[test]
    fn load_run_reads_nan_written_as_null() {
        let dir = fixture::test_dir("nan");
        let mut run = sample_run();
        run.samples[3].t_s = f64::NAN;
        run.phases[0].duration_s = f64::INFINITY;
        write_run(&dir, &run).unwrap();
        let back = load_run(&dir).unwrap();
        assert_eq!(back.samples[3].t_s, 0.0);
        assert_eq!(back.samples.len(), run.samples.len());
        assert_eq!(back.phases[0].duration_s, 0.0);
    }
}
