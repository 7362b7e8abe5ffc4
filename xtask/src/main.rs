//! `cargo xtask`: the project's build and test driver. Every set-up step a fresh
//! machine needs is scripted here, so README's two commands are all a user types.

mod bench;
mod bench_cpu;
mod bench_engines;
mod bench_hosts;
mod bench_lab_observer;
mod bench_table;
mod bench_tls;
mod bench_uring;
mod ebpf;
mod image;
mod observer_cpu;
mod refservers;
mod test;
mod util;
mod warm_pages;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xtask", about = "Build, run, test and benchmark c1m")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build the eBPF object (installs rust-src and bpf-linker on first use).
    BuildEbpf {
        /// Build even if the object is newer than its sources.
        #[arg(long)]
        force: bool,
    },
    /// Build the eBPF object and the `c1m` binary (release).
    Build,
    /// Build everything, then run `c1m` with the given arguments (default: `run --tune`,
    /// the full lab). Needs root for the kernel observer.
    Run {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Build everything and run every test, the root-only eBPF ones included when root.
    Test {
        /// Extra arguments for `cargo test` (e.g. a test name filter).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Build everything, then c1m's container image `c1m:latest` offline (podman, `FROM
    /// scratch`: the binary and the libraries it links), for deploy/kubernetes/.
    Image,
    /// Install the reference servers' runtimes when missing (apt, npm, pip) and build
    /// each into <target dir>/reference-servers/<name>/run (see reference-servers/PROTOCOL.md).
    ReferenceServers,
    /// Build everything and run the benchmarks: c1m against minimal C programs in the
    /// same run (`compare`), the tokio engine against the epoll engine (`engines`), then
    /// c1m's own (`echo`, `observer`). `--connections N`
    /// sets the size (default 100,000), `--rounds R` the interleaved rounds (default 2).
    /// `tls` (by name only): TLS 1.3 handshakes against this box's crypto floor.
    Bench {
        /// Benchmark names and options (default: all).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::BuildEbpf { force } => ebpf::build(force),
        Command::Build => build_all(),
        Command::Run { args } => {
            build_all()?;
            // The main job also sets the sysctls it needs, and puts them back after.
            let args = if args.is_empty() {
                vec!["run".to_owned(), "--tune".to_owned()]
            } else {
                args
            };
            util::exec_c1m(&args)
        }
        Command::Test { args } => test(&args),
        Command::Image => {
            build_all()?;
            image::build()
        }
        Command::ReferenceServers => refservers::build_all(),
        Command::Bench { args } => {
            build_all()?;
            bench::run_bench(&args)
        }
    }
}

fn build_all() -> Result<()> {
    ebpf::build(false)?;
    util::cargo(&["build", "--release", "--package", "c1m-userspace"])
}

fn test(extra: &[String]) -> Result<()> {
    // The eBPF object only: `cargo test` builds the `c1m` binary the tests run itself.
    // A separate `cargo build --release` first compiled ~70 dependencies a second time
    // (the dev-dependencies unify other features), 3 of a fresh clone's 18 minutes.
    ebpf::build(false)?;
    util::test_prerequisites()?;
    // tests/reference_servers.rs starts them; a fresh CI machine gets them here.
    refservers::build_all()?;
    if !util::is_root() {
        eprintln!(
            "\n*** NOT ROOT: the eBPF tests will SKIP (they need CAP_BPF and CAP_NET_ADMIN). ***\n\
             *** Run `sudo -E cargo xtask test` to run them.                                   ***\n"
        );
    }
    if extra.is_empty() {
        return test::run_all();
    }
    // A filter or cargo's own flags: cargo test as asked. Every test binary runs even
    // after one fails: a CI log names all failures at once.
    let mut args = vec![
        "test",
        "--profile",
        util::TEST_PROFILE,
        "--workspace",
        "--no-fail-fast",
    ];
    args.extend(extra.iter().map(String::as_str));
    util::cargo(&args)
}
