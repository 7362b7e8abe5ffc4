//! The connect timeout of the connections in setup: one queue per shard, swept at the
//! report tick, as the epoll client sweeps its `pending` (so both engines time a setup out
//! at the same granularity, up to one tick late). Not a tokio `Sleep` per connection: that
//! was a boxed timer entry a connection, inserted into the runtime's wheel, moved at each
//! setup step and removed once open, each under the time driver's lock.
//!
//! Each setup step (connect, TLS handshake, WebSocket upgrade) is numbered in the order it
//! began; the timeout is one for the shard, so the front of the queue is always the next
//! step due. A step past its deadline and not ended is overdue: the sweep wakes its task
//! (by the waker the task left), which then sees it overdue and ends.

use std::{cell::RefCell, collections::VecDeque, task::Waker};

/// The shard's setup steps in the order they began.
#[derive(Default)]
pub(super) struct Deadlines {
    steps: VecDeque<Entry>,
    /// The number of the step at the front of `steps`.
    base: u64,
    /// Steps numbered below this that are not ended are overdue.
    cutoff: u64,
}

struct Entry {
    /// When the step began (monotonic ns): its deadline is this plus the timeout.
    began_ns: u64,
    /// The task to wake if the step is overdue: None until the task first waits, and
    /// once the step ended.
    waker: Option<Waker>,
}

impl Deadlines {
    /// Queues a step that began at `began_ns`; returns its number.
    fn begin(&mut self, began_ns: u64) -> u64 {
        let n = self.base + self.steps.len() as u64;
        self.steps.push_back(Entry {
            began_ns,
            waker: None,
        });
        n
    }

    /// Step `n` is over (done, or its connection ended): no wake, no timeout.
    fn end(&mut self, n: u64) {
        if let Some(e) = self.entry(n) {
            e.waker = None;
        }
    }

    fn entry(&mut self, n: u64) -> Option<&mut Entry> {
        let i = usize::try_from(n.checked_sub(self.base)?).ok()?;
        self.steps.get_mut(i)
    }

    /// Whether step `n` timed out (checked by its task, which ends it).
    fn overdue(&self, n: u64) -> bool {
        n < self.cutoff
    }

    /// Step `n`'s task waits: the sweep wakes it if the step is overdue.
    fn wait(&mut self, n: u64, waker: &Waker) {
        if let Some(e) = self.entry(n)
            && !e.waker.as_ref().is_some_and(|w| w.will_wake(waker))
        {
            e.waker = Some(waker.clone());
        }
    }

    /// At a report tick: the steps older than `limit_ns` at `now_ns` leave the queue, and
    /// those not ended are overdue and their tasks woken.
    pub(super) fn sweep(&mut self, now_ns: u64, limit_ns: u64) {
        while let Some(e) = self.steps.front_mut() {
            if now_ns.saturating_sub(e.began_ns) <= limit_ns {
                break;
            }
            if let Some(w) = e.waker.take() {
                w.wake();
            }
            self.steps.pop_front();
            self.base += 1;
        }
        self.cutoff = self.base;
        if self.steps.is_empty() && self.steps.capacity() > 1024 {
            // The ramp is over: give back what it needed.
            self.steps.shrink_to_fit();
        }
    }
}

/// A connection's current setup step in its shard's queue, ended when dropped (its setup
/// finished, failed, or was dropped by a teardown).
pub(super) struct Step<'a> {
    queue: &'a RefCell<Deadlines>,
    n: u64,
}

impl<'a> Step<'a> {
    pub(super) fn begin(queue: &'a RefCell<Deadlines>, began_ns: u64) -> Step<'a> {
        let n = queue.borrow_mut().begin(began_ns);
        Step { queue, n }
    }

    /// The next step begins at `began_ns`; this one is over.
    pub(super) fn restart(&mut self, began_ns: u64) {
        let mut q = self.queue.borrow_mut();
        q.end(self.n);
        self.n = q.begin(began_ns);
    }

    /// True if this step timed out; else its task waits (`waker` is woken if it does).
    pub(super) fn overdue_else_wait(&self, waker: &Waker) -> bool {
        let mut q = self.queue.borrow_mut();
        if q.overdue(self.n) {
            return true;
        }
        q.wait(self.n, waker);
        false
    }
}

impl Drop for Step<'_> {
    fn drop(&mut self) {
        // Not a panic in a drop: were the queue borrowed here (a sweep dropping a task's
        // last waker), the step would only stay pending until the sweep that pops it.
        if let Ok(mut q) = self.queue.try_borrow_mut() {
            q.end(self.n);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use std::{
        sync::{
            Arc,
            atomic::{AtomicUsize, Ordering},
        },
        task::Wake,
    };

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn only_pending_steps_past_the_timeout_are_overdue_and_woken() {
        let q = RefCell::new(Deadlines::default());
        let woken = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(woken.clone());
        let mut a = Step::begin(&q, 100); // restarted at 150: its first step is over
        let b = Step::begin(&q, 110); // pending, waits
        let c = Step::begin(&q, 120); // pending, never waited yet
        a.restart(150);
        q.borrow_mut().wait(b.n, &waker);
        q.borrow_mut().wait(a.n, &waker);
        // At 131 with a timeout of 20: the steps begun at 100 and 110 are past it.
        q.borrow_mut().sweep(131, 20);
        let d = q.borrow();
        assert!(d.overdue(b.n));
        assert!(!d.overdue(c.n) && !d.overdue(a.n));
        drop(d);
        assert_eq!(woken.0.load(Ordering::Relaxed), 1, "only b's task is woken");
        // c's deadline passes; a (began 150) is within it. Dropped steps are never woken.
        drop(b);
        q.borrow_mut().sweep(145, 20);
        assert!(q.borrow().overdue(c.n) && !q.borrow().overdue(a.n));
        drop((a, c));
        q.borrow_mut().sweep(1_000, 20);
        assert!(q.borrow().steps.is_empty());
        assert_eq!(woken.0.load(Ordering::Relaxed), 1);
    }
}
