//! `c1m run`'s heartbeat and message phases on the epoll client shard: the control
//! commands that start a sweep at run time (its epoch the instant of the command, so
//! the pings or messages spread over the interval from then) and stop it. Stopping
//! keeps the configuration: pongs and echoes of what is still out are matched and
//! counted, so pings and messages sent stay equal to what ended them.

use super::Shard;
use crate::workload::{
    heartbeat::{HeartbeatConfig, Sweep},
    messages::{MessageConfig, Sweep as MessageSweep},
};

impl Shard {
    /// `Heartbeat { cfg }`: ping every open connection as `cfg` says from `t0_mono_ns`;
    /// None: no more pings.
    pub(super) fn switch_heartbeat(&mut self, cfg: Option<HeartbeatConfig>, t0_mono_ns: u64) {
        match cfg {
            Some(hb) if !self.closing => {
                self.p.cfg.heartbeat = Some(hb);
                self.beat = Some(Sweep::new(&hb, t0_mono_ns, self.p.cfg.shard));
                self.next_beat = t0_mono_ns;
            }
            _ => self.beat = None,
        }
    }

    /// `Messages { cfg }`: every open connection sends as `cfg` says from `t0_mono_ns`;
    /// None: no more messages. Either way the ramp's end no longer starts them.
    pub(super) fn switch_messages(&mut self, cfg: Option<MessageConfig>, t0_mono_ns: u64) {
        self.msgs_switched = true;
        match cfg {
            Some(m) if !self.closing && !self.p.draining => {
                self.p.cfg.messages = Some(m);
                self.msgs = Some(MessageSweep::new(&m, t0_mono_ns, self.p.cfg.shard));
                self.next_msg = t0_mono_ns;
            }
            _ => self.msgs = None,
        }
    }
}
