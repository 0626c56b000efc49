//! Public agents an operator creates, decided: one record each (self-owned,
//! named, active), its `agent_created` event and its first message, all in
//! one batch so they land together or not at all; and an agent whose actor
//! could not start, marked failed so listings tell the truth.

use crate::effect::{Batch, Plan, Write};
use crate::{
    AgentId, AgentRecord, BrainConfig, Composition, EventKind, LifecycleState, MessageId,
    MessageRecord, Preset, Provenance,
};

/// An agent as an operator asks for it, already validated.
#[derive(Debug, Clone)]
pub struct PublicAgent {
    pub name: String,
    pub initial_message: Option<String>,
    pub brain: BrainConfig,
    pub context_tokens: Option<u32>,
    pub mcp_servers: Vec<String>,
    pub network: crate::NetworkPolicy,
    /// The namespace it is made in: its caller's.
    pub namespace: String,
    pub labels: crate::labels::Labels,
    /// Role, skills and limits of an instance's agent.
    pub composition: Option<Box<Composition>>,
    /// Who asked for it (an operator, as the audit trail names callers):
    /// logged as an `operator_action` after its `agent_created`.
    pub created_by: Option<crate::event::ActedBy>,
}

/// The new agents' records, each with the messages queued for it.
pub type Created = Vec<(AgentRecord, Vec<MessageId>)>;

/// Creates `agents` at `now_ms`: the plan and the records to start.
pub fn public_agents(agents: Vec<PublicAgent>, now_ms: u64) -> (Plan, Created) {
    let mut batch = Batch::new();
    let mut created = Vec::with_capacity(agents.len());
    for spec in agents {
        let record = AgentRecord {
            brain: spec.brain,
            composition: spec.composition,
            context_tokens: spec.context_tokens,
            mcp_servers: spec.mcp_servers,
            network: spec.network,
            namespace: spec.namespace,
            labels: spec.labels,
            ..AgentRecord::public(spec.name.clone(), now_ms)
        };
        let agent_id = record.id;
        batch = batch.write(Write::CreateAgent(record.clone())).event(
            agent_id,
            EventKind::AgentCreated {
                name: Some(spec.name),
                preset: Some(Preset::PublicNamed.name().into()),
                lineage_parent_agent_id: None,
                supervisor_agent_id: None,
            },
        );
        if let Some(by) = spec.created_by {
            batch = batch.event(agent_id, EventKind::from(by));
        }
        let mut queue = Vec::new();
        if let Some(body) = spec.initial_message {
            let message = MessageRecord::queued(agent_id, Provenance::Operator, body, None, now_ms);
            queue.push(message.id);
            batch = batch.put_queued(message);
        }
        created.push((record, queue));
    }
    (Plan::writes(batch), created)
}

/// Marks `record` failed for `reason` at `now_ms`, if it is still live
/// when the batch lands (a cleanup that ended it meanwhile stands); `None`
/// when it is not live as read.
pub fn mark_failed(record: &AgentRecord, reason: String, now_ms: u64) -> Option<Plan> {
    if !record.state.is_live() {
        return None;
    }
    let mut record = record.clone();
    record.state = LifecycleState::Failed;
    record.updated_at_ms = now_ms;
    let agent_id: AgentId = record.id;
    let batch = Batch::new().write(Write::PutLiveAgent(record)).event(
        agent_id,
        EventKind::AgentStateChanged {
            state: LifecycleState::Failed,
            reason,
        },
    );
    Some(Plan::writes(batch))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;

    fn specs() -> impl Strategy<Value = Vec<PublicAgent>> {
        proptest::collection::vec(proptest::option::of("\\PC{0,20}"), 0..12).prop_map(|firsts| {
            firsts
                .into_iter()
                .enumerate()
                .map(|(i, initial_message)| PublicAgent {
                    name: format!("agent-{i}"),
                    initial_message,
                    brain: BrainConfig::default(),
                    context_tokens: None,
                    mcp_servers: Vec::new(),
                    network: Default::default(),
                    namespace: if i % 2 == 0 { "default" } else { "team-a" }.into(),
                    labels: [("n".to_owned(), i.to_string())].into(),
                    composition: None,
                    created_by: None,
                })
                .collect()
        })
    }

    proptest! {
        /// Each agent is created once, public and active, with its event
        /// and only the message asked for, queued to itself.
        #[test]
        fn each_agent_lands_once_with_its_event_and_its_first_message(specs in specs(), now in any::<u64>()) {
            let asked: usize = specs.iter().filter(|s| s.initial_message.is_some()).count();
            let (plan, created) = public_agents(specs.clone(), now);
            prop_assert_eq!(created.len(), specs.len());
            let writes = &plan.batch.writes;
            let records: Vec<&AgentRecord> = writes.iter().filter_map(|w| match w {
                Write::CreateAgent(a) => Some(a),
                _ => None,
            }).collect();
            prop_assert_eq!(records.len(), specs.len());
            let ids: HashSet<AgentId> = records.iter().map(|a| a.id).collect();
            prop_assert_eq!(ids.len(), specs.len());
            for (record, spec) in records.iter().zip(&specs) {
                prop_assert_eq!(record.name.as_deref(), Some(spec.name.as_str()));
                prop_assert_eq!(&record.namespace, &spec.namespace);
                prop_assert_eq!(&record.labels, &spec.labels);
                prop_assert_eq!(record.state, LifecycleState::Active);
                prop_assert!(record.supervisor_agent_id.is_none());
                prop_assert_eq!(record.created_at_ms, now);
            }
            let messages: Vec<&MessageRecord> = writes.iter().filter_map(|w| match w {
                Write::PutMessage(m) => Some(m),
                _ => None,
            }).collect();
            prop_assert_eq!(messages.len(), asked);
            for (record, queue) in &created {
                for id in queue {
                    prop_assert!(messages.iter().any(|m| m.id == *id && m.agent_id == record.id));
                }
            }
            let made = plan.batch.events.iter().filter(|(_, e)| matches!(e, EventKind::AgentCreated { .. })).count();
            prop_assert_eq!(made, specs.len());
            prop_assert!(plan.directives.is_empty());
        }

        /// Only a live agent is marked failed, and only by a write that
        /// refuses an agent ended meanwhile.
        #[test]
        fn only_a_live_agent_is_marked_failed(live in any::<bool>(), now in any::<u64>()) {
            let mut record = AgentRecord::public("a", 1);
            if !live {
                record.state = LifecycleState::Archived;
            }
            let plan = mark_failed(&record, "could not start".into(), now);
            prop_assert_eq!(plan.is_some(), live);
            if let Some(plan) = plan {
                prop_assert!(matches!(plan.batch.writes.as_slice(),
                    [Write::PutLiveAgent(a)] if a.state == LifecycleState::Failed && a.updated_at_ms == now));
            }
        }
    }
}
