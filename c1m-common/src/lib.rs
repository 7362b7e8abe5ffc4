//! Types shared by the eBPF programs (`c1m-ebpf`) and user space (`c1m-userspace`).
//!
//! One source of truth for TCP state numbers, counter indices and the byte layout of
//! every record that crosses the kernel/user boundary. Everything is `#[repr(C)]`,
//! `Copy`, free of implicit padding, and its size is pinned by a `const` assertion.
#![no_std]

use core::mem::size_of;

/// TCP states as the kernel numbers them (`include/net/tcp_states.h`), which is also
/// what `sock:inet_sock_set_state` reports in `oldstate`/`newstate`.
pub mod tcp_state {
    pub const ESTABLISHED: u32 = 1;
    pub const SYN_SENT: u32 = 2;
    pub const SYN_RECV: u32 = 3;
    pub const FIN_WAIT1: u32 = 4;
    pub const FIN_WAIT2: u32 = 5;
    pub const TIME_WAIT: u32 = 6;
    pub const CLOSE: u32 = 7;
    pub const CLOSE_WAIT: u32 = 8;
    pub const LAST_ACK: u32 = 9;
    pub const LISTEN: u32 = 10;
    pub const CLOSING: u32 = 11;
    /// A request socket (mini socket of a half-open server-side connection).
    pub const NEW_SYN_RECV: u32 = 12;
    /// Array size for per-state tables: index 0 is unused.
    pub const COUNT: usize = 13;

    /// The names `ss` and the kernel use, indexed by state number.
    pub const NAMES: [&str; COUNT] = [
        "UNKNOWN",
        "ESTABLISHED",
        "SYN_SENT",
        "SYN_RECV",
        "FIN_WAIT1",
        "FIN_WAIT2",
        "TIME_WAIT",
        "CLOSE",
        "CLOSE_WAIT",
        "LAST_ACK",
        "LISTEN",
        "CLOSING",
        "NEW_SYN_RECV",
    ];
}

/// Which end of a watched connection a socket is.
pub mod side {
    /// Local port is a watched (listening) port.
    pub const SERVER: u32 = 0;
    /// Remote port is a watched port.
    pub const CLIENT: u32 = 1;
    /// Neither: only counted when every TCP socket is watched.
    pub const OTHER: u32 = 2;
    pub const COUNT: usize = 3;
    pub const NAMES: [&str; COUNT] = ["server", "client", "other"];
}

/// Indices into the per-side event counters (`EVENTS` map).
pub mod event {
    /// `tcp:tcp_retransmit_synack`: a listener resent a SYN-ACK.
    pub const SYNACK_RETRANSMIT: u32 = 0;
    /// `tcp:tcp_send_reset`.
    pub const RESET_SENT: u32 = 1;
    /// `tcp:tcp_receive_reset`.
    pub const RESET_RECEIVED: u32 = 2;
    /// Retransmitted segments, all kinds (the sum of [`super::retransmit`]'s kinds;
    /// user space fills it, the programs count per kind in `RETRANSMITS`).
    pub const RETRANSMIT: u32 = 3;
    /// `sock:sock_exceed_buf_limit` for TCP (the kernel gives no socket: side OTHER).
    pub const EXCEED_BUF_LIMIT: u32 = 4;
    /// `skb:kfree_skb` with reason `TCP_LISTEN_OVERFLOW`: a final handshake ACK dropped
    /// because the listener's accept queue was full.
    pub const LISTEN_OVERFLOW_ACK: u32 = 5;
    /// A handshake that failed: SYN_SENT or SYN_RECV -> CLOSE through `tcp_done()` (a
    /// reset, or the SYN retries ran out), the kernel's `Tcp AttemptFails`. Told from
    /// an application's close()/shutdown() by `sk_shutdown`, which those set before
    /// the state changes and `tcp_done()` only after.
    /// https://github.com/torvalds/linux/blob/v6.18/net/ipv4/tcp.c (tcp_done, __tcp_close)
    pub const ATTEMPT_FAIL: u32 = 6;
    pub const COUNT: usize = 7;
    pub const NAMES: [&str; COUNT] = [
        "synack_retransmits",
        "resets_sent",
        "resets_received",
        "retransmits",
        "exceed_buf_limit",
        "listen_overflow_acks",
        "attempt_fails",
    ];
}

/// Kinds of retransmitted segments: indices into the per-side `RETRANSMITS` counters.
/// The kinds before [`retransmit::KINDS`] partition the kernel's `RetransSegs` (for
/// full sockets); `SPURIOUS_DSACK` is counted apart and is not part of that sum.
pub mod retransmit {
    /// Sent by the tail-loss-probe timer (`tcp_send_loss_probe`, `TCPLossProbes`).
    pub const TAIL_LOSS_PROBE: u32 = 0;
    /// Sent by the retransmission timer (`tcp_retransmit_timer`, `TCPTimeouts`) for a
    /// connection past its handshake.
    pub const TIMEOUT: u32 = 1;
    /// Sent while recovering from a timeout (`TCP_CA_Loss`): the kernel's
    /// `TCPSlowStartRetrans`.
    pub const SLOW_START: u32 = 2;
    /// Sent by fast retransmit / recovery outside `TCP_CA_Loss`: `TCPFastRetrans`.
    pub const FAST: u32 = 3;
    /// The kind could not be read (a field this kernel's BTF lacks, or a failed read).
    pub const OTHER: u32 = 4;
    /// A SYN resent by the retransmission timer (the socket in SYN_SENT): the part of
    /// `TCPSynRetrans` that is not SYN-ACKs, and of `TCPTimeouts` that is handshakes.
    /// https://github.com/torvalds/linux/blob/v6.18/net/ipv4/tcp_output.c (__tcp_retransmit_skb: TCPHDR_SYN -> LINUX_MIB_TCPSYNRETRANS)
    pub const SYN: u32 = 5;
    /// Number of kinds that sum to the total.
    pub const KINDS: usize = 6;
    /// Segments the peer reported received twice (DSACK), summed from `tcp_sock.dsack_dups`
    /// as each watched socket closes: retransmits that were not needed.
    pub const SPURIOUS_DSACK: u32 = 6;
    pub const COUNT: usize = 7;
    pub const NAMES: [&str; COUNT] = [
        "tail_loss_probes",
        "timeouts",
        "slow_start",
        "fast",
        "other",
        "syn",
        "spurious_dsack",
    ];
}

/// Packets the loss injector (`c1m run --loss`, probes/loss.rs) dropped, by direction
/// on the host's link and by what the TCP segment was: indices into `LOSS_DROPS`.
pub mod loss {
    /// Leaving the host (the client's SYNs, requests, ACKs, FINs).
    pub const EGRESS: u32 = 0;
    /// Arriving at the host (the server's SYN-ACKs, answers, pushes, ACKs).
    pub const INGRESS: u32 = 1;
    pub const DIRECTIONS: usize = 2;
    pub const DIRECTION_NAMES: [&str; DIRECTIONS] = ["egress", "ingress"];

    /// Checked in this order: a segment is counted once, as the first class it fits.
    pub const RST: u32 = 0;
    pub const SYN_ACK: u32 = 1;
    pub const SYN: u32 = 2;
    pub const FIN: u32 = 3;
    /// Carries payload (and no SYN, FIN or RST).
    pub const DATA: u32 = 4;
    /// No payload and no SYN, FIN or RST.
    pub const PURE_ACK: u32 = 5;
    pub const CLASSES: usize = 6;
    pub const CLASS_NAMES: [&str; CLASSES] = ["rst", "syn_ack", "syn", "fin", "data", "pure_ack"];

    /// `LOSS_SETTINGS` slot of the drop threshold: a packet is dropped when
    /// `bpf_get_prandom_u32()` is below it (probability × 2^32; 0 drops nothing).
    pub const THRESHOLD: u32 = 0;
    pub const SETTINGS: usize = 1;
}

/// Number of entries of the per-CPU drop counters: direction × class.
pub const LOSS_SLOTS: usize = loss::DIRECTIONS * loss::CLASSES;

#[inline(always)]
pub const fn loss_index(direction: u32, class: u32) -> u32 {
    direction * loss::CLASSES as u32 + class
}

/// Number of entries of the per-CPU retransmit counters: side × kind.
pub const RETRANSMIT_SLOTS: usize = side::COUNT * retransmit::COUNT;

#[inline(always)]
pub const fn retransmit_index(side: u32, kind: u32) -> u32 {
    side * retransmit::COUNT as u32 + kind
}

/// Why a reset was sent: the kernel's `enum sk_rst_reason` (the `reason` field of
/// `tcp:tcp_send_reset` since v6.10), whose names user space reads from the tracepoint's
/// format. Values past the table, or a kernel without the field, count as [`UNKNOWN`].
///
/// [`UNKNOWN`]: reset_reason::UNKNOWN
/// https://github.com/torvalds/linux/blob/v6.18/include/net/rstreason.h
pub mod reset_reason {
    pub const COUNT: usize = 32;
    pub const UNKNOWN: u32 = COUNT as u32 - 1;
}

/// Number of entries of the per-CPU reset counters: side × reason.
pub const RESET_SLOTS: usize = side::COUNT * reset_reason::COUNT;

/// What drew a reset: the segment it answers, by its flags and whether it carried data,
/// or none (the reset is this end's own, sent on close, abort or a timer).
pub mod reset_segment {
    /// No segment: `tcp_send_active_reset` (close with unread data, SO_LINGER 0, ...).
    pub const NONE: u32 = 0;
    /// A SYN (no ACK).
    pub const SYN: u32 = 1;
    pub const SYN_ACK: u32 = 2;
    /// A FIN, with or without data.
    pub const FIN: u32 = 3;
    /// An ACK carrying data (no FIN).
    pub const DATA: u32 = 4;
    /// An ACK with no data and no FIN.
    pub const ACK: u32 = 5;
    /// Any other flags (no ACK, no SYN: e.g. a bare FIN or data without ACK).
    pub const OTHER: u32 = 6;
    /// The segment could not be read (offsets this kernel's BTF lacks, a failed read).
    pub const UNREAD: u32 = 7;
    pub const COUNT: usize = 8;
    pub const NAMES: [&str; COUNT] = [
        "none", "syn", "syn_ack", "fin", "data", "ack", "other", "unread",
    ];
}

/// The TCP state number for a reset sent with no socket (`tcp_state` has no 0).
pub const NO_SOCKET_STATE: u32 = 0;

/// Most distinct (side, reason, segment, state) causes kept; a run sees a handful.
pub const RESET_CAUSE_SLOTS: usize = 1024;

/// Key of the reset-cause counters: side, reason, drawing segment and socket state,
/// a byte each (reasons past [`reset_reason::UNKNOWN`] count as it).
#[inline(always)]
pub const fn reset_cause_key(side: u32, reason: u32, segment: u32, state: u32) -> u32 {
    let reason = if reason < reset_reason::UNKNOWN {
        reason
    } else {
        reset_reason::UNKNOWN
    };
    (side & 0xff) << 24 | reason << 16 | (segment & 0xff) << 8 | (state & 0xff)
}

/// The four parts of a [`reset_cause_key`]: side, reason, segment, state.
#[inline(always)]
pub const fn reset_cause_parts(key: u32) -> (u32, u32, u32, u32) {
    (key >> 24, (key >> 16) & 0xff, (key >> 8) & 0xff, key & 0xff)
}

#[inline(always)]
pub const fn reset_index(side: u32, reason: u32) -> u32 {
    let reason = if reason < reset_reason::UNKNOWN {
        reason
    } else {
        reset_reason::UNKNOWN
    };
    side * reset_reason::COUNT as u32 + reason
}

/// `icsk_pending` while the tail-loss-probe timer runs: `tcp_write_timer_handler` leaves
/// it set for `ICSK_TIME_LOSS_PROBE` and clears it (0) before `tcp_retransmit_timer`.
/// A `#define`, so not in BTF.
/// https://github.com/torvalds/linux/blob/v6.18/include/net/inet_connection_sock.h (ICSK_TIME_LOSS_PROBE 5)
/// https://github.com/torvalds/linux/blob/v6.18/net/ipv4/tcp_timer.c (tcp_write_timer_handler)
pub const ICSK_TIME_LOSS_PROBE: u8 = 5;

/// Number of entries of the per-CPU transition matrix: side × old state × new state.
pub const TRANSITION_SLOTS: usize = side::COUNT * tcp_state::COUNT * tcp_state::COUNT;

/// Index of one (side, old, new) cell of the transition matrix.
#[inline(always)]
pub const fn transition_index(side: u32, old: u32, new: u32) -> u32 {
    (side * tcp_state::COUNT as u32 + old) * tcp_state::COUNT as u32 + new
}

/// Number of entries of the per-CPU event counters: side × event.
pub const EVENT_SLOTS: usize = side::COUNT * event::COUNT;

#[inline(always)]
pub const fn event_index(side: u32, event: u32) -> u32 {
    side * event::COUNT as u32 + event
}

/// Number of entries of the socket aggregate filled by the socket iterator.
pub const SOCK_AGG_SLOTS: usize = side::COUNT * tcp_state::COUNT;

#[inline(always)]
pub const fn sock_agg_index(side: u32, state: u32) -> u32 {
    side * tcp_state::COUNT as u32 + state
}

/// Marks a field offset that could not be resolved on this kernel: the programs skip
/// every figure that needs it and user space reports it as unavailable.
pub const OFFSET_UNKNOWN: u32 = u32::MAX;

/// Offsets of kernel struct fields, resolved at load time from `/sys/kernel/btf/vmlinux`
/// (aya-ebpf has no CO-RE, and hard-coding one build's layout is wrong on the next).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelOffsets {
    // struct sock_common
    pub skc_family: u32,
    pub skc_state: u32,
    pub skc_num: u32,
    pub skc_dport: u32,
    pub skc_rcv_saddr: u32,
    pub skc_daddr: u32,
    pub skc_net: u32,
    // struct net -> ns.inum
    pub net_ns_inum: u32,
    // struct sock
    pub sk_ack_backlog: u32,
    pub sk_max_ack_backlog: u32,
    pub sk_drops: u32,
    pub sk_rmem_alloc: u32,
    pub sk_wmem_queued: u32,
    pub sk_forward_alloc: u32,
    pub sk_wmem_alloc: u32,
    pub sk_socket: u32,
    // struct socket -> file, struct file -> f_ep
    pub socket_file: u32,
    pub file_f_ep: u32,
    /// Value of `SKB_DROP_REASON_TCP_LISTEN_OVERFLOW` in this kernel's enum.
    pub drop_reason_listen_overflow: u32,
    /// `struct sock.sk_protocol` (u16).
    pub sk_protocol: u32,
    /// `struct tcp_sock.bpf_sock_ops_cb_flags` (u8): tells the tracepoint which
    /// sockets the sock_ops program already counts.
    pub tcp_bpf_cb_flags: u32,
    /// `inet_connection_sock.icsk_pending` (u8), from the start of the socket: which
    /// write timer runs (tells a tail-loss probe and a timeout from other retransmits).
    pub icsk_pending: u32,
    /// Byte holding the `icsk_ca_state` bitfield, and the field's shift and mask in it.
    pub icsk_ca_state_byte: u32,
    pub icsk_ca_state_shift: u32,
    pub icsk_ca_state_mask: u32,
    /// Value of `TCP_CA_Loss` in this kernel's `enum tcp_ca_state`.
    pub ca_state_loss: u32,
    /// Value of `TCP_CA_Recovery`.
    pub ca_state_recovery: u32,
    /// `tcp_sock.dsack_dups` (u32): segments the peer DSACKed.
    pub tcp_dsack_dups: u32,
    /// `struct sock.sk_shutdown` (u8).
    pub sk_shutdown: u32,
    /// `sk_buff.dev` and `net_device.nd_net.net`: the namespace of a packet a reset
    /// answers when there is no socket (sk-less resets carry only the packet).
    pub skb_dev: u32,
    pub dev_nd_net: u32,
    /// `struct sock_common.skc_v6_daddr`/`skc_v6_rcv_saddr` (`struct in6_addr`): an
    /// IPv6 socket's addresses, also in time-wait and request sockets, which start
    /// with a `sock_common`.
    pub skc_v6_daddr: u32,
    pub skc_v6_rcv_saddr: u32,
    /// `struct request_sock.rsk_ops` and `struct request_sock_ops.family`: the family
    /// of a request socket's ops, which decides its slab cache and which of its
    /// addresses are set (its `skc_family` is the listener's).
    pub rsk_ops: u32,
    pub rsk_ops_family: u32,
    /// `sk_buff.head` (pointer), `.transport_header` and `.network_header` (u16 offsets
    /// from `head`): the TCP and IP headers of the segment a reset answers.
    pub skb_head: u32,
    pub skb_transport_header: u32,
    pub skb_network_header: u32,
    pub _pad: u32,
}

impl KernelOffsets {
    pub const UNKNOWN: Self = Self {
        skc_family: OFFSET_UNKNOWN,
        skc_state: OFFSET_UNKNOWN,
        skc_num: OFFSET_UNKNOWN,
        skc_dport: OFFSET_UNKNOWN,
        skc_rcv_saddr: OFFSET_UNKNOWN,
        skc_daddr: OFFSET_UNKNOWN,
        skc_net: OFFSET_UNKNOWN,
        net_ns_inum: OFFSET_UNKNOWN,
        sk_ack_backlog: OFFSET_UNKNOWN,
        sk_max_ack_backlog: OFFSET_UNKNOWN,
        sk_drops: OFFSET_UNKNOWN,
        sk_rmem_alloc: OFFSET_UNKNOWN,
        sk_wmem_queued: OFFSET_UNKNOWN,
        sk_forward_alloc: OFFSET_UNKNOWN,
        sk_wmem_alloc: OFFSET_UNKNOWN,
        sk_socket: OFFSET_UNKNOWN,
        socket_file: OFFSET_UNKNOWN,
        file_f_ep: OFFSET_UNKNOWN,
        drop_reason_listen_overflow: OFFSET_UNKNOWN,
        sk_protocol: OFFSET_UNKNOWN,
        tcp_bpf_cb_flags: OFFSET_UNKNOWN,
        icsk_pending: OFFSET_UNKNOWN,
        icsk_ca_state_byte: OFFSET_UNKNOWN,
        icsk_ca_state_shift: 0,
        icsk_ca_state_mask: 0,
        ca_state_loss: OFFSET_UNKNOWN,
        ca_state_recovery: OFFSET_UNKNOWN,
        tcp_dsack_dups: OFFSET_UNKNOWN,
        sk_shutdown: OFFSET_UNKNOWN,
        skb_dev: OFFSET_UNKNOWN,
        dev_nd_net: OFFSET_UNKNOWN,
        skc_v6_daddr: OFFSET_UNKNOWN,
        skc_v6_rcv_saddr: OFFSET_UNKNOWN,
        rsk_ops: OFFSET_UNKNOWN,
        rsk_ops_family: OFFSET_UNKNOWN,
        skb_head: OFFSET_UNKNOWN,
        skb_transport_header: OFFSET_UNKNOWN,
        skb_network_header: OFFSET_UNKNOWN,
        _pad: 0,
    };
}

/// Offsets of the fields c1m reads from a classic tracepoint's record, parsed from the
/// tracepoint's `format` file under tracefs at load time.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracepointFields {
    /// `const void *skaddr` (or `rx_sk` for `skb:kfree_skb`).
    pub sk: u32,
    /// Local and remote port (see `ports_be` for their byte order).
    pub sport: u32,
    pub dport: u32,
    /// Local and remote IPv4 address (network byte order).
    pub saddr: u32,
    pub daddr: u32,
    /// Local and remote IPv6 address (16 bytes), read when `family` is `AF_INET6`.
    pub saddr6: u32,
    pub daddr6: u32,
    pub oldstate: u32,
    pub newstate: u32,
    pub family: u32,
    pub protocol: u32,
    /// `enum skb_drop_reason reason` for `skb:kfree_skb`, `enum sk_rst_reason reason` for
    /// `tcp:tcp_send_reset`.
    pub reason: u32,
    /// `void *location` (where the skb was freed) for `skb:kfree_skb`.
    pub location: u32,
    /// `char name[32]` (protocol name) for `sock:sock_exceed_buf_limit`.
    pub name: u32,
    /// 1 when the ports sit inside a `struct sockaddr` (network byte order), 0 when
    /// they are `__u16` fields the tracepoint already converted to host order.
    pub ports_be: u32,
    /// `int err` of `tcp:tcp_retransmit_skb` (v6.18 fires it for failed attempts too).
    pub err: u32,
    /// `const void *skbaddr` of `tcp:tcp_send_reset`.
    pub skb: u32,
    /// `int state` of `tcp:tcp_send_reset`: the state of the socket that sent it.
    pub state: u32,
}

impl TracepointFields {
    pub const UNKNOWN: Self = Self {
        sk: OFFSET_UNKNOWN,
        sport: OFFSET_UNKNOWN,
        dport: OFFSET_UNKNOWN,
        saddr: OFFSET_UNKNOWN,
        daddr: OFFSET_UNKNOWN,
        saddr6: OFFSET_UNKNOWN,
        daddr6: OFFSET_UNKNOWN,
        oldstate: OFFSET_UNKNOWN,
        newstate: OFFSET_UNKNOWN,
        family: OFFSET_UNKNOWN,
        protocol: OFFSET_UNKNOWN,
        reason: OFFSET_UNKNOWN,
        location: OFFSET_UNKNOWN,
        name: OFFSET_UNKNOWN,
        ports_be: 0,
        err: OFFSET_UNKNOWN,
        skb: OFFSET_UNKNOWN,
        state: OFFSET_UNKNOWN,
    };
}

/// Index of each hook's fields in [`Config::tracepoints`].
pub mod hook {
    pub const SET_STATE: usize = 0;
    pub const RETRANSMIT_SYNACK: usize = 1;
    pub const SEND_RESET: usize = 2;
    pub const RECEIVE_RESET: usize = 3;
    pub const RETRANSMIT_SKB: usize = 4;
    pub const KFREE_SKB: usize = 5;
    pub const EXCEED_BUF_LIMIT: usize = 6;
    pub const COUNT: usize = 7;
}

/// Everything the programs need that is fixed for the life of one observer. Set as a
/// read-only global before load, so the verifier sees it as constant.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub offsets: KernelOffsets,
    pub tracepoints: [TracepointFields; hook::COUNT],
    /// Network namespace inode number to watch; 0 watches every namespace.
    pub netns_inum: u32,
    /// 1: only sockets whose local or remote port is in `WATCH_PORTS`.
    /// 0: every TCP socket; listening ports (learnt) decide the side.
    pub ports_filter: u32,
    /// 1: server-side sockets must have a local address in `WATCH_ADDRS` (IPv4 and
    /// IPv4-mapped) or `WATCH_ADDRS6` (IPv6), client-side ones a remote address there.
    pub addr_filter: u32,
    /// Network namespace cookie (`SO_NETNS_COOKIE`) for the sock_ops program, which
    /// cannot read the inode number; 0 with `netns_inum` 0. Split in two u32 so the
    /// struct has no padding.
    pub netns_cookie_lo: u32,
    pub netns_cookie_hi: u32,
    /// [start, end) code address pairs of the functions that add a packet they free to
    /// its socket's `sk_drops` (see [`LISTENER_DROP_FUNCTIONS`]), from /proc/kallsyms
    /// (0, 0 when unknown). A `kfree_skb` of a listener's packet from inside them bumped
    /// the listener's `sk_drops` without being a listen drop (see listen_overflow.rs).
    pub listener_drop_ranges: [u64; 2 * LISTENER_DROP_FUNCTIONS.len()],
}

/// Functions that call `sk_drops_add` on the socket of a packet they then free, for a
/// listener: `tcp_v4_rcv`/`tcp_v6_rcv` (`discard_and_relse`, e.g. an overflowed final
/// ACK) and `tcp_rcv_state_process` through `tcp_drop_reason` (e.g. a stray RST), which
/// may or may not be inlined. The first is required, the others are used when present.
pub const LISTENER_DROP_FUNCTIONS: [&str; 4] = [
    "tcp_v4_rcv",
    "tcp_v6_rcv",
    "tcp_rcv_state_process",
    "tcp_drop_reason",
];

impl Config {
    pub const DEFAULT: Self = Self {
        offsets: KernelOffsets::UNKNOWN,
        tracepoints: [TracepointFields::UNKNOWN; hook::COUNT],
        netns_inum: 0,
        ports_filter: 0,
        addr_filter: 0,
        netns_cookie_lo: 0,
        netns_cookie_hi: 0,
        listener_drop_ranges: [0; 2 * LISTENER_DROP_FUNCTIONS.len()],
    };
}

/// Bits of the `SETTINGS` map, written by user space after attach.
pub mod settings {
    /// The sock_ops program is attached: it counts the transitions of the sockets it
    /// has flagged, and the tracepoint leaves those alone.
    pub const SOCKOPS_ACTIVE: u32 = 1;
}

/// `BPF_SOCK_OPS_STATE_CB_FLAG` from the kernel UAPI.
pub const SOCK_OPS_STATE_CB_FLAG: u32 = 1 << 2;
/// `BPF_SOCK_OPS_RETRANS_CB_FLAG` from the kernel UAPI.
pub const SOCK_OPS_RETRANS_CB_FLAG: u32 = 1 << 1;

/// Address families as the kernel numbers them (`include/linux/socket.h`).
pub mod family {
    pub const AF_INET: u16 = 2;
    pub const AF_INET6: u16 = 10;
}

/// Sums over the sockets of one (side, state), filled by the socket iterator.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SockAgg {
    pub sockets: u64,
    /// ... of which IPv6 sockets (objects of the `TCPv6` caches, even when they carry
    /// an IPv4-mapped address).
    pub v6_sockets: u64,
    /// `sk_rmem_alloc`: bytes in the receive queue (skb truesize).
    pub rmem_alloc: u64,
    /// `sk_wmem_queued`: bytes queued for sending, not yet acknowledged.
    pub wmem_queued: u64,
    /// `sk_forward_alloc`: memory reserved by the socket but not yet used.
    pub forward_alloc: u64,
    /// Full sockets that have a `struct socket` (an open file in some process).
    pub with_file: u64,
    /// ... of which the file is registered in at least one epoll instance.
    pub in_epoll: u64,
}

/// What the listener iterator writes per listening socket.
pub const RECORD_LISTENER: u32 = 1;
/// Written for every non-listening socket (they follow the listeners): user space stops
/// at the first, so a listener walk visits one read's worth of the established hash.
pub const RECORD_END: u32 = 2;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListenerRecord {
    pub kind: u32,
    pub family: u32,
    pub port: u32,
    /// `sk_ack_backlog`: connections waiting in the accept queue now.
    pub ack_backlog: u32,
    /// `sk_max_ack_backlog`: the accept queue's limit (`listen()` backlog, capped by somaxconn).
    pub max_ack_backlog: u32,
    /// `sk_drops`: see ARCHITECTURE.md for how this relates to ListenOverflows.
    pub drops: u32,
    /// Kernel address of the socket: identity across walks (never shown).
    pub sk: u64,
    /// Bound IPv4 address in network byte order (0 for IPv6 or wildcard).
    pub addr_v4: u32,
    pub netns_inum: u32,
}

/// Per-listening-port counters kept by the tracepoint programs (`LISTEN_EVENTS`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListenEvents {
    /// Children created (LISTEN -> SYN_RECV transitions).
    pub children: u64,
    pub synack_retransmits: u64,
    /// Final ACKs dropped because the accept queue was full (`skb:kfree_skb`).
    pub overflow_acks: u64,
    /// Packets of this listener freed from inside [`LISTENER_DROP_FUNCTIONS`]: each one
    /// also counted once in `sk_drops` without being a listen drop.
    pub rcv_discards: u64,
}

/// A listener's last `sk_drops`, taken as it closes (`LISTEN_CLOSED`), so drops after
/// the last listener walk are not lost.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClosedListener {
    pub port: u32,
    pub drops: u32,
}

const _: () = assert!(size_of::<ClosedListener>() == 8);
const _: () = assert!(size_of::<KernelOffsets>() == 39 * 4);
const _: () = assert!(size_of::<TracepointFields>() == 18 * 4);
const _: () = assert!(size_of::<Config>() == 156 + 72 * hook::COUNT + 20 + 64);
const _: () = assert!(size_of::<SockAgg>() == 56);
const _: () = assert!(size_of::<ListenerRecord>() == 40);
const _: () = assert!(size_of::<ListenEvents>() == 32);

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all of these are `#[repr(C)]`, `Copy`, contain only integers and have
    // no padding (checked by the size assertions above).
    unsafe impl aya::Pod for super::Config {}
    unsafe impl aya::Pod for super::SockAgg {}
    unsafe impl aya::Pod for super::ListenerRecord {}
    unsafe impl aya::Pod for super::ListenEvents {}
    unsafe impl aya::Pod for super::ClosedListener {}
}
