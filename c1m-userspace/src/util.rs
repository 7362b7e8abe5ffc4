//! Small helpers shared by several commands.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

/// Wall-clock now, milliseconds since the Unix epoch (0 if the clock is before 1970).
pub fn unix_ms_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A port list argument (`8000-8099`, `80,443`): one clap value holding many ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortList(pub Vec<u16>);

impl std::str::FromStr for PortList {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut ports = crate::workload::cli::parse_ports(s).map_err(|e| format!("{e:#}"))?;
        ports.sort_unstable();
        ports.dedup();
        Ok(PortList(ports))
    }
}

/// A flag set by SIGINT or SIGTERM, for synchronous loops.
pub fn shutdown_flag() -> std::io::Result<Arc<AtomicBool>> {
    static FLAG: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    let flag = FLAG
        .get_or_init(|| Arc::new(AtomicBool::new(false)))
        .clone();
    extern "C" fn on_signal(_: libc::c_int) {
        if let Some(f) = FLAG.get() {
            f.store(true, Ordering::Relaxed);
        }
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only does an atomic store, which is async-signal-safe.
        let previous = unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
        if previous == libc::SIG_ERR {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(flag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_lists_are_sorted_and_deduplicated() {
        let p: PortList = "443, 80,80,8000-8002".parse().unwrap();
        assert_eq!(p.0, vec![80, 443, 8000, 8001, 8002]);
        assert!("9-1".parse::<PortList>().is_err());
        assert!("0".parse::<PortList>().is_err());
        assert!("70000".parse::<PortList>().is_err());
        assert!("".parse::<PortList>().is_err());
    }
}
