//! The client's latencies while the run goes on: TCP connect, TLS and WebSocket
//! handshakes (p50, p99) from the first connection, push per message and fan-out (p50, p99, max)
//! once a push arrived. Values are the figures' ([`Latencies`]), in ms with the
//! summary's 3 decimals, so the last live value reads as the final one.

use ratatui::text::Span;

use super::style::{MISSING, Palette, TITLE};
use crate::{
    figures::{Figures, latency::Latencies},
    fmt,
    model::Source,
    workload::stats::histograms::Percentiles,
};

/// A histogram the view shows: its name in a few words, its row labels (p50, p99,
/// max) and whether the max is shown (a push's: its fan-out max is when the last
/// connection had it).
struct Shown {
    name: &'static str,
    labels: [&'static str; 3],
    max: bool,
    p: Percentiles,
}

/// Each histogram with data, in the order a run fills them.
fn shown(l: &Latencies) -> Vec<Shown> {
    [
        (
            "connect",
            ["connect p50", "connect p99", ""],
            false,
            l.connect,
        ),
        (
            "TLS handshake",
            ["TLS handshake p50", "TLS handshake p99", ""],
            false,
            l.tls_handshake,
        ),
        (
            "WS handshake",
            ["WS handshake p50", "WS handshake p99", ""],
            false,
            l.ws_handshake,
        ),
        (
            "push message",
            ["push message p50", "push message p99", "push message max"],
            true,
            l.push_message,
        ),
        (
            "push fan-out",
            ["push fan-out p50", "push fan-out p99", "push fan-out max"],
            true,
            l.push_fanout,
        ),
    ]
    .into_iter()
    .filter_map(|(name, labels, max, p)| {
        p.map(|p| Shown {
            name,
            labels,
            max,
            p,
        })
    })
    .collect()
}

/// The figures of one histogram: (p50, p99[, max]).
fn figures(s: &Shown) -> Vec<(usize, &'static str, u64)> {
    let mut v = vec![(0, "p50", s.p.p50), (1, "p99", s.p.p99)];
    if s.max {
        v.push((2, "max", s.p.max));
    }
    v
}

fn ms(us: u64) -> String {
    format!("{} ms", fmt::ms(us as f64))
}

/// The panel's rows (label, value): "connect p50", "connect p99", …; one dim row while
/// no histogram holds a value.
pub(super) fn latency_rows(f: &Figures) -> Vec<(&'static str, Span<'static>)> {
    let style = Palette::of(f, Source::Client).app;
    let mut rows = Vec::new();
    for s in shown(&f.latency) {
        for (i, _, v) in figures(&s) {
            rows.push((s.labels[i], Span::styled(ms(v), style)));
        }
    }
    if rows.is_empty() {
        rows.push(("none yet", Span::styled("", MISSING)));
    }
    rows
}

/// The same figures as words, for a terminal too narrow for the panel: one word per
/// piece, so the caller wraps them between figures. Empty while there is none.
pub(super) fn latency_words(f: &Figures) -> Vec<Vec<Span<'static>>> {
    let style = Palette::of(f, Source::Client).app;
    let list = shown(&f.latency);
    if list.is_empty() {
        return Vec::new();
    }
    let mut words = vec![vec![Span::styled("latency:", TITLE)]];
    let n = list.len();
    for (i, s) in list.into_iter().enumerate() {
        words.push(vec![Span::raw(s.name.to_owned())]);
        let all = figures(&s);
        let last = all.len() - 1;
        for (j, (_, q, v)) in all.into_iter().enumerate() {
            let mut w = vec![Span::raw(format!("{q} ")), Span::styled(ms(v), style)];
            if j == last && i + 1 < n {
                w.push(Span::raw(" ·"));
            }
            words.push(w);
        }
    }
    words
}
