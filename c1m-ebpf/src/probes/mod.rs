//! One file per hook family.

mod buf_limit;
mod iter_ctx;
mod iter_listeners;
mod iter_sockets;
mod listen_overflow;
mod set_state;
mod sockops;
mod tcp_events;
mod tp;

use aya_ebpf::EbpfContext;
use c1m_common::{tcp_state, transition_index};

use crate::maps::{ListenCounter, TRANSITIONS, bump, bump_listener};

/// Counts one state change of a watched socket on `side` (see `watch::classify`).
#[inline(always)]
fn count_transition<C: EbpfContext>(
    ctx: &C,
    side: u32,
    lport: u16,
    old: u32,
    new: u32,
) -> Option<()> {
    if old as usize >= tcp_state::COUNT || new as usize >= tcp_state::COUNT {
        return None;
    }
    bump(&TRANSITIONS, transition_index(side, old, new));
    if old == tcp_state::LISTEN && new == tcp_state::SYN_RECV {
        bump_listener(ctx, u32::from(lport), ListenCounter::Children);
    }
    Some(())
}
