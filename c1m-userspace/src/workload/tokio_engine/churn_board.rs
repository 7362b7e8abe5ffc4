//! `--churn` in the tokio client: which task closes next. A task has no channel of its
//! own (an idle connection's future is most of its memory), so each open task takes its
//! place on the shard's board while churn is configured: the entry of its connection's
//! shard index `k` (one task holds a `k` at a time: a churned task leaves before its
//! reopen starts), holding its waker and a flag. The task keeps nothing for it: `k`
//! derives from its connection's index. The shard's churn pump flags the task the order
//! picks (the oldest place, or a random one) and wakes it; the task sees its flag at its
//! next poll, says goodbye as a teardown does and reopens. 24 B per connection in the
//! board (+ 8 B in the oldest-first line), none without `--churn`.

use std::{collections::VecDeque, task::Waker};

use crate::workload::{churn::ChurnOrder, sys::splitmix64};

#[derive(Default)]
struct Entry {
    generation: u32,
    live: bool,
    flagged: bool,
    waker: Option<Waker>,
}

/// The shard's open tasks, for the churn pump to pick from.
pub(crate) struct Board {
    /// By the connection's shard index `k`.
    entries: Vec<Entry>,
    /// Oldest first: (k, generation) in the order their tasks opened (stale ones
    /// skipped).
    line: VecDeque<(u32, u32)>,
    order: ChurnOrder,
    rng: u64,
    live: u64,
}

impl Board {
    pub(crate) fn new(order: ChurnOrder, seed: u64) -> Board {
        Board {
            entries: Vec::new(),
            line: VecDeque::new(),
            order,
            rng: seed,
            live: 0,
        }
    }

    /// The open task of connection `k` takes its place.
    pub(crate) fn join(&mut self, k: u32) {
        if self.entries.len() <= k as usize {
            self.entries.resize_with(k as usize + 1, Entry::default);
        }
        let e = &mut self.entries[k as usize];
        if e.live {
            return;
        }
        e.generation = e.generation.wrapping_add(1);
        e.live = true;
        e.flagged = false;
        e.waker = None;
        self.live += 1;
        if self.order == ChurnOrder::Oldest {
            self.line.push_back((k, e.generation));
        }
    }

    /// The task of connection `k` ended (churned or not), if it had joined.
    pub(crate) fn leave(&mut self, k: u32) {
        if let Some(e) = self.entries.get_mut(k as usize)
            && e.live
        {
            e.live = false;
            e.waker = None;
            self.live -= 1;
        }
    }

    /// Whether any task holds a place (none without `--churn`).
    pub(crate) fn holds_any(&self) -> bool {
        self.live > 0
    }

    /// Has the pump picked the task of connection `k`? If not, its waker is kept for
    /// when it does (a task that has not joined is never picked).
    pub(crate) fn picked(&mut self, k: u32, waker: &Waker) -> bool {
        let Some(e) = self.entries.get_mut(k as usize).filter(|e| e.live) else {
            return false;
        };
        if e.flagged {
            return true;
        }
        if !e.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            e.waker = Some(waker.clone());
        }
        false
    }

    /// Picks the next task to churn by the order, flags and wakes it. False: no task
    /// holds a place that is not picked already.
    pub(crate) fn pick(&mut self) -> bool {
        let at = match self.order {
            ChurnOrder::Oldest => loop {
                let Some((i, g)) = self.line.pop_front() else {
                    return false;
                };
                if self
                    .entries
                    .get(i as usize)
                    .is_some_and(|e| e.live && e.generation == g && !e.flagged)
                {
                    break i;
                }
            },
            ChurnOrder::Random => {
                let n = self.entries.len() as u64;
                if n == 0 || self.live == 0 {
                    return false;
                }
                let mut found = None;
                // Places are nearly all taken while the shard holds: a few draws find one.
                for _ in 0..64 {
                    self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
                    let i = (splitmix64(self.rng) % n) as u32;
                    if self.entries[i as usize].live && !self.entries[i as usize].flagged {
                        found = Some(i);
                        break;
                    }
                }
                match found {
                    Some(i) => i,
                    None => return false,
                }
            }
        };
        let e = &mut self.entries[at as usize];
        e.flagged = true;
        if let Some(w) = e.waker.take() {
            w.wake();
        }
        true
    }

    /// Everything forgotten (the teardown).
    pub(crate) fn clear(&mut self) {
        self.line = VecDeque::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_first_skips_the_places_left() {
        let mut b = Board::new(ChurnOrder::Oldest, 1);
        let (a, x, c) = (2, 0, 1);
        for k in [a, x, c] {
            b.join(k);
        }
        b.leave(a);
        let w = Waker::noop();
        assert!(b.pick());
        // `a` left: `x` was picked, then `c`, then nothing is left to pick.
        assert!(b.picked(x, w) && !b.picked(c, w) && !b.picked(a, w));
        assert!(b.pick());
        assert!(b.picked(c, w));
        assert!(!b.pick());
        // `a` reopened: its new task joins at the back of the line, not picked.
        b.join(a);
        assert!(!b.picked(a, w));
        assert!(b.pick() && b.picked(a, w));
    }

    #[test]
    fn random_picks_each_live_place_once() {
        let mut b = Board::new(ChurnOrder::Random, 7);
        let places: Vec<u32> = (0..10).collect();
        for &k in &places {
            b.join(k);
        }
        let w = Waker::noop();
        let mut picked = 0;
        while b.pick() {
            picked += 1;
            assert!(picked <= 10);
        }
        // 64 draws may miss the last few; every pick is a distinct live place.
        assert!(picked >= 5, "{picked}");
        assert_eq!(places.iter().filter(|&&p| b.picked(p, w)).count(), picked);
    }
}
