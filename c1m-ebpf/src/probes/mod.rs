//! One file per hook family.

mod buf_limit;
mod iter_ctx;
mod iter_listeners;
mod iter_sockets;
mod listen_overflow;
mod set_state;
mod tcp_events;
mod tp;
