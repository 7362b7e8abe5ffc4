//! Resolves the kernel struct offsets the eBPF programs need from this kernel's BTF.
//! A field that cannot be found, or has an unexpected size, stays unknown: the
//! programs skip it and the figures that need it are reported as unavailable.

use c1m_common::KernelOffsets;

use super::btf::Btf;

/// The offsets, and one line per field that could not be resolved.
pub(crate) struct ResolvedOffsets {
    pub offsets: KernelOffsets,
    pub missing: Vec<String>,
}

pub(crate) fn resolve(btf: &Btf) -> ResolvedOffsets {
    let mut o = KernelOffsets::UNKNOWN;
    let mut missing = Vec::new();
    {
        let mut want =
            |slot: &mut u32, outer: &str, path: &[&str], size: u32| match btf.field(outer, path) {
                Ok(f) if f.size == size => *slot = f.offset,
                Ok(f) => missing.push(format!(
                    "{outer}.{} is {} bytes, expected {size}",
                    path.join("."),
                    f.size
                )),
                Err(e) => missing.push(e.to_string()),
            };
        want(&mut o.skc_family, "sock_common", &["skc_family"], 2);
        want(&mut o.skc_state, "sock_common", &["skc_state"], 1);
        want(&mut o.skc_num, "sock_common", &["skc_num"], 2);
        want(&mut o.skc_dport, "sock_common", &["skc_dport"], 2);
        want(&mut o.skc_rcv_saddr, "sock_common", &["skc_rcv_saddr"], 4);
        want(&mut o.skc_daddr, "sock_common", &["skc_daddr"], 4);
        want(&mut o.skc_v6_daddr, "sock_common", &["skc_v6_daddr"], 16);
        want(
            &mut o.skc_v6_rcv_saddr,
            "sock_common",
            &["skc_v6_rcv_saddr"],
            16,
        );
        want(&mut o.rsk_ops, "request_sock", &["rsk_ops"], 8);
        want(&mut o.rsk_ops_family, "request_sock_ops", &["family"], 4);
        want(&mut o.skc_net, "sock_common", &["skc_net", "net"], 8);
        want(&mut o.net_ns_inum, "net", &["ns", "inum"], 4);
        want(&mut o.sk_ack_backlog, "sock", &["sk_ack_backlog"], 4);
        want(
            &mut o.sk_max_ack_backlog,
            "sock",
            &["sk_max_ack_backlog"],
            4,
        );
        want(&mut o.sk_drops, "sock", &["sk_drops"], 4);
        want(
            &mut o.sk_rmem_alloc,
            "sock",
            &["sk_backlog", "rmem_alloc"],
            4,
        );
        want(&mut o.sk_wmem_queued, "sock", &["sk_wmem_queued"], 4);
        want(&mut o.sk_forward_alloc, "sock", &["sk_forward_alloc"], 4);
        want(&mut o.sk_wmem_alloc, "sock", &["sk_wmem_alloc"], 4);
        want(&mut o.sk_socket, "sock", &["sk_socket"], 8);
        want(&mut o.sk_protocol, "sock", &["sk_protocol"], 2);
        want(&mut o.sk_shutdown, "sock", &["sk_shutdown"], 1);
        want(&mut o.skb_dev, "sk_buff", &["dev"], 8);
        want(&mut o.skb_head, "sk_buff", &["head"], 8);
        want(
            &mut o.skb_transport_header,
            "sk_buff",
            &["transport_header"],
            2,
        );
        want(&mut o.skb_network_header, "sk_buff", &["network_header"], 2);
        want(&mut o.dev_nd_net, "net_device", &["nd_net", "net"], 8);
        want(
            &mut o.tcp_bpf_cb_flags,
            "tcp_sock",
            &["bpf_sock_ops_cb_flags"],
            1,
        );
        want(
            &mut o.icsk_pending,
            "tcp_sock",
            &["inet_conn", "icsk_pending"],
            1,
        );
        want(&mut o.tcp_dsack_dups, "tcp_sock", &["dsack_dups"], 4);
        want(&mut o.socket_file, "socket", &["file"], 8);
        want(&mut o.file_f_ep, "file", &["f_ep"], 8);
    }
    // `__u8 icsk_ca_state:5` shares a byte with other flags: read the byte, then shift
    // and mask. Only a field inside one byte is supported (as on every kernel so far).
    match btf.bitfield("tcp_sock", &["inet_conn", "icsk_ca_state"]) {
        Ok((bit, width)) if width < 8 && bit % 8 + width <= 8 => {
            o.icsk_ca_state_byte = bit / 8;
            o.icsk_ca_state_shift = bit % 8;
            o.icsk_ca_state_mask = (1 << width) - 1;
        }
        Ok((bit, width)) => missing.push(format!(
            "tcp_sock.inet_conn.icsk_ca_state is {width} bits at bit {bit}, expected inside one byte"
        )),
        Err(e) => missing.push(e.to_string()),
    }
    match btf.enum_value("TCP_CA_Loss") {
        Some(v) => o.ca_state_loss = v as u32,
        None => missing.push("enum value TCP_CA_Loss not in kernel BTF".to_owned()),
    }
    match btf.enum_value("TCP_CA_Recovery") {
        Some(v) => o.ca_state_recovery = v as u32,
        None => missing.push("enum value TCP_CA_Recovery not in kernel BTF".to_owned()),
    }
    match btf.enum_value("SKB_DROP_REASON_TCP_LISTEN_OVERFLOW") {
        Some(v) => o.drop_reason_listen_overflow = v as u32,
        None => missing
            .push("enum value SKB_DROP_REASON_TCP_LISTEN_OVERFLOW not in kernel BTF".to_owned()),
    }
    ResolvedOffsets {
        offsets: o,
        missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_kernel_resolves_every_offset() {
        let Ok(btf) = Btf::from_sys_fs() else {
            eprintln!("SKIP: /sys/kernel/btf/vmlinux not readable");
            return;
        };
        let r = resolve(&btf);
        eprintln!("{:#?}", r.offsets);
        assert!(r.missing.is_empty(), "unresolved: {:?}", r.missing);
    }
}
