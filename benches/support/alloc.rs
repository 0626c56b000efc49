//! The benchmarks run on the daemon's global allocator, so the bare ractor
//! reference and holarchy are measured on the same one.

#[cfg(any(feature = "jemalloc", feature = "mimalloc"))]
#[global_allocator]
static ALLOCATOR: holarchy::memory::Allocator = holarchy::memory::ALLOCATOR;
