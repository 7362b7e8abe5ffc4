//! One row of `c1m doctor`: a limit, the value found, the value needed, and the fix.
//! Doctor makes them, `--tune` applies the sysctl rows, preflight refuses on a failed one.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Status {
    Ok,
    /// Works, but not the way the user may expect (e.g. sharding), or suboptimal.
    Warn,
    /// The run as asked would fail.
    Fail,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // pad, not write_str: the doctor's table aligns this column with `{:<5}`.
        f.pad(match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Check {
    pub name: String,
    pub current: String,
    pub needed: String,
    pub status: Status,
    /// The exact command that fixes it, when one does.
    pub fix: Option<String>,
    /// A sysctl `--tune` may set (path under /proc/sys, value).
    #[serde(skip)]
    pub tune: Option<(String, String)>,
    pub note: String,
    /// The kernel's TLS facts, on the kTLS row only (`doctor --json` carries them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ktls: Option<crate::ktls::KernelTls>,
}
