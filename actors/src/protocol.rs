//! The messages actors exchange, and the data they carry. Data only: no
//! actor, no store, no behaviour, so every layer can name a message type
//! without depending on the actor that handles it.

use std::time::Duration;

use holarchy_supervision::{
    AgentId, AgentRecord, ExitInfo, LifecycleState, MessageId, Provenance, Refusal, RunId, Stream,
    TaskId, WaitId,
};
use ractor::RpcReplyPort;
use serde_json::Value;

use crate::store::StoreError;

// ---- agents ----

/// A message on its way onto an agent's queue.
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub provenance: Provenance,
    pub body: String,
    pub dedupe_key: Option<String>,
    /// Events logged in the same commit as the message, for its agent, and
    /// only if it is queued (a duplicate logs nothing): an inbound event's
    /// `event_received` is in the log exactly when its message is queued.
    pub events: Vec<holarchy_supervision::EventKind>,
    /// The span of the call that sent it, when spans are exported: the
    /// parent of the turn it starts. In memory only.
    pub cause: Option<tracing::Span>,
}

/// A message that is on the queue (and, once the reply is sent, durable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    pub message_id: MessageId,
    /// The dedupe key matched an earlier message; nothing new was queued.
    pub duplicate: bool,
}

/// Why a message did not join the queue.
#[derive(Debug, thiserror::Error)]
pub enum DeliverError {
    #[error(transparent)]
    Invalid(#[from] holarchy_supervision::bounds::InvalidInput),
    #[error("agent {0} not found")]
    NotFound(AgentId),
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("agent {agent_id} is {why}: its actor is not running")]
    NotRunning { agent_id: AgentId, why: NotRunning },
    #[error("agent queue is full ({limit} messages waiting)")]
    QueueFull { limit: usize },
    #[error(transparent)]
    Quota(#[from] crate::namespaces::QuotaError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the runtime did not answer: {0}")]
    Unavailable(String),
}

/// When a delivery is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ack {
    /// Once the message is on disk: what every single delivery waits for.
    Durable,
    /// Once the message is on the queue, in memory. Only for a caller that
    /// waits for one flush after a whole batch before it answers anyone.
    Applied,
}

/// Why an agent that exists has no actor to take a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotRunning {
    /// Live in the store, between a failure and its restart: retry.
    Restarting,
    /// Its actor is going away right now: retry.
    Stopping,
    /// Its supervisor gave up on it, or it was archived: do not retry.
    Ended(LifecycleState),
}

impl std::fmt::Display for NotRunning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotRunning::Restarting => f.write_str("restarting"),
            NotRunning::Stopping => f.write_str("stopping"),
            NotRunning::Ended(state) => f.write_str(state.name()),
        }
    }
}

#[derive(Debug)]
pub struct TurnDone {
    pub run_id: RunId,
    pub outcome: TurnOutcome,
    /// The turn's span, when spans are exported: its end (the commit of
    /// its writes) is recorded under it. In memory only.
    pub span: Option<tracing::Span>,
}

#[derive(Debug)]
pub enum AgentMsg {
    Deliver {
        message: NewMessage,
        ack: Ack,
        reply: RpcReplyPort<Result<Delivered, DeliverError>>,
    },
    TurnDone(Box<TurnDone>),
    /// A message someone else already wrote to the store for this agent
    /// (a child's result): put it on the queue.
    Wake(MessageId),
    /// Lets a held agent start turns, after merging messages that reached
    /// the store while it was being respawned; also how the turn gate
    /// wakes an agent parked at it (with nothing to merge).
    Release {
        pending: Vec<MessageId>,
    },
    /// The turn pace allows a turn again (`--max-turns-per-minute`, or
    /// the instance's `max_turns_per_hour`).
    PaceElapsed,
    /// The agent's instance was applied again: its hourly turn limit, from
    /// now on.
    Recomposed {
        max_turns_per_hour: Option<u32>,
    },
    /// Operator control: not a message on the queue, acted on at once.
    Control {
        action: Control,
        reply: RpcReplyPort<Result<ControlOutcome, ControlError>>,
    },
}

/// Start-up arguments: the record and the queue rebuilt from the store.
#[derive(Debug)]
pub struct AgentArgs {
    pub record: AgentRecord,
    pub queue: Vec<MessageId>,
    /// Start no turn until [`AgentMsg::Release`]: set while a supervisor
    /// brings a whole subtree back, so no turn changes the tree mid-way.
    pub held: bool,
    /// Where the agent publishes its queue and turns; its directory entry
    /// holds the same.
    pub live: std::sync::Arc<crate::live::LiveView>,
    /// Its namespace's quota and counts; its directory entry holds the
    /// same.
    pub namespace: std::sync::Arc<crate::namespaces::NamespaceUse>,
}

/// What an operator can do to a running agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Keep taking messages, start no turn.
    Pause,
    Resume,
    /// Cancel the turn in flight (if `run_id` is given, only if it is still
    /// that one); the message is recorded as aborted and the agent paused.
    Abort {
        run_id: Option<RunId>,
    },
}

/// The agent after a control action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlOutcome {
    pub state: LifecycleState,
    pub aborted_run: Option<RunId>,
}

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("agent {0} not found")]
    NotFound(AgentId),
    #[error("agent {0} is private: control it through its supervisor's task handle")]
    Private(AgentId),
    #[error("agent {agent_id} is {why}: its actor is not running")]
    NotRunning { agent_id: AgentId, why: NotRunning },
    #[error("no run is in progress")]
    NoRun,
    #[error("run {given} is no longer the current run (current: {})", current.map_or("none".to_owned(), |r| r.to_string()))]
    StaleRun {
        given: RunId,
        current: Option<RunId>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the agent did not answer: {0}")]
    Unavailable(String),
}

/// How a turn came out.
#[derive(Debug)]
pub enum TurnOutcome {
    Decided {
        reply: Option<String>,
        /// Per step: the brain's reply and the results of its tool calls.
        steps: Vec<(Option<String>, Vec<ToolResult>)>,
        done: bool,
        /// The brain still asked for tools at the last step it was allowed
        /// (`--max-steps-per-turn` or its own `max_steps`): the turn ended
        /// there, and its record says so.
        step_limit: Option<u32>,
        /// Set for the agents that log a decision per turn: an instance's
        /// agent and its descendants.
        decision: Option<TurnDecision>,
    },
    BrainFailed(String),
}

/// What the end of a turn records its decision from.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnDecision {
    /// The instance the agent runs, or descends from.
    pub instance: String,
    /// The brain's last explicit decision of the turn, as JSON text; none:
    /// the decision is derived from what the turn did.
    pub explicit: Option<String>,
}

/// The outcome of one tool call, as the brain and the event log see it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub tool: String,
    pub input: CallInput,
    /// What the tool returned, or its error (`{"error": .., "kind": ..}`).
    /// Held as JSON for the whole turn: brains and placeholders read it as
    /// it is; only the event log takes it as text.
    pub output: Value,
    pub is_error: bool,
}

/// A call's input as a turn keeps it. Within its bound it stays JSON;
/// over it, only the head of its text is kept, which is no longer JSON,
/// so a brain sees no input for that call.
#[derive(Debug, Clone, PartialEq)]
pub enum CallInput {
    Whole(Value),
    /// The head of the input's text and a note of its full size.
    Cut(String),
}

impl CallInput {
    /// The input as JSON, unless it was cut.
    pub fn value(&self) -> Option<&Value> {
        match self {
            CallInput::Whole(value) => Some(value),
            CallInput::Cut(_) => None,
        }
    }

    /// The input as the event log stores it.
    pub fn text(&self) -> String {
        match self {
            CallInput::Whole(value) => value.to_string(),
            CallInput::Cut(text) => text.clone(),
        }
    }

    /// Bytes of [`CallInput::text`], what a turn's budget charges.
    pub fn text_len(&self) -> usize {
        match self {
            CallInput::Whole(value) => crate::limits::json_len(value),
            CallInput::Cut(text) => text.len(),
        }
    }
}

// ---- tasks, waits, commands ----

/// What operators and tests can see of a running task actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSnapshot {
    pub task_id: TaskId,
    pub owner_agent_id: AgentId,
}

#[derive(Debug)]
pub enum TaskMsg {
    Snapshot(RpcReplyPort<TaskSnapshot>),
}

/// What operators and tests can see of a running wait actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitSnapshot {
    pub wait_id: WaitId,
    pub owner_agent_id: AgentId,
}

#[derive(Debug)]
pub enum WaitMsg {
    Fire,
    Snapshot(RpcReplyPort<WaitSnapshot>),
}

/// Why a command's stdin did not take a piece of input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdinRefused {
    /// The command ended, or closed its stdin.
    Ended,
    /// Input sent before is still unread: the pipe's buffer is full.
    Full,
}

#[derive(Debug)]
pub enum CommandMsg {
    /// A piece of output; the reply says it is stored (backpressure).
    Output(Stream, Vec<u8>, RpcReplyPort<()>),
    Eof(Stream),
    Exited(ExitInfo),
    Input(Vec<u8>, RpcReplyPort<Result<(), StdinRefused>>),
    /// SIGTERM to the unit (passed on to the command), and SIGHUP after
    /// `grace` (the unit kills the whole tree at once).
    Stop {
        grace: Duration,
        reply: RpcReplyPort<()>,
    },
    Kill,
}

// ---- the gateway ----

#[derive(Debug)]
pub enum GatewayMsg {
    /// An operator's message for an agent.
    Ingress {
        agent_id: AgentId,
        body: String,
        dedupe_key: Option<String>,
        ack: Ack,
        reply: RpcReplyPort<Result<Delivered, DeliverError>>,
        /// See [`NewMessage::cause`].
        cause: Option<tracing::Span>,
        /// See [`NewMessage::events`]: who sent it, for the log.
        events: Vec<holarchy_supervision::EventKind>,
    },
}

// ---- the scheduler ----

/// What operators and tests can see of the schedule ingress.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchedulerSnapshot {
    /// Schedules across every instance, at the last scan.
    pub schedules: usize,
    /// Slots fired since the scheduler started.
    pub fired: u64,
    /// The earliest next slot, ms since the epoch.
    pub next_slot_ms: Option<u64>,
}

#[derive(Debug)]
pub enum SchedulerMsg {
    /// Fire what is due and set the next wake-up: sent by the timer, at
    /// start, and when an instance is applied or deleted.
    Scan,
    /// A firing ended; `retry` asks for a scan soon.
    Fired {
        /// Instance, schedule id, slot.
        firing: (String, String, u64),
        ok: bool,
        retry: bool,
    },
    Snapshot(RpcReplyPort<SchedulerSnapshot>),
}
