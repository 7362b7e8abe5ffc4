//! The help overlay (`?`): what every row of the view means, its marks and its keys.

use ratatui::{
    Frame,
    layout::Rect,
    text::{Line, Span},
    widgets::{Block, Clear, Paragraph, Wrap},
};

use super::style::TITLE;

/// What the help overlay says: every row of the view, the marks and the keys.
const HELP: &[(&str, &str)] = &[
    ("keys", "q or Ctrl-C: quit    ?: this help on and off"),
    (
        "columns",
        "one per side: the server accepts, the client connects",
    ),
    ("app", "the c1m process's own count (green)"),
    ("kernel", "what the eBPF observer sees in the kernel (cyan)"),
    ("ESTABLISHED", "handshake done, the connection is open"),
    ("SYN_SENT", "client: SYN sent, waiting for the SYN-ACK"),
    (
        "SYN_RECV",
        "server: half-open handshakes (request sockets too)",
    ),
    ("CLOSE_WAIT", "the peer closed, the app has not noticed yet"),
    (
        "accept queue",
        "connections done in the kernel, not yet accepted",
    ),
    (
        "queue overflows",
        "handshakes dropped since start: accept queue full",
    ),
    (
        "in flight",
        "connects, TLS and WebSocket handshakes not finished",
    ),
    ("failures", "connections that never opened, by cause"),
    (
        "TLS failures",
        "TLS handshakes that failed, by reason (--tls runs)",
    ),
    ("setup rate", "connections established per second"),
    ("transitions", "TCP state changes per second"),
    (
        "kernel per socket",
        "kernel memory per held socket (TIME_WAIT left out)",
    ),
    (
        "user per connection",
        "(RSS - baseline) / open; after idle: idle's",
    ),
    (
        "= ≠ ?",
        "kernel vs app: agree, differ (why follows), one missing",
    ),
    (
        "dimmed, crossed",
        "stale: the source is older than 1 s (age in header)",
    ),
    (
        "derived",
        "memory between walks: sockets now x last bytes/socket",
    ),
    ("n/a", "the source is not there (never shown as 0)"),
];

/// The help overlay, over the middle of `area`.
pub(super) fn help_overlay(frame: &mut Frame, area: Rect) {
    let label_w = HELP
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0);
    let lines: Vec<Line> = HELP
        .iter()
        .map(|(label, text)| {
            Line::from(vec![
                Span::styled(format!(" {label:<label_w$}  "), TITLE),
                Span::raw(*text),
            ])
        })
        .collect();
    let want_w = lines.iter().map(Line::width).max().unwrap_or(0) + 3;
    let want_h = lines.len() + 2;
    let w = u16::try_from(want_w).unwrap_or(u16::MAX).min(area.width);
    let h = u16::try_from(want_h).unwrap_or(u16::MAX).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(Span::styled(" help: ? closes ", TITLE))),
        popup,
    );
}
