//! One file per hook family.

mod buf_limit;
mod iter_ctx;
mod iter_listeners;
mod iter_sockets;
mod listen_overflow;
mod loss;
mod reset_segment;
mod retransmit;
mod set_state;
mod sockops;
mod tcp_events;
mod tp;

use aya_ebpf::EbpfContext;
use c1m_common::{event, event_index, tcp_state, transition_index};

use crate::{
    config::cfg,
    kernel::read,
    maps::{EVENTS, ListenCounter, TRANSITIONS, bump, bump_listener},
};

/// Counts one state change of a watched socket on `side` (see `watch::classify`);
/// returns the side.
#[inline(always)]
fn count_transition<C: EbpfContext>(
    ctx: &C,
    side: u32,
    lport: u16,
    old: u32,
    new: u32,
) -> Option<u32> {
    if old as usize >= tcp_state::COUNT || new as usize >= tcp_state::COUNT {
        return None;
    }
    bump(&TRANSITIONS, transition_index(side, old, new));
    if old == tcp_state::LISTEN && new == tcp_state::SYN_RECV {
        bump_listener(ctx, u32::from(lport), ListenCounter::Children);
    }
    Some(side)
}

/// Counts a failed handshake (`c1m_common::event::ATTEMPT_FAIL`) when the socket at
/// `sk` on `side` goes `old -> new` through `tcp_done()`.
#[inline(always)]
fn count_attempt_fail(sk: u64, side: u32, old: u32, new: u32) {
    if new == tcp_state::CLOSE
        && (old == tcp_state::SYN_SENT || old == tcp_state::SYN_RECV)
        && read::<u8>(sk, cfg!(offsets.sk_shutdown)) == Some(0)
    {
        bump(&EVENTS, event_index(side, event::ATTEMPT_FAIL));
    }
}
