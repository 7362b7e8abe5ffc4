//! Reports in, snapshot out: the supervisor's books of every shard (their counters,
//! histograms, pushes and exits) and the [`AppSnapshot`] summed from them.

use std::collections::BTreeMap;

use super::{Supervisor, side_name};
use crate::{
    procstat,
    workload::{
        engine::ShardEvent,
        stats::{
            self,
            counters::Counters,
            report::{PushStat, WorkerReport},
            snapshot::{AppSnapshot, PushSummary, ShardKind, WorkerInfo, Workers},
        },
        sys,
    },
};

impl Supervisor {
    fn pids(&self) -> Vec<u32> {
        let mut p = vec![std::process::id()];
        p.extend(
            self.shards
                .iter()
                .filter(|s| s.handle.process && s.alive)
                .map(|s| s.handle.pid),
        );
        p
    }

    pub(super) fn rss(&self) -> u64 {
        self.pids()
            .iter()
            .filter_map(|&p| procstat::anon_rss_bytes(p))
            .sum()
    }

    pub(super) fn on_event(&mut self, ev: ShardEvent) {
        match ev {
            ShardEvent::Report(r) => self.on_report(*r),
            ShardEvent::Exited { shard, why } => {
                let stopping = self.stopping;
                let Some(s) = self.shards.get_mut(shard as usize) else {
                    return;
                };
                if let Some((u, sy)) = s
                    .handle
                    .process
                    .then(|| procstat::cpu_seconds(s.handle.pid))
                    .flatten()
                {
                    s.cpu = (u, sy);
                }
                s.alive = false;
                let lost = s.counters.open;
                if !(stopping && s.closed_all) || why != "stopped" {
                    s.exit = Some(why.clone());
                }
                if lost > 0 || s.counters.in_flight > 0 {
                    s.counters.closed.worker_lost += lost;
                    s.counters.ws_open = 0;
                    s.counters.open = 0;
                    s.counters.failures.aborted += s.counters.in_flight;
                    s.counters.in_flight = 0;
                }
                if !stopping || lost > 0 {
                    let what = if s.handle.process {
                        "worker"
                    } else {
                        "shard thread"
                    };
                    eprintln!(
                        "c1m {}: {what} {shard} (pid {}) ended ({why}); its {lost} open connections are counted as lost",
                        side_name(self.o.side),
                        s.handle.pid
                    );
                }
                // Its turn at a push is over: the next shard waiting may start.
                if self.pushing.remove(&(shard as usize)) {
                    self.dispatch_pushes();
                }
            }
        }
    }

    fn on_report(&mut self, r: WorkerReport) {
        let Some(s) = self.shards.get_mut(r.shard as usize) else {
            return;
        };
        // CPU time is read while the worker is alive: once it exits and is reaped, its
        // /proc entry is gone. Its last report (teardown done, or fatal) comes just
        // before that; the others need no read here, `snapshot` reads live workers when
        // asked (up to 120 workers × 4 reports/s would be 480 /proc reads a second).
        if s.handle.process
            && (r.closed_all || r.fatal.is_some())
            && let Some(c) = procstat::cpu_seconds(s.handle.pid)
        {
            s.cpu = c;
        }
        for w in &r.warnings {
            // Every shard hits the same wall at once: say each thing once (numbers such as
            // ports and counts differ between shards, so they do not make a new message).
            let key: String = w.chars().filter(|c| !c.is_ascii_digit()).collect();
            if self.warned.insert(key) {
                eprintln!("c1m {}: {w}", side_name(self.o.side));
            }
        }
        if let Some(f) = &r.fatal {
            eprintln!(
                "c1m {} shard {}: fatal: {f}",
                side_name(self.o.side),
                r.shard
            );
            self.fatal.get_or_insert_with(|| f.clone());
        }
        s.counters = r.counters;
        s.reported_unix_ns = r.unix_ns;
        s.report_lag_ns = sys::realtime_ns().saturating_sub(r.unix_ns);
        s.ready |= r.ready;
        s.ramp_done = r.ramp_done;
        s.closed_all = r.closed_all;
        s.mark = r.mark;
        for (name, pairs) in &r.hists {
            self.sums.record(name, pairs);
        }
        for p in r.pushes {
            s.pushes.insert(p.push_id, p);
        }
        if r.push_done.is_some() && self.pushing.remove(&(r.shard as usize)) {
            self.dispatch_pushes();
        }
        for (bin, n) in r.timeline {
            let bin = bin as usize;
            if self.timeline.len() <= bin {
                self.timeline.resize(bin + 1, 0);
            }
            self.timeline[bin] += u64::from(n);
            self.peak.changed(bin);
        }
    }

    pub(super) fn counters(&self) -> Counters {
        let mut c = Counters::default();
        for s in &self.shards {
            c.add(&s.counters);
        }
        c
    }

    pub(super) fn snapshot(&mut self) -> AppSnapshot {
        // Before anything below allocates for the answer: merged histograms made per
        // answer (13 of ~190 KiB, now kept in `sums`) were counted as the connections'
        // memory (a lone server at 4,000 WebSocket connections: 13.2 MB read here,
        // 10.7 MB by /proc).
        let rss = self.rss();
        let counters = self.counters();
        let (percentiles, histograms) = self.sums.shown();
        let mut pushes: BTreeMap<u64, PushStat> = BTreeMap::new();
        for s in &self.shards {
            for (id, p) in &s.pushes {
                pushes.entry(*id).or_default().merge(p);
            }
        }
        let (mut cpu_u, mut cpu_s) =
            procstat::cpu_seconds(std::process::id()).unwrap_or((0.0, 0.0));
        for s in self.shards.iter_mut().filter(|s| s.handle.process) {
            if s.alive
                && let Some(c) = procstat::cpu_seconds(s.handle.pid)
            {
                s.cpu = c;
            }
            cpu_u += s.cpu.0;
            cpu_s += s.cpu.1;
        }
        let open = counters.open;
        let now_ns = sys::realtime_ns();
        let lost = counters.closed.worker_lost > 0;
        AppSnapshot {
            side: side_name(self.o.side).to_owned(),
            mode: self.o.mode.name().to_owned(),
            unix_ns: now_ns,
            counts_unix_ns: counts_instant(
                now_ns,
                self.shards
                    .iter()
                    .filter(|s| s.alive)
                    .map(|s| (s.reported_unix_ns, s.report_lag_ns)),
            ),
            uptime_s: self.started.elapsed().as_secs_f64(),
            phase: self.phase.to_owned(),
            target: self.o.target,
            split: self.split.clone(),
            counters,
            workers: Workers {
                count: self.shards.len() as u32,
                alive: self.shards.iter().filter(|s| s.alive).count() as u32,
                list: self
                    .shards
                    .iter()
                    .map(|s| WorkerInfo {
                        shard: s.handle.shard,
                        pid: s.handle.pid,
                        kind: if s.handle.process {
                            ShardKind::Process
                        } else {
                            ShardKind::Thread
                        },
                        alive: s.alive,
                        open: s.counters.open,
                        exit: s.exit.clone(),
                    })
                    .collect(),
            },
            setup_steps: stats::setup_rate::setup_steps(&self.timeline, self.o.step),
            setup_rate: self.ramp.map(|(began, ended)| {
                let duration_s = match ended {
                    Some(end) => stats::setup_rate::last_connection_s(&self.timeline)
                        .unwrap_or_else(|| end.duration_since(began).as_secs_f64()),
                    None => began.elapsed().as_secs_f64(),
                };
                stats::setup_rate::SetupRate::with_peak(
                    self.o.rate,
                    // The ramp's: a churn's reopens connect after it.
                    counters.connected - counters.churn.reopened,
                    duration_s,
                    self.peak.peak(&self.timeline),
                )
            }),
            push_mark: self
                .shards
                .iter()
                .filter(|s| s.alive)
                .map(|s| s.mark)
                .min()
                .unwrap_or(0),
            pushes: pushes.into_values().map(PushSummary::from).collect(),
            rss_bytes: rss,
            rss_baseline_bytes: self.rss_baseline,
            // A lost worker took its memory and its share of the baseline with it: no
            // figure is better than a wrong one (it read 0 B).
            rss_per_connection_bytes: (open > 0 && !lost)
                .then(|| rss.saturating_sub(self.rss_baseline) as f64 / open as f64),
            cpu_user_s: cpu_u,
            cpu_sys_s: cpu_s,
            threads: None,
            open_fds: None,
            percentiles,
            histograms,
        }
    }
}

/// The instant a sum over shards describes: the mean of each shard's. A shard reports
/// every [`REPORT_EVERY_NS`] when its counters changed, so its counters are true as of its
/// last report, or as of one period ago if it had nothing new to say since, unless this
/// supervisor reads reports late (starved of CPU): then a newer report may be waiting
/// unread, and the period is pushed back by how late the last one was read. Without
/// that, a starved client's rate showed 47,657/s against a pace of 25,000/s at 1M.
fn counts_instant(now_ns: u64, reported: impl Iterator<Item = (u64, u64)>) -> u64 {
    let (sum, n) = reported.fold((0u128, 0u128), |(sum, n), (at, lag)| {
        let floor = now_ns
            .saturating_sub(crate::workload::engine::REPORT_EVERY_NS)
            .saturating_sub(lag);
        (sum + u128::from(at.max(floor).min(now_ns)), n + 1)
    });
    sum.checked_div(n)
        .and_then(|mean| u64::try_from(mean).ok())
        .unwrap_or(now_ns)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn counts_describe_the_shards_last_reports() {
        let period = crate::workload::engine::REPORT_EVERY_NS;
        let now = 10 * period;
        assert_eq!(counts_instant(now, std::iter::empty()), now);
        // Fresh reports count as they are; a quiet shard counts as one period old.
        assert_eq!(
            counts_instant(now, [(now - period / 2, 0), (0, 0)].into_iter()),
            now - period / 4 - period / 2
        );
        assert_eq!(counts_instant(now, [(now, 0)].into_iter()), now);
        // A quiet shard whose last report was read 3 periods late may have newer ones
        // waiting: its counts are as old as its last report, within that lag.
        assert_eq!(
            counts_instant(now, [(now - 5 * period, 3 * period)].into_iter()),
            now - 4 * period
        );
    }
}
