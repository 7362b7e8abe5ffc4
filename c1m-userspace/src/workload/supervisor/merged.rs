//! The histograms a snapshot shows, one per name, each the sum of what every shard
//! recorded: a shard's report carries the values it recorded since its last one, and
//! they are recorded here as they arrive (see `stats::histograms::Hists`). A snapshot
//! computes percentiles and the blob again only for a sum that changed.
//!
//! Summed afresh for every stats answer (13 new ~190 KiB sums and their page faults, a
//! walk of ~23k counts per shard histogram, 13 percentile sets and deflates), a client
//! supervisor at 200k (11 workers) spent 3.6 ms of CPU per answer; at 1M, read 4 times a
//! second, the two supervisors were 2.9% of the ramp's CPU (perf, 2026-12-05). Kept as
//! sums of whole shard histograms, each replaced in its sum as it came, the client's was
//! still 2.8% (1.85 µs a WebSocket, 2026-12-06): decoding, subtracting and adding them.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use crate::workload::stats::histograms::{self, HIST_NAMES, HISTS, Percentiles};

/// One name's sum over the shards and what a snapshot shows of it.
struct Sum {
    hist: Histogram<u64>,
    /// Percentiles and blob of `hist` as it is; None once it changed.
    shown: Option<(Percentiles, String)>,
}

/// The sums, by position in [`HIST_NAMES`]; None until a value or a snapshot needs one.
pub(super) struct Sums([Option<Sum>; HISTS]);

impl Sums {
    pub(super) fn new() -> Sums {
        Sums(std::array::from_fn(|_| None))
    }

    /// Records a shard's values of histogram `name`: (value µs, count) pairs.
    pub(super) fn record(&mut self, name: &str, pairs: &[(u64, u64)]) {
        let Some(i) = HIST_NAMES.iter().position(|n| *n == name) else {
            return;
        };
        let Some(sum) = slot(&mut self.0[i]) else {
            return;
        };
        sum.shown = None;
        let lost = histograms::record_pairs(&mut sum.hist, pairs);
        if lost > 0 {
            eprintln!("c1m: {name}: {lost} values out of the histogram's range left out");
        }
    }

    /// Percentiles and blobs (base64 V2-deflate) of every name.
    pub(super) fn shown(&mut self) -> (BTreeMap<String, Percentiles>, BTreeMap<String, String>) {
        let mut percentiles = BTreeMap::new();
        let mut blobs = BTreeMap::new();
        for (entry, name) in self.0.iter_mut().zip(HIST_NAMES) {
            let Some(sum) = slot(entry) else {
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

/// The sum in `entry`, an empty one made if there was none (None if none can be made).
fn slot(entry: &mut Option<Sum>) -> Option<&mut Sum> {
    if entry.is_none() {
        *entry = histograms::new_hist()
            .ok()
            .map(|hist| Sum { hist, shown: None });
    }
    entry.as_mut()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    /// As the shards' reports come, the sums show what one histogram of every value shows.
    #[test]
    fn recorded_pairs_show_what_one_histogram_shows() {
        let name = HIST_NAMES[0];
        let mut sums = Sums::new();
        let (p, b) = sums.shown();
        assert_eq!(p[name].count, 0);
        assert_eq!(p.len(), HISTS);
        assert_eq!(b.len(), HISTS);
        let mut whole = histograms::new_hist().unwrap();
        for pairs in [&[(10, 2), (20, 1)][..], &[], &[(5_000, 3), (10, 1)]] {
            sums.record(name, pairs);
            for &(v, n) in pairs {
                whole.record_n(v, n).unwrap();
            }
        }
        let (p, b) = sums.shown();
        assert_eq!(p[name].count, 7);
        assert_eq!(p[name], Percentiles::of(&whole));
        assert_eq!(b[name], histograms::encode_hist(&whole).unwrap());
        assert_eq!(p[HIST_NAMES[1]].count, 0);
        // A value out of range is left out, the rest taken; an unknown name changes nothing.
        sums.record(name, &[(u64::MAX, 1), (30, 1)]);
        sums.record("no_such_us", &[(1, 1)]);
        whole.record(30).unwrap();
        assert_eq!(sums.shown().0[name], Percentiles::of(&whole));
    }
}
