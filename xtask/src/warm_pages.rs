//! Warm pages for every measured run. This VM gives free memory back to its host
//! (`page_reporting`), and a page the host took back costs a host fault when the guest
//! touches it again: here, touching 10 GiB took 9.1 s right after another process had
//! freed it and 33.1 s a minute later (16.6 s after 3 s, 25.2 s after 10 s). A 1M run
//! allocates ~12 GiB, so how long the box sat before a run moved its CPU per connection
//! more than anything the engines do. Bare metal has no such cost.
//!
//! [`WarmPages`] holds the box's free memory, touched, so the host cannot take it, and
//! gives it back a chunk at a time whenever free memory falls below [`LOW`]: the run then
//! allocates pages that a moment ago were ours, warm. Between runs, [`WarmPages::refill`]
//! takes the memory the last run freed. Filling is our own untimed work; during a run the
//! keeper only frees: a `munmap` of 64 MiB every ~0.2 s at a 1M ramp's ~0.4 GiB/s.

use std::{
    sync::{
        Mutex, OnceLock,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

const CHUNK: usize = 64 << 20;
/// Free memory the keeper leaves: what a run allocates first, before it reaches the
/// keeper's pages (and what the host may report meanwhile).
const HIGH: u64 = 1280 << 20;
/// Below this much free memory the keeper gives chunks back. ~1 GiB: a 1M ramp allocates
/// ~0.4 GiB/s, so the keeper can be late by two seconds before the kernel reclaims.
const LOW: u64 = 1 << 30;
const TICK: Duration = Duration::from_millis(2);
const REPORTED_KIB: &str = "/sys/module/page_reporting/parameters/reported_kib";

/// One mapped, touched chunk; unmapped on drop.
struct Chunk(*mut libc::c_void);

// The mapping is ours alone; moving its address between threads is safe.
unsafe impl Send for Chunk {}

impl Chunk {
    fn new() -> Option<Chunk> {
        // MAP_POPULATE: the kernel faults every page in (and the host backs it) now.
        // SAFETY: a new anonymous mapping; no memory of ours is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                CHUNK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        // Not copied into a child this process forks: ~20 GiB of page tables to copy.
        // SAFETY: the range is the mapping just made, which nothing reads.
        unsafe { libc::madvise(p, CHUNK, libc::MADV_DONTFORK) };
        Some(Chunk(p))
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: our mapping of CHUNK bytes; no reference into it exists.
        unsafe { libc::munmap(self.0, CHUNK) };
    }
}

fn free_bytes() -> Option<u64> {
    // SAFETY: sysinfo is plain integers (all-zero is valid), filled by the kernel.
    let mut si: libc::sysinfo = unsafe { std::mem::zeroed() };
    (unsafe { libc::sysinfo(&mut si) } == 0)
        .then(|| si.freeram as u64 * u64::from(si.mem_unit.max(1)))
}

/// The host's count of guest memory given back to it, KiB (None: no page reporting).
pub(crate) fn reported_kib() -> Option<u64> {
    std::fs::read_to_string(REPORTED_KIB)
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The keeper of this bench, if [`enable`] started one.
static KEEPER: OnceLock<WarmPages> = OnceLock::new();

/// Starts the keeper for the rest of this bench, where the box reports free pages to a
/// host; says which.
pub(crate) fn enable() {
    if KEEPER.get().is_some() {
        return;
    }
    if reported_kib().is_none() {
        println!("   (no free page reporting here: a run's pages stay warm without a keeper)");
        return;
    }
    let keeper = KEEPER.get_or_init(|| WarmPages {
        pool: Mutex::new(Vec::new()),
        released: AtomicU64::new(0),
        off: AtomicBool::new(false),
    });
    if std::thread::Builder::new()
        .name("warm-pages".into())
        .spawn(|| keeper.give_back())
        .is_err()
    {
        // Never hold pages that nothing would give back.
        keeper.off.store(true, Ordering::Relaxed);
        println!("   (warm pages: no thread to give pages back; runs meet the box as it is)");
        return;
    }
    println!(
        "   (warm pages: this VM gives free memory back to its host; the bench holds it, \
         touched, and hands it to each run, so no run pays the host's faults; \
         --cold-pages: off)"
    );
}

/// Gives all held memory back and keeps none from now on (for the benches that run the
/// lab, whose doctor reads the box's free memory).
pub(crate) fn disable() {
    if let Some(k) = KEEPER.get() {
        k.off.store(true, Ordering::Relaxed);
        if let Ok(mut p) = k.pool.lock() {
            p.clear();
        }
    }
}

/// Before a run: takes back (untimed) the memory the run before freed. A no-op without
/// a keeper.
pub(crate) fn refill() {
    let Some(k) = KEEPER.get().filter(|k| !k.off.load(Ordering::Relaxed)) else {
        return;
    };
    let (held, s) = k.refill();
    println!(
        "   (warm pages: {:.1} GiB held, refilled in {s:.1} s)",
        held as f64 / f64::from(1u32 << 30)
    );
}

/// What the run since the last [`refill`] took of the keeper's pages, and what the host
/// took back meanwhile (its free page reporting), MiB.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RunPages {
    pub(crate) from_keeper_mib: f64,
    pub(crate) host_took_mib: f64,
}

/// Read at a run's start; [`RunStart::end`] at its end.
pub(crate) struct RunStart(Option<u64>);

impl RunStart {
    pub(crate) fn now() -> RunStart {
        RunStart(reported_kib())
    }

    pub(crate) fn end(&self) -> RunPages {
        let host_took_mib = match (self.0, reported_kib()) {
            (Some(a), Some(b)) => b.saturating_sub(a) as f64 / 1024.0,
            _ => f64::NAN,
        };
        RunPages {
            from_keeper_mib: KEEPER.get().map_or(0.0, |k| {
                k.released.load(Ordering::Relaxed) as f64 / f64::from(1u32 << 20)
            }),
            host_took_mib,
        }
    }
}

/// The pool and its counters; lives as long as the bench (in [`KEEPER`]).
pub(crate) struct WarmPages {
    pool: Mutex<Vec<Chunk>>,
    /// Bytes given back to runs since the last refill.
    released: AtomicU64,
    /// Set by [`disable`]: refill takes nothing.
    off: AtomicBool,
}

impl WarmPages {
    /// Gives a chunk back whenever free memory is below [`LOW`], for the rest of the bench.
    fn give_back(&'static self) {
        // Prompt when a run keeps both CPUs busy: late, the kernel reclaims and at worst
        // picks this process (the pool) for the OOM killer.
        // SAFETY: plain syscalls on this thread's own id.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -10) };
        loop {
            while free_bytes().is_some_and(|f| f < LOW) {
                let Some(c) = self.pool.lock().ok().and_then(|mut p| p.pop()) else {
                    break;
                };
                drop(c);
                self.released.fetch_add(CHUNK as u64, Ordering::Relaxed);
            }
            std::thread::sleep(TICK);
        }
    }

    /// Takes free memory down to [`HIGH`] (untimed: call it between runs). Returns the
    /// bytes the pool holds and the seconds it took.
    fn refill(&self) -> (u64, f64) {
        let t = Instant::now();
        while !self.off.load(Ordering::Relaxed)
            && free_bytes().is_some_and(|f| f > HIGH + CHUNK as u64)
        {
            let Some(c) = Chunk::new() else { break };
            let Ok(mut p) = self.pool.lock() else { break };
            p.push(c);
        }
        self.released.store(0, Ordering::Relaxed);
        let held = self.pool.lock().map(|p| p.len() * CHUNK).unwrap_or(0) as u64;
        (held, t.elapsed().as_secs_f64())
    }
}
