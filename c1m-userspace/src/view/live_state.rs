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
    /// A client host's path since it started: conntrack, veth, softnet, neighbours
    /// (None: not a client host, or not read).
    pub path: Option<crate::netpath::PathFigures>,
    /// Every number the view shows, computed once from the three sources above.
    pub figures: Figures,
    /// The time series so far, one row a second (the last 600 in a run).
    pub history: Vec<Sample>,
    /// The run's warnings so far, shown under the figures.
    pub notes: Vec<String>,
    /// The figures at the end of the phase the run takes its memory per connection from
    /// (idle), once it is over: push buffers and closing sockets are not what a held
    /// connection costs, so from then on the views show memory per connection from here,
    /// labelled with the phase. `None` while connections are held (and in `c1m top`).
    pub held: Option<Held>,
    /// True for the one state drawn as a phase ends, with the figures the run records
    /// for that phase; the plain and JSON lines say so.
    pub phase_end: bool,
    /// The run's outcome: `Running` while it runs, its verdict once its folder is
    /// written (None: not a lab run, e.g. `c1m top` or a client host).
    pub outcome: Option<crate::model::Outcome>,
    /// What this process's loss injector dropped (a client host with `--loss`, whose
    /// endpoint serves no kernel view); a kernel view's own `loss` otherwise.
    pub loss: Option<crate::observer::LossDrops>,
}

/// Figures kept from the end of a phase.
#[derive(Debug, Clone, Default)]
pub struct Held {
    /// The phase they end ("idle").
    pub phase: String,
    /// Its figures, as the run recorded them.
    pub figures: Figures,
}

impl LiveState {
    /// The figures memory per connection is shown from: the held ones once there are,
    /// else the latest, with the phase they end (`None`: now).
    pub(crate) fn memory_figures(&self) -> (&Figures, Option<&str>) {
        match &self.held {
            Some(h) => (&h.figures, Some(h.phase.as_str())),
            None => (&self.figures, None),
        }
    }
}
