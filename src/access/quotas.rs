//! Namespaces' quotas: kept in the access store, so every daemon of one
//! database reads the same, and put in force in the runtime, which counts
//! against them (`holarchy_actors::namespaces`).

use std::sync::Arc;
use std::time::Duration;

use holarchy_actors::{Runtime, StoreError};
use tokio::sync::watch;

use super::{AccessStore, QuotaRecord};

/// How often the quotas are read again, so a change made on another
/// daemon of one database is in force here within this.
pub const REFRESH: Duration = Duration::from_secs(5);

/// The quotas of a daemon: where they are kept and where they hold.
#[derive(Clone)]
pub struct Quotas {
    store: Arc<dyn AccessStore>,
    runtime: Arc<Runtime>,
}

impl std::fmt::Debug for Quotas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quotas").finish_non_exhaustive()
    }
}

impl Quotas {
    pub fn new(store: Arc<dyn AccessStore>, runtime: Arc<Runtime>) -> Self {
        Self { store, runtime }
    }

    pub fn store(&self) -> &Arc<dyn AccessStore> {
        &self.store
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// Reads every quota and puts them in force; returns them. Blocks on
    /// the store.
    pub fn load(&self) -> Result<Vec<QuotaRecord>, StoreError> {
        let records = self.store.quotas()?;
        let given: Vec<(String, holarchy_actors::namespaces::Quota)> = records
            .iter()
            .map(|r| (r.namespace.clone(), r.quota))
            .collect();
        self.runtime.namespaces().set_quotas(&given);
        Ok(records)
    }

    /// Stores `record` (a quota with no bound removes the namespace's)
    /// and puts every quota in force. Blocks on the store; durable once
    /// the store's next flush resolves.
    pub fn set(&self, record: &QuotaRecord) -> Result<(), StoreError> {
        let kept = (!record.quota.is_unbounded()).then_some(record);
        self.store.put_quota(&record.namespace, kept)?;
        self.load().map(drop)
    }

    /// Reads the quotas again every [`REFRESH`] until `stop`.
    pub async fn refresh_until(self, mut stop: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                () = tokio::time::sleep(REFRESH) => {}
            }
            let quotas = self.clone();
            match tokio::task::spawn_blocking(move || quotas.load()).await {
                Ok(Ok(_)) => {}
                Ok(Err(err)) => {
                    tracing::warn!(error = %err, "cannot read the namespaces' quotas again; the last ones read hold")
                }
                Err(join) => tracing::warn!(error = %join, "reading the quotas stopped"),
            }
        }
    }
}
