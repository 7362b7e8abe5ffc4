//! tracefs: mounted when missing (aya reads tracepoint ids from it), and the source of
//! each classic tracepoint's record layout (its `format` file).

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use c1m_common::TracepointFields;
use thiserror::Error;

/// Why a tracepoint's format could not be read from tracefs.
#[derive(Debug, Error)]
pub enum TracefsError {
    /// tracefs was mounted nowhere and mounting it at /sys/kernel/tracing failed.
    #[error(
        "tracefs is not mounted and mounting it failed ({0}); fix: mount -t tracefs tracefs /sys/kernel/tracing"
    )]
    Mount(std::io::Error),
    /// tracefs is mounted (at the path given) but unreadable without root.
    #[error(
        "tracefs is mounted at {0} but unreadable without root; fix: sudo -E c1m …, or --no-observer"
    )]
    Unreadable(PathBuf),
    /// The named tracepoint does not exist on this kernel.
    #[error("tracepoint {0} does not exist on this kernel")]
    NoTracepoint(String),
    /// The tracepoint (first) lacks a field (second) a program reads.
    #[error("tracepoint {0} has no field {1}")]
    NoField(String, &'static str),
}

const TRACEFS: &str = "/sys/kernel/tracing";
const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";

/// The tracing directory, mounting tracefs at /sys/kernel/tracing if neither it nor
/// the debugfs path is available.
pub(crate) fn ensure_mounted() -> Result<PathBuf, TracefsError> {
    for dir in [TRACEFS, DEBUGFS_TRACING] {
        if Path::new(dir).join("events").is_dir() {
            return Ok(PathBuf::from(dir));
        }
    }
    if let Some(mounted) = mount_point() {
        return Err(TracefsError::Unreadable(mounted));
    }
    let fstype = c"tracefs";
    rustix::mount::mount(
        fstype,
        TRACEFS,
        fstype,
        rustix::mount::MountFlags::empty(),
        None,
    )
    .map_err(|e| TracefsError::Mount(e.into()))?;
    Ok(PathBuf::from(TRACEFS))
}

/// Where tracefs is mounted, from /proc/self/mounts (readable by anyone, unlike the
/// tracing directory itself, which is root's only: mode 0700).
pub fn mount_point() -> Option<PathBuf> {
    procfs::mounts()
        .ok()?
        .into_iter()
        .find(|m| m.fs_vfstype == "tracefs")
        .map(|m| PathBuf::from(m.fs_file))
}

/// `name -> (offset, size)` of every field of a tracepoint's record.
pub(crate) fn parse_format(text: &str) -> HashMap<String, (u32, u32)> {
    let mut fields = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("field:") else {
            continue;
        };
        let mut parts = rest.split(';').map(str::trim);
        let Some(decl) = parts.next() else { continue };
        let mut offset = None;
        let mut size = None;
        for part in parts {
            if let Some(v) = part.strip_prefix("offset:") {
                offset = v.parse().ok();
            } else if let Some(v) = part.strip_prefix("size:") {
                size = v.parse().ok();
            }
        }
        // "const void * skaddr", "__u8 saddr[4]" -> "skaddr", "saddr".
        let name = decl
            .rsplit(|c: char| c.is_whitespace() || c == '*')
            .next()
            .unwrap_or("")
            .split('[')
            .next()
            .unwrap_or("");
        if let (Some(offset), Some(size)) = (offset, size)
            && !name.is_empty()
        {
            fields.insert(name.to_owned(), (offset, size));
        }
    }
    fields
}

/// A record's fields: name -> (offset, size).
pub(crate) type Fields = HashMap<String, (u32, u32)>;

/// How one hook's record maps onto [`TracepointFields`]: which tracepoint, and which
/// of its fields (with the size c1m reads) fill which slot.
pub(crate) struct HookLayout {
    pub category: &'static str,
    pub name: &'static str,
    pub build: fn(&Fields) -> Result<TracepointFields, &'static str>,
}

fn need(
    fields: &HashMap<String, (u32, u32)>,
    name: &'static str,
    size: u32,
) -> Result<u32, &'static str> {
    match fields.get(name) {
        Some(&(offset, s)) if s == size => Ok(offset),
        _ => Err(name),
    }
}

fn optional(fields: &HashMap<String, (u32, u32)>, name: &str, size: u32) -> u32 {
    match fields.get(name) {
        Some(&(offset, s)) if s == size => offset,
        _ => c1m_common::OFFSET_UNKNOWN,
    }
}

/// sport/dport as host-order `__u16` fields, saddr/daddr as `__u8[4]`, and
/// saddr_v6/daddr_v6 as `__u8[16]` (filled instead for an IPv6 socket).
fn socket_fields(f: &HashMap<String, (u32, u32)>) -> Result<TracepointFields, &'static str> {
    Ok(TracepointFields {
        sk: need(f, "skaddr", 8)?,
        sport: need(f, "sport", 2)?,
        dport: need(f, "dport", 2)?,
        saddr: optional(f, "saddr", 4),
        daddr: optional(f, "daddr", 4),
        saddr6: optional(f, "saddr_v6", 16),
        daddr6: optional(f, "daddr_v6", 16),
        family: optional(f, "family", 2),
        ..TracepointFields::UNKNOWN
    })
}

/// The names of `tcp:tcp_send_reset`'s reasons, indexed by value (empty on a kernel
/// without them): from its format's `__print_symbolic(REC->reason, ...)`, so they follow
/// the running kernel's `enum sk_rst_reason`.
pub(crate) fn reset_reason_names(tracing: &Path) -> Vec<String> {
    let path = tracing.join("events/tcp/tcp_send_reset/format");
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    for (value, name) in print_symbolic(&text, "REC->reason") {
        let Ok(i) = usize::try_from(value) else {
            continue;
        };
        if i < c1m_common::reset_reason::COUNT {
            if names.len() <= i {
                names.resize(i + 1, String::new());
            }
            names[i] = name;
        }
    }
    names
}

/// The `{ value, "NAME" }` pairs of `__print_symbolic(<arg>, ...)` in a format's print fmt.
pub(crate) fn print_symbolic(text: &str, arg: &str) -> Vec<(u64, String)> {
    let head = format!("__print_symbolic({arg},");
    let Some(start) = text.find(&head) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut rest = &text[start + head.len()..];
    // Pairs follow until the closing parenthesis of the call.
    while let Some(open) = rest.find('{') {
        if rest[..open].contains(')') {
            break;
        }
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let pair = &rest[open + 1..open + close];
        rest = &rest[open + close + 1..];
        let Some((value, name)) = pair.split_once(',') else {
            continue;
        };
        let name = name.trim().trim_matches('"');
        if let Ok(value) = value.trim().parse::<u64>() {
            out.push((value, name.to_owned()));
        }
    }
    out
}

pub(crate) fn read_hook(
    tracing: &Path,
    layout: &HookLayout,
) -> Result<TracepointFields, TracefsError> {
    let full = format!("{}:{}", layout.category, layout.name);
    let path = tracing
        .join("events")
        .join(layout.category)
        .join(layout.name)
        .join("format");
    let text =
        std::fs::read_to_string(&path).map_err(|_| TracefsError::NoTracepoint(full.clone()))?;
    (layout.build)(&parse_format(&text)).map_err(|field| TracefsError::NoField(full, field))
}

/// Indexed by `c1m_common::hook`.
pub(crate) const HOOKS: [HookLayout; c1m_common::hook::COUNT] = [
    HookLayout {
        category: "sock",
        name: "inet_sock_set_state",
        build: |f| {
            Ok(TracepointFields {
                oldstate: need(f, "oldstate", 4)?,
                newstate: need(f, "newstate", 4)?,
                protocol: need(f, "protocol", 2)?,
                ..socket_fields(f)?
            })
        },
    },
    HookLayout {
        category: "tcp",
        name: "tcp_retransmit_synack",
        build: socket_fields,
    },
    HookLayout {
        category: "tcp",
        name: "tcp_send_reset",
        // Since 6.10 the record holds whole sockaddrs (local first, even when built
        // from the packet): the family at +0, ports at +2 in network order, an IPv4
        // address at +4 (`sockaddr_in`), an IPv6 one at +8 (`sockaddr_in6`).
        // https://github.com/torvalds/linux/blob/v6.18/include/uapi/linux/in6.h (struct sockaddr_in6)
        build: |f| {
            let saddr = need(f, "saddr", 28)?;
            let daddr = need(f, "daddr", 28)?;
            Ok(TracepointFields {
                sk: need(f, "skaddr", 8)?,
                skb: optional(f, "skbaddr", 8),
                sport: saddr + 2,
                dport: daddr + 2,
                family: saddr,
                saddr: saddr + 4,
                daddr: daddr + 4,
                saddr6: saddr + 8,
                daddr6: daddr + 8,
                ports_be: 1,
                // Since 6.10 (`enum sk_rst_reason`): why the reset was sent.
                reason: optional(f, "reason", 4),
                state: optional(f, "state", 4),
                ..TracepointFields::UNKNOWN
            })
        },
    },
    HookLayout {
        category: "tcp",
        name: "tcp_receive_reset",
        build: socket_fields,
    },
    HookLayout {
        category: "tcp",
        name: "tcp_retransmit_skb",
        // `err` since v6.10, when it began to fire for failed attempts too; without it
        // every call is a sent segment, as before.
        build: |f| {
            Ok(TracepointFields {
                err: optional(f, "err", 4),
                ..socket_fields(f)?
            })
        },
    },
    HookLayout {
        category: "skb",
        name: "kfree_skb",
        build: |f| {
            Ok(TracepointFields {
                sk: need(f, "rx_sk", 8)?,
                reason: need(f, "reason", 4)?,
                location: optional(f, "location", 8),
                ..TracepointFields::UNKNOWN
            })
        },
    },
    HookLayout {
        category: "sock",
        name: "sock_exceed_buf_limit",
        build: |f| {
            Ok(TracepointFields {
                name: need(f, "name", 32)?,
                ..TracepointFields::UNKNOWN
            })
        },
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    const SET_STATE: &str = "name: inet_sock_set_state\nID: 2287\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\n\
        \tfield:const void * skaddr;\toffset:8;\tsize:8;\tsigned:0;\n\
        \tfield:int oldstate;\toffset:16;\tsize:4;\tsigned:1;\n\
        \tfield:int newstate;\toffset:20;\tsize:4;\tsigned:1;\n\
        \tfield:__u16 sport;\toffset:24;\tsize:2;\tsigned:0;\n\
        \tfield:__u16 dport;\toffset:26;\tsize:2;\tsigned:0;\n\
        \tfield:__u16 family;\toffset:28;\tsize:2;\tsigned:0;\n\
        \tfield:__u16 protocol;\toffset:30;\tsize:2;\tsigned:0;\n\
        \tfield:__u8 saddr[4];\toffset:32;\tsize:4;\tsigned:0;\n\
        \tfield:__u8 daddr[4];\toffset:36;\tsize:4;\tsigned:0;\n\
        \tfield:__u8 saddr_v6[16];\toffset:40;\tsize:16;\tsigned:0;\n\
        \tfield:__u8 daddr_v6[16];\toffset:56;\tsize:16;\tsigned:0;\n\nprint fmt: \"x\"\n";

    #[test]
    fn reset_reasons_come_from_the_print_fmt() {
        // v6.18's tcp_send_reset, shortened: the state's table first, then the reason's.
        let fmt = "print fmt: \"state=%s reason=%s\", REC->state ? \
            __print_symbolic(REC->state, { TCP_ESTABLISHED, \"TCP_ESTABLISHED\" }) : \"UNKNOWN\", \
            __print_symbolic(REC->reason, { 0, \"NOT_SPECIFIED\" }, { 1, \"NO_SOCKET\" }, \
            { 11, \"TCP_ABORT_ON_CLOSE\" }, { 25, \"MAX\" })";
        assert_eq!(
            print_symbolic(fmt, "REC->reason"),
            vec![
                (0, "NOT_SPECIFIED".to_owned()),
                (1, "NO_SOCKET".to_owned()),
                (11, "TCP_ABORT_ON_CLOSE".to_owned()),
                (25, "MAX".to_owned()),
            ]
        );
        // Symbolic values (not numbers) are skipped, not misread.
        assert!(print_symbolic(fmt, "REC->state").is_empty());
        assert!(print_symbolic(fmt, "REC->other").is_empty());
    }

    #[test]
    fn parses_a_format_file() {
        let f = parse_format(SET_STATE);
        assert_eq!(f["skaddr"], (8, 8));
        assert_eq!(f["saddr"], (32, 4));
        let fields = (HOOKS[c1m_common::hook::SET_STATE].build)(&f).unwrap();
        assert_eq!(
            (fields.oldstate, fields.newstate, fields.sport, fields.dport),
            (16, 20, 24, 26)
        );
        assert_eq!(
            (fields.saddr, fields.daddr, fields.protocol, fields.ports_be),
            (32, 36, 30, 0)
        );
        assert_eq!((fields.family, fields.saddr6, fields.daddr6), (28, 40, 56));
    }

    #[test]
    fn a_missing_field_is_named() {
        let f = parse_format("field:int oldstate;\toffset:16;\tsize:4;\tsigned:1;");
        assert_eq!((HOOKS[0].build)(&f).err(), Some("newstate"));
    }

    #[test]
    fn this_kernels_hooks_parse() {
        let Ok(dir) = ensure_mounted() else {
            eprintln!("SKIP: tracefs not available (not root?)");
            return;
        };
        for hook in &HOOKS {
            read_hook(&dir, hook).unwrap_or_else(|e| panic!("{}: {e}", hook.name));
        }
    }
}
