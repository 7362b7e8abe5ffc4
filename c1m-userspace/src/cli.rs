//! The `c1m` command line. Each subcommand's arguments live beside the code that
//! runs it; this file only routes.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "c1m",
    version,
    about = "Open and hold a million TCP/WebSocket connections; see what the kernel does"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Print the kernel's view of TCP sockets on this host every second.
    Observe(crate::observer::cli::ObserveArgs),
    /// Accept and hold connections (hold / echo / WebSocket with broadcast push).
    Server(crate::workload::cli::ServerArgs),
    /// Open N connections at a paced rate, hold them, then close them.
    Client(crate::workload::cli::ClientArgs),
    /// A shard of `server` or `client` in its own process (started by them).
    #[command(hide = true)]
    Worker(crate::workload::cli::WorkerArgs),
}

/// Runs the command line; returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Observe(args) => crate::observer::cli::run(args),
        Command::Server(args) => crate::workload::cli::run_server(args),
        Command::Client(args) => crate::workload::cli::run_client(args),
        Command::Worker(args) => crate::workload::cli::run_worker(args),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("c1m: {e:#}");
            1
        }
    }
}
