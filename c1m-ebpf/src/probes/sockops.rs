//! sock_ops on the root cgroup: the lossless path for state transitions and
//! retransmits. A socket is flagged for `BPF_SOCK_OPS_STATE_CB` and
//! `BPF_SOCK_OPS_RETRANS_CB` when it listens, connects or is accepted; from then on
//! every `tcp_set_state()` and every retransmit on it calls this program, outside the
//! tracepoint's recursion guard (see set_state.rs and retransmit.rs for why that matters).
//! https://github.com/torvalds/linux/blob/v6.18/include/net/tcp.h (tcp_call_bpf)
//! https://github.com/torvalds/linux/blob/v6.18/net/ipv4/tcp.c (tcp_set_state -> BPF_SOCK_OPS_STATE_CB)

use aya_ebpf::{
    EbpfContext,
    bindings::{
        BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB, BPF_SOCK_OPS_RETRANS_CB, BPF_SOCK_OPS_STATE_CB,
        BPF_SOCK_OPS_TCP_CONNECT_CB, BPF_SOCK_OPS_TCP_LISTEN_CB,
    },
    cty::c_void,
    helpers::generated::{bpf_get_netns_cookie, bpf_skc_to_tcp_sock},
    macros::sock_ops,
    programs::SockOpsContext,
};
use c1m_common::{
    SOCK_OPS_RETRANS_CB_FLAG, SOCK_OPS_STATE_CB_FLAG,
    family::{AF_INET, AF_INET6},
    tcp_state,
};

use super::{count_attempt_fail, count_transition, retransmit};
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
        && op != BPF_SOCK_OPS_RETRANS_CB
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
            if new == tcp_state::CLOSE
                && let Some(sk) = tcp_sock(ctx)
            {
                retransmit::count_dsacks(sk, side);
                count_attempt_fail(sk, side, old, new);
            }
        }
        BPF_SOCK_OPS_RETRANS_CB => {
            // args: seq, segs, err. RetransSegs was already raised by segs, err or not.
            let segs = u64::from(ctx.arg(1));
            match tcp_sock(ctx) {
                Some(sk) => retransmit::count(sk, side, segs),
                None => retransmit::count(0, side, segs),
            }
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
    let flags = ctx.cb_flags() | SOCK_OPS_STATE_CB_FLAG | SOCK_OPS_RETRANS_CB_FLAG;
    let _ = ctx.set_cb_flags(flags as i32);
}

/// The context's socket as a plain kernel address to read at BTF offsets: the
/// verifier forbids arithmetic on `ctx->sk` itself, not on the `tcp_sock` the
/// `bpf_skc_to_tcp_sock` helper returns for it.
#[inline(always)]
fn tcp_sock(ctx: &SockOpsContext) -> Option<u64> {
    // SAFETY: ctx.ops points to the program's context; `sk` is a pointer field the
    // verifier lets us load (NULL unless the socket is a full one).
    let sk = unsafe { (*ctx.ops).__bindgen_anon_2.sk };
    if sk.is_null() {
        return None;
    }
    // SAFETY: the helper checks the socket's type and returns NULL for non-TCP ones.
    let tp = unsafe { bpf_skc_to_tcp_sock(sk as *mut c_void) };
    if tp.is_null() { None } else { Some(tp as u64) }
}
