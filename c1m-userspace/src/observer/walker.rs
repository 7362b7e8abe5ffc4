//! Socket walks on their own thread. A walk of 2M sockets takes seconds of CPU on a
//! starved box (measured: 40 s for 600k sockets against ~120 busy workers before the
//! observer ran at nice -10), and while it ran the observer answered nothing, so the
//! live kernel column froze. Now the per-CPU counters are read without waiting for a
//! walk: gauges advance from the transitions every snapshot, and a finished walk only
//! re-bases them.

use std::{
    os::fd::{AsFd, OwnedFd},
    sync::mpsc,
    thread::JoinHandle,
};

use aya::maps::{Array, Map, MapData, PerCpuArray};
use c1m_common::{SockAgg, TRANSITION_SLOTS};

use super::{ObserverError, map_err, walk::SocketWalk};

/// A walk and the transition totals read just before and just after it.
pub(crate) struct WalkResult {
    pub walk: SocketWalk,
    pub transitions_before: Vec<u64>,
    pub transitions_after: Vec<u64>,
}

/// What the walker thread owns: its own handles on the maps it needs (duplicated fds),
/// so it shares nothing mutable with the observer.
pub(crate) struct WalkerMaps {
    pub socket_link: OwnedFd,
    pub sock_agg: Array<MapData, SockAgg>,
    /// A second handle on `TRANSITIONS` (see [`duplicate_per_cpu`]).
    pub transitions: Map,
}

pub(crate) struct Walker {
    requests: Option<mpsc::Sender<()>>,
    results: mpsc::Receiver<Result<WalkResult, ObserverError>>,
    /// A walk was asked for and its result is not yet taken.
    busy: bool,
    thread: Option<JoinHandle<()>>,
}

impl Walker {
    pub(crate) fn start(maps: WalkerMaps) -> Result<Self, ObserverError> {
        let (requests, incoming) = mpsc::channel::<()>();
        let (done, results) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("c1m-walker".into())
            .spawn(move || {
                crate::priority::watcher();
                let WalkerMaps {
                    socket_link,
                    mut sock_agg,
                    transitions,
                } = maps;
                // Ends when the observer (the only sender) is dropped.
                while incoming.recv().is_ok() {
                    let result = (|| {
                        let transitions_before =
                            sum_per_cpu(&transitions, "TRANSITIONS", TRANSITION_SLOTS)?;
                        let walk = super::walk::sockets(socket_link.as_fd(), &mut sock_agg)?;
                        let transitions_after =
                            sum_per_cpu(&transitions, "TRANSITIONS", TRANSITION_SLOTS)?;
                        Ok(WalkResult {
                            walk,
                            transitions_before,
                            transitions_after,
                        })
                    })();
                    if done.send(result).is_err() {
                        return;
                    }
                }
            })
            .map_err(|source| ObserverError::Io {
                what: "starting the socket walk thread".to_owned(),
                source,
            })?;
        Ok(Self {
            requests: Some(requests),
            results,
            busy: false,
            thread: Some(thread),
        })
    }

    /// Starts a walk unless one is under way.
    pub(crate) fn request(&mut self) {
        if !self.busy
            && let Some(r) = &self.requests
        {
            self.busy = r.send(()).is_ok();
        }
    }

    pub(crate) fn busy(&self) -> bool {
        self.busy
    }

    /// The finished walk, if one finished; never waits.
    pub(crate) fn try_take(&mut self) -> Option<Result<WalkResult, ObserverError>> {
        let r = self.results.try_recv().ok()?;
        self.busy = false;
        Some(r)
    }

    /// Waits for the walk under way (starting one if none is).
    pub(crate) fn wait(&mut self) -> Result<WalkResult, ObserverError> {
        self.request();
        let r = self.results.recv().map_err(|_| ObserverError::Io {
            what: "the socket walk thread".to_owned(),
            source: std::io::Error::other("ended unexpectedly"),
        });
        self.busy = false;
        r?
    }
}

impl Drop for Walker {
    fn drop(&mut self) {
        // Closing the channel ends the thread after the walk it may be in.
        self.requests = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sums every CPU's value of each of the first `len` slots of a per-CPU u64 array.
pub(crate) fn sum_per_cpu(map: &Map, name: &str, len: usize) -> Result<Vec<u64>, ObserverError> {
    let array: PerCpuArray<&MapData, u64> = PerCpuArray::try_from(map).map_err(map_err(name))?;
    (0..len as u32)
        .map(|i| {
            array
                .get(&i, 0)
                .map(|values| values.iter().sum())
                .map_err(map_err(name))
        })
        .collect()
}

/// A second handle on a loaded per-CPU array, for another thread.
pub(crate) fn duplicate_per_cpu(map: &Map, name: &str) -> Result<Map, ObserverError> {
    let Map::PerCpuArray(data) = map else {
        return Err(ObserverError::NoObject);
    };
    let fd = data
        .fd()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|source| ObserverError::Io {
            what: format!("duplicating the fd of map {name}"),
            source,
        })?;
    Ok(Map::PerCpuArray(
        MapData::from_fd(fd).map_err(map_err(name))?,
    ))
}
