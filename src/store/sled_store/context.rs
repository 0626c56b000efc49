//! Agents' running summaries in their own tree, one record per agent,
//! written outside the batch path (a compaction is rare and touches no
//! other record).

use holarchy_actors::{ContextRecord, ContextStore, StoreError};
use holarchy_supervision::AgentId;

use super::{backend, SledStore, CONTEXT};
use crate::store::codec::{decode, encode};

impl ContextStore for SledStore {
    fn context_record(&self, agent_id: AgentId) -> Result<Option<ContextRecord>, StoreError> {
        match self.context.get(agent_id.to_bytes()).map_err(backend)? {
            Some(bytes) => decode(CONTEXT, &bytes).map(Some),
            None => Ok(None),
        }
    }

    fn put_context_record(
        &self,
        agent_id: AgentId,
        record: &ContextRecord,
    ) -> Result<(), StoreError> {
        let value = encode(CONTEXT, record)?;
        // Counted as a write, so the next `durable()` flushes it.
        self.group.begin_write();
        let written = self
            .context
            .insert(agent_id.to_bytes(), value)
            .map_err(backend);
        self.group.end_write();
        written.map(|_| ())
    }

    fn forget_context(&self, agent_id: AgentId) -> Result<(), StoreError> {
        self.group.begin_write();
        let removed = self.context.remove(agent_id.to_bytes()).map_err(backend);
        self.group.end_write();
        removed.map(drop)
    }
}
