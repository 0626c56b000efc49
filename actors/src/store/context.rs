//! Where an agent's running summary is kept: the summaries of its turns'
//! compacted steps, newest last. Apart from the batch path like
//! instances: written only when a turn compacts (rare), so it adds
//! nothing to the transactions every turn takes.

use holarchy_supervision::AgentId;
use serde::{Deserialize, Serialize};

use super::StoreError;

/// An agent's running summary and where it came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextRecord {
    /// Bounded ([`crate::context::MAX_RUNNING_SUMMARY_CHARS`]); the oldest
    /// part goes first.
    pub summary: String,
    /// Turns that compacted steps into it, over the agent's life.
    pub compactions: u64,
    /// The run of the newest one.
    pub run_id: String,
    /// Unix milliseconds of the newest one.
    pub updated_at_ms: u64,
}

pub trait ContextStore: Send + Sync {
    fn context_record(&self, agent_id: AgentId) -> Result<Option<ContextRecord>, StoreError>;
    /// Replaces the agent's record; durable once a later
    /// [`super::Store::durable`] resolves.
    fn put_context_record(
        &self,
        agent_id: AgentId,
        record: &ContextRecord,
    ) -> Result<(), StoreError>;
    /// Drops the agent's record (it was archived); idempotent.
    fn forget_context(&self, agent_id: AgentId) -> Result<(), StoreError>;
}
