//! The live view: the kernel's counts next to the application's, while a run goes on.
//! Every view reads [`Figures`](crate::figures::Figures); none computes a figure.
//!
//! - [`live_state`]: what the views draw: the latest sources, their figures, the history.
//! - [`demo`]: a realistic state mid-setup, for tests and for trying the view.
//! - [`tui`]: the terminal UI (ratatui), two columns: server and client.
//! - [`plain`]: one `key=value` line per second when stdout is not a terminal.
//! - [`prometheus`]: `--metrics-addr`, the Prometheus text exposition over HTTP/1.1.

#[cfg(any(test, feature = "testkit"))]
pub mod demo;
pub mod live_state;
pub(crate) mod observe;
pub(crate) mod plain;
pub mod prometheus;
pub mod tui;
