//! The disk guard: keeps the store from ever meeting a full disk.
//!
//! sled 0.34 keeps a refused write for good, and can then hang a flush
//! that holds its lock (the flush waits for a log buffer its failed write
//! never wakes), which freezes every reader in the daemon. So the daemon
//! watches the free space under its data directory and, below
//! `--min-free-disk`, stops taking new work before sled fills the disk:
//! gRPC calls that write answer UNAVAILABLE, no turn starts (agents keep
//! their queues, none is failed), and `/readyz` says not ready. What is
//! already running (a turn's end, a command's output, a timer) writes into
//! that reserve. Above the mark plus a margin, everything resumes by
//! itself.
//!
//! The guard reads the disk every 100 ms, and each write call reads it
//! again before it is let in: a caller writing fast enough to use the
//! reserve up between two readings is refused at the mark all the same.
//!
//! A disk so slow that one flush runs past `--max-flush-stall-ms` is held
//! the same way: callers would otherwise queue behind it without bound;
//! they are told UNAVAILABLE at once, and work resumes when it ends.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use holarchy_actors::Runtime;
use tokio::sync::{watch, Notify};
use tracing::{info, warn};

use crate::store::Opened;

/// How often the free space is read (one `statvfs`).
const POLL: Duration = Duration::from_millis(100);

/// The callers' side of the guard: whether new work is refused for the
/// disk's sake (full, or so slow a flush has not ended), and why.
#[derive(Debug, Clone)]
pub struct DiskLow {
    held: watch::Receiver<Option<String>>,
    probe: Arc<Probe>,
}

/// What a write call reads the disk against, and how it wakes the guard.
#[derive(Debug)]
struct Probe {
    dir: PathBuf,
    min_free: u64,
    wake: Notify,
}

impl DiskLow {
    /// Why the guard holds work back, if it does: what `/readyz` says.
    pub fn held(&self) -> Option<String> {
        self.held.borrow().clone()
    }

    /// Why a write must be refused now, if it must: the guard's hold, or
    /// a disk found under the mark at this moment (the guard is woken to
    /// hold turns too, rather than at its next reading).
    pub fn refuses_writes(&self) -> Option<String> {
        if let Some(why) = self.held() {
            return Some(why);
        }
        let free = free_bytes(&self.probe.dir)?;
        (free < self.probe.min_free).then(|| {
            self.probe.wake.notify_one();
            full_reason(&self.probe.dir, free, self.probe.min_free)
        })
    }
}

/// What the guard watches, and the marks it holds work at.
pub struct Watched {
    pub dir: PathBuf,
    pub min_free: u64,
    /// A flush running this long holds new work back.
    pub max_flush: Duration,
    pub store: Opened,
    pub runtime: Arc<Runtime>,
}

/// The guard's own side: where it says whether work is held.
pub struct Holding {
    low: watch::Sender<Option<String>>,
    probe: Arc<Probe>,
}

/// The guard's two sides for `dir`, held below `min_free` bytes free.
pub fn channel(dir: &Path, min_free: u64) -> (Holding, DiskLow) {
    let (low, held) = watch::channel(None);
    let probe = Arc::new(Probe {
        dir: dir.to_path_buf(),
        min_free,
        wake: Notify::new(),
    });
    (
        Holding {
            low,
            probe: probe.clone(),
        },
        DiskLow { held, probe },
    )
}

fn full_reason(dir: &Path, free: u64, min_free: u64) -> String {
    format!(
        "the disk under {} has {} MiB free, under --min-free-disk ({} MiB): writes are refused and turns held until space returns",
        dir.display(),
        free >> 20,
        min_free >> 20
    )
}

/// Watches the disk until `stop`; holds and releases the runtime's turns
/// as it fills (resuming at 1.25 x `min_free`, so a disk on the edge does
/// not flap) or stalls (a flush running past `max_flush`; resuming when it
/// ends).
pub async fn guard(watched: Watched, holding: Holding, mut stop: watch::Receiver<bool>) {
    let Watched {
        dir,
        min_free,
        max_flush,
        store,
        runtime,
    } = watched;
    let Holding { low, probe } = holding;
    let resume_at = min_free.saturating_add(min_free / 4);
    let mut full = false;
    loop {
        let free = free_bytes(&dir);
        if let Some(free) = free {
            full = if full {
                free < resume_at
            } else {
                free < min_free
            };
        }
        let why = if full {
            Some(full_reason(&dir, free.unwrap_or(0), min_free))
        } else {
            store
                .flush_running_for()
                .filter(|ran| *ran >= max_flush)
                .map(|ran| {
                    format!(
                        "the disk is slow: a flush has run {} ms (--max-flush-stall-ms {}): writes are refused and turns held until it ends",
                        ran.as_millis(),
                        max_flush.as_millis()
                    )
                })
        };
        let held = low.borrow().is_some();
        match (&why, held) {
            (Some(why), false) => {
                warn!(free_bytes = free, "{why}");
                runtime.hold_turns();
                low.send_replace(Some(why.clone()));
            }
            (None, true) => {
                info!(
                    free_bytes = free,
                    "the disk takes writes again: taking writes and turns again"
                );
                low.send_replace(None);
                runtime.release_turns();
            }
            _ => {}
        }
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            () = probe.wake.notified() => {}
            () = tokio::time::sleep(POLL) => {}
        }
    }
}

/// Bytes free for an unprivileged writer on the file system of `dir`.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    let stat = nix::sys::statvfs::statvfs(dir).ok()?;
    Some(stat.blocks_available().saturating_mul(stat.fragment_size()))
}

/// Whether a gRPC method only reads: those are served on a full disk.
fn reads_only(path: &str) -> bool {
    let method = path.rsplit('/').next().unwrap_or_default();
    [
        "Get",
        "List",
        "Watch",
        "Search",
        "Check",
        "Follow",
        "ServerReflectionInfo",
    ]
    .iter()
    .any(|prefix| method.starts_with(prefix))
}

/// Refuses gRPC calls that write while the disk is low.
#[derive(Debug, Clone)]
pub struct GuardLayer(pub DiskLow);

impl<S> tower::Layer<S> for GuardLayer {
    type Service = Guarded<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Guarded {
            inner,
            low: self.0.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Guarded<S> {
    inner: S,
    low: DiskLow,
}

impl<S, B, R> tower::Service<http::Request<B>> for Guarded<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future =
        futures::future::Either<S::Future, std::future::Ready<Result<http::Response<R>, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        // The guard's hold only: every write also passes the gate, which
        // reads the disk itself before it records the call.
        let refused = if reads_only(request.uri().path()) {
            None
        } else {
            self.low.held()
        };
        match refused {
            None => futures::future::Either::Left(self.inner.call(request)),
            Some(why) => futures::future::Either::Right(std::future::ready(Ok(
                tonic::Status::unavailable(format!("{why}; retry later")).into_http(),
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::reads_only;

    #[test]
    fn reads_pass_and_writes_are_held() {
        assert!(reads_only("/holarchy.v1.AgentService/GetAgent"));
        assert!(reads_only("/holarchy.v1.AgentService/ListMessages"));
        assert!(reads_only("/grpc.health.v1.Health/Check"));
        assert!(!reads_only("/holarchy.v1.AgentService/SendMessage"));
        assert!(!reads_only("/holarchy.v1.AgentService/CreateAgent"));
    }
}
