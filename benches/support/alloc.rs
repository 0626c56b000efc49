//! The benchmarks run on the daemon's global allocator, so the bare ractor
//! reference and holarchy are measured on the same one, configured the same
//! way (huge pages, as the daemon).

#[cfg(any(feature = "jemalloc", feature = "mimalloc"))]
#[global_allocator]
static ALLOCATOR: holarchy::memory::Allocator = holarchy::memory::ALLOCATOR;

/// jemalloc backs the heap with transparent huge pages (the kernel here
/// gives them on `madvise` only). Starting 1,000,000 agents touches about
/// 10 GB, and on 4 KiB pages half of recovery went to page faults; on huge
/// pages `kill -9` to answering took 9.3 s instead of 15.9 s for the same
/// 1,000,000 agents, with 0.9 % more RSS (docs/benchmarks.md, "Commit path
/// and recovery"). jemalloc reads this before `main`.
// SAFETY: the one definition of jemalloc's (weak) `malloc_conf` in the
// program: a NUL-terminated string that lives as long as the process.
#[cfg(all(feature = "jemalloc", target_os = "linux"))]
#[allow(unsafe_code)]
#[export_name = "_rjem_malloc_conf"]
static JEMALLOC_CONF: Option<&u8> = Some(&b"thp:always\0"[0]);
