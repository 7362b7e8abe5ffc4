//! The order check on a server's messages (`c1m server --message-rate`), pure. Each
//! message carries its number in its connection's stream (the low 31 bits of its
//! sequence, from 0, see `workload::messages`), and one TCP stream carries them, so a
//! client must read 0, 1, 2, … with nothing skipped, repeated or reordered. Anything else
//! is the server's fault (or a broken peer's), and each kind is counted on its own:
//!
//! - a *gap*: a number above the one expected; the numbers it jumped over are `skipped`;
//! - *out of order*: a number below the one expected that had not arrived (a skipped
//!   one, late);
//! - a *duplicate*: a number that had arrived already.
//!
//! Why a window and not just the next number: with the next number alone a message
//! below it is either late or repeated, and the two mean different bugs. A connection
//! keeps the next number it waits for and which of the [`WINDOW`] numbers below it
//! arrived, a bit each (IPsec's anti-replay window, RFC 4303 §3.4.3): 6 bytes, which fit
//! in the padding of the client's connection state, so no connection grows. A number
//! further back than the window can no longer be told apart and is counted out of order.

use crate::workload::stats::counters::ServerMessages;

/// How many numbers below the next one a connection remembers.
const WINDOW: u32 = u16::BITS;
/// The number's bits: the sequence's top bit says a server sent it.
const NUMBER: u32 = (1 << 31) - 1;
/// Half the number space: a number less than this ahead of the next is ahead of it
/// (serial number arithmetic, RFC 1982), anything else is behind.
const HALF: u32 = 1 << 30;

/// A connection's place in its server's numbering, borrowed from its state.
#[derive(Debug)]
pub(crate) struct Order<'a> {
    /// The number expected next.
    pub next: &'a mut u32,
    /// Bit `i`: number `next - 1 - i` arrived.
    pub seen: &'a mut u16,
}

/// What a message's number said, for the words the client prints once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// The number expected.
    InOrder,
    /// Above the one expected: `skipped` numbers did not come before it.
    Gap { expected: u32, skipped: u32 },
    /// Below the one expected, not seen before: a skipped number, late (or one older
    /// than the window, which cannot be told from a duplicate).
    OutOfOrder { expected: u32 },
    /// A number that had arrived already.
    Duplicate,
}

/// A server's message numbered `seq` (its sequence; the top bit is ignored) arrived on
/// the connection `o`: counted in `m` when it is not the one expected.
pub(crate) fn arrived(m: &mut ServerMessages, o: Order<'_>, seq: u32) -> Arrival {
    let seq = seq & NUMBER;
    let expected = *o.next;
    let ahead = seq.wrapping_sub(expected) & NUMBER;
    if ahead < HALF {
        // Bit i (number expected - 1 - i) moves to i + ahead + 1; the numbers skipped
        // get the clear bits 1..=ahead, and `seq` itself bit 0.
        let kept = ahead
            .checked_add(1)
            .and_then(|s| o.seen.checked_shl(s))
            .unwrap_or(0);
        *o.seen = kept | 1;
        *o.next = seq.wrapping_add(1) & NUMBER;
        if ahead == 0 {
            return Arrival::InOrder;
        }
        m.gaps += 1;
        m.skipped += u64::from(ahead);
        return Arrival::Gap {
            expected,
            skipped: ahead,
        };
    }
    let behind = expected.wrapping_sub(seq).wrapping_sub(1) & NUMBER;
    let bit = if behind < WINDOW { 1u16 << behind } else { 0 };
    if bit != 0 && *o.seen & bit != 0 {
        m.duplicates += 1;
        return Arrival::Duplicate;
    }
    *o.seen |= bit;
    m.out_of_order += 1;
    Arrival::OutOfOrder { expected }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `seqs` to a fresh connection: the arrivals and the counts.
    fn feed(seqs: &[u32]) -> (Vec<Arrival>, ServerMessages) {
        let (mut next, mut seen, mut m) = (0, 0, ServerMessages::default());
        let got = seqs
            .iter()
            .map(|&s| {
                arrived(
                    &mut m,
                    Order {
                        next: &mut next,
                        seen: &mut seen,
                    },
                    s | 1 << 31,
                )
            })
            .collect();
        (got, m)
    }

    fn counts(m: &ServerMessages) -> (u64, u64, u64, u64) {
        (m.gaps, m.skipped, m.out_of_order, m.duplicates)
    }

    #[test]
    fn numbers_in_order_count_nothing() {
        let (got, m) = feed(&(0..100).collect::<Vec<_>>());
        assert!(got.iter().all(|a| *a == Arrival::InOrder));
        assert_eq!(counts(&m), (0, 0, 0, 0));
    }

    #[test]
    fn a_gap_a_late_one_and_a_repeat_are_told_apart() {
        use Arrival::*;
        let (got, m) = feed(&[0, 1, 3, 2, 2, 3, 7, 4, 0]);
        assert_eq!(
            got,
            [
                InOrder,
                InOrder,
                Gap {
                    expected: 2,
                    skipped: 1
                },
                OutOfOrder { expected: 4 },
                Duplicate,
                Duplicate,
                Gap {
                    expected: 4,
                    skipped: 3
                },
                OutOfOrder { expected: 8 },
                Duplicate,
            ]
        );
        assert_eq!(counts(&m), (2, 4, 2, 3));
    }

    #[test]
    fn the_window_reaches_16_back_and_older_numbers_count_out_of_order() {
        let (_, m) = feed(&[0, 20, 5]);
        // 5 is 15 below 21: in the window, skipped, so late.
        assert_eq!(counts(&m), (1, 19, 1, 0));
        let (got, m) = feed(&[0, 20, 4, 4]);
        // 4 is 16 below 21: past the window, told from nothing.
        assert_eq!(got[2], Arrival::OutOfOrder { expected: 21 });
        assert_eq!(got[3], Arrival::OutOfOrder { expected: 21 });
        assert_eq!(counts(&m), (1, 19, 2, 0));
        // A jump past the window forgets everything before it.
        let (got, _) = feed(&[0, 1, 100, 1]);
        assert_eq!(got[3], Arrival::OutOfOrder { expected: 101 });
    }

    #[test]
    fn the_numbering_wraps_at_31_bits() {
        let (mut next, mut seen, mut m) = (NUMBER - 1, 0, ServerMessages::default());
        for s in [NUMBER - 1, NUMBER, 0, 1] {
            let o = Order {
                next: &mut next,
                seen: &mut seen,
            };
            // The server's u32 counter wraps through the top bit, which is ignored.
            assert_eq!(arrived(&mut m, o, s | 1 << 31), Arrival::InOrder, "{s}");
        }
        let o = Order {
            next: &mut next,
            seen: &mut seen,
        };
        assert_eq!(arrived(&mut m, o, NUMBER), Arrival::Duplicate);
        assert_eq!(counts(&m), (0, 0, 0, 1));
    }
}
