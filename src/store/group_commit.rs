//! Group commit: writers that must not answer before their write is on disk
//! ask for a flush and wait; one flusher task serves every request that
//! arrived while the previous flush ran with a single `fsync`.
//!
//! The flusher also publishes the durable event watermark: the highest
//! event cursor committed before a flush began is, once that flush ends, on
//! disk. Event readers never go past it, so a client never sees an event
//! that a crash could take back (and whose cursor would then be reused).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use holarchy_actors::{DurableFuture, StoreError};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::error;

enum Request {
    /// Answer once a flush that started after this request has ended.
    Wait(oneshot::Sender<Result<(), String>>),
    /// Flush soon; nobody waits.
    Nudge,
    /// Flush once more, answer everyone, then stop and let go of the db.
    Close,
}

/// Counts writes so that a caller with nothing unflushed behind it need not
/// wait for a flush at all (reads, mostly).
#[derive(Debug, Default)]
struct WriteCounters {
    /// Writes that began applying; bumped before the data is visible.
    started: AtomicU64,
    /// Writes that finished applying.
    done: AtomicU64,
    /// `done` as read before the latest successful flush began.
    flushed: AtomicU64,
}

/// The handle writers hold.
#[derive(Debug)]
pub struct GroupCommit {
    requests: mpsc::UnboundedSender<Request>,
    writes: Arc<WriteCounters>,
    watermark: watch::Receiver<u64>,
    flusher: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Flush statistics, for status and benchmarks.
#[derive(Debug, Default)]
pub struct FlushStats {
    pub flushes: AtomicU64,
    pub waiters_served: AtomicU64,
}

impl GroupCommit {
    /// Starts the flusher task on the current tokio runtime. `committed`
    /// is the highest event cursor whose batch has been applied.
    pub fn start(db: sled::Db, committed: Arc<AtomicU64>, stats: Arc<FlushStats>) -> Self {
        let (requests, mut inbox) = mpsc::unbounded_channel::<Request>();
        let (publish, watermark) = watch::channel(committed.load(Ordering::Acquire));
        let writes = Arc::new(WriteCounters::default());
        let counters = writes.clone();
        let flusher = tokio::spawn(async move {
            let mut waiters = Vec::new();
            let mut closing = false;
            while let Some(first) = inbox.recv().await {
                let mut collect = |request| match request {
                    Request::Wait(tx) => waiters.push(tx),
                    Request::Nudge => {}
                    Request::Close => closing = true,
                };
                collect(first);
                while let Ok(more) = inbox.try_recv() {
                    collect(more);
                }
                // Read before flushing: everything up to here was applied
                // before the flush began, so the flush covers it.
                let upto = committed.load(Ordering::Acquire);
                let writes_done = counters.done.load(Ordering::SeqCst);
                let db = db.clone();
                let result = match tokio::task::spawn_blocking(move || db.flush()).await {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(err)) => Err(err.to_string()),
                    Err(join) => Err(join.to_string()),
                };
                match &result {
                    Ok(()) => {
                        counters.flushed.fetch_max(writes_done, Ordering::SeqCst);
                        publish.send_if_modified(|current| {
                            let moved = upto > *current;
                            *current = (*current).max(upto);
                            moved
                        });
                    }
                    Err(err) => error!(error = %err, "flush failed"),
                }
                stats.flushes.fetch_add(1, Ordering::Relaxed);
                stats
                    .waiters_served
                    .fetch_add(waiters.len() as u64, Ordering::Relaxed);
                for tx in waiters.drain(..) {
                    let _ = tx.send(result.clone());
                }
                if closing {
                    break;
                }
            }
        });
        Self {
            requests,
            writes,
            watermark,
            flusher: std::sync::Mutex::new(Some(flusher)),
        }
    }

    /// Flushes a last time and stops the flusher, which releases its handle
    /// on the database. Later `durable` calls fail with "store is closed".
    pub async fn close(&self) {
        let _ = self.requests.send(Request::Close);
        let flusher = self
            .flusher
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(flusher) = flusher {
            let _ = flusher.await;
        }
    }

    /// Call before a write becomes visible to readers.
    pub fn begin_write(&self) {
        self.writes.started.fetch_add(1, Ordering::SeqCst);
    }

    /// Call once the write has been applied (or has failed).
    pub fn end_write(&self) {
        self.writes.done.fetch_add(1, Ordering::SeqCst);
    }

    /// Resolves once everything committed before this call is on disk.
    /// Anything a caller could have read was counted by `begin_write`
    /// first, so when every started write is already flushed there is
    /// nothing to wait for.
    pub fn durable(&self) -> DurableFuture {
        if self.writes.started.load(Ordering::SeqCst) <= self.writes.flushed.load(Ordering::SeqCst)
        {
            return Box::pin(std::future::ready(Ok(())));
        }
        let (tx, rx) = oneshot::channel();
        let sent = self.requests.send(Request::Wait(tx)).is_ok();
        Box::pin(async move {
            if !sent {
                return Err(StoreError::Closed);
            }
            match rx.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(err)) => Err(StoreError::Backend(format!("flush failed: {err}"))),
                Err(_) => Err(StoreError::Closed),
            }
        })
    }

    /// Asks for a flush soon, without waiting for it.
    pub fn nudge(&self) {
        let _ = self.requests.send(Request::Nudge);
    }

    /// The durable event watermark; changes after each flush that moved it.
    pub fn watermark(&self) -> watch::Receiver<u64> {
        self.watermark.clone()
    }
}
