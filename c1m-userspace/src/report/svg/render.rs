//! A chart drawn as inline SVG: the frame, grid and ticks, the phases as bands or lanes,
//! each series thinned to what can be seen, its stale values as rings, and the legend.

use std::fmt::Write as _;

use maud::{Markup, html};

use super::{
    Chart, XAxis, YUnit,
    axis::{YAxis, decimals, nice_ticks, percentile_label},
    f1,
};
use crate::report::fmt::{bytes, num};

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

    pub(crate) fn render(&self) -> Markup {
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
        let spanned: Vec<f64> = ys
            .iter()
            .chain(self.y_include.iter().filter(|y| y.is_finite()))
            .copied()
            .collect();
        let axis = self.y_axis(&spanned);
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
        let any = n + n_stale > 0;
        let right = match self.x {
            XAxis::Seconds => RIGHT,
            XAxis::Percentile => RIGHT_PERCENTILE,
        };
        let plot = Plot {
            x0,
            x1,
            pw: w - LEFT - right,
            ph: h - TOP - BOTTOM,
            axis: &axis,
        };
        let full_h = h + self.lanes.len() as f64 * LANE_H;
        html! {
            figure.chart id=(self.id) data-points=(n) data-stale-points=(n_stale)
                data-x-min=(if any { x0 } else { 0.0 }) data-x-max=(if any { x1 } else { 0.0 })
                data-y-min=(axis.lo) data-y-max=(axis.hi)
            {
                figcaption { b { (self.title) } span { (self.note) } }
                div.legend {
                    @for s in &self.series {
                        span {
                            svg width="26" height="10" aria-hidden="true" {
                                line x1="1" y1="5" x2="25" y2="5" stroke=(s.color)
                                    stroke-width=(s.width.max(2.0)) stroke-dasharray=[s.dash] {}
                                @if let Some(m) = s.marker { (m.svg(13.0, 5.0, s.color)) }
                            }
                            (s.label)
                        }
                    }
                    @if n_stale > 0 {
                        span.stalekey {
                            svg width="26" height="10" aria-hidden="true" {
                                (stale_ring(13.0, 5.0, "#6b7280"))
                            }
                            "stale: the figure's source was more than "
                            (num(crate::model::STALE_AFTER_S, 0))
                            " s old at that second (not joined to the line)"
                        }
                    }
                    @if !self.lanes.is_empty() {
                        span.lanekey { "strips under the axis: each run's phases, from start to end" }
                    }
                }
                @if !any {
                    p.nodata { "No data: no run recorded a value of this figure." }
                } @else {
                @if n < 2 * self.series.len() && n_stale == 0 {
                    p.fewpoints {
                        "Only " (n) " value" @if n != 1 { "s" } " over " (self.series.len())
                        " run" @if self.series.len() != 1 { "s" }
                        ": each drawn as a point, too few for a line to mean much."
                    }
                }
                svg viewBox=(format!("0 0 {w} {full_h}")) role="img" aria-label=(self.title) {
                        (self.bands_svg(&plot))
                        (grid(&plot, w - right, &xticks))
                        rect.frame x=(LEFT) y=(TOP) width=(plot.pw) height=(plot.ph) {}
                        text.xlabel x=(f1(LEFT + plot.pw / 2.0)) y=(f1(h - 8.0)) { (self.x_label) }
                        text.ylabel transform=(format!("translate(14 {:.1}) rotate(-90)", TOP + plot.ph / 2.0)) {
                            (self.y_label)
                        }
                        (self.lanes_svg(&plot, h))
                        (self.lines_svg(&plot, &series, &stale))
                        @if let Some(max) = above.iter().copied().reduce(f64::max) {
                            text.clipnote x=(f1(w - right - 4.0)) y=(f1(TOP + 16.0)) {
                                "▲ " (above.len()) " above the axis (up to "
                                (match self.y {
                                    YUnit::Bytes => bytes(max),
                                    YUnit::Count => num(max, 0),
                                    YUnit::Plain => num(max, 2),
                                })
                                ")"
                            }
                        }
                    }
                }
            }
        }
    }

    /// The phase bands, behind everything: each at its own start and end.
    fn bands_svg(&self, p: &Plot) -> Markup {
        html! {
            @for (i, b) in self.bands.iter().enumerate() {
                @let (a, z) = (p.sx(b.x0.max(p.x0)), p.sx(b.x1.min(p.x1)));
                @if z >= a {
                    rect.band.alt[i % 2 == 1] data-phase=(b.label) x=(f1(a)) y=(TOP)
                        width=(f1(z - a)) height=(p.ph) {}
                    // Uppercase 10 px with letter spacing: about 7 px a character.
                    @if z - a >= b.label.chars().count() as f64 * 7.0 + 4.0 {
                        text.bandlabel x=(f1(a + 3.0)) y=(f1(TOP - 6.0)) { (b.label) }
                    }
                    @for edge in [a, z] {
                        line.bandedge x1=(f1(edge)) y1=(TOP) x2=(f1(edge)) y2=(f1(TOP + p.ph)) {}
                    }
                }
            }
        }
    }

    /// Each run's phases, one strip per run under the axis label.
    fn lanes_svg(&self, p: &Plot, h: f64) -> Markup {
        html! {
            @for (k, lane) in self.lanes.iter().enumerate() {
                @let y = h + k as f64 * LANE_H;
                text.lanelabel x=(f1(LEFT - 6.0)) y=(f1(y + LANE_H - 3.0)) {
                    (crate::fmt::ellipsis(&lane.label, 11))
                }
                @for (i, b) in lane.bands.iter().enumerate() {
                    @let (a, z) = (p.sx(b.x0.max(p.x0)), p.sx(b.x1.min(p.x1)));
                    @if z >= a {
                        rect.lane data-run=(lane.label) data-phase=(b.label) x=(f1(a))
                            y=(f1(y + 1.0)) width=(f1((z - a).max(0.8))) height=(f1(LANE_H - 2.0))
                            fill=(lane.color) fill-opacity=(if i % 2 == 0 { "0.55" } else { "0.3" })
                        {
                            title { (lane.label) ": " (b.label) }
                        }
                        // Lowercase 9 px: about 5.2 px a character.
                        @if z - a >= b.label.chars().count() as f64 * 5.2 + 4.0 {
                            text.lanephase x=(f1(a + 2.0)) y=(f1(y + LANE_H - 3.0)) { (b.label) }
                        }
                    }
                }
            }
        }
    }

    /// The lines, first series on top: drawn in reverse.
    fn lines_svg(&self, p: &Plot, series: &[Vec<(f64, f64)>], stale: &[Vec<(f64, f64)>]) -> Markup {
        let log = p.axis.log;
        html! {
            @for ((s, pts), rings) in self.series.iter().zip(series).zip(stale).rev() {
                @for &(x, y) in rings {
                    @if !(log && y <= 0.0) { (stale_ring(p.sx(x), p.sy(y), s.color)) }
                }
                @let drawn = p.line(pts);
                @if !drawn.d.is_empty() {
                    path d=(drawn.d) fill="none" stroke=(s.color) stroke-width=(s.width)
                        stroke-dasharray=[s.dash] stroke-linejoin="round"
                    {
                        title { (s.label) }
                    }
                    // Clipped: drawn on the top edge, marked with a caret.
                    @for &px in &drawn.clipped {
                        path.clipped d=(format!("M{:.1} {:.1}L{px:.1} {TOP:.1}L{:.1} {:.1}Z", px - 3.5, TOP + 6.0, px + 3.5, TOP + 6.0))
                            fill=(s.color) {}
                    }
                    @if let Some(m) = s.marker {
                        @let step = drawn.points.len().div_ceil(MARKERS_PER_LINE).max(1);
                        @for &(px, py) in drawn.points.iter().skip(step / 2).step_by(step) {
                            (m.svg(px, py, s.color))
                        }
                    } @else if let [(px, py)] = drawn.points[..] {
                        // A lone point would be invisible as a path.
                        circle cx=(f1(px)) cy=(f1(py)) r="2.5" fill=(s.color) {}
                    }
                }
            }
        }
    }
}

/// Where the plot lies in the viewBox and how values map onto it.
struct Plot<'a> {
    x0: f64,
    x1: f64,
    /// Plot width and height.
    pw: f64,
    ph: f64,
    axis: &'a YAxis,
}

/// One series as drawn: its path, its points in pixels, and the x of each clipped point.
struct Drawn {
    d: String,
    points: Vec<(f64, f64)>,
    clipped: Vec<f64>,
}

impl Plot<'_> {
    fn sx(&self, x: f64) -> f64 {
        LEFT + (x - self.x0) / (self.x1 - self.x0).max(f64::MIN_POSITIVE) * self.pw
    }

    fn sy(&self, y: f64) -> f64 {
        TOP + self.ph - self.axis.frac(y) * self.ph
    }

    /// The path of `pts` (numbers only), with a gap at each missing value.
    fn line(&self, pts: &[(f64, f64)]) -> Drawn {
        let mut d = Drawn {
            d: String::new(),
            points: Vec::new(),
            clipped: Vec::new(),
        };
        let mut pen_up = true;
        for &(x, y) in pts {
            // A log axis has no place for 0: a gap, like a missing sample.
            if !(x.is_finite() && y.is_finite()) || (self.axis.log && y <= 0.0) {
                pen_up = true;
                continue;
            }
            let (px, py) = (self.sx(x), self.sy(y));
            let _ = write!(d.d, "{}{px:.1} {py:.1}", if pen_up { "M" } else { "L" });
            pen_up = false;
            d.points.push((px, py));
            if y > self.axis.hi {
                d.clipped.push(px);
            }
        }
        d
    }
}

/// Grid lines and tick labels of both axes; `x_end` is the plot's right edge.
fn grid(p: &Plot, x_end: f64, xticks: &[(f64, String)]) -> Markup {
    html! {
        @for (v, label) in &p.axis.ticks {
            @let y = p.sy(*v);
            line.grid x1=(LEFT) y1=(f1(y)) x2=(f1(x_end)) y2=(f1(y)) {}
            text.ytick x=(f1(LEFT - 6.0)) y=(f1(y + 4.0)) { (label) }
        }
        @for (v, label) in xticks {
            @let x = p.sx(*v);
            line.grid x1=(f1(x)) y1=(TOP) x2=(f1(x)) y2=(f1(TOP + p.ph)) {}
            text.xtick x=(f1(x)) y=(f1(TOP + p.ph + 16.0)) { (label) }
        }
    }
}

/// A stale value: a ring in the line's colour.
fn stale_ring(x: f64, y: f64, color: &str) -> Markup {
    html! {
        circle.stale cx=(f1(x)) cy=(f1(y)) r="2.8" fill="#fff" stroke=(color) stroke-width="1.4" {}
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::svg::{Series, Size, YScale};

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
            y_include: vec![],
        };
        let svg = c.render().into_string();
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
