//! The live view rendered into ratatui's `TestBackend` from a realistic state (the demo run
//! 49 s into setup): both columns show the right numbers in the right half of the screen,
//! with and without the observer, and a missing figure reads "n/a", never 0.
#![allow(clippy::unwrap_used)] // panics are the assertions in tests

use c1m::view::{
    demo,
    live_state::LiveState,
    tui::{render, text_screen},
};
use ratatui::{Terminal, backend::TestBackend};

const W: u16 = 160;
const H: u16 = 50;

/// Renders through ratatui's `TestBackend` (what `text_screen` does), checking that
/// `render` itself draws into any frame.
fn screen(state: &LiveState, w: u16, h: u16) -> Vec<String> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| render(f, state)).unwrap();
    let via_helper = text_screen(state, w, h);
    let buf = t.backend().buffer();
    let lines: Vec<String> = (0..h)
        .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect())
        .collect();
    assert_eq!(lines, via_helper);
    lines
}

/// The server's and the client's panel of the first line holding `label`: the panels
/// are side by side, each in its box ("││" between two), the latency panel after them.
fn row<'a>(lines: &'a [String], label: &str) -> (&'a str, &'a str) {
    let line = lines
        .iter()
        .find(|l| l.contains(label))
        .unwrap_or_else(|| panic!("no line with {label:?}:\n{}", lines.join("\n")));
    let mut panels = line.split("││");
    let left = panels.next().unwrap_or("");
    (left, panels.next().unwrap_or(""))
}

/// The cell right of `label` in one half: the value, trimmed of borders and padding.
fn value_of(half: &str, label: &str) -> String {
    let after = half.split_once(label).map_or("", |(_, a)| a);
    after
        .trim_matches(|c: char| c.is_whitespace() || c == '│')
        .to_owned()
}

fn both(lines: &[String], label: &str) -> (String, String) {
    let (l, r) = row(lines, label);
    (value_of(l, label), value_of(r, label))
}

/// The screen's text with line breaks and runs of spaces folded, so wrapped explanations
/// read as one sentence.
fn flat(lines: &[String]) -> String {
    lines
        .iter()
        .map(|l| l.trim_matches(|c: char| c.is_whitespace() || c == '│'))
        .collect::<Vec<_>>()
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn both_columns_show_the_right_numbers() {
    let lines = screen(&demo::state(), W, H);
    let dump = lines.join("\n");
    println!("{dump}");
    let title = lines.iter().find(|l| l.contains(" server ")).unwrap();
    let (l, r) = title.split_once("┐┌").unwrap();
    assert!(l.contains(" server ") && r.contains(" client "), "{dump}");
    assert_eq!(
        both(&lines, "app open"),
        ("600,000".into(), "600,300".into())
    );
    assert_eq!(
        both(&lines, "kernel ESTABLISHED"),
        ("600,407".into(), "600,349".into())
    );
    // Rows line up: CLOSE_WAIT | SYN_SENT, SYN_RECV | in flight, queue | failures, ...
    let (l, r) = row(&lines, "kernel CLOSE_WAIT");
    assert_eq!(value_of(l, "kernel CLOSE_WAIT"), "5");
    assert_eq!(value_of(r, "kernel SYN_SENT"), "37");
    let (l, r) = row(&lines, "kernel SYN_RECV");
    assert_eq!(value_of(l, "kernel SYN_RECV"), "24");
    assert_eq!(value_of(r, "app in flight"), "86");
    let (l, r) = row(&lines, "accept queue / limit");
    assert_eq!(value_of(l, "accept queue / limit"), "412 / 40,960");
    assert_eq!(value_of(r, "app failures"), "5 (refused 3, timed_out 2)");
    let (l, r) = row(&lines, "queue overflows");
    assert_eq!(value_of(l, "queue overflows"), "37 (30 final ACKs)");
    assert_eq!(value_of(r, "setup rate"), "12,450/s");
    assert_eq!(
        both(&lines, "transitions"),
        ("24,800/s".into(), "25,100/s".into())
    );
    assert_eq!(
        both(&lines, "kernel per socket"),
        ("3,328 B".into(), "3,456 B".into())
    );
    assert_eq!(
        both(&lines, "user per connection"),
        ("2,050 B".into(), "1,583 B".into())
    );
    assert_eq!(
        both(&lines, "resident memory"),
        ("1.2 GiB".into(), "953.7 MiB".into())
    );
    // Header, warnings, sparkline title, kernel-vs-app rows with their explanations.
    let text = flat(&lines);
    for want in [
        "c1m run",
        "phase setup",
        "elapsed 49.0 s",
        "target 1,000,000",
        "unavailable: synack_retransmits",
        "note: ramp: 12,500 connections/s",
        "setup rate, connections/s now 12,450/s",
        "≠ server open: kernel 600,407, app 600,000.",
        "412 established in the kernel, not yet accepted",
        "5 closed by the peer, not yet noticed by the app (CLOSE_WAIT)",
        "37 handshakes dropped since start: accept queue full (30 final ACKs",
        "≠ client open: kernel 600,349, app 600,300.",
        "49 ESTABLISHED in the kernel, WebSocket handshake not finished",
        "49 ESTABLISHED (past SYN_SENT), WebSocket handshake not finished",
        "37 SYN_SENT: handshakes in flight",
        "q or Ctrl-C: quit",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{dump}");
    }
    assert!(
        !text.contains("n/a"),
        "every figure is known in the demo:\n{dump}"
    );
}

#[test]
fn without_observer_kernel_figures_are_na_not_zero() {
    let mut state = demo::state();
    state.kernel = None;
    demo::refigure(&mut state);
    let lines = screen(&state, W, H);
    let dump = lines.join("\n");
    println!("{dump}");
    assert_eq!(
        both(&lines, "app open"),
        ("600,000".into(), "600,300".into())
    );
    assert_eq!(
        both(&lines, "kernel ESTABLISHED"),
        ("n/a".into(), "n/a".into())
    );
    let (l, r) = row(&lines, "kernel SYN_RECV");
    assert_eq!(value_of(l, "kernel SYN_RECV"), "n/a");
    assert_eq!(value_of(r, "app in flight"), "86");
    let (l, _) = row(&lines, "accept queue / limit");
    assert_eq!(value_of(l, "accept queue / limit"), "n/a");
    assert_eq!(
        both(&lines, "kernel per socket"),
        ("n/a".into(), "n/a".into())
    );
    // The app's own figures stay.
    assert_eq!(
        both(&lines, "resident memory"),
        ("1.2 GiB".into(), "953.7 MiB".into())
    );
    let text = flat(&lines);
    assert!(
        text.contains("no kernel view: the observer is not running"),
        "{dump}"
    );
    assert!(
        text.contains("? server open: kernel n/a, app 600,000."),
        "{dump}"
    );
    assert!(
        text.contains("kernel: n/a (observer not running)"),
        "{dump}"
    );
}

#[test]
fn before_the_client_starts_its_column_is_na() {
    let mut state = demo::state();
    state.client = None;
    state.history.clear();
    demo::refigure(&mut state);
    let lines = screen(&state, W, H);
    let dump = lines.join("\n");
    let (l, r) = row(&lines, "app open");
    assert_eq!(value_of(l, "app open"), "600,000");
    assert_eq!(value_of(r, "app open"), "n/a");
    // The kernel still counts the client side's sockets.
    assert_eq!(
        both(&lines, "kernel ESTABLISHED"),
        ("600,407".into(), "600,349".into())
    );
    let (_, r) = row(&lines, "app failures");
    assert_eq!(value_of(r, "app failures"), "n/a");
    let text = flat(&lines);
    assert!(text.contains("no samples yet"), "{dump}");
    assert!(text.contains("app: n/a (no c1m client stats)"), "{dump}");
}

#[test]
fn nothing_at_all_is_all_na() {
    let lines = screen(&LiveState::default(), W, H);
    let dump = lines.join("\n");
    for label in [
        "app open",
        "kernel ESTABLISHED",
        "transitions",
        "resident memory",
    ] {
        assert_eq!(
            both(&lines, label),
            ("n/a".into(), "n/a".into()),
            "{label}\n{dump}"
        );
    }
    assert!(flat(&lines).contains("nothing to compare yet"), "{dump}");
}

#[test]
fn a_standard_80x24_terminal_keeps_both_columns() {
    let lines = screen(&demo::state(), 80, 24);
    let dump = lines.join("\n");
    println!("{dump}");
    let line = lines
        .iter()
        .find(|l| l.contains("kernel ESTABLISHED"))
        .unwrap();
    let mid = line.char_indices().nth(40).map_or(line.len(), |(i, _)| i);
    let (l, r) = line.split_at(mid);
    assert!(l.contains("600,407") && r.contains("600,349"), "{dump}");
}

/// Every region of the full view at the common sizes: header (whole pieces only), both
/// columns, the kernel-vs-app rows (cut with "…" and a count when short of lines), the
/// footer; larger terminals add the setup-rate chart.
#[test]
fn every_region_at_common_sizes() {
    for (w, h) in [(60, 18), (80, 24), (100, 30), (200, 60)] {
        let lines = screen(&demo::state(), w, h);
        let dump = lines.join("\n");
        println!("{w}x{h}\n{dump}");
        let header = lines[0].trim_end();
        assert!(header.starts_with(" c1m run   phase setup"), "{dump}");
        // Header pieces are whole: each one that starts also ends.
        for (piece, whole) in [
            ("elapsed", "elapsed 49.0 s"),
            ("target", "target 1,000,000"),
            ("(60", "(60.0% open)"),
            ("box memory", "box memory available"),
        ] {
            assert!(
                !header.contains(piece) || header.contains(whole),
                "{piece:?} cut in {header:?}"
            );
        }
        let line = lines.iter().find(|l| l.contains(" server ")).unwrap();
        assert!(line.contains(" client "), "{dump}");
        let est = lines
            .iter()
            .find(|l| l.contains("kernel ESTABLISHED"))
            .unwrap();
        assert!(est.contains("600,407") && est.contains("600,349"), "{dump}");
        let text = flat(&lines);
        assert!(text.contains("kernel vs app"), "{dump}");
        assert!(
            text.contains("≠ server open: kernel 600,407, app 600,000."),
            "{dump}"
        );
        assert!(
            text.contains("≠ client open: kernel 600,349, app 600,300."),
            "{dump}"
        );
        let footer = lines[usize::from(h) - 1].trim_end();
        assert!(footer.starts_with(" q or Ctrl-C: quit  ?: help"), "{dump}");
        let cut = text.contains("more lines: enlarge the terminal");
        // From 80×24 up every row shows whole; 60×18 cuts them.
        assert_eq!(cut, (w, h) == (60, 18), "{w}x{h}: {dump}");
        if cut {
            assert!(text.contains('…'), "{dump}");
        }
        assert_eq!(
            text.contains("setup rate, connections/s"),
            h >= 60,
            "{w}x{h}: {dump}"
        );
    }
}

/// `?` draws the help over the view; every row of the view is explained in it.
#[test]
fn help_overlay_explains_the_rows() {
    use c1m::view::tui::text_screen_view;
    for (w, h) in [(80, 24), (100, 30), (60, 18), (200, 60)] {
        let lines = text_screen_view(&demo::state(), w, h, true);
        let text = flat(&lines);
        let dump = lines.join("\n");
        println!("{dump}");
        assert!(text.contains("help: ? closes"), "{dump}");
        if w >= 80 {
            for want in [
                "app the c1m process's own count",
                "kernel what the eBPF observer sees",
                "SYN_RECV server: half-open",
                "stale: the source is older than 1 s",
                "derived memory between walks",
                "keys q or Ctrl-C: quit ?: this help on and off",
            ] {
                assert!(text.contains(want), "{w}x{h}: missing {want:?}:\n{dump}");
            }
        }
    }
    let off = text_screen_view(&demo::state(), 80, 24, false).join("\n");
    assert!(!off.contains("help: ? closes"), "{off}");
}

/// The demo's kernel-vs-app rows, each with its whole explanation, as one folded line.
fn explanations(state: &LiveState) -> Vec<String> {
    state
        .figures
        .kernel_vs_app
        .iter()
        .map(|r| {
            r.explanation
                .as_deref()
                .unwrap_or_default()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// At the common 80×24 every kernel-vs-app row shows its whole explanation, the server's
/// and the client's (the headline-over-explanation layout hid 11 lines there, and every
/// client line).
#[test]
fn at_80x24_every_kernel_vs_app_explanation_is_visible() {
    let state = demo::state();
    let lines = screen(&state, 80, 24);
    let dump = lines.join("\n");
    println!("{dump}");
    let text = flat(&lines);
    assert!(!text.contains("more lines: enlarge"), "{dump}");
    let whole = explanations(&state);
    assert_eq!(whole.len(), 4, "the demo has four rows");
    for (row, want) in [
        "server open: kernel 600,407, app 600,000.",
        "server accepted: kernel 600,432, app 600,020.",
        "client open: kernel 600,349, app 600,300.",
        "client connecting: kernel 37, app 86.",
    ]
    .iter()
    .zip(&whole)
    {
        assert!(!want.is_empty());
        assert!(
            text.contains(&format!("{row} {want}")),
            "missing {row:?} {want:?} in:\n{dump}"
        );
    }
    // Both columns keep their counts.
    let est = lines
        .iter()
        .find(|l| l.contains("kernel ESTABLISHED"))
        .unwrap();
    assert!(est.contains("600,407") && est.contains("600,349"), "{dump}");
}

/// Cells of the first occurrence of `needle` on the line holding `context`, with their
/// styles.
fn styles_of(
    buf: &ratatui::buffer::Buffer,
    lines: &[String],
    context: &str,
    needle: &str,
) -> Vec<ratatui::style::Style> {
    let (y, line) = lines
        .iter()
        .enumerate()
        .find(|(_, l)| l.contains(context))
        .unwrap_or_else(|| panic!("no line with {context:?}:\n{}", lines.join("\n")));
    let at = line[line.find(context).unwrap()..]
        .find(needle)
        .map(|i| i + line.find(context).unwrap())
        .unwrap();
    let x = line[..at].chars().count();
    (x..x + needle.chars().count())
        .map(|x| buf[(x as u16, y as u16)].style())
        .collect()
}

/// A stale client snapshot (3 s old, 52 open against the kernel's 600,349): every figure
/// of the client's snapshot is drawn in the one stale style, wherever it shows: its
/// column, its kernel-vs-app rows, the header's share open, the setup rate; the
/// server's and the kernel's fresh figures are not.
#[test]
fn a_stale_client_is_marked_the_same_way_everywhere() {
    use c1m::view::tui::style::STALE;
    let mut state = demo::state();
    if let Some(c) = state.client.as_mut() {
        c.counters.open = 52;
        c.unix_ns -= 3_000_000_000;
    }
    demo::refigure(&mut state);
    assert!(state.figures.stale(c1m::model::Source::Client));
    let (w, h) = (160, 50);
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| render(f, &state)).unwrap();
    let buf = t.backend().buffer().clone();
    let lines: Vec<String> = (0..h)
        .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect())
        .collect();
    let dump = lines.join("\n");
    println!("{dump}");
    // A cell's style is the span's patched over the cell's: compare what STALE sets.
    let marked =
        |s: &ratatui::style::Style| s.fg == STALE.fg && s.add_modifier.contains(STALE.add_modifier);
    let stale = |context: &str, needle: &str| {
        let styles = styles_of(&buf, &lines, context, needle);
        assert!(
            styles.iter().all(marked),
            "{needle:?} in {context:?} is not marked stale: {styles:?}\n{dump}"
        );
    };
    let fresh = |context: &str, needle: &str| {
        let styles = styles_of(&buf, &lines, context, needle);
        assert!(
            !styles.iter().any(marked),
            "{needle:?} in {context:?} is marked stale: {styles:?}\n{dump}"
        );
    };
    assert!(dump.contains("  client 3.0 s old"), "{dump}");
    // The column: the client's own figures; the kernel's beside them stay fresh.
    let (_, right) = row(&lines, "app open");
    assert_eq!(value_of(right, "app open"), "52");
    stale("app open", "52");
    stale("app connected total", "600,310");
    // The kernel-vs-app rows: the app's figure marked, the kernel's not.
    stale("client open: kernel", "52");
    fresh("client open: kernel", "600,349");
    stale("client connecting: kernel", "86");
    fresh("server open: kernel", "600,000");
    // The header's share open and the setup rate come from the client.
    stale("(0.0% open)", "0.0%");
    stale("setup rate, connections/s now", "12,450/s");
    stale("setup time", "48.21 s");
}
