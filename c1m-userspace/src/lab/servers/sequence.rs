//! The sequence itself: each run a `c1m run` process with its server's flags, kept apart
//! by `run/isolation.rs`, signals passed on, then the comparison written and printed.

use std::process::ExitStatus;

use anyhow::{Context as _, Result, bail};

use super::{
    order::schedule,
    reference::{built_dir, compare_arg, parse_list, workers_for},
};
use crate::{
    compare::{
        self,
        cli::{CompareArgs, EXIT_BAD_INPUT},
    },
    lab::run::{
        child_args,
        flags::{Clients, RunArgs},
        folder,
        isolation::{self, Isolation},
        lab_runtime, plan, preflight,
    },
    model::Outcome,
    report::load_run,
    workload::push_format::PushFormat,
};

/// The flags `--servers` sets for each server itself, with the user's value when given.
fn refused_flags(args: &RunArgs) -> Vec<&'static str> {
    [
        ("--server-cmd", args.server_cmd.is_some()),
        ("--target", args.target.is_some()),
        ("--push-trigger", args.push_trigger.is_some()),
        ("--push-format", args.push_format != PushFormat::C1m),
        ("--push-stamp", args.push_stamp.is_some()),
        ("--server-workers", args.server_workers.is_some()),
    ]
    .into_iter()
    .filter_map(|(flag, given)| given.then_some(flag))
    .collect()
}

/// SIGINT, SIGTERM and SIGHUP to the sequence: each stops it, and is passed on to the
/// run under way (a TUI in raw mode takes Ctrl-C as a key and ends its run itself; the
/// sequence then stops on the run's outcome).
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
    stop: bool,
}

impl Signals {
    fn new() -> Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        crate::util::note_terminals();
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt()).context("installing signal handlers")?,
            terminate: signal(SignalKind::terminate()).context("installing signal handlers")?,
            hangup: signal(SignalKind::hangup()).context("installing signal handlers")?,
            stop: false,
        })
    }

    /// The next signal's number.
    async fn next(&mut self) -> rustix::process::Signal {
        use rustix::process::Signal;
        tokio::select! {
            _ = self.interrupt.recv() => Signal::INT,
            _ = self.terminate.recv() => Signal::TERM,
            _ = self.hangup.recv() => {
                // The terminal is gone: the comparison printed at the end must not fail.
                crate::util::leave_dead_terminal();
                Signal::HUP
            }
        }
    }
}

/// Runs `c1m ARGV…` (one run of the sequence) to its end, passing the sequence's signals
/// on. Called from the lab's main thread (the `block_on` of `run::main`), which lives as
/// long as the sequence: the run dies with it.
/// `stdout_log`: where the run's own output goes (its live view and summary), when not
/// on the sequence's stdout.
async fn run_one(
    argv: &[std::ffi::OsString],
    stdout_log: Option<&std::path::Path>,
    signals: &mut Signals,
) -> Result<ExitStatus> {
    let exe = crate::util::own_exe();
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args(argv).kill_on_drop(true);
    if let Some(log) = stdout_log {
        let file =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        cmd.stdout(file);
    }
    let parent = std::process::id();
    // SAFETY: prctl and getppid are async-signal-safe and touch no memory.
    unsafe {
        cmd.pre_exec(move || crate::util::die_with_parent(parent));
    }
    let mut child = cmd.spawn().context("starting a run of the sequence")?;
    loop {
        tokio::select! {
            status = child.wait() => return status.context("waiting for a run of the sequence"),
            sig = signals.next() => {
                signals.stop = true;
                // Our own child, not yet reaped (its pid cannot be reused).
                if let Some(pid) = child.id().and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
                    let _ = rustix::process::kill_process(pid, sig);
                }
            }
        }
    }
}

/// The sequence's size and length before it starts: each run's ramp at --rate, its
/// idle phase and ~15 s of start, settling, push and teardown (a wait for clean ports
/// comes on top).
fn estimate(args: &RunArgs, runs: usize, isolation: Isolation) -> String {
    let (n, _) = plan::resolve_target(args.connections);
    let ramp = n.get() as f64
        / if args.rate == 0 {
            25_000.0
        } else {
            args.rate as f64
        };
    let between = match args.phases.is_empty() {
        true => args.idle,
        false => crate::lab::run::phase_list::least_length(&args.phases),
    };
    let each = ramp + between.as_secs_f64() + 15.0;
    let wait = match isolation {
        Isolation::Wait => format!(
            ", plus up to --clean-wait {}s each",
            args.clean_wait.as_secs()
        ),
        Isolation::Netns => String::new(),
    };
    format!(
        "{runs} run{}, ~{} each, estimated {} in all{wait}",
        if runs == 1 { "" } else { "s" },
        crate::fmt::duration(each),
        crate::fmt::duration(each * runs as f64)
    )
}

/// How the runs are kept apart: `--isolation`, or a namespace each where that works
/// (root, loopback addresses), else the wait; with the reason for the default.
fn choose_isolation(args: &RunArgs, host: std::net::IpAddr) -> Result<(Isolation, String)> {
    let mut addrs = vec![host];
    if let Some(s) = &args.source {
        addrs.extend(crate::args::parse_addrs(std::slice::from_ref(s))?);
    }
    let possible = isolation::netns_possible(&addrs);
    Ok(match (args.isolation, possible) {
        (Some(Isolation::Netns), Err(why)) => bail!(
            "--isolation netns: {why}; use --isolation wait (each run waits for the sockets an earlier one left)"
        ),
        (Some(i), _) => (i, "--isolation".to_owned()),
        (None, Ok(())) => (Isolation::Netns, "the default as root".to_owned()),
        (None, Err(why)) => (Isolation::Wait, why),
    })
}

/// `c1m run --servers NAMES`: dispatched here by the command layer, so the one-run lab
/// never imports the sequence that starts it as a process.
pub(crate) fn main(args: RunArgs) -> Result<i32> {
    lab_runtime()?.block_on(run_all(args))
}

/// `c1m run --servers NAMES [--repeat K]`: the lab's run once per entry of [`schedule`],
/// into `<out>/<stamp>-servers/<name>-<k>/`, then the comparison of them all into that
/// folder. Each run is a `c1m run` process of its own (its memory, fds and, as root, its
/// network namespace), so nothing but the box carries from one run to the next; the
/// sequence keeps only the order and the comparison. Everything is checked before the
/// first run starts: a bad name or a server not built exits 2, a flag `--servers` sets
/// itself exits 1. A failed run is listed with its outcome and the sequence goes on;
/// Ctrl-C ends it and compares what was measured.
async fn run_all(mut args: RunArgs) -> Result<i32> {
    let names = args.servers.take().unwrap_or_default();
    let servers = match parse_list(&names) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("c1m run: --servers: {e}");
            return Ok(EXIT_BAD_INPUT);
        }
    };
    if let Some(b) = &args.baseline
        && !servers.iter().any(|s| s.name() == b)
    {
        let choices: Vec<&str> = servers.iter().map(|s| s.name()).collect();
        eprintln!(
            "c1m run: --baseline {b}: not among --servers; pick from {}",
            choices.join(", ")
        );
        return Ok(EXIT_BAD_INPUT);
    }
    if args.server_message_rate.is_some()
        && let Some(s) = servers.iter().find(|s| s.is_reference())
    {
        bail!(
            "--server-message-rate makes c1m's own server send messages; {} does not: name only c1m-epoll and c1m-tokio in --servers, or drop the flag",
            s.name()
        );
    }
    if let Some(flag) = refused_flags(&args).first() {
        bail!(
            "--servers starts each named server with its own push, so it cannot be used with {flag}: drop one of them"
        );
    }
    if args.clients == Clients::External {
        bail!("--servers runs its clients on this box: drop --clients external");
    }
    let ip = match crate::args::parse_addrs(std::slice::from_ref(&args.addr))?[..] {
        [ip] => ip,
        _ => bail!(
            "--servers takes one --addr (a reference server listens on one address), not {}",
            args.addr
        ),
    };
    let host = ip.to_string();
    let (isolation, why) = choose_isolation(&args, ip)?;
    let built = built_dir()?;
    // Past one process's fd limit a reference server runs as worker processes, as many
    // as c1m's own server would (the seeds raised `ulimit -n` instead; here it is capped).
    let (connections, _) = plan::resolve_target(args.connections);
    let workers = workers_for(
        connections.get(),
        args.ports.0.len() as u64,
        crate::host::nofile_limits().1,
    );
    let mut flags = Vec::new();
    for s in &servers {
        match s.flags(&built, &host, &args.ports, workers) {
            Ok(f) => flags.push((*s, f)),
            Err(e) => {
                eprintln!("c1m run: {e}");
                return Ok(EXIT_BAD_INPUT);
            }
        }
    }
    // What would fail every run fails now, before any wait or folder.
    preflight::sequence(&args, flags.iter().any(|(_, f)| f.single_process_command()))?;
    // Never another lab's, as a run folder (`run/folder.rs`).
    let stamp = format!("{}-servers", crate::fmt::stamp(crate::util::unix_ms_now()));
    let dir = folder::create_unique(&args.out, &stamp).with_context(|| {
        format!(
            "creating the comparison folder {}",
            args.out.join(&stamp).display()
        )
    })?;
    crate::lab::run::plan_file::write_into(&dir, &args)?;
    let mut signals = Signals::new()?;
    eprintln!(
        "c1m run --servers: {} ({why})",
        match isolation {
            Isolation::Netns => "each run in a network namespace of its own",
            Isolation::Wait =>
                "each run waits until the sockets an earlier run left on its ports are gone",
        }
    );
    let order = schedule(&servers, args.repeat as usize);
    eprintln!(
        "c1m run --servers: {}",
        estimate(&args, order.len(), isolation)
    );
    let mut runs = Vec::new();
    let mut worst = Outcome::Complete;
    // A run of the sequence whose --check failed: the sequence exits 3 as that run did.
    let mut checks_failed = false;
    for (i, (server, r)) in order.iter().enumerate() {
        // A signal that came between two runs (while the last one was read back) stops
        // the sequence here, before the next run starts only to be killed.
        tokio::select! {
            biased;
            _ = signals.next() => signals.stop = true,
            () = std::future::ready(()) => {}
        }
        if signals.stop {
            worst = Outcome::Interrupted;
            break;
        }
        let run_dir = dir.join(format!("{server}-{}", r + 1));
        eprintln!(
            "c1m run --servers: {server} ({} of {}) into {}",
            i + 1,
            order.len(),
            run_dir.display()
        );
        let mut one = args.clone();
        if let Some((_, f)) = flags.iter().find(|(s, _)| s == server) {
            f.clone().apply(&mut one);
        }
        one.repeat = 1;
        // The comparison's, not the run's: a run on its own compares with nothing.
        one.baseline = None;
        one.isolation = Some(isolation);
        one.server_name = Some(server.name().to_owned());
        one.into = Some(run_dir.clone());
        // Without --verbose, the run's own output goes to a file beside its folder: the
        // sequence's stdout is for the comparison (six servers' summaries were ~1,500
        // lines before it).
        let log = (!args.verbose).then(|| dir.join(format!("{server}-{}.stdout.log", r + 1)));
        let ended = match child_args::run_argv(&one) {
            Ok(argv) => run_one(&argv, log.as_deref(), &mut signals).await,
            Err(e) => Err(e.into()),
        };
        // A run that could not even say why it stopped (killed, or never started).
        let concluded = load_run(&run_dir).is_ok_and(|r| r.outcome != Outcome::Running);
        let failure = match ended {
            Err(e) => Some(e),
            Ok(status) if !concluded => Some(anyhow::anyhow!(
                "its c1m run process ended ({status}) before concluding"
            )),
            Ok(_) => None,
        };
        // The sequence goes on (and compares what it has) even when the folder cannot
        // take the failure either, e.g. a full disk.
        if let Some(e) = failure
            && let Err(w) = folder::record_failure(&run_dir, &e)
        {
            eprintln!("c1m run --servers: {server}: {e:#}; and recording it: {w:#}");
        }
        let (outcome, checks) = load_run(&run_dir)
            .map(|r| (r.outcome, r.checks))
            .unwrap_or((Outcome::Failed, Vec::new()));
        checks_failed |= checks.iter().any(|c| !c.passed);
        worst = worst.worst(outcome);
        runs.push(compare_arg(&run_dir, *server));
        if outcome == Outcome::Interrupted {
            break;
        }
    }
    // The table's columns in the order the servers were named (the rounds' order is
    // the Williams design's); each server's repeats keep their run order.
    runs.sort_by_key(|r| servers.iter().position(|s| s.name() == r.name));
    let compare = CompareArgs {
        runs,
        out: dir.clone(),
        baseline: args.baseline.clone(),
        verbose: args.verbose,
    };
    let code = if args.json {
        compare::cli::run(compare, &mut std::io::stderr().lock())?
    } else {
        compare::cli::run(compare, &mut std::io::stdout().lock())?
    };
    eprintln!("c1m run --servers: comparison folder {}", dir.display());
    if code != 0 {
        return Ok(code);
    }
    Ok(crate::lab::gate::exit_code_of(
        worst.exit_code(),
        checks_failed,
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::reference::ReferenceServer;
    use super::*;
    use crate::{lab::run::flags::ServerSpec, util::PortList, workload::push_trigger::PushTrigger};

    #[test]
    fn flags_start_the_built_script_and_signal_it() {
        let dir = crate::report::fixture::test_dir("refserver-flags");
        let ports: PortList = "20000-20003".parse().unwrap();
        let err = ReferenceServer::Go
            .flags(&dir, "127.0.0.1", &ports, 1)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "go: {}/go/run not built: run `cargo xtask reference-servers`",
                dir.display()
            )
        );
        std::fs::create_dir_all(dir.join("go")).unwrap();
        std::fs::write(dir.join("go/run"), "#!/bin/sh\n").unwrap();
        let f = ReferenceServer::Go
            .flags(&dir, "127.0.0.1", &ports, 1)
            .unwrap();
        // Through `c1m run`'s own flags: the lab starts the script and signals it.
        let mut args = run_args(&[]);
        f.apply(&mut args);
        let (spec, trigger) = ServerSpec::of(&args).unwrap();
        let run = dir.join("go/run").display().to_string();
        assert_eq!(
            spec,
            ServerSpec::Command(
                [
                    run.as_str(),
                    "--host",
                    "127.0.0.1",
                    "--ports",
                    "20000-20003"
                ]
                .map(String::from)
                .to_vec()
            )
        );
        assert_eq!(trigger.to_string(), "signal:USR1");
        assert_eq!(args.push_format.to_string(), "u64le-us");
        let own = ReferenceServer::C1mEpoll
            .flags(&dir, "127.0.0.1", &ports, 1)
            .unwrap();
        let mut args = run_args(&[]);
        own.apply(&mut args);
        assert_eq!(
            ServerSpec::of(&args).unwrap(),
            (ServerSpec::Own, PushTrigger::Control)
        );
        assert_eq!(args.push_format, PushFormat::C1m);
    }

    /// `c1m run ARGS` as the lab reads it.
    fn run_args(argv: &[&str]) -> RunArgs {
        #[derive(clap::Parser)]
        struct Run {
            #[command(flatten)]
            run: RunArgs,
        }
        let argv = std::iter::once("run").chain(argv.iter().copied());
        <Run as clap::Parser>::try_parse_from(argv).unwrap().run
    }

    #[test]
    fn servers_refuses_the_flags_it_sets_itself() {
        assert!(refused_flags(&run_args(&["--servers", "go"])).is_empty());
        assert_eq!(
            refused_flags(&run_args(&[
                "--servers",
                "go",
                "--server-cmd",
                "x",
                "--push-format",
                "text-ms",
            ])),
            vec!["--server-cmd", "--push-format"]
        );
        assert_eq!(
            refused_flags(&run_args(&["--target", "127.0.0.1:9000"])),
            vec!["--target"]
        );
    }
}
