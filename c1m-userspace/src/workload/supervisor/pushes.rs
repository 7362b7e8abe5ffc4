//! The push path: broadcasts queued over the shards a few writers at a time, and the
//! client's `--push-trigger` fired once every shard took its mark.

use super::{Supervisor, TriggerStep};
use crate::workload::{config::ShardCommand, push_trigger::PushTrigger, sys};

impl Supervisor {
    /// Starts a broadcast; `writers` shards write it at once (0: all), the others wait
    /// their turn. All at once is the fastest fan-out; a few at a time leaves the CPU to
    /// the readers, so a frame waits far less between write and read (measured at 1M on
    /// two cores: all 68 shards 11.9–12.3 s, per-message p99 49–311 ms; 4 at a time
    /// 14.5–15.1 s, p99 under 1 ms).
    pub(super) fn push(&mut self, writers: usize) -> (u64, u64) {
        let id = self.next_push;
        self.next_push += 1;
        let started = sys::realtime_ns();
        // A newer push supersedes shards' turns at an older one not yet begun, so a
        // `--push-every` shorter than a fan-out cannot grow the queue without bound.
        self.push_queue.clear();
        for (i, _) in self.shards.iter().enumerate().filter(|(_, s)| s.alive) {
            self.push_queue.push_back((i, id, started));
        }
        self.push_limit = writers;
        self.dispatch_pushes();
        (id, started)
    }

    /// Starts queued pushes on shards that are not writing one, up to `push_limit` at once.
    pub(super) fn dispatch_pushes(&mut self) {
        let max = match self.push_limit {
            0 => usize::MAX,
            n => n,
        };
        let mut i = 0;
        while self.pushing.len() < max && i < self.push_queue.len() {
            let (shard, id, started) = self.push_queue[i];
            if self.pushing.contains(&shard) {
                i += 1;
                continue;
            }
            self.push_queue.remove(i);
            let Some(s) = self.shards.get(shard).filter(|s| s.alive) else {
                continue;
            };
            s.handle.send(ShardCommand::Push {
                id,
                started_unix_ns: started,
            });
            self.pushing.insert(shard);
        }
    }

    /// Client: tells the shards when the push was triggered and triggers it (in a task:
    /// an HTTP or command trigger may take a while); a failure is said on stderr.
    pub(super) fn fire_trigger(&mut self) {
        self.trigger = TriggerStep::Fired;
        let Some(trigger) = self.o.push_trigger.clone() else {
            return;
        };
        if trigger == PushTrigger::None {
            return;
        }
        self.broadcast(ShardCommand::Mark {
            id: 1,
            started_unix_ns: sys::realtime_ns(),
        });
        let pid = self.o.server_pid;
        tokio::spawn(async move {
            if let Err(e) = trigger.fire(pid).await {
                eprintln!("c1m client: --push-trigger {trigger}: {e:#}");
            }
        });
    }
}
