//! An agent's spawn of another, decided: the child's record (what it
//! inherits from its creator), its first message, the creator's task
//! handle on a private child, and the child's workspaces, in one batch.
//! Whether the spawn is allowed at all is [`crate::spawn::may_spawn`];
//! where its workspaces come from is read by the runtime.

use crate::effect::{Batch, Plan, Write};
use crate::spawn::relations;
use crate::task::task_label;
use crate::workspace::{Projection, Worktree};
use crate::{
    AgentId, AgentRecord, Composition, EventKind, LifecycleState, MessageId, MessageRecord, Preset,
    Provenance, TaskId, TaskKind, TaskRecord,
};

/// The child asked for, with what the runtime read and made for it.
#[derive(Debug, Clone)]
pub struct Child {
    pub id: AgentId,
    /// The id of the creator's handle on it, if it is private.
    pub task_id: TaskId,
    pub preset: Preset,
    pub name: Option<String>,
    pub initial_message: Option<String>,
    /// The creator's view, for a forked child.
    pub forked_context: Option<String>,
    /// The creator's composition, with the child's own role if it has one.
    pub composition: Option<Box<Composition>>,
    /// The git worktree its handle owns, in `worktree` mode.
    pub worktree: Option<Worktree>,
    /// Its workspaces, unless it has only its home.
    pub projection: Option<Projection>,
}

/// What a spawn decided.
#[derive(Debug)]
pub struct Spawn {
    pub plan: Plan,
    pub record: AgentRecord,
    /// The creator's handle on a private child.
    pub task: Option<TaskRecord>,
    /// The child's queue: its first message, if any.
    pub queue: Vec<MessageId>,
}

/// `creator` spawns `child` at `now_ms`. The child thinks the way its
/// creator does (brain, context budget, MCP servers); a private child is
/// supervised by it through a running handle, a public one keeps only its
/// lineage.
pub fn spawn(creator: &AgentRecord, child: Child, now_ms: u64) -> Spawn {
    let (lineage, supervisor) = relations(creator.id, child.preset);
    let record = AgentRecord {
        id: child.id,
        name: child.name.clone(),
        profile: child.preset.profile(),
        lineage_parent_agent_id: lineage,
        supervisor_agent_id: supervisor,
        state: LifecycleState::Active,
        brain: creator.brain.clone(),
        forked_context: child.forked_context,
        // Skills and limits pass down whole: a child must not shed a limit
        // its creator runs under.
        composition: child.composition,
        context_tokens: creator.context_tokens,
        mcp_servers: creator.mcp_servers.clone(),
        // A child never reaches more than its creator.
        network: creator.network.clone(),
        // A child stays where its creator is: no agent makes one another
        // namespace's callers could see.
        namespace: creator.namespace.clone(),
        // Labels are the operator's, on the agents it made.
        labels: Default::default(),
        created_at_ms: now_ms,
        updated_at_ms: now_ms,
    };
    let mut batch = Batch::new()
        .write(Write::CreateAgent(record.clone()))
        .event(
            child.id,
            EventKind::AgentCreated {
                name: child.name,
                preset: Some(child.preset.name().into()),
                lineage_parent_agent_id: lineage,
                supervisor_agent_id: supervisor,
            },
        );
    let mut queue = Vec::new();
    if let Some(body) = child.initial_message.clone() {
        let provenance = match supervisor {
            Some(parent) => Provenance::Parent { agent_id: parent },
            None => Provenance::Creator {
                agent_id: creator.id,
            },
        };
        let message = MessageRecord::queued(child.id, provenance, body, None, now_ms);
        queue.push(message.id);
        batch = batch.put_queued(message);
    }
    let task = supervisor.map(|owner| {
        let kind = TaskKind::ChildAgent {
            child_agent_id: child.id,
        };
        let label = task_label(child.initial_message.as_deref().unwrap_or_default());
        TaskRecord {
            worktree: child.worktree,
            ..TaskRecord::running(child.task_id, owner, kind, label, now_ms)
        }
    });
    if let Some(task) = &task {
        batch = batch.put_task(task.clone(), task.label.clone());
    }
    if let Some(projection) = child.projection {
        batch = batch.write(Write::PutWorkspaces(projection));
    }
    Spawn {
        plan: Plan::writes(batch),
        record,
        task,
        queue,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::Visibility;

    fn preset() -> impl Strategy<Value = Preset> {
        prop_oneof![
            Just(Preset::PublicNamed),
            Just(Preset::PrivateChild),
            Just(Preset::PrivateDelegator),
        ]
    }

    proptest! {
        /// A private child is supervised by its creator through one running
        /// handle it owns; a public one has no supervisor and no handle,
        /// only lineage. Either way it inherits its creator's brain and is
        /// told only the message asked for, by whom the relation says.
        #[test]
        fn a_child_is_held_by_its_creator_exactly_when_it_is_private(
            preset in preset(),
            first in proptest::option::of("\\PC{1,30}"),
            now in any::<u64>(),
        ) {
            let creator = AgentRecord {
                context_tokens: Some(9_000),
                network: crate::NetworkPolicy::Ports(vec![443]),
                namespace: "team-a".into(),
                ..AgentRecord::public("c", 1)
            };
            let private = preset.profile().visibility == Visibility::Private;
            let child = Child {
                id: AgentId::generate(),
                task_id: TaskId::generate(),
                preset,
                name: (!private).then(|| "kid".to_owned()),
                initial_message: first.clone(),
                forked_context: None,
                composition: None,
                worktree: None,
                projection: None,
            };
            let id = child.id;
            let out = spawn(&creator, child, now);
            prop_assert_eq!(out.record.id, id);
            prop_assert_eq!(out.record.context_tokens, Some(9_000));
            // A child never reaches more network than its creator.
            prop_assert_eq!(&out.record.network, &creator.network);
            prop_assert_eq!(&out.record.namespace, &creator.namespace);
            prop_assert_eq!(out.record.supervisor_agent_id.is_some(), private);
            prop_assert_eq!(out.record.lineage_parent_agent_id, Some(creator.id));
            prop_assert_eq!(out.task.is_some(), private);
            if let Some(task) = &out.task {
                prop_assert_eq!(task.owner_agent_id, creator.id);
                prop_assert_eq!(task.kind, TaskKind::ChildAgent { child_agent_id: id });
            }
            let messages: Vec<&MessageRecord> = out.plan.batch.writes.iter().filter_map(|w| match w {
                Write::PutMessage(m) => Some(m),
                _ => None,
            }).collect();
            prop_assert_eq!(messages.len(), usize::from(first.is_some()));
            prop_assert_eq!(out.queue.len(), messages.len());
            if let Some(message) = messages.first() {
                let from = if private {
                    Provenance::Parent { agent_id: creator.id }
                } else {
                    Provenance::Creator { agent_id: creator.id }
                };
                prop_assert_eq!(message.provenance, from);
                prop_assert_eq!(message.agent_id, id);
            }
            let creates = out.plan.batch.writes.iter().filter(|w| matches!(w, Write::CreateAgent(_))).count();
            prop_assert_eq!(creates, 1);
        }
    }
}
