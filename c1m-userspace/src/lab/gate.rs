//! `--check`: thresholds a run must meet, so CI can gate on c1m. Parsed and validated
//! before anything starts (a typo fails at once, in one line), judged at the run's end on
//! the figures its summary and report show (latencies by [`Percentiles::of`], the rest
//! from the report's key figures: one home each), recorded in `summary.json`, listed in
//! the summary, and any failure makes the exit code [`CHECK_FAILED`].

use std::{fmt, str::FromStr};

use crate::{
    fmt::{bytes, count, ms, num, secs},
    model::{CheckResult, RunRecord},
    report::figures::{Group, SERVER_CPU_ALL_PHASES, key_figures_of},
    workload::stats::histograms::{HIST_NAMES, Percentiles},
};

/// `c1m run`'s exit code when the run ended but a check failed (beside 0 complete,
/// 1 failed, 2 degraded, 130 interrupted).
pub(crate) const CHECK_FAILED: i32 = 3;

/// What the figures are called in a check, for the error that lists them.
const NAMES: &str = "setup.rate, setup.time, held, failures, overflows, retransmits, resets, \
     mem.server, mem.client, mem.kernel, cpu.server, warnings, kernel = app, and a latency \
     as NAME.p50/.p99/.p999/.max where NAME is connect, ws_handshake, push, push_fanout, \
     echo (or any histogram c1m writes, e.g. connect_from_schedule)";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quantile {
    P50,
    P99,
    P999,
    Max,
}

/// The figure a check judges.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Subject {
    /// A client latency histogram (its name in [`HIST_NAMES`], without `_us`).
    Latency(String, Quantile),
    SetupRate,
    SetupTime,
    Held,
    Failures,
    Overflows,
    Retransmits,
    Resets,
    ServerMemory,
    ClientMemory,
    KernelMemory,
    ServerCpu,
    Warnings,
    /// Every count the kernel and the app both have agreed after every phase.
    KernelEqualsApp,
}

/// How a subject's value is written and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Stored in µs.
    Latency,
    Seconds,
    Bytes,
    PerSecond,
    Count,
}

impl Subject {
    fn kind(&self) -> Kind {
        match self {
            Subject::Latency(..) => Kind::Latency,
            Subject::SetupTime | Subject::ServerCpu => Kind::Seconds,
            Subject::ServerMemory | Subject::ClientMemory | Subject::KernelMemory => Kind::Bytes,
            Subject::SetupRate => Kind::PerSecond,
            _ => Kind::Count,
        }
    }

    fn parse(name: &str) -> Result<Subject, String> {
        Ok(match name {
            "setup.rate" => Subject::SetupRate,
            "setup.time" => Subject::SetupTime,
            "held" => Subject::Held,
            "failures" => Subject::Failures,
            "overflows" => Subject::Overflows,
            "retransmits" => Subject::Retransmits,
            "resets" => Subject::Resets,
            "mem.server" => Subject::ServerMemory,
            "mem.client" => Subject::ClientMemory,
            "mem.kernel" => Subject::KernelMemory,
            "cpu.server" => Subject::ServerCpu,
            "warnings" => Subject::Warnings,
            _ => {
                let latency = name.rsplit_once('.').and_then(|(hist, q)| {
                    let q = match q {
                        "p50" | "median" => Quantile::P50,
                        "p99" => Quantile::P99,
                        "p999" | "p99.9" => Quantile::P999,
                        "max" => Quantile::Max,
                        _ => return None,
                    };
                    let hist = match hist {
                        "push" => "push_message",
                        "echo" => "echo_rtt",
                        h => h,
                    };
                    HIST_NAMES
                        .contains(&format!("{hist}_us").as_str())
                        .then(|| Subject::Latency(hist.to_owned(), q))
                });
                return latency.ok_or_else(|| format!("no figure {name:?}: checks know {NAMES}"));
            }
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Op {
    fn holds(self, measured: f64, limit: f64) -> bool {
        match self {
            Op::Lt => measured < limit,
            Op::Le => measured <= limit,
            Op::Gt => measured > limit,
            Op::Ge => measured >= limit,
            Op::Eq => measured == limit,
            Op::Ne => measured != limit,
        }
    }
}

/// One `--check`, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    text: String,
    subject: Subject,
    op: Op,
    /// In the subject's stored unit (µs, s, bytes, per second, count).
    limit: f64,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Check {
    type Err = String;

    fn from_str(text: &str) -> Result<Check, String> {
        let t = text.trim();
        let compact: String = t.split_whitespace().collect();
        if compact == "kernel=app" || compact == "kernel==app" {
            return Ok(Check {
                text: t.to_owned(),
                subject: Subject::KernelEqualsApp,
                op: Op::Eq,
                limit: 0.0,
            });
        }
        // Two-character operators first, so `<=` is not read as `<` then `=50`.
        let ops = [
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<", Op::Lt),
            (">", Op::Gt),
            ("=", Op::Eq),
        ];
        let Some((at, sym, op)) = ops
            .iter()
            .filter_map(|&(sym, op)| t.find(sym).map(|at| (at, sym, op)))
            .min_by_key(|&(at, sym, _)| (at, std::cmp::Reverse(sym.len())))
        else {
            return Err(format!(
                "{t:?} has no comparison: write FIGURE OP VALUE, e.g. 'push.p99 < 50ms' \
                 (OP: < <= > >= == !=)"
            ));
        };
        let (name, value) = (t[..at].trim(), t[at + sym.len()..].trim());
        let subject = Subject::parse(name)?;
        let limit = value_of(subject.kind(), value).map_err(|e| format!("{t:?}: {e}"))?;
        Ok(Check {
            text: t.to_owned(),
            subject,
            op,
            limit,
        })
    }
}

/// A value with its unit, in the kind's stored unit.
fn value_of(kind: Kind, v: &str) -> Result<f64, String> {
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
        .unwrap_or(v.len());
    let (digits, unit) = (v[..split].replace(',', ""), v[split..].trim());
    let n: f64 = digits
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite())
        .ok_or_else(|| format!("{v:?} is not a number with a unit"))?;
    let scale = match (kind, unit) {
        (Kind::Latency, "us" | "µs") => 1.0,
        (Kind::Latency, "ms") => 1e3,
        (Kind::Latency, "s") => 1e6,
        (Kind::Seconds, "ms") => 1e-3,
        (Kind::Seconds, "s") => 1.0,
        (Kind::Bytes, "B" | "") => 1.0,
        (Kind::Bytes, "KiB") => 1024.0,
        (Kind::Bytes, "MiB") => 1024.0 * 1024.0,
        (Kind::Bytes, "GiB") => 1024.0 * 1024.0 * 1024.0,
        (Kind::PerSecond, "/s" | "") => 1.0,
        (Kind::Count, "") => 1.0,
        (Kind::Latency | Kind::Seconds, _) => {
            return Err(format!("{v:?} needs a time unit: us, ms or s (e.g. 50ms)"));
        }
        (Kind::Bytes, _) => return Err(format!("{v:?} needs a size unit: B, KiB, MiB or GiB")),
        (Kind::PerSecond, _) => return Err(format!("{v:?}: a rate is per second (e.g. 10000/s)")),
        (Kind::Count, _) => return Err(format!("{v:?}: a count has no unit")),
    };
    Ok(n * scale)
}

/// clap's parser for `--check`.
pub(crate) fn parse(text: &str) -> Result<Check, String> {
    text.parse()
}

/// Judges every check on the run's record, in the order given.
pub(crate) fn judge(checks: &[Check], run: &RunRecord) -> Vec<CheckResult> {
    let groups = key_figures_of(run, &[], false);
    checks
        .iter()
        .map(|c| {
            let measured = measure(&c.subject, run, &groups);
            let passed = measured.is_some_and(|m| c.op.holds(m, c.limit));
            CheckResult {
                check: c.text.clone(),
                measured,
                shown: match measured {
                    Some(m) => show(&c.subject, m),
                    None => "not measured in this run".to_owned(),
                },
                passed,
            }
        })
        .collect()
}

/// The exit code of a run that ended `code` with these checks: a failed check turns an
/// ended run's 0 or 2 into [`CHECK_FAILED`]; a run that failed or was interrupted keeps
/// its own.
pub(crate) fn exit_code(code: i32, checks: &[CheckResult]) -> i32 {
    exit_code_of(code, checks.iter().any(|c| !c.passed))
}

/// [`exit_code`] when only whether some check failed is known (a `--servers` sequence
/// reads it from each run's record).
pub(crate) fn exit_code_of(code: i32, a_check_failed: bool) -> i32 {
    if matches!(code, 0 | 2) && a_check_failed {
        CHECK_FAILED
    } else {
        code
    }
}

fn figure(groups: &[Group], group: &str, label: &str) -> Option<f64> {
    groups
        .iter()
        .filter(|g| g.title.starts_with(group))
        .flat_map(|g| &g.figures)
        .find(|f| f.label == label)
        .and_then(|f| f.value)
}

fn measure(subject: &Subject, run: &RunRecord, groups: &[Group]) -> Option<f64> {
    let kernel = run.kernel.as_ref();
    match subject {
        Subject::Latency(hist, q) => {
            let h = run
                .client
                .as_ref()?
                .histogram(&format!("{hist}_us"))
                .ok()
                .filter(|h| !h.is_empty())?;
            let p = Percentiles::of(&h);
            Some(match q {
                Quantile::P50 => p.p50,
                Quantile::P99 => p.p99,
                Quantile::P999 => p.p999,
                Quantile::Max => p.max,
            } as f64)
        }
        Subject::SetupRate => figure(groups, "Setup", "achieved rate (connected / ramp)"),
        Subject::SetupTime => figure(groups, "Setup", "setup phase"),
        Subject::Held => figure(groups, "Connections", "peak ESTABLISHED, server kernel")
            .or_else(|| figure(groups, "Connections", "peak open, server app")),
        Subject::Failures => figure(groups, "Connections", "client failures"),
        Subject::Overflows => figure(groups, "Connections", "accept-queue overflows"),
        Subject::Retransmits => kernel.map(|k| k.retransmits().total as f64),
        Subject::Resets => kernel.map(|k| k.resets_sent() as f64),
        Subject::ServerMemory => figure(groups, "Memory per connection", "server, user space"),
        Subject::ClientMemory => figure(groups, "Memory per connection", "client, user space"),
        Subject::KernelMemory => figure(groups, "Memory per connection", "kernel, per socket"),
        Subject::ServerCpu => figure(groups, "CPU time per phase", SERVER_CPU_ALL_PHASES),
        Subject::Warnings => Some(run.warnings.len() as f64),
        Subject::KernelEqualsApp => {
            // The counts differing after any phase; none compared is no measurement.
            let rows: Vec<_> = run
                .phases
                .iter()
                .flat_map(|p| &p.kernel_vs_app)
                .filter(|r| r.kernel.is_some() && r.app.is_some())
                .collect();
            (!rows.is_empty()).then(|| rows.iter().filter(|r| !r.agrees()).count() as f64)
        }
    }
}

fn show(subject: &Subject, v: f64) -> String {
    match (subject, subject.kind()) {
        (Subject::KernelEqualsApp, _) if v == 0.0 => "kernel = app after every phase".into(),
        (Subject::KernelEqualsApp, _) => format!("{} count(s) differ", count(v as u64)),
        (_, Kind::Latency) => format!("{} ms", ms(v)),
        (_, Kind::Seconds) => secs(v),
        (_, Kind::Bytes) => bytes(v),
        (_, Kind::PerSecond) => format!("{}/s", num(v, 0)),
        (_, Kind::Count) => count(v as u64),
    }
}

/// The summary's lines: one per check, failed ones marked.
pub(crate) fn lines(results: &[CheckResult]) -> Vec<String> {
    if results.is_empty() {
        return Vec::new();
    }
    let failed = results.iter().filter(|r| !r.passed).count();
    let mut out = vec![match failed {
        0 => format!("checks: all {} passed", count(results.len() as u64)),
        n => format!(
            "checks: {} of {} FAILED (exit code {CHECK_FAILED})",
            count(n as u64),
            count(results.len() as u64)
        ),
    }];
    out.extend(results.iter().map(|r| {
        format!(
            "  {} {}: {}",
            if r.passed { "pass" } else { "FAIL" },
            r.check,
            r.shown
        )
    }));
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;
    use crate::model::{kernel_vs_app::KernelVsApp, phase::Phase};

    #[test]
    fn checks_parse_with_units() {
        let c: Check = "push.p99 < 50ms".parse().unwrap();
        assert_eq!(
            (c.subject.clone(), c.op, c.limit),
            (
                Subject::Latency("push_message".into(), Quantile::P99),
                Op::Lt,
                50_000.0
            )
        );
        let c: Check = "mem.server<=1.5KiB".parse().unwrap();
        assert_eq!((c.op, c.limit), (Op::Le, 1536.0));
        let c: Check = "setup.rate >= 10,000/s".parse().unwrap();
        assert_eq!(
            (c.subject, c.op, c.limit),
            (Subject::SetupRate, Op::Ge, 1e4)
        );
        let c: Check = "failures == 0".parse().unwrap();
        assert_eq!((c.subject, c.op, c.limit), (Subject::Failures, Op::Eq, 0.0));
        let c: Check = " kernel = app ".parse().unwrap();
        assert_eq!(c.subject, Subject::KernelEqualsApp);
        let c: Check = "connect_from_schedule.max > 2s".parse().unwrap();
        assert_eq!(c.limit, 2e6);
        assert_eq!("cpu.server < 900ms".parse::<Check>().unwrap().limit, 0.9);
    }

    #[test]
    fn a_bad_check_says_what_is_wrong_and_how_to_write_it() {
        for (text, says) in [
            ("push.p99 50ms", "no comparison"),
            ("push.p98 < 50ms", "checks know"),
            ("latency < 5ms", "checks know"),
            ("push.p99 < 50", "needs a time unit"),
            ("mem.server < 2 pages", "size unit"),
            ("failures < 2 conns", "a count has no unit"),
            ("failures < many", "not a number"),
            ("setup.rate > 5/min", "per second"),
            ("push.p99 < inf ms", "not a number"),
        ] {
            let e = text.parse::<Check>().unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
            assert!(!e.contains('\n'), "{text}: {e}");
        }
    }

    fn phase(kernel: i64, app: i64) -> Phase {
        Phase {
            name: "idle".into(),
            kernel_vs_app: vec![KernelVsApp {
                what: "server open".into(),
                kernel: Some(kernel),
                app: Some(app),
                agree: kernel == app,
                explanation: None,
            }],
            ..Phase::default()
        }
    }

    #[test]
    fn judged_on_the_record_and_a_failure_is_exit_3() {
        let mut run = RunRecord {
            phases: vec![phase(10, 10)],
            warnings: vec!["one".into()],
            ..RunRecord::default()
        };
        let checks: Vec<Check> = ["kernel = app", "warnings == 0", "push.p99 < 1s"]
            .iter()
            .map(|t| t.parse().unwrap())
            .collect();
        let r = judge(&checks, &run);
        let got: Vec<(bool, &str)> = r.iter().map(|r| (r.passed, r.shown.as_str())).collect();
        assert_eq!(
            got,
            [
                (true, "kernel = app after every phase"),
                (false, "1"),
                (false, "not measured in this run")
            ]
        );
        assert_eq!(exit_code(0, &r), CHECK_FAILED);
        assert_eq!(exit_code(2, &r), CHECK_FAILED);
        assert_eq!(exit_code(1, &r), 1);
        assert_eq!(exit_code(130, &r), 130);
        assert_eq!(exit_code(0, &r[..1]), 0);
        run.phases = vec![phase(10, 9)];
        let r = judge(&checks[..1], &run);
        assert_eq!(
            (r[0].passed, r[0].shown.as_str()),
            (false, "1 count(s) differ")
        );
        let l = lines(&judge(&checks, &run));
        assert_eq!(l[0], "checks: 3 of 3 FAILED (exit code 3)");
        assert_eq!(l[1], "  FAIL kernel = app: 1 count(s) differ");
    }
}
