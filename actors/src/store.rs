//! The storage the actors need, as a trait defined where it is used. The
//! daemon implements it with sled or PostgreSQL; tests use those same
//! implementations.
//!
//! [`Store`] is made of parts, so that a caller's signature says what it
//! may do: [`Reads`] of the tree's records, one trait per side store
//! (approvals, instances, inbound events, context records, memory, the
//! inputs of recorded turns), and the
//! commits. Each part is `Send + Sync` because a door to it is held across
//! awaits.
//!
//! Writes of records go through [`Store::commit`], which applies a
//! [`Batch`] of records and events atomically; only the executor
//! (`crate::apply`) calls it. A commit is not yet durable: callers that are
//! about to acknowledge something to a client await [`Store::durable`],
//! which shares one flush among every concurrent caller (group commit).
//! [`Store::commit_grouped`] also shares the transaction among concurrent
//! callers that can wait asynchronously.

use std::future::Future;
use std::pin::Pin;

pub use approval::ApprovalStore;
pub use context::{ContextRecord, ContextStore};
pub use inbound::{InboundStore, ReplayGuard, StoredEvent};
pub use instance::InstanceStore;
pub use memory::{
    check_search, MemoryHit, MemoryInputError, MemoryKind, MemoryNote, MemorySize, MemoryStore,
    NoteDraft, Recalled, RecalledToolCall,
};
pub use turn_input::{SharedInput, TurnInputRecord, TurnInputs};

mod approval;
mod context;
mod inbound;
mod instance;
pub mod memory;
pub mod turn_input;

pub use holarchy_supervision::effect::{Batch, Write};

use holarchy_supervision::cleanup::CleanupIntent;
use holarchy_supervision::workspace::Projection;
use holarchy_supervision::{
    AgentId, AgentRecord, MessageId, MessageRecord, OutputChunk, TaskId, TaskRecord, WaitId,
    WaitRecord, WorkItemId, WorkItemRecord,
};

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another agent already holds this name.
    #[error("an agent named `{0}` already exists")]
    NameTaken(String),
    /// A supervised agent was to be created under a supervisor that is not
    /// live: no private agent may exist without a live supervisor.
    #[error("supervisor {0} is not live")]
    SupervisorGone(AgentId),
    /// A value was written by a newer (or unknown) format.
    #[error("record in `{tree}` has format version {version}, which this build cannot read")]
    UnsupportedVersion { tree: &'static str, version: u8 },
    /// A value or key could not be decoded.
    #[error("corrupt record in `{tree}`: {detail}")]
    Corrupt { tree: &'static str, detail: String },
    /// The storage engine failed (I/O).
    #[error("storage failure: {0}")]
    Backend(String),
    /// A guarded write found the record no longer in the state it needs
    /// (a timer already fired or cancelled); nothing was written.
    #[error("precondition failed: {0}")]
    Precondition(String),
    /// The store was closed: the daemon is shutting down.
    #[error("the store is closed")]
    Closed,
    /// A read stopped past its budget of CPU (a search of too many common
    /// words); the caller asks again for less.
    #[error("{0}")]
    OverBudget(String),
}

/// A future that resolves once everything committed before it was created
/// is on disk.
pub type DurableFuture = Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send>>;

/// A future that resolves once a batch handed to
/// [`Store::commit_grouped`] is applied, with the flush that will make it
/// durable (already asked for).
pub type CommitFuture = Pin<Box<dyn Future<Output = Result<DurableFuture, StoreError>> + Send>>;

/// What recovery reads in one pass.
#[derive(Debug, Default)]
pub struct RecoveryInput {
    pub agents: Vec<AgentRecord>,
    /// Messages queued or being handled.
    pub pending: Vec<MessageRecord>,
    /// Tasks still running.
    pub running_tasks: Vec<TaskRecord>,
    /// Cleanups a crash interrupted.
    pub intents: Vec<CleanupIntent>,
    /// Waits still armed.
    pub armed_waits: Vec<WaitRecord>,
    /// Records that could not be read: left where they are, kept out of
    /// the tree's recovery and named to the operator.
    pub damaged: Vec<DamagedRecord>,
}

/// A record a daemon start could not read (bytes flipped or cut on disk,
/// or written by a format this build does not know). One damaged record
/// must not keep a daemon of healthy agents from starting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedRecord {
    /// The tree (table) it lies in.
    pub tree: &'static str,
    /// Its key, in hex, for an operator restoring it from a backup.
    pub key: String,
    /// The agent it belongs to, when its key or an index says so.
    pub agent_id: Option<AgentId>,
    /// Why it could not be read.
    pub reason: String,
}

/// The records of the supervision tree, read only: what a caller may do
/// with the store when its signature names only this. Writes of these
/// records are batches that the executor (`crate::apply`) commits.
pub trait Reads: Send + Sync {
    fn agent(&self, id: AgentId) -> Result<Option<AgentRecord>, StoreError>;
    fn agent_id_by_name(&self, name: &str) -> Result<Option<AgentId>, StoreError>;
    fn message(
        &self,
        agent_id: AgentId,
        id: MessageId,
    ) -> Result<Option<MessageRecord>, StoreError>;
    fn message_id_by_dedupe_key(
        &self,
        agent_id: AgentId,
        key: &str,
    ) -> Result<Option<MessageId>, StoreError>;
    /// One page of an agent's messages after `after`, oldest first.
    fn list_messages(
        &self,
        agent_id: AgentId,
        after: Option<MessageId>,
        limit: usize,
    ) -> Result<Vec<MessageRecord>, StoreError>;
    /// The agent's newest `limit` settled messages (no longer queued or
    /// being handled), oldest of them first. Pending messages are passed
    /// over by key, unread: however deep the queue, the newest turns are
    /// found, and the queue's bound bounds what is passed over.
    fn last_settled_messages(
        &self,
        agent_id: AgentId,
        limit: usize,
    ) -> Result<Vec<MessageRecord>, StoreError>;
    /// When the turns of the agent's newest `scan` messages started (the
    /// time in each started message's last run id), newest first. Reads
    /// one message at a time: memory stays bounded however large the
    /// messages are.
    fn last_run_starts(&self, agent_id: AgentId, scan: usize) -> Result<Vec<u64>, StoreError>;
    /// The agent's pending messages (queued or being handled), oldest first.
    fn pending_messages(&self, agent_id: AgentId) -> Result<Vec<MessageRecord>, StoreError>;
    /// Everything recovery needs.
    fn recovery_input(&self) -> Result<RecoveryInput, StoreError>;
    fn task(&self, id: TaskId) -> Result<Option<TaskRecord>, StoreError>;
    /// The agent's workspace projection; `None` if it has only its
    /// `agent_home`, active.
    fn workspaces(&self, agent_id: AgentId) -> Result<Option<Projection>, StoreError>;
    /// Every task that owns a worktree not yet removed, running or not.
    fn worktree_tasks(&self) -> Result<Vec<TaskRecord>, StoreError>;
    /// Every task the agent owns, oldest first.
    fn tasks_of(&self, owner: AgentId) -> Result<Vec<TaskRecord>, StoreError>;
    /// The live agents this agent supervises.
    fn children_of(&self, supervisor: AgentId) -> Result<Vec<AgentId>, StoreError>;
    /// Every public agent's id, live or ended, in id order: keys only, no
    /// record decoded. What a restarted root partition walks for its share.
    fn public_agent_ids(&self) -> Result<Vec<AgentId>, StoreError>;
    fn wait(&self, id: WaitId) -> Result<Option<WaitRecord>, StoreError>;
    /// Every wait the agent owns, oldest first.
    fn waits_of(&self, owner: AgentId) -> Result<Vec<WaitRecord>, StoreError>;
    /// The wait whose trigger token hashes to `token_hash`, armed or not.
    fn wait_by_token_hash(&self, token_hash: &[u8; 32]) -> Result<Option<WaitId>, StoreError>;
    fn work_item(&self, id: WorkItemId) -> Result<Option<WorkItemRecord>, StoreError>;
    /// A command's retained output from `offset` on, at most about
    /// `max_bytes` (whole chunks; at least one).
    fn output_after(
        &self,
        task_id: TaskId,
        offset: u64,
        max_bytes: usize,
    ) -> Result<Vec<OutputChunk>, StoreError>;
    /// Every work item the agent owns, oldest first.
    fn work_items_of(&self, owner: AgentId) -> Result<Vec<WorkItemRecord>, StoreError>;
    /// The agent's current work focus: its one active item.
    fn work_focus(&self, owner: AgentId) -> Result<Option<WorkItemRecord>, StoreError> {
        Ok(self
            .work_items_of(owner)?
            .into_iter()
            .find(|w| w.status == holarchy_supervision::WorkStatus::Active))
    }
}

/// Everything the actors read and write: the records' reads, the side
/// stores, and the commits of batches. The runtime holds it whole in one
/// place ([`crate::Ctx`]); everyone else reaches it through a door that
/// names one of its parts.
pub trait Store:
    Reads
    + InstanceStore
    + InboundStore
    + ApprovalStore
    + ContextStore
    + MemoryStore
    + TurnInputs
    + Send
    + Sync
    + 'static
{
    /// Applies a batch atomically. Durable only once a later
    /// [`Store::durable`] resolves; the store flushes soon on its own too.
    fn commit(&self, batch: Batch) -> Result<(), StoreError>;
    /// Resolves when every commit made before this call is flushed.
    fn durable(&self) -> DurableFuture;
    /// A count that moves before any commit that may end an agent (see
    /// [`Batch::may_end_an_agent`]) is applied. Whoever reads the same
    /// count before its own commit and after a later step knows that no
    /// agent ended in between, without a read that would wait behind the
    /// store's writer.
    fn agent_ends(&self) -> u64;
    /// Applies a batch like [`Store::commit`] (atomically, with the same
    /// errors), but waits without holding the caller's thread, and may
    /// apply it in one transaction with batches other callers hand over
    /// meanwhile, which makes many small concurrent commits cheaper.
    /// Resolves, once applied, to the flush that covers it (as
    /// [`Store::durable`] would), so the caller can work while it runs.
    /// The default commits inline.
    fn commit_grouped(&self, batch: Batch) -> CommitFuture {
        let applied = self.commit(batch).map(|()| self.durable());
        Box::pin(std::future::ready(applied))
    }
}

#[cfg(test)]
mod tests {
    use holarchy_supervision::LifecycleState;

    use super::*;

    fn agent(state: LifecycleState) -> AgentRecord {
        AgentRecord {
            state,
            ..AgentRecord::public("test", 1)
        }
    }

    #[test]
    fn only_a_write_that_leaves_an_agent_not_live_may_end_it() {
        let ends = |write: Write| Batch::new().write(write).may_end_an_agent();
        for state in [LifecycleState::Archived, LifecycleState::Failed] {
            assert!(ends(Write::PutAgent(agent(state))), "{state:?}");
            assert!(ends(Write::PutLiveAgent(agent(state))), "{state:?}");
            // A new record ends no agent that was running.
            assert!(!ends(Write::CreateAgent(agent(state))), "{state:?}");
        }
        for state in [LifecycleState::Active, LifecycleState::Paused] {
            assert!(!ends(Write::PutAgent(agent(state))), "{state:?}");
            assert!(!ends(Write::PutLiveAgent(agent(state))), "{state:?}");
        }
        let mixed = Batch::new()
            .write(Write::PutAgent(agent(LifecycleState::Active)))
            .write(Write::PutAgent(agent(LifecycleState::Archived)));
        assert!(mixed.may_end_an_agent());
        assert!(!Batch::new().may_end_an_agent());
    }
}
