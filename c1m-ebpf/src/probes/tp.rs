//! Reading classic tracepoint records at the offsets the loader parsed from tracefs.

use aya_ebpf::programs::TracePointContext;
use c1m_common::TracepointFields;

use crate::config::{cfg, known};

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

/// Local port, remote port (host order) and IPv4 addresses of the event's socket.
#[inline(always)]
pub fn endpoints(ctx: &TracePointContext, f: &TracepointFields) -> Option<(u16, u16, u32, u32)> {
    let mut sport: u16 = field(ctx, f.sport)?;
    let mut dport: u16 = field(ctx, f.dport)?;
    if f.ports_be != 0 {
        sport = u16::from_be(sport);
        dport = u16::from_be(dport);
    }
    let saddr: u32 = field(ctx, f.saddr).unwrap_or(0);
    let daddr: u32 = field(ctx, f.daddr).unwrap_or(0);
    Some((sport, dport, saddr, daddr))
}
