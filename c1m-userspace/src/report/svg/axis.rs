//! The y axis of a chart (linear, robust or logarithmic, in bytes, counts or plain
//! numbers) and the round ticks and labels of both axes.

use super::{Chart, YScale, YUnit};
use crate::report::fmt::num;

/// The y axis as drawn: its range, ticks (value, label) and whether it is logarithmic.
pub(super) struct YAxis {
    pub(super) lo: f64,
    pub(super) hi: f64,
    pub(super) log: bool,
    pub(super) ticks: Vec<(f64, String)>,
}

impl YAxis {
    /// Fraction of the plot height of `y` (0 bottom, 1 top), clipped to the axis.
    pub(super) fn frac(&self, y: f64) -> f64 {
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
    pub(super) fn y_axis(&self, ys: &[f64]) -> YAxis {
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

/// `0` → 0%, `1` → 90%, `2` → 99%, `3` → 99.9%…
pub(super) fn percentile_label(k: i32) -> String {
    match k {
        0 => "0%".to_owned(),
        1 => "90%".to_owned(),
        k => format!("99.{}%", "9".repeat((k - 2) as usize)).replace("99.%", "99%"),
    }
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
pub(super) fn decimals(ticks: &[f64]) -> usize {
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
}
