//! The answer a comparison leads with: one row per name, a column per figure people
//! choose a server by, each cell `median ±spread` with the best per column marked; a
//! verdict in words for every pair of names on every column; and per name what it is
//! best and worst at. Pure: the rows in, the table and its words out.
//!
//! Each column knows which way is better ([`Better`], on [`Column`]: its one home), so a
//! verdict says who wins, by how much (a ratio where one is many times the other, else
//! a percent) and how sure the comparison is of it, from the same bootstrap interval
//! and run-to-run spread as every other verdict ([`Verdict`]): `sure` beyond the spread,
//! `likely` measurable but within it, else no clear difference, and no call under
//! [`MIN_REPEATS`] runs a name.

use serde::Serialize;

use super::table::{Difference, LATENCY_PREFIX, MIN_REPEATS, Row, Spread, Verdict};
use crate::report::figures::{SERVER_CPU_ALL_PHASES, Unit};
use crate::report::fmt::num;

/// Which way a figure is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Better {
    /// More is better (connections held, setup rate).
    Higher,
    /// Less is better (memory, CPU, latency).
    Lower,
}

/// A column of the headline table: a figure people choose a server by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Column {
    /// Peak ESTABLISHED on the server side in the kernel (the server app's count when
    /// some run had no observer).
    Held,
    /// Connections made per second over the ramp.
    SetupRate,
    /// The server's user-space memory per open connection.
    UserMemory,
    /// Kernel memory per server socket.
    KernelMemory,
    /// The server's CPU time over the whole run.
    Cpu,
    /// Push latency per message: median.
    PushP50,
    /// Push latency per message: 99th percentile.
    PushP99,
    /// Push latency per message: the slowest.
    PushMax,
}

const HELD_KERNEL: (&str, &str) = ("Connections", "peak ESTABLISHED, server kernel");
const HELD_APP: (&str, &str) = ("Connections", "peak open, server app");
const PUSH: &str = "client push_message";

impl Column {
    /// Every column, in the table's order.
    pub(crate) const ALL: [Column; 8] = [
        Column::Held,
        Column::SetupRate,
        Column::UserMemory,
        Column::KernelMemory,
        Column::Cpu,
        Column::PushP50,
        Column::PushP99,
        Column::PushMax,
    ];

    /// Which way is better.
    pub(crate) fn better(self) -> Better {
        match self {
            Column::Held | Column::SetupRate => Better::Higher,
            _ => Better::Lower,
        }
    }

    /// The column's header.
    pub(crate) fn header(self) -> &'static str {
        match self {
            Column::Held => "held",
            Column::SetupRate => "setup rate",
            Column::UserMemory => "user mem/conn",
            Column::KernelMemory => "kernel mem/conn",
            Column::Cpu => "server CPU",
            Column::PushP50 => "push p50",
            Column::PushP99 => "push p99",
            Column::PushMax => "push max",
        }
    }

    /// The figure in a verdict: "setup rate", "push p99".
    pub(crate) fn what(self) -> &'static str {
        match self {
            Column::Held => "connections held",
            Column::SetupRate => "setup rate",
            Column::UserMemory => "user memory per connection",
            Column::KernelMemory => "kernel memory per connection",
            Column::Cpu => "server CPU",
            Column::PushP50 => "push p50",
            Column::PushP99 => "push p99",
            Column::PushMax => "push max",
        }
    }

    /// The winner's side of a verdict: "faster setup", "less server CPU".
    fn wins(self) -> &'static str {
        match self {
            Column::Held => "more connections held",
            Column::SetupRate => "faster setup",
            Column::UserMemory => "less user memory per connection",
            Column::KernelMemory => "less kernel memory per connection",
            Column::Cpu => "less server CPU",
            Column::PushP50 => "lower push p50",
            Column::PushP99 => "lower push p99",
            Column::PushMax => "lower push max",
        }
    }

    /// The row's figure label within its group, for the columns of one figure.
    fn figure(self) -> Option<(&'static str, &'static str)> {
        match self {
            Column::Held => None,
            Column::SetupRate => Some(("Setup", "achieved rate (connected / ramp)")),
            Column::UserMemory => Some(("Memory per connection", "server, user space")),
            Column::KernelMemory => Some(("Memory per connection", "kernel, per socket")),
            Column::Cpu => Some(("CPU time per phase", SERVER_CPU_ALL_PHASES)),
            Column::PushP50 => Some(("", "median")),
            Column::PushP99 => Some(("", "99%")),
            Column::PushMax => Some(("", "max")),
        }
    }

    fn is_push(self) -> bool {
        matches!(self, Column::PushP50 | Column::PushP99 | Column::PushMax)
    }

    /// Whether `(group, figure)` can be this column's row.
    fn takes(self, group: &str, figure: &str) -> bool {
        match (self, self.figure()) {
            (Column::Held, _) => [HELD_KERNEL, HELD_APP].contains(&(group, figure)),
            (c, Some((_, f))) if c.is_push() => {
                f == figure
                    && group
                        .strip_prefix(LATENCY_PREFIX)
                        .is_some_and(|g| g.starts_with(PUSH))
            }
            (_, Some(gf)) => gf == (group, figure),
            (_, None) => false,
        }
    }

    /// The row this column reads: the kernel's count of connections held when every
    /// name has it; of the push histograms (one per push rule), the one most names have.
    fn row(self, rows: &[Row]) -> Option<&Row> {
        let with_data = |r: &&Row| r.cells.iter().filter(|c| c.median.is_some()).count();
        let mut candidates: Vec<&Row> = rows
            .iter()
            .filter(|r| self.takes(&r.group, &r.figure))
            .collect();
        if self == Column::Held {
            let all = |r: &&Row| r.cells.iter().all(|c| c.median.is_some());
            return candidates
                .iter()
                .find(|r| (r.group.as_str(), r.figure.as_str()) == HELD_KERNEL && all(r))
                .or_else(|| {
                    candidates
                        .iter()
                        .find(|r| (r.group.as_str(), r.figure.as_str()) == HELD_APP)
                })
                .copied();
        }
        // The first of the most complete (stable: the earliest row wins a tie).
        candidates.reverse();
        candidates.into_iter().max_by_key(with_data)
    }
}

/// Whether `(group, figure)` is a row some column may read: those get every pair's
/// difference (`table::rows_with_pairs`).
pub(crate) fn pairwise(group: &str, figure: &str) -> bool {
    Column::ALL.iter().any(|c| c.takes(group, figure))
}

/// How sure a pairwise verdict is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Call {
    /// One of the two has no value.
    NoData,
    /// Every run of both gave the same value.
    Same,
    /// The medians differ by less than [`NEGLIGIBLE`] of the larger: whatever the
    /// statistics say, nobody picks a server by it (4,095.9 B against 4,096 B per
    /// kernel socket read "0.0% less kernel memory (likely)").
    Negligible,
    /// A name has fewer than [`MIN_REPEATS`] runs.
    TooFewRuns,
    /// The interval holds no difference: runs vary more than the two differ.
    NoClearDifference,
    /// Measurably different, but within the run-to-run spread.
    Likely,
    /// Measurably different, and beyond the run-to-run spread.
    Sure,
}

impl Call {
    fn of(v: Verdict) -> Call {
        match v {
            Verdict::NoData => Call::NoData,
            Verdict::Same => Call::Same,
            Verdict::FewRuns => Call::TooFewRuns,
            Verdict::NotDifferent => Call::NoClearDifference,
            Verdict::Different => Call::Likely,
            Verdict::BeyondSpread => Call::Sure,
        }
    }

    /// The word in parentheses after a verdict with a winner.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Call::Sure => "sure",
            Call::Likely => "likely",
            Call::NoClearDifference => "no clear difference",
            Call::TooFewRuns => "no call",
            Call::Same => "same",
            Call::Negligible => "no practical difference",
            Call::NoData => "no data",
        }
    }
}

/// One cell of the table: a name's median and spread on a column.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Cell {
    pub median: Option<f64>,
    /// Half the range over the repeats, in the unit (None: one run, or no value).
    pub spread: Option<f64>,
    pub runs: usize,
    /// The best of its column (ties all marked; nothing marked with fewer than two values).
    pub best: bool,
    /// The worst of its column, likewise.
    pub worst: bool,
    /// As the text table shows it: `25,310/s ±6%`, `–`.
    pub text: String,
}

/// A column of the table, as it reads.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TableColumn {
    pub column: Column,
    pub better: Better,
    pub header: &'static str,
    /// The row it reads: (group, figure).
    pub group: String,
    pub figure: String,
    pub unit: &'static str,
    /// One per name.
    pub cells: Vec<Cell>,
}

/// A verdict on one column between two names, in words.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PairVerdict {
    pub column: Column,
    pub a: String,
    pub b: String,
    /// The better of the two, when the call is sure or likely.
    pub better: Option<String>,
    /// How many times the better one's median is the other's (larger over smaller).
    pub ratio: Option<f64>,
    pub call: Call,
    /// `go: 2.7× faster setup than python (sure)`.
    pub words: String,
}

/// The headline: the table, every pair's verdicts, and per name its best and worst.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Headline {
    pub names: Vec<String>,
    pub columns: Vec<TableColumn>,
    pub verdicts: Vec<PairVerdict>,
    /// One sentence per name: what it is best at and worst at.
    pub who_is_better: Vec<String>,
}

/// `±6%` of the median; in the unit where the median is 0.
fn spread_text(unit: Unit, median: f64, half: f64) -> String {
    if median != 0.0 {
        let pct = half / median.abs() * 100.0;
        format!("±{}%", num(pct, if pct < 1.0 && pct > 0.0 { 1 } else { 0 }))
    } else {
        format!("±{}", unit.show(half))
    }
}

fn cell(unit: Unit, s: &Spread) -> Cell {
    let spread = s.range().map(|r| r / 2.0);
    let text = match (s.median, spread) {
        (None, _) => "–".to_owned(),
        (Some(m), None) => unit.show(m),
        (Some(m), Some(h)) => format!("{} {}", unit.show(m), spread_text(unit, m, h)),
    };
    Cell {
        median: s.median,
        spread,
        runs: s.n,
        best: false,
        worst: false,
        text,
    }
}

/// Medians closer than this fraction of the larger are no practical difference: the
/// same floor the comparison's spread never goes under (1% of the baseline's median).
const NEGLIGIBLE: f64 = 0.01;

/// `x` and `y` differ by less than [`NEGLIGIBLE`] of the larger.
fn negligible(x: f64, y: f64) -> bool {
    (x - y).abs() < NEGLIGIBLE * x.abs().max(y.abs())
}

/// Marks the best and the worst median of a column: every median within
/// [`NEGLIGIBLE`] of the best (worst) is marked with it, and nothing is marked when at
/// most one name has a value or every value is that close to the best.
fn mark(cells: &mut [Cell], better: Better) {
    let values: Vec<f64> = cells.iter().filter_map(|c| c.median).collect();
    if values.len() < 2 {
        return;
    }
    let (lo, hi) = (
        values.iter().copied().fold(f64::INFINITY, f64::min),
        values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    if negligible(lo, hi) {
        return;
    }
    let (best, worst) = match better {
        Better::Higher => (hi, lo),
        Better::Lower => (lo, hi),
    };
    for c in cells {
        c.best = c.median.is_some_and(|m| negligible(m, best));
        c.worst = c.median.is_some_and(|m| negligible(m, worst));
    }
}

/// How much better `win` is than `lose`: `2.7×` where one is at least twice the other,
/// else a percent of the worse one (`12%`); None where a median is 0.
fn amount(win: f64, lose: f64) -> (Option<f64>, String) {
    let (big, small) = (win.abs().max(lose.abs()), win.abs().min(lose.abs()));
    if small == 0.0 {
        return (None, String::new());
    }
    let ratio = big / small;
    if ratio >= 2.0 {
        let digits = if ratio < 10.0 { 1 } else { 0 };
        (Some(ratio), format!("{}× ", num(ratio, digits)))
    } else {
        let pct = (win - lose).abs() / lose.abs() * 100.0;
        let digits = if pct < 1.0 { 1 } else { 0 };
        (Some(ratio), format!("{}% ", num(pct, digits)))
    }
}

/// The runs' own spread on this pair: the wider of the two names' ranges, as % of its
/// median ("runs vary by up to 90%").
fn vary(a: &Spread, b: &Spread) -> Option<f64> {
    [a, b]
        .iter()
        .filter_map(|s| Some(s.range()? / s.median.filter(|m| *m != 0.0)?.abs() * 100.0))
        .reduce(f64::max)
}

fn verdict(column: Column, unit: Unit, a: &Spread, b: &Spread, d: &Difference) -> PairVerdict {
    let call = match (Call::of(d.verdict), a.median, b.median) {
        // Under 1% apart no number of runs makes a practical difference.
        (
            Call::Likely | Call::Sure | Call::NoClearDifference | Call::TooFewRuns,
            Some(x),
            Some(y),
        ) if negligible(x, y) => Call::Negligible,
        (call, ..) => call,
    };
    let (an, bn) = (a.name.as_str(), b.name.as_str());
    let what = column.what();
    let mut v = PairVerdict {
        column,
        a: an.to_owned(),
        b: bn.to_owned(),
        better: None,
        ratio: None,
        call,
        words: String::new(),
    };
    // Who reads better, whatever the call: (winner, loser, "2.7× faster setup", tail).
    let lead = match (a.median, b.median) {
        (Some(x), Some(y)) if x != y => {
            let a_wins = (x > y) == (column.better() == Better::Higher);
            let (w, l, wv, lv) = if a_wins {
                (an, bn, x, y)
            } else {
                (bn, an, y, x)
            };
            let (ratio, by) = amount(wv, lv);
            v.ratio = ratio;
            // A median of 0 has no ratio: the difference in the unit.
            let tail = match ratio {
                Some(_) => String::new(),
                None => format!(" by {}", unit.show((wv - lv).abs())),
            };
            Some((
                w.to_owned(),
                l.to_owned(),
                format!("{by}{}", column.wins()),
                tail,
            ))
        }
        _ => None,
    };
    v.words = match (call, &lead) {
        (Call::Sure | Call::Likely, Some((w, l, text, tail))) => {
            v.better = Some(w.clone());
            format!("{w}: {text} than {l}{tail} ({})", call.word())
        }
        (Call::TooFewRuns, _) => {
            let few: Vec<String> = [a, b]
                .iter()
                .filter(|s| s.n < MIN_REPEATS)
                .map(|s| {
                    format!(
                        "{} has {} run{}",
                        s.name,
                        s.n,
                        if s.n == 1 { "" } else { "s" }
                    )
                })
                .collect();
            let seen = lead
                .as_ref()
                .map(|(w, _, text, tail)| format!("; measured: {w} {text}{tail}"))
                .unwrap_or_default();
            format!(
                "{an} vs {bn} {what}: no call ({}, {MIN_REPEATS} needed{seen})",
                few.join(" and ")
            )
        }
        (Call::Same, _) => format!("{an} vs {bn} {what}: the same in every run"),
        (Call::Negligible, _) => format!(
            "{an} vs {bn} {what}: no practical difference (under {}%)",
            num(NEGLIGIBLE * 100.0, 0)
        ),
        (Call::NoData, _) => {
            let none: Vec<&str> = [a, b]
                .iter()
                .filter(|s| s.median.is_none())
                .map(|s| s.name.as_str())
                .collect();
            format!("{an} vs {bn} {what}: no data for {}", none.join(" and "))
        }
        _ => match vary(a, b) {
            Some(p) => format!(
                "{an} vs {bn} {what}: no clear difference (runs vary by up to {}%)",
                num(p, 0)
            ),
            None => format!("{an} vs {bn} {what}: no clear difference"),
        },
    };
    v
}

/// What `k` is clearly best (or worst) at: the columns where its median is the best
/// (worst) and its verdict against every other name that has enough runs is at least
/// `likely`, with the weakest of them: `setup rate (sure)`. A lead the runs do not bear
/// out is no finding; names with too few runs are left out of the claim (and named by
/// the sentence), so two failed runs of one server do not silence the whole answer.
fn at(
    h: &[TableColumn],
    verdicts: &[PairVerdict],
    name: &str,
    k: usize,
    best: bool,
) -> Vec<String> {
    h.iter()
        .filter(|c| {
            let cell = &c.cells[k];
            if best { cell.best } else { cell.worst }
        })
        .filter_map(|c| {
            // Its verdicts on this column against every other name with a value.
            let calls: Vec<Call> = verdicts
                .iter()
                .filter(|v| v.column == c.column && (v.a == name || v.b == name))
                .filter(|v| !matches!(v.call, Call::NoData | Call::TooFewRuns))
                .map(|v| {
                    let mine = v.better.as_deref() == Some(name);
                    let theirs = v.better.is_some() && !mine;
                    match (best, mine, theirs) {
                        (true, true, _) | (false, _, true) => v.call,
                        _ => Call::NoClearDifference.min(v.call),
                    }
                })
                .collect();
            let how = match calls.iter().min() {
                Some(Call::Sure) => "sure",
                Some(Call::Likely) => "likely",
                _ => return None,
            };
            Some(format!("{} ({how})", c.column.what()))
        })
        .collect()
}

/// One sentence per name: what it is clearly best and worst at, against the names with
/// enough runs, and which names were too few runs to call against.
fn who_is_better(
    columns: &[TableColumn],
    verdicts: &[PairVerdict],
    names: &[String],
) -> Vec<String> {
    let runs = |k: usize| columns.iter().map(|c| c.cells[k].runs).max().unwrap_or(0);
    let few: Vec<&str> = names
        .iter()
        .enumerate()
        .filter(|&(k, _)| runs(k) < MIN_REPEATS)
        .map(|(_, n)| n.as_str())
        .collect();
    names
        .iter()
        .enumerate()
        .map(|(k, n)| {
            let r = runs(k);
            if r < MIN_REPEATS {
                return format!(
                    "{n}: no call ({r} run{} with figures, {MIN_REPEATS} needed).",
                    if r == 1 { "" } else { "s" }
                );
            }
            let best = at(columns, verdicts, n, k, true);
            let worst = at(columns, verdicts, n, k, false);
            let mut s = match (best.is_empty(), worst.is_empty()) {
                (true, true) => format!("{n}: nothing clearly best or worst"),
                (false, true) => format!("{n}: best at {}", best.join(", ")),
                (true, false) => format!("{n}: worst at {}", worst.join(", ")),
                (false, false) => {
                    format!(
                        "{n}: best at {}; worst at {}",
                        best.join(", "),
                        worst.join(", ")
                    )
                }
            };
            let others: Vec<&str> = few.iter().copied().filter(|f| f != n).collect();
            if !others.is_empty() {
                s.push_str(&format!(
                    " (not called against {}: under {MIN_REPEATS} runs)",
                    others.join(", ")
                ));
            }
            s.push('.');
            s
        })
        .collect()
}

impl Headline {
    /// A column's verdicts as they read: one line when every pair is the same (or no
    /// practical difference) — 15 lines of "the same in every run" said nothing more —
    /// else each pair's words.
    pub(crate) fn column_lines(&self, column: Column) -> Vec<String> {
        let mine: Vec<&PairVerdict> = self
            .verdicts
            .iter()
            .filter(|v| v.column == column)
            .collect();
        let all = |call: Call| mine.len() > 1 && mine.iter().all(|v| v.call == call);
        if all(Call::Same) {
            vec!["the same for every name, in every run".to_owned()]
        } else if mine.len() > 1
            && mine
                .iter()
                .all(|v| matches!(v.call, Call::Same | Call::Negligible))
        {
            vec![format!(
                "no practical difference between any two names (under {}%)",
                num(NEGLIGIBLE * 100.0, 0)
            )]
        } else {
            mine.iter().map(|v| v.words.clone()).collect()
        }
    }
}

/// The headline of `rows` (computed with every pair on the columns' rows).
pub(crate) fn of(rows: &[Row], names: &[String]) -> Headline {
    let mut columns = Vec::new();
    let mut verdicts = Vec::new();
    for column in Column::ALL {
        let Some(row) = column.row(rows) else {
            continue;
        };
        let mut cells: Vec<Cell> = row.cells.iter().map(|s| cell(row.unit, s)).collect();
        mark(&mut cells, column.better());
        let mut pairs = row.pairs.iter();
        for a in 0..names.len() {
            for b in (a + 1)..names.len() {
                if let Some(d) = pairs.next() {
                    verdicts.push(verdict(column, row.unit, &row.cells[a], &row.cells[b], d));
                }
            }
        }
        columns.push(TableColumn {
            column,
            better: column.better(),
            header: column.header(),
            group: row.group.clone(),
            figure: row.figure.clone(),
            unit: row.unit_name,
            cells,
        });
    }
    let who_is_better = if names.len() < 2 {
        Vec::new()
    } else {
        who_is_better(&columns, &verdicts, names)
    };
    Headline {
        names: names.to_vec(),
        columns,
        verdicts,
        who_is_better,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::compare::table::tests_support::row;

    /// Three servers, three runs each: `fast` sets up many times faster than `slow` but
    /// takes more memory; `mid` is close to `fast` on setup and varies much.
    fn three() -> (Vec<String>, Vec<Row>) {
        let names: Vec<String> = ["fast", "mid", "slow"].map(String::from).to_vec();
        let rows = vec![
            row(
                ("Setup", "achieved rate (connected / ramp)"),
                Unit::PerSecond,
                &names,
                &[
                    &[27_000.0, 27_500.0, 28_000.0],
                    &[15_000.0, 22_000.0, 30_000.0],
                    &[10_000.0, 10_100.0, 10_200.0],
                ],
            ),
            row(
                ("Memory per connection", "server, user space"),
                Unit::Bytes,
                &names,
                &[
                    &[30_000.0, 30_100.0, 30_200.0],
                    &[20_000.0, 20_050.0, 20_100.0],
                    &[10_000.0, 10_050.0, 10_100.0],
                ],
            ),
        ];
        (names, rows)
    }

    fn words(h: &Headline, column: Column) -> Vec<&str> {
        h.verdicts
            .iter()
            .filter(|v| v.column == column)
            .map(|v| v.words.as_str())
            .collect()
    }

    /// Issue 32: a server better on one figure and worse on another is called so, in
    /// words, both ways; every pair of three names gets a verdict on each column.
    #[test]
    fn three_servers_get_every_pair_in_words() {
        let (names, rows) = three();
        let h = of(&rows, &names);
        assert_eq!(h.verdicts.len(), 2 * 3);
        assert_eq!(
            words(&h, Column::SetupRate),
            [
                "fast vs mid setup rate: no clear difference (runs vary by up to 68%)",
                "fast: 2.7× faster setup than slow (sure)",
                "mid: 2.2× faster setup than slow (likely)",
            ]
        );
        assert_eq!(
            words(&h, Column::UserMemory),
            [
                "mid: 33% less user memory per connection than fast (sure)",
                "slow: 3.0× less user memory per connection than fast (sure)",
                "slow: 50% less user memory per connection than mid (sure)",
            ]
        );
        let setup = &h.columns[0];
        assert_eq!(setup.better, Better::Higher);
        assert_eq!(
            setup
                .cells
                .iter()
                .map(|c| c.text.as_str())
                .collect::<Vec<_>>(),
            ["27,500/s ±2%", "22,000/s ±34%", "10,100/s ±1.0%"]
        );
        assert_eq!(
            setup
                .cells
                .iter()
                .map(|c| (c.best, c.worst))
                .collect::<Vec<_>>(),
            [(true, false), (false, false), (false, true)]
        );
        assert_eq!(
            h.who_is_better,
            [
                "fast: worst at user memory per connection (sure).",
                "mid: nothing clearly best or worst.",
                "slow: best at user memory per connection (sure); worst at setup rate (likely).",
            ]
        );
    }

    /// Medians under 1% apart are no practical difference, however many runs say they
    /// differ, and star nobody; a column where every pair is so reads as one line.
    #[test]
    fn under_one_percent_apart_is_no_practical_difference() {
        let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let rows = vec![row(
            ("Memory per connection", "kernel, per socket"),
            Unit::Bytes,
            &names,
            &[
                &[4_096.0, 4_096.0, 4_096.0],
                &[4_090.0, 4_090.0, 4_090.0],
                &[4_096.0, 4_096.0],
            ],
        )];
        let h = of(&rows, &names);
        assert_eq!(
            words(&h, Column::KernelMemory),
            [
                "a vs b kernel memory per connection: no practical difference (under 1%)",
                "a vs c kernel memory per connection: the same in every run",
                "b vs c kernel memory per connection: no practical difference (under 1%)",
            ]
        );
        assert!(h.columns[0].cells.iter().all(|c| !c.best && !c.worst));
        assert_eq!(
            h.column_lines(Column::KernelMemory),
            ["no practical difference between any two names (under 1%)"]
        );
    }

    /// A name with too few runs (two failed runs of go) is left out of the others'
    /// claims, and named, instead of silencing every claim.
    #[test]
    fn too_few_runs_of_one_name_leave_the_others_claims() {
        let names: Vec<String> = ["fast", "slow", "go"].map(String::from).to_vec();
        let rows = vec![row(
            ("Setup", "achieved rate (connected / ramp)"),
            Unit::PerSecond,
            &names,
            &[
                &[27_000.0, 27_500.0, 28_000.0],
                &[10_000.0, 10_100.0, 10_200.0],
                &[20_000.0, 21_000.0],
            ],
        )];
        let h = of(&rows, &names);
        assert_eq!(
            h.who_is_better,
            [
                "fast: best at setup rate (sure) (not called against go: under 3 runs).",
                "slow: worst at setup rate (sure) (not called against go: under 3 runs).",
                "go: no call (2 runs with figures, 3 needed).",
            ]
        );
    }

    /// Under three runs a name: no call, said in words with what was measured.
    #[test]
    fn few_runs_make_no_call_in_words() {
        let names: Vec<String> = ["go", "python"].map(String::from).to_vec();
        let rows = vec![row(
            ("Setup", "achieved rate (connected / ramp)"),
            Unit::PerSecond,
            &names,
            &[&[27_000.0], &[10_000.0, 10_100.0]],
        )];
        let h = of(&rows, &names);
        assert_eq!(
            words(&h, Column::SetupRate),
            [
                "go vs python setup rate: no call (go has 1 run and python has 2 runs, 3 needed; measured: go 2.7× faster setup)"
            ]
        );
        assert_eq!(h.columns[0].cells[0].text, "27,000/s");
    }
}
