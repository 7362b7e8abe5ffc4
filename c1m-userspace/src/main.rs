/// Small over-aligned blocks (tokio's task cells and socket registrations) from pools of
/// their own: see `aligned_alloc`.
#[global_allocator]
static GLOBAL: c1m::aligned_alloc::AlignedPool = c1m::aligned_alloc::AlignedPool;

fn main() {
    std::process::exit(c1m::cli::main());
}
