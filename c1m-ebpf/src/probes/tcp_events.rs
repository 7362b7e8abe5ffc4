//! Handshake and error signals: SYN-ACK retransmits, resets sent (with the kernel's
//! reason) and received.
//! Counted per side. (Retransmitted segments: retransmit.rs.)
//!
//! SYN-ACK retransmits come in through the BTF tracepoint when BTF gives the socket
//! offsets: no trace record to assemble, and skipped only when the same program is
//! already running on that CPU, where a classic tracepoint is skipped whenever any BPF
//! program or map syscall holds the CPU's `bpf_prog_active`. Neither is lossless here:
//! a SYN-ACK resent from a softirq that interrupted another process's thread ran none of
//! the tracepoint's BPF programs while ftrace recorded it (4 of 106 in a loaded run),
//! so the audit names SYN-ACKs among the tracepoint-counted figures.

use aya_ebpf::{
    EbpfContext,
    macros::btf_tracepoint,
    programs::{BtfTracePointContext, TracePointContext},
};
use c1m_common::{
    NO_SOCKET_STATE, event, event_index, hook, reset_cause_key, reset_index, reset_reason,
};

use super::{
    reset_segment,
    tp::{endpoints, field, fields, passing_tracepoint},
};
use crate::{
    config::cfg,
    kernel::{SockAddrs, in_watched_netns, read, skb_in_watched_netns},
    maps::{EVENTS, ListenCounter, RESETS, bump, bump_listener, bump_reset_cause},
    watch::classify,
};

/// The side and local port of the watched socket the record describes.
#[inline(always)]
fn watched(ctx: &TracePointContext, hook_index: usize) -> Option<(u32, u16)> {
    let f = fields(hook_index);
    // Resets may be sent for packets without a socket: the packet's device then says
    // which namespace it is (else every namespace's would count), and the ports come
    // from the packet.
    let sk: u64 = field(ctx, f.sk).unwrap_or(0);
    if sk != 0 {
        if !in_watched_netns(sk) {
            return None;
        }
    } else if !skb_in_watched_netns(field(ctx, f.skb).unwrap_or(0)) {
        return None;
    }
    let (sport, dport, addrs) = endpoints(ctx, &f)?;
    Some((classify(sport, dport, &addrs)?, sport))
}

/// Counts `event` for the watched socket the record describes; returns its side and port.
#[inline(always)]
fn count(ctx: &TracePointContext, hook_index: usize, event: u32) -> Option<(u32, u16)> {
    let (side, sport) = watched(ctx, hook_index)?;
    bump(&EVENTS, event_index(side, event));
    Some((side, sport))
}

passing_tracepoint!(tcp_retransmit_synack => on_tcp_retransmit_synack);

#[inline(always)]
fn on_tcp_retransmit_synack(ctx: TracePointContext) {
    if let Some((_, port)) = count(&ctx, hook::RETRANSMIT_SYNACK, event::SYNACK_RETRANSMIT) {
        bump_listener(&ctx, port as u32, ListenCounter::SynackRetransmits);
    }
}

/// `tcp_retransmit_synack(sk, req)`: the listener and the request socket, whose
/// `sock_common` holds the connection's ports and addresses as a full socket's does.
#[btf_tracepoint(function = "tcp_retransmit_synack")]
pub fn tcp_retransmit_synack_btf(ctx: BtfTracePointContext) -> u32 {
    let sk: u64 = ctx.arg(0);
    let req: u64 = ctx.arg(1);
    let _ = synack_retransmitted(&ctx, sk, req);
    0
}

#[inline(always)]
fn synack_retransmitted<C: EbpfContext>(ctx: &C, listener: u64, req: u64) -> Option<()> {
    if !in_watched_netns(listener) {
        return None;
    }
    let sport: u16 = read(req, cfg!(offsets.skc_num))?;
    let dport = u16::from_be(read(req, cfg!(offsets.skc_dport))?);
    let side = classify(sport, dport, &SockAddrs::of(req))?;
    bump(&EVENTS, event_index(side, event::SYNACK_RETRANSMIT));
    bump_listener(ctx, u32::from(sport), ListenCounter::SynackRetransmits);
    Some(())
}

passing_tracepoint!(tcp_send_reset => on_tcp_send_reset);

#[inline(always)]
fn on_tcp_send_reset(ctx: TracePointContext) {
    // Counted once, by reason: user space sums the reasons into `resets_sent`.
    if let Some((side, _)) = watched(&ctx, hook::SEND_RESET) {
        let f = fields(hook::SEND_RESET);
        let reason: u32 = field(&ctx, f.reason).unwrap_or(reset_reason::UNKNOWN);
        bump(&RESETS, reset_index(side, reason));
        // Which segment drew it and the state of the socket that answered (none: the
        // segment found no socket), so every reset can be named.
        let sk: u64 = field(&ctx, f.sk).unwrap_or(0);
        let state = if sk == 0 {
            NO_SOCKET_STATE
        } else {
            field::<i32>(&ctx, f.state).map_or(NO_SOCKET_STATE, |s| s as u32)
        };
        let segment = reset_segment::kind(field(&ctx, f.skb).unwrap_or(0));
        bump_reset_cause(&ctx, reset_cause_key(side, reason, segment, state));
    }
}

passing_tracepoint!(tcp_receive_reset => on_tcp_receive_reset);

#[inline(always)]
fn on_tcp_receive_reset(ctx: TracePointContext) {
    let _ = count(&ctx, hook::RECEIVE_RESET, event::RESET_RECEIVED);
}
