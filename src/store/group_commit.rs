//! Group commit: one thread, the store's writer, applies the grouped
//! commits (see `sled_store::grouped`) and runs every flush; callers that
//! must not answer before their write is on disk wait for the next flush
//! that starts after they asked, and one `fsync` serves them all.
//!
//! Why one thread for both: sled 0.34 holds its process-wide lock for
//! reading across a whole flush (the wait for the disk included), and a
//! transaction takes it for writing. A transaction that waits for a flush
//! to end also holds up every reader in the daemon behind it (the lock
//! favours a waiting writer), which stalled the tokio workers during each
//! flush. Applying between flushes on one thread means the grouped
//! commits never wait on sled's lock for a flush, and the commits that
//! arrive during a flush simply form the next, larger group.
//!
//! The thread is a plain OS thread blocked on a channel: a request wakes
//! one thread, and none while a flush runs, since the next requests simply
//! collect in the channel. While direct commits (made on their callers'
//! threads) are still applying it lingers a bounded moment before
//! flushing, so that one flush covers their callers too; a lone caller has
//! no commit behind it and never waits for that.
//!
//! Direct commits that nobody waits for (internal bookkeeping, events)
//! send no message each: the thread counts them, and a commit wakes it only
//! when it sleeps with nothing to do. It flushes them as soon as it is
//! free, since their events become visible to followers only then.
//!
//! The thread also publishes the durable event watermark: the highest
//! event cursor committed before a flush began is, once that flush ends, on
//! disk. Event readers never go past it, so a client never sees an event
//! that a crash could take back (and whose cursor would then be reused).

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
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

/// How often the lingering writer looks whether commits are still applying.
const LINGER_POLL: Duration = Duration::from_micros(50);

/// A flush with this many callers waiting starts at once.
const ENOUGH_WAITERS: usize = 64;

/// A caller waiting for the next flush that starts after its request.
struct Waiter {
    answer: oneshot::Sender<Result<(), FlushFailed>>,
    since: Instant,
    /// How many callers share this answer (a committed group's batches).
    callers: usize,
}

enum Request<J> {
    /// A grouped commit, applied by the writer thread with the others
    /// queued meanwhile.
    Commit(J),
    /// Answer once a flush that started after this request has ended.
    Wait(Waiter),
    /// A commit happened while the writer slept with nothing to do.
    Wake,
    /// Apply what is queued, flush once more, answer everyone, then stop
    /// and let go of the db.
    Close,
}

/// Counts writes so that a caller with nothing unflushed behind it need not
/// wait for a flush at all (reads, mostly), and so the writer thread knows
/// when commits are waiting without a message per commit.
#[derive(Debug, Default)]
struct WriteCounters {
    /// Writes that began applying; bumped before the data is visible.
    started: AtomicU64,
    /// Writes that finished applying.
    done: AtomicU64,
    /// `done` as read before the latest successful flush began.
    flushed: AtomicU64,
    /// Set by the writer thread just before it sleeps with nothing
    /// unflushed; the first commit after that wakes it.
    idle: AtomicBool,
    /// When the flush under way began (ms since the epoch); 0 when none
    /// runs. A disk that stalls shows here (see `daemon::disk`).
    flushing_since_ms: AtomicU64,
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

/// A flush's answer as the writer thread sends it; `None` when it went away.
type Flushed = Option<Result<(), FlushFailed>>;

/// sled's reason a flush failed, shared by every caller that waited for
/// that flush.
#[derive(Debug, Clone, thiserror::Error)]
#[error("flush failed: {0}")]
pub struct FlushFailed(Arc<sled::Error>);

fn answer(flushed: Flushed) -> Result<(), StoreError> {
    match flushed {
        Some(Ok(())) => Ok(()),
        Some(Err(err)) => Err(StoreError::Backend(err.to_string())),
        None => Err(StoreError::Closed),
    }
}

/// Applies a group of jobs on the writer thread. For the callers that
/// will wait for their write to be durable it calls `ask(n)` once, after
/// the group is applied and before it counts as finished, and hands each
/// of the `n` futures it gets to its caller: they resolve with the flush
/// that follows.
pub trait ApplyGroup<J>: Send + 'static {
    fn apply(&mut self, jobs: VecDeque<J>, ask: &mut dyn FnMut(usize) -> Vec<DurableFuture>);

    /// The writes `job` carries, which is what the time a group holds
    /// sled's lock grows with.
    fn writes(&self, job: &J) -> usize;
}

/// Grouped commits applied in one go at most.
pub const MAX_GROUP: usize = 256;

/// Writes one group carries at most, unless a single commit carries more.
///
/// Why: while a transaction applies, sled's lock keeps every reader in the
/// daemon out (the tokio workers included, which block on it), and a
/// transaction's time grows with its writes (about 20 us each for new
/// agents on the benchmark machine). Four callers' batches of 1,000 agents
/// in one group held it about 80 ms, and a `GetAgent` beside them waited
/// as long (docs/benchmarks.md). Bounding the group bounds that wait to
/// about 10 ms; a transaction's fixed cost (two log-buffer writes, about
/// 80 us) is then still under 1% of it.
pub const MAX_GROUP_WRITES: usize = 512;

/// How many of `jobs`, from the front, make the next group: at least one,
/// at most [`MAX_GROUP`], and no more writes than [`MAX_GROUP_WRITES`]
/// unless the first alone has more.
fn group_len<'a, J: 'a>(jobs: impl Iterator<Item = &'a J>, writes: impl Fn(&J) -> usize) -> usize {
    let mut total = 0;
    let mut take = 0;
    for job in jobs.take(MAX_GROUP) {
        total += writes(job);
        if take > 0 && total > MAX_GROUP_WRITES {
            break;
        }
        take += 1;
    }
    take
}

/// `n` futures resolving to one flush's answer.
fn shared_answers(
    flushed: impl Future<Output = Flushed> + Send + 'static,
    n: usize,
) -> Vec<DurableFuture> {
    if n == 0 {
        return Vec::new();
    }
    let shared = flushed.shared();
    (0..n)
        .map(|_| Box::pin(shared.clone().map(answer)) as DurableFuture)
        .collect()
}

/// The handle writers hold.
pub struct GroupCommit<J> {
    requests: mpsc::Sender<Request<J>>,
    writes: Arc<WriteCounters>,
    watermark: watch::Receiver<u64>,
    failure: Arc<Failure>,
    /// Resolves when the writer thread has stopped (after `close`).
    stopped: std::sync::Mutex<Option<oneshot::Receiver<()>>>,
}

impl<J> std::fmt::Debug for GroupCommit<J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit")
            .field("writes", &self.writes)
            .finish_non_exhaustive()
    }
}

/// The writer thread's end of a [`GroupCommit`], until it is started with
/// what applies its jobs (which may itself hold the handle).
#[allow(missing_debug_implementations)] // channel ends and counters only
pub struct Unstarted<J> {
    inbox: mpsc::Receiver<Request<J>>,
    committed: Arc<AtomicU64>,
    counters: Arc<WriteCounters>,
    publish: watch::Sender<u64>,
    stats: Arc<StoreStats>,
    failure: Arc<Failure>,
    done: oneshot::Sender<()>,
}

/// The first write or flush the disk refused. sled 0.34 keeps such an
/// error for good (every later write and flush fails with it until the
/// database is opened again), so it is published once, for the daemon to
/// restart its store (see `daemon`).
#[derive(Debug)]
pub struct Failure(watch::Sender<Option<String>>);

impl Failure {
    fn new() -> Self {
        Self(watch::channel(None).0)
    }

    /// Records `why`, unless a failure is already recorded.
    pub fn set(&self, why: String) {
        self.0.send_if_modified(|current| {
            if current.is_some() {
                return false;
            }
            error!(reason = %why, "the disk refused a write: the store can take no more until it is opened again");
            *current = Some(why);
            true
        });
    }

    /// The failure, once there is one.
    pub fn watch(&self) -> watch::Receiver<Option<String>> {
        self.0.subscribe()
    }
}

impl<J: Send + 'static> GroupCommit<J> {
    /// The handle, and the thread's end to start with
    /// [`Unstarted::start`]. `committed` is the highest event cursor whose
    /// batch has been applied.
    pub fn new(committed: Arc<AtomicU64>, stats: Arc<StoreStats>) -> (Self, Unstarted<J>) {
        let (requests, inbox) = mpsc::channel();
        let (publish, watermark) = watch::channel(committed.load(Ordering::Acquire));
        let writes = Arc::new(WriteCounters::default());
        let (done, stopped) = oneshot::channel();
        let failure = Arc::new(Failure::new());
        let handle = Self {
            requests,
            writes: writes.clone(),
            watermark,
            failure: failure.clone(),
            stopped: std::sync::Mutex::new(Some(stopped)),
        };
        let unstarted = Unstarted {
            inbox,
            committed,
            counters: writes,
            publish,
            stats,
            failure,
            done,
        };
        (handle, unstarted)
    }

    /// How long the flush under way has run, if one does.
    pub fn flush_running_for(&self) -> Option<Duration> {
        match self.writes.flushing_since_ms.load(Ordering::SeqCst) {
            0 => None,
            since => Some(Duration::from_millis(
                holarchy_actors::now_ms().saturating_sub(since),
            )),
        }
    }

    /// Where a refused write or flush is recorded.
    pub fn failure(&self) -> &Arc<Failure> {
        &self.failure
    }

    /// Queues a grouped commit for the writer thread; false when it has
    /// stopped (the job is dropped, and with it its answer).
    pub fn commit(&self, job: J) -> bool {
        self.requests.send(Request::Commit(job)).is_ok()
    }

    /// Applies what is queued, flushes a last time and stops the writer
    /// thread, which releases its handle on the database. Later `durable`
    /// calls fail with "store is closed".
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
    /// writer thread only if it sleeps with nothing to do; otherwise it sees the
    /// count itself, with no message per commit.
    pub fn end_write(&self) {
        self.writes.done.fetch_add(1, Ordering::SeqCst);
        if self.writes.idle.load(Ordering::SeqCst) && self.writes.idle.swap(false, Ordering::SeqCst)
        {
            let _ = self.requests.send(Request::Wake);
        }
    }

    /// [`GroupCommit::end_write`], returning a mark: once a flush covers
    /// it, [`GroupCommit::durable_through`] resolves at once.
    pub fn end_write_marked(&self) -> u64 {
        // The value this increment made: a flush that read `done` at or
        // past it began after this write was applied.
        let mark = self.writes.done.fetch_add(1, Ordering::SeqCst) + 1;
        if self.writes.idle.load(Ordering::SeqCst) && self.writes.idle.swap(false, Ordering::SeqCst)
        {
            let _ = self.requests.send(Request::Wake);
        }
        mark
    }

    /// Resolves once the write that returned `mark` is on disk: at once if
    /// a flush already covered it (a later caller's flush did the work),
    /// otherwise at the next flush.
    pub fn durable_through(&self, mark: u64) -> DurableFuture {
        if self.writes.flushed.load(Ordering::SeqCst) >= mark {
            return Box::pin(std::future::ready(Ok(())));
        }
        self.ask()
    }

    /// Like [`GroupCommit::durable`], without the shortcut, for `n`
    /// callers sharing one request. The writer thread asks its own round
    /// directly; this is for tests that apply a group by hand.
    #[cfg(test)]
    pub fn durable_for_writers(&self, n: usize) -> Vec<DurableFuture> {
        shared_answers(self.request(n), n)
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
    /// when the writer thread is gone.
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

impl<J: Send + 'static> Unstarted<J> {
    /// Starts the writer thread over `db`, applying grouped commits with
    /// `apply`.
    pub fn start(self, db: sled::Db, apply: impl ApplyGroup<J>) -> Result<(), StoreError> {
        let Self {
            inbox,
            committed,
            counters,
            publish,
            stats,
            failure,
            done,
        } = self;
        let writer = WriterThread {
            db,
            inbox,
            committed,
            counters,
            publish,
            stats,
            failure,
            latch: latch::Latch::from_env(),
            apply,
        };
        std::thread::Builder::new()
            .name("holarchy-store".into())
            .spawn(move || {
                writer.run();
                let _ = done.send(());
            })
            .map_err(|err| {
                StoreError::Backend(format!("could not start the store writer: {err}"))
            })?;
        Ok(())
    }
}

/// The writer thread's state.
struct WriterThread<J, A> {
    db: sled::Db,
    inbox: mpsc::Receiver<Request<J>>,
    committed: Arc<AtomicU64>,
    counters: Arc<WriteCounters>,
    publish: watch::Sender<u64>,
    stats: Arc<StoreStats>,
    failure: Arc<Failure>,
    latch: Option<latch::Latch>,
    apply: A,
}

/// What the writer gathered for its next flush.
struct Round<J> {
    /// Grouped commits to apply before the flush.
    jobs: VecDeque<J>,
    waiters: Vec<Waiter>,
    /// The callers behind `waiters`.
    callers: usize,
    /// A caller outside the round's groups (a read, a direct commit) waits
    /// for this flush.
    asked_from_outside: bool,
    closing: bool,
    /// Every sender is gone: flush what is left, then stop.
    disconnected: bool,
}

impl<J> Round<J> {
    fn new(jobs: VecDeque<J>, ending: bool) -> Self {
        Self {
            jobs,
            waiters: Vec::new(),
            callers: 0,
            asked_from_outside: false,
            closing: ending,
            disconnected: false,
        }
    }

    fn take(&mut self, request: Request<J>) {
        match request {
            Request::Commit(job) => self.jobs.push_back(job),
            Request::Wait(waiter) => {
                self.asked_from_outside = true;
                self.wait(waiter);
            }
            Request::Wake => {}
            Request::Close => self.closing = true,
        }
    }

    fn wait(&mut self, waiter: Waiter) {
        self.callers += waiter.callers;
        self.waiters.push(waiter);
    }

    fn ending(&self) -> bool {
        self.closing || self.disconnected
    }
}

impl<J, A: ApplyGroup<J>> WriterThread<J, A> {
    fn run(mut self) {
        let mut carried = VecDeque::new();
        let mut ending = false;
        loop {
            let mut round = Round::new(std::mem::take(&mut carried), ending);
            if round.jobs.is_empty() && !round.ending() && !self.wait_for_work(&mut round) {
                return;
            }
            self.take_queued(&mut round);
            self.apply_jobs(&mut round);
            if !round.ending() {
                self.linger(&mut round, MAX_LINGER);
            }
            // A waiter that asked since the last group asked before the
            // flush below starts, so that flush answers it (else it would
            // wait for a group of the next round too).
            self.take_queued(&mut round);
            // Jobs that came while applying or lingering go first in the
            // next round.
            carried = std::mem::take(&mut round.jobs);
            ending = round.ending();
            self.flush_and_answer(round);
            if ending && carried.is_empty() {
                return;
            }
        }
    }

    /// Takes every request queued now into `round`; commits among them
    /// join its jobs behind the ones it applies (see [`Self::apply_jobs`]).
    fn take_queued(&self, round: &mut Round<J>) {
        while let Ok(more) = self.inbox.try_recv() {
            round.take(more);
        }
    }

    /// Applies the round's jobs, a group at a time (see [`group_len`]);
    /// their callers join the round's flush. Once a caller from outside
    /// the groups waits, the jobs left after the current group go to the
    /// next round: that caller then waits for one group and a flush, not
    /// for every job queued (under bulk creations, a read of one record
    /// waited 100 ms and more).
    fn apply_jobs(&mut self, round: &mut Round<J>) {
        // Only the jobs here now: those that come meanwhile queue behind
        // them for the next round, so a steady stream of commits never
        // puts off the flush its first callers wait for.
        let mut left = round.jobs.len();
        while left > 0 {
            let take = group_len(round.jobs.iter().take(left), |job| self.apply.writes(job));
            left -= take;
            let group: VecDeque<J> = round.jobs.drain(..take).collect();
            let mut asked = Vec::new();
            self.apply.apply(group, &mut |n| {
                let (answer, rx) = oneshot::channel();
                asked.push(Waiter {
                    answer,
                    since: Instant::now(),
                    callers: n,
                });
                shared_answers(async move { rx.await.ok() }, n)
            });
            for waiter in asked {
                round.wait(waiter);
            }
            self.take_queued(round);
            // At least one group per round, so jobs progress however many
            // reads come.
            if round.asked_from_outside {
                return;
            }
        }
    }

    fn flush_and_answer(&self, round: Round<J>) {
        let span = if crate::telemetry::exporting() {
            tracing::info_span!("store_flush", waiters = round.callers)
        } else {
            tracing::Span::none()
        };
        let began = Instant::now();
        let result = span.in_scope(|| self.flush());
        let ended = Instant::now();
        self.stats.record_flush(ended - began, round.callers);
        for waiter in round.waiters {
            self.stats
                .record_waits(ended.duration_since(waiter.since), waiter.callers);
            let _ = waiter.answer.send(result.clone());
        }
    }

    /// Blocks until there is a reason to flush: a waiter, a close, or
    /// commits not yet flushed. Those are flushed at once even when nobody
    /// waits: their events become visible to followers only then. False
    /// when there is nothing left to do and every handle is gone.
    fn wait_for_work(&self, round: &mut Round<J>) -> bool {
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
    fn linger(&self, round: &mut Round<J>, window: Duration) {
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
    fn flush(&self) -> Result<(), FlushFailed> {
        self.counters
            .flushing_since_ms
            .store(holarchy_actors::now_ms().max(1), Ordering::SeqCst);
        let flushed = self.flush_now();
        self.counters.flushing_since_ms.store(0, Ordering::SeqCst);
        flushed
    }

    fn flush_now(&self) -> Result<(), FlushFailed> {
        if let Some(latch) = &self.latch {
            latch.hold(&self.counters);
        }
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
                let failed = FlushFailed(Arc::new(err));
                self.failure.set(failed.to_string());
                Err(failed)
            }
        }
    }
}

pub mod latch;
#[cfg(test)]
mod tests;
