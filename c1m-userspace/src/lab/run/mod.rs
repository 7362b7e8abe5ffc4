//! `c1m run`: the lab. Preflight (and `--tune`), then a `c1m server`, a `c1m client`
//! and the kernel observer on this box, through the phases of the seeds' framework
//! comparison: setup (paced ramp), idle (hold), push (broadcast a timestamp to every
//! connection), teardown. Live view while it runs; a run folder with every export
//! after it, rewritten as it goes so Ctrl-C or a crash loses nothing measured.
//!
//! Here the entry; one run is `one.rs` (its flags `flags.rs`, its plan `plan.rs`), the lab
//! while it runs `lab.rs`, its phases `drive.rs` with their decisions in `phases.rs`.

// The macros come before the modules so that every room of the run can say a line.

/// A line for the user: stdout, or stderr when stdout carries `--json` lines.
macro_rules! say {
    ($json:expr, $($arg:tt)*) => {
        if $json { eprintln!($($arg)*) } else { println!($($arg)*) }
    };
}

/// [`say!`] without the newline.
macro_rules! say_raw {
    ($json:expr, $($arg:tt)*) => {
        if $json { eprint!($($arg)*) } else { print!($($arg)*) }
    };
}

mod capped_log;
pub(crate) mod cgroup;
pub(crate) mod child_args;
mod children;
mod ctl;
mod drive;
pub mod flags;
pub(crate) mod folder;
pub mod foreign;
pub(crate) mod host;
pub(crate) mod isolation;
pub mod journal;
mod lab;
mod one;
pub mod phase_list;
mod phases;
pub(crate) mod plan;
pub mod plan_file;
mod ports;
pub(crate) mod preflight;
pub(crate) mod sources;
pub(crate) mod stall;
mod verdict;

use anyhow::{Context, Result};

use self::flags::RunArgs;

/// `c1m run`'s entry for one run (a `--servers` sequence is `servers::sequence::main`):
/// the flags checked against each other, the run moved into a namespace of its own when
/// asked, then the run.
pub(crate) fn main(mut args: RunArgs) -> Result<i32> {
    // SIGINT, SIGTERM and SIGHUP end a run as `interrupted`, whenever they come: handled
    // before the first sysctl is touched (a SIGTERM between --tune and the live view
    // ended the process with 143, the kernel tuned and the summary `running`).
    crate::util::shutdown_flag().context("installing signal handlers")?;
    flags::flags_agree(&args)?;
    // One run of a `--servers` sequence in a namespace of its own: before the first
    // thread, so every thread and child lives there.
    let carry_failed = match args.isolation {
        Some(isolation::Isolation::Netns) => {
            // The endpoint answers where the user started the sequence, not in the
            // run's namespace, which has nothing but its own lo.
            if let Some(addr) = args.metrics_addr {
                let bound = std::net::TcpListener::bind(addr)
                    .map_err(|e| crate::view::prometheus::flag_error(addr, &e))?;
                args.metrics_listener = Some(std::sync::Arc::new(bound));
            }
            isolation::enter_fresh_netns(&host::RECORDED_SYSCTLS)?
        }
        _ => Vec::new(),
    };
    for f in carry_failed {
        eprintln!("c1m: the run's namespace keeps its default for {f}");
    }
    let runtime = lab_runtime()?;
    let into = args.into.clone();
    let result = runtime.block_on(one::run(args, into.clone()));
    // A run of a sequence that stopped on an error says so in its own folder: only
    // once it is its own (a --into folder that existed is another lab's).
    if let (Err(e), Some(dir)) = (&result, &into)
        && !folder::Taken::is(e)
    {
        folder::record_failure(dir, e)?;
    }
    result
}

/// The lab's runtime. The lab draws the view and polls both sides: like the observer,
/// it must keep up with the load it watches (its children are put back to the default
/// weight).
pub(crate) fn lab_runtime() -> Result<tokio::runtime::Runtime> {
    crate::priority::watcher();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(crate::priority::watcher)
        .enable_all()
        .build()
        .context("starting the tokio runtime")
}
