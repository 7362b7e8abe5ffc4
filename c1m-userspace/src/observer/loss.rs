//! Injected loss in words (pure, no I/O): what the loss injector (`--loss`, the eBPF
//! crate's probes/loss.rs) dropped on a host's link, next to the retransmits that host
//! sent, so a reader sees both sides of one cause.

use super::view::{DroppedSegments, LossDrops, Retransmits};
use crate::fmt::count as group;

/// The classes that were dropped, largest first by the order they are shown:
/// "37 SYN, 12 SYN-ACK, 290 data, 73 pure ACK" (zero classes left out; "none" if all 0).
pub fn classes(d: &DroppedSegments) -> String {
    let parts: Vec<String> = d
        .classes()
        .iter()
        .filter(|c| c.0 > 0)
        .map(|(n, name, _)| format!("{} {name}", group(*n)))
        .collect();
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join(", ")
    }
}

/// The retransmit kinds, in the words of the issue's question: "40 SYN, 9,000 RTO,
/// 800 fast, 33 TLP" (zero kinds left out).
pub fn retransmit_kinds(r: &Retransmits) -> String {
    let kinds = [
        (r.syn, "SYN"),
        (r.timeouts, "RTO"),
        (r.slow_start, "after RTO"),
        (r.fast, "fast"),
        (r.tail_loss_probes, "TLP"),
        (r.other, "unknown"),
    ];
    let parts: Vec<String> = kinds
        .iter()
        .filter(|k| k.0 > 0)
        .map(|(n, name)| format!("{} {name}", group(*n)))
        .collect();
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join(", ")
    }
}

/// One sentence for a host: "1% loss injected on client host host-0: 412 segments
/// dropped (out: 37 SYN, 120 data, …; in: 10 SYN-ACK, …); its 9,873 retransmits: 40 SYN,
/// …; what was dropped coming in, the server host resent".
pub fn explain(host: &str, loss: &LossDrops, retransmits: &Retransmits) -> String {
    let total = loss.egress.total() + loss.ingress.total();
    format!(
        "{} loss injected on client host {host}: {} segments dropped (out: {}; in: {}); its {} retransmits: {}; what was dropped coming in, the server host resent",
        percent(loss.probability),
        group(total),
        classes(&loss.egress),
        classes(&loss.ingress),
        group(retransmits.total),
        retransmit_kinds(retransmits),
    )
}

/// `0.01` as "1%", `0.005` as "0.5%".
pub fn percent(p: f64) -> String {
    let v = p * 100.0;
    let text = format!("{v:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_with_loss_in_one_sentence() {
        let loss = LossDrops {
            probability: 0.01,
            link: "c1mh1-h0".to_owned(),
            egress: DroppedSegments {
                syn: 37,
                data: 1200,
                pure_ack: 73,
                ..DroppedSegments::default()
            },
            ingress: DroppedSegments {
                syn_ack: 12,
                data: 90,
                ..DroppedSegments::default()
            },
        };
        let r = Retransmits {
            total: 1_290,
            syn: 49,
            timeouts: 41,
            fast: 1_200,
            ..Retransmits::default()
        };
        assert_eq!(
            explain("host-0", &loss, &r),
            "1% loss injected on client host host-0: 1,412 segments dropped (out: 37 SYN, \
             1,200 data, 73 pure ACK; in: 12 SYN-ACK, 90 data); its 1,290 retransmits: 49 SYN, \
             41 RTO, 1,200 fast; what was dropped coming in, the server host resent"
        );
    }

    #[test]
    fn percentages_drop_trailing_zeros() {
        assert_eq!(percent(0.01), "1%");
        assert_eq!(percent(0.005), "0.5%");
        assert_eq!(percent(0.5), "50%");
        assert_eq!(percent(0.0125), "1.25%");
    }

    #[test]
    fn nothing_dropped_says_none() {
        assert_eq!(classes(&DroppedSegments::default()), "none");
        assert_eq!(retransmit_kinds(&Retransmits::default()), "none");
    }
}
