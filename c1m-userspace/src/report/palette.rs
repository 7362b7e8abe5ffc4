//! Colours and line styles of the charts. Runs are told apart by Okabe and Ito's eight
//! colours ("Color Universal Design", 2008), which stay distinct under the common
//! colour-vision deficiencies, and beyond eight setups by markers; repeats of one setup
//! share its colour and differ by dash.

use maud::{Markup, html};

use super::svg::Marker;

/// Okabe–Ito, in the order lines are given them: blue, orange, bluish green, vermillion,
/// reddish purple, sky blue, black, yellow (last: the faintest on white).
pub(crate) const OKABE_ITO: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442",
];

/// Dashes of a setup's repeats: the first solid.
const REPEAT_DASH: [Option<&str>; 4] = [None, Some("6 4"), Some("2 3"), Some("9 3 2 3")];

/// Markers of the setups past the first eight (the first eight have none).
const MARKERS: [Marker; 4] = [
    Marker::Circle,
    Marker::Square,
    Marker::Triangle,
    Marker::Diamond,
];

/// How one run's lines look in every chart of a comparison.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RunStyle {
    pub color: &'static str,
    pub dash: Option<&'static str>,
    pub marker: Option<Marker>,
}

impl RunStyle {
    /// The style of the `repeat`-th run (from 0) of the `setup`-th name (from 0).
    pub(crate) fn of(setup: usize, repeat: usize) -> RunStyle {
        RunStyle {
            color: OKABE_ITO[setup % OKABE_ITO.len()],
            dash: REPEAT_DASH[repeat % REPEAT_DASH.len()],
            marker: (setup >= OKABE_ITO.len())
                .then(|| MARKERS[(setup / OKABE_ITO.len() - 1) % MARKERS.len()]),
        }
    }

    /// A small inline SVG of the line: for legends outside a chart.
    pub(crate) fn swatch(&self) -> Markup {
        html! {
            svg.swatch width="30" height="10" aria-hidden="true" {
                line x1="1" y1="5" x2="29" y2="5" stroke=(self.color) stroke-width="2.5"
                    stroke-dasharray=[self.dash] {}
                @if let Some(m) = self.marker { (m.svg(15.0, 5.0, self.color)) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_style_differs_up_to_32_setups_of_4_repeats() {
        let mut seen = Vec::new();
        for setup in 0..32 {
            for repeat in 0..4 {
                let s = RunStyle::of(setup, repeat);
                assert!(!seen.contains(&s), "{setup} {repeat}: {s:?}");
                seen.push(s);
            }
        }
        assert_eq!(RunStyle::of(0, 0).color, "#0072B2");
        assert_eq!(RunStyle::of(8, 0).color, "#0072B2");
        assert_eq!(RunStyle::of(8, 0).marker, Some(Marker::Circle));
        assert_eq!(RunStyle::of(3, 1).dash, Some("6 4"));
    }
}
