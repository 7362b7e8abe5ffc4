//! A pushed frame's arrival: timed by the run's push rule and added to its push's
//! figures, for both engines.

use super::Proto;
use crate::workload::{
    push_format::Stamp,
    push_rule::PushInstant,
    stats::{self, report::PushStat},
    sys,
};

impl Proto {
    /// A push, timed by the run's rule (workload/push_rule.rs): per message from the
    /// broadcast start or the frame's write (c1m's frame carries both; a foreign frame's
    /// one stamp is what it is), fan-out from the trigger instant the push was marked
    /// with. A c1m frame of a push marked without an instant (clients on other hosts,
    /// or a push nobody here triggered) is timed for fan-out from its broadcast start.
    pub(super) fn on_push(&mut self, stamp: Stamp) {
        // On the server's clock: its stamps are compared with it.
        let now = sys::realtime_ns().saturating_add_signed(self.cfg.clock_offset_ns);
        let (mark_id, trigger) = self.mark;
        let (id, per_message_from, fanout_from) = match stamp {
            Stamp::C1m {
                id,
                started_unix_ns,
                written_unix_ns,
            } => (
                id,
                match self.cfg.push_latency {
                    PushInstant::Broadcast => started_unix_ns,
                    PushInstant::Write => written_unix_ns,
                },
                if id == mark_id && trigger > 0 {
                    trigger
                } else {
                    started_unix_ns
                },
            ),
            Stamp::At(at) => (mark_id, at, trigger),
        };
        // No trigger: the push is known by its stamp alone.
        let known_from = if fanout_from > 0 {
            fanout_from
        } else {
            per_message_from
        };
        self.c.pushes_received += 1;
        self.hists.record(
            stats::histograms::PUSH_MESSAGE,
            now.saturating_sub(per_message_from) / 1000,
        );
        if fanout_from > 0 {
            self.hists.record(
                stats::histograms::PUSH_FANOUT,
                now.saturating_sub(fanout_from) / 1000,
            );
        }
        let e = self.rep.pushes.entry(id).or_insert(PushStat {
            push_id: id,
            started_unix_ns: known_from,
            ..Default::default()
        });
        e.merge(&PushStat {
            push_id: id,
            started_unix_ns: known_from,
            count: 1,
            first_unix_ns: now,
            last_unix_ns: now,
        });
        self.rep.dirty_pushes.insert(id);
    }
}
