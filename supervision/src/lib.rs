//! The pure model of holarchy: identities, profiles, durable records and the
//! rules that decide over them. Nothing here does I/O or knows of ractor,
//! tonic or sled, so every rule can be property-tested in microseconds.
//!
//! # Layout
//! - [`ids`]: compact, sortable identifiers (agent, message, run) and event cursors.
//! - [`profile`]: `Profile {visibility, ownership, tool_families}` and its presets.
//! - [`record`]: the records the store keeps (agents, messages) and their states.
//! - [`event`]: the append-only event log entries.
//! - [`effect`]: record writes and events as data, committed as one batch.
//! - [`admission`]: who may put a message on which agent's queue.
//! - [`restart`]: OTP-style restart intensity for supervisors.
//! - [`spawn`]: who may spawn which preset, and the relations of a child.
//! - [`task`]: tasks, the first kind being a parent's handle on a child.
//! - [`cleanup`]: which agents and tasks a subtree cleanup stops.
//! - [`wait`]: timers and external triggers that wake an agent.
//! - [`work`]: work items and their plans; one active focus per agent.
//! - [`recovery`]: what a restarting daemon respawns and requeues.
//! - [`plan`]: pure planners of structural procedures, returning effects.
//! - [`brain`]: brain configurations (scripted, command, openai, anthropic).
//! - [`composed`]: an agent's role, skills and instance limits.
//! - [`bounds`]: input bounds and checks, shared by the API and the actors.
//! - [`patch`]: unified diffs, parsed and applied to text (the `ApplyPatch` tool).
//! - [`workspace`]: attached workspaces, the active one, child projection modes.
//! - [`usage`]: tokens model brains spent, per turn and per agent.
//! - [`network`]: what network an agent's commands may reach.
//! - [`namespace`]: the partitions of agents scoped callers see.
//! - [`labels`]: operators' `key=value` tags on agents, and selectors.

pub mod admission;
pub mod bounds;
pub mod brain;
pub mod cleanup;
pub mod composed;
pub mod effect;
pub mod event;
pub mod ids;
pub mod labels;
pub mod namespace;
pub mod network;
pub mod patch;
pub mod plan;
pub mod profile;
pub mod record;
pub mod recovery;
pub mod restart;
pub mod spawn;
pub mod task;
pub mod usage;
pub mod wait;
pub mod work;
pub mod workspace;

pub use admission::{admit, Refusal, Target};
pub use brain::BrainConfig;
pub use composed::{Composition, Role, ToolLimits};
pub use event::{slot_of, Event, EventKind, RunOutcome};
pub use ids::{
    AgentId, ApprovalId, CleanupId, EventCursor, IdParseError, InboundId, MessageId, NoteId,
    ReplayId, RunId, Slot, TaskId, WaitId, WorkItemId,
};
pub use network::NetworkPolicy;
pub use profile::{Ownership, Preset, Profile, ToolFamilies, ToolFamily, Visibility};
pub use record::{
    AgentRecord, LifecycleState, MessageEvent, MessageRecord, MessageStatus, Provenance,
};
pub use task::{ExitInfo, OutputChunk, ProcessRef, Stream, TaskKind, TaskRecord, TaskStatus};
pub use usage::{TokenUsage, UsageTotals};
pub use wait::{WaitKind, WaitRecord, WaitStatus};
pub use work::{PlanStep, StepStatus, WorkItemRecord, WorkStatus};
