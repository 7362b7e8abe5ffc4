//! Retransmits in words: what a pattern of kinds means for a run (pure, no I/O).

use super::view::{KernelView, Retransmits};
use crate::fmt::count as group;

impl KernelView {
    /// What the retransmits since attach were, in words.
    pub(crate) fn retransmits_explained(&self) -> String {
        explain(&self.retransmits(), self.connections_established())
    }
}

/// One sentence on what sent the retransmits and why, per connection, e.g.
/// "1.0 retransmit per connection (2,000): 2,000 tail-loss probes (a segment waited
/// past the probe timeout for its ACK: a late answer or a lost tail); all spurious
/// (the peer DSACKed them: it had the data)".
pub fn explain(r: &Retransmits, connections: u64) -> String {
    if r.total == 0 {
        return "no retransmits".to_owned();
    }
    let per = if connections > 0 {
        format!(
            "{:.1} retransmit per connection ({} in all, {} connections)",
            r.total as f64 / connections as f64,
            group(r.total),
            group(connections)
        )
    } else {
        format!("{} retransmits", group(r.total))
    };
    let mut kinds: Vec<(u64, &str, &str)> = vec![
        (
            r.tail_loss_probes,
            "tail-loss probes",
            "a last segment waited past the probe timeout (2 RTT, +200 ms with one segment \
             out) for its ACK: a peer that answered late, or a lost tail",
        ),
        (
            r.timeouts,
            "timeouts (RTO)",
            "no ACK for a whole retransmission timeout: lost segments, or a peer that \
             stopped answering",
        ),
        (
            r.syn,
            "SYN retransmits",
            "a connect's SYN or the SYN-ACK answering it was lost: the SYN is resent after \
             1 s, then 2 s, 4 s, …",
        ),
        (
            r.slow_start,
            "resent after a timeout",
            "the rest of the window, resent while recovering from a timeout",
        ),
        (
            r.fast,
            "fast retransmits",
            "duplicate ACKs or SACKs reported a loss: packets dropped or reordered",
        ),
        (r.other, "of unknown kind", "this kernel hides the kind"),
    ];
    kinds.retain(|k| k.0 > 0);
    kinds.sort_by_key(|k| std::cmp::Reverse(k.0));
    let parts: Vec<String> = kinds
        .iter()
        .map(|(n, name, why)| format!("{} {name} ({why})", group(*n)))
        .collect();
    let mut text = format!("{per}: {}", parts.join("; "));
    if r.spurious_dsack > 0 {
        let spurious = if r.spurious_dsack >= r.total {
            "all spurious".to_owned()
        } else {
            format!("{} spurious", group(r.spurious_dsack))
        };
        text.push_str(&format!(
            "; {spurious} (the peer DSACKed them: it had the data, so the first copy was not lost)"
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_spurious_probe_per_connection() {
        let r = Retransmits {
            total: 2000,
            tail_loss_probes: 2000,
            spurious_dsack: 2000,
            ..Retransmits::default()
        };
        assert_eq!(
            explain(&r, 2000),
            "1.0 retransmit per connection (2,000 in all, 2,000 connections): 2,000 tail-loss \
             probes (a last segment waited past the probe timeout (2 RTT, +200 ms with one \
             segment out) for its ACK: a peer that answered late, or a lost tail); all spurious \
             (the peer DSACKed them: it had the data, so the first copy was not lost)"
        );
    }

    #[test]
    fn kinds_are_listed_largest_first_and_zero_kinds_left_out() {
        let r = Retransmits {
            total: 130,
            timeouts: 30,
            fast: 100,
            spurious_dsack: 5,
            ..Retransmits::default()
        };
        let text = explain(&r, 1000);
        assert!(text.starts_with("0.1 retransmit per connection (130 in all, 1,000 connections): 100 fast retransmits"), "{text}");
        let fast = text.find("fast retransmits").expect("fast");
        let rto = text.find("timeouts (RTO)").expect("timeouts");
        assert!(fast < rto, "{text}");
        assert!(!text.contains("tail-loss"), "{text}");
        assert!(text.ends_with("5 spurious (the peer DSACKed them: it had the data, so the first copy was not lost)"), "{text}");
    }

    #[test]
    fn none_and_no_connections() {
        assert_eq!(explain(&Retransmits::default(), 10), "no retransmits");
        let r = Retransmits {
            total: 3,
            other: 3,
            ..Retransmits::default()
        };
        assert_eq!(
            explain(&r, 0),
            "3 retransmits: 3 of unknown kind (this kernel hides the kind)"
        );
    }
}
