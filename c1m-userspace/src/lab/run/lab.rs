//! The lab while a run goes on: its children's control endpoints, the observer, the live
//! view and the record. Each tick polls both sides and the kernel, samples, redraws and
//! rewrites the run folder now and then; a phase is opened and closed on fresh answers.
//! The order of the phases is `drive.rs`.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use super::{
    children::{Children, stats, stats_within},
    ctl::Ctl,
    foreign::{self, ForeignServer},
    journal::{JournalFile, Role},
    stall::StallEvidence,
    verdict,
};
use crate::{
    figures::{FiguresBuilder, Rows, counts, phase_latency},
    lab::live::Live,
    model::{
        RunRecord, ServerShape,
        phase::{AppSide, Phase, PhaseKind, ProcessUsage},
    },
    observer::{KernelView, ObserverHandle},
    workload::{
        config::Mode,
        push_format::PushFormat,
        push_trigger::PushTrigger,
        stats::{counters::Heartbeats, snapshot::AppSnapshot},
    },
};

/// The live view's period: it redraws twice a second.
const TICK: Duration = Duration::from_millis(500);

/// How long a tick waits for the apps' and the kernel's answers before it draws with what
/// it has. Under a full ramp on two cores, a supervisor's stats answer or a socket walk
/// competes with ~120 busy workers for CPU and can take seconds (a 1M ramp froze the view
/// for 40 s while the observer walked 600k sockets): the view must keep moving, and the
/// answer is taken at a later tick.
const TICK_WAIT: Duration = Duration::from_millis(250);

/// A poll that may outlive the tick that started it.
pub(super) struct Pending<T> {
    task: Option<tokio::task::JoinHandle<Option<T>>>,
}

impl<T: Send + 'static> Pending<T> {
    pub(super) fn new() -> Self {
        Pending { task: None }
    }

    /// Starts a poll unless one is still under way.
    fn start_if_idle(
        &mut self,
        start: impl FnOnce() -> Option<tokio::task::JoinHandle<Option<T>>>,
    ) {
        if self.task.is_none() {
            self.task = start();
        }
    }

    /// The poll's answer if it comes by `deadline`; otherwise it stays pending.
    async fn ready_by(&mut self, deadline: tokio::time::Instant) -> Option<T> {
        let task = self.task.as_mut()?;
        let answer = tokio::time::timeout_at(deadline, task).await.ok()?;
        self.task = None;
        answer.ok().flatten()
    }

    /// Drops a poll under way: its answer would be older than the one about to be taken.
    pub(super) fn forget(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// A phase being measured, with the CPU readings it started from.
pub(super) struct PhaseStart {
    phase: Phase,
    server: Option<AppSnapshot>,
    client: Option<AppSnapshot>,
    own_cpu: (f64, f64),
    /// Tcp OutSegs at the phase's start.
    out_segs: Option<u64>,
}

pub(super) struct Lab {
    pub(super) record: RunRecord,
    pub(super) dir: PathBuf,
    pub(super) observer: Option<ObserverHandle>,
    pub(super) kernel: Option<KernelView>,
    pub(super) live: Live,
    pub(super) figures: FiguresBuilder,
    pub(super) rows: Rows,
    pub(super) server_ctl: Ctl,
    /// None: the clients are on other hosts.
    pub(super) client_ctl: Option<Ctl>,
    /// External clients: connections per peer address, read now and then.
    pub(super) peers: Pending<std::collections::BTreeMap<std::net::IpAddr, u64>>,
    pub(super) peers_at: Option<Instant>,
    /// The server's ports (whose peers are counted) and the last line said about them.
    pub(super) ports: Vec<u16>,
    pub(super) peers_line: Option<String>,
    pub(super) last_server: Option<AppSnapshot>,
    pub(super) last_client: Option<AppSnapshot>,
    pub(super) server_poll: Pending<AppSnapshot>,
    pub(super) client_poll: Pending<AppSnapshot>,
    pub(super) kernel_poll: Pending<KernelView>,
    pub(super) phase_start: Option<PhaseStart>,
    pub(super) interrupted: bool,
    pub(super) last_write: Instant,
    pub(super) children: Option<Children>,
    /// What a `kill -9` would leave: children and workers are added as they start.
    pub(super) journal: Option<JournalFile>,
    /// A server c1m did not write; its app side is built from the client's snapshot.
    pub(super) foreign: Option<ForeignServer>,
    pub(super) trigger: PushTrigger,
    pub(super) push_format: PushFormat,
    pub(super) mode: Mode,
    /// Connections asked for.
    pub(super) target: u64,
    /// The most TIME_WAIT sockets per side at once since the phase began (the phase
    /// records it: churn's TIME_WAIT growth).
    pub(super) time_wait_peak: Option<crate::model::phase::TimeWaitPeak>,
}

impl Lab {
    pub(super) fn kernel_view(&self) -> Option<KernelView> {
        self.kernel.clone()
    }

    /// What a foreign server said it runs on, once it said so.
    pub(super) fn record_versions(&mut self) {
        let (Some(f), Some(info)) = (&self.foreign, self.record.server_info.as_mut()) else {
            return;
        };
        if info.runtime.is_none()
            && info.library.is_none()
            && let Some(v) = f.reported_versions()
        {
            info.runtime = v.runtime;
            info.library = v.library;
        }
    }

    /// A foreign server's side: its process tree now, its connections as the client
    /// saw them last.
    fn foreign_snapshot(&mut self) {
        if let Some(f) = self.foreign.as_mut() {
            self.last_server =
                Some(f.snapshot(self.last_client.as_ref(), self.mode.name(), self.target));
        }
    }

    /// One tick: poll both sides, sample, redraw, export now and then. Returns false
    /// when the user asked to stop.
    pub(super) async fn tick(&mut self) -> Result<bool> {
        // All three asked at once, so answers that come back in time describe one moment.
        let started = tokio::time::Instant::now();
        let deadline = started + TICK_WAIT;
        // A poll left pending may take this long before it counts as lost.
        const POLL_LIMIT: Duration = Duration::from_secs(30);
        let ctl = self.server_ctl.clone();
        let own = self.foreign.is_none();
        self.server_poll.start_if_idle(|| {
            own.then(|| tokio::spawn(async move { stats_within(&ctl, POLL_LIMIT).await }))
        });
        if let Some(ctl) = self.client_ctl.clone() {
            self.client_poll.start_if_idle(|| {
                Some(tokio::spawn(
                    async move { stats_within(&ctl, POLL_LIMIT).await },
                ))
            });
        }
        if let Some(observer) = &self.observer {
            self.kernel_poll
                .start_if_idle(|| observer.start_request(false));
        }
        self.poll_peers().await;
        let (server, client, kernel) = tokio::join!(
            self.server_poll.ready_by(deadline),
            self.client_poll.ready_by(deadline),
            self.kernel_poll.ready_by(deadline),
        );
        if server.is_some() {
            self.last_server = server;
        }
        if client.is_some() {
            self.last_client = client;
        }
        if kernel.is_some() {
            self.kernel = kernel;
        }
        self.foreign_snapshot();
        if self
            .last_client
            .as_ref()
            .is_some_and(|c| c.counters.push_undecodable > 0)
        {
            // Once (warnings are kept unique); the count is in the summary.
            self.warn(format!(
                "frames from the server did not decode as --push-format {} (counted as push_undecodable)",
                self.push_format
            ));
        }
        let kernel = self.kernel_view();
        let phase = self
            .phase_start
            .as_ref()
            .map(|p| p.phase.name.clone())
            .unwrap_or_default();
        let (own_user, own_sys) = crate::host::own_cpu();
        let mut figures = self.figures.build(
            crate::util::unix_ms_now(),
            kernel.as_ref(),
            self.last_server.as_ref(),
            self.last_client.as_ref(),
            Some(own_user + own_sys),
            Some(crate::host::mem_available()),
        );
        self.clients_elsewhere(&mut figures);
        if let (Some(s), Some(c)) = (
            figures.server.kernel_time_wait,
            figures.client.kernel_time_wait,
        ) {
            let peak = self.time_wait_peak.get_or_insert_default();
            peak.server = peak.server.max(s);
            peak.client = peak.client.max(c);
        }
        if let Some(sample) = self.rows.row(
            &figures,
            &phase,
            (crate::host::own_rss(), own_user + own_sys),
        ) {
            self.record.samples.push(sample);
        }
        self.live.observe(
            &self.record,
            kernel,
            self.last_server.clone(),
            self.last_client.clone(),
            figures,
            &phase,
        );
        if self.last_write.elapsed() > Duration::from_secs(10) {
            self.write_exports()?;
        }
        let rest = TICK.saturating_sub(started.elapsed());
        let quit = self.live.poll_quit(rest).await?;
        if quit {
            self.interrupted = true;
        }
        Ok(!quit)
    }

    /// External clients: this host's kernel has no client side (it read "kernel 0 ≠ app
    /// n/a"), so the client rows become one that says where the clients are counted,
    /// and the client side's kernel figures are missing (`n/a` in the plain lines,
    /// absent from the samples), not a 0 this host never measured.
    fn clients_elsewhere(&self, figures: &mut crate::figures::Figures) {
        if self.client_ctl.is_some() {
            return;
        }
        figures.client = crate::figures::SideFigures::default();
        use crate::{figures::kernel_vs_app, model::Source};
        figures
            .kernel_vs_app
            .retain(|r| kernel_vs_app::app_source(&r.what) != Some(Source::Client));
        figures
            .kernel_vs_app
            .push(kernel_vs_app::client_hosts_elsewhere());
    }

    /// External clients: who is connected, by peer address, every 2 s on a blocking
    /// thread (a /proc/net/tcp read grows with the connections); said when it changes.
    async fn poll_peers(&mut self) {
        if self.client_ctl.is_some() {
            return;
        }
        if self
            .peers_at
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(2))
        {
            let ports = self.ports.clone();
            let mut started = false;
            self.peers.start_if_idle(|| {
                started = true;
                Some(tokio::task::spawn_blocking(move || {
                    Some(crate::multihost::peers::by_peer(&ports))
                }))
            });
            if started {
                self.peers_at = Some(Instant::now());
            }
        }
        let now = tokio::time::Instant::now();
        if let Some(p) = self.peers.ready_by(now).await {
            let line = crate::multihost::peers::line(&p);
            if self.peers_line.as_ref() != Some(&line) {
                eprintln!("c1m run: {line}");
                self.peers_line = Some(line);
            }
        }
    }

    pub(super) fn write_exports(&mut self) -> Result<()> {
        self.record.kernel = self.kernel_view();
        self.record.server = self.last_server.clone();
        self.record.client = self.last_client.clone();
        self.last_write = Instant::now();
        crate::report::write_run(&self.dir, &self.record)
            .with_context(|| format!("writing the run folder {}", self.dir.display()))?;
        self.live.write_intervals(&self.dir)?;
        Ok(())
    }

    pub(super) fn begin(&mut self, name: &str, kind: PhaseKind) {
        let phase = Phase {
            name: name.to_owned(),
            kind: Some(kind),
            started_unix_ms: crate::util::unix_ms_now(),
            ..Phase::default()
        };
        self.phase_start = Some(PhaseStart {
            phase,
            server: self.last_server.clone(),
            client: self.last_client.clone(),
            own_cpu: crate::host::own_cpu(),
            out_segs: out_segs(),
        });
    }

    /// Closes the phase on answers taken now, app first and then the kernel after a full
    /// walk, so the phase's kernel-vs-app rows compare one moment.
    pub(super) async fn end(&mut self, notes: Vec<String>) {
        // The phase ends here; the walk below takes seconds at 1M (2M sockets) and would
        // otherwise count as phase time: it was most of the observer's measured "cost"
        // on setup (+8–14% at 1M).
        let ended_unix_ms = crate::util::unix_ms_now();
        self.server_poll.forget();
        self.client_poll.forget();
        self.kernel_poll.forget();
        if self.foreign.is_none()
            && let Some(s) = stats(&self.server_ctl).await
        {
            self.last_server = Some(s);
        }
        if let Some(ctl) = &self.client_ctl
            && let Some(c) = stats(ctl).await
        {
            self.last_client = Some(c);
        }
        self.foreign_snapshot();
        // The lab's own CPU is the phase's up to here: the walk below is outside the
        // phase as its seconds are (setup's "c1m cpu" held the walk's 6-8 s at 1.8M).
        let own_cpu = crate::host::own_cpu();
        let mut end_walk_s = 0.0;
        if let Some(observer) = &self.observer {
            let walk_started = Instant::now();
            if let Some(view) = observer.snapshot_fresh().await {
                self.kernel = Some(view);
            }
            end_walk_s = walk_started.elapsed().as_secs_f64();
        }
        self.close_phase(notes, ended_unix_ms, end_walk_s, own_cpu);
    }

    /// The server's processes and threads now: a foreign server's tree, else the
    /// distinct processes of c1m's own server's shards (a thread shard's is the
    /// supervisor's) and their threads from /proc.
    fn server_shape(&mut self) -> Option<ServerShape> {
        if let Some(f) = self.foreign.as_mut() {
            let u = f.usage();
            return (u.processes > 0).then_some(ServerShape {
                processes: u.processes,
                threads: u.threads,
            });
        }
        let mut pids: Vec<u32> = self
            .last_server
            .as_ref()?
            .workers
            .list
            .iter()
            .filter(|w| w.alive)
            .map(|w| w.pid)
            .collect();
        pids.sort_unstable();
        pids.dedup();
        (!pids.is_empty()).then(|| ServerShape {
            processes: pids.len() as u64,
            threads: pids
                .iter()
                .filter_map(|p| crate::procstat::threads(*p))
                .sum(),
        })
    }

    /// `own_cpu`: the lab's CPU (user, sys) when the phase ended.
    fn close_phase(
        &mut self,
        notes: Vec<String>,
        ended_unix_ms: u64,
        end_walk_s: f64,
        own_cpu: (f64, f64),
    ) {
        let Some(PhaseStart {
            mut phase,
            server: s0,
            client: c0,
            own_cpu: o0,
            out_segs: segs0,
        }) = self.phase_start.take()
        else {
            return;
        };
        phase.ended_unix_ms = ended_unix_ms.max(phase.started_unix_ms);
        phase.duration_s = (phase.ended_unix_ms - phase.started_unix_ms) as f64 / 1000.0;
        phase.end_walk_s = end_walk_s;
        phase.server = usage(s0.as_ref(), self.last_server.as_ref());
        phase.client = usage(c0.as_ref(), self.last_client.as_ref());
        // Both sides' heartbeat counts over the phase: end less start.
        let beats = |f: fn(&Heartbeats) -> u64| {
            let of = |s: &Option<AppSnapshot>| s.as_ref().map_or(0, |s| f(&s.counters.heartbeat));
            (of(&self.last_server) + of(&self.last_client)).saturating_sub(of(&s0) + of(&c0))
        };
        phase.heartbeat_pings = beats(|h| h.pings);
        phase.heartbeat_pongs = beats(|h| h.pongs);
        phase.heartbeat_late_pongs = beats(|h| h.late_pongs);
        phase.heartbeat_missed = beats(|h| h.missed);
        let churned = |s: &Option<AppSnapshot>| s.as_ref().map_or(0, |s| s.counters.churn.closed);
        phase.churned = churned(&self.last_client).saturating_sub(churned(&c0));
        phase.time_wait_peak = self.time_wait_peak.take();
        let msgs = |s: &Option<AppSnapshot>| {
            s.as_ref().map_or((0, 0), |s| {
                (s.counters.messages.sent, s.counters.messages.received)
            })
        };
        let (m0, m1) = (msgs(&c0), msgs(&self.last_client));
        phase.messages_sent = m1.0.saturating_sub(m0.0);
        phase.messages_received = m1.1.saturating_sub(m0.1);
        phase.tcp_out_segs = segs0.zip(out_segs()).map(|(a, b)| b.saturating_sub(a));
        let pushed = |s: &Option<AppSnapshot>| {
            s.as_ref()
                .map_or(0, |s| s.counters.server_messages.received)
        };
        phase.server_messages_received = pushed(&self.last_client).saturating_sub(pushed(&c0));
        let o1 = own_cpu;
        phase.observer = ProcessUsage {
            cpu_user_s: o1.0 - o0.0,
            cpu_sys_s: o1.1 - o0.1,
            rss_bytes: crate::host::own_rss(),
            ..ProcessUsage::default()
        };
        let kernel = self.kernel_view();
        // The same figures as a tick's, rates included: the live view draws them as the
        // phase's last, so its last value of each figure is the one recorded here.
        let (own_user, own_sys) = crate::host::own_cpu();
        let mut figures = self.figures.build(
            crate::util::unix_ms_now(),
            kernel.as_ref(),
            self.last_server.as_ref(),
            self.last_client.as_ref(),
            Some(own_user + own_sys),
            Some(crate::host::mem_available()),
        );
        self.clients_elsewhere(&mut figures);
        // The phase ended on a full walk, so this is the walk's figure, not a derived one.
        phase.kernel_socket_bytes = figures.kernel_socket_bytes;
        phase.box_mem_available_bytes = crate::host::mem_available();
        phase.kernel_vs_app = figures.kernel_vs_app.clone();
        phase.notes = notes;
        // Each side's latency over the phase, from the answers the phase began and
        // ended on (a phase that cannot have it says why, and the run goes on).
        for (side, start, end) in [
            (AppSide::Client, &c0, &self.last_client),
            (AppSide::Server, &s0, &self.last_server),
        ] {
            let Some(end) = end else { continue };
            match phase_latency::between(side, start.as_ref(), end) {
                Ok(l) => phase.latency.extend(l),
                Err(e) => phase.notes.push(format!(
                    "{} latency over the phase not recorded: {e}",
                    side.name()
                )),
            }
        }
        // Every connection open: the processes and threads the server holds them with.
        if phase.kind == Some(PhaseKind::Setup) {
            let shape = self.server_shape();
            if let Some(info) = self.record.server_info.as_mut() {
                info.shape = shape;
            }
        }
        // Figures per connection are taken when everything is held and idle; after idle,
        // the live view shows them instead of figures of connections pushed to or closing.
        let held_phase = phase.name == "idle" || phase.kind == Some(PhaseKind::Hold);
        let held = held_phase || phase.kind == Some(PhaseKind::Setup);
        if held {
            self.record.per_connection = figures.per_connection.clone();
        }
        let name = phase.name.clone();
        self.record.phases.push(phase);
        self.live.phase_end(
            &self.record,
            kernel,
            self.last_server.clone(),
            self.last_client.clone(),
            figures,
            &name,
            held_phase,
        );
    }

    /// Fails with the child's last words when the server or the client has exited;
    /// warns of a worker that died; journals workers as they appear.
    pub(super) fn check_children(&mut self) -> Result<()> {
        let tearing_down = self
            .phase_start
            .as_ref()
            .is_some_and(|p| p.phase.kind == Some(PhaseKind::Teardown));
        let mut news = Vec::new();
        for (side, role, snap) in [
            ("server", Role::ServerWorker, &self.last_server),
            ("client", Role::ClientWorker, &self.last_client),
        ] {
            let Some(snap) = snap else { continue };
            if let Some(journal) = self.journal.as_mut() {
                for w in snap
                    .workers
                    .list
                    .iter()
                    .filter(|w| w.kind == crate::workload::stats::snapshot::ShardKind::Process)
                {
                    journal.add(role, w.pid)?;
                }
            }
            if !tearing_down {
                news.extend(verdict::worker_deaths(side, snap));
            }
        }
        for w in news {
            self.warn(w);
        }
        if let Some(f) = self.foreign.as_mut() {
            if f.owned()
                && let Some(journal) = self.journal.as_mut()
            {
                for &pid in f.seen.iter().filter(|&&p| p != f.pid) {
                    journal.add(Role::ServerWorker, pid)?;
                }
            }
            if let Some(status) = f.exited() {
                bail!(
                    "the server exited early ({status}); its stderr ends: {} (full log: {})",
                    f.stderr_tail(),
                    self.dir.join(foreign::STDERR_LOG).display()
                );
            }
        }
        let Some(children) = self.children.as_mut() else {
            return Ok(());
        };
        let mut exited = Vec::new();
        if let Some(Ok(Some(status))) = children.server.as_mut().map(|s| s.try_wait()) {
            exited.push(("server", status));
        }
        if let Some(Ok(Some(status))) = children.client.as_mut().map(|c| c.try_wait()) {
            exited.push(("client", status));
        }
        if let Some((side, status)) = exited.first() {
            let log = self.dir.join(format!("{side}.log"));
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            let last = tail
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no output");
            bail!(
                "the {side} exited early ({status}): {last} (full log: {})",
                log.display()
            );
        }
        Ok(())
    }

    /// Teardown of whatever is still up, whatever happened: c1m's children asked to stop
    /// and awaited (10 s each), a foreign server stopped.
    pub(super) async fn stop_servers_and_clients(&mut self) {
        if let Some(c) = &self.client_ctl {
            let _ = c.call("stop").await;
        }
        if self.foreign.is_none() {
            let _ = self.server_ctl.call("stop").await;
        }
        let mut children = self.children.take();
        if let Some(c) = children.as_mut().and_then(|c| c.client.as_mut()) {
            let _ = tokio::time::timeout(Duration::from_secs(10), c.wait()).await;
        }
        if let Some(s) = children.as_mut().and_then(|c| c.server.as_mut()) {
            let _ = tokio::time::timeout(Duration::from_secs(10), s.wait()).await;
        }
        drop(children);
        if let Some(f) = self.foreign.as_mut() {
            f.stop(foreign::STOP_GRACE).await;
        }
    }

    /// Records bad news once: summary.json, the live view's notes, the report's top
    /// line and, at the end, stderr; any warning makes the run "degraded".
    pub(super) fn warn(&mut self, w: String) {
        if !self.record.warnings.contains(&w) {
            self.record.warnings.push(w);
        }
    }

    /// The run's losses, from the last snapshots, as warnings.
    pub(super) fn conclude(&mut self, n: u64) {
        for w in verdict::losses(n, self.last_server.as_ref(), self.last_client.as_ref()) {
            self.warn(w);
        }
    }
}

impl Lab {
    /// A line to the lab's own client (external clients have no endpoint here).
    pub(super) async fn client_call(&self, line: &str) -> Result<String> {
        match &self.client_ctl {
            Some(c) => c.call(line).await,
            None => bail!("no client on this box to tell {line:?}"),
        }
    }

    /// What the kernel, the client and the server's log say about a stalled setup.
    pub(super) fn stall_evidence(&self, n: u64) -> StallEvidence {
        let client = self.last_client.as_ref();
        let c = client.map(|c| c.counters).unwrap_or_default();
        let k = self.kernel_view();
        StallEvidence {
            connected: c.connected,
            attempted: c.attempted,
            asked: n,
            unanswered: k
                .as_ref()
                .and_then(|k| counts::unanswered(k, client))
                .map(|x| x.value),
            accept_queue: k
                .as_ref()
                .and_then(counts::accept_queue_waiting)
                .map(|x| x.value),
            server_fds: self.last_server.as_ref().and_then(|s| s.open_fds),
            accept_queue_overflows: k
                .as_ref()
                .map(counts::accept_queue_overflows)
                .map(|x| x.value),
            nofile: self.foreign.as_ref().and_then(ForeignServer::nofile),
            fds_per_process: self
                .foreign
                .as_ref()
                .and_then(ForeignServer::fds_per_process),
            emfile_line: self
                .foreign
                .as_ref()
                .and_then(ForeignServer::fd_exhaustion_line),
        }
    }
}

/// Tcp OutSegs of this namespace now (a phase's traffic in segments).
fn out_segs() -> Option<u64> {
    crate::observer::mib::read().ok().map(|m| m.out_segs)
}

fn usage(before: Option<&AppSnapshot>, after: Option<&AppSnapshot>) -> ProcessUsage {
    let (u0, s0) = before
        .map(|b| (b.cpu_user_s, b.cpu_sys_s))
        .unwrap_or((0.0, 0.0));
    match after {
        Some(a) => ProcessUsage {
            cpu_user_s: (a.cpu_user_s - u0).max(0.0),
            cpu_sys_s: (a.cpu_sys_s - s0).max(0.0),
            rss_bytes: a.rss_bytes,
            threads: a.threads,
            open_fds: a.open_fds,
        },
        None => ProcessUsage::default(),
    }
}
