//! Whether this kernel can run TLS's record layer itself (kTLS, the `tls` TCP ULP), for
//! `c1m doctor`. wss runs its record layer in rustls either way; the row says which one
//! this box could offer, so a reader of a TLS run knows the kernel was not an option.
//! Layer 0: OS facts and a pure parser, read by the lab's doctor.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The ULPs TCP offers now: only registered ones, so a `tls` module not yet loaded is
/// absent from it.
const AVAILABLE_ULP: &str = "/proc/sys/net/ipv4/tcp_available_ulp";

/// Where a loadable `tls` module would be, and whether it is loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "path")]
pub(crate) enum Module {
    /// `/sys/module/tls` exists.
    Loaded,
    /// Not loaded, but the file is there: the first `TCP_ULP "tls"` by root, or
    /// `modprobe tls`, loads it.
    Present(PathBuf),
    Absent,
}

/// What the kernel says about kTLS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct KernelTls {
    /// `tls` is in `tcp_available_ulp`: a socket may take the ULP now.
    pub available: bool,
    /// The ULPs listed, in the kernel's order; None when the file could not be read
    /// (a kernel without ULP support has no such file).
    pub ulps: Option<Vec<String>>,
    pub module: Module,
}

/// The ULP names of `tcp_available_ulp` ("mptcp tls\n" gives both; "" none).
pub(crate) fn parse_ulps(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

impl KernelTls {
    /// The facts from what was read: `ulps` the file's text when it was readable.
    pub(crate) fn of(ulps: Option<&str>, module: Module) -> KernelTls {
        let ulps = ulps.map(parse_ulps);
        KernelTls {
            available: ulps.as_ref().is_some_and(|u| u.iter().any(|n| n == "tls")),
            ulps,
            module,
        }
    }

    /// Read from this kernel.
    pub(crate) fn read() -> KernelTls {
        KernelTls::of(
            std::fs::read_to_string(AVAILABLE_ULP).ok().as_deref(),
            module(),
        )
    }

    /// The state in a few words, with the evidence in parentheses.
    pub(crate) fn state(&self) -> String {
        let listed = match &self.ulps {
            None => "tcp_available_ulp: unreadable".to_owned(),
            Some(u) if u.is_empty() => "tcp_available_ulp: empty".to_owned(),
            Some(u) => format!("tcp_available_ulp: {}", u.join(" ")),
        };
        if self.available {
            return "available (tls in tcp_available_ulp)".to_owned();
        }
        match &self.module {
            // Loaded yet not listed: the module registers the ULP as it loads, so this
            // is a kernel that changed the rule; say what was seen.
            Module::Loaded => format!("not listed ({listed}; the tls module is loaded)"),
            Module::Present(path) => format!(
                "loadable ({listed}; {} is there: modprobe tls, or the first TCP_ULP by root loads it)",
                path.display()
            ),
            Module::Absent => {
                format!("not available ({listed}; CONFIG_TLS unset or module absent)")
            }
        }
    }

    /// What it means for c1m: the record layer is rustls's whatever the kernel offers.
    pub(crate) fn meaning(&self) -> &'static str {
        if self.available {
            "c1m's wss does not use it: its record layer is rustls's, in user space"
        } else {
            "wss runs its record layer in user space (rustls); nothing to fix"
        }
    }
}

/// The `tls` module's state: loaded, a file under this kernel's modules (any
/// compression), or neither.
fn module() -> Module {
    if Path::new("/sys/module/tls").exists() {
        return Module::Loaded;
    }
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return Module::Absent;
    };
    let dir = Path::new("/lib/modules")
        .join(release.trim())
        .join("kernel/net/tls");
    std::fs::read_dir(&dir)
        .ok()
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == "tls.ko" || n.starts_with("tls.ko."))
        })
        .map_or(Module::Absent, Module::Present)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The doctor's row as one sentence: "kTLS: <state>: <meaning>", the state alone
    /// when kTLS is there.
    fn line(k: &KernelTls) -> String {
        if k.available {
            format!("kTLS: {}", k.state())
        } else {
            format!("kTLS: {}: {}", k.state(), k.meaning())
        }
    }

    #[test]
    fn the_ulp_list_is_split_on_any_whitespace() {
        assert_eq!(parse_ulps("mptcp"), vec!["mptcp"]);
        assert_eq!(parse_ulps("mptcp tls"), vec!["mptcp", "tls"]);
        assert_eq!(parse_ulps(""), Vec::<String>::new());
        assert_eq!(parse_ulps("tls\n"), vec!["tls"]);
        assert_eq!(parse_ulps("  espintcp\ttls  \n"), vec!["espintcp", "tls"]);
    }

    #[test]
    fn tls_listed_is_available_whatever_the_module_file() {
        for text in ["mptcp tls", "tls\n"] {
            let k = KernelTls::of(Some(text), Module::Absent);
            assert!(k.available, "{text:?}");
            assert_eq!(line(&k), "kTLS: available (tls in tcp_available_ulp)");
        }
        // A name that only contains "tls" is another ULP.
        assert!(!KernelTls::of(Some("mptcp tlsx"), Module::Absent).available);
    }

    #[test]
    fn this_box_reads_as_not_available_with_nothing_to_fix() {
        let k = KernelTls::of(Some("mptcp\n"), Module::Absent);
        assert!(!k.available);
        assert_eq!(
            line(&k),
            "kTLS: not available (tcp_available_ulp: mptcp; CONFIG_TLS unset or module \
             absent): wss runs its record layer in user space (rustls); nothing to fix"
        );
        assert_eq!(
            KernelTls::of(Some(""), Module::Absent).state(),
            "not available (tcp_available_ulp: empty; CONFIG_TLS unset or module absent)"
        );
        assert_eq!(
            KernelTls::of(None, Module::Absent).state(),
            "not available (tcp_available_ulp: unreadable; CONFIG_TLS unset or module absent)"
        );
    }

    #[test]
    fn a_module_file_not_yet_loaded_is_loadable() {
        let path = PathBuf::from("/lib/modules/6.1.0/kernel/net/tls/tls.ko.xz");
        let k = KernelTls::of(Some("mptcp"), Module::Present(path));
        assert!(!k.available);
        assert_eq!(
            k.state(),
            "loadable (tcp_available_ulp: mptcp; /lib/modules/6.1.0/kernel/net/tls/tls.ko.xz \
             is there: modprobe tls, or the first TCP_ULP by root loads it)"
        );
    }

    #[test]
    fn the_json_names_the_module_state() {
        let k = KernelTls::of(Some("mptcp"), Module::Absent);
        let v = serde_json::to_value(&k).expect("json");
        assert_eq!(
            v,
            serde_json::json!({
                "available": false,
                "ulps": ["mptcp"],
                "module": {"state": "absent"}
            })
        );
    }
}
