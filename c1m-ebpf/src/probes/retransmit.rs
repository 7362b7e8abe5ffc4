//! Retransmitted segments, by kind, exactly as the kernel's `Tcp RetransSegs` counts them.
//!
//! `__tcp_retransmit_skb` adds `segs` to RetransSegs before it transmits, then calls
//! the sock_ops program (`BPF_SOCK_OPS_RETRANS_CB`, args: seq, segs, err) for sockets
//! flagged with `BPF_SOCK_OPS_RETRANS_CB_FLAG`; an attempt that gives up earlier (-EBUSY,
//! -EAGAIN, -ENOMEM) does neither. So the sock_ops path counts `args[1]` whatever `err`
//! says, and is lossless (cgroup programs have no recursion guard). The tracepoint, which
//! a softirq can skip (we measured 2.4% lost under load), counts only the sockets the
//! sock_ops program never flagged (those born before attach), one segment per call.
//! https://github.com/torvalds/linux/blob/v6.18/net/ipv4/tcp_output.c (__tcp_retransmit_skb)
//!
//! Kind: a socket in SYN_SENT resends its SYN; otherwise the retransmitting timer is in `icsk_pending` (the handler leaves it set for a
//! loss probe and clears it before `tcp_retransmit_timer`), the recovery phase in
//! `icsk_ca_state` (`tcp_xmit_retransmit_queue` counts TCPSlowStartRetrans in
//! `TCP_CA_Loss`, TCPFastRetrans otherwise).
//! https://github.com/torvalds/linux/blob/v6.18/net/ipv4/tcp_timer.c (tcp_write_timer_handler)
//! https://github.com/torvalds/linux/blob/v6.18/net/ipv4/tcp_output.c (tcp_xmit_retransmit_queue)

use aya_ebpf::programs::TracePointContext;
use c1m_common::{
    ICSK_TIME_LOSS_PROBE, SOCK_OPS_RETRANS_CB_FLAG, hook, retransmit, retransmit_index, settings,
    tcp_state,
};

use super::tp::{endpoints, field, fields, passing_tracepoint};
use crate::{
    config::cfg,
    kernel::{in_watched_netns, read},
    maps::{RETRANSMITS, bump_by, setting},
    watch::classify,
};

/// What kind of retransmit the socket at `sk` is sending now.
#[inline(always)]
pub fn kind(sk: u64) -> u32 {
    // Only the SYN is ever resent in SYN_SENT (by the retransmission timer), and the
    // kernel counts it in TCPSynRetrans as well as RetransSegs.
    if read::<u8>(sk, cfg!(offsets.skc_state)) == Some(tcp_state::SYN_SENT as u8) {
        return retransmit::SYN;
    }
    let (Some(pending), Some(byte)) = (
        read::<u8>(sk, cfg!(offsets.icsk_pending)),
        read::<u8>(sk, cfg!(offsets.icsk_ca_state_byte)),
    ) else {
        return retransmit::OTHER;
    };
    let ca =
        (u32::from(byte) >> cfg!(offsets.icsk_ca_state_shift)) & cfg!(offsets.icsk_ca_state_mask);
    let loss = cfg!(offsets.ca_state_loss);
    if pending == 0 {
        // Only tcp_retransmit_timer runs with no write timer pending and data out.
        retransmit::TIMEOUT
    } else if ca == loss {
        retransmit::SLOW_START
    } else if pending == ICSK_TIME_LOSS_PROBE && ca != cfg!(offsets.ca_state_recovery) {
        // Probes are scheduled only in Open/CWR; a recovery started since is not one.
        retransmit::TAIL_LOSS_PROBE
    } else {
        retransmit::FAST
    }
}

/// Counts `segs` retransmitted segments of the socket at `sk` on `side`.
#[inline(always)]
pub fn count(sk: u64, side: u32, segs: u64) {
    bump_by(&RETRANSMITS, retransmit_index(side, kind(sk)), segs);
}

/// Adds a closing socket's DSACKed segments (`tcp_sock.dsack_dups`).
#[inline(always)]
pub fn count_dsacks(sk: u64, side: u32) {
    if let Some(dups) = read::<u32>(sk, cfg!(offsets.tcp_dsack_dups))
        && dups > 0
    {
        bump_by(
            &RETRANSMITS,
            retransmit_index(side, retransmit::SPURIOUS_DSACK),
            u64::from(dups),
        );
    }
}

/// Whether the sock_ops program counts this socket's retransmits.
#[inline(always)]
pub fn counted_by_sockops(sk: u64) -> bool {
    if !setting(settings::SOCKOPS_ACTIVE) {
        return false;
    }
    let flags: u8 = read(sk, cfg!(offsets.tcp_bpf_cb_flags)).unwrap_or(0);
    u32::from(flags) & SOCK_OPS_RETRANS_CB_FLAG != 0
}

passing_tracepoint!(tcp_retransmit_skb => on_tcp_retransmit_skb);

#[inline(always)]
fn on_tcp_retransmit_skb(ctx: TracePointContext) {
    let _ = try_retransmit_skb(&ctx);
}

#[inline(always)]
fn try_retransmit_skb(ctx: &TracePointContext) -> Option<()> {
    let f = fields(hook::RETRANSMIT_SKB);
    // v6.10+ fires for attempts that sent nothing too; those left RetransSegs alone
    // unless the transmit itself failed, which this record can't tell apart.
    if field::<i32>(ctx, f.err).is_some_and(|err| err != 0) {
        return None;
    }
    let sk: u64 = field(ctx, f.sk)?;
    if counted_by_sockops(sk) || !in_watched_netns(sk) {
        return None;
    }
    let (sport, dport, addrs) = endpoints(ctx, &f)?;
    let side = classify(sport, dport, &addrs)?;
    count(sk, side, 1);
    Some(())
}
