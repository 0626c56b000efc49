//! A store's whole content as typed records: what one store hands out and
//! another takes in when `holarchy store copy` moves a data directory into
//! PostgreSQL.
//!
//! One [`Record`] per stored row, index trees left out: each store derives
//! its own indexes (pending messages, tasks by owner, open approvals) from
//! the records. Event runs travel as their encoded bytes, so cursors keep
//! their numbers and a subscriber's saved cursor still means the same
//! event.

use holarchy_actors::store::{ContextRecord, MemoryNote};
use holarchy_composition::approval::ApprovalRecord;
use holarchy_composition::event::InboundEvent;
use holarchy_composition::instance::InstanceRecord;
use holarchy_composition::schedule::ScheduleState;
use holarchy_supervision::cleanup::CleanupIntent;
use holarchy_supervision::workspace::Projection;
use holarchy_supervision::{
    AgentId, AgentRecord, EventCursor, MessageId, MessageRecord, OutputChunk, TaskId, TaskRecord,
    UsageTotals, WaitId, WaitRecord, WorkItemRecord,
};

/// Where a record goes: one table each, listed in the order a dump hands
/// them out (every record of a table together).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    Agents,
    Names,
    Messages,
    Dedupe,
    Tasks,
    Waits,
    Triggers,
    WorkItems,
    Output,
    Cleanups,
    Workspaces,
    Usage,
    Events,
    Instances,
    Inbound,
    Replays,
    Schedules,
    Approvals,
    Context,
    Notes,
    NoteCounts,
    NoteTrees,
    Tokens,
    Audit,
    Quotas,
}

impl Table {
    pub const ALL: [Table; 25] = [
        Table::Agents,
        Table::Names,
        Table::Messages,
        Table::Dedupe,
        Table::Tasks,
        Table::Waits,
        Table::Triggers,
        Table::WorkItems,
        Table::Output,
        Table::Cleanups,
        Table::Workspaces,
        Table::Usage,
        Table::Events,
        Table::Instances,
        Table::Inbound,
        Table::Replays,
        Table::Schedules,
        Table::Approvals,
        Table::Context,
        Table::Notes,
        Table::NoteCounts,
        Table::NoteTrees,
        Table::Tokens,
        Table::Audit,
        Table::Quotas,
    ];

    /// What an operator reads in a copy's report.
    pub fn name(self) -> &'static str {
        match self {
            Table::Agents => "agents",
            Table::Names => "names",
            Table::Messages => "messages",
            Table::Dedupe => "dedupe keys",
            Table::Tasks => "tasks",
            Table::Waits => "waits",
            Table::Triggers => "trigger tokens",
            Table::WorkItems => "work items",
            Table::Output => "output chunks",
            Table::Cleanups => "cleanups",
            Table::Workspaces => "workspace projections",
            Table::Usage => "usage totals",
            Table::Events => "event runs",
            Table::Instances => "instances",
            Table::Inbound => "inbound events",
            Table::Replays => "webhook bodies seen",
            Table::Schedules => "schedule states",
            Table::Approvals => "approvals",
            Table::Context => "context summaries",
            Table::Notes => "memory notes",
            Table::NoteCounts => "note counts",
            Table::NoteTrees => "note tree counts",
            Table::Tokens => "scoped tokens",
            Table::Audit => "audit entries",
            Table::Quotas => "namespace quotas",
        }
    }
}

/// One stored row.
#[derive(Debug, Clone)]
pub enum Record {
    Agent(Box<AgentRecord>),
    Name(String, AgentId),
    Message(Box<MessageRecord>),
    Dedupe {
        agent_id: AgentId,
        key: String,
        message_id: MessageId,
    },
    Task(Box<TaskRecord>),
    Wait(Box<WaitRecord>),
    Trigger {
        token_hash: [u8; 32],
        wait_id: WaitId,
    },
    WorkItem(Box<WorkItemRecord>),
    Output {
        task_id: TaskId,
        chunk: OutputChunk,
    },
    Cleanup(CleanupIntent),
    Workspaces(Projection),
    Usage(AgentId, UsageTotals),
    /// Consecutive events `first..=last`, encoded as both stores keep them.
    EventRun {
        first: EventCursor,
        last: EventCursor,
        encoded: Vec<u8>,
    },
    Instance(Box<InstanceRecord>),
    Inbound {
        instance: String,
        event: Box<InboundEvent>,
    },
    /// A webhook body's digest and the (encoded) delivery it first came
    /// with: both stores keep the same small value.
    Replay {
        instance: String,
        digest: String,
        encoded: Vec<u8>,
    },
    Schedule {
        instance: String,
        schedule: String,
        state: ScheduleState,
    },
    Approval(Box<ApprovalRecord>),
    Context(AgentId, ContextRecord),
    Note(Box<MemoryNote>),
    NoteCount {
        agent_id: AgentId,
        tree: AgentId,
        notes: u64,
    },
    NoteTree {
        tree: AgentId,
        notes: u64,
    },
    Token(Box<crate::access::TokenRecord>),
    Audit(Box<crate::access::AuditEntry>),
    Quota(Box<crate::access::QuotaRecord>),
}

impl Record {
    pub fn table(&self) -> Table {
        match self {
            Record::Agent(_) => Table::Agents,
            Record::Name(..) => Table::Names,
            Record::Message(_) => Table::Messages,
            Record::Dedupe { .. } => Table::Dedupe,
            Record::Task(_) => Table::Tasks,
            Record::Wait(_) => Table::Waits,
            Record::Trigger { .. } => Table::Triggers,
            Record::WorkItem(_) => Table::WorkItems,
            Record::Output { .. } => Table::Output,
            Record::Cleanup(_) => Table::Cleanups,
            Record::Workspaces(_) => Table::Workspaces,
            Record::Usage(..) => Table::Usage,
            Record::EventRun { .. } => Table::Events,
            Record::Instance(_) => Table::Instances,
            Record::Inbound { .. } => Table::Inbound,
            Record::Replay { .. } => Table::Replays,
            Record::Schedule { .. } => Table::Schedules,
            Record::Approval(_) => Table::Approvals,
            Record::Context(..) => Table::Context,
            Record::Note(_) => Table::Notes,
            Record::NoteCount { .. } => Table::NoteCounts,
            Record::NoteTree { .. } => Table::NoteTrees,
            Record::Token(_) => Table::Tokens,
            Record::Audit(_) => Table::Audit,
            Record::Quota(_) => Table::Quotas,
        }
    }
}
