//! One definition of push latency for every server (issue 20). A push has three instants:
//! the trigger (the lab or the client fired it, on the client's clock), the broadcast
//! start (the server took the push up) and each frame's write. Per-message latency is
//! measured from one server instant, the one the user picks (`--push-latency`; default the
//! broadcast start: the seeds' rule, and the only stamp the reference servers send);
//! fan-out from the trigger. c1m's frame carries both server instants, so it can follow
//! either rule; a foreign server's frame carries one stamp, whose instant the user states
//! (`--push-stamp`) or c1m knows (the reference servers', `reference-servers/PROTOCOL.md`).
//! A run whose stamp cannot follow the rule is recorded as such ([`PushRule::follows`]),
//! and every view titles its numbers by the instant they were measured from, so two
//! quantities never share a row.

use serde::{Deserialize, Serialize};

use super::push_format::PushFormat;

/// A server instant a per-message push latency is measured from.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum PushInstant {
    /// The instant the broadcast began: one stamp for every frame of the push (the seeds'
    /// rule).
    #[default]
    Broadcast,
    /// The instant the server wrote this connection's frame.
    Write,
}

impl PushInstant {
    /// The flag's value (`--push-latency broadcast`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            PushInstant::Broadcast => "broadcast",
            PushInstant::Write => "write",
        }
    }

    /// In a sentence: "from the broadcast start".
    pub(crate) fn text(self) -> &'static str {
        match self {
            PushInstant::Broadcast => "the broadcast start",
            PushInstant::Write => "the frame's write",
        }
    }
}

impl std::fmt::Display for PushInstant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The server instants a run's push frames carry.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum FrameStamps {
    /// c1m's frame: the broadcast start and the write time, so either rule is followed.
    #[default]
    BroadcastAndWrite,
    /// One stamp per frame, taken when the broadcast began (the reference servers).
    Broadcast,
    /// One stamp per frame, taken when that frame was written.
    Write,
    /// One stamp per frame, of an instant nobody stated (`--push-stamp` not given).
    Unknown,
}

impl FrameStamps {
    /// What frames of `format` carry; a one-stamp format's instant is `stated` (None:
    /// unknown).
    pub(crate) fn of(format: &PushFormat, stated: Option<PushInstant>) -> FrameStamps {
        match (format, stated) {
            (PushFormat::C1m, _) => FrameStamps::BroadcastAndWrite,
            (_, Some(PushInstant::Broadcast)) => FrameStamps::Broadcast,
            (_, Some(PushInstant::Write)) => FrameStamps::Write,
            (_, None) => FrameStamps::Unknown,
        }
    }

    /// The instant a per-message latency is measured from when `rule` is asked: the
    /// rule's own if the frames carry it, else the one they carry (None: unknown).
    pub(crate) fn measured_from(self, rule: PushInstant) -> Option<PushInstant> {
        match self {
            FrameStamps::BroadcastAndWrite => Some(rule),
            FrameStamps::Broadcast => Some(PushInstant::Broadcast),
            FrameStamps::Write => Some(PushInstant::Write),
            FrameStamps::Unknown => None,
        }
    }
}

/// Where a run's fan-out (each frame's, and the last one's) is measured from.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum FanoutFrom {
    /// The instant the trigger fired, on the client's clock: the lab (or the client's
    /// `--push-trigger`) takes it just before it fires and tells the client.
    #[default]
    Trigger,
    /// The broadcast start in c1m's frame, on the server's clock: clients on other hosts
    /// are told no trigger instant.
    BroadcastStart,
    /// Not measured: no trigger fired (`--push-trigger none`), the server pushed on its
    /// own schedule.
    NoTrigger,
}

impl FanoutFrom {
    /// Its JSON name (`broadcast_start`), as Prometheus's `c1m_run_info` labels it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            FanoutFrom::Trigger => "trigger",
            FanoutFrom::BroadcastStart => "broadcast_start",
            FanoutFrom::NoTrigger => "no_trigger",
        }
    }
}

/// How one run measured its pushes: recorded in `summary.json` (`config.push`), read by
/// the summary, the report and `c1m compare`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(default)]
pub struct PushRule {
    /// The instant per-message latency was asked to be measured from (`--push-latency`).
    pub latency_from: PushInstant,
    /// The instants the server's frames carry.
    pub stamps: FrameStamps,
    /// Where fan-out is measured from.
    pub fanout_from: FanoutFrom,
}

impl PushRule {
    /// The rule of a run: `latency_from` asked, frames of `format` whose one stamp's
    /// instant is `stated`, and `triggered` when the clients are told each trigger's
    /// instant.
    pub(crate) fn new(
        latency_from: PushInstant,
        format: &PushFormat,
        stated: Option<PushInstant>,
        triggered: bool,
    ) -> PushRule {
        PushRule {
            latency_from,
            stamps: FrameStamps::of(format, stated),
            fanout_from: match (triggered, format) {
                (true, _) => FanoutFrom::Trigger,
                (false, PushFormat::C1m) => FanoutFrom::BroadcastStart,
                (false, _) => FanoutFrom::NoTrigger,
            },
        }
    }

    /// `--push-stamp` is for a one-stamp format: c1m's frame carries both instants.
    pub(crate) fn check_stamp(
        format: &PushFormat,
        stated: Option<PushInstant>,
    ) -> Result<(), String> {
        match (format, stated) {
            (PushFormat::C1m, Some(i)) => Err(format!(
                "--push-stamp {i} is for a one-stamp --push-format: c1m's frame carries both the broadcast start and the write"
            )),
            _ => Ok(()),
        }
    }

    /// The frames carry the instant the rule asks for.
    pub fn follows(&self) -> bool {
        self.stamps.measured_from(self.latency_from) == Some(self.latency_from)
    }

    /// The instant the per-message latency was measured from (None: a stamp of unknown
    /// instant).
    pub fn measured_from(&self) -> Option<PushInstant> {
        self.stamps.measured_from(self.latency_from)
    }

    /// The tail of the per-message histogram's title, naming what it was measured from.
    /// No parenthesis: `c1m compare` matches titles on the part before one.
    pub(crate) fn message_title(&self) -> String {
        match self.measured_from() {
            Some(i) if self.follows() => format!(", from {}", i.text()),
            Some(i) => format!(", from {}, cannot follow {}", i.text(), self.latency_from),
            None => ", from a stamp of unstated instant".to_owned(),
        }
    }

    /// The tail of the fan-out histogram's title.
    pub(crate) fn fanout_title(&self) -> &'static str {
        match self.fanout_from {
            FanoutFrom::Trigger => ", from the trigger, on the client's clock",
            FanoutFrom::BroadcastStart => ", from the broadcast start, on the server's clock",
            FanoutFrom::NoTrigger => ", not measured: no trigger",
        }
    }

    /// What "the last frame N s after …" is after.
    pub(crate) fn fanout_origin(&self) -> &'static str {
        match self.fanout_from {
            FanoutFrom::Trigger => "the trigger (client's clock)",
            FanoutFrom::BroadcastStart => "the broadcast began (server's clock)",
            FanoutFrom::NoTrigger => "the server's stamp (no trigger)",
        }
    }

    /// The rule in one line, as the summary and the report's push section state it.
    pub(crate) fn line(&self) -> String {
        let message = match self.measured_from() {
            Some(i) if self.follows() => format!(
                "per message from {}{}",
                i.text(),
                if i == PushInstant::Broadcast {
                    " (the seeds' rule)"
                } else {
                    ""
                }
            ),
            Some(i) => format!(
                "per message from {}: --push-latency {} asked for {}, which this server's stamp cannot give",
                i.text(),
                self.latency_from,
                self.latency_from.text()
            ),
            None => "per message from the server's stamp, whose instant nobody stated (--push-stamp broadcast|write): not comparable".to_owned(),
        };
        let fanout = match self.fanout_from {
            FanoutFrom::Trigger => "fan-out from the trigger instant, on the client's clock",
            FanoutFrom::BroadcastStart => {
                "fan-out from the broadcast start, on the server's clock (no trigger instant reached the clients)"
            }
            FanoutFrom::NoTrigger => "no fan-out: no trigger fired (--push-trigger none)",
        };
        format!("push latency: {message}; {fanout}")
    }
}

/// A clap value parser for `--push-stamp` / `--push-latency`.
pub(crate) fn parse(s: &str) -> Result<PushInstant, String> {
    <PushInstant as clap::ValueEnum>::from_str(s, false)
        .map_err(|_| format!("unknown push instant {s:?}: broadcast or write"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn fanout_names_are_the_json_ones() {
        for f in [
            FanoutFrom::Trigger,
            FanoutFrom::BroadcastStart,
            FanoutFrom::NoTrigger,
        ] {
            assert_eq!(serde_json::to_value(f).unwrap(), f.name());
        }
    }

    fn rule(latency_from: PushInstant, stamps: FrameStamps) -> PushRule {
        PushRule {
            latency_from,
            stamps,
            fanout_from: FanoutFrom::Trigger,
        }
    }

    #[test]
    fn c1m_frames_follow_either_rule_a_one_stamp_frame_only_its_own() {
        use FrameStamps as S;
        use PushInstant::{Broadcast as B, Write as W};
        for (r, follows, from) in [
            (rule(B, S::BroadcastAndWrite), true, Some(B)),
            (rule(W, S::BroadcastAndWrite), true, Some(W)),
            (rule(B, S::Broadcast), true, Some(B)),
            (rule(W, S::Broadcast), false, Some(B)),
            (rule(B, S::Write), false, Some(W)),
            (rule(W, S::Write), true, Some(W)),
            (rule(B, S::Unknown), false, None),
        ] {
            assert_eq!((r.follows(), r.measured_from()), (follows, from), "{r:?}");
        }
    }

    #[test]
    fn the_stamps_of_a_format_are_what_it_carries_or_what_the_user_said() {
        assert_eq!(
            FrameStamps::of(&PushFormat::C1m, Some(PushInstant::Write)),
            FrameStamps::BroadcastAndWrite
        );
        assert_eq!(
            FrameStamps::of(&PushFormat::U64leUs, Some(PushInstant::Broadcast)),
            FrameStamps::Broadcast
        );
        assert_eq!(
            FrameStamps::of(&PushFormat::TextMs, None),
            FrameStamps::Unknown
        );
    }

    #[test]
    fn titles_name_the_instant_and_never_a_parenthesis() {
        let b = rule(PushInstant::Broadcast, FrameStamps::Broadcast);
        assert_eq!(b.message_title(), ", from the broadcast start");
        let w = rule(PushInstant::Write, FrameStamps::Broadcast);
        assert_eq!(
            w.message_title(),
            ", from the broadcast start, cannot follow write"
        );
        assert!(
            w.line()
                .contains("--push-latency write asked for the frame's write")
        );
        let u = rule(PushInstant::Broadcast, FrameStamps::Unknown);
        for t in [
            b.message_title(),
            w.message_title(),
            u.message_title(),
            b.fanout_title().to_owned(),
        ] {
            assert!(!t.contains(" ("), "{t}");
        }
        assert_eq!(
            b.line(),
            "push latency: per message from the broadcast start (the seeds' rule); fan-out from the trigger instant, on the client's clock"
        );
    }

    #[test]
    fn the_flag_takes_the_two_instants_and_names_them_when_wrong() {
        assert_eq!(parse("broadcast"), Ok(PushInstant::Broadcast));
        assert_eq!(parse("write"), Ok(PushInstant::Write));
        let e = parse("send").unwrap_err();
        assert!(e.contains("broadcast or write"), "{e}");
    }
}
