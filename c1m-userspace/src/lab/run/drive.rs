//! The phase loop of one run: setup (server up, client started, ramp, settling), idle,
//! push (through c1m's control endpoint or a foreign server's trigger) and teardown, each
//! waited for tick by tick. What ends a wait is decided in `phases.rs`.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::{
    child_args::ChildPlan,
    children::spawn_c1m,
    flags::RunArgs,
    foreign,
    journal::Role,
    lab::Lab,
    phases::{
        Limit, PUSH_STALL, Progress, SETUP_STALL, counts_agree, push_witness, server_counts_agree,
        server_established,
    },
    stall::StallWatch,
};
use crate::{
    fmt::count,
    observer::KernelView,
    workload::{config::Mode, push_trigger::PushTrigger, stats::AppSnapshot},
};

impl Lab {
    /// Ticks until `done` holds for the latest snapshots, the limit passes (error)
    /// or the user stops the run (Ok(false)).
    async fn wait_for(
        &mut self,
        what: &str,
        limit: Limit,
        done: impl Fn(Option<&AppSnapshot>, Option<&AppSnapshot>, Option<&KernelView>) -> bool,
    ) -> Result<bool> {
        let started = Instant::now();
        let mut progress = (0u64, started);
        loop {
            if !self.tick().await? {
                return Ok(false);
            }
            self.check_children()?;
            if done(
                self.last_server.as_ref(),
                self.last_client.as_ref(),
                self.kernel_view().as_ref(),
            ) {
                return Ok(true);
            }
            if let Some(c) = &self.last_client
                && c.workers.count > 0
                && c.workers.alive == 0
            {
                bail!(
                    "every client worker died during {what}: see {}",
                    self.dir.join("client.log").display()
                );
            }
            match limit {
                Limit::Total(d) if started.elapsed() > d => {
                    bail!("{what} did not finish within {:.0} s", d.as_secs_f64())
                }
                Limit::Stall(d, measure) => {
                    let done = self.progress(measure);
                    if done > progress.0 {
                        progress = (done, Instant::now());
                    } else if progress.1.elapsed() > d {
                        let step = match measure {
                            Progress::Connects => "connect finished",
                            Progress::Push(_) => "frame arrived",
                        };
                        bail!(
                            "{what} stalled: no {step} for {:.0} s ({} so far)",
                            d.as_secs_f64(),
                            count(done)
                        )
                    }
                }
                Limit::Total(_) => {}
            }
        }
    }

    /// How far a phase judged by [`Limit::Stall`] has come.
    fn progress(&self, measure: Progress) -> u64 {
        // External clients: the server's figures are the only word here.
        match (measure, &self.last_client, &self.last_server) {
            (Progress::Connects, Some(c), _) => c.counters.connected + c.counters.failures.total(),
            (Progress::Connects, None, Some(s)) => s.counters.accepted,
            (Progress::Connects, None, None) => 0,
            (Progress::Push(id), _, _) => push_witness(
                self.client_ctl.is_none(),
                self.last_server.as_ref(),
                self.last_client.as_ref(),
            )
            .and_then(|x| x.pushes.iter().find(|p| p.push_id == id))
            .map_or(0, |p| p.count),
        }
    }

    pub(super) async fn drive(&mut self, args: &RunArgs, n: u64, plan: &ChildPlan) -> Result<()> {
        // Server up?
        self.begin("setup");
        match self.foreign.as_mut() {
            Some(f) if f.owned() => {
                f.wait_listening(&args.ports.0, foreign::LISTEN_TIMEOUT)
                    .await?;
                self.record_versions();
            }
            Some(_) => {}
            None => {
                if !self
                    .wait_for(
                        "server start",
                        Limit::Total(Duration::from_secs(60)),
                        |s, _, _| s.is_some_and(|s| s.phase == "running"),
                    )
                    .await?
                {
                    return Ok(());
                }
            }
        }
        let external = self.client_ctl.is_none();
        if !external {
            let client = spawn_c1m(&plan.client_argv()?, &self.dir.join("client.log"))?;
            if let (Some(pid), Some(journal)) = (client.id(), self.journal.as_mut()) {
                journal.add(Role::Client, pid)?;
            }
            if let Some(c) = self.children.as_mut() {
                c.client = Some(client);
            }
        }
        let setup_timeout = args
            .setup_timeout
            .map_or(Limit::Stall(SETUP_STALL, Progress::Connects), Limit::Total);
        // A foreign server that stops completing connections ends the setup early.
        let watch = std::cell::RefCell::new(StallWatch::default());
        let stalled = std::cell::Cell::new(false);
        let watch_stalls = self.foreign.is_some();
        let set_up = if external {
            // The clients' hosts say nothing to this one: the kernel's count is the word.
            self.wait_for("setup (external clients)", setup_timeout, |s, _, k| {
                server_established(s, k) >= n
            })
            .await?
        } else {
            self.wait_for("setup", setup_timeout, |_, c, _| {
                let Some(c) = c else { return false };
                if c.phase == "hold" || c.counters.attempted >= n && c.counters.in_flight == 0 {
                    return true;
                }
                let pending = c.counters.connected < n;
                if watch_stalls
                    && c.phase == "ramp"
                    && watch
                        .borrow_mut()
                        .stalled(Instant::now(), c.counters.connected, pending)
                {
                    stalled.set(true);
                    return true;
                }
                false
            })
            .await?
        };
        if !set_up {
            return Ok(());
        }
        let mut notes = Vec::new();
        // Let the kernel and the app agree (accept queues drained) before calling it set up.
        let settled = if stalled.get() {
            let w = self.stall_evidence(n).describe();
            self.warn(w.clone());
            notes.push(w);
            Ok(true)
        } else {
            self.wait_for(
                "settling",
                Limit::Total(Duration::from_secs(30)),
                move |s, c, k| {
                    if external {
                        server_counts_agree(s, k)
                    } else {
                        counts_agree(s, c, k)
                    }
                },
            )
            .await
        };
        if external {
            self.peers.forget();
            let ports = self.ports.clone();
            let peers =
                tokio::task::spawn_blocking(move || crate::multihost::peers::by_peer(&ports))
                    .await
                    .unwrap_or_default();
            notes.push(format!(
                "at the end of setup: {}",
                crate::multihost::peers::line(&peers)
            ));
        }
        if let Err(e) = settled {
            let w =
                format!("setup: kernel and app counts still differed 30 s after the ramp ({e:#})");
            self.warn(w.clone());
            notes.push(w);
        }
        self.end(notes).await;
        // Each phase on disk as it ends: a reader of the run folder sees it at once.
        self.write_exports()?;
        if self.interrupted {
            return Ok(());
        }

        self.begin("idle");
        let idle_end = Instant::now() + args.idle;
        while Instant::now() < idle_end {
            if !self.tick().await? {
                return Ok(());
            }
            self.check_children()?;
        }
        self.end(Vec::new()).await;
        self.write_exports()?;

        if args.mode == Mode::Ws && args.pushes > 0 && self.trigger != PushTrigger::Control {
            self.begin("push");
            let notes = self.foreign_push(args).await?;
            self.end(notes).await;
            self.write_exports()?;
        } else if args.mode == Mode::Ws && args.pushes > 0 {
            self.begin("push");
            let mut notes = Vec::new();
            for k in 1..=u64::from(args.pushes) {
                // The trigger instant, on this box's clock (the client's), told to the
                // client under the id the server gives its k-th push (the lab is its only
                // driver), just before the trigger: fan-out starts where the push did,
                // as for a foreign server's signal.
                if self.client_ctl.is_some() {
                    let fired_at = crate::workload::sys::realtime_ns();
                    self.client_call(&format!("mark {k} {fired_at}"))
                        .await
                        .context("telling the client when the push was triggered")?;
                }
                let answer = self
                    .server_ctl
                    .call(&format!("push {}", args.push_writers))
                    .await
                    .context("asking the server to push")?;
                let push_id = serde_json::from_str::<serde_json::Value>(&answer)
                    .ok()
                    .and_then(|v| v.get("push_id")?.as_u64())
                    .with_context(|| format!("the server refused the push: {answer}"))?;
                if push_id != k && self.client_ctl.is_some() {
                    let w = format!(
                        "push {push_id}: the server numbered the lab's push {k} {push_id}, so its fan-out is from the broadcast start, not the trigger"
                    );
                    self.warn(w.clone());
                    notes.push(w);
                }
                let open = push_witness(
                    external,
                    self.last_server.as_ref(),
                    self.last_client.as_ref(),
                )
                .map(|x| {
                    if external {
                        x.counters.ws_open
                    } else {
                        x.counters.open
                    }
                })
                .unwrap_or(0);
                let reached = self
                    .wait_for(
                        "push",
                        Limit::Stall(PUSH_STALL, Progress::Push(push_id)),
                        move |s, c, _| {
                            push_witness(external, s, c).is_some_and(|x| {
                                x.pushes
                                    .iter()
                                    .any(|p| p.push_id == push_id && p.count >= open)
                            })
                        },
                    )
                    .await;
                match reached {
                    Ok(true) => {}
                    Ok(false) => return Ok(()),
                    Err(e) => {
                        let got = push_witness(
                            external,
                            self.last_server.as_ref(),
                            self.last_client.as_ref(),
                        )
                        .and_then(|c| c.pushes.iter().find(|p| p.push_id == push_id))
                        .map(|p| p.count)
                        .unwrap_or(0);
                        let w =
                            format!("push {push_id} reached {got} of {open} connections: {e:#}");
                        self.warn(w.clone());
                        notes.push(w);
                    }
                }
            }
            self.end(notes).await;
            self.write_exports()?;
        }

        self.begin("teardown");
        match &self.client_ctl {
            Some(c) => {
                let _ = c.call("close").await;
            }
            // The server closes; each client host sees its peer close and ends.
            None => {
                self.server_ctl
                    .call("close")
                    .await
                    .context("asking the server to close every connection")?;
            }
        }
        let done = self
            .wait_for(
                "teardown",
                Limit::Total(Duration::from_secs(180)),
                move |s, c, _| {
                    (external || c.is_some_and(|c| c.counters.open == 0))
                        && s.is_some_and(|s| s.counters.open == 0)
                },
            )
            .await;
        let notes = match done {
            Ok(_) => Vec::new(),
            Err(e) => {
                let w = format!("teardown: {e:#}");
                self.warn(w.clone());
                vec![w]
            }
        };
        self.end(notes).await;
        Ok(())
    }
}

impl Lab {
    /// The push phase without c1m's control endpoint: each push is marked on the client
    /// (frames carry no id), triggered, and awaited; with `none`, whatever the server
    /// sends within `--push-wait` is measured. Returns the phase's notes.
    async fn foreign_push(&mut self, args: &RunArgs) -> Result<Vec<String>> {
        let mut notes = Vec::new();
        let pushes = if self.trigger == PushTrigger::None {
            1
        } else {
            args.pushes
        };
        for id in 1..=u64::from(pushes) {
            let open = self
                .last_client
                .as_ref()
                .map(|c| c.counters.open)
                .unwrap_or(0);
            // With `none`, every connection should get `--pushes` frames in the wait.
            let want = if self.trigger == PushTrigger::None {
                open * u64::from(args.pushes)
            } else {
                open
            };
            self.client_call(&format!("mark {id} 0"))
                .await
                .context("telling the client which push comes")?;
            // Every shard must count the frames under this id before the server sends.
            if !self
                .wait_for(
                    "the client's push mark",
                    Limit::Total(Duration::from_secs(10)),
                    |_, c, _| c.is_some_and(|c| c.push_mark >= id),
                )
                .await?
            {
                return Ok(notes);
            }
            // The trigger instant, told just before it fires (the shards take commands
            // before the I/O that follows them), so fan-out starts where the push did.
            if self.trigger != PushTrigger::None {
                let fired_at = crate::workload::sys::realtime_ns();
                self.client_call(&format!("mark {id} {fired_at}"))
                    .await
                    .context("telling the client when the push was triggered")?;
            }
            let pid = self.foreign.as_ref().map(|f| f.pid).filter(|p| *p > 0);
            self.trigger
                .fire(pid)
                .await
                .with_context(|| format!("--push-trigger {}", self.trigger))?;
            let reached = self
                .wait_for("push", Limit::Total(args.push_wait), |_, c, _| {
                    c.is_some_and(|c| c.pushes.iter().any(|p| p.push_id == id && p.count >= want))
                })
                .await;
            match reached {
                Ok(true) => {}
                Ok(false) => return Ok(notes),
                Err(_) => {
                    let c = self.last_client.as_ref();
                    let got = c
                        .and_then(|c| c.pushes.iter().find(|p| p.push_id == id))
                        .map(|p| p.count)
                        .unwrap_or(0);
                    let undecodable = c.map(|c| c.counters.push_undecodable).unwrap_or(0);
                    let secs = args.push_wait.as_secs_f64();
                    let w = if got == 0 {
                        format!(
                            "push {id}: no push arrived within {secs:.0} s (--push-trigger {}, --push-format {}); frames that did not decode: {}",
                            self.trigger,
                            args.push_format,
                            count(undecodable)
                        )
                    } else {
                        format!(
                            "push {id}: {} of {} frames arrived within {secs:.0} s (--push-trigger {}); frames that did not decode: {}",
                            count(got),
                            count(want),
                            self.trigger,
                            count(undecodable)
                        )
                    };
                    self.warn(w.clone());
                    notes.push(w);
                }
            }
        }
        Ok(notes)
    }
}
