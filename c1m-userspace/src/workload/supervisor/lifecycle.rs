//! The supervisor's lifecycle: shards ready, the client's ramp → hold → close, the
//! server's run until stopped, signals, `connections: N`, and the summary at exit.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::{
    signal::unix::{SignalKind, signal},
    sync::mpsc,
    time::sleep_until,
};

use super::{Side, Supervisor, TriggerStep, side_name, summary::summary};
use crate::workload::{
    churn::ChurnStart,
    config::ShardCommand,
    control::{self, Request},
    engine::ShardEvent,
    stats::snapshot::AppSnapshot,
    sys,
};

/// How often `connections: N` is printed (the seed's handler printed every 2 s).
const PRINT_EVERY: Duration = Duration::from_secs(2);

/// How long shards get to start, and to finish after `stop`, before we give up on them.
const SHARD_GRACE: Duration = Duration::from_secs(30);

impl Supervisor {
    pub(super) fn broadcast(&self, c: ShardCommand) {
        for s in self.shards.iter().filter(|s| s.alive) {
            s.handle.send(c);
        }
    }

    fn all_dead(&self) -> bool {
        self.shards.iter().all(|s| !s.alive)
    }

    /// Waits until every shard reported ready (or died).
    async fn wait_ready(&mut self, rx: &mut mpsc::UnboundedReceiver<ShardEvent>) -> Result<()> {
        let deadline = tokio::time::Instant::now() + SHARD_GRACE;
        while self.shards.iter().any(|s| s.alive && !s.ready) {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Some(ev) => self.on_event(ev),
                    None => break,
                },
                _ = sleep_until(deadline) => bail!("shards did not start within {SHARD_GRACE:?}"),
            }
            if let Some(f) = &self.fatal {
                self.stopping = true;
                self.broadcast(ShardCommand::Stop);
                bail!("{f}");
            }
        }
        if self.all_dead() {
            bail!("every shard failed to start");
        }
        Ok(())
    }

    pub(super) async fn main(
        &mut self,
        rx: &mut mpsc::UnboundedReceiver<ShardEvent>,
    ) -> Result<AppSnapshot> {
        if !self.o.quiet {
            println!("{}", self.split);
        }
        let (ctl_tx, mut ctl_rx) = mpsc::unbounded_channel::<Request>();
        // Held until this returns: dropping it removes the socket and token files.
        let _control = match &self.o.control {
            Some(ep) => Some(
                control::serve(
                    control::Endpoint::parse(ep),
                    self.o.control_token_file.as_deref(),
                    self.o.run_id.as_deref(),
                    ctl_tx,
                )
                .await?,
            ),
            None => {
                drop(ctl_tx);
                None
            }
        };
        self.wait_ready(rx).await?;
        // Settle briefly so the baseline includes what start-up touched (listeners, stacks),
        // and what answering a stats request keeps: the allocator holds on to ~1.1 MB
        // after the first (a lone server at 0 connections: 9.1 MB, then 10.3 MB), which
        // was counted as the connections' memory.
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(self.snapshot());
        self.rss_baseline = self.rss();
        let is_client = self.o.side == Side::Client;
        if is_client && let Some(at) = self.o.start_at_unix_ns {
            let wait = at.saturating_sub(sys::realtime_ns());
            if !self.o.quiet {
                println!("waiting {:.1} s for --start-at", wait as f64 / 1e9);
            }
            tokio::time::sleep(Duration::from_nanos(wait)).await;
        }
        if is_client {
            self.phase = "ramp";
            self.ramp = Some((Instant::now(), None));
            self.broadcast(ShardCommand::Start {
                t0_mono_ns: sys::monotonic_ns(),
            });
        } else {
            self.phase = "running";
        }
        let mut sigint = signal(SignalKind::interrupt()).context("SIGINT handler")?;
        let mut sigterm = signal(SignalKind::terminate()).context("SIGTERM handler")?;
        let mut print = tokio::time::interval(PRINT_EVERY);
        print.tick().await;
        let mut sample = tokio::time::interval(Duration::from_secs(1));
        let far = tokio::time::Instant::now() + Duration::from_secs(86400 * 365);
        let mut push_tick =
            tokio::time::interval(self.o.push_every.unwrap_or(Duration::from_secs(86400)));
        push_tick.tick().await;
        // Server: stop at `duration`. Client: close at `duration` after the ramp.
        let mut deadline = match (self.o.side, self.o.duration) {
            (Side::Server, Some(d)) => tokio::time::Instant::now() + d,
            _ => far,
        };
        let mut stop_deadline = far;
        let mut signals = 0;
        let mut ctl_open = self.o.control.is_some();
        loop {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Some(ev) => {
                        self.on_event(ev);
                        if self.stopping {
                            // Shards are still finishing: give the rest more time.
                            stop_deadline = stop_deadline.max(tokio::time::Instant::now() + SHARD_GRACE);
                        }
                    }
                    None => break,
                },
                req = ctl_rx.recv(), if ctl_open => match req {
                    Some(req) => self.on_control(req),
                    None => ctl_open = false,
                },
                _ = print.tick(), if !self.o.quiet => println!("connections: {}", self.counters().open),
                _ = sample.tick(), if self.o.samples.is_some() => {
                    let snap = self.snapshot();
                    if let Some(tx) = &self.o.samples {
                        let _ = tx.send(snap);
                    }
                }
                _ = push_tick.tick(), if self.o.push_every.is_some() && !self.stopping => {
                    self.push(self.o.push_writers);
                }
                _ = sleep_until(deadline) => {
                    deadline = far;
                    if is_client { self.close() } else { self.stop() }
                }
                _ = sleep_until(stop_deadline) => {
                    eprintln!("c1m {}: shards stopped making progress for {SHARD_GRACE:?}; leaving them", side_name(self.o.side));
                    break;
                }
                _ = sigint.recv() => signals += 1,
                _ = sigterm.recv() => signals += 1,
            }
            if signals == 1 && !self.stopping {
                // First signal: a client tears down (and then exits), a server stops.
                if is_client && matches!(self.phase, "ramp" | "hold") {
                    self.close();
                } else if !(is_client && self.phase == "closing") {
                    self.stop();
                }
            } else if signals >= 2 && !self.stopping {
                self.stop();
            }
            if is_client {
                if self.phase == "ramp"
                    && self.shards.iter().filter(|s| s.alive).all(|s| s.ramp_done)
                {
                    self.phase = "hold";
                    self.end_ramp();
                    if self.o.churn == Some(ChurnStart::Hold) {
                        self.churn(true, None);
                    }
                    if self.o.push_trigger.is_some() {
                        self.broadcast(ShardCommand::Mark {
                            id: 1,
                            started_unix_ns: 0,
                        });
                        self.trigger = TriggerStep::Marked;
                    }
                    if let Some(d) = self.o.duration {
                        deadline = tokio::time::Instant::now() + d;
                    }
                }
                if self.o.end_when_peer_closes && self.phase == "hold" {
                    let c = self.counters();
                    if c.open == 0 && c.in_flight == 0 {
                        // The server closed every connection: nothing left to hold.
                        self.close();
                    }
                }
                if self.trigger == TriggerStep::Marked
                    && self.shards.iter().filter(|s| s.alive).all(|s| s.mark >= 1)
                {
                    self.fire_trigger();
                }
                if self.phase == "closing"
                    && self.shards.iter().filter(|s| s.alive).all(|s| s.closed_all)
                {
                    self.phase = "closed";
                    if !self.o.stay || signals > 0 {
                        self.stop();
                    }
                }
            }
            if self.stopping && stop_deadline == far {
                // Closing is kernel work that all shards share two cores for: ~1 s per
                // 20,000 sockets on this box under load, on top of the base grace.
                let open = self.counters().open + self.counters().in_flight;
                stop_deadline =
                    tokio::time::Instant::now() + SHARD_GRACE + Duration::from_secs(open / 20_000);
            }
            if self.all_dead() {
                break;
            }
        }
        let snap = self.snapshot();
        if let Some(p) = &self.o.stats_json {
            let json = serde_json::to_vec_pretty(&snap)?;
            std::fs::write(p, json).with_context(|| format!("write {}", p.display()))?;
        }
        if !self.o.quiet {
            print!("{}", summary(&snap));
        }
        Ok(snap)
    }

    /// The ramp's end, once: every connect done, or teardown cut it short.
    fn end_ramp(&mut self) {
        if let Some((_, ended @ None)) = &mut self.ramp {
            *ended = Some(Instant::now());
        }
    }

    /// `--churn`: every shard begins churning now (its pace's epoch), at `rate` over
    /// the client (None: the configured `--churn`), or stops.
    pub(super) fn churn(&mut self, on: bool, rate: Option<crate::workload::churn::ChurnRate>) {
        self.broadcast(ShardCommand::Churn {
            on,
            t0_mono_ns: sys::monotonic_ns(),
            rate,
        });
    }

    pub(super) fn close(&mut self) {
        self.end_ramp();
        if matches!(self.phase, "ramp" | "hold" | "starting") {
            self.phase = "closing";
            self.broadcast(ShardCommand::Close);
        }
    }

    pub(super) fn stop(&mut self) {
        if !self.stopping {
            self.stopping = true;
            if self.o.side == Side::Server {
                self.phase = "stopping";
            }
            self.broadcast(ShardCommand::Stop);
        }
    }
}
