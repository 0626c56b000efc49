//! Namespaces' quotas: kept in the access store, so every daemon of one
//! database reads the same, and put in force in the runtime, which counts
//! against them (`holarchy_actors::namespaces`). The store bytes of the
//! namespaces with a bound on them are measured here, from the store.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use holarchy_actors::{Runtime, StoreError};
use tokio::sync::watch;

use super::{AccessStore, QuotaRecord};
use crate::api::read_model::ReadModel;

/// How often the quotas are read again, so a change made on another
/// daemon of one database is in force here within this; also the
/// shortest time between two measures of store bytes.
pub const REFRESH: Duration = Duration::from_secs(5);

/// A measure of store bytes reads every agent record and the records of
/// the bounded namespaces' agents: the next one waits this many times as
/// long as the last took, so measuring takes at most a twentieth of one
/// core however large the store.
const MEASURE_SPACING: u32 = 20;

/// Agents read per page while measuring.
const PAGE: usize = 1000;

/// The quotas of a daemon: where they are kept and where they hold.
#[derive(Clone)]
pub struct Quotas {
    store: Arc<dyn AccessStore>,
    runtime: Arc<Runtime>,
    reads: Arc<dyn ReadModel>,
}

impl std::fmt::Debug for Quotas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quotas").finish_non_exhaustive()
    }
}

impl Quotas {
    pub fn new(
        store: Arc<dyn AccessStore>,
        runtime: Arc<Runtime>,
        reads: Arc<dyn ReadModel>,
    ) -> Self {
        Self {
            store,
            runtime,
            reads,
        }
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
        let eased = self.runtime.namespaces().set_quotas(&given);
        self.runtime.wake_deferred(&eased);
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

    /// Measures the store bytes of every namespace with a bound on them,
    /// and records each with its namespace. Blocks on the store, reading
    /// every agent record once; returns how many namespaces it measured.
    pub fn measure(&self) -> Result<usize, StoreError> {
        let namespaces = self.runtime.namespaces();
        let mut totals: HashMap<String, u64> = namespaces
            .reports()
            .into_iter()
            .filter(|r| r.quota.store_bytes.is_some())
            .map(|r| (r.name, 0))
            .collect();
        if totals.is_empty() {
            return Ok(0);
        }
        let mut after = None;
        loop {
            let page = self.reads.list_agents(after, PAGE, true)?;
            let Some(last) = page.last() else { break };
            after = Some(last.id);
            for agent in &page {
                if let Some(total) = totals.get_mut(&agent.namespace) {
                    *total += self.reads.agent_bytes(agent.id)?;
                }
            }
        }
        let at_ms = super::audit::now_ms();
        for (name, bytes) in &totals {
            namespaces.get(name).set_store_bytes(*bytes, at_ms);
        }
        Ok(totals.len())
    }

    /// Reads the quotas again every [`REFRESH`], and measures store bytes
    /// as often as [`MEASURE_SPACING`] allows, until `stop`.
    pub async fn refresh_until(self, mut stop: watch::Receiver<bool>) {
        let mut next_measure = Instant::now();
        loop {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                () = tokio::time::sleep(REFRESH) => {}
            }
            let quotas = self.clone();
            let measure = Instant::now() >= next_measure;
            let done = tokio::task::spawn_blocking(move || {
                quotas.load()?;
                if !measure {
                    return Ok(None);
                }
                let began = Instant::now();
                quotas.measure().map(|_| Some(began.elapsed()))
            })
            .await;
            match done {
                Ok(Ok(Some(took))) => {
                    next_measure = Instant::now() + took * MEASURE_SPACING;
                }
                Ok(Ok(None)) => {}
                Ok(Err(err)) => {
                    tracing::warn!(error = %err, "cannot read the namespaces' quotas or measure their store bytes again; the last ones read hold")
                }
                Err(join) => tracing::warn!(error = %join, "reading the quotas stopped"),
            }
        }
    }
}
