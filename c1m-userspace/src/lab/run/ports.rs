//! The lab's side of one owner per port: before anything starts, refuse ports that
//! another process listens on, and name it; when it is a c1m lab, name the lab and its
//! run folder (from its journal). The server takes the ports for good itself
//! (`workload::port_lock`), before any worker binds.

use std::net::IpAddr;

use anyhow::{Result, bail};

use super::journal;
use crate::workload::port_lock::{self, PortError};

/// Fails with one line naming the holder and the fix when a port is taken.
pub(crate) fn preflight(ports: &[u16], addrs: &[IpAddr]) -> Result<()> {
    let err = match port_lock::check(ports, addrs) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    let Some((port, holder)) = err.holder() else {
        return Err(err.into());
    };
    if let Some(lab) = journal::lab_of(holder.pid) {
        bail!(
            "port {port} is taken by another c1m lab: pid {} (run folder {}), whose {} listens \
             there; use other --ports, or stop that lab (kill {})",
            lab.lab.pid,
            lab.run_folder.display(),
            holder,
            lab.lab.pid
        );
    }
    Err(PortError::Taken {
        port,
        holder: holder.clone(),
    }
    .into())
}
