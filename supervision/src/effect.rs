//! Effects as data: the record writes and events a decision produces,
//! handed to a store to land together or not at all. The rules that decide
//! them live beside the records; the store that applies them (sled today)
//! knows how, not why.

use crate::cleanup::CleanupIntent;
use crate::workspace::Projection;
use crate::{
    AgentId, AgentRecord, CleanupId, EventKind, MessageRecord, OutputChunk, TaskId, TaskRecord,
    TokenUsage, WaitRecord, WorkItemRecord,
};

/// One record write inside a [`Batch`].
#[derive(Debug, Clone)]
pub enum Write {
    /// A new agent: claims its name (if any) or fails the whole batch with
    /// `NameTaken`; a supervised one also needs its supervisor
    /// live, or the batch fails with `SupervisorGone`.
    CreateAgent(AgentRecord),
    /// An update of an existing agent. The store keeps its supervisor's
    /// index of live children in step.
    PutAgent(AgentRecord),
    /// An update that applies only while the stored agent is live: fails
    /// the batch with a precondition error otherwise, so a change
    /// made outside the agent's actor never revives an archived agent.
    PutLiveAgent(AgentRecord),
    /// A message put back to queued after its turn was cut short, but only
    /// if it is still being handled and its agent is still live: a cleanup
    /// that cancelled it meanwhile wins. Skipped silently otherwise.
    Requeue(MessageRecord),
    /// A task, new or updated.
    PutTask(TaskRecord),
    /// A wait, new or updated; a trigger's token hash is indexed.
    PutWait(WaitRecord),
    /// A wait ending (a timer firing, a trigger cancelled): fails the whole
    /// batch with a precondition error unless the stored wait is
    /// still armed, so a wait ends once.
    EndWait(WaitRecord),
    /// A task ending: fails the whole batch with
    /// a precondition error unless the stored task is still
    /// running, so a cleanup's `stopped` is never overwritten.
    EndTask(TaskRecord),
    /// A work item, new or updated.
    PutWorkItem(WorkItemRecord),
    /// A piece of a command's output.
    PutOutput { task_id: TaskId, chunk: OutputChunk },
    /// Drops the output chunk at `offset` (the ring buffer is full).
    DropOutput { task_id: TaskId, offset: u64 },
    /// A cleanup about to stop actors.
    PutIntent(CleanupIntent),
    /// A cleanup whose actors are gone.
    DeleteIntent(CleanupId),
    /// A message, new or updated. The store keeps the pending index and the
    /// dedupe index in step with the record.
    PutMessage(MessageRecord),
    /// An agent's workspace projection, new or changed.
    PutWorkspaces(Projection),
    /// Adds one turn's token usage to the agent's totals (a tree of their
    /// own, read by `GetAgent`), in the same transaction as the turn's end.
    AddUsage {
        agent_id: AgentId,
        usage: TokenUsage,
    },
    /// Purges an archived agent (`agent delete`): its record, its name
    /// (free again), its usage totals and its workspaces. Fails the whole
    /// batch with a precondition error unless the stored agent is
    /// archived, so nothing live or still being cleaned up as live is
    /// ever removed. Its messages, tasks, waits and work items stay, no
    /// longer reachable (every read of them starts from the agent); its
    /// history stays in the event log.
    DeleteAgent(AgentRecord),
}

/// Record writes and events that land together or not at all.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    pub writes: Vec<Write>,
    pub events: Vec<(Option<AgentId>, EventKind)>,
}

impl Batch {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn write(mut self, write: Write) -> Self {
        self.writes.push(write);
        self
    }

    pub fn event(mut self, agent_id: AgentId, kind: EventKind) -> Self {
        self.events.push((Some(agent_id), kind));
        self
    }

    /// Writes `task` with a `task_updated` event for its owner, telling
    /// its new status and `detail`.
    pub fn put_task(self, task: TaskRecord, detail: String) -> Self {
        let kind = EventKind::TaskUpdated {
            task_id: task.id,
            kind: task.kind.name().into(),
            status: task.status,
            detail,
        };
        self.event(task.owner_agent_id, kind)
            .write(Write::PutTask(task))
    }

    /// Writes a newly queued `message` with the `message_queued` event
    /// that tells its agent's followers.
    pub fn put_queued(self, message: MessageRecord) -> Self {
        let kind = EventKind::MessageQueued {
            message_id: message.id,
            provenance: message.provenance,
        };
        self.event(message.agent_id, kind)
            .write(Write::PutMessage(message))
    }

    /// Adds `events` for `agent_id`.
    pub fn events(mut self, agent_id: AgentId, events: Vec<EventKind>) -> Self {
        self.events
            .extend(events.into_iter().map(|kind| (Some(agent_id), kind)));
        self
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.events.is_empty()
    }

    /// Whether applying this batch may end an agent (archive it or fail
    /// it): what the store's count of agents ended counts.
    pub fn may_end_an_agent(&self) -> bool {
        self.writes.iter().any(|write| match write {
            Write::PutAgent(record) | Write::PutLiveAgent(record) => !record.state.is_live(),
            _ => false,
        })
    }
}

/// What a decision needs done beyond record writes, carried out by the
/// runtime's executor (`actors::apply`), before or after the batch
/// commits as [`Directive::before_commit`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directive {
    /// End a command's process group, if the group is still the one the
    /// record names (a recycled pid is never signalled). Done before the
    /// batch commits: a record saying a command ended while it still runs
    /// would be a lie.
    KillGroup(crate::ProcessRef),
    /// Hand a message the batch queued to its agent's actor, if it runs.
    /// After the commit: the actor reads the message from the store.
    Wake {
        agent_id: AgentId,
        message_id: crate::MessageId,
    },
    /// Tell the followers of a task's output that it moved (new output,
    /// or the task ended). After the commit, so they read what changed.
    NotifyOutput(TaskId),
    /// Take an ended wait's actor out of the directory: nothing routes to
    /// it any more, and its exit is not taken for a failure.
    ForgetWait(crate::WaitId),
    /// Take an ended command's actor out of the directory.
    ForgetCommand(TaskId),
}

impl Directive {
    /// Whether it is carried out before the batch commits (otherwise
    /// after, and only if the batch landed).
    pub const fn before_commit(&self) -> bool {
        match self {
            Directive::KillGroup(_) => true,
            Directive::Wake { .. }
            | Directive::NotifyOutput(_)
            | Directive::ForgetWait(_)
            | Directive::ForgetCommand(_) => false,
        }
    }
}

/// A decision, as data: the writes to commit together, and the directives
/// around them.
#[derive(Debug, Default, Clone)]
pub struct Plan {
    pub batch: Batch,
    pub directives: Vec<Directive>,
}

impl Plan {
    /// A plan that only writes.
    pub fn writes(batch: Batch) -> Self {
        Self {
            batch,
            directives: Vec::new(),
        }
    }

    /// Folds `other` in after this plan's writes and directives, so both
    /// land in one batch.
    pub fn absorb(&mut self, other: Plan) {
        self.batch.writes.extend(other.batch.writes);
        self.batch.events.extend(other.batch.events);
        self.directives.extend(other.directives);
    }

    /// Adds a directive.
    pub fn then(mut self, directive: Directive) -> Self {
        self.directives.push(directive);
        self
    }

    /// The message the plan wakes an agent for, if any.
    pub fn woken(&self) -> Option<crate::MessageId> {
        self.directives.iter().find_map(|d| match d {
            Directive::Wake { message_id, .. } => Some(*message_id),
            Directive::KillGroup(_)
            | Directive::NotifyOutput(_)
            | Directive::ForgetWait(_)
            | Directive::ForgetCommand(_) => None,
        })
    }

    /// Wakes `agent_id` for `message_id` once the batch lands, when there
    /// is a message.
    pub fn wake(self, agent_id: AgentId, message_id: Option<crate::MessageId>) -> Self {
        match message_id {
            Some(message_id) => self.then(Directive::Wake {
                agent_id,
                message_id,
            }),
            None => self,
        }
    }
}
