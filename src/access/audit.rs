//! The audit trail: one entry per operator write, refused or done, kept
//! durably before the call is answered, read back by filter, and trimmed
//! by age.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use holarchy_actors::StoreError;

use super::{AccessStore, AuditEntry, Caller};

/// The most bytes of an entry's detail (the refusal's or error's reason).
pub const MAX_DETAIL: usize = 300;

/// How long entries are kept by default.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(90 * 24 * 3600);

/// Entries appended between two trims.
const TRIM_EVERY: u64 = 1024;

/// The most entries one trim removes: a trim is a short pause of one
/// call, however far behind the trail is.
const TRIM_BATCH: usize = 10_000;

/// What the gate knows of a call when it ends.
#[derive(Debug)]
pub struct Call<'a> {
    pub caller: &'a Caller,
    pub action: &'a str,
    pub target: String,
    pub outcome: &'a str,
    pub detail: &'a str,
    pub namespace: &'a str,
}

/// The trail as the daemon writes it.
pub struct Audit {
    store: Arc<dyn AccessStore>,
    retention: Duration,
    appended: AtomicU64,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit")
            .field("retention", &self.retention)
            .finish_non_exhaustive()
    }
}

impl Audit {
    pub fn new(store: Arc<dyn AccessStore>, retention: Duration) -> Self {
        Self {
            store,
            retention,
            appended: AtomicU64::new(0),
        }
    }

    pub fn store(&self) -> &Arc<dyn AccessStore> {
        &self.store
    }

    /// Records `call`. A write that was done (`OK`) is durable before
    /// this returns, so it is never answered without its entry; a refused
    /// one rides on the next flush, so a refusal is not held up by a disk
    /// that stalls (nothing was done to lose).
    pub async fn record(&self, call: Call<'_>) -> Result<(), StoreError> {
        let done = call.outcome == "OK";
        let mark = self.write(entry(call)).await?;
        if done {
            self.store.flushed_through(mark).await?;
        }
        Ok(())
    }

    /// Starts the entry of a call about to run. Where the store's flushes
    /// are shared (sled), it is written now, marked `UNFINISHED`, so that
    /// the flush the call itself awaits makes it durable; elsewhere it is
    /// written by [`Audit::finish`].
    pub async fn begin(&self, call: Call<'_>) -> Result<Pending, StoreError> {
        let entry = entry(call);
        let mark = if self.store.shares_flushes() {
            Some(self.write(entry.clone()).await?)
        } else {
            None
        };
        Ok(Pending { entry, mark })
    }

    /// Ends the entry `begin` started with the call's outcome. For a
    /// write that was done (`OK`), waits until the entry is durable: at
    /// once, when the call's own flush covered it. The outcome itself
    /// rides on the next flush; a daemon killed before it leaves the
    /// entry `UNFINISHED`.
    pub async fn finish(
        &self,
        pending: Pending,
        outcome: &str,
        detail: &str,
    ) -> Result<(), StoreError> {
        let Pending { mut entry, mark } = pending;
        entry.outcome = outcome.to_owned();
        entry.detail = cut(detail);
        let written = self.write(entry).await?;
        if outcome == "OK" {
            self.store.flushed_through(mark.unwrap_or(written)).await?;
        }
        Ok(())
    }

    /// Writes `entry`; its mark. On a store whose writes are local and
    /// brief (sled) in place, as the services read it; on one that waits
    /// for a server, off the async threads. A trim, when due, runs off
    /// them either way.
    async fn write(&self, entry: AuditEntry) -> Result<u64, StoreError> {
        let store = self.store.clone();
        let mark = if store.shares_flushes() {
            store.append_audit(std::slice::from_ref(&entry))?
        } else if let Some(queued) = store.append_audit_queued(std::slice::from_ref(&entry)) {
            queued.await?;
            0
        } else {
            blocking(move || store.append_audit(std::slice::from_ref(&entry))).await?
        };
        if self.appended.fetch_add(1, Ordering::Relaxed) % TRIM_EVERY == TRIM_EVERY - 1 {
            let store = self.store.clone();
            let cutoff = ulid_floor(now_ms().saturating_sub(self.retention.as_millis() as u64));
            let removed = blocking(move || store.trim_audit(cutoff, TRIM_BATCH)).await?;
            if removed > 0 {
                tracing::info!(removed, "audit entries past their retention removed");
            }
        }
        Ok(mark)
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| StoreError::Backend(format!("the audit write stopped: {err}")))?
}

/// An entry whose call is running: written ahead (with its mark) where
/// that saves a flush.
#[derive(Debug)]
pub struct Pending {
    entry: AuditEntry,
    mark: Option<u64>,
}

/// The outcome an entry shows until its call's outcome is written.
pub const UNFINISHED: &str = "UNFINISHED";

fn cut(detail: &str) -> String {
    let mut detail = detail.to_owned();
    if detail.len() > MAX_DETAIL {
        let mut end = MAX_DETAIL;
        while !detail.is_char_boundary(end) {
            end -= 1;
        }
        detail.truncate(end);
    }
    detail
}

/// The smallest ULID of millisecond `ms`: every entry made at or after
/// `ms` sorts at or after it.
pub fn ulid_floor(ms: u64) -> [u8; 16] {
    ulid::Ulid::from_parts(ms, 0).to_bytes()
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn entry(call: Call<'_>) -> AuditEntry {
    let detail = cut(call.detail);
    AuditEntry {
        id: ulid::Ulid::new().to_bytes(),
        caller: call.caller.who(),
        role: call.caller.role,
        from: call.caller.from.clone(),
        action: call.action.to_owned(),
        target: call.target,
        outcome: call.outcome.to_owned(),
        detail,
        namespace: call.namespace.to_owned(),
    }
}

/// What a reader of the trail asks for; empty fields match everything.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Matches an entry whose caller starts with it (`token:01J...`,
    /// `uid:0`).
    pub caller: String,
    pub namespace: String,
    /// Matches an entry whose action contains it (`Pause`, `AgentService/`).
    pub action: String,
    pub since_ms: Option<u64>,
    pub until_ms: Option<u64>,
}

impl Filter {
    pub fn matches(&self, entry: &AuditEntry) -> bool {
        entry.caller.starts_with(&self.caller)
            && (self.namespace.is_empty() || entry.namespace == self.namespace)
            && entry.action.contains(&self.action)
    }
}

/// The most entries one page reads from the store while filtering, so a
/// filter that matches little cannot hold a thread for long: the page
/// then ends early and says where to go on.
pub const SCAN_BUDGET: usize = 20_000;

/// A page of the trail.
#[derive(Debug)]
pub struct Page {
    pub entries: Vec<AuditEntry>,
    /// Where the next page starts (exclusive), if the range goes on.
    pub next: Option<[u8; 16]>,
}

/// Up to `limit` entries matching `filter`, oldest first from `after`,
/// or newest first from `before` when `newest_first`.
pub fn page(
    store: &dyn AccessStore,
    filter: &Filter,
    from: Option<[u8; 16]>,
    newest_first: bool,
    limit: usize,
) -> Result<Page, StoreError> {
    let floor = filter.since_ms.map(|ms| {
        // Exclusive bound: the id just below the first of `since_ms`.
        let first = u128::from_be_bytes(ulid_floor(ms));
        first.saturating_sub(1).to_be_bytes()
    });
    let ceiling = filter.until_ms.map(ulid_floor);
    let (mut after, mut before) = if newest_first {
        (floor, tighter(from, ceiling, false))
    } else {
        (tighter(from, floor, true), ceiling)
    };
    let mut entries = Vec::new();
    let mut scanned = 0;
    loop {
        let chunk = 512.min(SCAN_BUDGET - scanned);
        let read = store.audit_range(after, before, chunk, newest_first)?;
        let exhausted = read.len() < chunk;
        for entry in read {
            scanned += 1;
            let id = entry.id;
            if newest_first {
                before = Some(id);
            } else {
                after = Some(id);
            }
            if filter.matches(&entry) {
                entries.push(entry);
                if entries.len() == limit {
                    return Ok(Page {
                        entries,
                        next: Some(id),
                    });
                }
            }
        }
        if exhausted {
            return Ok(Page {
                entries,
                next: None,
            });
        }
        if scanned >= SCAN_BUDGET {
            let next = if newest_first { before } else { after };
            return Ok(Page { entries, next });
        }
    }
}

/// The tighter of two exclusive bounds: the larger for a lower bound.
fn tighter(a: Option<[u8; 16]>, b: Option<[u8; 16]>, lower: bool) -> Option<[u8; 16]> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if (a > b) == lower { a } else { b }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tighter_bound_is_the_inner_one() {
        let (low, high) = ([1u8; 16], [2u8; 16]);
        assert_eq!(tighter(Some(low), Some(high), true), Some(high));
        assert_eq!(tighter(Some(low), Some(high), false), Some(low));
        assert_eq!(tighter(None, Some(high), true), Some(high));
        assert_eq!(tighter(None, None, false), None);
    }

    #[test]
    fn a_floor_sorts_below_every_id_of_its_millisecond() {
        let ms = 1_700_000_000_000;
        let id = ulid::Ulid::from_parts(ms, 12345).to_bytes();
        assert!(ulid_floor(ms) <= id);
        assert!(ulid_floor(ms + 1) > id);
    }
}
