//! What the live view draws, apart from the data model: it holds the [`Figures`], which
//! are computed over the model, so it sits above both (issue 31).

use crate::{
    figures::Figures,
    model::{RunInfo, Sample},
    observer::KernelView,
    workload::stats::snapshot::AppSnapshot,
};

/// What the live view draws: the latest of everything plus the history.
#[derive(Debug, Clone, Default)]
pub struct LiveState {
    /// The view's heading, e.g. "c1m top".
    pub title: String,
    /// What the run is, fixed when it starts.
    pub info: RunInfo,
    /// The run phase now ("setup", "idle", …; `c1m top`: "watching").
    pub phase: String,
    /// Connections the run aims at (`c1m top`: the client's target; 0: not known).
    pub target: u64,
    /// Seconds since the command started.
    pub elapsed_s: f64,
    /// The kernel observer's latest view (None: observer not running).
    pub kernel: Option<KernelView>,
    /// The server's latest app snapshot (None: no stats from the server).
    pub server: Option<AppSnapshot>,
    /// The client's latest app snapshot (None: no c1m client).
    pub client: Option<AppSnapshot>,
    /// Every number the view shows, computed once from the three sources above.
    pub figures: Figures,
    /// The time series so far, one row a second (the last 600 in a run).
    pub history: Vec<Sample>,
    /// The run's warnings so far, shown under the figures.
    pub notes: Vec<String>,
    /// The run's outcome: `Running` while it runs, its verdict once its folder is
    /// written (None: not a lab run, e.g. `c1m top` or a client host).
    pub outcome: Option<crate::model::Outcome>,
}
