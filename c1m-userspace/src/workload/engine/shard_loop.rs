//! The frame every shard loop runs in ([`turns`]): a wait per turn, the commands before
//! that wait's I/O, a report tick every [`REPORT_EVERY_NS`], the turn's last step; for
//! the epoll engines ([`run`]) the wait is one `epoll_wait` with the command source under
//! [`COMMAND_TOKEN`], and a final report at `Stop`. And the one [`Reporter`] that builds
//! a [`WorkerReport`] only when there is news.
//!
//! The engine is a generic parameter, not a trait object: the per-event call is
//! monomorphized and inlined as before, so the hot path gains no indirection.

use std::{
    collections::{BTreeMap, BTreeSet},
    mem,
};

use anyhow::{Context, Result};

use super::{COMMAND_TOKEN, REPORT_EVERY_NS, ShardIo, Sink};
use crate::workload::{
    config::ShardCommand,
    stats::{
        counters::Counters,
        histograms::HistValues,
        report::{PushStat, WorkerReport},
    },
    sys::{self, Epoll, Events},
};

/// Pushes a shard remembers: a schedule of `--push-every 1s` for a day must not grow.
const PUSHES_KEPT: usize = 64;

/// What a turn does around the shared frame: how it waits and what its I/O means. The
/// epoll engines get it from their [`Engine`] (see [`run`]); the io_uring server
/// implements it on its ring.
pub(crate) trait Turns {
    /// Waits for I/O, until `next_tick` (monotonic ns) at the latest; true if the command
    /// source fired.
    fn wait(&mut self, next_tick: u64, io: &ShardIo) -> Result<bool>;
    /// A command other than `Stop`.
    fn command(&mut self, c: ShardCommand, sink: &mut Sink) -> Result<()>;
    /// The I/O the wait brought, but the command source's: the hot path.
    fn events(&mut self);
    /// Housekeeping at a report tick, before its report; returns that report's `closed_all`.
    fn tick(&mut self) -> bool;
    /// Last step of every turn (`now`: monotonic ns, read after the wait).
    fn turn_end(&mut self, now: u64, sink: &mut Sink) -> Result<()>;
    /// Reports if anything changed (or `force`).
    fn report(&mut self, sink: &mut Sink, force: bool, closed_all: bool) -> Result<()>;
}

/// Runs turns until `Stop` (or the supervisor goes away); the caller closes what is
/// left and sends the final report.
pub(crate) fn turns<T: Turns>(t: &mut T, io: &mut ShardIo) -> Result<()> {
    let mut cmds = Vec::new();
    t.report(&mut io.sink, true, false)?;
    let mut next_tick = sys::monotonic_ns() + REPORT_EVERY_NS;
    // A worker's config line may have arrived with commands behind it: look once at start.
    let mut commands = true;
    loop {
        commands |= t.wait(next_tick, io)?;
        let now = sys::monotonic_ns();
        let tick = now >= next_tick;
        if commands || tick {
            commands = false;
            io.commands.drain(&mut cmds);
            for c in cmds.drain(..) {
                match c {
                    ShardCommand::Stop => return Ok(()),
                    c => t.command(c, &mut io.sink)?,
                }
            }
        }
        t.events();
        if tick {
            next_tick = now + REPORT_EVERY_NS;
            let closed_all = t.tick();
            t.report(&mut io.sink, false, closed_all)?;
        }
        t.turn_end(now, &mut io.sink)?;
    }
}

/// The per-engine parts of an epoll loop.
pub(crate) trait Engine {
    /// `epoll_wait` timeout (ms) for this turn, given the next report tick (monotonic ns).
    fn wait_ms(&mut self, next_tick: u64) -> i32;
    /// One event on anything but the command source: the hot path.
    fn event(&mut self, ep: &Epoll, tok: u64, ev: u32);
    /// After a batch that held at least one such event.
    fn after_events(&mut self, _ep: &Epoll) {}
    /// A command other than `Stop`.
    fn command(&mut self, ep: &Epoll, c: ShardCommand, sink: &mut Sink) -> Result<()>;
    /// Housekeeping at a report tick, before its report; returns that report's `closed_all`.
    fn tick(&mut self, ep: &Epoll) -> bool;
    /// Last step of every turn (`now`: monotonic ns, read after the events).
    fn turn_end(&mut self, _ep: &Epoll, _now: u64, _sink: &mut Sink) -> Result<()> {
        Ok(())
    }
    /// Closes every connection (at `Stop`).
    fn close_all(&mut self, ep: &Epoll);
    /// Reports if anything changed (or `force`).
    fn report(&mut self, sink: &mut Sink, force: bool, closed_all: bool) -> Result<()>;
}

/// Runs `e` until `Stop` (or its supervisor goes away), then closes everything and sends
/// the final report. The command source must already be in `ep` under [`COMMAND_TOKEN`].
pub(crate) fn run<E: Engine>(e: &mut E, ep: &Epoll, io: &mut ShardIo) -> Result<()> {
    turns(
        &mut Readiness {
            e: &mut *e,
            ep,
            events: Events::default(),
        },
        io,
    )?;
    e.close_all(ep);
    e.report(&mut io.sink, true, true)?;
    Ok(())
}

/// An epoll [`Engine`]'s turns: one `epoll_wait` each.
struct Readiness<'a, E> {
    e: &'a mut E,
    ep: &'a Epoll,
    events: Events,
}

impl<E: Engine> Turns for Readiness<'_, E> {
    #[inline]
    fn wait(&mut self, next_tick: u64, _io: &ShardIo) -> Result<bool> {
        self.ep
            .wait(&mut self.events, self.e.wait_ms(next_tick))
            .context("epoll_wait")?;
        // Commands before the I/O of the same wait: a push mark sent before the server
        // was triggered then always precedes the frames it announced.
        Ok((0..self.events.len()).any(|i| self.events.get(i).1 == COMMAND_TOKEN))
    }

    fn command(&mut self, c: ShardCommand, sink: &mut Sink) -> Result<()> {
        self.e.command(self.ep, c, sink)
    }

    #[inline]
    fn events(&mut self) {
        let mut io_events = false;
        for i in 0..self.events.len() {
            let (ev, tok) = self.events.get(i);
            if tok != COMMAND_TOKEN {
                io_events = true;
                self.e.event(self.ep, tok, ev);
            }
        }
        if io_events {
            self.e.after_events(self.ep);
        }
    }

    fn tick(&mut self) -> bool {
        self.e.tick(self.ep)
    }

    #[inline]
    fn turn_end(&mut self, now: u64, sink: &mut Sink) -> Result<()> {
        self.e.turn_end(self.ep, now, sink)
    }

    fn report(&mut self, sink: &mut Sink, force: bool, closed_all: bool) -> Result<()> {
        self.e.report(sink, force, closed_all)
    }
}

/// What only one engine reports, taken fresh for each report.
#[derive(Default)]
pub(crate) struct Extra {
    pub ramp_done: bool,
    pub hists: HistValues,
    pub timeline: Vec<(u32, u32)>,
    pub push_done: Option<u64>,
}

/// The report state both engines keep: what was last sent, pushes, warnings.
pub(crate) struct Reporter {
    shard: u32,
    last: Counters,
    pub pushes: BTreeMap<u64, PushStat>,
    /// Pushes whose numbers changed since the last report.
    pub dirty_pushes: BTreeSet<u64>,
    pub warnings: Vec<String>,
    /// Client: the last push mark taken (reported so the lab knows it arrived).
    pub mark: u64,
    sent_mark: u64,
    /// `closed_all` as last sent. The last connection of a teardown can end without a
    /// counter changing (its close reply was read, then only the FIN came): the report
    /// saying so must still go, or the supervisor waits for it forever.
    sent_closed_all: bool,
}

impl Reporter {
    pub(crate) fn new(shard: u32) -> Reporter {
        Reporter {
            shard,
            last: Counters::default(),
            pushes: BTreeMap::new(),
            dirty_pushes: BTreeSet::new(),
            warnings: Vec::new(),
            mark: 0,
            sent_mark: 0,
            sent_closed_all: false,
        }
    }

    /// Sends `c` and `x` if anything changed since the last report (or `force`).
    pub(crate) fn send(
        &mut self,
        sink: &mut Sink,
        c: &Counters,
        x: Extra,
        force: bool,
        closed_all: bool,
    ) -> Result<()> {
        let pushes: Vec<PushStat> = mem::take(&mut self.dirty_pushes)
            .iter()
            .filter_map(|id| self.pushes.get(id).copied())
            .collect();
        while self.pushes.len() > PUSHES_KEPT {
            self.pushes.pop_first();
        }
        let changed = force
            || *c != self.last
            || !x.hists.is_empty()
            || !pushes.is_empty()
            || !x.timeline.is_empty()
            || x.push_done.is_some()
            || self.mark != self.sent_mark
            || closed_all != self.sent_closed_all
            || !self.warnings.is_empty();
        if !changed {
            return Ok(());
        }
        self.last = *c;
        self.sent_mark = self.mark;
        self.sent_closed_all = closed_all;
        let r = WorkerReport {
            shard: self.shard,
            pid: std::process::id(),
            unix_ns: sys::realtime_ns(),
            counters: *c,
            ramp_done: x.ramp_done,
            closed_all,
            ready: true,
            hists: x.hists,
            timeline: x.timeline,
            pushes,
            push_done: x.push_done,
            mark: self.mark,
            warnings: mem::take(&mut self.warnings),
            fatal: None,
        };
        sink.send(r).context("report to supervisor")
    }

    /// A server's push `id` began (reported at once, even before a frame is out).
    pub(crate) fn push_started(&mut self, id: u64, started_unix_ns: u64) {
        self.pushes.insert(
            id,
            PushStat {
                push_id: id,
                started_unix_ns,
                ..Default::default()
            },
        );
        self.dirty_pushes.insert(id);
    }

    /// A server wrote push `id`'s frame to `count` more connections, the first and last
    /// at these instants (CLOCK_REALTIME ns).
    pub(crate) fn push_written(
        &mut self,
        id: u64,
        started: u64,
        count: u64,
        first: u64,
        last: u64,
    ) {
        if count == 0 {
            return;
        }
        let p = self.pushes.entry(id).or_insert(PushStat {
            push_id: id,
            started_unix_ns: started,
            ..Default::default()
        });
        p.merge(&PushStat {
            push_id: id,
            started_unix_ns: started,
            count,
            first_unix_ns: first,
            last_unix_ns: last,
        });
        self.dirty_pushes.insert(id);
    }

    /// The shard cannot run: tell the supervisor why before returning the error.
    pub(crate) fn fatal(&self, sink: &mut Sink, msg: String) {
        let _ = sink.send(WorkerReport {
            shard: self.shard,
            fatal: Some(msg),
            ..Default::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::engine::ShardEvent;

    #[test]
    fn the_teardown_end_is_reported_even_when_no_counter_moved() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut sink = Sink::Channel(tx);
        let mut rep = Reporter::new(0);
        // Sends a report of unchanged counters; returns the closed_all it carried, if sent.
        let mut report = |force: bool, closed_all: bool| {
            rep.send(
                &mut sink,
                &Counters::default(),
                Extra::default(),
                force,
                closed_all,
            )
            .unwrap();
            match rx.try_recv() {
                Ok(ShardEvent::Report(r)) => Some(r.closed_all),
                _ => None,
            }
        };
        assert_eq!(report(true, false), Some(false));
        // Nothing changed: nothing sent.
        assert_eq!(report(false, false), None);
        // The last connection ended with the counters as they were: still said, once.
        assert_eq!(report(false, true), Some(true));
        assert_eq!(report(false, true), None);
    }
}
