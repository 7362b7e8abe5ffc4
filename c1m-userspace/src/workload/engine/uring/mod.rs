//! `--engine uring`: the server shard on io_uring. Same protocol code and shard state as
//! the epoll shard (`engine::server::proto` and `engine::server::state`: the sweeps,
//! goodbyes, heartbeat, message and push walks, the [`Reporter`]), the same loop frame
//! (`shard_loop::turns`), a different syscall layer: a ring per shard, accepts armed per
//! listener, a multishot receive per connection into a ring of provided buffers, and
//! sends queued as submission entries, a push's frames 128 to an `io_uring_enter`.
//!
//! Why: the epoll engine pays a syscall per accept, per read and per write, as the
//! minimal C programs it is measured against; on the server that is ~5 per WebSocket
//! connection set up (accept4, setsockopt, epoll_ctl, read, write), and it was one per
//! pushed frame until the epoll shard took this engine's batched push sends
//! (`engine::server::push_batch`). Here a connection set up costs none of its own (TCP_NODELAY is inherited
//! from the listener; the accept, receive and answer are ring entries) and a push costs
//! one `io_uring_enter` per 128 frames. Measured at 200,000 connections (`cargo xtask
//! bench uring`, server and client together): 11.2 syscalls per connection set up and
//! 1.07 per pushed frame, against 16.7 and 2.2 for the epoll engine and the C programs;
//! what is left is the client's.
//!
//! The client side runs the epoll engine's client (`--engine uring` on `c1m client`
//! means the epoll client): its ramp is bound by connect() and the pace, not by the
//! readiness layer, and a pushed frame's read is the client's, not the server's.
//! No TLS yet: `--tls` with `--engine uring` is refused in one line.
//!
//! [`Reporter`]: super::shard_loop::Reporter

mod outq;
pub(crate) mod ring;
pub(crate) mod server;

/// What a completion's user data names: the operation's kind in the top bits, then the
/// low bits of its connection's slab generation, then the slot (or listener) index.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Op {
    /// A connection's multishot receive.
    Recv,
    /// A connection's send.
    Send,
    /// One of a listener's accepts.
    Accept,
    /// The command source's multishot poll.
    Command,
    /// A cancel's own completion (nothing to do).
    Cancel,
}

const KIND_SHIFT: u32 = 60;
/// Generation bits a user data keeps: a slot must be reused 2^28 times between an
/// operation and its completion to be mistaken, and a reuse takes a close and an accept.
pub(crate) const GEN_MASK: u32 = (1 << 28) - 1;

impl Op {
    fn code(self) -> u64 {
        match self {
            Op::Recv => 1,
            Op::Send => 2,
            Op::Accept => 3,
            Op::Command => 4,
            Op::Cancel => 5,
        }
    }

    /// The user data of this operation on slab token `tok` (slot in the low 32 bits,
    /// generation in the high 32), or on listener `index` of `epoch`.
    pub(crate) fn ud(self, tok: u64) -> u64 {
        let (slot, generation) = (tok as u32, (tok >> 32) as u32);
        (self.code() << KIND_SHIFT) | (u64::from(generation & GEN_MASK) << 32) | u64::from(slot)
    }
}

/// The operation, slot (or index) and generation's low bits a user data names.
pub(crate) fn decode(ud: u64) -> Option<(Op, u32, u32)> {
    let op = match ud >> KIND_SHIFT {
        1 => Op::Recv,
        2 => Op::Send,
        3 => Op::Accept,
        4 => Op::Command,
        5 => Op::Cancel,
        _ => return None,
    };
    Some((op, ud as u32, ((ud >> 32) as u32) & GEN_MASK))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_round_trips_kind_slot_and_generation() {
        let tok = (u64::from(0xABCD_1234u32) << 32) | 77;
        for op in [Op::Recv, Op::Send, Op::Accept, Op::Command, Op::Cancel] {
            assert_eq!(decode(op.ud(tok)), Some((op, 77, 0xABCD_1234 & GEN_MASK)));
        }
        assert_eq!(decode(0), None);
    }
}
