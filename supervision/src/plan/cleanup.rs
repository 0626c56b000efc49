//! A subtree's cleanup, decided: every record of the subtree brought to
//! its terminal state in one batch with the intent that a crash finishes
//! (see [`crate::cleanup`] for which agents and tasks a subtree holds),
//! and, for an intent a crash left behind, the archive of what is still
//! live. Reads nothing: the runtime reads the subtree under its locks.

use crate::cleanup::{CleanupIntent, CleanupReason};
use crate::effect::{Plan, Write};
use crate::{
    AgentId, AgentRecord, CleanupId, EventKind, LifecycleState, MessageEvent, MessageRecord,
    TaskId, TaskRecord, TaskStatus, WaitId, WaitRecord, WaitStatus,
};

/// The subtree as read under its locks, in the order of
/// [`crate::cleanup::cleanup_plan`].
#[derive(Debug, Clone, Default)]
pub struct Subtree {
    /// The root and its supervised descendants as the supervisors' indexes
    /// name them, every agent before its supervisor (the root last): each
    /// one's actors stop and its intent names it, record or not.
    pub ids: Vec<AgentId>,
    /// The records of those read, in the same order.
    pub agents: Vec<AgentRecord>,
    /// Their messages not yet handled.
    pub pending: Vec<MessageRecord>,
    /// Their waits, of any status.
    pub waits: Vec<WaitRecord>,
    /// The tasks the plan named, of any status now.
    pub tasks: Vec<TaskRecord>,
}

/// A cleanup's decision: the plan (its batch holds the intent), and what
/// the runtime stops once it lands.
#[derive(Debug)]
pub struct Cleanup {
    pub plan: Plan,
    pub intent: CleanupId,
    pub agents: Vec<AgentId>,
    pub tasks: Vec<TaskId>,
    /// The waits it cancelled, whose actors stop.
    pub waits: Vec<WaitId>,
}

/// Ends every record of `subtree`, rooted at `root`, for `reason` at
/// `now_ms`, after `extra` (the root's handle, a message to its parent):
/// agents archived (a root that failed, failed), pending messages
/// cancelled, armed waits cancelled, running tasks stopped, and the intent
/// `intent` written with them. The tasks and agents it names are those of
/// the plan, ended or not: their actors stop either way.
pub fn cleanup(
    root: AgentId,
    subtree: &Subtree,
    reason: CleanupReason,
    extra: Plan,
    intent: CleanupId,
    now_ms: u64,
) -> Cleanup {
    let Plan {
        mut batch,
        directives,
    } = extra;
    for record in &subtree.agents {
        let mut record = record.clone();
        record.state = match reason {
            CleanupReason::Failed { .. } if record.id == root => LifecycleState::Failed,
            CleanupReason::Failed { .. }
            | CleanupReason::Archived
            | CleanupReason::TaskStopped { .. }
            | CleanupReason::Completed { .. }
            | CleanupReason::Orphaned => LifecycleState::Archived,
        };
        record.updated_at_ms = now_ms;
        let (id, state) = (record.id, record.state);
        batch = batch.write(Write::PutAgent(record)).event(
            id,
            EventKind::AgentStateChanged {
                state,
                reason: reason.name().into(),
            },
        );
    }
    for message in &subtree.pending {
        if let Some(cancelled) = message.status.next(MessageEvent::Cancel) {
            let mut message = message.clone();
            message.status = cancelled;
            batch = batch.write(Write::PutMessage(message));
        }
    }
    let mut waits = Vec::new();
    for wait in subtree
        .waits
        .iter()
        .filter(|w| w.status == WaitStatus::Armed)
    {
        let mut wait = wait.clone();
        wait.status = WaitStatus::Cancelled;
        wait.updated_at_ms = now_ms;
        waits.push(wait.id);
        batch = batch
            .event(
                wait.owner_agent_id,
                EventKind::WaitUpdated {
                    wait_id: wait.id,
                    kind: wait.kind.name().into(),
                    status: wait.status,
                },
            )
            .write(Write::PutWait(wait));
    }
    for task in &subtree.tasks {
        let Some(stopped) = task.status.end(TaskStatus::Stopped) else {
            continue;
        };
        let mut task = task.clone();
        task.status = stopped;
        task.output = Some(format!(
            "stopped: its owner was cleaned up ({})",
            reason.name()
        ));
        task.updated_at_ms = now_ms;
        batch = batch.put_task(task, reason.name().into());
    }
    let agents = subtree.ids.clone();
    let tasks: Vec<TaskId> = subtree.tasks.iter().map(|t| t.id).collect();
    batch = batch
        .event(
            root,
            EventKind::CleanupStarted {
                reason: reason.name().into(),
                agents: agents.len() as u32,
                tasks: tasks.len() as u32,
            },
        )
        .write(Write::PutIntent(CleanupIntent {
            id: intent,
            root_agent_id: root,
            reason,
            agents: agents.clone(),
            created_at_ms: now_ms,
        }));
    Cleanup {
        plan: Plan { batch, directives },
        intent,
        agents,
        tasks,
        waits,
    }
}

/// Finishes `intent`, which a crash interrupted, at `now_ms`: of the agents
/// it named (`agents`, as read now), those still live are archived, and the
/// intent goes. Returns the plan and how many it archived.
pub fn finish_interrupted(
    intent: &CleanupIntent,
    agents: &[AgentRecord],
    now_ms: u64,
) -> (Plan, usize) {
    let mut batch = crate::effect::Batch::new().write(Write::DeleteIntent(intent.id));
    let mut finished = 0;
    for record in agents.iter().filter(|a| a.state.is_live()) {
        let mut record = record.clone();
        record.state = LifecycleState::Archived;
        record.updated_at_ms = now_ms;
        let id = record.id;
        batch = batch.write(Write::PutAgent(record)).event(
            id,
            EventKind::AgentStateChanged {
                state: LifecycleState::Archived,
                reason: format!("{} (finished after restart)", intent.reason.name()),
            },
        );
        finished += 1;
    }
    (Plan::writes(batch), finished)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;
    use crate::{MessageStatus, Provenance, RunId, TaskKind, WaitKind};

    /// One agent of a generated subtree: its state, and its records'
    /// statuses (message: 0 queued, 1 handling, 2 handled; wait: armed or
    /// not; task: running or not).
    #[derive(Debug, Clone)]
    struct Shape {
        live: bool,
        messages: Vec<u8>,
        waits: Vec<bool>,
        tasks: Vec<bool>,
    }

    fn shapes() -> impl Strategy<Value = Vec<Shape>> {
        proptest::collection::vec(
            (
                any::<bool>(),
                proptest::collection::vec(0u8..3, 0..4),
                proptest::collection::vec(any::<bool>(), 0..3),
                proptest::collection::vec(any::<bool>(), 0..3),
            )
                .prop_map(|(live, messages, waits, tasks)| Shape {
                    live,
                    messages,
                    waits,
                    tasks,
                }),
            1..8,
        )
    }

    fn reason() -> impl Strategy<Value = CleanupReason> {
        let task = TaskId::generate();
        prop_oneof![
            Just(CleanupReason::Archived),
            Just(CleanupReason::TaskStopped { task_id: task }),
            Just(CleanupReason::Completed { task_id: task }),
            Just(CleanupReason::Failed { task_id: None }),
            Just(CleanupReason::Orphaned),
        ]
    }

    fn subtree(shapes: &[Shape]) -> Subtree {
        let mut subtree = Subtree::default();
        for (i, shape) in shapes.iter().enumerate() {
            let mut agent = AgentRecord::public(format!("a{i}"), 1);
            if !shape.live {
                agent.state = LifecycleState::Archived;
            }
            for status in &shape.messages {
                let mut message =
                    MessageRecord::queued(agent.id, Provenance::Operator, "m".into(), None, 1);
                message.status = match status {
                    0 => MessageStatus::Queued,
                    1 => MessageStatus::Handling {
                        run_id: RunId::generate(),
                    },
                    _ => MessageStatus::Handled {
                        run_id: RunId::generate(),
                    },
                };
                subtree.pending.push(message);
            }
            for armed in &shape.waits {
                subtree.waits.push(WaitRecord {
                    id: WaitId::generate(),
                    owner_agent_id: agent.id,
                    kind: WaitKind::Timer { deadline_ms: 9 },
                    reason: String::new(),
                    work_item_id: None,
                    status: if *armed {
                        WaitStatus::Armed
                    } else {
                        WaitStatus::Fired
                    },
                    created_at_ms: 1,
                    updated_at_ms: 1,
                });
            }
            for running in &shape.tasks {
                let mut task = TaskRecord::running(
                    TaskId::generate(),
                    agent.id,
                    TaskKind::Command,
                    "t".into(),
                    1,
                );
                if !running {
                    task.status = TaskStatus::Completed;
                }
                subtree.tasks.push(task);
            }
            subtree.ids.push(agent.id);
            subtree.agents.push(agent);
        }
        subtree
    }

    proptest! {
        #[test]
        fn every_record_of_the_subtree_ends_once_and_the_intent_names_every_agent(
            shapes in shapes(),
            reason in reason(),
        ) {
            let subtree = subtree(&shapes);
            let root = subtree.agents.last().map(|a| a.id).unwrap_or_else(AgentId::generate);
            let intent = CleanupId::generate();
            let out = cleanup(root, &subtree, reason, Plan::default(), intent, 7);
            let writes = &out.plan.batch.writes;
            // Every agent ends, the root failed only when it failed.
            let ended: Vec<&AgentRecord> = writes.iter().filter_map(|w| match w {
                Write::PutAgent(a) => Some(a),
                _ => None,
            }).collect();
            prop_assert_eq!(ended.len(), subtree.agents.len());
            for agent in ended {
                prop_assert!(!agent.state.is_live());
                let failed = matches!(reason, CleanupReason::Failed { .. }) && agent.id == root;
                prop_assert_eq!(agent.state == LifecycleState::Failed, failed);
            }
            // Messages not yet handled are cancelled; handled ones untouched.
            let cancelled = writes.iter().filter(|w| matches!(w,
                Write::PutMessage(m) if m.status == MessageStatus::Cancelled)).count();
            let open = subtree.pending.iter()
                .filter(|m| m.status.next(MessageEvent::Cancel).is_some()).count();
            prop_assert_eq!(cancelled, open);
            // Armed waits are cancelled and named for their actors' stop.
            let armed: HashSet<WaitId> = subtree.waits.iter()
                .filter(|w| w.status == WaitStatus::Armed).map(|w| w.id).collect();
            prop_assert_eq!(out.waits.iter().copied().collect::<HashSet<_>>(), armed);
            // Running tasks stop; every task of the plan is named.
            let stopped = writes.iter().filter(|w| matches!(w,
                Write::PutTask(t) if t.status == TaskStatus::Stopped)).count();
            let running = subtree.tasks.iter()
                .filter(|t| t.status == TaskStatus::Running).count();
            prop_assert_eq!(stopped, running);
            prop_assert_eq!(out.tasks.len(), subtree.tasks.len());
            // One intent, naming every agent, last write of the batch.
            let intents: Vec<&CleanupIntent> = writes.iter().filter_map(|w| match w {
                Write::PutIntent(i) => Some(i),
                _ => None,
            }).collect();
            prop_assert_eq!(intents.len(), 1);
            prop_assert_eq!(intents[0].id, intent);
            prop_assert_eq!(&intents[0].agents, &out.agents);
            prop_assert_eq!(&out.agents, &subtree.ids);
            prop_assert!(matches!(writes.last(), Some(Write::PutIntent(_))));
        }

        #[test]
        fn an_interrupted_cleanup_archives_what_is_still_live_and_drops_its_intent(
            shapes in shapes(),
            reason in reason(),
        ) {
            let subtree = subtree(&shapes);
            let intent = CleanupIntent {
                id: CleanupId::generate(),
                root_agent_id: subtree.agents[0].id,
                reason,
                agents: subtree.agents.iter().map(|a| a.id).collect(),
                created_at_ms: 1,
            };
            let (plan, finished) = finish_interrupted(&intent, &subtree.agents, 9);
            let live = subtree.agents.iter().filter(|a| a.state.is_live()).count();
            prop_assert_eq!(finished, live);
            let archived = plan.batch.writes.iter().filter(|w| matches!(w,
                Write::PutAgent(a) if a.state == LifecycleState::Archived)).count();
            prop_assert_eq!(archived, live);
            prop_assert!(plan.batch.writes.iter().any(|w| matches!(w,
                Write::DeleteIntent(id) if *id == intent.id)));
        }
    }
}
