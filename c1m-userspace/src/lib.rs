//! c1m: open and hold a million TCP and WebSocket connections on one box and see what
//! the kernel does meanwhile. The binary is a thin shell over these modules.

pub mod args;
pub mod bench;
pub mod cli;
pub mod duration;
pub mod fmt;
pub mod infile;
pub mod lab;
pub mod multihost;
pub mod netns;
pub mod observer;
pub mod priority;
pub mod proc_net_tcp;
pub mod procstat;
pub mod state_dir;
pub mod sysctl;
pub mod util;
pub mod workload;
