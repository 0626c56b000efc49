//! A store that redacts every secret from a batch before it commits it:
//! the one place all the runtime's writes pass, so no path can forget.

use std::sync::Arc;

use holarchy_supervision::workspace::Projection;
use holarchy_supervision::{
    AgentId, AgentRecord, ApprovalId, MessageId, MessageRecord, NoteId, OutputChunk, TaskId,
    TaskRecord, WaitId, WaitRecord, WorkItemId, WorkItemRecord,
};

use holarchy_composition::approval::{ApprovalRecord, ApprovalStatus};
use holarchy_composition::event::InboundEvent;
use holarchy_composition::instance::InstanceRecord;
use holarchy_composition::schedule::ScheduleState;

use super::Secrets;
use crate::store::{
    ApprovalStore, Batch, ContextRecord, ContextStore, DurableFuture, InboundStore, InstanceStore,
    MemoryHit, MemoryKind, MemoryNote, MemorySize, MemoryStore, NoteDraft, Reads, Recalled,
    RecoveryInput, ReplayGuard, SharedInput, Store, StoreError, StoredEvent, TurnInputRecord,
    TurnInputs,
};

/// Wraps the runtime's store; reads pass through unchanged.
pub struct RedactingStore {
    inner: Arc<dyn Store>,
    secrets: Arc<Secrets>,
}

impl std::fmt::Debug for RedactingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedactingStore")
            .field("secrets", &self.secrets)
            .finish_non_exhaustive()
    }
}

impl RedactingStore {
    pub fn new(inner: Arc<dyn Store>, secrets: Arc<Secrets>) -> Self {
        Self { inner, secrets }
    }
}

impl InstanceStore for RedactingStore {
    fn instance(&self, name: &str) -> Result<Option<InstanceRecord>, StoreError> {
        self.inner.instance(name)
    }

    fn instances(&self) -> Result<Vec<InstanceRecord>, StoreError> {
        self.inner.instances()
    }

    // An instance is the operator's own text, checked at apply: there is
    // nothing of an agent's in it to redact.
    fn swap_instance(
        &self,
        name: &str,
        expect: Option<&str>,
        new: Option<&InstanceRecord>,
    ) -> Result<(), StoreError> {
        self.inner.swap_instance(name, expect, new)
    }
}

// An inbound event is kept as it arrived, so a replay compares and routes
// the very bytes that were signed; what reaches the log and the agent (its
// message, `event_received`) passes `commit`, which redacts.
// An approval holds a tool's input and output, which an agent and its
// programs wrote: redacted like every batch before it is stored.
impl ApprovalStore for RedactingStore {
    fn approval(&self, id: ApprovalId) -> Result<Option<ApprovalRecord>, StoreError> {
        self.inner.approval(id)
    }

    fn approvals(
        &self,
        agent: Option<AgentId>,
        limit: usize,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        self.inner.approvals(agent, limit)
    }

    fn open_approvals(
        &self,
        agent: Option<AgentId>,
        limit: usize,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        self.inner.open_approvals(agent, limit)
    }

    fn insert_approval(&self, record: &ApprovalRecord) -> Result<(), StoreError> {
        self.inner.insert_approval(&self.redacted(record))
    }

    fn swap_approval(
        &self,
        expect: &ApprovalStatus,
        new: &ApprovalRecord,
    ) -> Result<(), StoreError> {
        self.inner.swap_approval(expect, &self.redacted(new))
    }
}

impl RedactingStore {
    fn redacted(&self, record: &ApprovalRecord) -> ApprovalRecord {
        let mut record = record.clone();
        self.secrets.redact(&mut record.input);
        match &mut record.status {
            ApprovalStatus::Approved { output, .. } => self.secrets.redact(output),
            ApprovalStatus::Denied { reason } => self.secrets.redact(reason),
            ApprovalStatus::Pending | ApprovalStatus::Running => {}
        }
        record
    }
}

// A summary is written from what a turn's tools returned and what a model
// wrote about them: redacted like every batch.
impl ContextStore for RedactingStore {
    fn context_record(&self, agent_id: AgentId) -> Result<Option<ContextRecord>, StoreError> {
        self.inner.context_record(agent_id)
    }

    fn put_context_record(
        &self,
        agent_id: AgentId,
        record: &ContextRecord,
    ) -> Result<(), StoreError> {
        let mut record = record.clone();
        self.secrets.redact(&mut record.summary);
        self.inner.put_context_record(agent_id, &record)
    }

    fn forget_context(&self, agent_id: AgentId) -> Result<(), StoreError> {
        self.inner.forget_context(agent_id)
    }
}

// A recorded input holds what the brain was shown, which may quote a
// secret an agent saw: redacted as a note is. The shared part is the
// operator's own role and the runtime's catalog.
impl TurnInputs for RedactingStore {
    fn put_turn_input(
        &self,
        agent_id: AgentId,
        run_id: holarchy_supervision::RunId,
        record: &TurnInputRecord,
        shared: Option<&SharedInput>,
        keep: usize,
    ) -> Result<(), StoreError> {
        let mut record = record.clone();
        self.secrets.redact(&mut record.agent);
        self.secrets.redact(&mut record.context);
        self.inner
            .put_turn_input(agent_id, run_id, &record, shared, keep)
    }

    fn turn_input(
        &self,
        agent_id: AgentId,
        run_id: holarchy_supervision::RunId,
    ) -> Result<Option<TurnInputRecord>, StoreError> {
        self.inner.turn_input(agent_id, run_id)
    }

    fn shared_input(&self, digest: &str) -> Result<Option<SharedInput>, StoreError> {
        self.inner.shared_input(digest)
    }

    fn forget_turn_inputs(&self, agent_id: AgentId) -> Result<(), StoreError> {
        self.inner.forget_turn_inputs(agent_id)
    }
}

// A note is an agent's own text, which may quote a secret it saw: redacted
// before it is stored (and so before it is indexed).
impl MemoryStore for RedactingStore {
    fn put_note(&self, draft: &NoteDraft, now_ms: u64) -> Result<MemoryNote, StoreError> {
        let mut draft = draft.clone();
        self.secrets.redact(&mut draft.text);
        if let Some(key) = &mut draft.key {
            self.secrets.redact(key);
        }
        for tag in &mut draft.tags {
            self.secrets.redact(tag);
        }
        self.inner.put_note(&draft, now_ms)
    }

    fn note(&self, agent: AgentId, id: NoteId) -> Result<Option<MemoryNote>, StoreError> {
        self.inner.note(agent, id)
    }

    fn notes(
        &self,
        agent: AgentId,
        after: Option<NoteId>,
        limit: usize,
    ) -> Result<Vec<MemoryNote>, StoreError> {
        self.inner.notes(agent, after, limit)
    }

    fn note_count(&self, agent: AgentId) -> Result<u64, StoreError> {
        self.inner.note_count(agent)
    }

    fn recall(&self, agent: AgentId, id: &str) -> Result<Option<Recalled>, StoreError> {
        self.inner.recall(agent, id)
    }

    fn memory_size(&self, agent: AgentId) -> Result<MemorySize, StoreError> {
        self.inner.memory_size(agent)
    }

    fn search_memory(
        &self,
        agent: AgentId,
        query: &str,
        kinds: &[MemoryKind],
        limit: usize,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        self.inner.search_memory(agent, query, kinds, limit)
    }

    fn delete_memory(&self, agent: AgentId) -> Result<usize, StoreError> {
        self.inner.delete_memory(agent)
    }
}

impl InboundStore for RedactingStore {
    fn put_inbound(&self, instance: &str, event: &InboundEvent) -> Result<StoredEvent, StoreError> {
        self.inner.put_inbound(instance, event)
    }

    fn put_inbound_unless_replayed(
        &self,
        instance: &str,
        event: &InboundEvent,
        guard: ReplayGuard<'_>,
    ) -> Result<StoredEvent, StoreError> {
        self.inner
            .put_inbound_unless_replayed(instance, event, guard)
    }

    fn inbound(
        &self,
        instance: &str,
        dedupe_key: &str,
    ) -> Result<Option<InboundEvent>, StoreError> {
        self.inner.inbound(instance, dedupe_key)
    }

    fn schedule_state(&self, instance: &str, schedule: &str) -> Result<ScheduleState, StoreError> {
        self.inner.schedule_state(instance, schedule)
    }

    fn put_schedule_state(
        &self,
        instance: &str,
        schedule: &str,
        state: ScheduleState,
    ) -> Result<(), StoreError> {
        self.inner.put_schedule_state(instance, schedule, state)
    }

    fn forget_instance(&self, instance: &str) -> Result<(), StoreError> {
        self.inner.forget_instance(instance)
    }
}

impl Reads for RedactingStore {
    fn agent(&self, id: AgentId) -> Result<Option<AgentRecord>, StoreError> {
        self.inner.agent(id)
    }

    fn agent_id_by_name(&self, name: &str) -> Result<Option<AgentId>, StoreError> {
        self.inner.agent_id_by_name(name)
    }

    fn message(
        &self,
        agent_id: AgentId,
        id: MessageId,
    ) -> Result<Option<MessageRecord>, StoreError> {
        self.inner.message(agent_id, id)
    }

    fn message_id_by_dedupe_key(
        &self,
        agent_id: AgentId,
        key: &str,
    ) -> Result<Option<MessageId>, StoreError> {
        self.inner.message_id_by_dedupe_key(agent_id, key)
    }

    fn list_messages(
        &self,
        agent_id: AgentId,
        after: Option<MessageId>,
        limit: usize,
    ) -> Result<Vec<MessageRecord>, StoreError> {
        self.inner.list_messages(agent_id, after, limit)
    }

    fn last_settled_messages(
        &self,
        agent_id: AgentId,
        limit: usize,
    ) -> Result<Vec<MessageRecord>, StoreError> {
        self.inner.last_settled_messages(agent_id, limit)
    }

    fn last_run_starts(&self, agent_id: AgentId, scan: usize) -> Result<Vec<u64>, StoreError> {
        self.inner.last_run_starts(agent_id, scan)
    }

    fn pending_messages(&self, agent_id: AgentId) -> Result<Vec<MessageRecord>, StoreError> {
        self.inner.pending_messages(agent_id)
    }

    fn recovery_input(&self) -> Result<RecoveryInput, StoreError> {
        self.inner.recovery_input()
    }

    fn task(&self, id: TaskId) -> Result<Option<TaskRecord>, StoreError> {
        self.inner.task(id)
    }

    fn workspaces(&self, agent_id: AgentId) -> Result<Option<Projection>, StoreError> {
        self.inner.workspaces(agent_id)
    }

    fn worktree_tasks(&self) -> Result<Vec<TaskRecord>, StoreError> {
        self.inner.worktree_tasks()
    }

    fn tasks_of(&self, owner: AgentId) -> Result<Vec<TaskRecord>, StoreError> {
        self.inner.tasks_of(owner)
    }

    fn children_of(&self, supervisor: AgentId) -> Result<Vec<AgentId>, StoreError> {
        self.inner.children_of(supervisor)
    }

    fn public_agent_ids(&self) -> Result<Vec<AgentId>, StoreError> {
        self.inner.public_agent_ids()
    }

    fn wait(&self, id: WaitId) -> Result<Option<WaitRecord>, StoreError> {
        self.inner.wait(id)
    }

    fn waits_of(&self, owner: AgentId) -> Result<Vec<WaitRecord>, StoreError> {
        self.inner.waits_of(owner)
    }

    fn wait_by_token_hash(&self, token_hash: &[u8; 32]) -> Result<Option<WaitId>, StoreError> {
        self.inner.wait_by_token_hash(token_hash)
    }

    fn work_item(&self, id: WorkItemId) -> Result<Option<WorkItemRecord>, StoreError> {
        self.inner.work_item(id)
    }

    fn output_after(
        &self,
        task_id: TaskId,
        offset: u64,
        max_bytes: usize,
    ) -> Result<Vec<OutputChunk>, StoreError> {
        self.inner.output_after(task_id, offset, max_bytes)
    }

    fn work_items_of(&self, owner: AgentId) -> Result<Vec<WorkItemRecord>, StoreError> {
        self.inner.work_items_of(owner)
    }
}

impl Store for RedactingStore {
    fn commit(&self, batch: Batch) -> Result<(), StoreError> {
        let mut batch = batch;
        self.secrets.redact_batch(&mut batch);
        self.inner.commit(batch)
    }

    fn agent_ends(&self) -> u64 {
        self.inner.agent_ends()
    }

    fn durable(&self) -> DurableFuture {
        self.inner.durable()
    }

    fn commit_grouped(&self, batch: Batch) -> crate::store::CommitFuture {
        let mut batch = batch;
        self.secrets.redact_batch(&mut batch);
        self.inner.commit_grouped(batch)
    }
}
