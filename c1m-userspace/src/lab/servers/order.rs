//! The order of a `--servers` sequence's runs: rounds of a Williams design, so what a
//! run inherits from the one before it weighs on every server alike. Pure.

use super::reference::ReferenceServer;

/// The order of the runs for `--repeat K`: each entry is (server, repeat index), every
/// round runs each server once. What a run inherits from the one before it (memory the
/// kernel has not given back yet, a warm or busy box; without a fresh network namespace,
/// its TIME_WAIT sockets) must weigh on every server alike, so each server should follow
/// each other server equally often. Rotating the list did not do that: `a b c`, `b c a`,
/// `c a b` has `b` after `a` in every round. The rounds are the rows of a Williams
/// design (the crossover design balanced for first-order carry-over): over its period
/// (n rounds for an even number of servers, 2n for an odd one) every ordered pair stands
/// next to each other within rounds equally often and every server runs first equally
/// often. The rows of a period are taken in the order that keeps the pairs across round
/// boundaries balanced too (the row that leaves the fewest repeats), so over a period
/// the counts of "a right after b", boundaries included, differ by at most one.
pub(crate) fn schedule(
    servers: &[ReferenceServer],
    repeat: usize,
) -> Vec<(ReferenceServer, usize)> {
    balanced_order(servers.len(), repeat)
        .into_iter()
        .enumerate()
        .map(|(i, s)| (servers[s], i / servers.len().max(1)))
        .collect()
}

/// The rows of a Williams design for `n` treatments: the cyclic Latin square whose first
/// row is 0, 1, n−1, 2, n−2, …, and for odd `n` also its rows reversed.
fn williams_rows(n: usize) -> Vec<Vec<usize>> {
    let mut first = Vec::with_capacity(n);
    let (mut lo, mut hi) = (1, n);
    for i in 0..n {
        // 0, then alternately the next from the bottom and the next from the top.
        if i == 0 {
            first.push(0);
        } else if i % 2 == 1 {
            first.push(lo);
            lo += 1;
        } else {
            hi -= 1;
            first.push(hi);
        }
    }
    let mut rows: Vec<Vec<usize>> = (0..n)
        .map(|r| first.iter().map(|x| (x + r) % n).collect())
        .collect();
    if n % 2 == 1 {
        let mirrored: Vec<Vec<usize>> = rows
            .iter()
            .map(|r| r.iter().rev().copied().collect())
            .collect();
        rows.extend(mirrored);
    }
    rows
}

/// `rounds` rounds of `0..n`, one after another, as indices (see [`schedule`]).
fn balanced_order(n: usize, rounds: usize) -> Vec<usize> {
    let rows = williams_rows(n);
    // follows[a][b]: how often b ran right after a so far.
    let mut follows = vec![vec![0u32; n]; n];
    let mut order: Vec<usize> = Vec::with_capacity(n * rounds);
    let mut unused: Vec<usize> = Vec::new();
    for _ in 0..rounds {
        if unused.is_empty() {
            unused = (0..rows.len()).collect();
        }
        // The row whose pairs, with the one across the boundary, leave the counts most
        // even: the lowest highest count, then the smallest spread, then no server
        // right after itself, then the fewest repeats; ties go to the design's order.
        let cost = |row: &[usize]| {
            let mut f = follows.clone();
            let mut itself = 0;
            let boundary = order.last().map(|&last| (last, row[0]));
            for (a, b) in boundary
                .into_iter()
                .chain(row.windows(2).map(|w| (w[0], w[1])))
            {
                f[a][b] += 1;
                itself += u32::from(a == b);
            }
            let others = (0..n).flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| (a, b)));
            let counts: Vec<u32> = others.map(|(a, b)| f[a][b]).collect();
            let max = counts.iter().copied().max().unwrap_or(0);
            let min = counts.iter().copied().min().unwrap_or(0);
            let squares: u32 = counts.iter().map(|c| c * c).sum();
            (max, max - min, itself, squares)
        };
        let Some(pick) = unused.iter().copied().min_by_key(|&i| (cost(&rows[i]), i)) else {
            break;
        };
        unused.retain(|&i| i != pick);
        for &s in &rows[pick] {
            if let Some(&last) = order.last() {
                follows[last][s] += 1;
            }
            order.push(s);
        }
    }
    order
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// How often each server ran right after each other one (a != b), and right after
    /// itself, over the whole sequence, round boundaries included.
    fn follow_counts(order: &[usize], n: usize) -> (Vec<u32>, u32) {
        let mut f = vec![vec![0u32; n]; n];
        for w in order.windows(2) {
            f[w[0]][w[1]] += 1;
        }
        let others = (0..n)
            .flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| (a, b)))
            .map(|(a, b)| f[a][b])
            .collect();
        (others, (0..n).map(|a| f[a][a]).sum())
    }

    #[test]
    fn each_server_follows_each_other_equally_often_over_a_period() {
        for n in 2..=6 {
            // A Williams design's period: n rounds for even n, 2n for odd n (for n = 3
            // and 5 no n rounds can put every pair side by side once).
            let period = if n % 2 == 0 { n } else { 2 * n };
            // Two periods stay balanced for an even count; for 3 or 5 servers the second
            // period's boundaries repeat the first's.
            for periods in 1..=(if n % 2 == 0 { 2 } else { 1 }) {
                let rounds = period * periods;
                let order = balanced_order(n, rounds);
                assert_eq!(order.len(), n * rounds);
                for (r, round) in order.chunks(n).enumerate() {
                    let mut sorted = round.to_vec();
                    sorted.sort_unstable();
                    assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "n={n} round {r}");
                }
                // Within rounds, the design itself: every ordered pair equally often.
                let mut within = vec![vec![0u32; n]; n];
                for round in order.chunks(n) {
                    for w in round.windows(2) {
                        within[w[0]][w[1]] += 1;
                    }
                }
                let want = (rounds / n) as u32;
                for (a, row) in within.iter().enumerate() {
                    for (b, &count) in row.iter().enumerate().filter(|&(b, _)| b != a) {
                        assert_eq!(count, want, "n={n} rounds={rounds}: {b} after {a}");
                    }
                }
                // With the boundaries between rounds: as even as the count allows.
                let (counts, itself) = follow_counts(&order, n);
                let (min, max) = (
                    counts.iter().copied().min().unwrap(),
                    counts.iter().copied().max().unwrap(),
                );
                assert!(max - min <= 1, "n={n} rounds={rounds}: counts {counts:?}");
                let pairs = (n * (n - 1)) as u32;
                let total: u32 = counts.iter().sum();
                assert_eq!(min, total / pairs, "n={n} rounds={rounds}");
                // No server right after itself, except where two servers allow no other.
                if n > 3 {
                    assert_eq!(itself, 0, "n={n} rounds={rounds}");
                }
                // Every server first equally often.
                let mut first = vec![0usize; n];
                for round in order.chunks(n) {
                    first[round[0]] += 1;
                }
                assert!(first.iter().all(|&f| f == rounds / n), "n={n}: {first:?}");
            }
        }
    }

    #[test]
    fn a_shorter_sequence_repeats_no_pair_more_than_once() {
        // Fewer rounds than a period (the usual --repeat 2 or 3): a pair comes twice
        // only once the sequence has nearly as many neighbours as there are pairs.
        for n in 2..=6 {
            for rounds in 1..=n {
                let (counts, _) = follow_counts(&balanced_order(n, rounds), n);
                let max = counts.iter().copied().max().unwrap();
                let pairs = n * (n - 1);
                let limit = if (n * rounds - 1) <= pairs - n { 1 } else { 2 };
                assert!(max <= limit, "n={n} rounds={rounds}: {counts:?}");
            }
        }
    }

    #[test]
    fn repeats_follow_the_balanced_order() {
        use ReferenceServer::*;
        let s = schedule(&[Python, Go, C1mEpoll, Node], 4);
        let mut after = std::collections::HashMap::new();
        for w in s.windows(2) {
            *after.entry((w[0].0, w[1].0)).or_insert(0) += 1;
        }
        // 15 neighbours over 12 ordered pairs: each pair once or twice, none missing.
        assert_eq!(after.len(), 12, "{s:?}");
        assert!(after.values().all(|&c| c == 1 || c == 2), "{after:?}");
        assert_eq!(s[0], (Python, 0));
        assert!(s.iter().take(4).all(|&(_, r)| r == 0));
        assert!(s.iter().skip(12).all(|&(_, r)| r == 3));
        assert!(schedule(&[Go], 0).is_empty());
        assert_eq!(schedule(&[Go], 2), vec![(Go, 0), (Go, 1)]);
    }
}
