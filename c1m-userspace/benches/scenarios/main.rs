//! c1m's benchmarks, out of the product: `cargo xtask bench` builds this bench target
//! (`cargo bench --no-run`) and runs it, in a fresh network namespace per run where it
//! compares. Scenarios: `idle` (raw TCP ramp, bytes per connection), `push` (WebSocket
//! ramp and broadcast fan-out), `echo` (round trips), `observer` (setup with and without
//! the eBPF observer). Each drives the `c1m` binary cargo built beside it through the
//! library's public API (control endpoints, snapshots, the observer); nothing asserts.
//!
//! Run alone: `cargo bench -p c1m-userspace --bench scenarios -- idle --connections 1000`.

mod observer;
mod workload;

use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "scenarios",
    about = "c1m's benchmarks that print figures: idle ramp, push, echo, observer overhead"
)]
struct Cli {
    #[command(flatten)]
    bench: observer::BenchCmd,
    /// Passed by `cargo bench` to every bench target; nothing to do with it here.
    #[arg(long = "bench", hide = true)]
    cargo_bench: bool,
}

fn main() {
    if let Err(e) = observer::run(Cli::parse().bench) {
        eprintln!("bench: {e:#}");
        std::process::exit(1);
    }
}
