//! The table every side-by-side bench ends with: per figure and round, c1m's value, the
//! reference's, their ratio and whether it meets the goal, after the box's load at the
//! start of each round, so a reader can check each ratio and see which rounds ran on a
//! busy box (this one swings ±2× by the hour).

use comfy_table::{Cell, CellAlignment, Table, presets::ASCII_MARKDOWN};

/// Which way a figure is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Better {
    /// Rates: more is better, the goal is a floor on the ratio.
    Higher,
    /// Times and bytes: less is better, the goal is a ceiling on the ratio.
    Lower,
}

/// One figure of the bench: its value per round on each side, and its goal.
pub(crate) struct Row {
    pub(crate) figure: &'static str,
    pub(crate) unit: &'static str,
    pub(crate) better: Better,
    /// The goal on the ratio (subject / reference), None: shown, not judged.
    pub(crate) goal: Option<f64>,
    /// (subject, reference) per round.
    pub(crate) rounds: Vec<(f64, f64)>,
}

impl Row {
    fn ratio(subject: f64, reference: f64) -> Option<f64> {
        (reference > 0.0 && subject.is_finite()).then(|| subject / reference)
    }

    fn meets(&self, ratio: f64) -> bool {
        match (self.better, self.goal) {
            (_, None) => true,
            (Better::Higher, Some(g)) => ratio >= g,
            (Better::Lower, Some(g)) => ratio <= g,
        }
    }

    fn goal_text(&self) -> String {
        match (self.better, self.goal) {
            (_, None) => "-".to_owned(),
            (Better::Higher, Some(g)) => format!("≥ {g:.2}"),
            (Better::Lower, Some(g)) => format!("≤ {g:.2}"),
        }
    }

    /// Met on every round (the goal is per round, not the median's).
    pub(crate) fn met_every_round(&self) -> bool {
        self.goal.is_none()
            || self
                .rounds
                .iter()
                .all(|&(s, r)| Row::ratio(s, r).is_some_and(|x| self.meets(x)))
    }
}

/// The box when a round started: the 1-minute load average and the CPU share busy over
/// the settle's last half second.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct BoxLoad {
    pub(crate) load_1m: f64,
    pub(crate) busy_share: f64,
}

impl BoxLoad {
    /// /proc/loadavg's first field now, with the busy share the caller measured.
    pub(crate) fn now(busy_share: f64) -> BoxLoad {
        let load_1m = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(f64::NAN);
        BoxLoad {
            load_1m,
            busy_share,
        }
    }
}

fn value(x: f64) -> String {
    if !x.is_finite() {
        "n/a".to_owned()
    } else if x.abs() >= 100.0 {
        let whole = x.round() as i64;
        let digits = whole.abs().to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        if whole < 0 { format!("-{out}") } else { out }
    } else {
        format!("{x:.2}")
    }
}

/// The table as text: loads per round, then one line per figure and round.
pub(crate) fn render(subject: &str, reference: &str, loads: &[BoxLoad], rows: &[Row]) -> String {
    let mut load = Table::new();
    load.load_style(ASCII_MARKDOWN)
        .set_header(["round", "load (1 min)", "CPU busy at start"]);
    for (i, l) in loads.iter().enumerate() {
        load.add_row([
            Cell::new(i + 1),
            Cell::new(format!("{:.2}", l.load_1m)).set_alignment(CellAlignment::Right),
            Cell::new(format!("{:.0}%", l.busy_share * 100.0)).set_alignment(CellAlignment::Right),
        ]);
    }
    let mut t = Table::new();
    t.load_style(ASCII_MARKDOWN).set_header([
        "figure".to_owned(),
        "round".to_owned(),
        subject.to_owned(),
        reference.to_owned(),
        format!("{subject} / {reference}"),
        "goal".to_owned(),
        "met".to_owned(),
    ]);
    for row in rows {
        for (i, &(s, r)) in row.rounds.iter().enumerate() {
            let ratio = Row::ratio(s, r);
            let met = match (row.goal, ratio) {
                (None, _) => "",
                (Some(_), None) => "n/a",
                (Some(_), Some(x)) if row.meets(x) => "yes",
                (Some(_), Some(_)) => "NO",
            };
            let right = |text: String| Cell::new(text).set_alignment(CellAlignment::Right);
            t.add_row([
                Cell::new(if i == 0 {
                    format!("{} ({})", row.figure, row.unit)
                } else {
                    String::new()
                }),
                Cell::new(i + 1),
                right(value(s)),
                right(value(r)),
                right(ratio.map_or("n/a".to_owned(), |x| format!("{x:.2}"))),
                Cell::new(if i == 0 {
                    row.goal_text()
                } else {
                    String::new()
                }),
                Cell::new(met),
            ]);
        }
    }
    let every: Vec<&str> = rows
        .iter()
        .filter(|r| r.goal.is_some())
        .map(|r| if r.met_every_round() { "met" } else { "missed" })
        .collect();
    let summary = format!(
        "goals met on every round: {} of {}",
        every.iter().filter(|m| **m == "met").count(),
        every.len()
    );
    format!("{load}\n{t}\n{summary}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_round_is_judged_on_its_own_ratio() {
        let rows = [
            Row {
                figure: "WebSocket ramp",
                unit: "conn/s",
                better: Better::Higher,
                goal: Some(0.95),
                rounds: vec![(19_000.0, 20_000.0), (18_000.0, 20_000.0)],
            },
            Row {
                figure: "push, last frame",
                unit: "s",
                better: Better::Lower,
                goal: Some(1.0),
                rounds: vec![(12.0, 12.5), (13.0, 12.5)],
            },
            Row {
                figure: "bytes per idle connection",
                unit: "B",
                better: Better::Lower,
                goal: None,
                rounds: vec![(40.0, 0.0), (41.0, 0.0)],
            },
        ];
        assert!(!rows[0].met_every_round(), "round 2 is 0.90");
        assert!(!rows[1].met_every_round(), "round 2 is 1.04");
        assert!(rows[2].met_every_round(), "no goal");
        let loads = [
            BoxLoad {
                load_1m: 0.5,
                busy_share: 0.03,
            },
            BoxLoad {
                load_1m: 3.25,
                busy_share: 0.31,
            },
        ];
        let text = render("c1m", "C", &loads, &rows);
        for want in [
            "3.25",
            "31%",
            "19,000",
            "20,000",
            "0.95",
            "0.90",
            "≥ 0.95",
            "≤ 1.00",
            "1.04",
            "NO",
            "yes",
            "n/a",
            "goals met on every round: 0 of 2",
        ] {
            assert!(text.contains(want), "{want} missing in\n{text}");
        }
    }
}
