//! `c1m run`'s heartbeat and message phases on the tokio client shard: the control
//! commands that start or stop the pings and the messages at run time.
//!
//! A connection keeps its clocks (next ping slot, next message) on its own, so a switch is
//! told to every connection at once without a channel per connection: the epoch is set,
//! the shard's switch count bumped, and every connection's task woken through the waker in
//! its slot; one that sees the count moved rebuilds its clocks. The pacing tasks wake by
//! `teardown`'s `notify_waiters` and wait on a fresh `Notified` for the real teardown
//! ([`torn_down`]). Stopping keeps the configuration: pongs and echoes of what is still
//! out are matched and counted, so sent stays equal to what ended them.

use std::pin::Pin;

use tokio::sync::futures::Notified;

use super::Shared;
use crate::workload::{heartbeat::HeartbeatConfig, messages::MessageConfig};

impl Shared {
    /// `Heartbeat { cfg }`: every open WebSocket connection pings as `cfg` says, its
    /// slots spread over the interval from `t0_mono_ns`; None: no more pings.
    pub(super) fn switch_heartbeat(&self, cfg: Option<HeartbeatConfig>, t0_mono_ns: u64) {
        match cfg {
            Some(hb) if !self.closing.get() => {
                self.p.borrow_mut().cfg.heartbeat = Some(hb);
                self.beat_epoch.set(Some(t0_mono_ns));
            }
            _ => self.beat_epoch.set(None),
        }
        self.wake_every_task();
    }

    /// `Messages { cfg }`: every open connection sends as `cfg` says, spread over the
    /// interval from `t0_mono_ns`; None: no more messages.
    pub(super) fn switch_messages(&self, cfg: Option<MessageConfig>, t0_mono_ns: u64) {
        let mut p = self.p.borrow_mut();
        match cfg {
            Some(m) if !self.closing.get() && !p.draining => {
                p.cfg.messages = Some(m);
                // From now: the ramp's end (the whole run's start) is long past.
                p.msg_from = t0_mono_ns.max(1);
                self.msg_epoch.set(Some(t0_mono_ns));
            }
            _ => self.msg_epoch.set(None),
        }
        drop(p);
        self.wake_every_task();
    }

    fn wake_every_task(&self) {
        self.switches.set(self.switches.get() + 1);
        self.teardown.notify_waiters();
        self.conns.borrow().wake_all();
    }
}

/// `teardown` fired: true if it is the teardown; else it was a switch's wake, and a
/// fresh `Notified` (registered) waits for the next.
pub(super) fn torn_down<'a>(sh: &'a Shared, teardown: &mut Pin<&mut Notified<'a>>) -> bool {
    if sh.closing.get() {
        return true;
    }
    teardown.set(sh.teardown.notified());
    teardown.as_mut().enable();
    false
}
