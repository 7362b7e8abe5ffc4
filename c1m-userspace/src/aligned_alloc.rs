//! The `c1m` binary's global allocator (installed in `main.rs`): the system allocator,
//! except for small over-aligned blocks, which come from free lists of their own.
//!
//! Why: tokio aligns every task's cell and every socket's `ScheduledIo` to 128 B (a pair
//! of cache lines, against false sharing), one of each per connection in the tokio
//! engine. glibc serves an aligned request by carving it out of a larger chunk, and the
//! leader it splits off (112 B when blocks follow each other) becomes a fast-bin chunk
//! that nothing of that size comes back for: a 128-B cell took 256 B of heap and a 256-B
//! `ScheduledIo` 384 B, a third of an idle tokio server connection's 1,154 B. Here a
//! request aligned to 32–128 B of at most [`MAX_POOLED`] bytes is rounded up to a
//! multiple of 128 B and taken from its size's free list, fed by carving anonymous
//! mappings front to back (a page is resident once a block on it is used): no header, no
//! hole. Everything else (the epoll engine's slabs and buffers, every 16-B-aligned
//! allocation) goes to the system allocator as before. Freed blocks go back to their
//! list, never to the system: a process keeps its high-water mark of such blocks, which
//! the tokio engine's connections reuse as they come and go.
//!
//! Why not a general allocator: user bytes per idle connection, `c1m run --tune -n 200000
//! --idle 3s`, two rounds each, same build but for the allocator (2026-12-04):
//!
//! | engine, side  | this pool  | mimalloc 0.1 | glibc alone |
//! |---------------|-----------:|-------------:|------------:|
//! | tokio server  | 557, 557 B | 597, 593 B   | 941, 935 B  |
//! | tokio client  | 1,021, 1,019 B | 1,405, 1,451 B | 1,387, 1,391 B |
//! | epoll server  | 128, 134 B | 376, 377 B   | 139, 140 B  |
//! | epoll client  | 183, 184 B | 314, 319 B   | 182, 181 B  |
//!
//! mimalloc pads the same over-aligned blocks less than glibc but costs the epoll
//! engine's slabs and buffers 2-3× (its per-thread pages and segments at a shard per
//! thread); glibc alone keeps the epoll figures and loses the tokio ones.

use std::{
    alloc::{GlobalAlloc, Layout, System},
    ptr,
    sync::{Mutex, PoisonError},
};

/// The block step and the largest alignment pooled: tokio's cache padding on x86_64.
const STEP: usize = 128;
/// Size classes: 128, 256, …, 1024 B.
const CLASSES: usize = 8;
/// The largest request pooled.
pub const MAX_POOLED: usize = STEP * CLASSES;
/// Each mapping the pools carve from (address space; pages become resident on use).
const REGION: usize = 4 << 20;

/// The allocator: see the module's doc.
pub struct AlignedPool;

/// A free block's first word: the next free block of its class.
struct Free {
    next: *mut Free,
}

struct Pools {
    free: [*mut Free; CLASSES],
    /// The carving point of the current mapping and its end (addresses).
    bump: usize,
    end: usize,
}

// SAFETY: the pointers are owned by the pools, only ever touched under the mutex.
unsafe impl Send for Pools {}

/// One lock for all classes: these blocks are taken once per task and per socket, far
/// from contended at two shard threads a process.
static POOLS: Mutex<Pools> = Mutex::new(Pools {
    free: [ptr::null_mut(); CLASSES],
    bump: 0,
    end: 0,
});

/// The pool class of a request, None for the system allocator's.
fn class_of(size: usize, align: usize) -> Option<usize> {
    (align > 16 && align <= STEP && size <= MAX_POOLED).then(|| size.max(1).div_ceil(STEP) - 1)
}

fn take(class: usize) -> *mut u8 {
    let mut p = POOLS.lock().unwrap_or_else(PoisonError::into_inner);
    let head = p.free[class];
    if !head.is_null() {
        // SAFETY: every pointer on a free list is a block of this class given back by
        // `give`, which wrote its `next`.
        p.free[class] = unsafe { (*head).next };
        return head.cast();
    }
    let size = (class + 1) * STEP;
    if p.end - p.bump < size {
        // What is left of the old mapping (less than a block) stays unused.
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing.
        let m = unsafe {
            libc::mmap(
                ptr::null_mut(),
                REGION,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if m == libc::MAP_FAILED {
            return ptr::null_mut();
        }
        // Page aligned, so every block carved at a multiple of `STEP` is aligned.
        p.bump = m as usize;
        p.end = p.bump + REGION;
    }
    let block = p.bump;
    p.bump += size;
    block as *mut u8
}

/// # Safety
/// `block` came from [`take`] for `class` and is no longer used.
unsafe fn give(class: usize, block: *mut u8) {
    let mut p = POOLS.lock().unwrap_or_else(PoisonError::into_inner);
    let f = block.cast::<Free>();
    // SAFETY: the block is at least 128 B, aligned to 128, and ours again (caller).
    unsafe {
        f.write(Free {
            next: p.free[class],
        })
    };
    p.free[class] = f;
}

// SAFETY: pooled blocks are aligned to 128 (carved at multiples of 128 from page-aligned
// mappings), at least as large as asked, and handed out once until given back; the rest
// is the system allocator's contract, forwarded as is.
unsafe impl GlobalAlloc for AlignedPool {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match class_of(layout.size(), layout.align()) {
            Some(c) => take(c),
            // SAFETY: forwarded as given.
            None => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match class_of(layout.size(), layout.align()) {
            Some(c) => {
                let p = take(c);
                if !p.is_null() {
                    // SAFETY: the block holds at least `layout.size()` bytes.
                    unsafe { ptr::write_bytes(p, 0, layout.size()) };
                }
                p
            }
            // SAFETY: forwarded as given.
            None => unsafe { System.alloc_zeroed(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match class_of(layout.size(), layout.align()) {
            // SAFETY: the same layout's class took it (the caller's contract).
            Some(c) => unsafe { give(c, ptr) },
            // SAFETY: forwarded as given.
            None => unsafe { System.dealloc(ptr, layout) },
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (old, new) = (
            class_of(layout.size(), layout.align()),
            class_of(new_size, layout.align()),
        );
        if old.is_none() && new.is_none() {
            // SAFETY: forwarded as given.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        if old.is_some() && old == new {
            return ptr; // the block already holds `new_size`
        }
        // SAFETY: `new_size` with the old alignment is a valid layout (the caller's
        // contract); the new block holds the bytes copied, the old one is then given back.
        unsafe {
            let to = self.alloc(Layout::from_size_align_unchecked(new_size, layout.align()));
            if !to.is_null() {
                ptr::copy_nonoverlapping(ptr, to, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            to
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn over_aligned_small_blocks_are_pooled_by_128_byte_class() {
        assert_eq!(class_of(128, 128), Some(0));
        assert_eq!(class_of(129, 128), Some(1));
        assert_eq!(class_of(256, 128), Some(1));
        assert_eq!(class_of(40, 64), Some(0));
        assert_eq!(class_of(1024, 128), Some(7));
        // The system's: ordinary alignment, too large, or aligned past a block step.
        assert_eq!(class_of(256, 16), None);
        assert_eq!(class_of(1025, 128), None);
        assert_eq!(class_of(256, 4096), None);
    }

    #[test]
    fn blocks_are_aligned_distinct_and_reused_after_free() {
        let a = AlignedPool;
        let l = Layout::from_size_align(256, 128).unwrap();
        // SAFETY (test): every block is written within its size and freed once.
        unsafe {
            let x = a.alloc(l);
            let y = a.alloc(l);
            assert!(!x.is_null() && !y.is_null());
            assert_eq!(x as usize % 128, 0);
            assert_eq!(y as usize % 128, 0);
            assert!((x as usize).abs_diff(y as usize) >= 256);
            ptr::write_bytes(x, 0xAB, 256);
            ptr::write_bytes(y, 0xCD, 256);
            assert_eq!(*x.add(255), 0xAB);
            a.dealloc(y, l);
            // The block freed last is the next one handed out of its class.
            let z = a.alloc(l);
            assert_eq!(z, y);
            let zero = a.alloc_zeroed(l);
            assert!((0..256).all(|i| *zero.add(i) == 0));
            // Grown past the class: moved, contents kept.
            let big = a.realloc(x, l, 600);
            assert_eq!(big as usize % 128, 0);
            assert!((0..256).all(|i| *big.add(i) == 0xAB));
            a.dealloc(big, Layout::from_size_align(600, 128).unwrap());
            a.dealloc(z, l);
            a.dealloc(zero, l);
            // The system's blocks pass through.
            let s = Layout::from_size_align(64, 8).unwrap();
            let p = a.alloc(s);
            assert!(!p.is_null());
            a.dealloc(p, s);
        }
    }
}
