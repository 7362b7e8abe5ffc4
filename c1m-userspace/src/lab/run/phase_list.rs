//! The phase list of `c1m run`: `--phase 'hold 60s'` (repeatable) or a plan's `[[phase]]`
//! tables, run in order between the ramp (always first) and the teardown (always last).
//! Without one, the run's fixed sequence (idle, push ×`--pushes`) is the list.
//!
//! One text both ways: a phase is its kind and value, then parameters as key and value
//! (`push 3 every 10s`), and its `[[phase]]` table holds the same pairs as keys
//! (`push = 3`, `every = "10s"`), so a plan and the flags say the same list and the plan
//! a run folder keeps runs it again. Here the pure part: the parse, the phases' names,
//! and their checks against the run's other flags; `drive.rs` runs them.

use std::time::Duration;

use thiserror::Error;

use crate::{
    model::phase::PhaseKind,
    workload::{
        churn::{self, ChurnOrder, ChurnRate},
        config::Mode,
        messages::{self, MessageConfig, MessageRate},
        push_trigger::PushTrigger,
    },
};

/// One phase of a list, with its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// The connections held for `length`.
    Hold {
        /// How long.
        length: Duration,
    },
    /// `count` broadcasts, each awaited at its witness; with `every`, each begins that
    /// long after the one before began (the first at once).
    Push {
        /// Broadcasts.
        count: u32,
        /// From one broadcast's start to the next's (None: back to back).
        every: Option<Duration>,
    },
    /// `rate` connections a second closed and reopened for `length`, in `order`.
    Churn {
        /// Connections a second, over the client.
        rate: ChurnRate,
        /// How long.
        length: Duration,
        /// Which held connection goes next.
        order: ChurnOrder,
    },
    /// A WebSocket ping per held connection every `interval`, spread over it, for
    /// `length`; one unanswered `timeout` long (default: the interval) closes it.
    Heartbeat {
        /// From one ping of a connection to its next.
        interval: Duration,
        /// How long.
        length: Duration,
        /// An unanswered ping's allowance (None: the interval), as `--heartbeat-timeout`.
        timeout: Option<Duration>,
    },
    /// `rate` messages a second per held connection of `size` bytes, spread evenly,
    /// each echoed and timed, for `length`.
    Messages {
        /// Messages a second per connection.
        rate: MessageRate,
        /// Bytes of each message's payload (at least its 16-byte stamp).
        size: u32,
        /// How long.
        length: Duration,
    },
}

/// A message phase's size unsaid: `--message-size`'s default.
pub const DEFAULT_MESSAGE_SIZE: u32 = 64;

/// The most broadcasts one push phase asks for: each is awaited, so more is hours.
const MAX_PUSHES: u32 = 10_000;

/// What a phase's words are: its kind, or a parameter of some kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Word {
    Kind(KindWord),
    Every,
    For,
    Order,
    Timeout,
    Size,
}

/// The kinds a phase may name, those the lab cannot run yet included (to refuse them
/// by name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KindWord {
    Hold,
    Push,
    Churn,
    Heartbeat,
    Messages,
}

const KINDS: [(KindWord, &str); 5] = [
    (KindWord::Hold, "hold"),
    (KindWord::Push, "push"),
    (KindWord::Churn, "churn"),
    (KindWord::Heartbeat, "heartbeat"),
    (KindWord::Messages, "messages"),
];

const PARAMS: [(Word, &str); 5] = [
    (Word::Every, "every"),
    (Word::For, "for"),
    (Word::Order, "order"),
    (Word::Timeout, "timeout"),
    (Word::Size, "size"),
];

impl KindWord {
    fn name(self) -> &'static str {
        KINDS
            .iter()
            .find(|(k, _)| *k == self)
            .map_or("?", |(_, n)| n)
    }

    /// The parameters this kind takes.
    fn params(self) -> &'static [Word] {
        match self {
            KindWord::Hold => &[],
            KindWord::Push => &[Word::Every],
            KindWord::Churn => &[Word::For, Word::Order],
            KindWord::Heartbeat => &[Word::For, Word::Timeout],
            KindWord::Messages => &[Word::Size, Word::For],
        }
    }

    /// A whole phase of this kind, as `--phase` takes it.
    fn example(self) -> &'static str {
        match self {
            KindWord::Hold => "hold 60s",
            KindWord::Push => "push 3 every 10s",
            KindWord::Churn => "churn 5000/s for 300s",
            KindWord::Heartbeat => "heartbeat 30s for 5m",
            KindWord::Messages => "messages 10/s size 64 for 60s",
        }
    }
}

fn word(key: &str) -> Option<Word> {
    KINDS
        .iter()
        .find(|(_, n)| *n == key)
        .map(|(k, _)| Word::Kind(*k))
        .or_else(|| PARAMS.iter().find(|(_, n)| *n == key).map(|(w, _)| *w))
}

fn param_name(w: Word) -> &'static str {
    PARAMS.iter().find(|(p, _)| *p == w).map_or("?", |(_, n)| n)
}

fn kind_names() -> String {
    KINDS.map(|(_, n)| n).join(", ")
}

/// Why a phase is refused: one line with the fix, and the pair at fault when one is
/// (a plan names that key's line).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{msg}")]
pub struct Refused {
    /// The index of the key/value pair at fault (None: the phase as a whole).
    pub pair: Option<usize>,
    /// What is wrong and what to write instead.
    pub msg: String,
}

fn refused(pair: Option<usize>, msg: String) -> Refused {
    Refused { pair, msg }
}

/// A length: more than zero (a phase of no time is a typo), at most the duration flags'
/// bound.
fn length(key: &str, value: &str) -> Result<Duration, String> {
    let d = crate::duration::parse(value).map_err(|e| format!("`{key}`: {e}"))?;
    if d.is_zero() {
        return Err(format!(
            "`{key}` is 0: a phase lasts more than no time (e.g. {key} 10s), or leave the phase out"
        ));
    }
    Ok(d)
}

/// A phase from its key/value pairs, in any order (a `[[phase]]` table's keys, or
/// `--phase`'s words two by two).
pub fn from_pairs(pairs: &[(&str, &str)]) -> Result<Phase, Refused> {
    let mut kind: Option<(usize, KindWord)> = None;
    let mut params: Vec<(usize, Word, &str)> = Vec::new();
    for (i, (key, _)) in pairs.iter().enumerate() {
        match word(key) {
            None => {
                return Err(refused(
                    Some(i),
                    format!(
                        "unknown key `{key}` in a phase: a phase is one kind ({}) with its parameters (every, for, order, timeout, size), e.g. `churn 5000/s for 300s`",
                        kind_names()
                    ),
                ));
            }
            Some(Word::Kind(k)) => match kind {
                Some((_, first)) => {
                    return Err(refused(
                        Some(i),
                        format!(
                            "two kinds in one phase (`{}` and `{}`): each phase is one kind, so write two phases",
                            first.name(),
                            k.name()
                        ),
                    ));
                }
                None => kind = Some((i, k)),
            },
            Some(w) => {
                if params.iter().any(|(_, p, _)| *p == w) {
                    return Err(refused(Some(i), format!("`{key}` twice in one phase")));
                }
                params.push((i, w, pairs[i].1));
            }
        }
    }
    let Some((at, kind)) = kind else {
        return Err(refused(
            None,
            format!(
                "a phase without its kind: name one of {} with its value, e.g. `hold 60s`",
                kind_names()
            ),
        ));
    };
    if let Some((i, w, _)) = params.iter().find(|(_, w, _)| !kind.params().contains(w)) {
        let takes = match kind.params() {
            [] => "no parameters".to_owned(),
            ps => ps
                .iter()
                .map(|p| param_name(*p))
                .collect::<Vec<_>>()
                .join(", "),
        };
        return Err(refused(
            Some(*i),
            format!(
                "`{}` is not a parameter of a {} phase, which takes {takes} (e.g. `{}`)",
                param_name(*w),
                kind.name(),
                kind.example()
            ),
        ));
    }
    let param = |w: Word| params.iter().find(|(_, p, _)| *p == w);
    let value = pairs[at].1;
    let name = kind.name();
    let length_for = || match param(Word::For) {
        Some((i, _, v)) => length("for", v).map_err(|m| refused(Some(*i), m)),
        None => Err(refused(
            None,
            format!(
                "a {name} phase needs its length: add `for`, e.g. `{}`",
                kind.example()
            ),
        )),
    };
    match kind {
        KindWord::Hold => Ok(Phase::Hold {
            length: length(name, value).map_err(|m| refused(Some(at), m))?,
        }),
        KindWord::Push => {
            let count = crate::args::parse_number::<u32>(value)
                .ok()
                .filter(|n| (1..=MAX_PUSHES).contains(n))
                .ok_or_else(|| {
                    refused(
                        Some(at),
                        format!(
                            "`push` is the broadcasts of the phase, 1 to {MAX_PUSHES}, not {value:?} (e.g. `push 3 every 10s`)"
                        ),
                    )
                })?;
            let every = match param(Word::Every) {
                Some((i, _, v)) => Some(length("every", v).map_err(|m| refused(Some(*i), m))?),
                None => None,
            };
            Ok(Phase::Push { count, every })
        }
        KindWord::Churn => {
            let rate = churn::parse(value).map_err(|m| {
                refused(
                    Some(at),
                    format!("`churn`: {}", m.trim_start_matches("--churn ")),
                )
            })?;
            let length = length_for()?;
            let order = match param(Word::Order) {
                Some((i, _, v)) => {
                    <ChurnOrder as clap::ValueEnum>::from_str(v, true).map_err(|_| {
                        refused(Some(*i), format!("`order` is oldest or random, not {v:?}"))
                    })?
                }
                None => ChurnOrder::default(),
            };
            Ok(Phase::Churn {
                rate,
                length,
                order,
            })
        }
        KindWord::Heartbeat => {
            let interval = length(name, value).map_err(|m| {
                refused(
                    Some(at),
                    format!("{m} (`heartbeat` is the interval between a connection's pings)"),
                )
            })?;
            let timeout = match param(Word::Timeout) {
                Some((i, _, v)) => Some(length("timeout", v).map_err(|m| refused(Some(*i), m))?),
                None => None,
            };
            Ok(Phase::Heartbeat {
                interval,
                length: length_for()?,
                timeout,
            })
        }
        KindWord::Messages => {
            let rate = messages::parse_rate(value)
                .map_err(|m| refused(Some(at), format!("`messages`: {m}")))?;
            let size = match param(Word::Size) {
                Some((i, _, v)) => messages::parse_size(v).map_err(|m| {
                    refused(
                        Some(*i),
                        format!("`size`: {}", m.replace("--message-size ", "")),
                    )
                })?,
                None => DEFAULT_MESSAGE_SIZE,
            };
            // `--message-rate`'s bounds: at most one every 10 µs, at least one in 1e9 s.
            MessageConfig::of(Some(rate), None, 1, size)
                .map_err(|m| refused(Some(at), format!("`messages`: {m}")))?;
            let length = length_for()?;
            Ok(Phase::Messages { rate, size, length })
        }
    }
}

/// `--phase`'s value: its words two by two, e.g. `push 3 every 10s`.
pub fn parse(s: &str) -> Result<Phase, String> {
    let words: Vec<&str> = s.split_whitespace().collect();
    if words.len() % 2 == 1 {
        return Err(format!(
            "`{}` lacks its value: a phase is its kind and value, then parameters as key and value, e.g. `push 3 every 10s`",
            words.last().unwrap_or(&"")
        ));
    }
    let pairs: Vec<(&str, &str)> = words.chunks(2).map(|p| (p[0], p[1])).collect();
    from_pairs(&pairs).map_err(|r| r.msg)
}

/// A duration as [`parse`] reads it back exactly.
fn secs(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

impl Phase {
    /// What the phase does, as the run records it.
    pub fn kind(&self) -> PhaseKind {
        match self {
            Phase::Hold { .. } => PhaseKind::Hold,
            Phase::Push { .. } => PhaseKind::Push,
            Phase::Churn { .. } => PhaseKind::Churn,
            Phase::Heartbeat { .. } => PhaseKind::Heartbeat,
            Phase::Messages { .. } => PhaseKind::Messages,
        }
    }

    /// The phase as key/value pairs, its kind first: `--phase`'s words two by two and
    /// its `[[phase]]` table's keys.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        match self {
            Phase::Hold { length } => vec![("hold", secs(*length))],
            Phase::Push { count, every } => {
                let mut p = vec![("push", count.to_string())];
                if let Some(e) = every {
                    p.push(("every", secs(*e)));
                }
                p
            }
            Phase::Churn {
                rate,
                length,
                order,
            } => {
                let mut p = vec![("churn", rate.to_string()), ("for", secs(*length))];
                // The default unsaid, as typed most often.
                if *order != ChurnOrder::default() {
                    p.push(("order", order.name().to_owned()));
                }
                p
            }
            Phase::Heartbeat {
                interval,
                length,
                timeout,
            } => {
                let mut p = vec![("heartbeat", secs(*interval)), ("for", secs(*length))];
                if let Some(t) = timeout {
                    p.push(("timeout", secs(*t)));
                }
                p
            }
            Phase::Messages { rate, size, length } => {
                let mut p = vec![("messages", rate.to_string())];
                if *size != DEFAULT_MESSAGE_SIZE {
                    p.push(("size", size.to_string()));
                }
                p.push(("for", secs(*length)));
                p
            }
        }
    }
}

impl std::fmt::Display for Phase {
    /// As `--phase` takes it, read back exactly by [`parse`].
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let words: Vec<String> = self
            .pairs()
            .into_iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        f.write_str(&words.join(" "))
    }
}

/// The phases' names in the run's record: each its kind, numbered from the second of a
/// kind on (`hold`, `push`, `hold-2`), so every phase of a run has its own.
pub fn names(phases: &[Phase]) -> Vec<String> {
    crate::model::phase::kind_names(phases.iter().map(Phase::kind))
}

/// The flags a phase list replaces (clap's ids): the fixed sequence's.
pub const REPLACED: [(&str, &str); 4] = [
    ("idle", "--idle"),
    ("pushes", "--pushes"),
    ("churn", "--churn"),
    ("churn_order", "--churn-order"),
];

/// What the rest of the run says that a phase must fit.
#[derive(Debug, Clone)]
pub struct Setting {
    /// The workload (pushes are WebSocket broadcasts).
    pub mode: Mode,
    /// What makes the server push (None: the flags disagree, which is refused later).
    pub trigger: Option<PushTrigger>,
    /// The run's own client, on this box (churn is its client's).
    pub local_clients: bool,
    /// The connections, when a count was given.
    pub connections: Option<u64>,
    /// The whole run pings (`--heartbeat`): a heartbeat phase would stop it.
    pub heartbeat: bool,
    /// The whole run sends messages (`--message-rate`, `--total-message-rate`).
    pub messages: bool,
}

/// A phase the rest of the run cannot run: its index in the list and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misfit {
    /// The phase's place in the list, from 0.
    pub index: usize,
    /// Why, and what to write instead.
    pub msg: String,
}

/// Each phase against the run's other flags, before anything starts.
pub fn check(phases: &[Phase], s: &Setting) -> Result<(), Misfit> {
    let mut first_order: Option<ChurnOrder> = None;
    for (index, p) in phases.iter().enumerate() {
        let misfit = |msg: String| Misfit { index, msg };
        match p {
            Phase::Hold { .. } => {}
            Phase::Push { .. } => {
                if s.mode != Mode::Ws {
                    return Err(misfit(format!(
                        "push phases broadcast to WebSocket connections: they need --mode ws (this run is {})",
                        s.mode.name()
                    )));
                }
                if s.trigger == Some(PushTrigger::None) {
                    return Err(misfit(
                        "a push phase triggers its pushes, and --push-trigger none leaves them to the server: give your server's --push-trigger (signal:NAME, http:URL, cmd:\"…\"), or leave the push phases out"
                            .to_owned(),
                    ));
                }
            }
            Phase::Churn {
                rate,
                length,
                order,
            } => {
                if !s.local_clients {
                    return Err(misfit(
                        "churn phases churn the lab's own client: clients on other hosts churn with `c1m client --churn` over their hold".to_owned(),
                    ));
                }
                churn::check(
                    Some(rate.0),
                    s.connections.unwrap_or(u64::MAX),
                    Some(*length),
                    "for",
                )
                .map_err(|m| misfit(m.replace("--churn", "churn")))?;
                match first_order {
                    Some(o) if o != *order => {
                        return Err(misfit(format!(
                            "churn phases of one run churn in one order (the client keeps its open order from the start): this one says {}, an earlier one {}",
                            order.name(),
                            o.name()
                        )));
                    }
                    _ => first_order = Some(*order),
                }
            }
            Phase::Heartbeat { .. } => {
                if s.mode != Mode::Ws {
                    return Err(misfit(format!(
                        "heartbeat phases ping WebSocket connections: they need --mode ws (this run is {}), as --heartbeat does",
                        s.mode.name()
                    )));
                }
                if !s.local_clients {
                    return Err(misfit(
                        "heartbeat phases switch the lab's own client: clients on other hosts ping with `c1m client --heartbeat` over their hold".to_owned(),
                    ));
                }
                if s.heartbeat {
                    return Err(misfit(
                        "a heartbeat phase beside --heartbeat: the whole run pings already and the phase would stop it at its end; drop --heartbeat (or the heartbeat phases)".to_owned(),
                    ));
                }
            }
            Phase::Messages { .. } => {
                if s.mode != Mode::Ws {
                    return Err(misfit(format!(
                        "message phases switch the client's messages at run time, in --mode ws only (this run is {}; a raw echo stream carries round trips or messages, chosen at start): give --message-rate for the whole run instead",
                        s.mode.name()
                    )));
                }
                if !s.local_clients {
                    return Err(misfit(
                        "message phases switch the lab's own client: clients on other hosts send with `c1m client --message-rate` over their hold".to_owned(),
                    ));
                }
                if s.messages {
                    return Err(misfit(
                        "a message phase beside --message-rate (or --total-message-rate): the whole run sends already and the phase would stop it at its end; drop the flag (or the message phases)".to_owned(),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The churn the run's client is started with: able to churn at the fastest churn
/// phase's rate, in the phases' order (None: no churn phase).
pub fn client_churn(phases: &[Phase]) -> Option<(ChurnRate, ChurnOrder)> {
    phases
        .iter()
        .filter_map(|p| match p {
            Phase::Churn { rate, order, .. } => Some((*rate, *order)),
            _ => None,
        })
        .reduce(|a, b| if b.0.0 > a.0.0 { b } else { a })
}

/// The time the list takes at least: its holds' and churns' lengths, and its pushes'
/// spacing (a push's own fan-out comes on top).
pub fn least_length(phases: &[Phase]) -> Duration {
    phases
        .iter()
        .map(|p| match *p {
            Phase::Hold { length }
            | Phase::Churn { length, .. }
            | Phase::Heartbeat { length, .. }
            | Phase::Messages { length, .. } => length,
            Phase::Push { count, every } => {
                every.map_or(Duration::ZERO, |e| e * count.saturating_sub(1))
            }
        })
        .sum()
}

/// The broadcasts of every push phase.
pub fn push_count(phases: &[Phase]) -> u32 {
    phases
        .iter()
        .map(|p| match p {
            Phase::Push { count, .. } => *count,
            _ => 0,
        })
        .sum()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn each_kind_parses_and_prints_back() {
        for (text, phase) in [
            (
                "hold 60s",
                Phase::Hold {
                    length: Duration::from_secs(60),
                },
            ),
            (
                "push 3 every 10s",
                Phase::Push {
                    count: 3,
                    every: Some(Duration::from_secs(10)),
                },
            ),
            (
                "push 1",
                Phase::Push {
                    count: 1,
                    every: None,
                },
            ),
            (
                "churn 5000/s for 5m order random",
                Phase::Churn {
                    rate: ChurnRate(5000.0),
                    length: Duration::from_secs(300),
                    order: ChurnOrder::Random,
                },
            ),
            (
                "for 1.5s churn 20",
                Phase::Churn {
                    rate: ChurnRate(20.0),
                    length: Duration::from_millis(1500),
                    order: ChurnOrder::Oldest,
                },
            ),
            (
                "heartbeat 30s for 5m",
                Phase::Heartbeat {
                    interval: Duration::from_secs(30),
                    length: Duration::from_secs(300),
                    timeout: None,
                },
            ),
            (
                "heartbeat 500ms for 3s timeout 2s",
                Phase::Heartbeat {
                    interval: Duration::from_millis(500),
                    length: Duration::from_secs(3),
                    timeout: Some(Duration::from_secs(2)),
                },
            ),
            (
                "messages 10/s size 128 for 60s",
                Phase::Messages {
                    rate: MessageRate(10.0),
                    size: 128,
                    length: Duration::from_secs(60),
                },
            ),
            (
                "messages 0.5 for 2s",
                Phase::Messages {
                    rate: MessageRate(0.5),
                    size: DEFAULT_MESSAGE_SIZE,
                    length: Duration::from_secs(2),
                },
            ),
        ] {
            assert_eq!(parse(text), Ok(phase.clone()), "{text}");
            assert_eq!(parse(&phase.to_string()), Ok(phase.clone()), "{phase}");
        }
    }

    #[test]
    fn refusals_name_the_pair_and_the_fix() {
        for (pairs, at, says) in [
            (&[("sleep", "5s")][..], Some(0), "unknown key `sleep`"),
            (
                &[("hold", "5s"), ("push", "2")],
                Some(1),
                "two kinds in one phase (`hold` and `push`)",
            ),
            (
                &[("churn", "100")],
                None,
                "a churn phase needs its length: add `for`",
            ),
            (&[("every", "5s")], None, "a phase without its kind"),
            (&[("hold", "0s")], Some(0), "`hold` is 0"),
            (&[("hold", "9999h")], Some(0), "longer than 7 days"),
            (&[("push", "0")], Some(0), "1 to 10000"),
            (
                &[("push", "2"), ("for", "5s")],
                Some(1),
                "`for` is not a parameter of a push phase, which takes every",
            ),
            (
                &[("churn", "0"), ("for", "5s")],
                Some(0),
                "`churn`: is connections closed",
            ),
            (
                &[("churn", "10"), ("for", "5s"), ("order", "newest")],
                Some(2),
                "oldest or random",
            ),
            (
                &[("heartbeat", "0s"), ("for", "5m")],
                Some(0),
                "`heartbeat` is 0",
            ),
            (
                &[("heartbeat", "soon"), ("for", "5m")],
                Some(0),
                "interval between a connection's pings",
            ),
            (
                &[("heartbeat", "30s"), ("for", "5m"), ("timeout", "0")],
                Some(2),
                "`timeout` is 0",
            ),
            (
                &[("heartbeat", "30s")],
                None,
                "a heartbeat phase needs its length",
            ),
            (
                &[("heartbeat", "30s"), ("for", "5m"), ("size", "64")],
                Some(2),
                "`size` is not a parameter of a heartbeat phase, which takes for, timeout",
            ),
            (
                &[("messages", "0"), ("for", "60s")],
                Some(0),
                "more than 0 messages per second",
            ),
            (
                &[("messages", "1000000"), ("for", "60s")],
                Some(0),
                "at most 100000",
            ),
            (
                &[("messages", "10/s"), ("size", "8"), ("for", "60s")],
                Some(1),
                "at least 16",
            ),
            (
                &[("messages", "10/s"), ("size", "64")],
                None,
                "a messages phase needs its length",
            ),
            (
                &[("message-rate", "10/s"), ("for", "60s")],
                Some(0),
                "unknown key `message-rate`",
            ),
        ] {
            let r = from_pairs(pairs).unwrap_err();
            assert_eq!(r.pair, at, "{pairs:?}: {r}");
            assert!(r.msg.contains(says), "{pairs:?}: {r}");
            assert!(!r.msg.contains('\n'));
        }
        assert!(
            parse("push 3 every")
                .unwrap_err()
                .contains("`every` lacks its value")
        );
        assert!(parse("hold 1s hold 2s").unwrap_err().contains("two kinds"));
        assert!(
            parse("push 1 every 1s every 2s")
                .unwrap_err()
                .contains("twice")
        );
    }

    #[test]
    fn names_are_unique_and_readable() {
        let list: Vec<Phase> = ["hold 1s", "push 2", "churn 10 for 1s", "hold 2s", "hold 3s"]
            .iter()
            .map(|t| parse(t).unwrap())
            .collect();
        assert_eq!(names(&list), ["hold", "push", "churn", "hold-2", "hold-3"]);
        assert_eq!(push_count(&list), 2);
        let spaced = [
            parse("push 3 every 10s").unwrap(),
            parse("hold 5s").unwrap(),
        ];
        assert_eq!(least_length(&list), Duration::from_secs(7));
        assert_eq!(least_length(&spaced), Duration::from_secs(25));
    }

    #[test]
    fn phases_fit_the_run_or_say_why() {
        let ok = Setting {
            mode: Mode::Ws,
            trigger: Some(PushTrigger::Control),
            local_clients: true,
            connections: Some(1000),
            heartbeat: false,
            messages: false,
        };
        let list = |t: &[&str]| t.iter().map(|t| parse(t).unwrap()).collect::<Vec<_>>();
        assert_eq!(check(&list(&["push 2", "churn 10 for 1s"]), &ok), Ok(()));
        let echo = Setting {
            mode: Mode::Echo,
            ..ok.clone()
        };
        let e = check(&list(&["hold 1s", "push 2"]), &echo).unwrap_err();
        assert_eq!(e.index, 1);
        assert!(e.msg.contains("need --mode ws"), "{}", e.msg);
        let none = Setting {
            trigger: Some(PushTrigger::None),
            ..ok.clone()
        };
        assert!(
            check(&list(&["push 1"]), &none)
                .unwrap_err()
                .msg
                .contains("--push-trigger")
        );
        let external = Setting {
            local_clients: false,
            ..ok.clone()
        };
        assert!(check(&list(&["churn 10 for 1s"]), &external).is_err());
        let e = check(&list(&["churn 2000 for 1s"]), &ok).unwrap_err();
        assert!(e.msg.contains("at most -n (1,000) per second"), "{}", e.msg);
        let e = check(
            &list(&["churn 10 for 1s", "churn 20 for 1s order random"]),
            &ok,
        )
        .unwrap_err();
        assert_eq!(e.index, 1);
        assert!(e.msg.contains("one order"), "{}", e.msg);
        assert_eq!(
            client_churn(&list(&["churn 10 for 1s", "hold 1s", "churn 30 for 1s"])),
            Some((ChurnRate(30.0), ChurnOrder::Oldest))
        );
    }

    #[test]
    fn heartbeat_and_message_phases_fit_the_run_or_say_why() {
        let ok = Setting {
            mode: Mode::Ws,
            trigger: Some(PushTrigger::Control),
            local_clients: true,
            connections: Some(1000),
            heartbeat: false,
            messages: false,
        };
        let list = |t: &[&str]| t.iter().map(|t| parse(t).unwrap()).collect::<Vec<_>>();
        let both = list(&[
            "hold 1s",
            "heartbeat 500ms for 3s",
            "messages 5/s size 32 for 2s",
        ]);
        assert_eq!(check(&both, &ok), Ok(()));
        assert_eq!(names(&both), ["hold", "heartbeat", "messages"]);
        assert_eq!(least_length(&both), Duration::from_secs(6));
        for (setting, at, says) in [
            (
                Setting {
                    mode: Mode::Echo,
                    ..ok.clone()
                },
                1,
                "need --mode ws (this run is echo)",
            ),
            (
                Setting {
                    local_clients: false,
                    ..ok.clone()
                },
                1,
                "clients on other hosts",
            ),
            (
                Setting {
                    heartbeat: true,
                    ..ok.clone()
                },
                1,
                "drop --heartbeat",
            ),
            (
                Setting {
                    messages: true,
                    ..ok.clone()
                },
                2,
                "beside --message-rate",
            ),
        ] {
            let e = check(&both, &setting).unwrap_err();
            assert_eq!(e.index, at, "{}", e.msg);
            assert!(e.msg.contains(says), "{}", e.msg);
            assert!(!e.msg.contains('\n'));
        }
        let e = check(
            &list(&["messages 5/s for 2s"]),
            &Setting {
                mode: Mode::Hold,
                ..ok.clone()
            },
        )
        .unwrap_err();
        assert!(
            e.msg.contains("give --message-rate for the whole run"),
            "{}",
            e.msg
        );
    }
}
