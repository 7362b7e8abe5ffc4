//! The kernel's view: loads the eBPF programs, attaches them, and reads their maps
//! into one consistent snapshot ([`KernelView`]).

pub mod btf;
pub mod offsets;
pub mod bpf_sys;
pub mod cli;
pub mod tracefs;
