//! `sock:sock_exceed_buf_limit`: a socket hit the protocol's memory pressure limits.
//! The record names the protocol but carries no socket, so the count has no side.

use aya_ebpf::programs::TracePointContext;
use c1m_common::{event, event_index, hook, side};

use super::tp::{field, fields, passing_tracepoint};
use crate::maps::{EVENTS, bump};

passing_tracepoint!(sock_exceed_buf_limit => on_sock_exceed_buf_limit);

#[inline(always)]
fn on_sock_exceed_buf_limit(ctx: TracePointContext) {
    let f = fields(hook::EXCEED_BUF_LIMIT);
    if let Some(name) = field::<[u8; 4]>(&ctx, f.name) {
        if name == *b"TCP\0" {
            bump(&EVENTS, event_index(side::OTHER, event::EXCEED_BUF_LIMIT));
        }
    }
}
