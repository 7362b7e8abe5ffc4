//! Small helpers shared by several commands.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

/// Parses `8000-8099`, `80,443` or a mix (`80,8000-8003`) into a sorted, deduplicated list.
pub fn parse_ports(s: &str) -> Result<Vec<u16>, String> {
    let mut ports = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo.trim(), hi.trim()),
            None => (part, part),
        };
        let parse = |p: &str| {
            p.parse::<u16>()
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| format!("`{p}` is not a port (1-65535)"))
        };
        let (lo, hi) = (parse(lo)?, parse(hi)?);
        if lo > hi {
            return Err(format!("port range `{part}` runs backwards"));
        }
        ports.extend(lo..=hi);
    }
    if ports.is_empty() {
        return Err("no ports given".to_owned());
    }
    ports.sort_unstable();
    ports.dedup();
    Ok(ports)
}

/// A port list argument (`8000-8099`, `80,443`): one clap value holding many ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortList(pub Vec<u16>);

impl std::str::FromStr for PortList {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_ports(s).map(PortList)
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
    fn parses_port_lists() {
        assert_eq!(parse_ports("8000-8002").unwrap(), vec![8000, 8001, 8002]);
        assert_eq!(parse_ports("443, 80,80").unwrap(), vec![80, 443]);
        assert!(parse_ports("9-1").unwrap_err().contains("backwards"));
        assert!(parse_ports("0").is_err());
        assert!(parse_ports("70000").is_err());
        assert!(parse_ports("").is_err());
    }
}
