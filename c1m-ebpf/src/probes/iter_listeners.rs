//! `iter/tcp` over listening sockets: accept-queue depth, limit and drops of each.
//!
//! The TCP iterator walks the listening hash before the established hash, so the
//! first non-listening socket ends the listeners: the program writes an END record for
//! every socket past them, so a read fills its buffer soon after the end and user space
//! stops at the first END: a listener walk visits at most one read's worth (~800) of
//! established sockets. (One record per `read()` stopped exactly at the end, but each
//! read re-batched a whole listening bucket: quadratic in the listeners of a port.)
//! https://github.com/torvalds/linux/blob/v6.18/net/ipv4/tcp_ipv4.c (bpf_iter_tcp_batch)
//! https://github.com/torvalds/linux/blob/v6.18/kernel/bpf/bpf_iter.c (bpf_seq_read stops once `size` bytes are ready)

use core::ffi::c_void;

use c1m_common::{ListenerRecord, RECORD_END, RECORD_LISTENER, tcp_state};

use super::iter_ctx::IterTcp;
use crate::{config::cfg, kernel::read};

#[unsafe(no_mangle)]
#[unsafe(link_section = "iter/tcp")]
pub extern "C" fn iter_listeners(ctx: *mut c_void) -> i32 {
    let Some(it) = IterTcp::new(ctx) else {
        return 0;
    };
    let Some(sk) = it.sock() else { return 0 };
    let state: u8 = read(sk, cfg!(offsets.skc_state)).unwrap_or(0);
    let mut record = ListenerRecord::default();
    if state as u32 == tcp_state::LISTEN {
        record.kind = RECORD_LISTENER;
        record.family = read::<u16>(sk, cfg!(offsets.skc_family)).unwrap_or(0) as u32;
        record.port = read::<u16>(sk, cfg!(offsets.skc_num)).unwrap_or(0) as u32;
        record.ack_backlog = read(sk, cfg!(offsets.sk_ack_backlog)).unwrap_or(0);
        record.max_ack_backlog = read(sk, cfg!(offsets.sk_max_ack_backlog)).unwrap_or(0);
        record.drops = read(sk, cfg!(offsets.sk_drops)).unwrap_or(0);
        record.addr_v4 = read(sk, cfg!(offsets.skc_rcv_saddr)).unwrap_or(0);
        record.netns_inum = crate::kernel::netns_inum(sk).unwrap_or(0);
        record.sk = sk;
    } else {
        record.kind = RECORD_END;
    }
    it.write(&record);
    0
}
