//! `c1m run --plan FILE`: the experiment as a file. Not `plan.rs`, which is the run's
//! resolved plan (what each child is handed); this is the file a user writes and the
//! `plan.toml` a run folder keeps.
//!
//! A plan is flat TOML, one key per flag of `c1m run`, named as the flag's long name
//! (`rate = 10000`, `ports = "8000-8099"`, `tls = true`, `check = ["failures == 0"]`).
//! The keys are read from clap's own definition of [`RunArgs`] and the file is turned
//! into the argv those flags would be, then parsed by the same definition: a flag added
//! to `c1m run` has its key with no line here, and a plan is checked exactly as the
//! flags are. Flat keys, because the run's settings are flags; the one list of tables is
//! the phase list: each `[[phase]]` table is one `--phase` flag, its keys the flag's words
//! two by two (`push = 3`, `every = "10s"` is `--phase 'push 3 every 10s'`,
//! `phase_list.rs`), so plan ↔ flags stays one to one and the round trip exact; the
//! effective plan writes the list back as tables, after the keys. A phase's errors name
//! its table's line (or its key's), and a flat key a list replaces (`idle`, `pushes`,
//! `churn`) names its own.
//!
//! Root acts on a plan (it starts the command a plan names), so as root the file must be
//! root's and writable by nobody else, as state files are (`state_dir.rs`).

use std::{
    ffi::{OsStr, OsString},
    fmt::Write as _,
    os::unix::fs::MetadataExt,
    path::Path,
};

use clap::{
    Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches,
    error::{ContextKind, ContextValue, ErrorKind},
    parser::ValueSource,
};
use thiserror::Error;
use toml_edit::{Item, Value};

use super::flags::RunArgs;
use crate::infile::{Capped, InFileError};

/// The name of the plan a run folder keeps.
pub const PLAN_FILE: &str = "plan.toml";

/// A plan is a few dozen lines; a cap keeps a wrong path from reading a disk image.
const MAX_PLAN_BYTES: u64 = 1 << 20;

/// Why a plan is refused: one line naming the file, the line and the key when there is
/// one, and what to write instead.
#[derive(Debug, Error)]
pub enum PlanError {
    /// A key or the TOML at one line.
    #[error("{file}:{line}: {msg}")]
    At {
        /// The plan file as given.
        file: String,
        /// 1-based.
        line: usize,
        /// What is wrong and what to write instead.
        msg: String,
    },
    /// The file as a whole: it cannot be read or trusted, or its keys disagree.
    #[error("{file}: {msg}")]
    File {
        /// The plan file as given.
        file: String,
        /// What is wrong and the fix.
        msg: String,
    },
    /// The command line beside the plan (clap's own message).
    #[error("{0}")]
    Flags(String),
    /// Not a regular file, too big, not there.
    #[error(transparent)]
    Read(#[from] InFileError),
}

/// `c1m run`'s flags as clap defines them: the plan's keys.
pub fn command() -> Command {
    RunArgs::augment_args(Command::new("run"))
}

/// Whether a flag is a plan key: every flag with a long name, except the plan's own
/// (a plan does not name another) and hidden ones (`--into` is how `--servers` hands
/// a run its folder, not an experiment's).
pub fn is_key(a: &Arg) -> bool {
    a.get_long().is_some()
        && !a.is_hide_set()
        && !matches!(a.get_id().as_str(), "plan" | "plan_check")
}

/// One key of a plan: its flag, the line it is on and the argv it stands for, with the
/// line each of its values is on (a `[[phase]]` table's own).
#[derive(Debug)]
struct Key {
    id: String,
    line: usize,
    argv: Vec<OsString>,
    lines: Vec<usize>,
}

/// The flag of the phase list: `--phase`, a plan's `[[phase]]` tables.
const PHASE_ID: &str = "phases";

/// A plan's `[[phase]]` tables as `--phase` argv, each with its line, each phase checked
/// alone (its kind and parameters); the line of a refused key, or of its table.
fn phase_tables(
    text: &str,
    tables: &toml_edit::ArrayOfTables,
    at: &dyn Fn(usize, String) -> PlanError,
) -> Result<Vec<(OsString, usize)>, PlanError> {
    let line = |span: Option<std::ops::Range<usize>>, or: usize| {
        span.map_or(or, |s| line_of(text, s.start))
    };
    let mut phases = Vec::new();
    for t in tables.iter() {
        let table_line = line(t.span(), 1);
        let mut pairs: Vec<(String, String, usize)> = Vec::new();
        for (k, item) in t.iter() {
            let key_line = line(t.key(k).and_then(|k| k.span()), table_line);
            let Some(v) = item.as_value().and_then(scalar) else {
                return Err(at(
                    key_line,
                    format!(
                        "`{k}` in a [[phase]] takes one value (a string or a number), e.g. hold = \"60s\""
                    ),
                ));
            };
            if v.split_whitespace().count() != 1 {
                return Err(at(
                    key_line,
                    format!("`{k}` in a [[phase]] is one word, not {v:?}"),
                ));
            }
            pairs.push((k.to_owned(), v, key_line));
        }
        let words: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(k, v, _)| (k.as_str(), v.as_str()))
            .collect();
        super::phase_list::from_pairs(&words).map_err(|r| {
            let line = r
                .pair
                .and_then(|i| pairs.get(i))
                .map_or(table_line, |p| p.2);
            at(line, format!("[[phase]]: {}", r.msg))
        })?;
        let flag_text = words
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(" ");
        phases.push((OsString::from(format!("--phase={flag_text}")), table_line));
    }
    Ok(phases)
}

/// The 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Clap's message on one line, without its `error: ` prefix, usage and tip: the lines
/// before the first blank one (a missing argument is named on the second).
fn clap_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let said: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let said = said.join(" ");
    said.strip_prefix("error: ").unwrap_or(&said).to_owned()
}

/// "a" or "an" before a TOML type's name.
fn a_or_an(word: &str) -> String {
    match word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        true => format!("an {word}"),
        false => format!("a {word}"),
    }
}

/// A key named close to `name`, for the error.
fn near(cmd: &Command, name: &str) -> Option<String> {
    let dashed = name.replace('_', "-");
    cmd.get_arguments()
        .filter(|a| is_key(a))
        .find(|a| {
            a.get_long() == Some(&dashed)
                || a.get_short().is_some_and(|s| name.chars().eq([s]))
                || a.get_all_aliases().is_some_and(|al| al.contains(&name))
        })
        .and_then(|a| a.get_long().map(str::to_owned))
}

/// A TOML value as the flag's text: strings as they are, numbers as written.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.value().clone()),
        Value::Integer(i) => Some(i.value().to_string()),
        Value::Float(f) => Some(f.value().to_string()),
        _ => None,
    }
}

/// What one key's value says as argv, or why its type does not fit the flag.
fn key_argv(arg: &Arg, name: &str, item: &Item) -> Result<Vec<OsString>, String> {
    let flag = format!("--{name}");
    let value = item.as_value();
    let found = value.map_or_else(|| "a table".to_owned(), |v| a_or_an(v.type_name()));
    match arg.get_action() {
        ArgAction::SetTrue | ArgAction::SetFalse => match value.and_then(Value::as_bool) {
            Some(true) => Ok(vec![flag.into()]),
            Some(false) => Ok(Vec::new()),
            None => Err(format!(
                "`{name}` is a switch: write {name} = true (or false), not {found}"
            )),
        },
        action => {
            let many = matches!(action, ArgAction::Append);
            let values: Option<Vec<String>> = match value {
                Some(Value::Array(a)) if many => a.iter().map(scalar).collect(),
                Some(v) => scalar(v).map(|s| vec![s]),
                None => None,
            };
            let example = arg
                .get_value_names()
                .and_then(|n| n.first())
                .map_or("VALUE".to_owned(), ToString::to_string);
            let Some(values) = values else {
                return Err(match many {
                    true => format!(
                        "`{name}` takes a list of strings, not {found}: write {name} = [\"{example}\", …]"
                    ),
                    false => format!(
                        "`{name}` takes one value (a string or a number), not {found}: write {name} = \"{example}\""
                    ),
                });
            };
            Ok(values
                .iter()
                .map(|v| OsString::from(format!("{flag}={v}")))
                .collect())
        }
    }
}

/// The keys of a plan's text, each checked alone: a known key, a value of the flag's
/// type that the flag's own parser takes.
fn keys(text: &str, file: &str, cmd: &Command) -> Result<Vec<Key>, PlanError> {
    let at = |line: usize, msg: String| PlanError::At {
        file: file.to_owned(),
        line,
        msg,
    };
    let doc = toml_edit::Document::parse(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(text, s.start));
        let msg = e.message().lines().next().unwrap_or("not TOML").to_owned();
        at(line, format!("not TOML: {msg}"))
    })?;
    let table = doc.as_table();
    let mut keys = Vec::new();
    for (name, item) in table.iter() {
        let line = table
            .key(name)
            .and_then(|k| k.span())
            .or_else(|| item.span())
            .map_or(1, |s| line_of(text, s.start));
        let Some(arg) = cmd
            .get_arguments()
            .find(|a| is_key(a) && a.get_long() == Some(name))
        else {
            let hint = match near(cmd, name) {
                Some(k) => format!(": did you mean `{k}`?"),
                None => String::new(),
            };
            return Err(at(
                line,
                format!(
                    "unknown key `{name}`{hint} (a plan's keys are `c1m run`'s flags by their long names, see c1m run --help)"
                ),
            ));
        };
        if let Some(tables) = item.as_array_of_tables()
            && arg.get_id() == PHASE_ID
        {
            let (argv, lines): (Vec<OsString>, Vec<usize>) =
                phase_tables(text, tables, &at)?.into_iter().unzip();
            keys.push(Key {
                id: PHASE_ID.to_owned(),
                line: lines.first().copied().unwrap_or(line),
                argv,
                lines,
            });
            continue;
        }
        let argv = key_argv(arg, name, item).map_err(|m| at(line, m))?;
        // The key alone through the flags' parser, so a refused value names its line;
        // what flags say together (one needs or excludes another) is checked when the
        // whole plan is parsed.
        if let Err(e) = cmd.clone().try_get_matches_from(
            std::iter::once(OsString::from("run")).chain(argv.iter().cloned()),
        ) && !matches!(
            e.kind(),
            ErrorKind::MissingRequiredArgument | ErrorKind::ArgumentConflict
        ) {
            return Err(at(line, format!("`{name}`: {}", clap_line(&e))));
        }
        keys.push(Key {
            id: arg.get_id().to_string(),
            line,
            lines: vec![line; argv.len()],
            argv,
        });
    }
    Ok(keys)
}

/// Why a plan file is not trusted by this user, if it is not: another user could change
/// the experiment root runs. Its owner must be this user or root, and group and others
/// must not write it.
fn untrusted(uid: u32, mode: u32, euid: u32, path: &str) -> Option<String> {
    if uid != euid && uid != 0 {
        let who = if euid == 0 {
            "root".to_owned()
        } else {
            euid.to_string()
        };
        return Some(format!(
            "owned by uid {uid}, who could change the experiment; fix: chown {who} {path} (or copy it)"
        ));
    }
    if mode & 0o022 != 0 {
        return Some(format!(
            "writable by group or others (mode {:04o}), who could change the experiment; fix: chmod go-w {path}",
            mode & 0o7777
        ));
    }
    None
}

/// The plan's text: a regular file (no symlink, FIFO or device) of at most
/// [`MAX_PLAN_BYTES`], trusted by [`untrusted`], UTF-8.
fn read(path: &Path) -> Result<String, PlanError> {
    let file = path.display().to_string();
    let refused = |msg: String| PlanError::File {
        file: file.clone(),
        msg,
    };
    let opened = Capped::open(path, MAX_PLAN_BYTES)?;
    let meta = opened
        .metadata()
        .map_err(|e| refused(format!("cannot read: {e}")))?;
    let euid = rustix::process::geteuid().as_raw();
    if let Some(why) = untrusted(meta.uid(), meta.mode(), euid, &file) {
        return Err(refused(format!("not trusted: {why}")));
    }
    String::from_utf8(opened.read_all()?).map_err(|_| refused("not UTF-8 text".to_owned()))
}

/// The flags the command line gave, as argv (the plan's file itself left out).
fn command_line_argv(cmd: &Command, given: &ArgMatches) -> Vec<OsString> {
    let mut argv = Vec::new();
    for a in cmd.get_arguments() {
        let id = a.get_id().as_str();
        if id == "plan" || given.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let Some(long) = a.get_long() else { continue };
        match a.get_action() {
            ArgAction::SetTrue | ArgAction::SetFalse => argv.push(format!("--{long}").into()),
            _ => {
                for raw in given.get_raw(id).into_iter().flatten() {
                    let mut v = OsString::from(format!("--{long}="));
                    v.push(raw);
                    argv.push(v);
                }
            }
        }
    }
    argv
}

/// A clap error of the whole plan, with the line of the key it names when the plan has
/// that key.
fn whole_plan_error(e: &clap::Error, keys: &[Key], file: Option<&str>, cmd: &Command) -> PlanError {
    let msg = clap_line(e);
    let Some(file) = file else {
        return PlanError::Flags(msg);
    };
    let named = [ContextKind::InvalidArg, ContextKind::PriorArg]
        .into_iter()
        .filter_map(|k| e.get(k))
        .flat_map(|v| match v {
            ContextValue::String(s) => vec![s.clone()],
            ContextValue::Strings(s) => s.clone(),
            _ => Vec::new(),
        })
        .filter_map(|s| {
            let long = s.strip_prefix("--")?.split([' ', '=']).next()?.to_owned();
            let id = cmd
                .get_arguments()
                .find(|a| a.get_long() == Some(&long))?
                .get_id()
                .to_string();
            keys.iter().find(|k| k.id == id).map(|k| (k.line, long))
        })
        .min();
    match named {
        Some((line, key)) => PlanError::At {
            file: file.to_owned(),
            line,
            msg: format!("`{key}`: {msg} (keys are the flags' long names)"),
        },
        None => PlanError::File {
            file: file.to_owned(),
            msg: format!("{msg} (keys are the flags' long names)"),
        },
    }
}

/// `c1m run`'s flags from the command line `given` (parsed by [`command`]) and the plan
/// it names, if any: the plan's keys, then the command line's flags in place of the
/// plan's keys they name, parsed as one command line. The result carries the effective
/// plan, headed by `command_line`.
pub fn resolve(given: &ArgMatches, command_line: &str) -> Result<RunArgs, PlanError> {
    let cmd = command();
    let path = given.get_one::<std::path::PathBuf>("plan");
    let file = path.map(|p| p.display().to_string());
    let from_plan = match (path, &file) {
        (Some(p), Some(f)) => keys(&read(p)?, f, &cmd)?,
        _ => Vec::new(),
    };
    let mut argv = vec![OsString::from("run")];
    for k in &from_plan {
        if given.value_source(&k.id) != Some(ValueSource::CommandLine) {
            argv.extend(k.argv.iter().cloned());
        }
    }
    argv.extend(command_line_argv(&cmd, given));
    let matches = cmd
        .clone()
        .try_get_matches_from(&argv)
        .map_err(|e| whole_plan_error(&e, &from_plan, file.as_deref(), &cmd))?;
    let mut args = RunArgs::from_arg_matches(&matches)
        .map_err(|e| whole_plan_error(&e, &from_plan, file.as_deref(), &cmd))?;
    check_phases(&args, &matches, given, &from_plan, file.as_deref())?;
    args.plan = path.cloned();
    args.effective_plan = Some(render(&cmd, &matches, command_line));
    Ok(args)
}

/// The phase list against the rest of the run, before anything starts: not beside the
/// flags it replaces, and each phase one the run can run. A plan's phase or key is named
/// by its line, the command line's by its flag.
fn check_phases(
    args: &RunArgs,
    matches: &ArgMatches,
    given: &ArgMatches,
    from_plan: &[Key],
    file: Option<&str>,
) -> Result<(), PlanError> {
    use super::phase_list::{self, REPLACED, Setting};
    if args.phases.is_empty() {
        return Ok(());
    }
    // A flag's value from the plan: its line (None: from the command line).
    let plan_line = |id: &str, index: usize| {
        let file = file?;
        if given.value_source(id) == Some(ValueSource::CommandLine) {
            return None;
        }
        let line = from_plan.iter().find(|k| k.id == id)?.lines.get(index)?;
        Some((file.to_owned(), *line))
    };
    for (id, flag) in REPLACED {
        if matches.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let fix = "the phase list replaces the fixed sequence's idle, pushes and churn: say them as phases (hold 10s, push 1, churn 5000/s for 10s)";
        return Err(match plan_line(id, 0) {
            Some((file, line)) => PlanError::At {
                file,
                line,
                msg: format!(
                    "`{}` beside a phase list: {fix}, and drop `{}`",
                    &flag[2..],
                    &flag[2..]
                ),
            },
            None => PlanError::Flags(format!("{flag} beside --phase: {fix}, and drop {flag}")),
        });
    }
    let setting = Setting {
        mode: args.mode,
        trigger: super::flags::ServerSpec::of(args).ok().map(|(_, t)| t),
        local_clients: args.clients == super::flags::Clients::Local && args.hosts.is_none(),
        connections: match args.connections {
            Some(super::flags::TargetArg::Count(c)) => Some(c.get()),
            _ => None,
        },
        heartbeat: args.workload.heartbeat.is_some(),
        messages: args.workload.message_rate.is_some()
            || args.workload.total_message_rate.is_some(),
    };
    phase_list::check(&args.phases, &setting).map_err(|m| match plan_line(PHASE_ID, m.index) {
        Some((file, line)) => PlanError::At {
            file,
            line,
            msg: format!("[[phase]]: {}", m.msg),
        },
        None => PlanError::Flags(format!(
            "--phase {}: {}",
            shell_words(std::iter::once(OsStr::new(
                &args
                    .phases
                    .get(m.index)
                    .map(ToString::to_string)
                    .unwrap_or_default()
            ))),
            m.msg
        )),
    })
}

/// [`resolve`] for a whole command line (`run` first): what `c1m run ARGS` would run.
pub fn resolve_argv<I, T>(argv: I) -> Result<RunArgs, PlanError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    let given = command()
        .try_get_matches_from(&argv)
        .map_err(|e| PlanError::Flags(clap_line(&e)))?;
    resolve(
        &given,
        &shell_words(
            std::iter::once(OsStr::new("c1m")).chain(argv.iter().map(OsString::as_os_str)),
        ),
    )
}

/// A command line as a shell would take it back: words quoted when they need it.
pub fn shell_words<'a>(words: impl Iterator<Item = &'a OsStr>) -> String {
    words
        .map(|w| {
            let w = w.to_string_lossy();
            shlex::try_quote(&w).map_or_else(|_| format!("{w:?}"), |q| q.into_owned())
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A TOML basic string.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One value as a plan writes it: a whole number bare, anything else a string (as the
/// flag's text, so `rate = "10,000"` stays what was typed).
fn toml_value(raw: &OsStr) -> String {
    let s = raw.to_string_lossy();
    match s.parse::<i64>() {
        Ok(i) if i.to_string() == s => s.into_owned(),
        _ => quoted(&s),
    }
}

/// The effective plan: every key the plan or the command line states, and any the
/// environment sets to other than its default, grouped by the headings of `--help`.
fn render(cmd: &Command, m: &ArgMatches, command_line: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# c1m run's plan, the experiment as a file: `c1m run --plan FILE` runs it again\n\
         # (flags beside --plan replace its keys). Written by c1m {} at {} for:\n# {}",
        env!("CARGO_PKG_VERSION"),
        crate::fmt::utc(crate::util::unix_ms_now()),
        command_line.replace(['\n', '\r'], " ")
    );
    // Lines under their `--help` heading, the headings in the order they first appear.
    let mut groups: Vec<(Option<&str>, Vec<String>)> = Vec::new();
    for a in cmd.get_arguments().filter(|a| is_key(a)) {
        let id = a.get_id().as_str();
        // The phase list is tables, after every key (TOML's order).
        if id == PHASE_ID {
            continue;
        }
        let raw: Vec<&OsStr> = m.get_raw(id).into_iter().flatten().collect();
        let defaults: Vec<&OsStr> = a
            .get_default_values()
            .iter()
            .map(|v| v.as_os_str())
            .collect();
        // A key the plan or the command line states stays, even at its default (the
        // experiment says it; a later default may differ); one from the environment
        // stays when it is not the default.
        match m.value_source(id) {
            Some(ValueSource::CommandLine) => {}
            Some(ValueSource::EnvVariable) if raw != defaults => {}
            _ => continue,
        }
        let Some(long) = a.get_long() else { continue };
        let value = match a.get_action() {
            ArgAction::SetTrue | ArgAction::SetFalse => raw
                .first()
                .map_or("true".to_owned(), |r| r.to_string_lossy().into_owned()),
            ArgAction::Append => format!(
                "[{}]",
                raw.iter()
                    .map(|r| quoted(&r.to_string_lossy()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => raw.first().map_or_else(|| quoted(""), |r| toml_value(r)),
        };
        let h = a.get_help_heading();
        let line = format!("{long} = {value}");
        match groups.iter_mut().find(|(g, _)| *g == h) {
            Some((_, lines)) => lines.push(line),
            None => groups.push((h, vec![line])),
        }
    }
    for (heading, lines) in groups {
        let _ = writeln!(out, "\n# {}", heading.unwrap_or("Other"));
        for l in lines {
            let _ = writeln!(out, "{l}");
        }
    }
    let phases: Vec<&OsStr> = m.get_raw(PHASE_ID).into_iter().flatten().collect();
    if !phases.is_empty() {
        let _ = writeln!(
            out,
            "\n# The phases between the ramp and the teardown, in order"
        );
    }
    for p in phases {
        let _ = writeln!(out, "\n[[phase]]");
        // As typed: the words two by two, each pair a key (a parsed phase has an even
        // count of words, each one word).
        let text = p.to_string_lossy();
        let words: Vec<&str> = text.split_whitespace().collect();
        for pair in words.chunks(2) {
            if let [k, v] = pair {
                let _ = writeln!(out, "{k} = {}", toml_value(OsStr::new(v)));
            }
        }
    }
    out
}

/// What `--plan-check` checks beyond the flags' own parsers, without starting anything:
/// for one run, what its flags say together (whose server, which trigger). A `--servers`
/// sequence and `--hosts` check theirs as they start, before any folder.
pub(crate) fn check(args: &RunArgs) -> anyhow::Result<()> {
    if args.servers.is_none() && args.hosts.is_none() {
        super::flags::flags_agree(args)?;
        super::flags::ServerSpec::of(args)?;
    }
    Ok(())
}

/// Writes the run's effective plan into its folder, as the other run files are written
/// (all or nothing).
pub(crate) fn write_into(dir: &Path, args: &RunArgs) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let Some(text) = &args.effective_plan else {
        return Ok(());
    };
    let path = dir.join(PLAN_FILE);
    crate::report::atomic::write_atomic(&path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn a_plan_is_trusted_only_from_its_reader_or_root_and_nobody_else_writing() {
        assert_eq!(untrusted(0, 0o100644, 0, "p"), None);
        assert_eq!(untrusted(1000, 0o100600, 1000, "p"), None);
        assert_eq!(untrusted(0, 0o100644, 1000, "p"), None);
        let e = untrusted(1000, 0o100644, 0, "p.toml").unwrap();
        assert!(
            e.contains("uid 1000") && e.contains("chown root p.toml"),
            "{e}"
        );
        let e = untrusted(0, 0o100666, 0, "p.toml").unwrap();
        assert!(e.contains("0666") && e.contains("chmod go-w p.toml"), "{e}");
        assert!(untrusted(0, 0o100664, 0, "p").is_some());
    }

    #[test]
    fn values_are_written_back_as_typed() {
        assert_eq!(toml_value(OsStr::new("10000")), "10000");
        assert_eq!(toml_value(OsStr::new("10,000")), "\"10,000\"");
        assert_eq!(toml_value(OsStr::new("007")), "\"007\"");
        assert_eq!(quoted("a \"b\"\\\n"), "\"a \\\"b\\\"\\\\\\n\"");
        assert_eq!(line_of("a\nb\nc", 2), 2);
        // The header's command line splits back into the words it was made of.
        let words = [
            "c1m",
            "run",
            "--check",
            "push.p99 < 50ms",
            "--server-name",
            "it's",
        ];
        let line = shell_words(words.iter().map(OsStr::new));
        assert_eq!(shlex::split(&line).unwrap(), words, "{line}");
    }
}
