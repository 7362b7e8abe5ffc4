//! The two bpf(2) commands aya 0.14 does not expose for repeated iterator reads:
//! creating an iterator link we own, and opening a fresh iterator from it per walk.
//! By hand with libc's `syscall(SYS_bpf, ..)`: rustix has no bpf(2) wrapper.

use std::{
    fs::File,
    io,
    os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd},
};

use crate::util::cvt;

const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_ITER_CREATE: libc::c_long = 33;
const BPF_TRACE_ITER: u32 = 28;

fn bpf(cmd: libc::c_long, attr: &mut [u8; 64]) -> io::Result<OwnedFd> {
    // SAFETY: attr is a zeroed, 64-byte bpf_attr prefix; the kernel reads at most that.
    let fd =
        cvt(unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len() as u32) })?;
    // SAFETY: a successful BPF_LINK_CREATE / BPF_ITER_CREATE returns a new fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Attaches a loaded `iter/*` program; the returned link lives as long as the fd.
pub(crate) fn iter_link_create(prog: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let mut attr = [0u8; 64];
    attr[0..4].copy_from_slice(&(prog.as_raw_fd() as u32).to_ne_bytes());
    attr[8..12].copy_from_slice(&BPF_TRACE_ITER.to_ne_bytes());
    bpf(BPF_LINK_CREATE, &mut attr)
}

/// A new iterator (a walk from the start) over the link's target.
pub(crate) fn iter_create(link: BorrowedFd<'_>) -> io::Result<File> {
    let mut attr = [0u8; 64];
    attr[0..4].copy_from_slice(&(link.as_raw_fd() as u32).to_ne_bytes());
    bpf(BPF_ITER_CREATE, &mut attr).map(File::from)
}

/// This network namespace's cookie, the id sock_ops programs can read.
pub(crate) fn own_netns_cookie() -> io::Result<u64> {
    crate::netns::own_cookie()
}
