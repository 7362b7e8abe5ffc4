//! A chart drawn as inline SVG: the frame, grid and ticks, the phases as bands or lanes,
//! each series thinned to what can be seen, its stale values as rings, and the legend.

use std::fmt::Write as _;

use super::{
    Chart, XAxis, YUnit,
    axis::{decimals, nice_ticks, percentile_label},
};
use crate::report::fmt::{bytes, esc, num};

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
                num(crate::model::STALE_AFTER_S, 0)
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

fn dash_attr(d: Option<&str>) -> String {
    d.map(|d| format!(" stroke-dasharray=\"{d}\""))
        .unwrap_or_default()
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
