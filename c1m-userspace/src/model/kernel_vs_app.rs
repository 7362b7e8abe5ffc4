//! The kernel's count beside the application's: a row of the live view's kernel-vs-app
//! region, and of every phase's end in summary.json.

use serde::{Deserialize, Serialize};

/// The kernel's count next to the application's, and why they differ when they do.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(default)]
pub struct KernelVsApp {
    /// Which count: "server open", "server accepted", "client open" or "client connecting".
    pub what: String,
    /// The kernel's figure, from the observer (None: observer not running).
    pub kernel: Option<i64>,
    /// The app's own figure (None: no stats from that side).
    pub app: Option<i64>,
    /// True when both figures are there and equal.
    pub agree: bool,
    /// e.g. "412 established in the kernel, not yet accepted".
    pub explanation: Option<String>,
}

impl KernelVsApp {
    /// Both figures there and equal: what "kernel = app" means everywhere it is said.
    pub(crate) fn agrees(&self) -> bool {
        self.agree && self.kernel == self.app
    }
}
