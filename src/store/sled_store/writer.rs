//! Applying batches: one sled transaction for one batch, or for a group of
//! concurrent batches (see `grouped`), with event cursors taken under
//! sled's transaction lock.
//!
//! sled 0.34 runs every transaction under one process-wide lock, held
//! exclusively, and each transaction writes its log buffer out twice
//! (`pin_log` rolls the buffer before and after its batch marker: two
//! `pwrite` plus `sync_file_range` on sled's I/O threads). That lock is the
//! only one on the commit path; cursors are handed out inside it, so the
//! event log is in apply order with no lock of ours beside it.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use holarchy_actors::{Batch, DurableFuture, StoreError};
use holarchy_supervision::{slot_of, AgentId, EventCursor, EventKind};
use sled::transaction::{ConflictableTransactionError, TransactionError};
use sled::Tree;
use tokio::sync::oneshot;

use super::apply::{self, Abort};
use super::backend;
use super::encoded::{encode_write, Encoded};
use crate::store::codec::EventPlace;
use crate::store::event_log::Runs;
use crate::store::group_commit::GroupCommit;
use crate::store::slots::{self, SlotSeqs};
use crate::store::stats::StoreStats;

/// A batch with its records encoded, ready for a transaction (whose
/// closure sled may rerun, so nothing inside it should encode records).
pub(super) struct Prepared {
    writes: Vec<Encoded>,
    events: Vec<(Option<AgentId>, EventKind)>,
    at_ms: u64,
}

impl Prepared {
    /// The span of this batch's commit, when spans are exported (see
    /// [`crate::telemetry::exporting`]); else a span that costs nothing.
    pub(super) fn span(&self, path: &'static str) -> tracing::Span {
        if !crate::telemetry::exporting() {
            return tracing::Span::none();
        }
        tracing::info_span!(
            "store_commit",
            path,
            writes = self.writes.len(),
            events = self.events.len()
        )
    }

    /// Its writes, counting its events as one (they go in as one run).
    pub(super) fn write_count(&self) -> usize {
        self.writes.len() + usize::from(!self.events.is_empty())
    }

    pub(super) fn new(batch: Batch) -> Result<Self, StoreError> {
        let writes = batch
            .writes
            .iter()
            .map(encode_write)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            writes,
            events: batch.events,
            at_ms: holarchy_actors::now_ms(),
        })
    }
}

/// Where the note of each slot's numbers is among the trees (see
/// `APPLY_ORDER`).
const NOTE_TREE_AT: usize = 20;

/// The numbers stay whole if a holder panicked: each change is made
/// whole under the lock, or given back whole.
fn lock(seqs: &Mutex<SlotSeqs>) -> MutexGuard<'_, SlotSeqs> {
    seqs.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One caller's grouped batch and where its answer goes (see `grouped`).
pub(in crate::store) struct Job {
    pub(super) batch: Prepared,
    pub(super) answer: oneshot::Sender<Result<DurableFuture, StoreError>>,
}

/// Why a group of batches was not applied; nothing of it was written.
pub(super) enum GroupError {
    /// Batch `at` was refused (a guard failed, a record was corrupt), with
    /// every batch before it applied in the same transaction.
    Refused { at: usize, error: StoreError },
    /// The store failed: no batch of the group can be told apart.
    Store(StoreError),
}

impl GroupError {
    fn into_store_error(self) -> StoreError {
        match self {
            Self::Refused { error, .. } | Self::Store(error) => error,
        }
    }
}

/// Everything a commit touches, shared by the callers' threads and the
/// grouping thread.
#[derive(Debug)]
pub(super) struct Writer {
    /// Every tree, in the order `apply::apply` expects.
    trees: Vec<Tree>,
    /// The last event cursor handed out.
    last_cursor: AtomicU64,
    /// The last event cursor whose transaction has been applied.
    committed: Arc<AtomicU64>,
    /// Each slot's last event number handed out.
    seqs: Mutex<SlotSeqs>,
    /// Events since each slot's last number was written down.
    unnoted: AtomicU64,
    group: Arc<GroupCommit<Job>>,
    stats: Arc<StoreStats>,
}

impl Writer {
    pub(super) fn new(
        trees: Vec<Tree>,
        last: EventCursor,
        seqs: SlotSeqs,
        committed: Arc<AtomicU64>,
        group: Arc<GroupCommit<Job>>,
        stats: Arc<StoreStats>,
    ) -> Self {
        Self {
            trees,
            last_cursor: AtomicU64::new(last),
            committed,
            seqs: Mutex::new(seqs),
            unnoted: AtomicU64::new(0),
            group,
            stats,
        }
    }

    /// Every [`slots::NOTE_EVERY`] events, writes each slot's last number
    /// down in the transaction, so a start reads the log only after it.
    fn checkpoint(
        &self,
        t: &[sled::transaction::TransactionalTree],
        count: u64,
        through: EventCursor,
        seqs: &SlotSeqs,
    ) -> Result<(), ConflictableTransactionError<Abort>> {
        if self.unnoted.fetch_add(count, Ordering::AcqRel) + count < slots::NOTE_EVERY {
            return Ok(());
        }
        apply::note_seqs(t, NOTE_TREE_AT, through, seqs)?;
        self.unnoted.store(0, Ordering::Release);
        Ok(())
    }

    /// Writes each slot's last number down now, as of the last cursor
    /// handed out; that cursor. A transaction of its own, so under sled's
    /// lock, between two commits: the numbers and the cursor agree. Its
    /// place in sled's log is after every event it covers, so whatever
    /// later removes those events cannot outlive it in a crash.
    pub(super) fn note_now(&self) -> Result<EventCursor, StoreError> {
        let notes = &self.trees[NOTE_TREE_AT];
        notes
            .transaction(|t| {
                let seqs = lock(&self.seqs);
                let through = self.last_cursor.load(Ordering::Acquire);
                let value = slots::encode_note(through, &seqs)
                    .map_err(|e| ConflictableTransactionError::Abort(Abort::Corrupt(e)))?;
                t.insert(slots::NOTE_KEY, value)?;
                Ok(through)
            })
            .map_err(|err| match err {
                TransactionError::Abort(Abort::Corrupt(err)) => err,
                TransactionError::Abort(_) => {
                    StoreError::Backend("noting the slots' numbers was refused".into())
                }
                TransactionError::Storage(err) => backend(err),
            })
    }

    /// Applies `batches` in order in one transaction: all of them, or (one
    /// failed) none.
    pub(super) fn apply(&self, batches: &[&Prepared]) -> Result<(), StoreError> {
        self.apply_then(batches, || ())
            .map_err(GroupError::into_store_error)
    }

    /// Like [`Writer::apply`], and once the batches are applied (before the
    /// write counts as finished) asks `waits` flushes for their callers:
    /// asked then, they join the flush the write would otherwise start on
    /// its own.
    pub(super) fn apply_and_ask(
        &self,
        batches: &[&Prepared],
        ask: &mut dyn FnMut(usize) -> Vec<DurableFuture>,
    ) -> Result<Vec<DurableFuture>, GroupError> {
        let mut flushes = Vec::new();
        self.apply_then(batches, || flushes = ask(batches.len()))?;
        Ok(flushes)
    }

    fn apply_then(
        &self,
        batches: &[&Prepared],
        on_applied: impl FnOnce(),
    ) -> Result<(), GroupError> {
        let count: u64 = batches.iter().map(|b| b.events.len() as u64).sum();
        let entered = Instant::now();
        let locked_at = Cell::new(entered);
        // Which batch a refusal came from (sled may rerun the closure, so
        // the last run's answer is the one kept).
        let refused_at = Cell::new(0);
        self.group.begin_write();
        let result = sled::Transactional::transaction(&self.trees[..], |t| {
            locked_at.set(Instant::now());
            // `fetch_add` keeps cursors unique even if sled ever let two of
            // these closures run at once; under its lock they are dense.
            let first = self.last_cursor.fetch_add(count, Ordering::AcqRel) + 1;
            // Under sled's lock too, so never waited on; given back below
            // if the transaction aborts.
            let mut seqs = lock(&self.seqs);
            let mut taken = Vec::with_capacity(count as usize);
            let mut outcome = Ok(());
            for (at, batch) in batches.iter().enumerate() {
                outcome = apply::apply(t, &batch.writes);
                if outcome.is_err() {
                    refused_at.set(at);
                    break;
                }
            }
            if outcome.is_ok() {
                // Every batch's events go in the same runs: a group writes
                // them as one or a few keys.
                let mut runs = Runs::default();
                let ordered = slots::log_order(batches.iter().map(|b| b.events.as_slice()));
                outcome = ordered
                    .into_iter()
                    .zip(first..)
                    .try_for_each(|((at, (agent_id, kind)), cursor)| {
                        let slot = slot_of(*agent_id);
                        taken.push(slot);
                        let seq = seqs.take(slot);
                        let place = EventPlace { cursor, seq };
                        runs.push(place, batches[at].at_ms, agent_id, kind)
                            .inspect_err(|_| refused_at.set(at))
                    })
                    .map_err(|err| ConflictableTransactionError::Abort(Abort::Corrupt(err)))
                    .and_then(|()| apply::append_events(t, runs.finish()))
                    .and_then(|()| self.checkpoint(t, count, first + count - 1, &seqs));
            }
            if outcome.is_err() {
                // Give the cursors and numbers back (nobody took any
                // since, under the lock); had someone, a gap would be
                // harmless.
                seqs.give_back(&taken);
                let _ = self.last_cursor.compare_exchange(
                    first + count - 1,
                    first - 1,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
            }
            outcome.map(|()| first + count - 1)
        });
        if let Ok(last) = result {
            // Before `end_write`: the flusher counts finished writes first
            // and reads this after, so a write it counts has its events in
            // the watermark it publishes. A later commit may have stored a
            // higher cursor already; everything up to it is applied, so
            // the maximum is right.
            self.committed.fetch_max(last, Ordering::AcqRel);
            on_applied();
        }
        self.group.end_write();
        let locked_at = locked_at.get();
        self.stats
            .record_commit(locked_at - entered, locked_at.elapsed());
        let refused = |error| GroupError::Refused {
            at: refused_at.get(),
            error,
        };
        match result {
            Ok(_) => Ok(()),
            Err(TransactionError::Abort(Abort::NameTaken(name))) => {
                Err(refused(StoreError::NameTaken(name)))
            }
            Err(TransactionError::Abort(Abort::SupervisorGone(sup))) => {
                Err(refused(StoreError::SupervisorGone(sup)))
            }
            Err(TransactionError::Abort(Abort::Corrupt(err))) => Err(refused(err)),
            Err(TransactionError::Abort(Abort::Precondition(why))) => {
                Err(refused(StoreError::Precondition(why)))
            }
            // The cursors this commit took are skipped: the log has a gap
            // after a storage failure, never a reused cursor.
            Err(TransactionError::Storage(err)) => {
                self.group.failure().set(format!("a write failed: {err}"));
                Err(GroupError::Store(backend(err)))
            }
        }
    }
}
