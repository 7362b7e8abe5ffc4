//! [`KernelView`]: one consistent snapshot of what the kernel sees, as the live view,
//! `c1m observe --json` and the run exports show it. Field names are the JSON names.

use std::collections::BTreeMap;

use c1m_common::{event, side, tcp_state};
use serde::{Deserialize, Serialize};

use super::mib::MibDelta;

/// The states shown as gauges. CLOSE is left out: closed sockets are in no hash table,
/// so no walk can count them.
pub(crate) const GAUGE_STATES: [u32; 11] = [
    tcp_state::ESTABLISHED,
    tcp_state::SYN_SENT,
    tcp_state::SYN_RECV,
    tcp_state::NEW_SYN_RECV,
    tcp_state::FIN_WAIT1,
    tcp_state::FIN_WAIT2,
    tcp_state::TIME_WAIT,
    tcp_state::CLOSE_WAIT,
    tcp_state::LAST_ACK,
    tcp_state::CLOSING,
    tcp_state::LISTEN,
];

/// Lower-case state name as used in JSON keys (`established`, `time_wait`, …).
pub(crate) fn state_key(state: u32) -> String {
    tcp_state::NAMES
        .get(state as usize)
        .copied()
        .unwrap_or("unknown")
        .to_ascii_lowercase()
}

/// One snapshot of what the kernel sees on the watched sockets, read through eBPF maps
/// and socket walks (`c1m observe --json`, the live view, summary.json's `kernel`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct KernelView {
    /// Wall clock of the snapshot, milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// Seconds since the observer attached.
    pub uptime_s: f64,
    /// Sockets per state per side: exact at the last socket walk, then moved by the
    /// state transitions counted since (`time_wait` and `new_syn_recv` change only at
    /// walks: the kernel reports no transition into them).
    pub server: SideView,
    /// The same for client-side sockets (the remote port is a watched port).
    pub client: SideView,
    /// The same for other sockets (neither end on a watched port; counted only when every
    /// TCP socket is watched).
    pub other: SideView,
    /// The watched listening ports, one entry per port.
    pub listeners: Vec<ListenerView>,
    /// Kernel memory of the watched sockets, from the last socket walk.
    pub memory: Option<KernelMemory>,
    /// The last full socket walk: when it ran and how long it took.
    pub walk: WalkInfo,
    /// Figures this kernel cannot give, with the reason (a missing hook or field).
    pub unavailable: Vec<String>,
    /// Counter updates lost because a kernel map was full (should stay 0).
    pub map_errors: u64,
    /// Runs of c1m's programs the kernel skipped since attach, by program (only those
    /// that skipped any): the program was already running on that CPU (a softirq's
    /// event while it ran in process context), so each may be an event not counted.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub skipped_runs: BTreeMap<String, u64>,
    /// Which sockets the figures cover, next to the kernel's own counters' scope (the
    /// whole network namespace): what the audit needs to explain a difference.
    pub scope: Scope,
    /// The kernel's own TCP counters (`/proc/net/snmp`, `/proc/net/netstat`) moved since
    /// attach, read with this view; `None` when unreadable (see `unavailable`).
    pub mib: Option<MibDelta>,
    /// What the loss injector (`--loss`) dropped on this namespace's link since attach;
    /// absent when none was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<LossDrops>,
}

/// Segments the loss injector dropped on one link since attach (probes/loss.rs): a GSO
/// packet counts as its segments.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct LossDrops {
    /// The probability asked (`--loss`), 0 < p ≤ 0.5.
    pub probability: f64,
    /// The link (in the host's namespace) it drops on, both ways.
    pub link: String,
    /// Leaving the host: its SYNs, data, ACKs, FINs and resets.
    pub egress: DroppedSegments,
    /// Arriving at the host: the peer's SYN-ACKs, data, ACKs, FINs and resets.
    pub ingress: DroppedSegments,
}

impl LossDrops {
    /// Both directions, class by class.
    pub fn both(&self) -> DroppedSegments {
        let (a, b) = (&self.egress, &self.ingress);
        DroppedSegments {
            syn: a.syn + b.syn,
            syn_ack: a.syn_ack + b.syn_ack,
            data: a.data + b.data,
            pure_ack: a.pure_ack + b.pure_ack,
            fin: a.fin + b.fin,
            rst: a.rst + b.rst,
        }
    }
}

/// Dropped segments by what they were (each counted once, in this order of precedence:
/// RST, SYN-ACK, SYN, FIN, data, pure ACK).
#[derive(
    Debug, Clone, Copy, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq, Eq,
)]
pub struct DroppedSegments {
    /// SYNs (a connect's first segment).
    pub syn: u64,
    /// SYN-ACKs (the listener's answer).
    pub syn_ack: u64,
    /// Segments with payload.
    pub data: u64,
    /// ACKs with no payload.
    pub pure_ack: u64,
    /// FINs (with or without payload).
    pub fin: u64,
    /// Resets.
    pub rst: u64,
}

impl DroppedSegments {
    /// Every class summed.
    pub fn total(&self) -> u64 {
        self.syn + self.syn_ack + self.data + self.pure_ack + self.fin + self.rst
    }

    /// The classes in the order they are shown, with their names in words and in JSON.
    pub fn classes(&self) -> [(u64, &'static str, &'static str); 6] {
        [
            (self.syn, "SYN", "syn"),
            (self.syn_ack, "SYN-ACK", "syn_ack"),
            (self.data, "data", "data"),
            (self.pure_ack, "pure ACK", "pure_ack"),
            (self.fin, "FIN", "fin"),
            (self.rst, "RST", "rst"),
        ]
    }
}

/// Which sockets c1m counts.
#[derive(
    Debug, Clone, Copy, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq, Eq,
)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Every TCP socket of the observer's network namespace: the MIB's own scope.
    #[default]
    Namespace,
    /// Only sockets on watched ports (or addresses) of the namespace.
    WatchedPorts,
    /// Every network namespace of the host (the MIB covers one).
    AllNamespaces,
}

impl KernelView {
    pub(crate) fn side(&self, s: u32) -> &SideView {
        match s {
            side::SERVER => &self.server,
            side::CLIENT => &self.client,
            _ => &self.other,
        }
    }

    pub(crate) fn side_mut(&mut self, s: u32) -> &mut SideView {
        match s {
            side::SERVER => &mut self.server,
            side::CLIENT => &mut self.client,
            _ => &mut self.other,
        }
    }

    /// Retransmits of every side.
    pub fn retransmits(&self) -> Retransmits {
        [&self.server, &self.client, &self.other]
            .iter()
            .fold(Retransmits::default(), |acc, s| {
                Retransmits::sum(&acc, &s.retransmits)
            })
    }

    /// Connections that reached ESTABLISHED since attach: the client side's count when
    /// c1m watches a client, else the server side's (each connection counted once).
    pub(crate) fn connections_established(&self) -> u64 {
        if self.client.established_total > 0 {
            self.client.established_total
        } else {
            self.server.established_total
        }
    }

    /// Sum over the sides of one state's gauge.
    pub fn total(&self, state: u32) -> i64 {
        (0..side::COUNT as u32)
            .map(|s| self.side(s).state(state))
            .sum()
    }

    /// Connections in the accept queues now, over all watched listeners.
    pub(crate) fn queue_depth(&self) -> u64 {
        saturating_sum(self.listeners.iter().map(|l| l.queue_depth))
    }

    /// Accept-queue limits, summed over all watched listeners.
    pub(crate) fn queue_limit(&self) -> u64 {
        saturating_sum(self.listeners.iter().map(|l| l.queue_limit))
    }

    /// Handshakes the watched listeners dropped since the observer attached: the
    /// kernel's `TcpExtListenDrops` for those ports.
    pub(crate) fn queue_overflows(&self) -> u64 {
        saturating_sum(self.listeners.iter().map(|l| l.accept_queue_overflows))
    }

    /// Listening sockets on the watched ports (several per port with SO_REUSEPORT).
    pub(crate) fn listen_sockets(&self) -> u64 {
        saturating_sum(self.listeners.iter().map(|l| u64::from(l.sockets)))
    }

    /// Final-ACK drops among [`Self::queue_overflows`]; `None` when any listener cannot
    /// tell.
    pub(crate) fn queue_overflow_acks(&self) -> Option<u64> {
        self.listeners
            .iter()
            .try_fold(0u64, |acc, l| Some(acc.saturating_add(l.overflow_acks?)))
    }
}

/// Kernel figures are summed over listeners and must never panic.
fn saturating_sum(it: impl Iterator<Item = u64>) -> u64 {
    it.fold(0, u64::saturating_add)
}

/// One side's sockets (server, client or other) as the kernel sees them, all since attach.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct SideView {
    /// Gauge per state (keys from [`state_key`]).
    pub states: BTreeMap<String, i64>,
    /// Transitions since attach, keyed `old->new`; only non-zero cells.
    pub transitions: BTreeMap<String, u64>,
    /// State transitions since attach, all kinds summed.
    pub transitions_total: u64,
    /// State transitions per second since the previous snapshot.
    pub transitions_per_s: f64,
    /// Connections that reached ESTABLISHED since attach (SYN_SENT->ESTABLISHED on the
    /// client side, SYN_RECV->ESTABLISHED on the server side).
    pub established_total: u64,
    /// Connections reaching ESTABLISHED per second since the previous snapshot.
    pub established_per_s: f64,
    /// Handshake and error signals since attach (names from `c1m_common::event`;
    /// retransmits are in `retransmits`).
    pub events: BTreeMap<String, u64>,
    /// Retransmitted segments since attach, by kind.
    pub retransmits: Retransmits,
    /// Resets sent since attach, by the kernel's reason (`enum sk_rst_reason` names such
    /// as `NO_SOCKET`; `UNKNOWN` on kernels before 6.10); only non-zero reasons.
    #[serde(default)]
    pub resets_sent_by_reason: BTreeMap<String, u64>,
    /// The same resets by what drew each: reason, segment and the answering socket's
    /// state, most first (they sum to `resets_sent_by_reason`).
    #[serde(default)]
    pub resets_sent_by_cause: Vec<ResetCause>,
}

/// Resets of one kind: the kernel's reason, the segment that drew them and the state of
/// the socket that answered (None: the segment found no socket).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema, PartialEq, Eq)]
pub struct ResetCause {
    /// `enum sk_rst_reason` name, as in `resets_sent_by_reason`.
    pub reason: String,
    /// The segment that drew them.
    pub segment: ResetSegment,
    /// State of the socket that sent it (keys as in `states`); None: no socket.
    pub state: Option<String>,
    /// Resets of this cause since attach.
    pub count: u64,
}

impl ResetCause {
    /// A stable order among causes of equal count.
    pub(crate) fn cmp_key(&self, other: &Self) -> std::cmp::Ordering {
        (&self.reason, self.segment, &self.state).cmp(&(&other.reason, other.segment, &other.state))
    }
}

/// The segment a reset answered (`c1m_common::reset_segment`).
#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, schemars::JsonSchema, PartialEq, Eq, PartialOrd, Ord,
)]
#[serde(rename_all = "snake_case")]
pub enum ResetSegment {
    /// None: the reset is this end's own (close with unread data, SO_LINGER 0, abort).
    None,
    /// A SYN (no ACK).
    Syn,
    /// A SYN-ACK.
    SynAck,
    /// A FIN, with or without data.
    Fin,
    /// An ACK carrying data.
    Data,
    /// A bare ACK.
    Ack,
    /// Other flags.
    Other,
    /// Could not be read.
    Unread,
}

impl ResetSegment {
    pub(crate) fn from_index(i: u32) -> Self {
        use c1m_common::reset_segment as s;
        match i {
            s::NONE => Self::None,
            s::SYN => Self::Syn,
            s::SYN_ACK => Self::SynAck,
            s::FIN => Self::Fin,
            s::DATA => Self::Data,
            s::ACK => Self::Ack,
            s::OTHER => Self::Other,
            _ => Self::Unread,
        }
    }
}

impl SideView {
    /// Sockets in `state` now (a `c1m_common::tcp_state` value); 0 when none.
    pub fn state(&self, state: u32) -> i64 {
        self.states.get(&state_key(state)).copied().unwrap_or(0)
    }

    /// SYN_RECV plus request sockets (NEW_SYN_RECV): handshakes not finished.
    pub(crate) fn half_open(&self) -> i64 {
        self.state(tcp_state::SYN_RECV)
            .saturating_add(self.state(tcp_state::NEW_SYN_RECV))
    }

    /// Transitions `old -> new` counted since attach.
    pub fn transition(&self, old: u32, new: u32) -> u64 {
        self.transitions
            .get(&transition_key(old, new))
            .copied()
            .unwrap_or(0)
    }

    /// Count since attach of the signal `index` (a `c1m_common::event` value); retransmits
    /// come from `retransmits.total`.
    pub fn event(&self, index: u32) -> u64 {
        if index == event::RETRANSMIT {
            return self.retransmits.total;
        }
        event::NAMES
            .get(index as usize)
            .and_then(|n| self.events.get(*n))
            .copied()
            .unwrap_or(0)
    }
}

/// JSON key of one transition (`established->close`).
pub(crate) fn transition_key(old: u32, new: u32) -> String {
    format!("{}->{}", state_key(old), state_key(new))
}

/// Retransmitted segments of one side since attach, as the kernel's `RetransSegs`
/// counts them (segments, not calls), by what sent them. The kinds sum to `total`;
/// `spurious_dsack` is apart: segments the peer reported as duplicates (DSACK), i.e.
/// retransmits that were not needed, summed as each connection closes.
#[derive(
    Debug, Clone, Copy, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq, Eq,
)]
pub struct Retransmits {
    /// Retransmitted segments of the side since attach, all kinds.
    pub total: u64,
    /// Sent by the tail-loss-probe timer: the last segment stayed unacknowledged for
    /// ~2 RTT (+200 ms with one segment out). Only probes that resent data: the
    /// kernel's `TCPLossProbes` also counts probes that sent new data.
    pub tail_loss_probes: u64,
    /// Sent by the retransmission timer (RTO) after the handshake.
    pub timeouts: u64,
    /// SYNs resent by the retransmission timer (the connect's SYN or SYN-ACK was lost):
    /// with the SYN-ACK retransmits, the kernel's `TCPSynRetrans`.
    #[serde(default)]
    pub syn: u64,
    /// Resent while recovering from a timeout (the kernel's `TCPSlowStartRetrans`).
    pub slow_start: u64,
    /// Fast retransmit / recovery on duplicate ACKs or SACKs (`TCPFastRetrans`).
    pub fast: u64,
    /// Kind unknown: a field this kernel's BTF lacks, or a socket that vanished.
    pub other: u64,
    /// Segments the peer reported as duplicates (DSACK): needless retransmits, summed as
    /// each connection closes.
    pub spurious_dsack: u64,
}

impl Retransmits {
    /// From the per-kind counters (indexed by `c1m_common::retransmit`).
    pub(crate) fn from_kinds(k: &[u64; c1m_common::retransmit::COUNT]) -> Self {
        use c1m_common::retransmit as r;
        let kinds = &k[..r::KINDS];
        Self {
            total: kinds.iter().sum(),
            tail_loss_probes: k[r::TAIL_LOSS_PROBE as usize],
            timeouts: k[r::TIMEOUT as usize],
            syn: k[r::SYN as usize],
            slow_start: k[r::SLOW_START as usize],
            fast: k[r::FAST as usize],
            other: k[r::OTHER as usize],
            spurious_dsack: k[r::SPURIOUS_DSACK as usize],
        }
    }

    pub(crate) fn sum(a: &Self, b: &Self) -> Self {
        Self {
            total: a.total + b.total,
            tail_loss_probes: a.tail_loss_probes + b.tail_loss_probes,
            timeouts: a.timeouts + b.timeouts,
            syn: a.syn + b.syn,
            slow_start: a.slow_start + b.slow_start,
            fast: a.fast + b.fast,
            other: a.other + b.other,
            spurious_dsack: a.spurious_dsack + b.spurious_dsack,
        }
    }
}

/// One listening port (all listening sockets on it, e.g. a SO_REUSEPORT group).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq, Eq)]
pub struct ListenerView {
    /// The local TCP port.
    pub port: u16,
    /// Listening sockets on the port (several with SO_REUSEPORT).
    pub sockets: u32,
    /// Connections in the accept queues now (`sk_ack_backlog`), summed.
    pub queue_depth: u64,
    /// Accept queue limits (`sk_max_ack_backlog`), summed.
    pub queue_limit: u64,
    /// Deepest `queue_depth` seen by any listener walk (sampled, not exact).
    pub queue_peak_sampled: u64,
    /// Handshakes this port's listeners dropped since attach, mostly because the
    /// accept queue was full: the kernel's `TcpExtListenDrops` for this port (equal
    /// to `ListenOverflows` unless the kernel ran out of memory or routes).
    /// Derived: Δ`sk_drops` minus `rcv_discards` (see ARCHITECTURE.md).
    pub accept_queue_overflows: u64,
    /// ... of which final ACKs (the client believes it is connected). `None` when
    /// `skb:kfree_skb` is missing; `accept_queue_overflows` is then raw Δ`sk_drops`.
    pub overflow_acks: Option<u64>,
    /// Packets for the listener that the kernel discarded and added to `sk_drops`
    /// without a listen drop (`tcp_v4_rcv`'s discards, stray RSTs in
    /// `tcp_rcv_state_process`); `None` when /proc/kallsyms gave no address for
    /// `tcp_v4_rcv`.
    pub rcv_discards: Option<u64>,
    /// Raw Δ`sk_drops` of the listening sockets since attach.
    pub sk_drops_delta: u64,
    /// Children created (LISTEN->SYN_RECV) since attach.
    pub children: u64,
    /// SYN-ACKs the listeners resent since attach; `None` when the SYN-ACK hook does not run.
    pub synack_retransmits: Option<u64>,
}

/// Kernel memory of the watched sockets at the last socket walk, per side and in total.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct KernelMemory {
    /// Server-side sockets.
    pub server: SideMemory,
    /// Client-side sockets.
    pub client: SideMemory,
    /// Other sockets (neither end on a watched port).
    pub other: SideMemory,
    /// All sides summed.
    pub total: SideMemory,
    /// Bytes per object of each slab cache used, from /sys/kernel/slab.
    pub slab_object_bytes: BTreeMap<String, u64>,
    /// Derived slab bytes of all sides, per cache: where the kernel memory went.
    pub slab_bytes_by_cache: BTreeMap<String, u64>,
}

/// Kernel memory of one side's sockets at the last socket walk; byte figures in bytes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct SideMemory {
    /// Sockets seen by the walk, every state.
    pub sockets: u64,
    /// ... of which IPv6 sockets (dual-stack ones with an IPv4-mapped address too),
    /// sized with the `TCPv6` caches.
    #[serde(default)]
    pub ipv6_sockets: u64,
    /// Full sockets: every state but TIME_WAIT and NEW_SYN_RECV.
    pub full_sockets: u64,
    /// TIME_WAIT (mini) sockets.
    pub time_wait_sockets: u64,
    /// Request sockets (NEW_SYN_RECV): handshakes not yet accepted.
    pub request_sockets: u64,
    /// Full sockets with a file (held open by some process).
    pub with_file: u64,
    /// ... of which registered with epoll.
    pub in_epoll: u64,
    /// Derived: socket counts × slab object size (socket object of its family's cache, plus inode, file and
    /// dentry for sockets with a file, plus epoll item and wait entry when in epoll,
    /// plus the port's bind buckets for client sockets).
    pub slab_bytes_derived: u64,
    /// Counted: receive queue + send queue + forward allocation, read per socket.
    pub buffer_bytes: u64,
    /// Receive-queue bytes (`sk_rmem_alloc`), summed over the sockets.
    pub rmem_alloc: u64,
    /// Send-queue bytes (`sk_wmem_queued`), summed over the sockets.
    pub wmem_queued: u64,
    /// Forward-allocated bytes (`sk_forward_alloc`), summed over the sockets.
    pub forward_alloc: u64,
    /// `slab_bytes_derived` + `buffer_bytes`.
    pub total_bytes: u64,
    /// `total_bytes` / `sockets` (0 when there are none).
    pub bytes_per_socket: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct WalkInfo {
    /// Seconds since the last full socket walk ended (None before the first).
    pub age_s: Option<f64>,
    /// Wall clock when that walk ended, ms since the Unix epoch: the instant the memory
    /// figures describe.
    pub ended_unix_ms: u64,
    pub duration_ms: f64,
    pub sockets_walked: u64,
    pub walks: u64,
}
