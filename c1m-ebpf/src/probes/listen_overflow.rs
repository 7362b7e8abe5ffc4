//! `skb:kfree_skb` on a watched listener: makes the per-port accept-queue drop figure
//! equal the kernel's `TcpExtListenDrops`/`ListenOverflows` for that port.
//!
//! The listener's `sk_drops` counts every listen drop once (`tcp_listendrop()`),
//! but `tcp_v4_rcv` also bumps it when it discards a packet for the listener
//! (`discard_and_relse`), e.g. a final ACK that overflowed the accept queue, which is
//! then counted twice; so does `tcp_rcv_state_process` (via `tcp_drop_reason`) for a
//! stray RST that reaches the listener, common when both ends of many connections
//! close at once. Each such discard ends in `kfree_skb` with the listener as `rx_sk`
//! and a location inside one of `LISTENER_DROP_FUNCTIONS`; counting those gives
//! listen drops = Δsk_drops − discards, per port. An overflowed SYN is consumed
//! (`consume_skb`), so it is counted once and needs nothing here. Measured on
//! 6.18: 300 clients, backlog 8, TCP_DEFER_ACCEPT: Δsk_drops 1227, discards 54
//! (45 LISTEN_OVERFLOW + 9 NOT_SPECIFIED), ListenOverflows 1173.
//! https://github.com/torvalds/linux/blob/v6.18/net/ipv4/tcp_ipv4.c (tcp_v4_rcv, discard_and_relse)
//! https://github.com/torvalds/linux/blob/v6.18/net/ipv4/tcp_minisocks.c (tcp_check_req, listen_overflow)

use aya_ebpf::programs::TracePointContext;
use c1m_common::{event, event_index, hook, side, tcp_state};

use super::tp::{field, fields, passing_tracepoint};
use crate::{
    config::cfg,
    kernel::{in_watched_netns, read},
    maps::{EVENTS, ListenCounter, bump, bump_listener},
    watch::is_watched_port,
};

passing_tracepoint!(kfree_skb => on_kfree_skb);

#[inline(always)]
fn on_kfree_skb(ctx: TracePointContext) {
    let _ = try_kfree_skb(&ctx);
}

#[inline(always)]
fn try_kfree_skb(ctx: &TracePointContext) -> Option<()> {
    let f = fields(hook::KFREE_SKB);
    // Hot path: every dropped packet on the box comes here; leave at once unless it
    // belongs to a socket, then unless that socket is a watched listener.
    let listener: u64 = field(ctx, f.sk)?;
    if listener == 0 {
        return None;
    }
    let state: u8 = read(listener, cfg!(offsets.skc_state))?;
    if u32::from(state) != tcp_state::LISTEN {
        return None;
    }
    let port: u16 = read(listener, cfg!(offsets.skc_num))?;
    if !is_watched_port(port) || !in_watched_netns(listener) {
        return None;
    }
    let reason: u32 = field(ctx, f.reason)?;
    if reason == cfg!(offsets.drop_reason_listen_overflow) {
        bump(
            &EVENTS,
            event_index(side::SERVER, event::LISTEN_OVERFLOW_ACK),
        );
        bump_listener(ctx, u32::from(port), ListenCounter::OverflowAcks);
    }
    let location: u64 = field(ctx, f.location).unwrap_or(0);
    let r = cfg!(listener_drop_ranges);
    let within = |i: usize| location >= r[2 * i] && location < r[2 * i + 1];
    if within(0) || within(1) || within(2) || within(3) {
        bump_listener(ctx, u32::from(port), ListenCounter::RcvDiscards);
    }
    Some(())
}
