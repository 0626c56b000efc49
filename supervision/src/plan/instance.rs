//! An instance's apply, decided: over the instance as stored and the
//! public agent of its name, whether the manifest changes nothing, updates
//! the agent (from its next turn), needs a new agent, or cannot apply
//! because that agent has ended; and the `instance_changed` event every
//! change records. The instance record itself is swapped by the store.

use crate::effect::{Batch, Plan, Write};
use crate::{AgentId, AgentRecord, BrainConfig, Composition, EventKind, LifecycleState};

/// What an instance's agent runs, from the manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Wanted {
    pub brain: BrainConfig,
    pub composition: Composition,
    pub context_tokens: Option<u32>,
    pub mcp_servers: Vec<String>,
    pub network: crate::NetworkPolicy,
}

impl Wanted {
    /// Whether `agent` runs exactly this.
    fn runs_on(&self, agent: &AgentRecord) -> bool {
        agent.brain == self.brain
            && agent.composition.as_deref() == Some(&self.composition)
            && agent.context_tokens == self.context_tokens
            && agent.mcp_servers == self.mcp_servers
            && agent.network == self.network
    }
}

/// An apply's decision.
#[derive(Debug)]
pub enum Apply {
    /// The manifest is the one applied last and the agent runs it.
    Unchanged,
    /// The agent of the name has ended and keeps the name: nothing applies.
    Ended {
        agent_id: AgentId,
        state: LifecycleState,
    },
    /// The agent runs the manifest from its next turn, once `plan` lands
    /// (guarded: an agent archived meanwhile is never revived).
    Update { agent: Box<AgentRecord>, plan: Plan },
    /// No agent has the name yet: one is created with the composition.
    Create,
}

/// Decides an apply of a manifest whose digest is `digest`, over the
/// digest stored last (`previous`) and the agent of its name, at `now_ms`.
/// Unchanged only if the agent runs exactly this too: an apply cut short
/// after writing the agent (a crash) must be finished, not reported done.
pub fn apply(
    previous: Option<&str>,
    digest: &str,
    agent: Option<&AgentRecord>,
    wanted: &Wanted,
    now_ms: u64,
) -> Apply {
    let Some(agent) = agent else {
        return Apply::Create;
    };
    if !agent.state.is_live() {
        return Apply::Ended {
            agent_id: agent.id,
            state: agent.state,
        };
    }
    if previous == Some(digest) && wanted.runs_on(agent) {
        return Apply::Unchanged;
    }
    let agent = AgentRecord {
        brain: wanted.brain.clone(),
        composition: Some(Box::new(wanted.composition.clone())),
        context_tokens: wanted.context_tokens,
        mcp_servers: wanted.mcp_servers.clone(),
        // The agent's own policy; children it already has keep theirs.
        network: wanted.network.clone(),
        updated_at_ms: now_ms,
        ..agent.clone()
    };
    let plan = Plan::writes(Batch::new().write(Write::PutLiveAgent(agent.clone())));
    Apply::Update {
        agent: Box::new(agent),
        plan,
    }
}

/// The event that records a change of instance `name` (`created`,
/// `updated`, `deleted`), in its agent's log when it has one.
pub fn changed(agent_id: Option<AgentId>, name: &str, change: &str, digest: &str) -> Plan {
    let event = EventKind::InstanceChanged {
        name: name.to_owned(),
        change: change.to_owned(),
        digest: digest.to_owned(),
    };
    let batch = match agent_id {
        Some(id) => Batch::new().event(id, event),
        None => Batch {
            events: vec![(None, event)],
            ..Batch::default()
        },
    };
    Plan::writes(batch)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn wanted(tokens: Option<u32>) -> Wanted {
        Wanted {
            brain: BrainConfig::default(),
            composition: Composition::default(),
            context_tokens: tokens,
            mcp_servers: Vec::new(),
            network: Default::default(),
        }
    }

    proptest! {
        /// No agent: create. An ended agent: refused, whatever the digest.
        /// A live one: unchanged exactly when the digest is the last one
        /// and the agent runs what is wanted; otherwise updated to run it,
        /// by a guarded write of that agent alone.
        #[test]
        fn an_apply_creates_refuses_updates_or_leaves_alone_by_the_records(
            exists in any::<bool>(),
            state in prop_oneof![
                Just(LifecycleState::Active),
                Just(LifecycleState::Paused),
                Just(LifecycleState::Failed),
                Just(LifecycleState::Archived),
            ],
            same_digest in any::<bool>(),
            runs_it in any::<bool>(),
            now in any::<u64>(),
        ) {
            let want = wanted(Some(8_000));
            let mut agent = AgentRecord { state, ..AgentRecord::public("inst", 1) };
            if runs_it {
                agent.composition = Some(Box::new(want.composition.clone()));
                agent.context_tokens = want.context_tokens;
            }
            let previous = if same_digest { "d1" } else { "d0" };
            let decided = apply(Some(previous), "d1", exists.then_some(&agent), &want, now);
            match decided {
                Apply::Create => prop_assert!(!exists),
                Apply::Ended { agent_id, .. } => {
                    prop_assert!(exists && !state.is_live());
                    prop_assert_eq!(agent_id, agent.id);
                }
                Apply::Unchanged => prop_assert!(exists && state.is_live() && same_digest && runs_it),
                Apply::Update { agent: updated, plan } => {
                    prop_assert!(exists && state.is_live() && !(same_digest && runs_it));
                    prop_assert!(want.runs_on(&updated));
                    prop_assert_eq!(updated.id, agent.id);
                    prop_assert_eq!(updated.updated_at_ms, now);
                    prop_assert!(matches!(plan.batch.writes.as_slice(),
                        [Write::PutLiveAgent(a)] if a.id == agent.id));
                }
            }
        }
    }
}
