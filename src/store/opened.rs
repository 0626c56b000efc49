//! The store a daemon runs on, whichever it is: what the daemon's own parts
//! (the disk guard, the metrics, the watchdog, the shutdown) need of it
//! beyond the actors' `Store` trait. The services' `ReadModel` view is
//! taken in the daemon, which sees both layers; the store never imports
//! the API.

use std::sync::Arc;
use std::time::Duration;

use holarchy_actors::{Store, StoreError};
use holarchy_supervision::EventCursor;
use tokio::sync::watch;

use super::{PgStore, SledStore};

/// An opened store.
#[derive(Debug, Clone)]
pub enum Opened {
    /// Embedded, under the data directory (the default).
    Sled(Arc<SledStore>),
    /// A PostgreSQL database (`serve --store postgres://...`).
    Postgres(Arc<PgStore>),
}

impl Opened {
    /// The store as the actors use it.
    pub fn actors(&self) -> Arc<dyn Store> {
        match self {
            Opened::Sled(store) => store.clone(),
            Opened::Postgres(store) => store.clone(),
        }
    }

    /// Where tokens and the audit trail are kept.
    pub fn access(&self) -> Arc<dyn crate::access::AccessStore> {
        match self {
            Opened::Sled(store) => store.clone(),
            Opened::Postgres(store) => store.clone(),
        }
    }

    /// Which store this is, for logs and `holarchy status`.
    pub fn kind(&self) -> &'static str {
        match self {
            Opened::Sled(_) => "sled",
            Opened::Postgres(_) => "postgres",
        }
    }

    /// Lands what is queued and stops; the last step of a shutdown.
    pub async fn close(&self) {
        match self {
            Opened::Sled(store) => store.close().await,
            Opened::Postgres(store) => store.close().await,
        }
    }

    /// Resolves with the reason once the store takes nothing more until it
    /// is opened again: a disk that refused a write (sled), a connection
    /// lost under a commit (PostgreSQL).
    pub async fn failed(&self) -> String {
        match self {
            Opened::Sled(store) => store.failed().await,
            Opened::Postgres(store) => store.failed().await,
        }
    }

    /// How long the local flush under way has run, if one does (a disk
    /// that stalls); a database's commits are not flushes of this disk.
    pub fn flush_running_for(&self) -> Option<Duration> {
        match self {
            Opened::Sled(store) => store.flush_running_for(),
            Opened::Postgres(_) => None,
        }
    }

    /// Flushes (sled) or transactions (PostgreSQL), and batches committed.
    pub fn work_done(&self) -> (u64, u64) {
        match self {
            Opened::Sled(store) => store.work_done(),
            Opened::Postgres(store) => store.work_done(),
        }
    }

    /// The newest durable event's cursor, as it moves.
    pub fn event_watermark(&self) -> watch::Receiver<EventCursor> {
        match self {
            Opened::Sled(store) => store.event_watermark(),
            Opened::Postgres(store) => store.event_watermark(),
        }
    }

    /// Entries agents' memory searches find (sled: its index's documents;
    /// PostgreSQL: the planner's estimate of its search table).
    pub fn memory_indexed(&self) -> u64 {
        match self {
            Opened::Sled(store) => store.memory_indexed(),
            Opened::Postgres(store) => store.memory_indexed(),
        }
    }

    /// Removes up to `limit` runs of events all made before `before_ms`
    /// (the log's retention); how many events went.
    pub fn trim_events(&self, before_ms: u64, limit: usize) -> Result<u64, StoreError> {
        match self {
            Opened::Sled(store) => store.trim_events(before_ms, limit),
            Opened::Postgres(store) => store.trim_events(before_ms, limit),
        }
    }

    /// Adds the store's own histograms to `registry`.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        match self {
            Opened::Sled(store) => store.register_metrics(registry),
            Opened::Postgres(store) => store.register_metrics(registry),
        }
    }
}
