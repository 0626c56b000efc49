//! Admission: whether a message with a given provenance may join an agent's
//! queue. Operator ingress reaches public agents only; a private agent hears
//! from its supervisor, its children, triggers and the runtime.

use crate::ids::AgentId;
use crate::profile::Visibility;
use crate::record::{AgentRecord, LifecycleState, Provenance};

/// The part of an agent that admission reads. Agents keep it in RAM, so
/// admission needs no store read on the hot path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub id: AgentId,
    pub visibility: Visibility,
    pub supervisor_agent_id: Option<AgentId>,
    pub state: LifecycleState,
}

impl From<&AgentRecord> for Target {
    fn from(record: &AgentRecord) -> Self {
        Self {
            id: record.id,
            visibility: record.profile.visibility,
            supervisor_agent_id: record.supervisor_agent_id,
            state: record.state,
        }
    }
}

/// Why a message was not admitted. Each maps to one gRPC status at the edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Operators may not talk to private agents directly.
    #[error("agent is private: operator ingress reaches public agents only")]
    PrivateTarget,
    /// Only an agent's supervisor may send it parent input.
    #[error("sender is not this agent's supervisor")]
    NotSupervisor,
    /// Only an agent's supervisor receives its child results.
    #[error("sender is not supervised by this agent")]
    NotChild,
    /// An archived agent takes nothing.
    #[error("agent is archived")]
    Archived,
}

/// Decides admission. `child_supervisor` is the supervisor of the sending
/// agent for [`Provenance::ChildResult`] (ignored otherwise).
pub fn admit(
    provenance: &Provenance,
    child_supervisor: Option<AgentId>,
    target: Target,
) -> Result<(), Refusal> {
    if target.state == LifecycleState::Archived {
        return Err(Refusal::Archived);
    }
    match provenance {
        Provenance::Operator => match target.visibility {
            Visibility::Public => Ok(()),
            Visibility::Private => Err(Refusal::PrivateTarget),
        },
        Provenance::Parent { agent_id } => {
            if target.supervisor_agent_id == Some(*agent_id) {
                Ok(())
            } else {
                Err(Refusal::NotSupervisor)
            }
        }
        Provenance::ChildResult { .. } => {
            if child_supervisor == Some(target.id) {
                Ok(())
            } else {
                Err(Refusal::NotChild)
            }
        }
        Provenance::Trigger { .. }
        | Provenance::Timer { .. }
        | Provenance::SelfQueued
        | Provenance::TaskResult { .. }
        | Provenance::Runtime => Ok(()),
        // Bootstrap input from a creator reaches only the public agent it
        // made; a private agent's first message comes from its supervisor.
        Provenance::Creator { .. } => match target.visibility {
            Visibility::Public => Ok(()),
            Visibility::Private => Err(Refusal::PrivateTarget),
        },
        // Events reach an instance's public agent; its private children
        // hear of them only through it.
        Provenance::Event { .. } => match target.visibility {
            Visibility::Public => Ok(()),
            Visibility::Private => Err(Refusal::PrivateTarget),
        },
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::profile::{Ownership, Preset};

    fn arb_state() -> impl Strategy<Value = LifecycleState> {
        prop_oneof![
            Just(LifecycleState::Active),
            Just(LifecycleState::Paused),
            Just(LifecycleState::Failed),
            Just(LifecycleState::Archived),
        ]
    }

    fn arb_agent() -> impl Strategy<Value = AgentRecord> {
        (
            any::<u128>(),
            prop_oneof![Just(Preset::PrivateChild), Just(Preset::PublicNamed)],
            proptest::option::of(any::<u128>()),
            arb_state(),
        )
            .prop_map(|(id, preset, parent, state)| {
                let profile = preset.profile();
                let parent = parent.map(AgentId::from_u128);
                let supervisor = match profile.ownership {
                    Ownership::ParentSupervised => parent,
                    Ownership::SelfOwned => None,
                };
                AgentRecord {
                    id: AgentId::from_u128(id),
                    name: None,
                    profile,
                    lineage_parent_agent_id: parent,
                    supervisor_agent_id: supervisor,
                    state,
                    brain: Default::default(),
                    forked_context: None,
                    composition: None,
                    context_tokens: None,
                    mcp_servers: Vec::new(),
                    network: Default::default(),
                    namespace: crate::namespace::DEFAULT.to_owned(),
                    labels: Default::default(),
                    created_at_ms: 0,
                    updated_at_ms: 0,
                }
            })
    }

    fn arb_provenance() -> impl Strategy<Value = Provenance> {
        prop_oneof![
            Just(Provenance::Operator),
            any::<u128>().prop_map(|a| Provenance::Parent {
                agent_id: AgentId::from_u128(a)
            }),
            any::<u128>().prop_map(|a| Provenance::ChildResult {
                agent_id: AgentId::from_u128(a)
            }),
            any::<u128>().prop_map(|w| Provenance::Trigger {
                wait_id: crate::WaitId::from_u128(w)
            }),
            any::<u128>().prop_map(|w| Provenance::Timer {
                wait_id: crate::WaitId::from_u128(w)
            }),
            Just(Provenance::SelfQueued),
            Just(Provenance::Runtime),
            any::<u128>().prop_map(|e| Provenance::Event {
                event_id: crate::InboundId::from_u128(e)
            }),
        ]
    }

    proptest! {
        #[test]
        fn operator_ingress_never_reaches_a_private_agent(target in arb_agent()) {
            let verdict = admit(&Provenance::Operator, None, Target::from(&target));
            if target.profile.visibility == Visibility::Private {
                prop_assert!(verdict.is_err());
            }
        }

        #[test]
        fn operator_ingress_reaches_every_live_public_agent(target in arb_agent()) {
            let verdict = admit(&Provenance::Operator, None, Target::from(&target));
            let open = target.profile.visibility == Visibility::Public
                && target.state != LifecycleState::Archived;
            prop_assert_eq!(verdict.is_ok(), open);
        }

        #[test]
        fn events_reach_only_live_public_agents(target in arb_agent(), raw in any::<u128>()) {
            let event = Provenance::Event { event_id: crate::InboundId::from_u128(raw) };
            let verdict = admit(&event, None, Target::from(&target));
            let open = target.profile.visibility == Visibility::Public
                && target.state != LifecycleState::Archived;
            prop_assert_eq!(verdict.is_ok(), open);
        }

        #[test]
        fn parent_input_comes_only_from_the_supervisor(
            target in arb_agent(),
            sender in any::<u128>(),
            use_supervisor in any::<bool>(),
        ) {
            let from = match (use_supervisor, target.supervisor_agent_id) {
                (true, Some(sup)) => sup,
                _ => AgentId::from_u128(sender),
            };
            let verdict = admit(&Provenance::Parent { agent_id: from }, None, Target::from(&target));
            let expected = target.state != LifecycleState::Archived
                && target.supervisor_agent_id == Some(from);
            prop_assert_eq!(verdict.is_ok(), expected);
        }

        #[test]
        fn archived_agents_admit_nothing(
            mut target in arb_agent(),
            provenance in arb_provenance(),
            child_sup in proptest::option::of(any::<u128>()),
        ) {
            target.state = LifecycleState::Archived;
            let verdict = admit(&provenance, child_sup.map(AgentId::from_u128), Target::from(&target));
            prop_assert_eq!(verdict, Err(Refusal::Archived));
        }

        #[test]
        fn refusals_are_typed_by_provenance(
            target in arb_agent(),
            provenance in arb_provenance(),
            child_sup in proptest::option::of(any::<u128>()),
        ) {
            let child_sup = child_sup.map(AgentId::from_u128);
            match admit(&provenance, child_sup, Target::from(&target)) {
                Ok(()) => {}
                Err(Refusal::Archived) => prop_assert_eq!(target.state, LifecycleState::Archived),
                Err(Refusal::PrivateTarget) => {
                    let operator_or_creator = matches!(
                        provenance,
                        Provenance::Operator | Provenance::Creator { .. } | Provenance::Event { .. }
                    );
                    prop_assert!(operator_or_creator);
                }
                Err(Refusal::NotSupervisor) => {
                    let is_parent = matches!(provenance, Provenance::Parent { .. });
                    prop_assert!(is_parent);
                }
                Err(Refusal::NotChild) => {
                    let is_child = matches!(provenance, Provenance::ChildResult { .. });
                    prop_assert!(is_child);
                }
            }
        }
    }
}
