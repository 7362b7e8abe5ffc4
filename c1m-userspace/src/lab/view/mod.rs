//! The live view: the kernel's counts next to the application's, while a run goes on.
//!
//! - [`compare`]: which kernel and app counts should match, and why they differ (pure).
//! - [`demo`]: a realistic state mid-setup, for tests and for trying the view.
//! - [`figures`]: the key figures of a [`LiveState`](crate::lab::model::LiveState), each
//!   `None` when its source is missing, shared by the terminal UI and the plain lines.
//! - [`tui`]: the terminal UI (ratatui), two columns: server and client.
//! - [`plain`]: one `key=value` line per second when stdout is not a terminal.
//! - [`prometheus`]: `--metrics-addr`, the Prometheus text exposition over HTTP/1.1.

pub mod compare;
pub mod demo;
pub mod figures;
pub mod format;
pub mod plain;
pub mod prometheus;
pub mod tui;
