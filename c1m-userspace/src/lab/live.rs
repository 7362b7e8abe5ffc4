//! The running lab's outputs: the terminal UI (or a plain line per second when stdout
//! is not a terminal), the optional Prometheus endpoint, and the interval logs fed
//! from every polled snapshot. `c1m run` and `c1m top` drive it once per tick. After a
//! run the view ends first and the endpoint may stay for a final scrape
//! ([`Live::linger`]), with the phase `done` and the run's outcome.

use std::{
    io::IsTerminal,
    net::SocketAddr,
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, Result};

use crate::figures::Figures;
use crate::model::{Outcome, RunInfo, RunRecord};
use crate::report::hlog::IntervalRecorder;
use crate::view::{
    live_state::{Held, LiveState},
    plain, prometheus,
    tui::terminal::Tui,
};
use crate::{observer::KernelView, workload::stats::snapshot::AppSnapshot};

/// How many samples of history the view keeps (10 minutes at one per second).
const HISTORY: usize = 600;

pub(crate) enum LiveOutput {
    Tui(Tui),
    Plain {
        last: Option<Instant>,
    },
    /// One JSON object per second: the phase and the [`Figures`], as `c1m observe --json`.
    Json {
        last: Option<Instant>,
    },
}

impl LiveOutput {
    /// JSON lines when asked; else the TUI on a terminal unless `plain`; plain lines
    /// otherwise (CI, pipes).
    pub(crate) fn choose(plain: bool, json: bool) -> Self {
        if json {
            return LiveOutput::Json { last: None };
        }
        if !plain && std::io::stdout().is_terminal() {
            match Tui::start() {
                Ok(t) => return LiveOutput::Tui(t),
                Err(e) => eprintln!("c1m: live view unavailable ({e}); printing plain lines"),
            }
        }
        LiveOutput::Plain { last: None }
    }
}

/// Where the Prometheus endpoint listens.
#[derive(Debug)]
pub(crate) enum MetricsAt {
    /// `--metrics-addr`, bound by [`Live::new`].
    Addr(SocketAddr),
    /// Bound before the run moved into a network namespace of its own, so it answers
    /// on the addresses of the namespace the user started in.
    Bound(std::net::TcpListener),
}

pub(crate) struct Live {
    out: Option<LiveOutput>,
    state: Arc<Mutex<LiveState>>,
    /// Fixed at start: every state shown carries it.
    info: RunInfo,
    metrics_stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// Where the endpoint answers (the address it bound), while it does.
    metrics_addr: Option<SocketAddr>,
    intervals: IntervalRecorder,
    /// The figures at the end of idle, once it is over (see [`LiveState::held`]).
    held: Option<Held>,
    signalled: Arc<AtomicBool>,
    started: Instant,
}

impl Live {
    pub(crate) async fn new(
        out: LiveOutput,
        metrics: Option<MetricsAt>,
        detail: prometheus::Detail,
        title: &str,
        info: RunInfo,
        started_unix_ms: u64,
    ) -> Result<Self> {
        let state = Arc::new(Mutex::new(LiveState {
            title: title.to_owned(),
            info: info.clone(),
            ..LiveState::default()
        }));
        let mut metrics_addr = None;
        let metrics_stop = match metrics {
            Some(at) => {
                // Bind now, so a bad address fails the command before anything starts.
                let listener = match at {
                    MetricsAt::Addr(addr) => prometheus::bind(addr).await?,
                    MetricsAt::Bound(l) => {
                        l.set_nonblocking(true)?;
                        tokio::net::TcpListener::from_std(l)?
                    }
                };
                metrics_addr = listener.local_addr().ok();
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                let state = state.clone();
                tokio::spawn(async move {
                    let _ = prometheus::serve_listener(listener, state, detail, rx).await;
                });
                Some(tx)
            }
            None => None,
        };
        // SIGTERM, SIGHUP (and SIGINT when no TUI owns the keyboard) end the run
        // gracefully: the process's one flag, which `c1m run` installed before it
        // touched anything.
        let signalled = crate::util::shutdown_flag().context("installing signal handlers")?;
        Ok(Self {
            out: Some(out),
            state,
            info,
            metrics_stop,
            metrics_addr,
            intervals: IntervalRecorder::new(started_unix_ms),
            held: None,
            signalled,
            started: Instant::now(),
        })
    }

    /// Takes the latest of everything and redraws.
    pub(crate) fn observe(
        &mut self,
        record: &RunRecord,
        kernel: Option<KernelView>,
        server: Option<AppSnapshot>,
        client: Option<AppSnapshot>,
        figures: Figures,
        phase: &str,
    ) {
        let snapshot = self.update(record, kernel, server, client, figures, phase);
        if let Some(s) = snapshot {
            self.draw(&s, false);
        }
    }

    /// A phase's end, drawn (and printed as a line, whatever the second) with the figures
    /// the run records for it, so the last live value of each figure in a phase is the
    /// run's. With `hold`, these figures' memory per connection is shown from now on
    /// (the end of idle: after it, connections are pushed to and closed).
    #[allow(clippy::too_many_arguments)] // the sources of a tick, as `observe` takes them
    pub(crate) fn phase_end(
        &mut self,
        record: &RunRecord,
        kernel: Option<KernelView>,
        server: Option<AppSnapshot>,
        client: Option<AppSnapshot>,
        figures: Figures,
        phase: &str,
        hold: bool,
    ) {
        if hold {
            self.held = Some(Held {
                phase: phase.to_owned(),
                figures: figures.clone(),
            });
        }
        if let Some(mut s) = self.update(record, kernel, server, client, figures, phase) {
            s.phase_end = true;
            self.draw(&s, true);
        }
    }

    /// Stores the latest of everything; returns a copy to draw.
    fn update(
        &mut self,
        record: &RunRecord,
        kernel: Option<KernelView>,
        server: Option<AppSnapshot>,
        client: Option<AppSnapshot>,
        figures: Figures,
        phase: &str,
    ) -> Option<LiveState> {
        for (side, snap) in [("server", &server), ("client", &client)] {
            if let Some(snap) = snap {
                // A broken histogram blob is a bug worth a note, not a dead run.
                if let Err(e) = self.intervals.observe(side, snap) {
                    eprintln!("c1m: interval log for {side}: {e}");
                }
            }
        }
        let Ok(mut state) = self.state.lock() else {
            return None;
        };
        state.phase = phase.to_owned();
        state.target = record.config.connections;
        state.elapsed_s = self.started.elapsed().as_secs_f64();
        state.kernel = kernel;
        state.server = server;
        state.client = client;
        state.figures = figures;
        state.held = self.held.clone();
        let skip = record.samples.len().saturating_sub(HISTORY);
        state.history = record.samples[skip..].to_vec();
        state.notes = record.warnings.clone();
        Some(state.clone())
    }

    /// Shows `state` as is (for `c1m top`, which builds its own).
    pub(crate) fn show(&mut self, mut state: LiveState) {
        state.info = self.info.clone();
        if let Ok(mut s) = self.state.lock() {
            *s = state.clone();
        }
        self.draw(&state, false);
    }

    /// Redraws; a plain or JSON line is printed at most once a second unless `now`.
    fn draw(&mut self, state: &LiveState, now: bool) {
        match self.out.as_mut() {
            Some(LiveOutput::Tui(tui)) => {
                if let Err(e) = tui.draw(state) {
                    // A terminal that stops working: fall back, keep the run going.
                    self.out = Some(LiveOutput::Plain { last: None });
                    eprintln!("c1m: live view failed ({e}); printing plain lines");
                }
            }
            Some(LiveOutput::Plain { last })
                if now || last.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) =>
            {
                *last = Some(Instant::now());
                println!("{}", plain::line(state));
            }
            Some(LiveOutput::Json { last })
                if now || last.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) =>
            {
                *last = Some(Instant::now());
                let line = serde_json::json!({
                    "t_s": state.elapsed_s,
                    "phase": state.phase,
                    "target": state.target,
                    "phase_end": state.phase_end,
                    "figures": state.figures,
                    "held": state.held.as_ref().map(|h| serde_json::json!({
                        "phase": h.phase,
                        "per_connection": h.figures.per_connection,
                    })),
                    "notes": state.notes,
                });
                println!("{line}");
            }
            Some(LiveOutput::Plain { .. } | LiveOutput::Json { .. }) => {}
            None => {}
        }
    }

    /// Waits up to `timeout`; true when the user asked to stop (q, Ctrl-C, SIGTERM, SIGHUP).
    pub(crate) async fn poll_quit(&mut self, timeout: Duration) -> Result<bool> {
        if self.signalled.load(Ordering::Relaxed) {
            return Ok(true);
        }
        let quit = match self.out.as_mut() {
            Some(LiveOutput::Tui(tui)) => {
                tokio::task::block_in_place(|| tui.poll_quit(timeout)).unwrap_or(false)
            }
            _ => {
                tokio::time::sleep(timeout).await;
                false
            }
        };
        Ok(quit || self.signalled.load(Ordering::Relaxed))
    }

    pub(crate) fn write_intervals(&self, dir: &Path) -> Result<()> {
        self.intervals
            .write(dir)
            .with_context(|| format!("writing interval logs to {}", dir.display()))?;
        Ok(())
    }

    /// The run's outcome, for the endpoint: `Running` from the start; any other once the
    /// run folder holds it, which also moves the phase to `done` (no tick follows).
    pub(crate) fn outcome(&mut self, outcome: Outcome) {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.outcome = Some(outcome);
        if outcome != Outcome::Running {
            state.phase = "done".to_owned();
        }
    }

    /// Restores the terminal (the TUI ends, no more lines); the endpoint stays.
    pub(crate) fn end_view(&mut self) {
        self.out = None;
    }

    /// Where the metrics endpoint answers, while it does.
    pub(crate) fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_stop.as_ref().and(self.metrics_addr)
    }

    /// Keeps the metrics endpoint up for `d` for a final scrape, or until SIGINT,
    /// SIGTERM or SIGHUP (one that came earlier ends it at once), then stops it.
    pub(crate) async fn linger(&mut self, d: Duration) {
        // The signal handler only sets a flag: it is looked at ten times a second.
        const LOOK: Duration = Duration::from_millis(100);
        let until = Instant::now() + d;
        while self.metrics_stop.is_some() && !self.signalled.load(Ordering::Relaxed) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            tokio::time::sleep(left.min(LOOK)).await;
        }
        self.stop();
    }

    /// Restores the terminal and stops the metrics endpoint.
    pub(crate) fn stop(&mut self) {
        self.out = None;
        if let Some(tx) = self.metrics_stop.take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.stop();
    }
}
