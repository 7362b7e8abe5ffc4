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
use c1m_common::{SOCK_OPS_STATE_CB_FLAG, tcp_state};

use super::count_transition;
use crate::{config::cfg, watch::classify};

const AF_INET: u32 = 2;
const AF_INET6: u32 = 10;

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
    if family != AF_INET && family != AF_INET6 {
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
    let (laddr, raddr) = if family == AF_INET {
        (ctx.local_ip4(), ctx.remote_ip4())
    } else {
        (0, 0)
    };
    // Unwatched sockets are neither counted nor flagged (no STATE_CB cost).
    classify(lport, rport, laddr, raddr)?;
    match op {
        BPF_SOCK_OPS_STATE_CB => {
            let (old, new) = (ctx.arg(0), ctx.arg(1));
            count_transition(ctx, lport, rport, laddr, raddr, old, new);
        }
        BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB => {
            // The child's birth (LISTEN -> SYN_RECV); its SYN_RECV -> ESTABLISHED
            // follows as a STATE_CB once flagged below.
            count_transition(
                ctx,
                lport,
                rport,
                laddr,
                raddr,
                tcp_state::LISTEN,
                tcp_state::SYN_RECV,
            );
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
