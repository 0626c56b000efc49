//! Giving memory back to the OS after many agents end.
//!
//! glibc's allocator keeps freed heap pages mapped: a daemon that archived
//! 900,000 of its 1,000,000 agents kept all of their memory (measured in
//! docs/benchmarks.md). `malloc_trim` returns every free page of every arena.
//! It takes the arenas' locks while it walks them, so it runs only after
//! a large drop in live actors, off the async workers, at most once a
//! period. The default build uses jemalloc (the `jemalloc` feature), which
//! purges in background threads by itself; this is for builds without it
//! (`--no-default-features`).

use std::sync::Arc;
use std::time::Duration;

use holarchy_actors::Runtime;
use tracing::info;

/// The build's global allocator, declared by the binary and the benchmarks
/// (`#[global_allocator] static A: Allocator = ALLOCATOR;`) so both measure
/// on the same one.
#[cfg(feature = "jemalloc")]
pub type Allocator = tikv_jemallocator::Jemalloc;
#[cfg(feature = "jemalloc")]
pub const ALLOCATOR: Allocator = tikv_jemallocator::Jemalloc;
#[cfg(all(feature = "mimalloc", not(feature = "jemalloc")))]
pub type Allocator = mimalloc::MiMalloc;
#[cfg(all(feature = "mimalloc", not(feature = "jemalloc")))]
pub const ALLOCATOR: Allocator = mimalloc::MiMalloc;

/// What the allocator says it holds: bytes in live allocations and bytes
/// resident in its mappings. `None` where the allocator keeps no account.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeapStats {
    pub allocated: u64,
    pub resident: u64,
}

#[cfg(feature = "jemalloc")]
pub fn heap_stats() -> Option<HeapStats> {
    use tikv_jemalloc_ctl::{epoch, stats};
    // jemalloc's statistics are a snapshot refreshed by advancing the epoch.
    epoch::advance().ok()?;
    Some(HeapStats {
        allocated: stats::allocated::read().ok()? as u64,
        resident: stats::resident::read().ok()? as u64,
    })
}

#[cfg(not(feature = "jemalloc"))]
pub fn heap_stats() -> Option<HeapStats> {
    None
}

/// How often the live-agent count is looked at.
const PERIOD: Duration = Duration::from_secs(2);

/// A trim follows a drop of at least this many live agents from the peak
/// since the last trim, or a tenth of that peak, whichever is more: small
/// churn is not worth walking a large heap.
const MIN_DROP: usize = 10_000;

/// Whether this build returns memory through `malloc_trim`.
pub const TRIMS: bool = cfg!(all(
    target_os = "linux",
    target_env = "gnu",
    not(feature = "mimalloc"),
    not(feature = "jemalloc")
));

/// Watches the runtime and trims the heap after large drops, until the
/// runtime stops.
pub async fn trim_after_drops(runtime: Arc<Runtime>) {
    if !TRIMS {
        return;
    }
    let mut peak = 0usize;
    loop {
        tokio::select! {
            () = runtime.stopped() => return,
            () = tokio::time::sleep(PERIOD) => {}
        }
        let Ok(snapshot) = runtime.snapshot().await else {
            continue;
        };
        let live = snapshot.public_agents + snapshot.private_agents + snapshot.running_tasks;
        peak = peak.max(live);
        let drop = peak - live;
        if drop < MIN_DROP.max(peak / 10) {
            continue;
        }
        let started = std::time::Instant::now();
        let released = tokio::task::spawn_blocking(trim).await.unwrap_or(false);
        info!(
            ended = drop,
            live,
            released,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "returned freed heap to the OS"
        );
        peak = live;
    }
}

#[cfg(all(
    target_os = "linux",
    target_env = "gnu",
    not(feature = "mimalloc"),
    not(feature = "jemalloc")
))]
#[allow(unsafe_code)]
fn trim() -> bool {
    // SAFETY: malloc_trim has no preconditions; it only walks glibc's own
    // arenas under their locks and unmaps pages no allocation uses.
    unsafe { libc::malloc_trim(0) == 1 }
}

#[cfg(not(all(
    target_os = "linux",
    target_env = "gnu",
    not(feature = "mimalloc"),
    not(feature = "jemalloc")
)))]
fn trim() -> bool {
    false
}
