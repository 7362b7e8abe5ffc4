//! The histograms a snapshot shows, each a sum over the shards kept between snapshots: a
//! shard's new histogram takes its last one's place in the sum as its report arrives, and
//! a snapshot computes percentiles and the blob again only for a sum that changed.
//!
//! Summed afresh for every stats answer (13 new ~190 KiB sums and their page faults, a
//! walk of ~23k counts per shard histogram, 13 percentile sets and deflates), a client
//! supervisor at 200k (11 workers) spent 3.6 ms of CPU per answer; at 1M, read 4 times a
//! second, the two supervisors were 2.9% of the ramp's CPU (perf, 2026-12-05).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use crate::workload::stats::histograms::{self, HIST_NAMES, HISTS, Percentiles};

/// One name's sum over the shards and what a snapshot shows of it.
struct Sum {
    hist: Histogram<u64>,
    /// Percentiles and blob of `hist` as it is; None once it changed.
    shown: Option<(Percentiles, String)>,
}

/// The sums, by position in [`HIST_NAMES`]; None: summed afresh when next shown (at
/// first, and after a replacement the sum could not take).
pub(super) struct Sums([Option<Sum>; HISTS]);

impl Sums {
    pub(super) fn new() -> Sums {
        Sums(std::array::from_fn(|_| None))
    }

    /// A shard's histogram `name` is `new` now, where it was `old`.
    pub(super) fn replace(
        &mut self,
        name: &str,
        old: Option<&Histogram<u64>>,
        new: &Histogram<u64>,
    ) {
        let Some(i) = HIST_NAMES.iter().position(|n| *n == name) else {
            return;
        };
        let Some(sum) = &mut self.0[i] else {
            return;
        };
        sum.shown = None;
        let took = old.is_none_or(|o| sum.hist.subtract(o).is_ok()) && sum.hist.add(new).is_ok();
        if !took {
            self.0[i] = None;
        }
    }

    /// Percentiles and blobs (base64 V2-deflate) of every name; `of(name)` gives the
    /// shards' histograms of that name, for a sum made afresh.
    pub(super) fn shown<'a, I>(
        &mut self,
        of: impl Fn(&'static str) -> I,
    ) -> (BTreeMap<String, Percentiles>, BTreeMap<String, String>)
    where
        I: Iterator<Item = &'a Histogram<u64>>,
    {
        let mut percentiles = BTreeMap::new();
        let mut blobs = BTreeMap::new();
        for (slot, name) in self.0.iter_mut().zip(HIST_NAMES) {
            if slot.is_none() {
                *slot = fresh(of(name), name);
            }
            let Some(sum) = slot else {
                continue;
            };
            let (p, blob) = sum.shown.get_or_insert_with(|| {
                let blob = histograms::encode_hist(&sum.hist).unwrap_or_else(|e| {
                    eprintln!("c1m: encode {name}: {e}");
                    String::new()
                });
                (Percentiles::of(&sum.hist), blob)
            });
            percentiles.insert(name.to_owned(), *p);
            if !blob.is_empty() {
                blobs.insert(name.to_owned(), blob.clone());
            }
        }
        (percentiles, blobs)
    }
}

/// A sum of `hists` made afresh (None if no histogram can be made).
fn fresh<'a>(hists: impl Iterator<Item = &'a Histogram<u64>>, name: &str) -> Option<Sum> {
    let mut hist = histograms::new_hist().ok()?;
    for h in hists {
        if let Err(e) = hist.add(h) {
            eprintln!("c1m: merge {name}: {e}");
        }
    }
    Some(Sum { hist, shown: None })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    fn hist(values: &[u64]) -> Histogram<u64> {
        let mut h = histograms::new_hist().unwrap();
        for v in values {
            h.record(*v).unwrap();
        }
        h
    }

    /// Percentiles and blobs of a sum of `shards` under the first name.
    fn show(
        sums: &mut Sums,
        shards: &[Histogram<u64>],
    ) -> (BTreeMap<String, Percentiles>, BTreeMap<String, String>) {
        sums.shown(|n| {
            let mine = n == HIST_NAMES[0];
            shards.iter().filter(move |_| mine)
        })
    }

    /// Kept up to date by replacements, a sum shows what summing afresh shows.
    #[test]
    fn replacements_keep_the_sum_a_fresh_one_would_be() {
        let name = HIST_NAMES[0];
        let mut shards = vec![hist(&[10, 20]), hist(&[]), hist(&[5_000])];
        let mut sums = Sums::new();
        let (p, b) = show(&mut sums, &shards);
        assert_eq!(p[name].count, 3);
        assert_eq!(p[HIST_NAMES[1]].count, 0);
        assert!(b.contains_key(name));
        // Shard 0 recorded more; shard 1 its first value.
        for (i, new) in [(0, hist(&[10, 20, 30])), (1, hist(&[7]))] {
            sums.replace(name, Some(&shards[i]), &new);
            shards[i] = new;
        }
        let (p, b) = show(&mut sums, &shards);
        let (fresh_p, fresh_b) = show(&mut Sums::new(), &shards);
        assert_eq!(p[name].count, 5);
        assert_eq!(p[name], fresh_p[name]);
        assert_eq!(b[name], fresh_b[name]);
        // A replacement the sum cannot take (an old histogram it never held) makes it
        // summed afresh, never wrong.
        sums.replace(name, Some(&hist(&[1, 2, 3, 4, 5, 6])), &hist(&[]));
        let (p, _) = show(&mut sums, &shards);
        assert_eq!(p[name], fresh_p[name]);
        // An unknown name changes nothing.
        sums.replace("no_such_us", None, &hist(&[1]));
        assert_eq!(show(&mut sums, &shards).0, fresh_p);
    }
}
