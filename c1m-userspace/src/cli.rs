//! The `c1m` command line. Each subcommand's arguments live beside the code that
//! runs it; this file only routes.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// The `c1m` command line, parsed.
#[derive(Parser)]
#[command(
    name = "c1m",
    version,
    about = "Open and hold a million TCP/WebSocket connections; see what the kernel does"
)]
pub struct Cli {
    /// The subcommand to run.
    #[command(subcommand)]
    pub command: Command,
}

/// c1m's subcommands; each one's arguments live beside the code that runs it.
// Parsed once per process and matched at once: the size of `run`'s flags costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum Command {
    /// The lab: server, client and kernel observer through setup, idle, push and
    /// teardown, with the live view and a run folder of exports.
    Run(crate::lab::run::flags::RunArgs),
    /// Regenerate a run folder's report.html (and derived files) from its summary.json.
    Report(crate::report::cli::ReportArgs),
    /// Put any number of runs side by side (`RUN_DIR=NAME`; a shared name = repeats),
    /// each name's difference from a baseline with its interval and verdict; writes
    /// compare.csv, compare.json, compare.html.
    Compare(crate::compare::cli::CompareArgs),
    /// Check every limit a run of this size meets: value found, value needed, the fix.
    Doctor(crate::lab::doctor::DoctorArgs),
    /// The live view for a server already running (kernel side; app side for c1m).
    Top(crate::lab::top::TopArgs),
    /// Print the kernel's view of TCP sockets on this host every second.
    Observe(crate::observer::cli::ObserveArgs),
    /// Accept and hold connections (hold / echo / WebSocket with broadcast push).
    Server(crate::workload::cli::ServerArgs),
    /// Open N connections at a paced rate, hold them, then close them.
    Client(crate::workload::cli::ClientArgs),
    /// Join a multi-host run: the server host's folder and each client host's, into one
    /// run folder with the files and report of a one-box run (exit 2: bad input).
    Merge(crate::multihost::merge::MergeArgs),
    /// A shard of `server` or `client` in its own process (started by them).
    #[command(hide = true)]
    Worker(crate::workload::cli::WorkerArgs),
}

/// Commands that choose their own exit code (e.g. doctor: 1 when a check fails).
fn exit_code(result: anyhow::Result<i32>) -> i32 {
    result.unwrap_or_else(|e| {
        eprintln!("c1m: {e:#}");
        1
    })
}

/// A command whose stdout was closed (`c1m doctor | head -1`) ends quietly: Rust ignores
/// SIGPIPE, so the next `println!` panics with "failed printing to stdout: Broken pipe".
/// That panic is told apart from every other one and not printed; it unwinds (dropping
/// what the command holds: a lab's children, its sysctls) to [`main`], which exits with
/// [`CLOSED_STDOUT`].
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !is_closed_stdout(info.payload()) {
            default(info);
        }
    }));
}

fn is_closed_stdout(payload: &(dyn std::any::Any + Send)) -> bool {
    let text = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or_default();
    text.starts_with("failed printing to stdout") && text.contains("Broken pipe")
}

/// The exit code of a command cut short by a closed stdout: the shell's for a command
/// SIGPIPE ended (128 + 13), as `cat` or `yes` would give.
pub(crate) const CLOSED_STDOUT: i32 = 141;

/// `c1m run`'s flags with the plan they name (`--plan`) under them, and the effective
/// plan the run folder keeps; `None` when `--plan-check` printed it and nothing runs.
fn run_with_plan(
    matches: &clap::ArgMatches,
) -> anyhow::Result<Option<crate::lab::run::flags::RunArgs>> {
    use crate::lab::run::plan_file;
    let Some(given) = matches.subcommand_matches("run") else {
        anyhow::bail!("no `run` in the parsed command line");
    };
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let command_line = plan_file::shell_words(argv.iter().map(std::ffi::OsString::as_os_str));
    let args = plan_file::resolve(given, &command_line)?;
    if !args.plan_check {
        return Ok(Some(args));
    }
    plan_file::check(&args)?;
    print!("{}", args.effective_plan.as_deref().unwrap_or_default());
    Ok(None)
}

/// Runs the command line; returns the process exit code.
pub fn main() -> i32 {
    quiet_on_closed_stdout();
    match std::panic::catch_unwind(run) {
        Ok(code) => code,
        Err(p) if is_closed_stdout(&*p) => CLOSED_STDOUT,
        Err(p) => std::panic::resume_unwind(p),
    }
}

fn run() -> i32 {
    // Bad flags exit 1 (clap's own 2 would read as `c1m run`'s "degraded").
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 1 } else { 0 };
        }
    };
    let command = match cli.command {
        Command::Run(_) => match run_with_plan(&matches) {
            Ok(Some(args)) => Command::Run(args),
            Ok(None) => return 0,
            Err(e) => {
                eprintln!("c1m: {e}");
                return 1;
            }
        },
        other => other,
    };
    let result = match command {
        Command::Observe(args) => crate::observer::cli::run(args, crate::view::observe::line),
        Command::Doctor(args) => return exit_code(crate::lab::doctor::main(args)),
        // Hosts as network namespaces: it starts a `c1m run` and `c1m client`s in them.
        // Before `--servers`, which would run without the hosts asked for: `--hosts`
        // refuses `--servers` in one line.
        Command::Run(args) if args.hosts.is_some() => {
            return exit_code(crate::multihost::hosts_run::main(args));
        }
        // A `--servers` sequence is its own command: it starts `c1m run` processes.
        Command::Run(args) if args.servers.is_some() => {
            return exit_code(crate::lab::servers::sequence::main(args));
        }
        Command::Run(args) => return exit_code(crate::lab::run::main(args)),
        Command::Merge(args) => return exit_code(crate::multihost::merge::main(args)),
        Command::Top(args) => crate::lab::top::main(args),
        Command::Report(args) => return exit_code(crate::report::cli::main(args)),
        Command::Compare(args) => return exit_code(crate::compare::cli::main(args)),
        Command::Server(args) => crate::workload::cli::run_server(args),
        Command::Client(args) => return exit_code(crate::multihost::client_run::run_client(args)),
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use clap::Parser as _;

    use super::Cli;

    /// Every duration flag of every subcommand: (argv before the flag, flag).
    const DURATION_FLAGS: [(&[&str], &str); 12] = [
        (&["run"], "--idle"),
        (&["run"], "--setup-timeout"),
        (&["run", "--metrics-addr", ":9464"], "--metrics-linger"),
        (&["top"], "--duration"),
        (&["top"], "--interval"),
        (&["observe"], "--duration"),
        (&["observe"], "--interval"),
        (&["server"], "--push-every"),
        (&["server"], "--handshake-timeout"),
        (&["server"], "--duration"),
        (&["client"], "--hold"),
        (&["client"], "--connect-timeout"),
    ];

    /// `c1m CMD… FLAG VALUE`, for the flag tables below.
    fn argv(cmd: &[&'static str], flag: &'static str, v: &'static str) -> Vec<&'static str> {
        let mut a = vec!["c1m"];
        a.extend_from_slice(cmd);
        a.extend([flag, v]);
        a
    }

    #[test]
    fn every_duration_flag_takes_one_syntax() {
        for (cmd, flag) in DURATION_FLAGS {
            let argv = |v: &'static str| argv(cmd, flag, v);
            for ok in ["3s", "1h30m", "500ms", "3"] {
                if let Err(e) = Cli::try_parse_from(argv(ok)) {
                    panic!("{cmd:?} {flag} {ok}: {e}");
                }
            }
            let Err(e) = Cli::try_parse_from(argv("abc")) else {
                panic!("{cmd:?} {flag} abc was accepted");
            };
            let text = e.to_string();
            let line = text.lines().next().unwrap_or_default();
            assert!(
                line.contains(flag) && line.contains("e.g. 500ms, 3s, 2m, 1h30m"),
                "{cmd:?} {flag}: {text}"
            );
        }
    }

    /// Every connection-count flag of every subcommand: (argv before the flag, flag).
    /// The bench scenarios' count flags (now a bench target) use the same parser.
    const CONNECTION_FLAGS: [(&[&str], &str); 6] = [
        (&["run"], "-n"),
        (&["run", "--clients", "external"], "--expect"),
        (&["client"], "-n"),
        (&["doctor"], "-n"),
        (&["doctor"], "--connections"),
        (&["server"], "--max-conns"),
    ];

    #[test]
    fn every_connection_count_takes_one_syntax_and_refuses_zero() {
        for (cmd, flag) in CONNECTION_FLAGS {
            let argv = |v: &'static str| argv(cmd, flag, v);
            for ok in ["1000000", "10k", "1M", "1.5m"] {
                if let Err(e) = Cli::try_parse_from(argv(ok)) {
                    panic!("{cmd:?} {flag} {ok}: {e}");
                }
            }
            for (bad, says) in [
                ("0", "at least 1 connection is needed"),
                ("ten", "e.g. 100000, 10k or 1M"),
                (
                    "99999999999999999999",
                    "more connections than a count holds",
                ),
            ] {
                let Err(e) = Cli::try_parse_from(argv(bad)) else {
                    panic!("{cmd:?} {flag} {bad} was accepted");
                };
                let text = e.to_string();
                let line = text.lines().next().unwrap_or_default();
                let long = if flag == "-n" { "--connections" } else { flag };
                assert!(
                    line.contains(long) && line.contains(says),
                    "{cmd:?} {flag} {bad}: {text}"
                );
            }
        }
    }

    /// Every subcommand's `-h` and `--help` as clap renders them at `width` columns.
    fn helps(width: usize) -> Vec<(String, String)> {
        use clap::CommandFactory as _;
        let mut cli = Cli::command();
        cli.build();
        cli.get_subcommands()
            .flat_map(|sub| {
                let mut sub = sub.clone().term_width(width);
                let name = sub.get_name().to_owned();
                let short = sub.render_help().to_string();
                let long = sub.render_long_help().to_string();
                [
                    (format!("{name} -h"), short),
                    (format!("{name} --help"), long),
                ]
            })
            .collect()
    }

    #[test]
    fn help_wraps_to_the_width() {
        for width in [80, 100] {
            for (what, text) in helps(width) {
                for line in text.lines() {
                    assert!(
                        textwrap::core::display_width(line) <= width,
                        "{what} at {width}: {line:?}"
                    );
                }
            }
        }
    }

    /// The value names a flag may show: one per kind of value across the commands.
    const VALUE_NAMES: [&str; 30] = [
        // A probability (`--loss`) and a network interface (`--loss-link`).
        "P",
        "IFACE",
        "COUNT",
        "DURATION",
        "ADDRS",
        "PORTS",
        "HOST:PORT",
        "HOST:PORTS",
        "ENDPOINT",
        "DIR",
        "FILE",
        "BYTES",
        "PATH",
        "RATE",
        "NAME",
        "NAMES",
        "PID",
        "CMD",
        "MODE",
        "ENGINE",
        "FORMAT",
        "INSTANT",
        "TRIGGER",
        "HOW",
        "TIME",
        "I/N",
        "UNIT",
        "1+K",
        // `--check 'push.p99 < 50ms'`: a figure, a comparison and a value.
        "CHECK",
        // `--phase 'push 3 every 10s'`: a kind and its words.
        "PHASE",
    ];

    #[test]
    fn one_value_name_per_kind() {
        use clap::CommandFactory as _;
        let mut cli = Cli::command();
        cli.build();
        let mut odd = Vec::new();
        for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
            for arg in sub.get_arguments().filter(|a| a.get_long().is_some()) {
                if !arg.get_action().takes_values() {
                    continue;
                }
                let names: Vec<String> = arg
                    .get_value_names()
                    .map(|n| n.iter().map(|n| n.to_string()).collect())
                    .unwrap_or_else(|| vec![arg.get_id().as_str().to_uppercase()]);
                for n in names {
                    if !VALUE_NAMES.contains(&n.as_str()) && arg.get_possible_values().is_empty() {
                        odd.push(format!("{} --{}: <{n}>", sub.get_name(), arg.get_id()));
                    }
                }
            }
        }
        assert!(odd.is_empty(), "value names of no kind: {odd:#?}");
    }

    #[test]
    fn old_flag_names_still_parse() {
        use super::Command;
        for argv in [
            &["c1m", "doctor", "--sources", "4"][..],
            &["c1m", "doctor", "--source", "127.0.0.2-127.0.0.5"],
            &["c1m", "client", "--host", "127.0.0.1"],
            &["c1m", "run", "--control-addr", "127.0.0.1:7999"],
        ] {
            if let Err(e) = Cli::try_parse_from(argv) {
                panic!("{argv:?}: {e}");
            }
        }
        let Command::Doctor(d) = Cli::try_parse_from(["c1m", "doctor", "--sources", "4"])
            .unwrap()
            .command
        else {
            panic!("doctor");
        };
        assert_eq!(d.source.as_deref(), Some("4"));
    }

    #[test]
    fn run_takes_the_clients_workload_flags() {
        use super::Command;
        let argv = ["--payload-size=100", "--echo-count=3", "--path=/chat"];
        let run = Cli::try_parse_from(["c1m", "run"].into_iter().chain(argv)).unwrap();
        let client = Cli::try_parse_from(["c1m", "client"].into_iter().chain(argv)).unwrap();
        let (Command::Run(run), Command::Client(client)) = (run.command, client.command) else {
            panic!("run and client");
        };
        assert_eq!(run.workload, client.workload);
        assert_eq!(
            (run.workload.payload_size, run.workload.echo_count),
            (100, 3)
        );
        assert_eq!(run.workload.path, "/chat");
    }
}
