//! `iter/tcp` over every socket: counts per (side, state) and the kernel memory each
//! socket holds (receive queue, send queue, forward allocation), plus whether it has
//! a file and an epoll registration, which decide the slab objects it costs.

use core::ffi::c_void;

use c1m_common::{family::AF_INET6, sock_agg_index, tcp_state};

use super::iter_ctx::IterTcp;
use crate::{
    config::cfg,
    kernel::{SockAddrs, read, request_family},
    maps::SOCK_AGG,
    watch::classify,
};

/// Sockets between progress bytes. User space reads one byte per `read()`, so a read
/// visits at most this many sockets (a few ms) before the walker thread can be
/// rescheduled: this kernel is PREEMPT_NONE, and a read that ran to bpf_iter's
/// 1,000,000 objects held a core for seconds at 1.7M connections while the box's
/// connects and handshakes waited (walks and timed-out bursts coincided, 2026-12-04).
const PROGRESS_EVERY: u64 = 4096;

#[unsafe(no_mangle)]
#[unsafe(link_section = "iter/tcp")]
pub extern "C" fn iter_sockets(ctx: *mut c_void) -> i32 {
    let Some(it) = IterTcp::new(ctx) else {
        return 0;
    };
    if let Some(sk) = it.sock() {
        let _ = account(sk);
        // A read() that visits a million objects without output fails with EAGAIN;
        // a byte now and then ends each read early (see PROGRESS_EVERY).
        if it.seq_num() % PROGRESS_EVERY == 0 {
            it.write(&0u8);
        }
    }
    0
}

#[inline(always)]
fn account(sk: u64) -> Option<()> {
    let state = read::<u8>(sk, cfg!(offsets.skc_state))? as u32;
    if state as usize >= tcp_state::COUNT {
        return None;
    }
    let lport: u16 = read(sk, cfg!(offsets.skc_num))?;
    let rport = u16::from_be(read(sk, cfg!(offsets.skc_dport))?);
    // The family of the object: it decides the slab cache (a dual-stack socket with an
    // IPv4-mapped address is still a TCPv6 object, and so is its time-wait socket)
    // and which addresses are set.
    // https://github.com/torvalds/linux/blob/v6.18/net/ipv4/inet_timewait_sock.c (inet_twsk_alloc: sk_prot_creator's twsk_slab, tw_family = sk_family)
    let family: u16 = if state == tcp_state::NEW_SYN_RECV {
        request_family(sk)?
    } else {
        read(sk, cfg!(offsets.skc_family))?
    };
    let side = classify(lport, rport, &SockAddrs::with_family(sk, family))?;
    let agg = SOCK_AGG.get_ptr_mut(sock_agg_index(side, state))?;
    // SAFETY: array slot; walks are serialised by user space (one reader).
    let agg = unsafe { &mut *agg };
    agg.sockets += 1;
    if family == AF_INET6 {
        agg.v6_sockets += 1;
    }
    // Time-wait and request sockets are mini sockets: no buffers, no file.
    if state == tcp_state::TIME_WAIT || state == tcp_state::NEW_SYN_RECV {
        return Some(());
    }
    let rmem: i32 = read(sk, cfg!(offsets.sk_rmem_alloc)).unwrap_or(0);
    let wmem_queued: i32 = read(sk, cfg!(offsets.sk_wmem_queued)).unwrap_or(0);
    let forward: i32 = read(sk, cfg!(offsets.sk_forward_alloc)).unwrap_or(0);
    agg.rmem_alloc += rmem.max(0) as u64;
    agg.wmem_queued += wmem_queued.max(0) as u64;
    agg.forward_alloc += forward.max(0) as u64;
    let socket: u64 = read(sk, cfg!(offsets.sk_socket)).unwrap_or(0);
    if socket != 0 {
        agg.with_file += 1;
        let file: u64 = read(socket, cfg!(offsets.socket_file)).unwrap_or(0);
        let epoll: u64 = read(file, cfg!(offsets.file_f_ep)).unwrap_or(0);
        if epoll != 0 {
            agg.in_epoll += 1;
        }
    }
    Some(())
}
