//! Who holds a connection slot at the metrics endpoint. At most [`PER_PEER`] from one
//! peer and [`TOTAL`] in all; a newcomer over a cap takes the slot of the oldest
//! connection that has not yet sent its request (from its own peer when over the peer's
//! cap, else from the peer holding the most), so clients that trickle request heads from
//! many addresses cannot keep a scraper out: a scrape sends its request at once and is
//! answered before it is the oldest waiting. Only when every slot in question is busy
//! answering is a newcomer closed (a scraper retries).
//!
//! A peer is an IPv4 address, or an IPv6 /64 (what one host usually has to itself).

use std::{
    collections::{BTreeMap, HashMap},
    net::IpAddr,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use tokio::sync::oneshot;

/// Connections one peer may hold: a scraper needs one, a few spare for retries.
pub const PER_PEER: usize = 4;
/// Connections held at once, all peers together.
pub const TOTAL: usize = 256;

/// The slots, shared by the accept loop and the connections.
pub(crate) struct Slots {
    per_peer: usize,
    total: usize,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    /// Admission order: the smallest id is the oldest connection.
    next: u64,
    held: BTreeMap<u64, Held>,
    per_peer: HashMap<IpAddr, usize>,
}

struct Held {
    peer: IpAddr,
    /// Its request is read: it is being answered and is never evicted.
    answering: bool,
    /// Dropped to evict: the connection's receiver completes and it closes.
    _evict: oneshot::Sender<()>,
}

/// A slot held; dropping it frees the slot.
pub(crate) struct Slot {
    slots: Arc<Slots>,
    id: u64,
}

/// Completes when the connection has been evicted for a newcomer.
pub(crate) type Evicted = oneshot::Receiver<()>;

impl Slots {
    pub(crate) fn new(per_peer: usize, total: usize) -> Arc<Slots> {
        Arc::new(Slots {
            per_peer: per_peer.max(1),
            total: total.max(1),
            table: Mutex::new(Table::default()),
        })
    }

    /// A slot for a connection from `ip`, evicting a waiting one if a cap is reached;
    /// `None` when every candidate is busy answering (close the newcomer).
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<(Slot, Evicted)> {
        let peer = peer_of(ip);
        let mut table = self.lock();
        let victim = if table.count(peer) >= self.per_peer {
            Some(table.oldest_waiting(|h| h.peer == peer)?)
        } else if table.held.len() >= self.total {
            let busiest = |t: &Table, h: &Held| t.count(h.peer);
            let id = table
                .held
                .iter()
                .filter(|(_, h)| !h.answering)
                .max_by_key(|(id, h)| (busiest(&table, h), std::cmp::Reverse(**id)))
                .map(|(id, _)| *id)?;
            Some(id)
        } else {
            None
        };
        if let Some(id) = victim {
            table.remove(id); // drops its sender: that connection closes
        }
        let id = table.next;
        table.next += 1;
        let (evict, evicted) = oneshot::channel();
        table.held.insert(
            id,
            Held {
                peer,
                answering: false,
                _evict: evict,
            },
        );
        *table.per_peer.entry(peer).or_insert(0) += 1;
        drop(table);
        Some((
            Slot {
                slots: Arc::clone(self),
                id,
            },
            evicted,
        ))
    }

    /// Connections held now (all peers).
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.lock().held.len()
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Slot {
    /// Its request is read: from now on it is answered, not evicted.
    pub(crate) fn answering(&self) {
        if let Some(h) = self.slots.lock().held.get_mut(&self.id) {
            h.answering = true;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.lock().remove(self.id);
    }
}

impl Table {
    fn count(&self, peer: IpAddr) -> usize {
        self.per_peer.get(&peer).copied().unwrap_or(0)
    }

    fn oldest_waiting(&self, pick: impl Fn(&Held) -> bool) -> Option<u64> {
        self.held
            .iter()
            .find(|(_, h)| !h.answering && pick(h))
            .map(|(id, _)| *id)
    }

    /// Frees `id` if still held (an evicted connection's own drop finds it gone).
    fn remove(&mut self, id: u64) {
        let Some(h) = self.held.remove(&id) else {
            return;
        };
        if let Some(n) = self.per_peer.get_mut(&h.peer) {
            *n -= 1;
            if *n == 0 {
                self.per_peer.remove(&h.peer);
            }
        }
    }
}

/// The peer an address counts against: IPv4 (also when mapped into IPv6) as it is,
/// IPv6 by its /64.
fn peer_of(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        v4 => v4,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// The connection is still held: not evicted.
    fn kept(e: &mut Evicted) -> bool {
        matches!(e.try_recv(), Err(oneshot::error::TryRecvError::Empty))
    }

    #[test]
    fn a_peer_over_its_cap_evicts_its_own_oldest_waiting() {
        let slots = Slots::new(2, 10);
        let (a1, mut e1) = slots.admit(ip("127.0.0.2")).unwrap();
        let (_a2, mut e2) = slots.admit(ip("127.0.0.2")).unwrap();
        let (_b, mut eb) = slots.admit(ip("127.0.0.3")).unwrap();
        a1.answering();
        let (_a3, mut e3) = slots.admit(ip("127.0.0.2")).unwrap();
        // a1 is answering: a2 is the oldest waiting of that peer; the other peer is kept.
        assert!(kept(&mut e1) && !kept(&mut e2) && kept(&mut eb) && kept(&mut e3));
        assert_eq!(slots.held(), 3);
        // Both of the peer's slots answering: a newcomer from it is closed.
        let (a4, _e4) = slots.admit(ip("127.0.0.2")).unwrap();
        a4.answering();
        assert!(slots.admit(ip("127.0.0.2")).is_none());
        assert_eq!(slots.held(), 3);
        drop(a1);
        assert!(slots.admit(ip("127.0.0.2")).is_some());
    }

    #[test]
    fn a_full_table_evicts_from_the_busiest_peer() {
        let slots = Slots::new(4, 5);
        let mut attackers: Vec<_> = (0..4)
            .map(|i| slots.admit(ip(&format!("127.0.0.{}", 2 + i / 2))).unwrap())
            .collect();
        let (_scraper, mut es) = slots.admit(ip("127.0.0.1")).unwrap();
        assert_eq!(slots.held(), 5);
        // Full: newcomers evict the oldest waiting of the peers with two, never the
        // scraper that holds one.
        let (_n1, mut en1) = slots.admit(ip("127.0.0.9")).unwrap();
        assert!(!kept(&mut attackers[0].1));
        assert!(attackers[1..].iter_mut().all(|(_, e)| kept(e)));
        let (_n2, _) = slots.admit(ip("127.0.0.10")).unwrap();
        assert!(!kept(&mut attackers[2].1));
        assert!(kept(&mut es) && kept(&mut en1));
        assert_eq!(slots.held(), 5);
        // Every peer down to one: the oldest waiting goes.
        let (_n3, _) = slots.admit(ip("127.0.0.11")).unwrap();
        assert!(!kept(&mut attackers[1].1));
        assert_eq!(slots.held(), 5);
    }

    #[test]
    fn a_table_busy_answering_closes_newcomers_and_frees_on_drop() {
        let slots = Slots::new(4, 2);
        let (a, _) = slots.admit(ip("127.0.0.2")).unwrap();
        let (b, _) = slots.admit(ip("127.0.0.3")).unwrap();
        a.answering();
        b.answering();
        assert!(slots.admit(ip("127.0.0.1")).is_none());
        drop(b);
        assert_eq!(slots.held(), 1);
        let (_c, _) = slots.admit(ip("127.0.0.1")).unwrap();
        assert_eq!(slots.held(), 2);
    }

    #[test]
    fn ipv6_peers_count_by_their_64() {
        assert_eq!(peer_of(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(peer_of(ip("::ffff:127.0.0.7")), ip("127.0.0.7"));
        let slots = Slots::new(1, 10);
        let (_a, mut ea) = slots.admit(ip("2001:db8::1")).unwrap();
        let (_b, _) = slots.admit(ip("2001:db8::2")).unwrap();
        assert!(!kept(&mut ea));
        assert_eq!(slots.held(), 1);
    }
}
