//! Agents' memory on PostgreSQL: not yet kept. Every call fails with an
//! error that says so, until notes and their search land here.

use holarchy_actors::store::{MemoryHit, MemoryKind, MemoryNote, MemorySize, NoteDraft, Recalled};
use holarchy_actors::{MemoryStore, StoreError};
use holarchy_supervision::{AgentId, NoteId};

use super::PgStore;

/// The tables of this module.
pub(super) const TABLES: &str = "";

fn missing() -> StoreError {
    StoreError::Backend("agents' memory is not yet kept on PostgreSQL".into())
}

impl MemoryStore for PgStore {
    fn put_note(&self, _draft: &NoteDraft, _now_ms: u64) -> Result<MemoryNote, StoreError> {
        Err(missing())
    }

    fn note(&self, _agent: AgentId, _id: NoteId) -> Result<Option<MemoryNote>, StoreError> {
        Err(missing())
    }

    fn notes(
        &self,
        _agent: AgentId,
        _after: Option<NoteId>,
        _limit: usize,
    ) -> Result<Vec<MemoryNote>, StoreError> {
        Err(missing())
    }

    fn note_count(&self, _agent: AgentId) -> Result<u64, StoreError> {
        Err(missing())
    }

    fn recall(&self, _agent: AgentId, _id: &str) -> Result<Option<Recalled>, StoreError> {
        Err(missing())
    }

    fn memory_size(&self, _agent: AgentId) -> Result<MemorySize, StoreError> {
        Err(missing())
    }

    fn search_memory(
        &self,
        _agent: AgentId,
        _query: &str,
        _kinds: &[MemoryKind],
        _limit: usize,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        Err(missing())
    }

    fn delete_memory(&self, _agent: AgentId) -> Result<usize, StoreError> {
        Err(missing())
    }
}
