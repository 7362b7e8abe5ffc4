//! The loss injector of `c1m run --loss P`: a tc classifier on each client host's link
//! (TCX egress and ingress, inside the host's namespace) that drops a segment of the
//! run's TCP connections with probability P and counts what it dropped, by direction
//! and by what the segment was (`c1m_common::loss`). Why here and not netem: this
//! kernel has no netem (nor fq); tc-BPF works everywhere c1m does. Only segments to or
//! from a watched port (the server's) are touched, so the host's clock queries and
//! stats on the control endpoint keep their own timing, and every retransmit it causes
//! is one the observer counts.
//!
//! A packet is a GSO super-packet on a veth that offloads segmentation: its segments
//! are dropped together and counted as `gso_segs` segments (a small WebSocket message
//! is one segment).
//! https://github.com/torvalds/linux/blob/v6.18/include/uapi/linux/bpf.h (struct __sk_buff: gso_segs)

use aya_ebpf::{
    bindings::{TC_ACT_OK, TC_ACT_SHOT},
    helpers::bpf_get_prandom_u32,
    macros::classifier,
    programs::TcContext,
};
use c1m_common::{loss, loss_index};

use crate::{
    maps::{LOSS_DROPS, LOSS_SETTINGS, bump_by},
    watch::is_watched_port,
};

const ETH_HLEN: usize = 14;
const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86DD;
const IPPROTO_TCP: u8 = 6;
const IPV6_HLEN: usize = 40;
// TCP header flag bits (byte 13).
const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const ACK: u8 = 0x10;

#[classifier]
pub fn c1m_loss_egress(ctx: TcContext) -> i32 {
    verdict(&ctx, loss::EGRESS)
}

#[classifier]
pub fn c1m_loss_ingress(ctx: TcContext) -> i32 {
    verdict(&ctx, loss::INGRESS)
}

#[inline(always)]
fn verdict(ctx: &TcContext, direction: u32) -> i32 {
    match try_drop(ctx, direction) {
        Some(()) => TC_ACT_SHOT as i32,
        None => TC_ACT_OK as i32,
    }
}

/// `Some` when the packet is to be dropped (and has been counted).
#[inline(always)]
fn try_drop(ctx: &TcContext, direction: u32) -> Option<()> {
    let threshold = *LOSS_SETTINGS.get(loss::THRESHOLD)?;
    if threshold == 0 {
        return None;
    }
    let ethertype = u16::from_be(ctx.load::<u16>(12).ok()?);
    // (offset of the TCP header, IP payload length)
    let (tcp, ip_payload) = match ethertype {
        ETH_P_IP => {
            let ver_ihl: u8 = ctx.load(ETH_HLEN).ok()?;
            let ihl = usize::from(ver_ihl & 0x0f) * 4;
            let total = usize::from(u16::from_be(ctx.load::<u16>(ETH_HLEN + 2).ok()?));
            if ctx.load::<u8>(ETH_HLEN + 9).ok()? != IPPROTO_TCP || ihl < 20 || total < ihl {
                return None;
            }
            (ETH_HLEN + ihl, total - ihl)
        }
        ETH_P_IPV6 => {
            // TCP right after the fixed header: c1m's connections carry no extension header.
            if ctx.load::<u8>(ETH_HLEN + 6).ok()? != IPPROTO_TCP {
                return None;
            }
            let payload = usize::from(u16::from_be(ctx.load::<u16>(ETH_HLEN + 4).ok()?));
            (ETH_HLEN + IPV6_HLEN, payload)
        }
        _ => return None,
    };
    let sport = u16::from_be(ctx.load::<u16>(tcp).ok()?);
    let dport = u16::from_be(ctx.load::<u16>(tcp + 2).ok()?);
    if !is_watched_port(sport) && !is_watched_port(dport) {
        return None;
    }
    // SAFETY: a helper with no arguments.
    if unsafe { bpf_get_prandom_u32() } >= threshold {
        return None;
    }
    let doff = usize::from(ctx.load::<u8>(tcp + 12).ok()? >> 4) * 4;
    let flags: u8 = ctx.load(tcp + 13).ok()?;
    let class = if flags & RST != 0 {
        loss::RST
    } else if flags & (SYN | ACK) == SYN | ACK {
        loss::SYN_ACK
    } else if flags & SYN != 0 {
        loss::SYN
    } else if flags & FIN != 0 {
        loss::FIN
    } else if ip_payload > doff {
        loss::DATA
    } else {
        loss::PURE_ACK
    };
    // SAFETY: ctx.skb.skb is the program's context, a readable `__sk_buff`.
    let gso_segs = unsafe { (*ctx.skb.skb).gso_segs };
    bump_by(
        &LOSS_DROPS,
        loss_index(direction, class),
        u64::from(gso_segs.max(1)),
    );
    Some(())
}
