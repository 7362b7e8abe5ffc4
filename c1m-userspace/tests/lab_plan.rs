//! `c1m run --plan FILE` (issue 35 point 4): every flag of `c1m run` is a key of the
//! same name and back (the round trip is generated over clap's own list of flags, so a
//! new flag without a case here fails), errors name the file, the line and the key, the
//! command line replaces the plan's keys, a plan another user can write is refused, and
//! a real run keeps a plan.toml that runs the same experiment again. Plans used here are
//! in tests/plans/; the seeds' experiment is the repository's plans/seed-004.toml.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Command,
};

use c1m::lab::run::{flags::RunArgs, plan_file};
use lab_util::{c1m_run, fresh_dir, root_or_skip, run_folders};

use crate::lab_util;

/// One non-default value for every flag of `c1m run` (with the flag it needs, if any).
const EVERY_FLAG: &[&[&str]] = &[
    &["--connections", "5000"],
    &["--rate", "10000"],
    &["--ports", "23850-23859"],
    &["--addr", "127.0.0.2"],
    &["--source", "127.0.0.2-127.0.0.3"],
    &["--mode", "echo"],
    &["--payload-size", "100"],
    &["--echo-count", "3"],
    &["--path", "/chat"],
    &["--engine", "tokio"],
    &["--server-engine", "tokio"],
    &["--idle", "2.5s"],
    &["--heartbeat", "30s", "--heartbeat-timeout", "10s"],
    &["--server-heartbeat", "20s"],
    &["--server-message-rate", "5/s"],
    &["--churn", "500/s", "--churn-order", "random"],
    &["--message-rate", "10/s", "--message-size", "128"],
    &["--total-message-rate", "2500.5"],
    &["--pushes", "3"],
    &[
        "--phase",
        "hold 2s",
        "--phase",
        "push 2 every 1s",
        "--phase",
        "heartbeat 30s for 1m timeout 45s",
        "--phase",
        "messages 10/s size 128 for 30s",
    ],
    &["--push-writers", "2"],
    &["--setup-timeout", "1m"],
    &["--connect-timeout", "500ms"],
    &["--tls"],
    &[
        "--tls-cert",
        "/etc/c1m/cert.pem",
        "--tls-key",
        "/etc/c1m/key.pem",
    ],
    &["--tls-ca", "/etc/c1m/ca.pem"],
    &["--tls-insecure-skip-verify"],
    &["--tls-resumption"],
    &["--in-flight", "100"],
    &["--tune"],
    &["--no-observer"],
    &["--force"],
    &["--out", "/tmp/c1m-plan-runs"],
    &["--metrics-addr", "127.0.0.1:23899"],
    &[
        "--metrics-linger",
        "5s",
        "--metrics-addr",
        "127.0.0.1:23899",
    ],
    &["--metrics-per-port", "--metrics-addr", "127.0.0.1:23899"],
    &["--plain"],
    &["--json"],
    &["--clients", "external"],
    &["--hosts", "1+2"],
    &["--clients-per-host", "10", "--hosts", "1+2"],
    &["--conntrack", "--hosts", "1+2"],
    &["--loss", "1%", "--hosts", "1+2"],
    &["--expect", "1000"],
    &["--control", "127.0.0.1:23898"],
    &["--server-cmd", "python3 server.py --port $PORT"],
    &["--target", "127.0.0.1:23850-23851"],
    &["--server-pid", "1234", "--target", "127.0.0.1:23850"],
    &["--push-trigger", "signal:USR1"],
    &["--push-format", "u64le-us"],
    &["--push-latency", "write"],
    &["--push-stamp", "write"],
    &["--push-wait", "3s"],
    &["--servers", "python,node,go,netty"],
    &["--repeat", "3"],
    &["--isolation", "wait"],
    &["--clean-wait", "5s"],
    &["--server-name", "mine \"quoted\" \\ too"],
    &["--baseline", "go"],
    &["--verbose"],
    &["--check", "push.p99 < 50ms", "--check", "failures == 0"],
];

/// A plan saying what `flags` say: `--flag VALUE` is `flag = "VALUE"`, a flag alone is
/// `flag = true`, a repeated flag a list.
fn plan_of(flags: &[&str]) -> String {
    let mut keys: Vec<(String, Vec<String>)> = Vec::new();
    let mut i = 0;
    while i < flags.len() {
        let key = flags[i].trim_start_matches('-').to_owned();
        let value = flags.get(i + 1).filter(|v| !v.starts_with("--"));
        i += 1 + usize::from(value.is_some());
        let Some(v) = value else {
            keys.push((key, vec!["true".to_owned()]));
            continue;
        };
        let v = format!("{v:?}"); // a TOML basic string: Rust's escapes of " and \ match
        match keys.iter_mut().find(|(k, _)| *k == key) {
            Some((_, vs)) => vs.push(v),
            None => keys.push((key, vec![v])),
        }
    }
    keys.iter()
        .map(|(k, vs)| match (k.as_str(), vs.as_slice()) {
            ("check" | "phase", vs) => format!("{k} = [{}]\n", vs.join(", ")),
            (_, [v]) => format!("{k} = {v}\n"),
            _ => panic!("{k} repeated"),
        })
        .collect()
}

/// What a run of `c1m run ARGS` would be given, without what says where it came from.
fn resolved(args: &[&str]) -> Result<(String, String), String> {
    let mut a: RunArgs =
        plan_file::resolve_argv(std::iter::once("run").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
    let plan = a.effective_plan.take().expect("an effective plan");
    a.plan = None;
    Ok((format!("{a:?}"), plan))
}

/// Writes `text` to `dir/name` (mode 0644 under the usual umask) and returns its path.
fn write_plan(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write plan");
    p
}

/// The keys a plan text sets before its tables, and `phase` for its `[[phase]]` tables.
fn flat_keys(plan: &str) -> Vec<&str> {
    let lines = key_lines(plan);
    let tables = lines.iter().position(|l| l.starts_with("[["));
    let mut keys: Vec<&str> = lines[..tables.unwrap_or(lines.len())]
        .iter()
        .map(|l| l.split(" = ").next().unwrap_or_default())
        .collect();
    if tables.is_some() {
        keys.push("phase");
    }
    keys
}

/// The keys a plan text sets, as `key = value` lines (comments and blanks dropped).
fn key_lines(plan: &str) -> Vec<&str> {
    plan.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect()
}

#[test]
fn every_flag_is_a_plan_key_and_back() {
    // Every key has a case: a flag added to `c1m run` fails here until it has one.
    let keys: BTreeSet<String> = plan_file::command()
        .get_arguments()
        .filter(|a| plan_file::is_key(a))
        .filter_map(|a| a.get_long().map(str::to_owned))
        .collect();
    let covered: BTreeSet<String> = EVERY_FLAG
        .iter()
        .flat_map(|f| f.iter())
        .filter_map(|w| w.strip_prefix("--").map(str::to_owned))
        .collect();
    assert_eq!(
        keys, covered,
        "every `c1m run` flag needs a case in EVERY_FLAG"
    );
    assert!(!keys.contains("plan") && !keys.contains("into"));

    let dir = fresh_dir("plan-keys");
    for (i, flags) in EVERY_FLAG.iter().enumerate() {
        let (from_flags, effective) = resolved(flags).unwrap_or_else(|e| panic!("{flags:?}: {e}"));
        // Flag -> key: the same flags from a plan give the same run.
        let plan = write_plan(&dir, &format!("{i}.toml"), &plan_of(flags));
        let plan_arg = plan.to_str().expect("utf-8 temp dir");
        let (from_plan, _) =
            resolved(&["--plan", plan_arg]).unwrap_or_else(|e| panic!("{flags:?} as a plan: {e}"));
        assert_eq!(from_flags, from_plan, "{flags:?} from a plan");
        // Key -> flag: the effective plan c1m writes holds exactly these keys and runs
        // the same again.
        let mut written: Vec<&str> = flat_keys(&effective);
        written.sort_unstable();
        let mut given: Vec<&str> = flags.iter().filter_map(|w| w.strip_prefix("--")).collect();
        given.sort_unstable();
        given.dedup();
        assert_eq!(written, given, "{flags:?} wrote:\n{effective}");
        let again = write_plan(&dir, &format!("{i}-effective.toml"), &effective);
        let (from_effective, _) = resolved(&["--plan", again.to_str().expect("utf-8")])
            .unwrap_or_else(|e| panic!("{flags:?} from its own plan: {e}\n{effective}"));
        assert_eq!(from_flags, from_effective, "{flags:?} from\n{effective}");
    }
}

#[test]
fn numbers_and_switches_take_their_toml_types() {
    let dir = fresh_dir("plan-types");
    let plan = write_plan(
        &dir,
        "typed.toml",
        "connections = 200\nrate = 10000\nidle = \"1s\"\ntune = true\nplain = false\n",
    );
    let (from_plan, effective) =
        resolved(&["--plan", plan.to_str().expect("utf-8")]).expect("typed plan");
    let (from_flags, _) =
        resolved(&["-n", "200", "--rate", "10000", "--idle", "1s", "--tune"]).expect("flags");
    assert_eq!(from_plan, from_flags);
    assert_eq!(
        key_lines(&effective),
        [
            "connections = 200",
            "rate = 10000",
            "idle = \"1s\"",
            "tune = true"
        ]
    );
}

#[test]
fn the_command_line_replaces_the_plans_keys() {
    let dir = fresh_dir("plan-override");
    let plan = std::fs::canonicalize("tests/plans/small.toml").expect("tests/plans/small.toml");
    let plan = plan.to_str().expect("utf-8");
    let (merged, effective) = resolved(&[
        "--plan",
        plan,
        "--rate",
        "7",
        "--check",
        "held >= 1",
        "--out",
        dir.to_str().expect("utf-8"),
    ])
    .expect("plan and flags");
    let (flags, _) = resolved(&[
        "-n",
        "200",
        "--ports",
        "23850-23851",
        "--idle",
        "1s",
        "--rate",
        "7",
        "--check",
        "held >= 1",
        "--out",
        dir.to_str().expect("utf-8"),
    ])
    .expect("flags");
    assert_eq!(merged, flags);
    assert!(effective.contains("rate = 7\n"), "{effective}");
    // A --check replaces the plan's checks, as any flag replaces its key.
    assert!(
        effective.contains("check = [\"held >= 1\"]\n"),
        "{effective}"
    );
    assert!(
        effective.contains(&format!("# c1m run --plan {plan} --rate 7")),
        "{effective}"
    );
}

#[test]
fn errors_name_the_file_the_line_and_the_key() {
    for (plan, says) in [
        ("unknown-key.toml", ":3: unknown key `bogus`"),
        (
            "underscore.toml",
            ":2: unknown key `push_writers`: did you mean `push-writers`?",
        ),
        (
            "wrong-type.toml",
            ":2: `tune` is a switch: write tune = true (or false), not a string",
        ),
        (
            "not-a-list.toml",
            ":1: `rate` takes one value (a string or a number), not an array",
        ),
        (
            "bad-value.toml",
            ":4: `idle`: invalid value 'soon' for '--idle <DURATION>'",
        ),
        (
            "bad-check.toml",
            ":2: `check`: invalid value 'push.p99 <' for '--check <CHECK>'",
        ),
        (
            "conflict.toml",
            ":2: `target`: the argument '--target <HOST:PORTS>' cannot be used with '--addr <ADDRS>'",
        ),
        ("not-toml.toml", ":2: not TOML"),
    ] {
        let path = format!("tests/plans/bad/{plan}");
        let e = plan_file::resolve_argv(["run", "--plan", &path])
            .map(|_| ())
            .expect_err(plan)
            .to_string();
        assert!(e.starts_with(&path) && e.contains(says), "{plan}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    // A flag that needs another the plan lacks names both.
    let e = plan_file::resolve_argv(["run", "--plan", "tests/plans/bad/needs.toml"])
        .map(|_| ())
        .expect_err("needs")
        .to_string();
    assert!(e.contains("--metrics-addr"), "{e}");
}

#[test]
fn a_bad_plan_exits_1_in_one_line_before_anything_starts() {
    let out = fresh_dir("plan-bad");
    let result = c1m_run(&out, &["--plan", "tests/plans/bad/bad-value.toml"])
        .output()
        .expect("c1m run");
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert_eq!(result.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "c1m: tests/plans/bad/bad-value.toml:4: `idle`: invalid value 'soon' for '--idle <DURATION>': \
         \"soon\" is not a duration: write a number with a unit, e.g. 500ms, 3s, 2m, 1h30m (a plain number \
         means seconds)",
    );
    assert!(
        run_folders(&out).is_empty(),
        "no run folder for a refused plan"
    );
}

#[test]
fn a_plan_another_user_can_write_is_refused() {
    if !root_or_skip("a_plan_another_user_can_write_is_refused") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = fresh_dir("plan-trust");
    let plan = write_plan(&dir, "p.toml", "rate = 100\n");
    let check = |p: &Path| {
        Command::new(env!("CARGO_BIN_EXE_c1m"))
            .args(["run", "--plan-check", "--plan"])
            .arg(p)
            .output()
            .expect("c1m run --plan-check")
    };
    assert!(check(&plan).status.success());
    std::fs::set_permissions(&plan, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let o = check(&plan);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("not trusted: writable by group or others (mode 0666)")
            && e.contains("fix: chmod go-w"),
        "{e}"
    );
    std::fs::set_permissions(&plan, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    std::os::unix::fs::chown(&plan, Some(65534), None).expect("chown");
    let o = check(&plan);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("owned by uid 65534") && e.contains("fix: chown root"),
        "{e}"
    );
    assert_eq!(e.lines().count(), 1, "{e}");
}

#[test]
fn the_seeds_experiment_ships_as_a_plan_that_checks() {
    let o = Command::new(env!("CARGO_BIN_EXE_c1m"))
        .args(["run", "--plan", "../plans/seed-004.toml", "--plan-check"])
        .output()
        .expect("c1m run --plan-check");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for key in [
        "connections = 1000000",
        "rate = 10000",
        "ports = \"8000-8099\"",
        "pushes = 1",
        "servers = \"python,node,go,netty\"",
    ] {
        assert!(stdout.lines().any(|l| l == key), "{key} in\n{stdout}");
    }
}

/// A summary.json's `config`: what the run was asked to do, without what describes the
/// moment (the command line typed, the free memory beside the count asked for).
fn config_of(dir: &Path) -> serde_json::Value {
    let run = lab_util::summary(dir);
    let mut config = serde_json::to_value(run.config).expect("config");
    if let Some(c) = config.as_object_mut() {
        for moment in ["command_line", "connections_reason"] {
            assert!(c.remove(moment).is_some(), "config.{moment}");
        }
    }
    config
}

#[test]
fn a_run_from_a_plan_keeps_it_and_runs_again_from_it_and_its_checks_gate_the_exit() {
    if !root_or_skip(
        "a_run_from_a_plan_keeps_it_and_runs_again_from_it_and_its_checks_gate_the_exit",
    ) {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let out = fresh_dir("plan-run");
    let plan = std::fs::canonicalize("tests/plans/small.toml").expect("small.toml");
    let first = c1m_run(&out, &["--plan", plan.to_str().expect("utf-8")])
        .output()
        .expect("c1m run --plan");
    let said = lab_util::printed(&first);
    assert_eq!(first.status.code(), Some(0), "{said}");
    let dirs = run_folders(&out);
    assert_eq!(dirs.len(), 1, "{said}");
    let kept = dirs[0].join("plan.toml");
    let text = std::fs::read_to_string(&kept).expect("plan.toml in the run folder");
    assert!(text.starts_with("# c1m run's plan"), "{text}");
    assert!(
        text.contains("check = [\"failures == 0\", \"held >= 200\"]"),
        "{text}"
    );

    // The folder's plan runs the same experiment again, as it is.
    let again = Command::new(env!("CARGO_BIN_EXE_c1m"))
        .args(["run", "--plan"])
        .arg(&kept)
        .output()
        .expect("c1m run --plan plan.toml");
    let said = lab_util::printed(&again);
    assert_eq!(again.status.code(), Some(0), "{said}");
    let mut dirs = run_folders(&out);
    dirs.sort();
    assert_eq!(dirs.len(), 2, "{said}");
    assert_eq!(config_of(&dirs[0]), config_of(&dirs[1]));
    let rerun_plan = std::fs::read_to_string(dirs[1].join("plan.toml")).expect("plan.toml");
    assert_eq!(key_lines(&rerun_plan), key_lines(&text));

    // A plan whose check fails: exit 3, the run complete.
    let failing = fresh_dir("plan-fail");
    let result = c1m_run(
        &failing,
        &[
            "--plan",
            std::fs::canonicalize("tests/plans/failing-check.toml")
                .expect("failing-check.toml")
                .to_str()
                .expect("utf-8"),
        ],
    )
    .output()
    .expect("c1m run");
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert_eq!(result.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("check failed: push.p99 < 1us"), "{stderr}");
}

/// The phase list of the example, as a plan's tables: hold, push ×2, churn, hold.
const PHASE_TABLES: &str = "\
connections = 400
ports = \"24300-24301\"
check = [\"failures == 0\", \"kernel = app\"]

[[phase]]
hold = \"1s\"

[[phase]]
push = 2
every = \"1s\"

[[phase]]
churn = \"100/s\"
for = \"2s\"

[[phase]]
hold = \"1s\"
";

/// The same list as `--phase` flags.
const PHASE_FLAGS: &[&str] = &[
    "-n",
    "400",
    "--ports",
    "24300-24301",
    "--check",
    "failures == 0",
    "--check",
    "kernel = app",
    "--phase",
    "hold 1s",
    "--phase",
    "push 2 every 1s",
    "--phase",
    "churn 100/s for 2s",
    "--phase",
    "hold 1s",
];

#[test]
fn a_phase_list_is_tables_in_a_plan_and_flags_on_the_command_line_and_back() {
    let dir = fresh_dir("plan-phases");
    let plan = write_plan(&dir, "phases.toml", PHASE_TABLES);
    let (from_plan, effective) =
        resolved(&["--plan", plan.to_str().expect("utf-8")]).expect("the phase plan");
    let (from_flags, from_flags_plan) = resolved(PHASE_FLAGS).expect("the phase flags");
    assert_eq!(from_plan, from_flags);
    assert_eq!(key_lines(&effective), key_lines(&from_flags_plan));
    // The tables come back as tables, in order, after every key.
    let tables: Vec<&str> = key_lines(&effective)
        .into_iter()
        .skip_while(|l| !l.starts_with("[["))
        .collect();
    assert_eq!(
        tables,
        [
            "[[phase]]",
            "hold = \"1s\"",
            "[[phase]]",
            "push = 2",
            "every = \"1s\"",
            "[[phase]]",
            "churn = \"100/s\"",
            "for = \"2s\"",
            "[[phase]]",
            "hold = \"1s\"",
        ],
        "{effective}"
    );
    // File -> flags -> file: the written plan resolves to the same run.
    let again = write_plan(&dir, "again.toml", &effective);
    let (from_written, _) =
        resolved(&["--plan", again.to_str().expect("utf-8")]).expect("the written plan");
    assert_eq!(from_written, from_plan);
    // --plan-check prints it and starts nothing.
    let o = Command::new(env!("CARGO_BIN_EXE_c1m"))
        .args(["run", "--plan-check", "--plan"])
        .arg(&plan)
        .output()
        .expect("c1m run --plan-check");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("[[phase]]\nchurn = \"100/s\"\nfor = \"2s\"")
    );
}

#[test]
fn phase_errors_name_the_line_and_what_to_write() {
    let dir = fresh_dir("plan-phase-errors");
    for (i, (text, says)) in [
        ("[[phase]]\nsleep = \"5s\"\n", ":2: [[phase]]: unknown key `sleep` in a phase"),
        (
            "[[phase]]\nhold = \"5s\"\npush = 2\n",
            ":3: [[phase]]: two kinds in one phase (`hold` and `push`)",
        ),
        (
            "[[phase]]\nhold = \"1s\"\n\n[[phase]]\nchurn = \"100/s\"\n",
            ":4: [[phase]]: a churn phase needs its length: add `for`, e.g. `churn 5000/s for 300s`",
        ),
        ("[[phase]]\nhold = \"0s\"\n", ":2: [[phase]]: `hold` is 0"),
        (
            "[[phase]]\nchurn = \"99999999\"\nfor = \"1s\"\n",
            ":2: [[phase]]: `churn`: is connections closed and reopened per second",
        ),
        (
            "[[phase]]\npush = 2\nevery = \"soon\"\n",
            ":3: [[phase]]: `every`: \"soon\" is not a duration",
        ),
        (
            "[[phase]]\nheartbeat = \"30s\"\n",
            ":1: [[phase]]: a heartbeat phase needs its length: add `for`",
        ),
        (
            "[[phase]]\nmessage-rate = \"10/s\"\nfor = \"60s\"\n",
            ":2: [[phase]]: unknown key `message-rate` in a phase",
        ),
        (
            "[[phase]]\nhold = [\"1s\"]\n",
            ":2: `hold` in a [[phase]] takes one value",
        ),
        // Beside the flags it replaces: the flat key's line.
        (
            "connections = 100\nidle = \"5s\"\n\n[[phase]]\nhold = \"1s\"\n",
            ":2: `idle` beside a phase list: the phase list replaces",
        ),
        (
            "pushes = 2\n[[phase]]\npush = 1\n",
            ":1: `pushes` beside a phase list",
        ),
        // A phase the rest of the run cannot run: the phase's line.
        (
            "mode = \"echo\"\n\n[[phase]]\nhold = \"1s\"\n\n[[phase]]\npush = 1\n",
            ":6: [[phase]]: push phases broadcast to WebSocket connections: they need --mode ws",
        ),
        (
            "server-cmd = \"python3 server.py\"\n[[phase]]\npush = 1\n",
            ":2: [[phase]]: a push phase triggers its pushes, and --push-trigger none",
        ),
        (
            "connections = 100\n[[phase]]\nchurn = \"500\"\nfor = \"1s\"\n",
            ":2: [[phase]]: churn 500/s over 100 connections would close each more than once a second",
        ),
        (
            "clients = \"external\"\nexpect = 100\n[[phase]]\nchurn = \"5\"\nfor = \"1s\"\n",
            ":3: [[phase]]: churn phases churn the lab's own client",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let path = write_plan(&dir, &format!("bad-{i}.toml"), text);
        let path = path.to_str().expect("utf-8");
        let e = plan_file::resolve_argv(["run", "--plan", path])
            .map(|_| ())
            .expect_err(text)
            .to_string();
        assert!(
            e.starts_with(path) && e.contains(says),
            "{text}: {e}\nwanted {says}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    // The command line's are named by their flags.
    for (flags, says) in [
        (
            &["--phase", "hold 1s", "--idle", "5s"][..],
            "--idle beside --phase: the phase list replaces",
        ),
        (
            &["--phase", "churn 5 for 1s", "--churn", "5"],
            "--churn beside --phase",
        ),
        (
            &["--mode", "echo", "--phase", "push 1"],
            "--phase 'push 1': push phases broadcast to WebSocket connections: they need --mode ws",
        ),
        (&["--phase", "push 3 every"], "`every` lacks its value"),
        (&["--phase", "nap 3s"], "unknown key `nap` in a phase"),
    ] {
        let e = plan_file::resolve_argv(std::iter::once("run").chain(flags.iter().copied()))
            .map(|_| ())
            .expect_err(says)
            .to_string();
        assert!(e.contains(says), "{flags:?}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    // A refused phase exits 1 on clap's line, as any refused flag, before any run folder.
    let out = fresh_dir("plan-phase-refused");
    let o = c1m_run(&out, &["--phase", "hold 0s"])
        .output()
        .expect("c1m run");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("error: invalid value 'hold 0s' for '--phase <PHASE>': `hold` is 0"),
        "{stderr}"
    );
    assert!(run_folders(&out).is_empty());
}

#[test]
fn a_phase_list_runs_in_order_with_exact_counts_on_both_engines() {
    if !root_or_skip("a_phase_list_runs_in_order_with_exact_counts_on_both_engines") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let dir = fresh_dir("plan-phase-run");
    let plan = write_plan(&dir, "phases.toml", PHASE_TABLES);
    for engine in ["epoll", "tokio"] {
        let out = fresh_dir(&format!("plan-phase-run-{engine}"));
        let result = c1m_run(
            &out,
            &["--plan", plan.to_str().expect("utf-8"), "--engine", engine],
        )
        .output()
        .expect("c1m run --plan");
        let said = lab_util::printed(&result);
        // Exit 0: the checks held, kernel = app among them.
        assert_eq!(result.status.code(), Some(0), "{engine}: {said}");
        let folder = lab_util::run_folder(&out);
        let run = lab_util::summary(&folder);
        use c1m::model::phase::PhaseKind::{Churn, Hold, Push, Setup, Teardown};
        let phases = lab_util::phase_kinds(&run);
        assert_eq!(
            phases,
            [
                ("setup", Some(Setup)),
                ("hold", Some(Hold)),
                ("push", Some(Push)),
                ("churn", Some(Churn)),
                ("hold-2", Some(Hold)),
                ("teardown", Some(Teardown)),
            ],
            "{engine}"
        );
        assert!(run.warnings.is_empty(), "{engine}: {:?}", run.warnings);
        assert_eq!(
            run.config.phases,
            [
                "hold 1s",
                "push 2 every 1s",
                "churn 100/s for 2s",
                "hold 1s"
            ]
        );
        assert_eq!(run.config.push_count, 2);
        // Each push reached every connection.
        let client = run.client.as_ref().expect("the client's snapshot");
        let frames: Vec<(u64, u64)> = client.pushes.iter().map(|p| (p.push_id, p.count)).collect();
        assert_eq!(frames, [(1, 400), (2, 400)], "{engine}");
        // The churn phase churned, each churn closed and reopened, and only it churned.
        let churn = client.counters.churn;
        let churned: Vec<u64> = run.phases.iter().map(|p| p.churned).collect();
        assert!(churn.closed > 0, "{engine}: {churn:?}");
        assert_eq!(churned, [0, 0, 0, churn.closed, 0, 0], "{engine}");
        assert_eq!(churn.reopened, churn.closed, "{engine}: {churn:?}");
        assert_eq!((churn.failed, churn.reopening, churn.closing), (0, 0, 0));
        // The folder's plan is the list again.
        let kept = std::fs::read_to_string(folder.join("plan.toml")).expect("plan.toml");
        assert_eq!(kept.matches("[[phase]]").count(), 4, "{kept}");
    }
}
