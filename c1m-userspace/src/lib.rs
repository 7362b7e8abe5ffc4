//! c1m: open and hold a million TCP and WebSocket connections on one box and see what
//! the kernel does meanwhile. The binary is a thin shell over these modules.
//!
//! Read from the bottom up (`tests/layers.rs` keeps it so): the OS facts and parsers;
//! the [`observer`] (kernel) and the [`workload`] (app); the [`model`] of a run and the
//! [`figures`] computed once from it; what c1m makes of them: the live [`view`]s, the
//! [`report`] of a run folder and the [`compare`]son of runs; the [`lab`] that runs it
//! all; [`multihost`]'s client hosts; the commands.

#![warn(unreachable_pub, missing_docs)]

pub mod aligned_alloc;
pub mod args;
pub mod cli;
pub mod compare;
pub mod duration;
pub(crate) mod figures;
pub mod fmt;
pub(crate) mod host;
pub(crate) mod infile;
pub(crate) mod ktls;
pub mod lab;
pub mod model;
pub mod multihost;
pub mod netns;
pub mod netpath;
pub mod observer;
pub(crate) mod priority;
pub(crate) mod proc_net_tcp;
pub mod procstat;
pub mod report;
pub(crate) mod state_dir;
pub(crate) mod sysctl;
pub mod util;
pub mod view;
pub mod workload;
