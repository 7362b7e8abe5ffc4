//! Line charts as inline SVG: no script, no fonts, readable offline and in a screenshot.
//! Each chart is a `<figure id=… data-points=N data-stale-points=S data-x-min=… data-x-max=…>`
//! (N fresh points drawn, S stale ones, the x axis's range: for the browser test and the
//! band tests) with a title, an HTML legend and an `<svg>` with labelled axes.
//!
//! Time charts carry the run's phases: shaded bands at each phase's own start and end for
//! one run, or one strip per run under the axis ([`Lane`]) when several runs share a
//! chart. A stale figure (its source older than the stale limit at that second) is drawn
//! as a ring, not joined to the line, with a legend entry saying so.

use std::fmt::Write as _;

use super::fmt::{bytes, esc, num};

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
    fn dims(self) -> (f64, f64) {
        match self {
            Size::Wide => (680.0, 270.0),
            Size::Small => (470.0, 230.0),
        }
    }
}

const LEFT: f64 = 70.0;
const RIGHT: f64 = 14.0;
/// Room for half of the last percentile label (`99.99999%`) right of the frame.
const RIGHT_PERCENTILE: f64 = 34.0;
const TOP: f64 = 20.0;
const BOTTOM: f64 = 46.0;
/// Height of one run's phase strip under the x axis.
const LANE_H: f64 = 12.0;
/// Above this many points a series is thinned to the min and max of each x slot.
const MAX_POINTS: usize = 2400;
/// Markers drawn along a line that has one: enough to tell it apart, few enough to read.
const MARKERS_PER_LINE: usize = 10;

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
    pub fn svg(self, x: f64, y: f64, color: &str) -> String {
        let r = 3.2;
        match self {
            Marker::Circle => {
                format!(
                    "<circle class=\"marker\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r}\" fill=\"{color}\" />"
                )
            }
            Marker::Square => format!(
                "<rect class=\"marker\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{color}\" />",
                x - r,
                y - r,
                2.0 * r,
                2.0 * r
            ),
            Marker::Triangle => format!(
                "<path class=\"marker\" d=\"M{x:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z\" fill=\"{color}\" />",
                y - r - 0.6,
                x + r + 0.4,
                y + r,
                x - r - 0.4,
                y + r
            ),
            Marker::Diamond => format!(
                "<path class=\"marker\" d=\"M{x:.1} {:.1}L{:.1} {y:.1}L{x:.1} {:.1}L{:.1} {y:.1}Z\" fill=\"{color}\" />",
                y - r - 0.5,
                x + r + 0.5,
                y + r + 0.5,
                x - r - 0.5
            ),
        }
    }
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
    pub fn line(label: String, color: &'static str, points: Points) -> Series {
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
}

/// The y axis as drawn: its range, ticks (value, label) and whether it is logarithmic.
struct YAxis {
    lo: f64,
    hi: f64,
    log: bool,
    ticks: Vec<(f64, String)>,
}

impl YAxis {
    /// Fraction of the plot height of `y` (0 bottom, 1 top), clipped to the axis.
    fn frac(&self, y: f64) -> f64 {
        let f = if self.log {
            (y.max(self.lo).log10() - self.lo.log10())
                / (self.hi.log10() - self.lo.log10()).max(f64::MIN_POSITIVE)
        } else {
            (y - self.lo) / (self.hi - self.lo).max(f64::MIN_POSITIVE)
        };
        f.clamp(0.0, 1.0)
    }
}

/// The value at quantile `q` of `v` (nearest rank), `v` sorted.
fn quantile(v: &[f64], q: f64) -> f64 {
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len().max(1)) - 1;
    v.get(i).copied().unwrap_or(0.0)
}

/// The top of a [`YScale::Robust`] axis for these values: their largest, or twice their
/// 95th percentile if that is lower.
pub(crate) fn robust_top(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|y| y.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let max = v.last().copied().unwrap_or(0.0);
    let p95 = quantile(&v, 0.95);
    if p95 > 0.0 { max.min(2.0 * p95) } else { max }
}

impl Chart {
    fn drawn(&self) -> Vec<Vec<(f64, f64)>> {
        // Segments of finite points, per series; `Percentile` maps x to log10.
        self.series
            .iter()
            .map(|s| {
                thin(&s.points)
                    .into_iter()
                    .map(|(x, y)| {
                        let x = match self.x {
                            XAxis::Seconds => Some(x),
                            XAxis::Percentile => (x >= 1.0).then(|| x.log10()),
                        };
                        (x.unwrap_or(f64::NAN), y.unwrap_or(f64::NAN))
                    })
                    .collect()
            })
            .collect()
    }

    /// Each series' stale points that can be drawn (thinned like the lines).
    fn drawn_stale(&self) -> Vec<Vec<(f64, f64)>> {
        self.series
            .iter()
            .map(|s| {
                let step = s.stale.len().div_ceil(MAX_POINTS / 2).max(1);
                s.stale
                    .iter()
                    .step_by(step)
                    .copied()
                    .filter(|p| p.0.is_finite() && p.1.is_finite())
                    .collect()
            })
            .collect()
    }

    fn y_axis(&self, ys: &[f64]) -> YAxis {
        if self.y_scale == YScale::Log {
            let pos: Vec<f64> = ys.iter().copied().filter(|y| *y > 0.0).collect();
            let base: f64 = if self.y == YUnit::Bytes { 4.0 } else { 10.0 };
            let lo_v = pos.iter().copied().fold(f64::MAX, f64::min);
            // Robust at the top as well: decades spent on a spike are decades taken from
            // the lines the run holds.
            let hi_v = robust_top(&pos);
            let (a, mut b) = if pos.is_empty() {
                (0, 1)
            } else {
                (
                    (lo_v.log(base) + 1e-9).floor() as i32,
                    (hi_v.log(base) - 1e-9).ceil() as i32,
                )
            };
            if b <= a {
                b = a + 1;
            }
            let ticks = (a..=b)
                .map(|k| {
                    let v = base.powi(k);
                    let label = if self.y == YUnit::Bytes {
                        bytes_tick(v)
                    } else {
                        num(v, decimals(&[v]))
                    };
                    (v, label)
                })
                .collect();
            return YAxis {
                lo: base.powi(a),
                hi: base.powi(b),
                log: true,
                ticks,
            };
        }
        let y0 = ys.iter().copied().fold(0.0f64, f64::min);
        let mut y1 = match self.y_scale {
            YScale::Robust => robust_top(ys),
            _ => ys.iter().copied().fold(f64::MIN, f64::max),
        };
        if y1 <= y0 {
            y1 = y0 + 1.0;
        }
        let (yscale, ysuffix) = match self.y {
            YUnit::Bytes => bytes_scale(y1),
            YUnit::Count => count_scale(y1),
            YUnit::Plain => (1.0, ""),
        };
        let yt = nice_ticks(y0 / yscale, y1 / yscale, 5);
        let ydec = decimals(&yt);
        YAxis {
            lo: yt.first().copied().unwrap_or(0.0) * yscale,
            hi: yt.last().copied().unwrap_or(1.0) * yscale,
            log: false,
            ticks: yt
                .iter()
                .map(|v| {
                    let label = if *v == 0.0 {
                        "0".to_owned()
                    } else {
                        format!("{}{ysuffix}", num(*v, ydec))
                    };
                    (v * yscale, label)
                })
                .collect(),
        }
    }

    pub fn render(&self) -> String {
        let (w, h) = self.size.dims();
        let series = self.drawn();
        let stale = self.drawn_stale();
        let finite = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite();
        let ys: Vec<f64> = series
            .iter()
            .flatten()
            .filter(finite)
            .chain(stale.iter().flatten())
            .map(|p| p.1)
            .collect();
        let axis = self.y_axis(&ys);
        let above: Vec<f64> = ys.iter().copied().filter(|y| *y > axis.hi).collect();
        let n: usize = series.iter().map(|s| s.iter().filter(finite).count()).sum();
        let n_stale: usize = stale.iter().map(Vec::len).sum();
        // The x domain: every point, stale ones too, and every phase.
        let (mut x0, mut x1) = (f64::MAX, f64::MIN);
        for &(x, _) in series
            .iter()
            .flatten()
            .filter(finite)
            .chain(stale.iter().flatten())
        {
            x0 = x0.min(x);
            x1 = x1.max(x);
        }
        for b in self
            .bands
            .iter()
            .chain(self.lanes.iter().flat_map(|l| &l.bands))
        {
            x0 = x0.min(b.x0);
            x1 = x1.max(b.x1);
        }
        let xticks = match self.x {
            XAxis::Seconds => {
                let t = nice_ticks(x0.min(0.0), x1.max(x0 + 1.0), 8);
                x0 = t.first().copied().unwrap_or(x0);
                x1 = t.last().copied().unwrap_or(x1);
                t.into_iter()
                    .map(|v| (v, num(v, decimals(&[v]))))
                    .collect::<Vec<_>>()
            }
            XAxis::Percentile => {
                x0 = 0.0;
                x1 = x1.ceil().max(2.0);
                (0..=x1 as i32)
                    .map(|k| (f64::from(k), percentile_label(k)))
                    .collect()
            }
        };
        let mut out = String::new();
        let _ = write!(
            out,
            "<figure class=\"chart\" id=\"{}\" data-points=\"{n}\" data-stale-points=\"{n_stale}\" data-x-min=\"{}\" data-x-max=\"{}\" data-y-min=\"{}\" data-y-max=\"{}\"><figcaption><b>{}</b><span>{}</span></figcaption><div class=\"legend\">",
            esc(&self.id),
            if n + n_stale > 0 { x0 } else { 0.0 },
            if n + n_stale > 0 { x1 } else { 0.0 },
            axis.lo,
            axis.hi,
            esc(&self.title),
            esc(&self.note)
        );
        for s in &self.series {
            let _ = write!(
                out,
                "<span><svg width=\"26\" height=\"10\" aria-hidden=\"true\"><line x1=\"1\" y1=\"5\" x2=\"25\" y2=\"5\" stroke=\"{}\" stroke-width=\"{}\"{} />{}</svg>{}</span>",
                s.color,
                s.width.max(2.0),
                dash_attr(s.dash),
                s.marker
                    .map(|m| m.svg(13.0, 5.0, s.color))
                    .unwrap_or_default(),
                esc(&s.label)
            );
        }
        if n_stale > 0 {
            let _ = write!(
                out,
                "<span class=\"stalekey\"><svg width=\"26\" height=\"10\" aria-hidden=\"true\">{}</svg>stale: the figure's source was more than {} s old at that second (not joined to the line)</span>",
                stale_ring(13.0, 5.0, "#6b7280"),
                num(crate::lab::model::STALE_AFTER_S, 0)
            );
        }
        if !self.lanes.is_empty() {
            out.push_str(
                "<span class=\"lanekey\">strips under the axis: each run's phases, from start to end</span>",
            );
        }
        out.push_str("</div>");
        let full_h = h + self.lanes.len() as f64 * LANE_H;
        let _ = write!(
            out,
            "<svg viewBox=\"0 0 {w} {full_h}\" role=\"img\" aria-label=\"{}\">",
            esc(&self.title)
        );
        if n + n_stale == 0 {
            let _ = write!(
                out,
                "<text x=\"{}\" y=\"{}\" class=\"nodata\">no data in this run</text></svg></figure>",
                w / 2.0,
                h / 2.0
            );
            return out;
        }
        let right = match self.x {
            XAxis::Seconds => RIGHT,
            XAxis::Percentile => RIGHT_PERCENTILE,
        };
        let pw = w - LEFT - right;
        let ph = h - TOP - BOTTOM;
        let sx = |x: f64| LEFT + (x - x0) / (x1 - x0).max(f64::MIN_POSITIVE) * pw;
        let sy = |y: f64| TOP + ph - axis.frac(y) * ph;
        // Phase bands, behind everything: each at its own start and end.
        for (i, b) in self.bands.iter().enumerate() {
            let (a, z) = (sx(b.x0.max(x0)), sx(b.x1.min(x1)));
            if z < a {
                continue;
            }
            let _ = write!(
                out,
                "<rect class=\"band{}\" data-phase=\"{}\" x=\"{a:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{ph}\" />",
                if i % 2 == 0 { "" } else { " alt" },
                esc(&b.label),
                z - a
            );
            // Uppercase 10 px with letter spacing: about 7 px a character.
            if z - a >= b.label.chars().count() as f64 * 7.0 + 4.0 {
                let _ = write!(
                    out,
                    "<text class=\"bandlabel\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                    a + 3.0,
                    TOP - 6.0,
                    esc(&b.label)
                );
            }
            for edge in [a, z] {
                let _ = write!(
                    out,
                    "<line class=\"bandedge\" x1=\"{edge:.1}\" y1=\"{TOP}\" x2=\"{edge:.1}\" y2=\"{:.1}\" />",
                    TOP + ph
                );
            }
        }
        // Grid and tick labels.
        for (v, label) in &axis.ticks {
            let y = sy(*v);
            let _ = write!(
                out,
                "<line class=\"grid\" x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" /><text class=\"ytick\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                w - right,
                LEFT - 6.0,
                y + 4.0,
                esc(label)
            );
        }
        for (v, label) in &xticks {
            let x = sx(*v);
            let _ = write!(
                out,
                "<line class=\"grid\" x1=\"{x:.1}\" y1=\"{TOP}\" x2=\"{x:.1}\" y2=\"{:.1}\" /><text class=\"xtick\" x=\"{x:.1}\" y=\"{:.1}\">{}</text>",
                TOP + ph,
                TOP + ph + 16.0,
                esc(label)
            );
        }
        let _ = write!(
            out,
            "<rect class=\"frame\" x=\"{LEFT}\" y=\"{TOP}\" width=\"{pw}\" height=\"{ph}\" />\
             <text class=\"xlabel\" x=\"{:.1}\" y=\"{:.1}\">{}</text>\
             <text class=\"ylabel\" transform=\"translate(14 {:.1}) rotate(-90)\">{}</text>",
            LEFT + pw / 2.0,
            h - 8.0,
            esc(&self.x_label),
            TOP + ph / 2.0,
            esc(&self.y_label)
        );
        // Each run's phases, one strip per run under the axis label.
        for (k, lane) in self.lanes.iter().enumerate() {
            let y = h + k as f64 * LANE_H;
            let _ = write!(
                out,
                "<text class=\"lanelabel\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                LEFT - 6.0,
                y + LANE_H - 3.0,
                esc(&crate::fmt::ellipsis(&lane.label, 11))
            );
            for (i, b) in lane.bands.iter().enumerate() {
                let (a, z) = (sx(b.x0.max(x0)), sx(b.x1.min(x1)));
                if z < a {
                    continue;
                }
                let _ = write!(
                    out,
                    "<rect class=\"lane\" data-run=\"{}\" data-phase=\"{}\" x=\"{a:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\" fill-opacity=\"{}\"><title>{}: {}</title></rect>",
                    esc(&lane.label),
                    esc(&b.label),
                    y + 1.0,
                    (z - a).max(0.8),
                    LANE_H - 2.0,
                    lane.color,
                    if i % 2 == 0 { "0.55" } else { "0.3" },
                    esc(&lane.label),
                    esc(&b.label)
                );
                // Lowercase 9 px: about 5.2 px a character.
                if z - a >= b.label.chars().count() as f64 * 5.2 + 4.0 {
                    let _ = write!(
                        out,
                        "<text class=\"lanephase\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                        a + 2.0,
                        y + LANE_H - 3.0,
                        esc(&b.label)
                    );
                }
            }
        }
        // The lines, first series on top: draw in reverse.
        for ((s, pts), rings) in self.series.iter().zip(&series).zip(&stale).rev() {
            let mut d = String::new();
            let mut pen_up = true;
            let mut marks = String::new();
            let mut drawn = Vec::new();
            for &(x, y) in pts {
                // A log axis has no place for 0: a gap, like a missing sample.
                if !(x.is_finite() && y.is_finite()) || (axis.log && y <= 0.0) {
                    pen_up = true;
                    continue;
                }
                let (px, py) = (sx(x), sy(y));
                let _ = write!(d, "{}{px:.1} {py:.1}", if pen_up { "M" } else { "L" });
                pen_up = false;
                drawn.push((px, py));
                if y > axis.hi {
                    // Clipped: drawn on the top edge, marked with a caret.
                    let _ = write!(
                        marks,
                        "<path class=\"clipped\" d=\"M{:.1} {:.1}L{px:.1} {TOP:.1}L{:.1} {:.1}Z\" fill=\"{}\" />",
                        px - 3.5,
                        TOP + 6.0,
                        px + 3.5,
                        TOP + 6.0,
                        s.color
                    );
                }
            }
            for &(x, y) in rings {
                if !(axis.log && y <= 0.0) {
                    out.push_str(&stale_ring(sx(x), sy(y), s.color));
                }
            }
            if d.is_empty() {
                continue;
            }
            let _ = write!(
                out,
                "<path d=\"{d}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{} stroke-linejoin=\"round\"><title>{}</title></path>",
                s.color,
                s.width,
                dash_attr(s.dash),
                esc(&s.label)
            );
            out.push_str(&marks);
            if let Some(m) = s.marker {
                let step = drawn.len().div_ceil(MARKERS_PER_LINE).max(1);
                for &(px, py) in drawn.iter().skip(step / 2).step_by(step) {
                    out.push_str(&m.svg(px, py, s.color));
                }
            } else if let [(px, py)] = drawn[..] {
                // A lone point would be invisible as a path.
                let _ = write!(
                    out,
                    "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"2.5\" fill=\"{}\" />",
                    s.color
                );
            }
        }
        if let Some(max) = above.iter().copied().reduce(f64::max) {
            let v = match self.y {
                YUnit::Bytes => bytes(max),
                YUnit::Count => num(max, 0),
                YUnit::Plain => num(max, 2),
            };
            let _ = write!(
                out,
                "<text class=\"clipnote\" x=\"{:.1}\" y=\"{:.1}\">▲ {} above the axis (up to {})</text>",
                w - right - 4.0,
                TOP + 16.0,
                above.len(),
                esc(&v)
            );
        }
        out.push_str("</svg></figure>");
        out
    }
}

/// A stale value: a ring in the line's colour.
fn stale_ring(x: f64, y: f64, color: &str) -> String {
    format!(
        "<circle class=\"stale\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2.8\" fill=\"#fff\" stroke=\"{color}\" stroke-width=\"1.4\" />"
    )
}

/// A power of 4 bytes as a tick label: `16 B`, `4 KiB`, `256 MiB`.
fn bytes_tick(v: f64) -> String {
    let (x, unit) = match v {
        v if v >= 1024.0 * 1024.0 * 1024.0 => (v / (1024.0 * 1024.0 * 1024.0), "GiB"),
        v if v >= 1024.0 * 1024.0 => (v / (1024.0 * 1024.0), "MiB"),
        v if v >= 1024.0 => (v / 1024.0, "KiB"),
        v => (v, "B"),
    };
    format!("{} {unit}", num(x, decimals(&[x])))
}

fn dash_attr(d: Option<&str>) -> String {
    d.map(|d| format!(" stroke-dasharray=\"{d}\""))
        .unwrap_or_default()
}

/// `0` → 0%, `1` → 90%, `2` → 99%, `3` → 99.9%…
fn percentile_label(k: i32) -> String {
    match k {
        0 => "0%".to_owned(),
        1 => "90%".to_owned(),
        k => format!("99.{}%", "9".repeat((k - 2) as usize)).replace("99.%", "99%"),
    }
}

/// Keeps the first, last, min and max point of each of MAX_POINTS/2 slots.
fn thin(points: &[(f64, Option<f64>)]) -> Vec<(f64, Option<f64>)> {
    if points.len() <= MAX_POINTS {
        return points.to_vec();
    }
    let slot = points.len().div_ceil(MAX_POINTS / 2);
    let mut out = Vec::with_capacity(MAX_POINTS + 2);
    for chunk in points.chunks(slot) {
        let finite: Vec<(usize, f64)> = chunk
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.1.filter(|y| y.is_finite()).map(|y| (i, y)))
            .collect();
        if finite.len() < chunk.len() {
            // A gap in the slot: keep the gap.
            out.push((chunk[0].0, None));
        }
        let lo = finite.iter().min_by(|a, b| a.1.total_cmp(&b.1));
        let hi = finite.iter().max_by(|a, b| a.1.total_cmp(&b.1));
        if let (Some(&(li, _)), Some(&(hi_i, _))) = (lo, hi) {
            let (a, b) = (li.min(hi_i), li.max(hi_i));
            out.push(chunk[a]);
            if b != a {
                out.push(chunk[b]);
            }
        }
    }
    out
}

/// About `target` round ticks covering [lo, hi]: steps of 1, 2, 2.5 or 5 × 10^k.
pub(crate) fn nice_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return vec![lo, lo + 1.0];
    }
    let raw = (hi - lo) / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).floor();
    let last = (hi / step).ceil();
    (first as i64..=last as i64)
        .map(|i| i as f64 * step)
        .collect()
}

/// Decimals needed to print every tick distinctly.
fn decimals(ticks: &[f64]) -> usize {
    (0..4)
        .find(|d| {
            ticks
                .iter()
                .all(|t| ((t * 10f64.powi(*d)).round() - t * 10f64.powi(*d)).abs() < 1e-6)
        })
        .unwrap_or(4) as usize
}

fn bytes_scale(max: f64) -> (f64, &'static str) {
    match max {
        m if m >= 1024.0 * 1024.0 * 1024.0 => (1024.0 * 1024.0 * 1024.0, " GiB"),
        m if m >= 1024.0 * 1024.0 => (1024.0 * 1024.0, " MiB"),
        m if m >= 1024.0 => (1024.0, " KiB"),
        _ => (1.0, " B"),
    }
}

fn count_scale(max: f64) -> (f64, &'static str) {
    match max {
        m if m >= 1e6 => (1e6, "M"),
        m if m >= 1e4 => (1e3, "k"),
        _ => (1.0, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(
            nice_ticks(0.0, 1_000_000.0, 5),
            [0.0, 200_000.0, 400_000.0, 600_000.0, 800_000.0, 1_000_000.0]
        );
        assert_eq!(
            nice_ticks(0.0, 72.0, 8),
            [0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0]
        );
        assert_eq!(percentile_label(2), "99%");
        assert_eq!(percentile_label(4), "99.99%");
    }

    #[test]
    fn robust_top_ignores_a_spike_but_keeps_real_peaks() {
        let mut v = vec![100.0; 60];
        v.extend([5_000.0, 90_000.0]);
        assert_eq!(robust_top(&v), 200.0);
        // A peak held for more than 5% of the samples is the run's, not a spike.
        let mut ramp: Vec<f64> = (0..50).map(f64::from).collect();
        ramp.extend([400.0; 10]);
        assert_eq!(robust_top(&ramp), 400.0);
        assert_eq!(robust_top(&[]), 0.0);
    }

    #[test]
    fn chart_counts_points_and_breaks_gaps() {
        let c = Chart {
            id: "c".into(),
            title: "t".into(),
            note: String::new(),
            size: Size::Wide,
            x: XAxis::Seconds,
            x_label: "s".into(),
            y: YUnit::Count,
            y_scale: YScale::Full,
            y_label: "n".into(),
            series: vec![Series {
                width: 1.5,
                ..Series::line(
                    "a".into(),
                    "#000",
                    vec![
                        (0.0, Some(1.0)),
                        (1.0, None),
                        (2.0, Some(3.0)),
                        (3.0, Some(4.0)),
                    ],
                )
            }],
            bands: vec![],
            lanes: vec![],
        };
        let svg = c.render();
        assert!(svg.contains("data-points=\"3\""), "{svg}");
        let d = svg
            .split("<path d=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert_eq!(d.matches('M').count(), 2, "{d}");
        let many: Vec<_> = (0..10_000)
            .map(|i| (f64::from(i), Some(f64::from(i % 7))))
            .collect();
        assert!(thin(&many).len() <= MAX_POINTS + 2);
    }
}
