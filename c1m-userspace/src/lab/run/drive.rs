//! The phase loop of one run: setup (server up, client started, ramp, settling), the
//! steps `phases.rs` orders (the phase list, or idle and push), each a hold (churned or
//! not) or pushes (through c1m's control endpoint or a foreign server's trigger), then
//! teardown, each waited for tick by tick. What ends a wait is decided in `phases.rs`.

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
        Action, Churning, Limit, LimitWatch, PUSH_MARK, PUSH_STALL, Progress, PushPhase,
        SERVER_START, SETTLING, Setup, Step, Switch, TEARDOWN_STALL, churn_settled,
        clients_all_dead, foreign_rounds, foreign_want, frames, local_setup, open_connections,
        progress, progress_age, push_audience, push_due, push_reached, push_witness,
        server_started, settled, setup_limit, steps, torn_down,
    },
    stall::StallWatch,
};
use crate::{
    fmt::count,
    model::phase::PhaseKind,
    observer::KernelView,
    workload::{push_trigger::PushTrigger, stats::snapshot::AppSnapshot},
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
        let mut watch = LimitWatch::new(limit, Instant::now());
        let external = self.client_ctl.is_none();
        loop {
            if !self.tick().await? {
                return Ok(false);
            }
            self.check_children()?;
            let (server, client) = (self.last_server.as_ref(), self.last_client.as_ref());
            if done(server, client, self.kernel_view().as_ref()) {
                return Ok(true);
            }
            if clients_all_dead(client) {
                bail!(
                    "every client worker died during {what}: see {}",
                    self.dir.join("client.log").display()
                );
            }
            if let Some(overrun) = watch.check(Instant::now(), |measure| {
                let now_ns = crate::workload::sys::realtime_ns();
                (
                    progress(measure, external, server, client),
                    progress_age(measure, external, server, client, now_ns),
                )
            }) {
                bail!(overrun.message(what))
            }
        }
    }

    /// The phases in their order; Ok(()) too when the user stopped the run.
    pub(super) async fn drive(&mut self, args: &RunArgs, n: u64, plan: &ChildPlan) -> Result<()> {
        if !self.setup(args, n, plan).await? {
            return Ok(());
        }
        let steps = steps(
            &args.phases,
            args.idle,
            args.workload.churn.is_some(),
            args.mode,
            args.pushes,
            &self.trigger,
        );
        // Push ids run on over the run's push phases, as the server numbers them.
        let mut pushed = 0u64;
        for step in steps {
            if !self.step(args, &step, &mut pushed).await? {
                return Ok(());
            }
        }
        self.teardown().await
    }

    /// One step between setup and teardown, recorded as its own phase. False when the
    /// user stopped the run.
    async fn step(&mut self, args: &RunArgs, step: &Step, pushed: &mut u64) -> Result<bool> {
        match step.action {
            Action::Hold { length, churn } => self.hold(step, length, churn).await,
            Action::Switched { length, switch } => self.switched(step, length, switch).await,
            Action::Push { count, every, how } => {
                self.begin(&step.name, step.kind);
                let first = *pushed + 1;
                *pushed += u64::from(count);
                let notes = match how {
                    PushPhase::Trigger => self.foreign_push(args, count, every, first).await?,
                    PushPhase::Control => {
                        match self.control_push(args, count, every, first).await? {
                            Some(notes) => notes,
                            None => return Ok(false),
                        }
                    }
                    PushPhase::Skip => Vec::new(),
                };
                self.end(notes).await;
                self.write_exports()?;
                // A stop during a trigger's wait still ends in the teardown, as before
                // (the next tick says the run stops).
                Ok(true)
            }
        }
    }

    /// Server up, client started, the ramp, then kernel and app agreeing. False when the
    /// run goes no further (the user stopped it).
    async fn setup(&mut self, args: &RunArgs, n: u64, plan: &ChildPlan) -> Result<bool> {
        // Server up?
        self.begin("setup", PhaseKind::Setup);
        match self.foreign.as_mut() {
            Some(f) if f.owned() => {
                let ready = match args.server_workers {
                    Some(workers) => foreign::Ready::Announced { workers },
                    None => foreign::Ready::Listening,
                };
                f.wait_listening(&args.ports.0, ready).await?;
                self.record_versions();
            }
            Some(_) => {}
            None => {
                if !self
                    .wait_for("server start", Limit::Total(SERVER_START), |s, _, _| {
                        server_started(s)
                    })
                    .await?
                {
                    return Ok(false);
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
        let setup_timeout = setup_limit(args.setup_timeout);
        // A foreign server that stops completing connections ends the setup early.
        let watch = std::cell::RefCell::new(StallWatch::new(args.tls.tls));
        let stalled = std::cell::Cell::new(false);
        let watch_stalls = self.foreign.is_some();
        let run_wait = self.foreign.as_ref().map(|f| f.run_wait());
        let set_up = if external {
            // The clients' hosts say nothing to this one: the kernel's count is the word.
            self.wait_for("setup (external clients)", setup_timeout, |s, _, k| {
                crate::figures::counts::server_established(k, s).is_some_and(|e| e.value >= n)
            })
            .await?
        } else {
            self.wait_for("setup", setup_timeout, |s, c, _| {
                let mut watch = watch.borrow_mut();
                let waited = run_wait.as_ref().and_then(|r| r.seconds());
                let setup = local_setup(
                    c,
                    s,
                    waited,
                    n,
                    watch_stalls.then_some(&mut *watch),
                    Instant::now(),
                );
                if setup == Setup::Stalled {
                    stalled.set(true);
                }
                setup != Setup::Ramping
            })
            .await?
        };
        if !set_up {
            return Ok(false);
        }
        let mut notes = Vec::new();
        // Let the kernel and the app agree (accept queues drained) before calling it set up.
        let settled = if stalled.get() {
            let w = self.stall_evidence(n).describe();
            self.warn(w.clone());
            notes.push(w);
            Ok(true)
        } else {
            self.wait_for("settling", Limit::Total(SETTLING), move |s, c, k| {
                settled(external, s, c, k)
            })
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
            // The run's sources are the client hosts' addresses, as this kernel saw them.
            self.record.config.sources = crate::multihost::peers::addresses(&peers);
            self.record.config.sources_reason = format!(
                "the client hosts' addresses, as the server saw them connect ({})",
                crate::multihost::peers::line(&peers)
            );
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
        Ok(!self.interrupted)
    }

    /// The connections held for `length` (churned over it as `churn` says: the phase
    /// ends once the last churns finished and kernel and app agree again). False when
    /// the user stopped the run.
    async fn hold(&mut self, step: &Step, length: Duration, churn: Churning) -> Result<bool> {
        self.begin(&step.name, step.kind);
        let mut notes = Vec::new();
        let churn_on = churn.command();
        if let Some(on) = &churn_on {
            let answer = self
                .client_call(on)
                .await
                .context("telling the client to churn")?;
            if answer.contains("\"error\"") {
                bail!("the client did not begin churning: {answer}");
            }
        }
        if !self.tick_until(Instant::now() + length).await? {
            return Ok(false);
        }
        if churn_on.is_some() {
            self.client_call("churn off")
                .await
                .context("telling the client to stop churning")?;
            let off = crate::workload::sys::realtime_ns();
            let settled = self
                .wait_for("the churn's end", Limit::Total(SETTLING), move |s, c, k| {
                    churn_settled(off, s, c, k)
                })
                .await;
            match settled {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(e) => {
                    let w = format!(
                        "{}: kernel and app counts still differed 30 s after the churn stopped ({e:#})",
                        step.name
                    );
                    self.warn(w.clone());
                    notes.push(w);
                }
            }
        }
        self.end(notes).await;
        self.write_exports()?;
        Ok(true)
    }

    /// The connections held for `length` while the client pings or sends as `switch`
    /// says; at its end the client stops, and the phase ends once every pong or echo of
    /// what it sent is in (so sent = answered, counted in the phase). False when the
    /// user stopped the run.
    async fn switched(&mut self, step: &Step, length: Duration, switch: Switch) -> Result<bool> {
        self.begin(&step.name, step.kind);
        let mut notes = Vec::new();
        let answer = self
            .client_call(&switch.on())
            .await
            .with_context(|| format!("telling the client `{}`", switch.on()))?;
        if answer.contains("\"error\"") {
            bail!("the client did not begin its {} phase: {answer}", step.name);
        }
        if !self.tick_until(Instant::now() + length).await? {
            return Ok(false);
        }
        let answer = self
            .client_call(switch.off())
            .await
            .with_context(|| format!("telling the client `{}`", switch.off()))?;
        if answer.contains("\"error\"") {
            bail!("the client did not end its {} phase: {answer}", step.name);
        }
        let off = crate::workload::sys::realtime_ns();
        let what = format!("{}'s end ({})", step.name, switch.awaited());
        match self
            .wait_for(&what, Limit::Total(SETTLING), move |_, c, _| {
                switch.settled(off, c)
            })
            .await
        {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(e) => {
                let w = format!("{}: {e:#}", step.name);
                self.warn(w.clone());
                notes.push(w);
            }
        }
        self.end(notes).await;
        self.write_exports()?;
        Ok(true)
    }

    /// Ticks (polling, drawing, watching the children) until `until`. False when the
    /// user stopped the run.
    async fn tick_until(&mut self, until: Instant) -> Result<bool> {
        while Instant::now() < until {
            if !self.tick().await? {
                return Ok(false);
            }
            self.check_children()?;
        }
        Ok(true)
    }

    /// `count` broadcasts of c1m's own server numbered from `first`, each awaited at its
    /// witness and begun `every` after the one before. The phase's notes; None when the
    /// user stopped the run.
    async fn control_push(
        &mut self,
        args: &RunArgs,
        count: u32,
        every: Option<Duration>,
        first: u64,
    ) -> Result<Option<Vec<String>>> {
        let external = self.client_ctl.is_none();
        let start = Instant::now();
        let mut notes = Vec::new();
        for (i, k) in (1..=count).zip(first..) {
            if !self.tick_until(push_due(start, every, i)).await? {
                return Ok(None);
            }
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
            let open = push_audience(
                external,
                self.last_server.as_ref(),
                self.last_client.as_ref(),
            );
            let reached = self
                .wait_for(
                    "push",
                    Limit::Stall(PUSH_STALL, Progress::Push(push_id)),
                    move |s, c, _| push_reached(external, s, c, push_id, open),
                )
                .await;
            match reached {
                Ok(true) => {}
                Ok(false) => return Ok(None),
                Err(e) => {
                    let got = frames(
                        push_witness(
                            external,
                            self.last_server.as_ref(),
                            self.last_client.as_ref(),
                        ),
                        push_id,
                    );
                    let w = format!("push {push_id} reached {got} of {open} connections: {e:#}");
                    self.warn(w.clone());
                    notes.push(w);
                }
            }
        }
        Ok(Some(notes))
    }

    /// Every connection closed: by the lab's client, or by the server for clients on
    /// other hosts.
    async fn teardown(&mut self) -> Result<()> {
        let external = self.client_ctl.is_none();
        self.begin("teardown", PhaseKind::Teardown);
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
        let open_at_start = open_connections(self.last_server.as_ref(), self.last_client.as_ref());
        let limit = Limit::Stall(TEARDOWN_STALL, Progress::Closes(open_at_start));
        let done = self
            .wait_for("teardown", limit, move |s, c, _| torn_down(external, s, c))
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
    /// The push phase without c1m's control endpoint: each of `count` pushes, numbered
    /// from `first`, is marked on the client (frames carry no id), triggered `every`
    /// after the one before, and awaited; with `none`, whatever the server sends within
    /// `--push-wait` is measured. Returns the phase's notes.
    async fn foreign_push(
        &mut self,
        args: &RunArgs,
        pushes_asked: u32,
        every: Option<Duration>,
        first: u64,
    ) -> Result<Vec<String>> {
        let mut notes = Vec::new();
        let start = Instant::now();
        let pushes = foreign_rounds(&self.trigger, pushes_asked);
        for (i, id) in (1..=pushes).zip(first..) {
            if !self.tick_until(push_due(start, every, i)).await? {
                return Ok(notes);
            }
            let open = self
                .last_client
                .as_ref()
                .map(|c| c.counters.open)
                .unwrap_or(0);
            let want = foreign_want(&self.trigger, open, pushes_asked);
            self.client_call(&format!("mark {id} 0"))
                .await
                .context("telling the client which push comes")?;
            // Every shard must count the frames under this id before the server sends.
            if !self
                .wait_for(
                    "the client's push mark",
                    Limit::Total(PUSH_MARK),
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
            // A slow server is measured, not cut: the seeds' Node took 25.8 s to reach 1M
            // on this box. Only --push-trigger none waits a fixed time (it may never push).
            let limit = match self.trigger {
                PushTrigger::None => Limit::Total(args.push_wait),
                _ => Limit::Stall(args.push_wait, Progress::Push(id)),
            };
            let reached = self
                .wait_for("push", limit, |s, c, _| push_reached(false, s, c, id, want))
                .await;
            match reached {
                Ok(true) => {}
                Ok(false) => return Ok(notes),
                Err(_) => {
                    let c = self.last_client.as_ref();
                    let got = frames(c, id);
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
                            "push {id}: {} of {} frames arrived, then none for {secs:.0} s (--push-wait; --push-trigger {}); frames that did not decode: {}",
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
