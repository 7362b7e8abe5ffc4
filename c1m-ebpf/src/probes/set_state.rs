//! `sock:inet_sock_set_state`: every TCP state change, counted per (side, old, new).

use aya_ebpf::{macros::tracepoint, programs::TracePointContext};
use c1m_common::{hook, tcp_state, transition_index};

use super::tp::{endpoints, field, fields};
use crate::{
    kernel::in_watched_netns,
    maps::{TRANSITIONS, bump, bump_listener},
    watch::{classify, learn_listener},
};

const IPPROTO_TCP: u16 = 6;

#[tracepoint]
pub fn inet_sock_set_state(ctx: TracePointContext) -> u32 {
    let _ = try_inet_sock_set_state(&ctx);
    0
}

#[inline(always)]
fn try_inet_sock_set_state(ctx: &TracePointContext) -> Option<()> {
    let f = fields(hook::SET_STATE);
    // The tracepoint also fires for SCTP and MPTCP sockets.
    let protocol: u16 = field(ctx, f.protocol)?;
    if protocol != IPPROTO_TCP {
        return None;
    }
    let old: i32 = field(ctx, f.oldstate)?;
    let new: i32 = field(ctx, f.newstate)?;
    let (old, new) = (old as u32, new as u32);
    if old as usize >= tcp_state::COUNT || new as usize >= tcp_state::COUNT {
        return None;
    }
    let sk: u64 = field(ctx, f.sk)?;
    if !in_watched_netns(sk) {
        return None;
    }
    let (sport, dport, saddr, daddr) = endpoints(ctx, &f)?;
    if new == tcp_state::LISTEN {
        learn_listener(sport);
    }
    let side = classify(sport, dport, saddr, daddr)?;
    bump(&TRANSITIONS, transition_index(side, old, new));
    // A child socket is cloned from its listener, so it is born "LISTEN -> SYN_RECV".
    if old == tcp_state::LISTEN && new == tcp_state::SYN_RECV {
        bump_listener(sport as u32, |e| e.children += 1);
    }
    Some(())
}
