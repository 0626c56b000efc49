//! Where commits wait: counters the commit path and the flusher bump, read
//! by benchmarks and logged when the store closes. Relaxed atomics only, so
//! counting costs no lock and no ordering on the path it measures.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use serde::Serialize;

/// Buckets of callers served per flush: 0, 1, 2-3, 4-7, ..., 64 and more.
const WAITER_BUCKETS: usize = 8;

/// The live counters.
#[derive(Debug)]
pub struct StoreStats {
    /// For `GET /metrics`: a flush's duration, callers answered per
    /// flush, and a caller's wait for durability.
    flush_seconds: Histogram,
    flush_batch: Histogram,
    durable_seconds: Histogram,
    flushes: AtomicU64,
    flush_ns: AtomicU64,
    waiters_served: AtomicU64,
    most_waiters: AtomicU64,
    waiters_per_flush: [AtomicU64; WAITER_BUCKETS],
    wait_ns: AtomicU64,
    commits: AtomicU64,
    lock_wait_ns: AtomicU64,
    longest_lock_wait_ns: AtomicU64,
    locked_ns: AtomicU64,
}

impl Default for StoreStats {
    fn default() -> Self {
        Self {
            // 50 us to about 3 s.
            flush_seconds: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
            // 1 to 4,096 callers.
            flush_batch: Histogram::new(exponential_buckets(1.0, 2.0, 13)),
            durable_seconds: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
            flushes: AtomicU64::default(),
            flush_ns: AtomicU64::default(),
            waiters_served: AtomicU64::default(),
            most_waiters: AtomicU64::default(),
            waiters_per_flush: Default::default(),
            wait_ns: AtomicU64::default(),
            commits: AtomicU64::default(),
            lock_wait_ns: AtomicU64::default(),
            longest_lock_wait_ns: AtomicU64::default(),
            locked_ns: AtomicU64::default(),
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl StoreStats {
    /// A flush that took `took` and answered `waiters` callers.
    pub fn record_flush(&self, took: Duration, waiters: usize) {
        self.flush_seconds.observe(took.as_secs_f64());
        self.flush_batch.observe(waiters as f64);
        self.flushes.fetch_add(1, Ordering::Relaxed);
        self.flush_ns.fetch_add(nanos(took), Ordering::Relaxed);
        self.waiters_served
            .fetch_add(waiters as u64, Ordering::Relaxed);
        self.most_waiters
            .fetch_max(waiters as u64, Ordering::Relaxed);
        let bucket = match waiters {
            0 => 0,
            n => (n.ilog2() as usize + 1).min(WAITER_BUCKETS - 1),
        };
        self.waiters_per_flush[bucket].fetch_add(1, Ordering::Relaxed);
    }

    /// `callers` waited `took` each from asking for durability to their
    /// (shared) answer.
    pub fn record_waits(&self, took: Duration, callers: usize) {
        for _ in 0..callers {
            self.durable_seconds.observe(took.as_secs_f64());
        }
        self.wait_ns.fetch_add(
            nanos(took).saturating_mul(callers as u64),
            Ordering::Relaxed,
        );
    }

    /// A commit waited `waited` for the store's write lock and then held
    /// it for `held`.
    pub fn record_commit(&self, waited: Duration, held: Duration) {
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.lock_wait_ns
            .fetch_add(nanos(waited), Ordering::Relaxed);
        self.longest_lock_wait_ns
            .fetch_max(nanos(waited), Ordering::Relaxed);
        self.locked_ns.fetch_add(nanos(held), Ordering::Relaxed);
    }

    /// Adds the histograms to `registry`, and the commits counted so far.
    pub fn register(&self, registry: &mut Registry) {
        registry.register_with_unit(
            "store_flush_duration",
            "Time one flush of the store took (write and fsync)",
            Unit::Seconds,
            self.flush_seconds.clone(),
        );
        registry.register(
            "store_flush_batch",
            "Callers one flush answered (commits made durable together)",
            self.flush_batch.clone(),
        );
        registry.register_with_unit(
            "store_commit_latency",
            "Time a caller waited for its commit to be durable",
            Unit::Seconds,
            self.durable_seconds.clone(),
        );
    }

    /// Commits applied so far.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Flushes so far.
    pub fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }

    /// The figures so far, as plain numbers.
    pub fn snapshot(&self) -> StatsSnapshot {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let flushes = load(&self.flushes);
        let served = load(&self.waiters_served);
        let commits = load(&self.commits);
        let per = |total: u64, n: u64| if n == 0 { 0.0 } else { total as f64 / n as f64 };
        StatsSnapshot {
            flushes,
            flush_us_mean: per(load(&self.flush_ns), flushes) / 1e3,
            waiters_served: served,
            waiters_per_flush_mean: per(served, flushes),
            waiters_per_flush_max: load(&self.most_waiters),
            waiters_per_flush_log2: self.waiters_per_flush.iter().map(load).collect(),
            durable_wait_us_mean: per(load(&self.wait_ns), served) / 1e3,
            commits,
            commit_lock_wait_us_mean: per(load(&self.lock_wait_ns), commits) / 1e3,
            commit_lock_wait_us_max: load(&self.longest_lock_wait_ns) as f64 / 1e3,
            commit_locked_us_mean: per(load(&self.locked_ns), commits) / 1e3,
        }
    }
}

impl StatsSnapshot {
    /// Logs the figures on one line.
    pub fn log(&self) {
        tracing::info!(
            flushes = self.flushes,
            flush_us_mean = self.flush_us_mean,
            waiters_per_flush_mean = self.waiters_per_flush_mean,
            waiters_per_flush_max = self.waiters_per_flush_max,
            waiters_per_flush_log2 = ?self.waiters_per_flush_log2,
            durable_wait_us_mean = self.durable_wait_us_mean,
            commits = self.commits,
            commit_lock_wait_us_mean = self.commit_lock_wait_us_mean,
            commit_lock_wait_us_max = self.commit_lock_wait_us_max,
            commit_locked_us_mean = self.commit_locked_us_mean,
            "commit path statistics"
        );
    }
}

/// A reading of [`StoreStats`].
#[derive(Debug, Clone, Serialize)]
pub struct StatsSnapshot {
    pub flushes: u64,
    /// Mean duration of one `sled::Db::flush` (write plus `fsync`).
    pub flush_us_mean: f64,
    /// Callers answered by flushes (each `durable` that had to wait).
    pub waiters_served: u64,
    pub waiters_per_flush_mean: f64,
    pub waiters_per_flush_max: u64,
    /// Flushes that served 0, 1, 2-3, 4-7, 8-15, 16-31, 32-63, 64+ callers.
    pub waiters_per_flush_log2: Vec<u64>,
    /// Mean time from asking for durability to the answer.
    pub durable_wait_us_mean: f64,
    pub commits: u64,
    /// Mean time a commit waited for sled's transaction lock (the one lock
    /// every commit takes), including building its overlay.
    pub commit_lock_wait_us_mean: f64,
    pub commit_lock_wait_us_max: f64,
    /// Mean time a commit held that lock (applying its batch).
    pub commit_locked_us_mean: f64,
}
