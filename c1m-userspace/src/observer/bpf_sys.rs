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
pub fn iter_link_create(prog: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let mut attr = [0u8; 64];
    attr[0..4].copy_from_slice(&(prog.as_raw_fd() as u32).to_ne_bytes());
    attr[8..12].copy_from_slice(&BPF_TRACE_ITER.to_ne_bytes());
    bpf(BPF_LINK_CREATE, &mut attr)
}

/// A new iterator (a walk from the start) over the link's target.
pub fn iter_create(link: BorrowedFd<'_>) -> io::Result<File> {
    let mut attr = [0u8; 64];
    attr[0..4].copy_from_slice(&(link.as_raw_fd() as u32).to_ne_bytes());
    bpf(BPF_ITER_CREATE, &mut attr).map(File::from)
}

/// This network namespace's cookie, the id sock_ops programs can read.
pub fn own_netns_cookie() -> io::Result<u64> {
    crate::netns::own_cookie()
}

/// How often the kernel skipped each program because another BPF program was already
/// running on that CPU (`bpf_prog_info.recursion_misses`).
pub fn prog_recursion_misses(prog: BorrowedFd<'_>) -> io::Result<u64> {
    const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
    /// Offset of `recursion_misses` in `struct bpf_prog_info` (include/uapi/linux/bpf.h).
    const RECURSION_MISSES: usize = 208;
    let mut info = [0u8; 256];
    let mut attr = [0u8; 64];
    attr[0..4].copy_from_slice(&(prog.as_raw_fd() as u32).to_ne_bytes());
    attr[4..8].copy_from_slice(&(info.len() as u32).to_ne_bytes());
    attr[8..16].copy_from_slice(&(info.as_mut_ptr() as u64).to_ne_bytes());
    // SAFETY: attr points at `info`, which is valid for info.len() bytes.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_GET_INFO_BY_FD,
            attr.as_mut_ptr(),
            attr.len() as u32,
        )
    })?;
    let mut v = [0u8; 8];
    v.copy_from_slice(&info[RECURSION_MISSES..RECURSION_MISSES + 8]);
    Ok(u64::from_ne_bytes(v))
}
