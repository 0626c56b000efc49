//! Group commit: writers that must not answer before their write is on disk
//! ask for a flush and wait; one flusher thread serves every request that
//! arrived while the previous flush ran with a single `fsync`.
//!
//! The flusher is a plain OS thread blocked on a channel, not a tokio task
//! that hands each flush to the blocking pool: a request wakes one thread
//! (and none while a flush runs, since the next batch simply collects in the
//! channel), where a task cost a worker wakeup, a blocking-pool wakeup and a
//! wakeup back. While commits are still applying it lingers a bounded
//! moment before flushing, so that one flush covers their callers too; a
//! lone caller has no commit behind it and never waits for that.
//!
//! Commits that nobody waits for (internal bookkeeping, events) send no
//! message each: the flusher counts them, and a commit wakes it only when
//! it sleeps with nothing to do. It flushes them as soon as it is free, as
//! before, since their events become visible to followers only then.
//!
//! The flusher also publishes the durable event watermark: the highest
//! event cursor committed before a flush began is, once that flush ends, on
//! disk. Event readers never go past it, so a client never sees an event
//! that a crash could take back (and whose cursor would then be reused).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::future::Future;
use std::time::{Duration, Instant};

use futures::FutureExt;

use holarchy_actors::{DurableFuture, StoreError};
use tokio::sync::{oneshot, watch};
use tracing::error;

use super::stats::StoreStats;

/// The longest a flush is put off to gather the callers of commits still
/// applying (about one flush's duration on the benchmark machine). Only
/// while commits apply: a lone caller never waits for it.
pub const MAX_LINGER: Duration = Duration::from_micros(1000);

/// How often a lingering flusher looks whether commits are still applying.
const LINGER_POLL: Duration = Duration::from_micros(50);

/// A flush with this many callers waiting starts at once.
const ENOUGH_WAITERS: usize = 64;

/// A caller waiting for the next flush that starts after its request.
struct Waiter {
    answer: oneshot::Sender<Result<(), String>>,
    since: Instant,
    /// How many callers share this answer (a committed group's batches).
    callers: usize,
}

enum Request {
    /// Answer once a flush that started after this request has ended.
    Wait(Waiter),
    /// A commit happened while the flusher slept with nothing to do.
    Wake,
    /// Flush once more, answer everyone, then stop and let go of the db.
    Close,
}

/// Counts writes so that a caller with nothing unflushed behind it need not
/// wait for a flush at all (reads, mostly), and so the flusher knows when
/// commits are waiting without a message per commit.
#[derive(Debug, Default)]
struct WriteCounters {
    /// Writes that began applying; bumped before the data is visible.
    started: AtomicU64,
    /// Writes that finished applying.
    done: AtomicU64,
    /// `done` as read before the latest successful flush began.
    flushed: AtomicU64,
    /// Set by the flusher just before it sleeps with nothing unflushed; the
    /// first commit after that wakes it.
    idle: AtomicBool,
}

impl WriteCounters {
    /// Commits that began and have not finished applying.
    fn writing(&self) -> bool {
        self.writes_started() > self.done.load(Ordering::SeqCst)
    }

    fn writes_started(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }

    fn unflushed(&self) -> bool {
        self.done.load(Ordering::SeqCst) > self.flushed.load(Ordering::SeqCst)
    }
}

/// A flush's answer as the flusher sends it; `None` when it went away.
type Flushed = Option<Result<(), String>>;

fn answer(flushed: Flushed) -> Result<(), StoreError> {
    match flushed {
        Some(Ok(())) => Ok(()),
        Some(Err(err)) => Err(StoreError::Backend(format!("flush failed: {err}"))),
        None => Err(StoreError::Closed),
    }
}

/// The handle writers hold.
#[derive(Debug)]
pub struct GroupCommit {
    requests: mpsc::Sender<Request>,
    writes: Arc<WriteCounters>,
    watermark: watch::Receiver<u64>,
    /// Resolves when the flusher thread has stopped (after `close`).
    stopped: std::sync::Mutex<Option<oneshot::Receiver<()>>>,
}

impl GroupCommit {
    /// Starts the flusher thread. `committed` is the highest event cursor
    /// whose batch has been applied.
    pub fn start(
        db: sled::Db,
        committed: Arc<AtomicU64>,
        stats: Arc<StoreStats>,
    ) -> Result<Self, StoreError> {
        let (requests, inbox) = mpsc::channel::<Request>();
        let (publish, watermark) = watch::channel(committed.load(Ordering::Acquire));
        let writes = Arc::new(WriteCounters::default());
        let (done, stopped) = oneshot::channel();
        let flusher = Flusher {
            db,
            inbox,
            committed,
            counters: writes.clone(),
            publish,
            stats,
        };
        std::thread::Builder::new()
            .name("holarchy-flush".into())
            .spawn(move || {
                flusher.run();
                let _ = done.send(());
            })
            .map_err(|err| StoreError::Backend(format!("could not start the flusher: {err}")))?;
        Ok(Self {
            requests,
            writes,
            watermark,
            stopped: std::sync::Mutex::new(Some(stopped)),
        })
    }

    /// Flushes a last time and stops the flusher, which releases its handle
    /// on the database. Later `durable` calls fail with "store is closed".
    pub async fn close(&self) {
        let _ = self.requests.send(Request::Close);
        let stopped = self
            .stopped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(stopped) = stopped {
            let _ = stopped.await;
        }
    }

    /// Call before a write becomes visible to readers.
    pub fn begin_write(&self) {
        self.writes.started.fetch_add(1, Ordering::SeqCst);
    }

    /// Call once the write has been applied (or has failed). Wakes the
    /// flusher only if it sleeps with nothing to do; otherwise it sees the
    /// count itself, with no message per commit.
    pub fn end_write(&self) {
        self.writes.done.fetch_add(1, Ordering::SeqCst);
        if self.writes.idle.load(Ordering::SeqCst) && self.writes.idle.swap(false, Ordering::SeqCst)
        {
            let _ = self.requests.send(Request::Wake);
        }
    }

    /// Like [`GroupCommit::durable`], without the shortcut, for the `n`
    /// callers of a group a writer applied: it asks before it counts its
    /// write finished (so the shortcut could not see it), which saves the
    /// flusher a flush of its own for that write. The callers share one
    /// request, so a group wakes the flusher once, not once per batch.
    pub fn durable_for_writers(&self, n: usize) -> Vec<DurableFuture> {
        if n == 0 {
            return Vec::new();
        }
        let shared = self.request(n).shared();
        (0..n)
            .map(|_| Box::pin(shared.clone().map(answer)) as DurableFuture)
            .collect()
    }

    /// Resolves once everything committed before this call is on disk.
    /// Anything a caller could have read was counted by `begin_write`
    /// first, so when every started write is already flushed there is
    /// nothing to wait for. The request is sent now, not when the future is
    /// first polled, so a caller may do other work before awaiting it.
    pub fn durable(&self) -> DurableFuture {
        if self.writes.started.load(Ordering::SeqCst) <= self.writes.flushed.load(Ordering::SeqCst)
        {
            return Box::pin(std::future::ready(Ok(())));
        }
        self.ask()
    }

    /// Queues a request for the next flush that starts after this call.
    fn ask(&self) -> DurableFuture {
        Box::pin(self.request(1).map(answer))
    }

    /// Sends a request for `callers` now; the future is its answer, `None`
    /// when the flusher is gone.
    fn request(&self, callers: usize) -> impl Future<Output = Flushed> + Send + 'static {
        let (answer, rx) = oneshot::channel();
        let waiter = Waiter {
            answer,
            since: Instant::now(),
            callers,
        };
        let sent = self.requests.send(Request::Wait(waiter)).is_ok();
        async move {
            if !sent {
                return None;
            }
            rx.await.ok()
        }
    }

    /// The durable event watermark; changes after each flush that moved it.
    pub fn watermark(&self) -> watch::Receiver<u64> {
        self.watermark.clone()
    }
}

/// The flusher thread's state.
struct Flusher {
    db: sled::Db,
    inbox: mpsc::Receiver<Request>,
    committed: Arc<AtomicU64>,
    counters: Arc<WriteCounters>,
    publish: watch::Sender<u64>,
    stats: Arc<StoreStats>,
}

/// What the flusher gathered for its next flush.
#[derive(Default)]
struct Round {
    waiters: Vec<Waiter>,
    /// The callers behind `waiters`.
    callers: usize,
    closing: bool,
    /// Every sender is gone: flush what is left, then stop.
    disconnected: bool,
}

impl Round {
    fn take(&mut self, request: Request) {
        match request {
            Request::Wait(waiter) => {
                self.callers += waiter.callers;
                self.waiters.push(waiter);
            }
            Request::Wake => {}
            Request::Close => self.closing = true,
        }
    }

    fn ending(&self) -> bool {
        self.closing || self.disconnected
    }
}

impl Flusher {
    fn run(self) {
        loop {
            let mut round = Round::default();
            if !self.wait_for_work(&mut round) {
                return;
            }
            while let Ok(more) = self.inbox.try_recv() {
                round.take(more);
            }
            if !round.ending() {
                self.linger(&mut round, MAX_LINGER);
            }
            let span = if crate::telemetry::exporting() {
                tracing::info_span!("store_flush", waiters = round.callers)
            } else {
                tracing::Span::none()
            };
            let began = Instant::now();
            let result = span.in_scope(|| self.flush());
            let ended = Instant::now();
            self.stats.record_flush(ended - began, round.callers);
            let ending = round.ending();
            for waiter in round.waiters {
                self.stats
                    .record_waits(ended.duration_since(waiter.since), waiter.callers);
                let _ = waiter.answer.send(result.clone());
            }
            if ending {
                return;
            }
        }
    }

    /// Blocks until there is a reason to flush: a waiter, a close, or
    /// commits not yet flushed. Those are flushed at once even when nobody
    /// waits: their events become visible to followers only then. False
    /// when there is nothing left to do and every handle is gone.
    fn wait_for_work(&self, round: &mut Round) -> bool {
        loop {
            if self.counters.unflushed() {
                return true;
            }
            // Say we sleep, then look again: a commit that ended before the
            // flag was up is seen here, one after it sends a wake.
            self.counters.idle.store(true, Ordering::SeqCst);
            if self.counters.unflushed() {
                self.counters.idle.store(false, Ordering::SeqCst);
                continue;
            }
            let request = self.inbox.recv();
            self.counters.idle.store(false, Ordering::SeqCst);
            match request {
                Ok(request) => {
                    round.take(request);
                    return true;
                }
                Err(_) => return false,
            }
        }
    }

    /// Collects more waiters while commits are still applying (or queued
    /// for sled's lock): their callers ask for durability right after, and
    /// one flush can cover them too. Bounded by `window`; a lone caller has
    /// no commit behind it and never waits here.
    fn linger(&self, round: &mut Round, window: Duration) {
        let deadline = Instant::now() + window;
        while round.callers < ENOUGH_WAITERS && !round.ending() && self.counters.writing() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match self.inbox.recv_timeout(left.min(LINGER_POLL)) {
                Ok(request) => round.take(request),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => round.disconnected = true,
            }
        }
    }

    /// One `fsync` for everything applied so far; moves the watermark.
    fn flush(&self) -> Result<(), String> {
        // Read before flushing: everything up to here was applied before
        // the flush began, so the flush covers it. Finished writes first:
        // a writer moves the cursor before it counts itself finished, so
        // every write counted here has its events under `upto`, and none
        // is marked flushed with its events left unpublished.
        let writes_done = self.counters.done.load(Ordering::SeqCst);
        let upto = self.committed.load(Ordering::SeqCst);
        match self.db.flush() {
            Ok(_) => {
                // The watermark first: a caller that finds its writes
                // flushed (and skips waiting) must find their events too.
                self.publish.send_if_modified(|current| {
                    let moved = upto > *current;
                    *current = (*current).max(upto);
                    moved
                });
                self.counters
                    .flushed
                    .fetch_max(writes_done, Ordering::SeqCst);
                Ok(())
            }
            Err(err) => {
                error!(error = %err, "flush failed");
                Err(err.to_string())
            }
        }
    }
}
