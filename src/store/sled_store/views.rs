//! The reads of [`crate::store::view`] on sled: each part read from memory
//! or a page, one after another, as there is no round trip to save.

use holarchy_actors::{MemoryStore, Reads, StoreError};
use holarchy_supervision::AgentId;

use super::SledStore;
use crate::store::view::{AgentView, Beside};

impl SledStore {
    /// The agent `id` with its usage, memory size, waits and work items.
    pub fn agent_view(&self, id: AgentId) -> Result<Option<AgentView>, StoreError> {
        let Some(record) = Reads::agent(self, id)? else {
            return Ok(None);
        };
        Ok(Some(AgentView {
            record,
            usage: self.usage_of(id)?,
            memory: self.memory_size(id),
            waits: Reads::waits_of(self, id)?,
            work_items: Reads::work_items_of(self, id)?,
        }))
    }

    /// Each of `owners`' waits and work items, in `owners`' order.
    pub fn beside(&self, owners: &[AgentId]) -> Result<Vec<Beside>, StoreError> {
        owners
            .iter()
            .map(|owner| {
                Ok((
                    Reads::waits_of(self, *owner)?,
                    Reads::work_items_of(self, *owner)?,
                ))
            })
            .collect()
    }
}
