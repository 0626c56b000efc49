//! Grouped commits: callers that can wait without holding a thread (the
//! create path; the turn path: a message queued, a turn's start, its end)
//! hand their batch to one committing thread, which applies every batch
//! queued meanwhile in a single sled transaction.
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
use std::sync::mpsc;
use std::sync::Arc;

use holarchy_actors::{CommitFuture, DurableFuture, StoreError};
use tokio::sync::oneshot;

use super::writer::{GroupError, Prepared, Writer};

/// Batches applied in one transaction at most: bounds the time a group
/// holds sled's lock, so a reader is never held up long.
const MAX_GROUP: usize = 256;

/// One caller's batch and where its answer goes.
pub(super) struct Job {
    pub(super) batch: Prepared,
    pub(super) answer: oneshot::Sender<Result<DurableFuture, StoreError>>,
}

enum Request {
    Commit(Job),
    Stop,
}

/// The handle the store keeps.
#[derive(Debug)]
pub(super) struct Grouped {
    requests: mpsc::Sender<Request>,
    stopped: std::sync::Mutex<Option<oneshot::Receiver<()>>>,
}

impl Grouped {
    pub(super) fn start(writer: Arc<Writer>) -> Result<Self, StoreError> {
        let (requests, inbox) = mpsc::channel();
        let (done, stopped) = oneshot::channel();
        std::thread::Builder::new()
            .name("holarchy-commit".into())
            .spawn(move || {
                run(&writer, &inbox);
                // Let go of the trees before saying so: a store closed and
                // dropped must release the database for a reopen.
                drop(writer);
                drop(inbox);
                let _ = done.send(());
            })
            .map_err(|err| StoreError::Backend(format!("could not start the committer: {err}")))?;
        Ok(Self {
            requests,
            stopped: std::sync::Mutex::new(Some(stopped)),
        })
    }

    /// Queues `batch`; the future resolves once it is applied (or failed),
    /// to the flush that covers it.
    pub(super) fn commit(&self, batch: Prepared) -> CommitFuture {
        let (answer, applied) = oneshot::channel();
        let sent = self
            .requests
            .send(Request::Commit(Job { batch, answer }))
            .is_ok();
        Box::pin(async move {
            if !sent {
                return Err(StoreError::Closed);
            }
            applied.await.unwrap_or(Err(StoreError::Closed))
        })
    }

    /// Applies what is queued, then stops the thread (which lets go of
    /// the trees). Later commits fail with "store is closed".
    pub(super) async fn stop(&self) {
        let _ = self.requests.send(Request::Stop);
        let stopped = self
            .stopped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(stopped) = stopped {
            let _ = stopped.await;
        }
    }
}

fn run(writer: &Writer, inbox: &mpsc::Receiver<Request>) {
    let mut stopping = false;
    while !stopping {
        let mut jobs: VecDeque<Job> = VecDeque::new();
        match inbox.recv() {
            Ok(Request::Commit(job)) => jobs.push_back(job),
            Ok(Request::Stop) | Err(_) => return,
        }
        while jobs.len() < MAX_GROUP {
            match inbox.try_recv() {
                Ok(Request::Commit(job)) => jobs.push_back(job),
                Ok(Request::Stop) => {
                    stopping = true;
                    break;
                }
                Err(_) => break,
            }
        }
        apply_all(writer, jobs);
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
pub(super) fn apply_all(writer: &Writer, mut jobs: VecDeque<Job>) {
    let mut take = jobs.len();
    while !jobs.is_empty() {
        let batches: Vec<&Prepared> = jobs.iter().take(take).map(|job| &job.batch).collect();
        let together = writer.apply_and_ask(&batches, batches.len());
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
