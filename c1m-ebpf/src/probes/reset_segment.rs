//! What drew a reset: the flags of the segment `tcp:tcp_send_reset` answers, and whether
//! it carried data, read from the packet's own TCP and IP headers (the record gives only
//! the skb's address). A reset with no skb is this end's own (close, abort, timer).
//! https://github.com/torvalds/linux/blob/v6.18/include/uapi/linux/tcp.h (struct tcphdr)

use c1m_common::reset_segment as seg;

use crate::{config::cfg, kernel::read};

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const ACK: u8 = 0x10;

/// The [`c1m_common::reset_segment`] kind of the segment at `skb` (0: none).
#[inline(always)]
pub fn kind(skb: u64) -> u32 {
    if skb == 0 {
        return seg::NONE;
    }
    read_kind(skb).unwrap_or(seg::UNREAD)
}

#[inline(always)]
fn read_kind(skb: u64) -> Option<u32> {
    let head: u64 = read(skb, cfg!(offsets.skb_head))?;
    let th = head + u64::from(read::<u16>(skb, cfg!(offsets.skb_transport_header))?);
    let ip = head + u64::from(read::<u16>(skb, cfg!(offsets.skb_network_header))?);
    // Byte 12: data offset (high nibble, in words); byte 13: the flags.
    let [off, flags] = read::<[u8; 2]>(th, 12)?;
    let tcp_len = u32::from(off >> 4) * 4;
    if flags & SYN != 0 {
        return Some(if flags & ACK != 0 {
            seg::SYN_ACK
        } else {
            seg::SYN
        });
    }
    if flags & FIN != 0 {
        return Some(seg::FIN);
    }
    if flags & ACK == 0 {
        return Some(seg::OTHER);
    }
    // Payload = the IP packet's length less its headers (IPv6 extension headers are
    // not walked: c1m's traffic has none).
    let version_ihl: u8 = read(ip, 0)?;
    let ip_payload = match version_ihl >> 4 {
        4 => u32::from(u16::from_be(read::<u16>(ip, 2)?))
            .saturating_sub(u32::from(version_ihl & 0xf) * 4),
        6 => u32::from(u16::from_be(read::<u16>(ip, 4)?)),
        _ => return None,
    };
    Some(if ip_payload > tcp_len {
        seg::DATA
    } else {
        seg::ACK
    })
}
