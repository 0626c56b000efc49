//! The event log: an append-only, densely numbered history of what happened,
//! which clients follow with a cursor. Each event is also numbered within
//! its agent's slot ([`crate::Slot`]), densely: the key a cluster of
//! daemons will route and fence the log by.

use serde::{Deserialize, Serialize};

use crate::ids::{AgentId, EventCursor, MessageId, RunId, Slot, TaskId, WaitId};
use crate::record::{LifecycleState, Provenance};
use crate::task::TaskStatus;
use crate::wait::WaitStatus;

/// One entry of the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub cursor: EventCursor,
    /// Its number within its slot ([`Event::slot`]): 1 for the slot's
    /// first event, one more for each next, in commit order. 0 for an
    /// event written before events were numbered by slot.
    pub seq: u64,
    pub at_ms: u64,
    pub agent_id: Option<AgentId>,
    pub kind: EventKind,
}

impl Event {
    /// The slot it is numbered in: its agent's; the first slot for an
    /// event of no agent.
    pub fn slot(&self) -> Slot {
        slot_of(self.agent_id)
    }
}

/// The slot the events of `agent_id` are numbered in.
pub fn slot_of(agent_id: Option<AgentId>) -> Slot {
    agent_id.map_or(Slot::FIRST, AgentId::slot)
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RunOutcome {
    Completed,
    Failed,
    /// The daemon stopped or crashed mid-turn; the message goes back on the
    /// queue.
    Interrupted,
    /// An operator aborted it; the message is not handled.
    Aborted,
}

impl RunOutcome {
    pub const fn name(self) -> &'static str {
        match self {
            RunOutcome::Completed => "completed",
            RunOutcome::Failed => "failed",
            RunOutcome::Interrupted => "interrupted",
            RunOutcome::Aborted => "aborted",
        }
    }
}

/// What happened. Tool inputs and outputs are JSON text, kept as strings so
/// the log does not depend on a self-describing encoding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventKind {
    AgentCreated {
        name: Option<String>,
        preset: Option<String>,
        lineage_parent_agent_id: Option<AgentId>,
        supervisor_agent_id: Option<AgentId>,
    },
    AgentStateChanged {
        state: LifecycleState,
        reason: String,
    },
    AgentRestarted {
        reason: String,
    },
    MessageQueued {
        message_id: MessageId,
        provenance: Provenance,
    },
    RunStarted {
        run_id: RunId,
        message_id: MessageId,
    },
    /// One decision of a turn: what the brain said, and how many tools it
    /// called (their `tool_called` events follow).
    StepDecided {
        run_id: RunId,
        step: u32,
        reply: Option<String>,
        tool_calls: u32,
    },
    ToolCalled {
        run_id: RunId,
        tool: String,
        input: String,
        output: String,
        is_error: bool,
    },
    Replied {
        run_id: RunId,
        message_id: MessageId,
        text: String,
    },
    RunFinished {
        run_id: RunId,
        message_id: MessageId,
        outcome: RunOutcome,
        detail: String,
    },
    TaskUpdated {
        task_id: TaskId,
        kind: String,
        status: TaskStatus,
        detail: String,
    },
    CleanupStarted {
        reason: String,
        agents: u32,
        tasks: u32,
    },
    WaitUpdated {
        wait_id: WaitId,
        kind: String,
        status: WaitStatus,
    },
    WorkItemUpdated {
        work_item_id: crate::WorkItemId,
        status: String,
        objective: String,
    },
    /// Attached, detached or activated; `detail` says which and where.
    WorkspaceChanged {
        workspace_id: String,
        change: String,
        detail: String,
    },
    /// An instance created, updated or deleted; `digest` is its spec's.
    InstanceChanged {
        name: String,
        change: String,
        digest: String,
    },
    /// An inbound event stored and queued for `instance`'s agent, in the
    /// same batch as its message. `kind` is the contract's `type`. Last,
    /// so logs written before it still decode.
    EventReceived {
        event_id: crate::InboundId,
        instance: String,
        source: String,
        kind: String,
        subject: String,
        dedupe_key: String,
    },
    /// The decision one turn of an instance's agent (or of a descendant)
    /// recorded, in the same commit as its `run_finished`. `kind` is one
    /// of the decision vocabulary's names (`no_op`, `invoke_skill`,
    /// `comment`, `escalate`, `wait`, `tool_calls`); `explicit` says the
    /// brain gave it rather than the runtime reading it off the turn.
    /// Last, so logs written before it still decode.
    Decided {
        run_id: RunId,
        /// The instance the agent runs, or descends from.
        instance: String,
        kind: String,
        reason: String,
        target: Option<String>,
        idempotency_key: String,
        requires_approval: bool,
        explicit: bool,
    },
    /// Tokens one turn's model calls spent (its decisions and any
    /// compaction), in the same commit as its `run_finished`; absent for
    /// brains that report none (scripted, command). Last, so logs written
    /// before it still decode.
    TurnUsage {
        run_id: RunId,
        prompt_tokens: u64,
        completion_tokens: u64,
        /// Of `prompt_tokens`, those read from the provider's prompt cache.
        cached_tokens: u64,
    },
    /// An operator's write to the agent, done: who (as the audit trail
    /// names callers: `uid:1000`, `token:<id>`, `oidc:<sub>`) and what
    /// (`AgentService/PauseAgent`). A sent message's is in the commit of
    /// its `message_queued`; other actions' follow theirs. The audit
    /// trail keeps refusals too. Last, so logs written before it still
    /// decode.
    OperatorAction {
        caller: String,
        action: String,
    },
}

/// Who made an operator's write, and which: what an `operator_action`
/// event says, for a write whose own commit carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActedBy {
    /// As the audit trail names callers: `uid:1000`, `token:<id>`.
    pub caller: String,
    /// The method: `AgentService/CreateAgent`.
    pub action: String,
}

impl From<ActedBy> for EventKind {
    fn from(by: ActedBy) -> Self {
        EventKind::OperatorAction {
            caller: by.caller,
            action: by.action,
        }
    }
}

impl EventKind {
    pub const fn name(&self) -> &'static str {
        match self {
            EventKind::AgentCreated { .. } => "agent_created",
            EventKind::AgentStateChanged { .. } => "agent_state_changed",
            EventKind::AgentRestarted { .. } => "agent_restarted",
            EventKind::MessageQueued { .. } => "message_queued",
            EventKind::RunStarted { .. } => "run_started",
            EventKind::StepDecided { .. } => "step_decided",
            EventKind::ToolCalled { .. } => "tool_called",
            EventKind::Replied { .. } => "replied",
            EventKind::RunFinished { .. } => "run_finished",
            EventKind::TaskUpdated { .. } => "task_updated",
            EventKind::CleanupStarted { .. } => "cleanup_started",
            EventKind::WaitUpdated { .. } => "wait_updated",
            EventKind::WorkItemUpdated { .. } => "work_item_updated",
            EventKind::WorkspaceChanged { .. } => "workspace_changed",
            EventKind::InstanceChanged { .. } => "instance_changed",
            EventKind::EventReceived { .. } => "event_received",
            EventKind::Decided { .. } => "decided",
            EventKind::TurnUsage { .. } => "turn_usage",
            EventKind::OperatorAction { .. } => "operator_action",
        }
    }
}

impl EventKind {
    /// Calls `f` on every free text the event carries, so a redactor can
    /// rewrite it. Exhaustive on purpose: a new variant must decide which of
    /// its fields can hold text an agent or a program wrote.
    pub fn texts_mut(&mut self, f: &mut dyn FnMut(&mut String)) {
        match self {
            EventKind::AgentCreated { name, preset, .. } => {
                name.iter_mut().chain(preset.iter_mut()).for_each(f);
            }
            EventKind::AgentStateChanged { reason, .. } | EventKind::AgentRestarted { reason } => {
                f(reason)
            }
            EventKind::MessageQueued { .. }
            | EventKind::RunStarted { .. }
            | EventKind::TurnUsage { .. } => {}
            EventKind::StepDecided { reply, .. } => reply.iter_mut().for_each(f),
            EventKind::ToolCalled {
                tool,
                input,
                output,
                ..
            } => {
                f(tool);
                f(input);
                f(output);
            }
            EventKind::Replied { text, .. } => f(text),
            EventKind::RunFinished { detail, .. } | EventKind::TaskUpdated { detail, .. } => {
                f(detail)
            }
            EventKind::CleanupStarted { reason, .. } => f(reason),
            EventKind::WaitUpdated { kind, .. } => f(kind),
            EventKind::WorkItemUpdated {
                status, objective, ..
            } => {
                f(status);
                f(objective);
            }
            EventKind::WorkspaceChanged {
                workspace_id,
                change,
                detail,
            } => {
                f(workspace_id);
                f(change);
                f(detail);
            }
            // Names and digests the runtime checked: no free text.
            EventKind::InstanceChanged { .. } => {}
            // Who, as the gate identified them, and a method's name.
            EventKind::OperatorAction { .. } => {}
            // The subject is taken from a sender's payload; the type and
            // key are named by the sender too. Only the instance and the
            // source are the runtime's own.
            EventKind::EventReceived {
                kind,
                subject,
                dedupe_key,
                ..
            } => {
                f(kind);
                f(subject);
                f(dedupe_key);
            }
            // A brain writes all three when it gives the decision; the
            // kind and the instance are checked names.
            EventKind::Decided {
                reason,
                target,
                idempotency_key,
                ..
            } => {
                f(reason);
                if let Some(target) = target {
                    f(target);
                }
                f(idempotency_key);
            }
        }
    }
}
