//! RFC 6455 WebSocket codec: the opening handshake and the frame layer, as pure functions
//! over byte slices (no sockets, no clock), in the style of `quinn-proto`, so every rule is
//! tested, fuzzed and replayed from a corpus without I/O.
//!
//! The connection engines own the bytes and the buffers; this module only says what the
//! bytes mean and what to answer. That split lets an idle connection hold no buffer at all.

pub mod decoder;
pub mod frame;
pub mod handshake;

pub use decoder::{Decoder, Event, Fragment, Payload};
pub use frame::{CloseCode, FrameError, Header, Opcode, Role};
