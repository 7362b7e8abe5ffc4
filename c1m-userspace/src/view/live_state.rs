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
    pub title: String,
    /// What the run is, fixed when it starts.
    pub info: RunInfo,
    pub phase: String,
    pub target: u64,
    pub elapsed_s: f64,
    pub kernel: Option<KernelView>,
    pub server: Option<AppSnapshot>,
    pub client: Option<AppSnapshot>,
    /// Every number the view shows, computed once from the three sources above.
    pub figures: Figures,
    pub history: Vec<Sample>,
    pub notes: Vec<String>,
}
