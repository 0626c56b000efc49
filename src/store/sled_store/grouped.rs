//! Grouped commits: callers that can wait without holding a thread (the
//! create path; the turn path: a message queued, a turn's start, its end)
//! hand their batch to the store's writer thread (see `group_commit`),
//! which applies every batch queued meanwhile in a single sled
//! transaction, between two flushes.
//!
//! Why: each sled transaction costs two log-buffer writes, each a `pwrite`
//! plus a synchronous `sync_file_range` on sled's I/O threads (about 80 us
//! of kernel time per transaction on the benchmark machine), whatever its
//! size. A group of N batches pays that once. A group is all or none in
//! sled; if one of its batches is refused (a taken name, a failed
//! precondition), the group is split around it (see `apply_all`), so each
//! caller gets exactly the answer a commit of its own would have given and
//! one refusal never fails the others.

use std::collections::VecDeque;
use std::sync::Arc;

use holarchy_actors::{CommitFuture, DurableFuture, StoreError};
use tokio::sync::oneshot;

use super::writer::{GroupError, Job, Prepared, Writer};
use crate::store::group_commit::{ApplyGroup, GroupCommit};

/// Queues `batch` on the writer thread; the future resolves once it is
/// applied (or failed), to the flush that covers it.
pub(super) fn commit(group: &GroupCommit<Job>, batch: Prepared) -> CommitFuture {
    let (answer, applied) = oneshot::channel();
    let sent = group.commit(Job { batch, answer });
    Box::pin(async move {
        if !sent {
            return Err(StoreError::Closed);
        }
        applied.await.unwrap_or(Err(StoreError::Closed))
    })
}

/// What the writer thread applies grouped jobs with.
pub(super) struct Applier(pub(super) Arc<Writer>);

impl ApplyGroup<Job> for Applier {
    fn apply(&mut self, jobs: VecDeque<Job>, ask: &mut dyn FnMut(usize) -> Vec<DurableFuture>) {
        apply_all(&self.0, jobs, ask);
    }

    fn writes(&self, job: &Job) -> usize {
        job.batch.write_count()
    }
}

/// Applies `jobs` in order, as few transactions as their refusals allow,
/// and answers each caller exactly as a commit of its own would have been
/// answered at that point of the order.
///
/// A refused batch sinks only itself. Batch `at` refused means those
/// before it applied cleanly on top of each other, so they go again as a
/// group of their own; the refused one then leads the rest, where it is
/// applied on the store as it really is, and a refusal of a group's first
/// batch is its own answer. A refusal thus costs at most two extra
/// transactions, and no answer rests on a state that never existed (other
/// writers may commit between two attempts).
pub(super) fn apply_all(
    writer: &Writer,
    mut jobs: VecDeque<Job>,
    ask: &mut dyn FnMut(usize) -> Vec<DurableFuture>,
) {
    let mut take = jobs.len();
    while !jobs.is_empty() {
        let batches: Vec<&Prepared> = jobs.iter().take(take).map(|job| &job.batch).collect();
        let together = writer.apply_and_ask(&batches, ask);
        drop(batches);
        match together {
            Ok(flushes) => {
                for flushed in flushes {
                    if let Some(job) = jobs.pop_front() {
                        let _ = job.answer.send(Ok(flushed));
                    }
                }
                take = jobs.len();
            }
            Err(GroupError::Refused { at: 0, error }) => {
                if let Some(job) = jobs.pop_front() {
                    let _ = job.answer.send(Err(error));
                }
                take = jobs.len();
            }
            Err(GroupError::Refused { at, .. }) => take = at,
            // A storage failure is the store's, not a batch's: sled may
            // have applied part of the group in memory, so applying its
            // batches again could misreport them; everyone gets the error.
            Err(GroupError::Store(err)) => {
                let why = match err {
                    StoreError::Backend(why) => why,
                    other => other.to_string(),
                };
                for job in jobs.drain(..) {
                    let _ = job.answer.send(Err(StoreError::Backend(why.clone())));
                }
            }
        }
    }
}
