//! What the API reads from the store, as a trait: the services see records,
//! pages and the event log, never the storage engine behind them, and a
//! read answers only once what it saw is on disk ([`ReadModel::durable`]).

use holarchy_actors::{DurableFuture, StoreError};
use holarchy_composition::approval::ApprovalRecord;
use holarchy_supervision::{
    AgentId, AgentRecord, ApprovalId, Event, EventCursor, MessageId, MessageRecord, TaskId,
    TaskRecord, UsageTotals, WaitRecord, WorkItemId, WorkItemRecord,
};
use tokio::sync::watch;

use crate::store::view::{AgentView, Beside};
use crate::store::{PgStore, SledStore};

/// The reads behind the gRPC services.
pub trait ReadModel: Send + Sync + std::fmt::Debug + 'static {
    fn agent(&self, id: AgentId) -> Result<Option<AgentRecord>, StoreError>;
    fn agent_id_by_name(&self, name: &str) -> Result<Option<AgentId>, StoreError>;
    /// Up to `limit` names starting with `prefix`, in name order, with
    /// their agents.
    fn names_from(&self, prefix: &str, limit: usize) -> Result<Vec<(String, AgentId)>, StoreError>;
    /// One page of agents after `after`, in id (creation) order.
    fn list_agents(
        &self,
        after: Option<AgentId>,
        limit: usize,
        include_private: bool,
    ) -> Result<Vec<AgentRecord>, StoreError>;
    /// One page of an agent's messages after `after`, oldest first.
    fn list_messages(
        &self,
        agent_id: AgentId,
        after: Option<MessageId>,
        limit: usize,
    ) -> Result<Vec<MessageRecord>, StoreError>;
    fn waits_of(&self, owner: AgentId) -> Result<Vec<WaitRecord>, StoreError>;
    /// The tokens the agent's turns spent, summed; `None` before any turn
    /// reported usage.
    fn usage_of(&self, agent_id: AgentId) -> Result<Option<UsageTotals>, StoreError>;
    fn work_item(&self, id: WorkItemId) -> Result<Option<WorkItemRecord>, StoreError>;
    /// A task, by id (named apart from the stores' own `task`).
    fn task_record(&self, id: TaskId) -> Result<Option<TaskRecord>, StoreError>;
    fn approval_record(&self, id: ApprovalId) -> Result<Option<ApprovalRecord>, StoreError>;
    fn work_items_of(&self, owner: AgentId) -> Result<Vec<WorkItemRecord>, StoreError>;
    /// Durable events after `cursor`, oldest first.
    fn events_after(&self, cursor: EventCursor, limit: usize) -> Result<Vec<Event>, StoreError>;
    /// The cursor of the newest durable event, as it moves.
    fn event_watermark(&self) -> watch::Receiver<EventCursor>;
    fn size_on_disk(&self) -> u64;
    /// The agent with what `GetAgent` shows beside its record, read
    /// together (one round trip on a database).
    fn agent_view(&self, id: AgentId) -> Result<Option<AgentView>, StoreError>;
    /// Each of `owners`' waits and work items, in `owners`' order: what a
    /// page of summaries shows beside the records, read together.
    fn beside(&self, owners: &[AgentId]) -> Result<Vec<Beside>, StoreError>;
    /// Bytes the store holds for the agent: its record, messages, notes,
    /// context, and its commands' records and output.
    fn agent_bytes(&self, id: AgentId) -> Result<u64, StoreError>;
    /// Which store this is and where, for an operator (no secret in it).
    fn describe(&self) -> String;
    /// Flushes and transactions since the store opened.
    fn work_done(&self) -> (u64, u64);
    /// Resolves once every write made before the call is on disk: a read
    /// answers after it, so a client never sees what a crash could undo.
    fn durable(&self) -> DurableFuture;
}

/// The reads every store answers alike: the actors' trait where it has
/// them, the store's own listing and log reads for the rest.
macro_rules! read_model {
    ($store:ty) => {
        impl ReadModel for $store {
            fn agent(&self, id: AgentId) -> Result<Option<AgentRecord>, StoreError> {
                holarchy_actors::Reads::agent(self, id)
            }

            fn agent_id_by_name(&self, name: &str) -> Result<Option<AgentId>, StoreError> {
                holarchy_actors::Reads::agent_id_by_name(self, name)
            }

            fn names_from(
                &self,
                prefix: &str,
                limit: usize,
            ) -> Result<Vec<(String, AgentId)>, StoreError> {
                <$store>::names_from(self, prefix, limit)
            }

            fn list_agents(
                &self,
                after: Option<AgentId>,
                limit: usize,
                include_private: bool,
            ) -> Result<Vec<AgentRecord>, StoreError> {
                <$store>::list_agents(self, after, limit, include_private)
            }

            fn list_messages(
                &self,
                agent_id: AgentId,
                after: Option<MessageId>,
                limit: usize,
            ) -> Result<Vec<MessageRecord>, StoreError> {
                holarchy_actors::Reads::list_messages(self, agent_id, after, limit)
            }

            fn waits_of(&self, owner: AgentId) -> Result<Vec<WaitRecord>, StoreError> {
                holarchy_actors::Reads::waits_of(self, owner)
            }

            fn usage_of(&self, agent_id: AgentId) -> Result<Option<UsageTotals>, StoreError> {
                <$store>::usage_of(self, agent_id)
            }

            fn work_item(&self, id: WorkItemId) -> Result<Option<WorkItemRecord>, StoreError> {
                holarchy_actors::Reads::work_item(self, id)
            }

            fn task_record(&self, id: TaskId) -> Result<Option<TaskRecord>, StoreError> {
                holarchy_actors::Reads::task(self, id)
            }

            fn approval_record(
                &self,
                id: ApprovalId,
            ) -> Result<Option<ApprovalRecord>, StoreError> {
                holarchy_actors::ApprovalStore::approval(self, id)
            }

            fn work_items_of(&self, owner: AgentId) -> Result<Vec<WorkItemRecord>, StoreError> {
                holarchy_actors::Reads::work_items_of(self, owner)
            }

            fn events_after(
                &self,
                cursor: EventCursor,
                limit: usize,
            ) -> Result<Vec<Event>, StoreError> {
                <$store>::events_after(self, cursor, limit)
            }

            fn event_watermark(&self) -> watch::Receiver<EventCursor> {
                <$store>::event_watermark(self)
            }

            fn size_on_disk(&self) -> u64 {
                <$store>::size_on_disk(self)
            }

            fn describe(&self) -> String {
                <$store>::describe(self)
            }

            fn agent_bytes(&self, id: AgentId) -> Result<u64, StoreError> {
                <$store>::agent_bytes(self, id)
            }

            fn agent_view(&self, id: AgentId) -> Result<Option<AgentView>, StoreError> {
                <$store>::agent_view(self, id)
            }

            fn beside(&self, owners: &[AgentId]) -> Result<Vec<Beside>, StoreError> {
                <$store>::beside(self, owners)
            }

            fn work_done(&self) -> (u64, u64) {
                <$store>::work_done(self)
            }

            fn durable(&self) -> DurableFuture {
                holarchy_actors::Store::durable(self)
            }
        }
    };
}

read_model!(SledStore);
read_model!(PgStore);
