//! `skb:kfree_skb` with reason `TCP_LISTEN_OVERFLOW`: a final handshake ACK the
//! listener dropped because its accept queue was full.
//!
//! Why this hook: the listener's `sk_drops` counts such an ACK twice (once in
//! `tcp_listendrop()`, once when `tcp_v4_rcv` discards the skb) but the kernel's
//! `ListenOverflows` once, while an overflowed SYN counts once in both and is freed
//! with `consume_skb`. Counting these ACKs makes the per-listener figure exact:
//! overflows = Δsk_drops − overflowed ACKs (see ARCHITECTURE.md).
//! https://github.com/torvalds/linux/blob/v6.18/net/ipv4/tcp_minisocks.c (tcp_check_req, listen_overflow)
//! https://github.com/torvalds/linux/blob/v6.18/net/ipv4/tcp_ipv4.c (tcp_v4_rcv, discard_and_relse)

use aya_ebpf::{macros::tracepoint, programs::TracePointContext};
use c1m_common::{event, event_index, hook, side};

use super::tp::{field, fields};
use crate::{
    config::cfg,
    kernel::{in_watched_netns, read},
    maps::{EVENTS, ListenCounter, bump, bump_listener},
    watch::is_watched_port,
};

#[tracepoint]
pub fn kfree_skb(ctx: TracePointContext) -> u32 {
    let _ = try_kfree_skb(&ctx);
    0
}

#[inline(always)]
fn try_kfree_skb(ctx: &TracePointContext) -> Option<()> {
    let f = fields(hook::KFREE_SKB);
    // Hot path: every dropped packet on the box comes here; leave at once unless it
    // is the one reason we count.
    let reason: u32 = field(ctx, f.reason)?;
    if reason != cfg!(offsets.drop_reason_listen_overflow) {
        return None;
    }
    let listener: u64 = field(ctx, f.sk)?;
    if !in_watched_netns(listener) {
        return None;
    }
    let port: u16 = read(listener, cfg!(offsets.skc_num))?;
    if !is_watched_port(port) {
        return None;
    }
    bump(&EVENTS, event_index(side::SERVER, event::LISTEN_OVERFLOW_ACK));
    bump_listener(ctx, port as u32, ListenCounter::OverflowAcks);
    Some(())
}
