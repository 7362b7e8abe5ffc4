//! The `iter/tcp` program context (`struct bpf_iter__tcp`), read with direct loads so
//! the verifier keeps the BTF types it needs for `bpf_seq_write`.
//! https://github.com/torvalds/linux/blob/v6.18/net/ipv4/tcp_ipv4.c (struct bpf_iter__tcp)
//! https://github.com/torvalds/linux/blob/v6.18/include/linux/bpf.h (struct bpf_iter_meta)

use core::{ffi::c_void, mem::size_of};

use aya_ebpf::{bindings::seq_file, helpers::generated::bpf_seq_write};

#[repr(C)]
struct BpfIterMeta {
    seq: *mut seq_file,
    session_id: u64,
    seq_num: u64,
}

#[repr(C)]
struct BpfIterTcp {
    meta: *const BpfIterMeta,
    sk_common: u64,
}

pub struct IterTcp {
    seq: *mut seq_file,
    seq_num: u64,
    sk: u64,
}

impl IterTcp {
    #[inline(always)]
    pub fn new(ctx: *mut c_void) -> Option<Self> {
        let ctx = ctx as *const BpfIterTcp;
        // SAFETY: the kernel passes a valid bpf_iter__tcp; fields read by direct load.
        let (meta, sk) = unsafe { ((*ctx).meta, (*ctx).sk_common) };
        if meta.is_null() {
            return None;
        }
        // SAFETY: meta is non-null and typed by the verifier.
        let (seq, seq_num) = unsafe { ((*meta).seq, (*meta).seq_num) };
        Some(Self { seq, seq_num, sk })
    }

    /// The socket of this step; `None` on the final call that ends the walk.
    #[inline(always)]
    pub fn sock(&self) -> Option<u64> {
        if self.sk == 0 { None } else { Some(self.sk) }
    }

    /// Position of this object in the walk.
    #[inline(always)]
    pub fn seq_num(&self) -> u64 {
        self.seq_num
    }

    #[inline(always)]
    pub fn write<T>(&self, value: &T) {
        // SAFETY: `seq` is the iterator's seq_file from the context; the helper copies
        // `size_of::<T>()` bytes from our stack into the iterator's output.
        unsafe {
            bpf_seq_write(self.seq, (value as *const T).cast(), size_of::<T>() as u32);
        }
    }
}
