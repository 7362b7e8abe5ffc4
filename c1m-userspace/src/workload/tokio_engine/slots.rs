//! A shard's connections, each one's state and its task's waker, in one slab the
//! connection's task reaches by index (both engines' sides: the tokio server and client).
//! Why not in the task's future: tokio aligns a task's cell to 128 B, and the cell is the
//! future plus 104 B of tokio's own, so a task whose future is only `(Rc<shard>, index)`
//! fits in one 128-B cell, where the connection's state in its future made it 512 B; here
//! the state costs its size and no more. And the shard reaches every connection without
//! waking its task: the server's push is written by the shard's loop
//! ([`Shard::push_chunk`](super::server)), a close, a phase switch or an overdue
//! handshake wakes the tasks through their wakers (no `Notified` of 64 B per task).

use std::task::Waker;

/// One slot: a connection's state (None once the shard ended it, until its task sees
/// that) and the waker of its task (None until the task's first poll).
pub(super) struct Slot<C> {
    pub(super) conn: Option<C>,
    pub(super) waker: Option<Waker>,
}

pub(super) struct Slots<C> {
    slots: Vec<Slot<C>>,
    /// Vacant slots, reused first.
    free: Vec<u32>,
    /// Slots reserved at the first connection: the shard's cap. Grown by doubling, the
    /// old arrays (~1.4 MB for a 14k-slot shard) could stay resident in the heap once
    /// freed; reserved pages are resident only once a slot on them is used. Measured
    /// gain is small: `bench engines` at 200k, WebSocket bytes 543 → 534–539 B.
    room: usize,
}

impl<C> Slots<C> {
    pub(super) fn with_room(room: usize) -> Self {
        Slots {
            slots: Vec::new(),
            free: Vec::new(),
            room,
        }
    }

    /// Places a new connection; its index is its task's.
    pub(super) fn insert(&mut self, conn: C) -> u32 {
        let slot = Slot {
            conn: Some(conn),
            waker: None,
        };
        if self.slots.capacity() == 0 {
            self.slots.reserve_exact(self.room);
        }
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        }
    }

    pub(super) fn get_mut(&mut self, i: u32) -> Option<&mut Slot<C>> {
        self.slots.get_mut(i as usize)
    }

    /// Slot `i` as its task polls it: the task's waker kept (cloned only when it changed).
    pub(super) fn polled(&mut self, i: u32, waker: &Waker) -> Option<&mut Slot<C>> {
        let slot = self.slots.get_mut(i as usize)?;
        if !slot.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            slot.waker = Some(waker.clone());
        }
        Some(slot)
    }

    /// The slot's task is done with it: its connection (if the shard did not end it
    /// already) goes to the caller, the slot to the vacant ones.
    pub(super) fn vacate(&mut self, i: u32) -> Option<C> {
        let s = self.slots.get_mut(i as usize)?;
        let conn = s.conn.take();
        s.waker = None;
        self.free.push(i);
        if self.free.len() == self.slots.len() {
            // Every connection is gone: give back what the ramp needed.
            self.slots = Vec::new();
            self.free = Vec::new();
        }
        conn
    }

    /// Slots `0..len()`, for the shard's loops (push) that walk them by index.
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Wakes every connection's task (a close, a phase switch, an overdue handshake).
    pub(super) fn wake_all(&self) {
        for w in self.slots.iter().filter_map(|s| s.waker.as_ref()) {
            w.wake_by_ref();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn a_vacated_slot_is_reused_and_an_empty_slab_gives_its_memory_back() {
        let mut s = Slots::<u8>::with_room(1);
        let a = s.insert(7);
        let b = s.insert(7);
        assert_eq!((a, b), (0, 1));
        assert!(s.vacate(a).is_some());
        // Ended by the shard: the task finds no connection, the slot still vacates.
        s.get_mut(b).unwrap().conn = None;
        assert_eq!(s.insert(7), a);
        assert!(s.vacate(b).is_none());
        assert!(s.vacate(a).is_some());
        assert_eq!(s.len(), 0);
    }
}
