//! Line charts as inline SVG: no script, no fonts, readable offline and in a screenshot.
//! Each chart is a `<figure id=… data-points=N data-stale-points=S data-x-min=… data-x-max=…>`
//! (N fresh points drawn, S stale ones, the x axis's range: for the browser test and the
//! band tests) with a title, an HTML legend and an `<svg>` with labelled axes.
//!
//! Time charts carry the run's phases: shaded bands at each phase's own start and end for
//! one run, or one strip per run under the axis ([`Lane`]) when several runs share a
//! chart. A stale figure (its source older than the stale limit at that second) is drawn
//! as a ring, not joined to the line, with a legend entry saying so.
//!
//! This file holds what a chart is made of; [`axis`] computes the y axis and the ticks,
//! [`render`] draws a chart as SVG with maud, which escapes every label, title and id
//! (run names and folder names reach them); the numbers are formatted here.

mod axis;
mod render;

use maud::{Markup, html};

/// The two chart sizes: a report's wide chart and a comparison's small multiple. The
/// viewBox shrinks with the display width, so the text keeps its size on the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Size {
    #[default]
    Wide,
    Small,
}

impl Size {
    /// (width, height) of the plot's viewBox, lanes not included.
    pub(super) fn dims(self) -> (f64, f64) {
        match self {
            Size::Wide => (680.0, 270.0),
            Size::Small => (470.0, 230.0),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum XAxis {
    /// Seconds since the run started.
    Seconds,
    /// HdrHistogram plotter axis: log10 of 1/(1-p); points carry x = 1/(1-p).
    Percentile,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum YUnit {
    Count,
    Bytes,
    Plain,
}

/// How the y axis fits the values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum YScale {
    /// 0 to the largest value: for charts whose largest value is the point (a latency
    /// distribution's tail).
    Full,
    /// 0 to at most twice the 95th percentile of the plotted values; points above are
    /// drawn on the top edge, marked, and counted in a note. A start-up spike (RSS over a
    /// handful of connections, a rate over a short interval) is 10–1000× what the run
    /// holds and would flatten every other line; a real peak of a run is rarely more than
    /// twice what it holds for 5% of its samples, so it stays on the axis.
    Robust,
    /// Logarithmic, powers of 4 for bytes (16 B, 64 B, … 4 KiB) and of 10 otherwise, with
    /// the [`YScale::Robust`] top: for lines of different orders of magnitude (31 B of user
    /// space beside 4 KiB of kernel per socket), which no linear axis shows both of.
    Log,
}

/// A shape drawn along a line, for lines that share a colour and a dash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
}

impl Marker {
    /// The marker centred on (x, y), filled with `color`.
    pub(crate) fn svg(self, x: f64, y: f64, color: &str) -> Markup {
        let r = 3.2;
        match self {
            Marker::Circle => html! {
                circle.marker cx=(f1(x)) cy=(f1(y)) r=(r) fill=(color) {}
            },
            Marker::Square => html! {
                rect.marker x=(f1(x - r)) y=(f1(y - r)) width=(f1(2.0 * r)) height=(f1(2.0 * r))
                    fill=(color) {}
            },
            Marker::Triangle => html! {
                path.marker d=(format!(
                    "M{x:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z",
                    y - r - 0.6,
                    x + r + 0.4,
                    y + r,
                    x - r - 0.4,
                    y + r
                )) fill=(color) {}
            },
            Marker::Diamond => html! {
                path.marker d=(format!(
                    "M{x:.1} {:.1}L{:.1} {y:.1}L{x:.1} {:.1}L{:.1} {y:.1}Z",
                    y - r - 0.5,
                    x + r + 0.5,
                    y + r + 0.5,
                    x - r - 0.5
                )) fill=(color) {}
            },
        }
    }
}

/// A coordinate with one decimal, as every position in the SVG is written.
fn f1(v: f64) -> String {
    format!("{v:.1}")
}

/// A line's points: (x, y), `None` where the line breaks.
pub(crate) type Points = Vec<(f64, Option<f64>)>;

/// Points drawn apart from the line: (x, y).
pub(crate) type Marks = Vec<(f64, f64)>;

#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub label: String,
    pub color: &'static str,
    /// SVG `stroke-dasharray`, e.g. "6 4".
    pub dash: Option<&'static str>,
    pub width: f64,
    pub marker: Option<Marker>,
    /// `None` breaks the line (no sample, or a stale one: see `stale`).
    pub points: Points,
    /// Values whose source was stale at that instant: drawn as rings, never joined.
    pub stale: Marks,
}

impl Series {
    /// A plain solid line of `points`.
    pub(crate) fn line(label: String, color: &'static str, points: Points) -> Series {
        Series {
            label,
            color,
            dash: None,
            width: 2.0,
            marker: None,
            points,
            stale: Vec::new(),
        }
    }
}

/// A phase of a run on the time axis, from its start to its end (seconds since the run
/// started).
#[derive(Debug, Clone)]
pub(crate) struct Band {
    pub x0: f64,
    pub x1: f64,
    pub label: String,
}

/// One run's phases as a strip under the x axis, in the run's colour: for a chart with
/// several runs, whose phases do not line up.
#[derive(Debug, Clone)]
pub(crate) struct Lane {
    pub label: String,
    pub color: &'static str,
    pub bands: Vec<Band>,
}

#[derive(Debug, Clone)]
pub(crate) struct Chart {
    pub id: String,
    pub title: String,
    /// One line under the title: what the chart shows and how to read it.
    pub note: String,
    pub size: Size,
    pub x: XAxis,
    pub x_label: String,
    pub y: YUnit,
    pub y_scale: YScale,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Shaded behind the lines (one run's phases).
    pub bands: Vec<Band>,
    /// Strips under the axis (each run's phases).
    pub lanes: Vec<Lane>,
    /// Values the y axis spans besides the chart's own: the other parts of a figure split
    /// over several charts, so every part of it reads on one scale.
    pub y_include: Vec<f64>,
}
