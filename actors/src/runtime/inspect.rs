//! What operators read of an agent's mind: its memory (and the notes they
//! write into it), the context its brain would see now and the tools it
//! would be offered. Searches score and contexts tokenize on the CPU, so
//! each runs off the async workers.

use std::time::Duration;

use holarchy_supervision::{AgentId, AgentRecord, NoteId};

use super::bounded::{bounded_blocking, Bounded};
use super::handle::Runtime;
use crate::compose::{self, RoleView};
use crate::context::{self, Assembled};
use crate::store::{
    ContextRecord, MemoryHit, MemoryKind, MemoryNote, MemorySize, NoteDraft, StoreError,
};
use crate::tools::{self, Catalog};

/// The context an agent's brain would see beside its next message.
#[derive(Debug)]
pub struct ContextPreview {
    pub role: Option<RoleView>,
    pub assembled: Assembled,
    /// Its running summary's record (default: never compacted).
    pub stored: ContextRecord,
}

impl Runtime {
    /// How long an operator's read of an agent's mind may take.
    fn read_deadline(&self) -> Duration {
        self.ctx().config.call_timeout
    }

    pub async fn search_memory(
        &self,
        agent: AgentId,
        query: String,
        kinds: Vec<MemoryKind>,
        limit: usize,
    ) -> Result<Vec<MemoryHit>, Bounded<StoreError>> {
        let ctx = self.ctx().clone();
        bounded_blocking(self.read_deadline(), move || {
            ctx.memory().search_memory(agent, &query, &kinds, limit)
        })
        .await
    }

    /// How much the agent's memory holds. On the caller's worker: two
    /// lookups for an agent with no memory (most of them), and a count of
    /// its index entries for one with some.
    pub fn memory_size(&self, agent: AgentId) -> Result<MemorySize, StoreError> {
        self.ctx().memory().memory_size(agent)
    }

    /// A page of the agent's notes after `after`, and how many it keeps.
    pub async fn notes(
        &self,
        agent: AgentId,
        after: Option<NoteId>,
        limit: usize,
    ) -> Result<(Vec<MemoryNote>, u64), Bounded<StoreError>> {
        let ctx = self.ctx().clone();
        bounded_blocking(self.read_deadline(), move || {
            let memory = ctx.memory();
            Ok((
                memory.notes(agent, after, limit)?,
                memory.note_count(agent)?,
            ))
        })
        .await
    }

    /// Writes an operator's note; returns once it is on disk.
    pub async fn write_note(&self, draft: NoteDraft) -> Result<MemoryNote, Bounded<StoreError>> {
        let ctx = self.ctx().clone();
        // A write waits as long as any operator's change may.
        let limit = self.change_deadline();
        let note = bounded_blocking(limit, move || {
            ctx.memory().put_note(&draft, crate::now_ms())
        })
        .await?;
        match tokio::time::timeout(limit, crate::apply::durable(self.ctx())).await {
            Ok(flushed) => flushed.map_err(Bounded::Failed)?,
            Err(_) => return Err(Bounded::TimedOut(limit)),
        }
        Ok(note)
    }

    /// What `record`'s brain would see now, assembled as a turn assembles
    /// it.
    pub async fn context_preview(
        &self,
        record: AgentRecord,
    ) -> Result<ContextPreview, Bounded<StoreError>> {
        let ctx = self.ctx().clone();
        bounded_blocking(self.read_deadline(), move || {
            let mut role = record
                .composition
                .as_deref()
                .map(|stored| compose::current(ctx.instances(), stored))
                .as_ref()
                .and_then(compose::role);
            let assembled = context::bounded(&ctx, &record, None, role.as_mut())?;
            let stored = ctx
                .context_records()
                .context_record(record.id)?
                .unwrap_or_default();
            Ok(ContextPreview {
                role,
                assembled,
                stored,
            })
        })
        .await
    }

    /// The tools `record`'s brain would be offered now, its MCP servers'
    /// included. A server that cannot be reached is listed as unavailable;
    /// each start is bounded by that server's own timeout.
    pub async fn tool_catalog(&self, record: &AgentRecord) -> Catalog {
        tools::catalog(self.ctx(), record.profile, &record.mcp_servers).await
    }
}
