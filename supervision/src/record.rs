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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// What decides its turns; children inherit their creator's.
    pub brain: crate::BrainConfig,
    /// For a child spawned with `context: "fork"`: the view it inherited
    /// from its parent (work item, plan, recent turns), as JSON text.
    pub forked_context: Option<String>,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
    /// Role, skills and limits, for an agent that runs an instance or
    /// descends from one. Boxed: most agents have none.
    pub composition: Option<Box<crate::Composition>>,
    /// Its brain's context budget in tokens, when set for this agent (see
    /// [`crate::bounds::check_context_tokens`]); `None`: the daemon's, or
    /// its brain kind's default. Children inherit it.
    pub context_tokens: Option<u32>,
    /// The daemon's MCP servers (by name, from its `--mcp-config`) whose
    /// tools this agent may call. Set at creation; children inherit their
    /// creator's.
    pub mcp_servers: Vec<String>,
    /// What network its commands may reach. Set at creation; children
    /// inherit their creator's.
    pub network: crate::NetworkPolicy,
    /// The namespace it belongs to (see [`crate::namespace`]); children
    /// are in their creator's.
    pub namespace: String,
    /// Its operator's labels (see [`crate::labels`]); set at creation,
    /// not inherited.
    pub labels: crate::labels::Labels,
}

impl AgentRecord {
    /// The key its name is unique under in the store: the name within its
    /// namespace (see [`crate::namespace::qualified`]).
    pub fn name_key(&self) -> Option<String> {
        self.name
            .as_deref()
            .map(|name| crate::namespace::qualified(&self.namespace, name))
    }

    /// A new public agent named `name`, as an operator creates one: active,
    /// self-owned, the default brain, nothing composed, made at `now_ms`.
    /// Anything else is set by struct update.
    pub fn public(name: impl Into<String>, now_ms: u64) -> Self {
        Self {
            id: AgentId::generate(),
            name: Some(name.into()),
            profile: crate::profile::Preset::PublicNamed.profile(),
            lineage_parent_agent_id: None,
            supervisor_agent_id: None,
            state: LifecycleState::Active,
            brain: crate::BrainConfig::default(),
            forked_context: None,
            composition: None,
            context_tokens: None,
            mcp_servers: Vec::new(),
            network: crate::NetworkPolicy::Full,
            namespace: crate::namespace::DEFAULT.to_owned(),
            labels: Default::default(),
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
        }
    }
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
    /// An inbound event routed to the instance whose (public) agent this
    /// is. Last, so records written before it still decode.
    Event { event_id: crate::InboundId },
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
            Provenance::Event { .. } => "event",
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

/// What happens to a message, as its turn goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageEvent {
    /// A turn starts on it.
    Start { run_id: RunId },
    /// The turn ended: handled, or the brain failed.
    Finish { run_id: RunId, handled: bool },
    /// An operator aborted the turn.
    Abort { run_id: RunId },
    /// A crash or a restart cut the turn short: back on the queue.
    Requeue,
    /// Its agent was cleaned up first.
    Cancel,
}

impl MessageStatus {
    /// The status after `event`, or `None` if the event does not apply: a
    /// turn starts only on a queued message, ends only the run that holds
    /// it, and an ended message never changes again.
    pub fn next(self, event: MessageEvent) -> Option<MessageStatus> {
        match (self, event) {
            (MessageStatus::Queued, MessageEvent::Start { run_id }) => {
                Some(MessageStatus::Handling { run_id })
            }
            (
                MessageStatus::Handling { run_id },
                MessageEvent::Finish {
                    run_id: ended,
                    handled,
                },
            ) if run_id == ended => Some(if handled {
                MessageStatus::Handled { run_id }
            } else {
                MessageStatus::Failed { run_id }
            }),
            (MessageStatus::Handling { run_id }, MessageEvent::Abort { run_id: aborted })
                if run_id == aborted =>
            {
                Some(MessageStatus::Aborted { run_id })
            }
            (MessageStatus::Handling { .. }, MessageEvent::Requeue) => Some(MessageStatus::Queued),
            (MessageStatus::Queued | MessageStatus::Handling { .. }, MessageEvent::Cancel) => {
                Some(MessageStatus::Cancelled)
            }
            _ => None,
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
    /// How many turns started on this message and were not given back:
    /// above one means a daemon crash interrupted an earlier turn and the
    /// message was handled again. A turn the daemon stopped itself (a
    /// graceful shutdown) gives its attempt back ([`MessageRecord::stopped_mid_turn`]),
    /// so only crashes count towards `--max-message-attempts`.
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

impl MessageRecord {
    /// The message as a graceful stop of the daemon leaves it when its turn
    /// `run_id` was running: back on the queue, with that turn's attempt
    /// given back, since the turn did not crash anything. `None` when the
    /// message is no longer held by that run (it finished meanwhile).
    pub fn stopped_mid_turn(&self, run_id: RunId) -> Option<MessageRecord> {
        if self.status != (MessageStatus::Handling { run_id }) {
            return None;
        }
        Some(MessageRecord {
            status: self.status.next(MessageEvent::Requeue)?,
            attempts: self.attempts.saturating_sub(1),
            ..self.clone()
        })
    }

    /// Calls `f` on the message's free texts (body and reply), for redaction.
    pub fn texts_mut(&mut self, f: &mut dyn FnMut(&mut String)) {
        f(&mut self.body);
        self.reply.iter_mut().for_each(f);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn arb_event() -> impl Strategy<Value = MessageEvent> {
        let run = (0u128..3).prop_map(RunId::from_u128);
        prop_oneof![
            run.clone()
                .prop_map(|run_id| MessageEvent::Start { run_id }),
            (run.clone(), any::<bool>())
                .prop_map(|(run_id, handled)| MessageEvent::Finish { run_id, handled }),
            run.prop_map(|run_id| MessageEvent::Abort { run_id }),
            Just(MessageEvent::Requeue),
            Just(MessageEvent::Cancel),
        ]
    }

    #[test]
    fn a_graceful_stop_gives_the_attempt_back_only_to_the_run_holding_it() {
        let run_id = RunId::from_u128(1);
        let mut message = MessageRecord::queued(
            AgentId::from_u128(9),
            Provenance::Operator,
            "long turn".into(),
            None,
            0,
        );
        message.status = MessageStatus::Handling { run_id };
        message.attempts = 2;
        let stopped = message.stopped_mid_turn(run_id).expect("held by the run");
        assert_eq!(stopped.status, MessageStatus::Queued);
        assert_eq!(stopped.attempts, 1);
        assert_eq!(message.stopped_mid_turn(RunId::from_u128(2)), None);
        message.status = MessageStatus::Handled { run_id };
        assert_eq!(message.stopped_mid_turn(run_id), None);
    }

    proptest! {
        #[test]
        fn an_ended_message_never_runs_again(events in proptest::collection::vec(arb_event(), 0..40)) {
            let mut status = MessageStatus::Queued;
            let mut ended = false;
            for event in events {
                if let Some(next) = status.next(event) {
                    prop_assert!(!ended, "{status:?} moved to {next:?} after ending");
                    if let (MessageEvent::Finish { run_id, .. } | MessageEvent::Abort { run_id }, MessageStatus::Handling { run_id: held }) = (event, status) {
                        prop_assert_eq!(run_id, held, "only the run holding it ends it");
                    }
                    status = next;
                    ended = !status.is_pending();
                }
            }
        }
    }
}
