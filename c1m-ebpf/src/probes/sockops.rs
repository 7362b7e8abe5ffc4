//! sock_ops on the root cgroup: the lossless path for state transitions. A socket is
//! flagged for `BPF_SOCK_OPS_STATE_CB` when it listens, connects or is accepted;
//! from then on every `tcp_set_state()` on it calls this program, outside the
//! tracepoint's recursion guard (see set_state.rs for why that matters).
//! https://github.com/torvalds/linux/blob/v6.18/include/net/tcp.h (tcp_call_bpf)
//! https://github.com/torvalds/linux/blob/v6.18/net/ipv4/tcp.c (tcp_set_state -> BPF_SOCK_OPS_STATE_CB)

use aya_ebpf::{
    EbpfContext,
    bindings::{
        BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB, BPF_SOCK_OPS_STATE_CB, BPF_SOCK_OPS_TCP_CONNECT_CB,
        BPF_SOCK_OPS_TCP_LISTEN_CB,
    },
    helpers::generated::bpf_get_netns_cookie,
    macros::sock_ops,
    programs::SockOpsContext,
};
use c1m_common::{
    SOCK_OPS_STATE_CB_FLAG,
    family::{AF_INET, AF_INET6},
    tcp_state,
};

use super::count_transition;
use crate::{
    config::cfg,
    watch::{Addrs, Ip, classify},
};

/// The socket's addresses from the context (the verifier turns these loads into
/// reads of the socket); an IPv6 socket's come from `local_ip6`/`remote_ip6`.
/// https://github.com/torvalds/linux/blob/v6.18/net/core/filter.c (sock_ops_convert_ctx_access: local_ip6, remote_ip6)
struct OpsAddrs<'a>(&'a SockOpsContext);

impl Addrs for OpsAddrs<'_> {
    #[inline(always)]
    fn local(&self) -> Option<Ip> {
        Some(if self.0.family() == u32::from(AF_INET6) {
            Ip::v6(self.0.local_ip6())
        } else {
            Ip::V4(self.0.local_ip4())
        })
    }

    #[inline(always)]
    fn remote(&self) -> Option<Ip> {
        Some(if self.0.family() == u32::from(AF_INET6) {
            Ip::v6(self.0.remote_ip6())
        } else {
            Ip::V4(self.0.remote_ip4())
        })
    }
}

#[sock_ops]
pub fn c1m_sock_ops(ctx: SockOpsContext) -> u32 {
    let _ = try_sockops(&ctx);
    // 1 = carry on; the kernel then uses its defaults for every op we don't answer.
    1
}

#[inline(always)]
fn try_sockops(ctx: &SockOpsContext) -> Option<()> {
    let op = ctx.op();
    if op != BPF_SOCK_OPS_STATE_CB
        && op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB
        && op != BPF_SOCK_OPS_TCP_CONNECT_CB
        && op != BPF_SOCK_OPS_TCP_LISTEN_CB
    {
        return None;
    }
    let family = ctx.family();
    if family != u32::from(AF_INET) && family != u32::from(AF_INET6) {
        return None;
    }
    let want = u64::from(cfg!(netns_cookie_lo)) | (u64::from(cfg!(netns_cookie_hi)) << 32);
    // SAFETY: sock_ops programs may call bpf_get_netns_cookie with their context.
    if want != 0 && unsafe { bpf_get_netns_cookie(ctx.as_ptr()) } != want {
        return None;
    }
    let lport = ctx.local_port() as u16;
    // remote_port holds the network-order port in its upper 16 bits on little endian.
    let rport = u16::from_be((ctx.remote_port() >> 16) as u16);
    // Unwatched sockets are neither counted nor flagged (no STATE_CB cost).
    let side = classify(lport, rport, &OpsAddrs(ctx))?;
    match op {
        BPF_SOCK_OPS_STATE_CB => {
            let (old, new) = (ctx.arg(0), ctx.arg(1));
            count_transition(ctx, side, lport, old, new);
        }
        BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB => {
            // The child's birth (LISTEN -> SYN_RECV); its SYN_RECV -> ESTABLISHED
            // follows as a STATE_CB once flagged below.
            count_transition(ctx, side, lport, tcp_state::LISTEN, tcp_state::SYN_RECV);
            flag(ctx);
        }
        // Births: the tracepoint counts CLOSE->LISTEN and CLOSE->SYN_SENT.
        _ => flag(ctx),
    }
    Some(())
}

#[inline(always)]
fn flag(ctx: &SockOpsContext) {
    let _ = ctx.set_cb_flags((ctx.cb_flags() | SOCK_OPS_STATE_CB_FLAG) as i32);
}
