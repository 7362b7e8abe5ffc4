//! `sock:sock_exceed_buf_limit`: a socket hit the protocol's memory pressure limits.
//! The record names the protocol but carries no socket, so the count has no side.

use aya_ebpf::{macros::tracepoint, programs::TracePointContext};
use c1m_common::{event, event_index, hook, side};

use super::tp::{field, fields};
use crate::maps::{EVENTS, bump};

#[tracepoint]
pub fn sock_exceed_buf_limit(ctx: TracePointContext) -> u32 {
    let f = fields(hook::EXCEED_BUF_LIMIT);
    if let Some(name) = field::<[u8; 4]>(&ctx, f.name) {
        if name == *b"TCP\0" {
            bump(&EVENTS, event_index(side::OTHER, event::EXCEED_BUF_LIMIT));
        }
    }
    0
}
