//! Resets in words: who sent them and the kernel's reason for each (pure, no I/O).

use super::view::{KernelView, ResetCause, ResetSegment, SideView};
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
        "NO_SOCKET" => "a segment for a connection this end no longer had",
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

/// What drew a reset, as the explanation's words put it.
fn drawn_by(segment: ResetSegment) -> &'static str {
    match segment {
        ResetSegment::None => "sent by this end itself (no segment drew it)",
        ResetSegment::Syn => "by a SYN",
        ResetSegment::SynAck => "by a SYN-ACK",
        ResetSegment::Fin => "by a FIN",
        ResetSegment::Data => "by data",
        ResetSegment::Ack => "by a bare ACK",
        ResetSegment::Other => "by a segment with odd flags",
        ResetSegment::Unread => "by a segment that could not be read",
    }
}

/// What a no-socket reset drawn by `segment` most likely answered, as measured on
/// loopback (docs/results.md, "Every reset named").
fn no_socket_note(segment: ResetSegment) -> Option<&'static str> {
    Some(match segment {
        // 1M ws teardown: the peer's TIME_WAIT answered a late ACK of this end's with a
        // second ACK of its FIN; the first had already closed the socket (LAST_ACK).
        ResetSegment::Ack => {
            "the peer's TIME_WAIT acknowledging again a FIN this end had seen acknowledged"
        }
        ResetSegment::Fin => {
            "a FIN after this end dropped the socket (TIME_WAIT table full, FIN_WAIT2 timed out)"
        }
        ResetSegment::Data => "data after this end dropped the socket",
        ResetSegment::Syn => "a SYN to a port nothing listens on",
        _ => return None,
    })
}

/// The causes of `reason`'s resets over every side, in words, most first:
/// "250 by a FIN, 10 by a bare ACK, socket in time_wait"; None when none are recorded (a run
/// folder from before causes were kept).
fn causes_of(reason: &str, sides: &[&SideView]) -> Option<String> {
    let mut by = std::collections::BTreeMap::<(ResetSegment, Option<&str>), u64>::new();
    for c in sides
        .iter()
        .flat_map(|v| &v.resets_sent_by_cause)
        .filter(|c: &&ResetCause| c.reason == reason)
    {
        *by.entry((c.segment, c.state.as_deref())).or_default() += c.count;
    }
    if by.is_empty() {
        return None;
    }
    let mut rows: Vec<_> = by.into_iter().collect();
    rows.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
    let words: Vec<String> = rows
        .iter()
        .map(|&((segment, state), n)| {
            let note = match (reason, state) {
                ("NO_SOCKET", _) => no_socket_note(segment).map(|m| format!(" ({m})")),
                (_, Some(state)) => Some(format!(", socket in {state}")),
                _ => None,
            };
            format!(
                "{} {}{}",
                group(n),
                drawn_by(segment),
                note.unwrap_or_default()
            )
        })
        .collect();
    Some(words.join(", "))
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
    let all = [server, client, other];
    let why: Vec<String> = reasons
        .iter()
        .map(|&(reason, n)| {
            let notes: Vec<String> = [meaning(reason).map(str::to_owned), causes_of(reason, &all)]
                .into_iter()
                .flatten()
                .collect();
            if notes.is_empty() {
                format!("{} {reason}", group(n))
            } else {
                format!("{} {reason} ({})", group(n), notes.join(": "))
            }
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

    #[test]
    fn causes_name_the_segment_and_state_most_first() {
        let cause = |segment, state: Option<&str>, count| ResetCause {
            reason: "NO_SOCKET".to_owned(),
            segment,
            state: state.map(str::to_owned),
            count,
        };
        let mut client = side(&[("NO_SOCKET", 206)]);
        client.resets_sent_by_cause = vec![
            cause(ResetSegment::Ack, None, 6),
            cause(ResetSegment::Fin, None, 200),
        ];
        let mut server = side(&[("TCP_ABORT_ON_CLOSE", 2)]);
        server.resets_sent_by_cause = vec![ResetCause {
            reason: "TCP_ABORT_ON_CLOSE".to_owned(),
            segment: ResetSegment::None,
            state: Some("close".to_owned()),
            count: 2,
        }];
        let text = explain(&server, &client, &SideView::default()).unwrap();
        assert!(
            text.contains("no longer had: 200 by a FIN (a FIN after this end dropped the socket (TIME_WAIT table full, FIN_WAIT2 timed out)), 6 by a bare ACK (the peer's TIME_WAIT acknowledging again a FIN this end had seen acknowledged))"),
            "{text}"
        );
        assert!(
            text.ends_with("2 TCP_ABORT_ON_CLOSE (closed with data still unread: 2 sent by this end itself (no segment drew it), socket in close)"),
            "{text}"
        );
    }
}
