//! Resets in words: who sent them and the kernel's reason for each (pure, no I/O).

use super::view::{KernelView, SideView};
use crate::fmt::count as group;

impl KernelView {
    /// What the resets sent since attach were, in words; None when none was sent.
    pub fn resets_explained(&self) -> Option<String> {
        explain(&self.server, &self.client, &self.other)
    }

    /// Resets sent since attach, every side and reason.
    pub(crate) fn resets_sent(&self) -> u64 {
        [&self.server, &self.client, &self.other]
            .iter()
            .map(|v| v.resets_sent())
            .sum()
    }
}

impl SideView {
    /// Resets this side sent since attach, every reason.
    pub(crate) fn resets_sent(&self) -> u64 {
        self.resets_sent_by_reason.values().sum()
    }
}

/// What a reason of `enum sk_rst_reason` means for a run, by the name its tracepoint
/// prints; None for reasons without a note (the name is shown alone).
/// https://github.com/torvalds/linux/blob/v6.18/include/net/rstreason.h
fn meaning(reason: &str) -> Option<&'static str> {
    Some(match reason {
        "NO_SOCKET" => {
            "a segment for a connection this end no longer had: e.g. a late FIN after the \
             kernel dropped the socket (TIME_WAIT table full, FIN_WAIT2 timed out)"
        }
        "TCP_ABORT_ON_DATA" => "data arrived after this end had closed",
        "TCP_ABORT_ON_CLOSE" => "closed with data still unread",
        "TCP_ABORT_ON_LINGER" => "closed with SO_LINGER 0, or a FIN_WAIT2 linger ran out",
        "TCP_ABORT_ON_MEMORY" => "too many orphaned sockets, or TCP out of memory",
        "TCP_STATE" => "closed or disconnected in a state that must reset (e.g. SO_LINGER 0)",
        "TCP_KEEPALIVE_TIMEOUT" => "keepalive probes went unanswered",
        "TCP_DISCONNECT_WITH_DATA" => "disconnected with data unsent",
        "TCP_TIMEWAIT_SOCKET" => "a TIME_WAIT socket refused a segment",
        "INVALID_SYN" => "a SYN where none belongs",
        "TCP_INVALID_ACK_SEQUENCE" | "TCP_TOO_OLD_ACK" | "TCP_ACK_UNSENT_DATA" | "TCP_OLD_ACK" => {
            "an ACK out of the window"
        }
        "TCP_RFC7323_PAWS" => "a timestamp older than the connection's (PAWS)",
        "TCP_FLAGS" => "flags no state accepts",
        "UNKNOWN" => "this kernel gives no reason (before 6.10)",
        _ => return None,
    })
}

/// One sentence on the resets sent since attach, or None when there were none, e.g.
/// "264 sent (client 261, server 3): 260 NO_SOCKET (a segment for …); 4 TCP_STATE (…)".
pub(crate) fn explain(server: &SideView, client: &SideView, other: &SideView) -> Option<String> {
    let sides = [("server", server), ("client", client), ("other", other)];
    let sent = SideView::resets_sent;
    let total: u64 = sides.iter().map(|(_, v)| sent(v)).sum();
    if total == 0 {
        return None;
    }
    let mut by_side: Vec<(u64, &str)> = sides
        .iter()
        .map(|&(name, v)| (sent(v), name))
        .filter(|&(n, _)| n > 0)
        .collect();
    by_side.sort_by_key(|&(n, _)| std::cmp::Reverse(n));
    let mut by_reason = std::collections::BTreeMap::<&str, u64>::new();
    for (_, v) in sides {
        for (reason, n) in &v.resets_sent_by_reason {
            *by_reason.entry(reason).or_default() += n;
        }
    }
    let mut reasons: Vec<(&str, u64)> = by_reason.into_iter().collect();
    reasons.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
    let who: Vec<String> = by_side
        .iter()
        .map(|(n, side)| format!("{side} {}", group(*n)))
        .collect();
    let why: Vec<String> = reasons
        .iter()
        .map(|&(reason, n)| match meaning(reason) {
            Some(m) => format!("{} {reason} ({m})", group(n)),
            None => format!("{} {reason}", group(n)),
        })
        .collect();
    Some(format!(
        "{} sent ({}): {}",
        group(total),
        who.join(", "),
        why.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(reasons: &[(&str, u64)]) -> SideView {
        SideView {
            resets_sent_by_reason: reasons.iter().map(|&(r, n)| (r.to_owned(), n)).collect(),
            ..SideView::default()
        }
    }

    #[test]
    fn none_sent_says_nothing() {
        let empty = SideView::default();
        assert_eq!(explain(&empty, &empty, &empty), None);
    }

    #[test]
    fn sides_and_reasons_largest_first() {
        let text = explain(
            &side(&[("TCP_STATE", 3)]),
            &side(&[("NO_SOCKET", 2_000), ("REASON_29", 1)]),
            &SideView::default(),
        )
        .unwrap();
        assert!(
            text.starts_with("2,004 sent (client 2,001, server 3): 2,000 NO_SOCKET (a segment"),
            "{text}"
        );
        assert!(
            text.contains("; 3 TCP_STATE (closed or disconnected"),
            "{text}"
        );
        // A reason this build has no note for is named alone.
        assert!(text.ends_with("; 1 REASON_29"), "{text}");
    }
}
