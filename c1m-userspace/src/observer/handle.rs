//! The observer on its own thread, for async callers (the lab, `c1m top`): aya is
//! synchronous, and a snapshot must not stall the tokio runtime that draws the view.

use std::time::Duration;

use anyhow::{Result, bail};

use super::{KernelView, Observer, ObserverConfig};

/// A snapshot request: `true` asks for a fresh socket walk first.
type SnapshotRequest = (bool, tokio::sync::oneshot::Sender<KernelView>);

/// The observer's thread (aya is synchronous): it takes a snapshot whenever the lab
/// asks, right after polling the app, so both views are of the same moment.
pub(crate) struct ObserverHandle {
    requests: std::sync::mpsc::Sender<SnapshotRequest>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ObserverHandle {
    pub(crate) fn start(ports: Vec<u16>) -> Result<Self> {
        Self::start_with(ObserverConfig {
            ports,
            ..ObserverConfig::default()
        })
    }

    /// The observer with any configuration (a client host's: its loss injector too).
    pub(crate) fn start_with(config: ObserverConfig) -> Result<Self> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (requests, incoming) = std::sync::mpsc::channel::<SnapshotRequest>();
        let thread = std::thread::Builder::new()
            .name("c1m-observer".into())
            .spawn(move || {
                crate::priority::watcher();
                let mut observer = match Observer::start(config) {
                    Ok(o) => {
                        let _ = ready_tx.send(Ok(()));
                        o
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                // Ends when the handle (the only sender) is dropped.
                while let Ok((fresh, reply)) = incoming.recv() {
                    let view = if fresh {
                        observer.snapshot_fresh()
                    } else {
                        observer.snapshot()
                    };
                    if let Ok(view) = view {
                        let _ = reply.send(view);
                    }
                }
            })?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Self {
                requests,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e.into())
            }
            Err(_) => bail!("the observer thread died while starting"),
        }
    }

    pub(crate) async fn snapshot(&self) -> Option<KernelView> {
        self.request(false).await
    }

    /// A snapshot after a full socket walk (memory figures of this moment).
    pub(crate) async fn snapshot_fresh(&self) -> Option<KernelView> {
        self.request(true).await
    }

    async fn request(&self, fresh: bool) -> Option<KernelView> {
        self.start_request(fresh)?.await.ok().flatten()
    }

    /// Queues a snapshot request; the task ends with the view (a walk of 2M sockets takes
    /// seconds, so it may outlive a tick of the live view).
    pub(crate) fn start_request(
        &self,
        fresh: bool,
    ) -> Option<tokio::task::JoinHandle<Option<KernelView>>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.requests.send((fresh, tx)).ok()?;
        Some(tokio::spawn(async move {
            tokio::time::timeout(Duration::from_secs(60), rx)
                .await
                .ok()?
                .ok()
        }))
    }
}

impl Drop for ObserverHandle {
    fn drop(&mut self) {
        // Close the channel, then wait for the thread to detach the programs.
        let (dead, _) = std::sync::mpsc::channel();
        self.requests = dead;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
