//! Waiting for the runtime under a deadline: an operator's call never
//! waits without bound, and what it started is never cut off half-way.

use std::future::Future;
use std::time::Duration;

use tokio_util::task::TaskTracker;

/// An operator's change that failed, or did not finish in time.
#[derive(Debug, thiserror::Error)]
pub enum Bounded<E: std::error::Error + 'static> {
    #[error("the runtime did not finish within {0:?}; the change goes on and may still complete")]
    TimedOut(Duration),
    #[error("the change failed inside the runtime: {0}")]
    Panicked(String),
    #[error(transparent)]
    Failed(#[from] E),
}

/// Runs `change` in a task of its own (held by `tasks`, so a shutdown
/// waits for it) and waits up to `limit` for it. On a timeout the change
/// goes on to its end: it is never dropped half-way.
pub async fn bounded<T, E>(
    tasks: &TaskTracker,
    limit: Duration,
    change: impl Future<Output = Result<T, E>> + Send + 'static,
) -> Result<T, Bounded<E>>
where
    T: Send + 'static,
    E: std::error::Error + Send + 'static,
{
    let running = tasks.spawn(change);
    match tokio::time::timeout(limit, running).await {
        Ok(Ok(done)) => done.map_err(Bounded::Failed),
        Ok(Err(join)) => Err(Bounded::Panicked(join.to_string())),
        Err(_) => Err(Bounded::TimedOut(limit)),
    }
}

/// Runs `work` on the blocking pool; the caller waits up to `limit` (a
/// read left behind finishes on its own, and a write is never cut short).
pub async fn bounded_blocking<T: Send + 'static, E>(
    limit: Duration,
    work: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, Bounded<E>>
where
    E: std::error::Error + Send + 'static,
{
    match tokio::time::timeout(limit, tokio::task::spawn_blocking(work)).await {
        Ok(Ok(done)) => done.map_err(Bounded::Failed),
        Ok(Err(join)) => Err(Bounded::Panicked(join.to_string())),
        Err(_) => Err(Bounded::TimedOut(limit)),
    }
}
