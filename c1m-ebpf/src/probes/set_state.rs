//! `sock:inet_sock_set_state`: every TCP state change, counted per (side, old, new).
//!
//! Attached as a BTF tracepoint (`tp_btf`) where the kernel allows, else as the
//! classic tracepoint. The classic one costs more per call (the kernel assembles the
//! whole trace record before our program runs: 9% slower connection setup measured
//! against 5% budget) and shares one recursion guard with every classic program.
//!
//! Either way the kernel skips a run nested in a softirq on the same CPU (seen on
//! this kernel: ~10% of FIN_WAIT1->FIN_WAIT2 lost in a burst of 2000 closes). So
//! when the sock_ops program is attached it counts every socket it has flagged
//! (cgroup programs have no such guard) and this hook counts only the rest:
//! sockets born before attach, and births the sock_ops program can't see
//! (CLOSE->SYN_SENT and CLOSE->LISTEN, which happen in process context and so are
//! never the nested run). See probes/sockops.rs.
//! https://github.com/torvalds/linux/blob/v6.18/include/trace/events/sock.h (inet_sock_set_state: sk, oldstate, newstate)

use aya_ebpf::{
    EbpfContext,
    macros::btf_tracepoint,
    programs::{BtfTracePointContext, TracePointContext},
};
use aya_log_ebpf::info;
use c1m_common::{ClosedListener, SOCK_OPS_STATE_CB_FLAG, hook, settings, tcp_state};

use super::{
    count_attempt_fail, count_transition, retransmit,
    tp::{endpoints, field, fields, passing_tracepoint},
};
use crate::{
    config::cfg,
    kernel::{SockAddrs, in_watched_netns, read},
    maps::{LISTEN_CLOSED, setting},
    watch::{Addrs, classify, learn_listener},
};

const IPPROTO_TCP: u16 = 6;

#[btf_tracepoint(function = "inet_sock_set_state")]
pub fn inet_sock_set_state_btf(ctx: BtfTracePointContext) -> u32 {
    let sk: u64 = ctx.arg(0);
    let old: i32 = ctx.arg(1);
    let new: i32 = ctx.arg(2);
    let _ = on_set_state(
        &ctx,
        sk,
        old as u32,
        new as u32,
        || read(sk, cfg!(offsets.sk_protocol)),
        || {
            let sport: u16 = read(sk, cfg!(offsets.skc_num))?;
            let dport = u16::from_be(read(sk, cfg!(offsets.skc_dport))?);
            Some((sport, dport, SockAddrs::of(sk)))
        },
    );
    0
}

passing_tracepoint!(inet_sock_set_state => on_inet_sock_set_state);

#[inline(always)]
fn on_inet_sock_set_state(ctx: TracePointContext) {
    let f = fields(hook::SET_STATE);
    let (Some(old), Some(new), Some(sk)) = (
        field::<i32>(&ctx, f.oldstate),
        field::<i32>(&ctx, f.newstate),
        field::<u64>(&ctx, f.sk),
    ) else {
        return;
    };
    let _ = on_set_state(
        &ctx,
        sk,
        old as u32,
        new as u32,
        || field(&ctx, f.protocol),
        || endpoints(&ctx, &f),
    );
}

#[inline(always)]
fn on_set_state<C: EbpfContext, A: Addrs>(
    ctx: &C,
    sk: u64,
    old: u32,
    new: u32,
    protocol: impl FnOnce() -> Option<u16>,
    endpoints: impl FnOnce() -> Option<(u16, u16, A)>,
) -> Option<()> {
    let closing_listener = old == tcp_state::LISTEN && new == tcp_state::CLOSE;
    // Fast path first: most calls are for sockets the sock_ops program counts.
    if setting(settings::SOCKOPS_ACTIVE) && counted_by_sockops(sk, old, new) && !closing_listener {
        return None;
    }
    // The tracepoint also fires for SCTP and MPTCP sockets.
    if protocol()? != IPPROTO_TCP || !in_watched_netns(sk) {
        return None;
    }
    let (sport, dport, addrs) = endpoints()?;
    if new == tcp_state::LISTEN && learn_listener(sport) {
        info!(
            ctx,
            "c1m: new listener on port {}, counted as server side", sport
        );
    }
    if closing_listener {
        let drops: u32 = read(sk, cfg!(offsets.sk_drops)).unwrap_or(0);
        let last = ClosedListener {
            port: u32::from(sport),
            drops,
        };
        let _ = LISTEN_CLOSED.insert(sk, last, 0);
        if setting(settings::SOCKOPS_ACTIVE) && counted_by_sockops(sk, old, new) {
            return None;
        }
    }
    let side = classify(sport, dport, &addrs)?;
    count_transition(ctx, side, sport, old, new)?;
    if new == tcp_state::CLOSE {
        retransmit::count_dsacks(sk, side);
        count_attempt_fail(sk, side, old, new);
    }
    Some(())
}

#[inline(always)]
fn counted_by_sockops(sk: u64, old: u32, new: u32) -> bool {
    // Children are counted when they establish (PASSIVE_ESTABLISHED_CB).
    if old == tcp_state::LISTEN && new == tcp_state::SYN_RECV {
        return true;
    }
    let flags: u8 = read(sk, cfg!(offsets.tcp_bpf_cb_flags)).unwrap_or(0);
    u32::from(flags) & SOCK_OPS_STATE_CB_FLAG != 0
}
