//! The durable records: what an agent is and what is on its queue. The store
//! persists these as they are; the actors keep only ids and counters in RAM.

use serde::{Deserialize, Serialize};

use crate::ids::{AgentId, MessageId, RunId, WaitId};
use crate::profile::Profile;

/// Where an agent is in its life. Activity (idle or running a turn) is not
/// part of it: that lives in the actor and is lost, on purpose, on restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LifecycleState {
    /// Takes messages and runs turns.
    Active,
    /// Takes messages but starts no turn until resumed.
    Paused,
    /// Its supervisor gave up restarting it; its actor is not running.
    Failed,
    /// Ended for good; kept for audit, never respawned.
    Archived,
}

impl LifecycleState {
    pub const fn name(self) -> &'static str {
        match self {
            LifecycleState::Active => "active",
            LifecycleState::Paused => "paused",
            LifecycleState::Failed => "failed",
            LifecycleState::Archived => "archived",
        }
    }

    /// Whether a daemon start brings this agent's actor back.
    pub const fn is_live(self) -> bool {
        match self {
            LifecycleState::Active | LifecycleState::Paused => true,
            LifecycleState::Failed | LifecycleState::Archived => false,
        }
    }
}

/// One agent as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRecord {
    pub id: AgentId,
    /// Unique among agents; public agents always have one.
    pub name: Option<String>,
    pub profile: Profile,
    /// Who created this agent, for audit. Never changes.
    pub lineage_parent_agent_id: Option<AgentId>,
    /// Who owns this agent's lifecycle now: result routing and cleanup.
    /// `None` for self-owned agents, even when they have a lineage parent.
    pub supervisor_agent_id: Option<AgentId>,
    pub state: LifecycleState,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
}

/// Why a message is on an agent's queue, and who put it there. Admission
/// ([`crate::admit`]) and the brain both read it; it never changes the
/// agent's tool surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Provenance {
    /// An operator, through the gateway.
    Operator,
    /// The agent's supervisor, delegating or following up.
    Parent { agent_id: AgentId },
    /// A supervised child reporting its result.
    ChildResult { agent_id: AgentId },
    /// A machine-facing trigger delivery.
    Trigger { wait_id: WaitId },
    /// A timer the agent set (`Sleep`) fired.
    Timer { wait_id: WaitId },
    /// The agent queued it to itself for a later turn (`Enqueue`).
    SelfQueued,
    /// A task the agent owns ended (a command that outlived its yield).
    TaskResult { task_id: crate::TaskId },
    /// The runtime itself (timers, task results, recovery notices).
    Runtime,
    /// The agent that created this (public) agent, bootstrapping it; not
    /// parent supervision.
    Creator { agent_id: AgentId },
}

impl Provenance {
    pub const fn kind(&self) -> &'static str {
        match self {
            Provenance::Operator => "operator",
            Provenance::Parent { .. } => "parent",
            Provenance::ChildResult { .. } => "child_result",
            Provenance::Trigger { .. } => "trigger",
            Provenance::Timer { .. } => "timer",
            Provenance::SelfQueued => "self",
            Provenance::TaskResult { .. } => "task_result",
            Provenance::Runtime => "runtime",
            Provenance::Creator { .. } => "creator",
        }
    }
}

/// Where a message is in its handling. `Queued` and `Handling` are pending:
/// a daemon start puts them back on the queue (at-least-once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MessageStatus {
    Queued,
    Handling {
        run_id: RunId,
    },
    Handled {
        run_id: RunId,
    },
    Failed {
        run_id: RunId,
    },
    /// Never handled: its agent was cleaned up first.
    Cancelled,
    /// Its turn was aborted by an operator; not handled, not retried.
    Aborted {
        run_id: RunId,
    },
}

impl MessageStatus {
    pub const fn name(&self) -> &'static str {
        match self {
            MessageStatus::Queued => "queued",
            MessageStatus::Handling { .. } => "handling",
            MessageStatus::Handled { .. } => "handled",
            MessageStatus::Failed { .. } => "failed",
            MessageStatus::Cancelled => "cancelled",
            MessageStatus::Aborted { .. } => "aborted",
        }
    }

    pub const fn is_pending(&self) -> bool {
        match self {
            MessageStatus::Queued | MessageStatus::Handling { .. } => true,
            MessageStatus::Handled { .. }
            | MessageStatus::Failed { .. }
            | MessageStatus::Cancelled
            | MessageStatus::Aborted { .. } => false,
        }
    }

    pub const fn run_id(&self) -> Option<RunId> {
        match self {
            MessageStatus::Queued | MessageStatus::Cancelled => None,
            MessageStatus::Handling { run_id }
            | MessageStatus::Handled { run_id }
            | MessageStatus::Failed { run_id }
            | MessageStatus::Aborted { run_id } => Some(*run_id),
        }
    }
}

/// One message on an agent's queue, and what came of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageRecord {
    pub id: MessageId,
    pub agent_id: AgentId,
    pub provenance: Provenance,
    pub body: String,
    /// Set by at-least-once senders: a second message with the same key on
    /// the same agent is the first one.
    pub dedupe_key: Option<String>,
    pub status: MessageStatus,
    /// The brain's reply, once handled.
    pub reply: Option<String>,
    /// How many turns started on this message; above one means a daemon
    /// crash interrupted an earlier turn and the message was handled again.
    pub attempts: u32,
    pub created_at_ms: u64,
}

impl MessageRecord {
    /// A new message, queued and not yet handled.
    pub fn queued(
        agent_id: AgentId,
        provenance: Provenance,
        body: String,
        dedupe_key: Option<String>,
        created_at_ms: u64,
    ) -> Self {
        Self {
            id: MessageId::generate(),
            agent_id,
            provenance,
            body,
            dedupe_key,
            status: MessageStatus::Queued,
            reply: None,
            attempts: 0,
            created_at_ms,
        }
    }
}
