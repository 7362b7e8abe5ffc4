//! A client host's `--metrics-addr`: its own snapshots (one a second) as a live state
//! with only the client side, served by the lab's Prometheus endpoint. On Kubernetes the
//! latency histograms live here: the server host's lab has no client side to read them
//! from, and Prometheus adds them up across client pods.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
    time::Instant,
};

use tokio::sync::oneshot;

use crate::{
    figures::FiguresBuilder,
    model::RunInfo,
    view::{live_state::LiveState, prometheus},
    workload::stats::snapshot::AppSnapshot,
};

pub(crate) struct ClientMetrics {
    state: Arc<Mutex<LiveState>>,
    figures: FiguresBuilder,
    started: Instant,
    /// The host's path when the endpoint started: the metrics' counters count from it.
    path_start: crate::netpath::PathReading,
    /// Dropped with this value: the endpoint closes when the client is done.
    _stop: oneshot::Sender<()>,
}

impl ClientMetrics {
    /// Binds `addr` (an error names the flag) and serves from the current runtime.
    pub(crate) async fn start(addr: SocketAddr, info: RunInfo) -> std::io::Result<ClientMetrics> {
        let listener = prometheus::bind(addr).await?;
        let state = Arc::new(Mutex::new(LiveState {
            title: "c1m client".to_owned(),
            info,
            ..LiveState::default()
        }));
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(prometheus::serve_listener(
            listener,
            Arc::clone(&state),
            prometheus::Detail::default(),
            async move {
                let _ = stopped.await;
            },
        ));
        Ok(ClientMetrics {
            state,
            figures: FiguresBuilder::new(),
            started: Instant::now(),
            path_start: crate::netpath::PathReading::read(),
            _stop: stop,
        })
    }

    /// The figures of `snap`, computed as the lab computes them, for the next scrape.
    /// `loss`: what this host's `--loss` dropped so far (its observer's last view).
    pub(crate) fn observe(&mut self, snap: &AppSnapshot, loss: Option<crate::observer::LossDrops>) {
        let figures = self.figures.build(
            crate::util::unix_ms_now(),
            None,
            None,
            Some(snap),
            None,
            Some(crate::host::mem_available()),
        );
        let path = crate::netpath::PathFigures::between(
            &self.path_start,
            &crate::netpath::PathReading::read(),
        );
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.path = Some(path);
        state.target = snap.target;
        state.elapsed_s = self.started.elapsed().as_secs_f64();
        state.client = Some(snap.clone());
        state.figures = figures;
        if loss.is_some() {
            state.loss = loss;
        }
    }
}
