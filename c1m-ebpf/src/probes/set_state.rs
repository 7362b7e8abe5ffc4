//! `sock:inet_sock_set_state`: every TCP state change, counted per (side, old, new).
//!
//! The tracepoint runs under the kernel's BPF recursion guard: when a softirq
//! interrupts a running program on the same CPU, the nested run is skipped (seen on
//! this kernel: ~10% of FIN_WAIT1->FIN_WAIT2 lost in a burst of 2000 closes). So
//! when the sock_ops program is attached it counts every socket it has flagged
//! (cgroup programs have no such guard) and this hook counts only the rest:
//! sockets born before attach, and births the sock_ops program can't see
//! (CLOSE->SYN_SENT and CLOSE->LISTEN, which happen in process context and so are
//! never the nested run). See probes/sockops.rs.

use aya_ebpf::{macros::tracepoint, programs::TracePointContext};
use aya_log_ebpf::info;
use c1m_common::{ClosedListener, SOCK_OPS_STATE_CB_FLAG, hook, settings, tcp_state};

use super::{
    count_transition,
    tp::{endpoints, field, fields},
};
use crate::{
    config::cfg,
    kernel::{in_watched_netns, read},
    maps::{LISTEN_CLOSED, setting},
    watch::learn_listener,
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
    let old: i32 = field(ctx, f.oldstate)?;
    let new: i32 = field(ctx, f.newstate)?;
    let (old, new) = (old as u32, new as u32);
    let sk: u64 = field(ctx, f.sk)?;
    let closing_listener = old == tcp_state::LISTEN && new == tcp_state::CLOSE;
    // Fast path first: most calls are for sockets the sock_ops program counts.
    if setting(settings::SOCKOPS_ACTIVE) && counted_by_sockops(sk, old, new) && !closing_listener {
        return None;
    }
    // The tracepoint also fires for SCTP and MPTCP sockets.
    let protocol: u16 = field(ctx, f.protocol)?;
    if protocol != IPPROTO_TCP || !in_watched_netns(sk) {
        return None;
    }
    let (sport, dport, saddr, daddr) = endpoints(ctx, &f)?;
    if new == tcp_state::LISTEN && learn_listener(sport) {
        info!(ctx, "c1m: new listener on port {}, counted as server side", sport);
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
    count_transition(ctx, sport, dport, saddr, daddr, old, new)
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
