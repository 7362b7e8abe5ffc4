//! The application side: `c1m server` and `c1m client`, sharded over worker processes
//! when one process's file-descriptor limit is too small.

pub mod ws;
