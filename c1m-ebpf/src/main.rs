//! c1m's kernel side: counters for TCP state transitions, accept-queue drops and
//! handshake/error signals, plus two `iter/tcp` programs that read listeners and
//! per-socket memory. One hook family per file under `probes/`.
#![no_std]
#![no_main]
// Atomic adds on map values (see maps.rs).
#![allow(internal_features)]
#![feature(core_intrinsics)]

mod config;
mod kernel;
mod maps;
mod probes;
mod watch;

/// Any reachable panic must fail verification, never run: the loop makes it so.
#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

/// GPL-compatible: `bpf_probe_read_kernel` and `bpf_seq_write` are GPL-only helpers.
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
