//! Reading classic tracepoint records at the offsets the loader parsed from tracefs.

use aya_ebpf::programs::TracePointContext;
use c1m_common::{TracepointFields, family::AF_INET6};

use crate::{
    config::{cfg, known},
    watch::{Addrs, Ip},
};

/// What every classic tracepoint program returns: 1 lets the event go on to perf and
/// ftrace users of the same tracepoint. The kernel reads a 0 as "filter out"
/// (`perf_trace_run_bpf_submit`), and aya's `#[tracepoint]` always returns 0: while c1m
/// was attached, `perf record -e tcp:tcp_send_reset` recorded none of a 1M run's 206
/// resets. (bpftrace returns 1 for the same reason: bpftrace#1857.)
pub const PASS_ON: u32 = 1;

/// A classic tracepoint program `$name` that runs `$handler` on each event and passes the
/// event on ([`PASS_ON`]); it is what `#[aya_ebpf::macros::tracepoint]` expands to, but
/// for the return value.
macro_rules! passing_tracepoint {
    ($name:ident => $handler:path) => {
        #[unsafe(no_mangle)]
        #[unsafe(link_section = "tracepoint")]
        pub fn $name(ctx: *mut ::core::ffi::c_void) -> u32 {
            $handler(::aya_ebpf::programs::TracePointContext::new(ctx));
            $crate::probes::tp::PASS_ON
        }
    };
}
pub(crate) use passing_tracepoint;

/// The field offsets of hook `index` (see `c1m_common::hook`).
#[inline(always)]
pub fn fields(index: usize) -> TracepointFields {
    cfg!(tracepoints[index])
}

#[inline(always)]
pub fn field<T>(ctx: &TracePointContext, offset: u32) -> Option<T> {
    let offset = known(offset)?;
    // SAFETY: read_at goes through bpf_probe_read; the offset comes from the format file.
    unsafe { ctx.read_at::<T>(offset).ok() }
}

/// A record's addresses: the IPv4 fields, or the IPv6 ones when `family` says so
/// (the kernel fills only those for an IPv6 socket).
/// https://github.com/torvalds/linux/blob/v6.18/include/trace/events/net_probe_common.h (TP_STORE_ADDRS, TP_STORE_ADDR_PORTS)
pub struct TpAddrs<'a> {
    ctx: &'a TracePointContext,
    f: &'a TracepointFields,
}

impl TpAddrs<'_> {
    #[inline(always)]
    fn addr(&self, v4: u32, v6: u32) -> Option<Ip> {
        // Records without a family field are IPv4-only.
        if field::<u16>(self.ctx, self.f.family) == Some(AF_INET6) {
            Some(Ip::v6(field(self.ctx, v6)?))
        } else {
            Some(Ip::V4(field(self.ctx, v4)?))
        }
    }
}

impl Addrs for TpAddrs<'_> {
    #[inline(always)]
    fn local(&self) -> Option<Ip> {
        self.addr(self.f.saddr, self.f.saddr6)
    }

    #[inline(always)]
    fn remote(&self) -> Option<Ip> {
        self.addr(self.f.daddr, self.f.daddr6)
    }
}

/// Local port, remote port (host order) and the addresses of the event's socket.
#[inline(always)]
pub fn endpoints<'a>(
    ctx: &'a TracePointContext,
    f: &'a TracepointFields,
) -> Option<(u16, u16, TpAddrs<'a>)> {
    let mut sport: u16 = field(ctx, f.sport)?;
    let mut dport: u16 = field(ctx, f.dport)?;
    if f.ports_be != 0 {
        sport = u16::from_be(sport);
        dport = u16::from_be(dport);
    }
    Some((sport, dport, TpAddrs { ctx, f }))
}
