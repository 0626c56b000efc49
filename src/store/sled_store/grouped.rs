//! Grouped commits: callers that can wait without holding a thread (the
//! create path) hand their batch to one committing thread, which applies
//! every batch queued meanwhile in a single sled transaction.
//!
//! Why: each sled transaction costs two log-buffer writes, each a `pwrite`
//! plus a synchronous `sync_file_range` on sled's I/O threads (about 80 us
//! of kernel time per transaction on the benchmark machine), whatever its
//! size. A group of N batches pays that once. A group is all or none in
//! sled; if one of its batches is refused (a taken name, a failed
//! precondition), every batch of it is applied again alone, so each caller
//! gets exactly the answer a commit of its own would have given.

use std::sync::mpsc;
use std::sync::Arc;

use holarchy_actors::{CommitFuture, DurableFuture, StoreError};
use tokio::sync::oneshot;

use super::writer::{Prepared, Writer};

/// Batches applied in one transaction at most: bounds the time a group
/// holds sled's lock, so a reader is never held up long.
const MAX_GROUP: usize = 256;

struct Job {
    batch: Prepared,
    answer: oneshot::Sender<Result<DurableFuture, StoreError>>,
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
        let mut jobs: Vec<Job> = Vec::new();
        match inbox.recv() {
            Ok(Request::Commit(job)) => jobs.push(job),
            Ok(Request::Stop) | Err(_) => return,
        }
        while jobs.len() < MAX_GROUP {
            match inbox.try_recv() {
                Ok(Request::Commit(job)) => jobs.push(job),
                Ok(Request::Stop) => {
                    stopping = true;
                    break;
                }
                Err(_) => break,
            }
        }
        let batches: Vec<&Prepared> = jobs.iter().map(|job| &job.batch).collect();
        let together = writer.apply_and_ask(&batches, batches.len());
        drop(batches);
        match together {
            Ok(flushes) => {
                for (job, flushed) in jobs.into_iter().zip(flushes) {
                    let _ = job.answer.send(Ok(flushed));
                }
            }
            // A storage failure is the store's, not a batch's: sled may
            // have applied part of the group in memory, so applying its
            // batches again could misreport them; everyone gets the error.
            Err(StoreError::Backend(why)) => {
                for job in jobs {
                    let _ = job.answer.send(Err(StoreError::Backend(why.clone())));
                }
            }
            Err(err) if jobs.len() == 1 => {
                if let Some(job) = jobs.pop() {
                    let _ = job.answer.send(Err(err));
                }
            }
            // One batch failed the group: each alone, in the same order, so
            // each gets the answer it would have had.
            Err(_) => {
                for job in jobs {
                    let alone = writer
                        .apply_and_ask(&[&job.batch], 1)
                        .map(|mut flushes| flushes.pop());
                    let answer = match alone {
                        Ok(Some(flushed)) => Ok(flushed),
                        Ok(None) => Err(StoreError::Closed),
                        Err(err) => Err(err),
                    };
                    let _ = job.answer.send(answer);
                }
            }
        }
    }
}
