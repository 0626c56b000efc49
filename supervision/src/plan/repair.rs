//! After a crash, the records decided on before the tree is spawned again:
//! messages whose turns crashed the daemon too often are set aside, turns
//! cut short are queued again, private agents without a live supervisor
//! are archived, and each running task and armed wait either comes back
//! with its owner or ends. Reads nothing; [`repair`] takes what recovery
//! read and planned ([`crate::recovery::recover`]).

use std::collections::{HashMap, HashSet};

use crate::effect::{Batch, Plan, Write};
use crate::recovery::RecoveryPlan;
use crate::{
    AgentId, EventKind, LifecycleState, MessageEvent, MessageRecord, MessageStatus, RunOutcome,
    TaskKind, TaskRecord, TaskStatus, WaitKind, WaitRecord, WaitStatus,
};

/// The reason a set-aside message's run records, first word first.
pub const CRASHED_DAEMON: &str = "crashed_daemon";

/// What [`repair`] decided beside its writes.
#[derive(Debug, Default)]
pub struct Repair {
    pub plan: Plan,
    /// Task handles whose owner and child both come back: started again.
    pub tasks_to_spawn: Vec<TaskRecord>,
    /// Waits whose owner comes back and whose arming turn was not cut.
    pub waits_to_arm: Vec<WaitRecord>,
    /// The run each agent had cut short, as a number (ids of one monotonic
    /// generator): what that run armed or parked was its first try's.
    pub cut: HashMap<AgentId, u128>,
    pub poison_messages: usize,
    pub cut_timers_cancelled: usize,
    /// The orphans archived, for the log.
    pub orphans: Vec<AgentId>,
}

/// Decides over `plan` (the live tree and its queues), the messages
/// `poison` set aside from it, and the tasks and waits recovery read.
pub fn repair(
    plan: &RecoveryPlan,
    poison: Vec<MessageRecord>,
    running_tasks: Vec<TaskRecord>,
    armed_waits: Vec<WaitRecord>,
    now_ms: u64,
) -> Repair {
    let mut repair = Repair::default();
    let mut batch = Batch::new();
    // Messages whose turns crashed the daemon too often: failed, with the
    // reason, and the agent goes on with its next message.
    for mut message in poison {
        let MessageStatus::Handling { run_id } = message.status else {
            continue;
        };
        batch = batch.event(
            message.agent_id,
            EventKind::RunFinished {
                run_id,
                message_id: message.id,
                outcome: RunOutcome::Failed,
                detail: format!(
                    "{CRASHED_DAEMON}: the daemon stopped during each of this message's {} turns; set aside (--max-message-attempts)",
                    message.attempts
                ),
            },
        );
        message.status = message
            .status
            .next(MessageEvent::Finish {
                run_id,
                handled: false,
            })
            .unwrap_or(message.status);
        batch = batch.write(Write::PutMessage(message));
        repair.poison_messages += 1;
    }
    for mut message in plan.interrupted.iter().cloned() {
        if let MessageStatus::Handling { run_id } = message.status {
            repair.cut.insert(message.agent_id, run_id.as_u128());
            batch = batch.event(
                message.agent_id,
                EventKind::RunFinished {
                    run_id,
                    message_id: message.id,
                    outcome: RunOutcome::Interrupted,
                    detail: "daemon stopped mid-turn; message queued again".into(),
                },
            );
        }
        message.status = message
            .status
            .next(MessageEvent::Requeue)
            .unwrap_or(message.status);
        batch = batch.write(Write::PutMessage(message));
    }
    // No private agent may live without a live supervisor.
    for mut orphan in plan.orphans.iter().cloned() {
        repair.orphans.push(orphan.id);
        orphan.state = LifecycleState::Archived;
        orphan.updated_at_ms = now_ms;
        batch = batch.event(
            orphan.id,
            EventKind::AgentStateChanged {
                state: LifecycleState::Archived,
                reason: "orphaned: supervisor not live at restart".into(),
            },
        );
        batch = batch.write(Write::PutAgent(orphan));
    }
    let spawned = live_among(plan, &running_tasks, &armed_waits);
    for mut task in running_tasks {
        let child_alive = match task.kind {
            TaskKind::Command => false,
            TaskKind::ChildAgent { child_agent_id } => spawned.contains(&child_agent_id),
        };
        if spawned.contains(&task.owner_agent_id) && child_alive {
            repair.tasks_to_spawn.push(task);
        } else {
            task.status = TaskStatus::Failed;
            task.output = Some("its child was not live at restart".into());
            task.updated_at_ms = now_ms;
            batch = batch.write(Write::PutTask(task));
        }
    }
    // A turn cut short runs again from its start, and arms its own timers
    // again: those its first run armed are cancelled, or the agent would
    // wake twice for one sleep (found by the chaos run). Ids come from one
    // monotonic generator, so a wait whose id is above the cut run's was
    // armed by it (an agent runs one turn at a time). A trigger stays: its
    // token may already be in other hands.
    for mut wait in armed_waits {
        let armed_by_cut_run = matches!(wait.kind, WaitKind::Timer { .. })
            && repair
                .cut
                .get(&wait.owner_agent_id)
                .is_some_and(|&run| wait.id.as_u128() > run);
        if spawned.contains(&wait.owner_agent_id) && !armed_by_cut_run {
            repair.waits_to_arm.push(wait);
            continue;
        }
        // Its owner is not coming back, or its turn runs again: nothing is
        // left for it to wake.
        wait.status = WaitStatus::Cancelled;
        wait.updated_at_ms = now_ms;
        if armed_by_cut_run {
            batch = batch.event(
                wait.owner_agent_id,
                EventKind::WaitUpdated {
                    wait_id: wait.id,
                    kind: wait.kind.name().into(),
                    status: WaitStatus::Cancelled,
                },
            );
            repair.cut_timers_cancelled += 1;
        }
        batch = batch.write(Write::PutWait(wait));
    }
    repair.plan.batch = batch;
    repair
}

/// Which of the agents that tasks and waits name are coming back: a set as
/// small as those, where one of every agent spawned cost a noticeable part
/// of a million-agent recovery.
fn live_among(plan: &RecoveryPlan, tasks: &[TaskRecord], waits: &[WaitRecord]) -> HashSet<AgentId> {
    let mut named: HashSet<AgentId> = HashSet::new();
    for task in tasks {
        named.insert(task.owner_agent_id);
        if let TaskKind::ChildAgent { child_agent_id } = task.kind {
            named.insert(child_agent_id);
        }
    }
    named.extend(waits.iter().map(|w| w.owner_agent_id));
    if named.is_empty() {
        return named;
    }
    plan.spawn
        .iter()
        .map(|a| a.id)
        .filter(|id| named.contains(id))
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::{AgentRecord, Provenance, RunId, TaskId, WaitId};

    /// One agent of the generated world, by what it has.
    #[derive(Debug, Clone)]
    struct Shape {
        /// Whether the agent comes back (in the plan's live tree).
        live: bool,
        /// Whether a turn of it was cut, and its waits: (is a timer,
        /// armed after the cut run started).
        cut: bool,
        waits: Vec<(bool, bool)>,
        /// Child-agent tasks it holds: whether each child comes back.
        children: Vec<bool>,
    }

    fn shapes() -> impl Strategy<Value = Vec<Shape>> {
        proptest::collection::vec(
            (
                any::<bool>(),
                any::<bool>(),
                proptest::collection::vec((any::<bool>(), any::<bool>()), 0..4),
                proptest::collection::vec(any::<bool>(), 0..3),
            )
                .prop_map(|(live, cut, waits, children)| Shape {
                    live,
                    cut,
                    waits,
                    children,
                }),
            0..8,
        )
    }

    fn wait(owner: AgentId, id: WaitId, timer: bool) -> WaitRecord {
        WaitRecord {
            id,
            owner_agent_id: owner,
            kind: if timer {
                WaitKind::Timer { deadline_ms: 5 }
            } else {
                WaitKind::Trigger {
                    token_hash: [1; 32],
                }
            },
            reason: String::new(),
            work_item_id: None,
            status: WaitStatus::Armed,
            created_at_ms: 1,
            updated_at_ms: 1,
        }
    }

    /// The world `shapes` describe: the plan, its running tasks and armed
    /// waits, and for each wait whether its owner's cut run armed it.
    fn world(shapes: &[Shape]) -> (RecoveryPlan, Vec<TaskRecord>, Vec<WaitRecord>, Vec<bool>) {
        let mut plan = RecoveryPlan {
            spawn: Vec::new(),
            queues: HashMap::new(),
            generations: Vec::new(),
            interrupted: Vec::new(),
            orphans: Vec::new(),
            stranded_messages: 0,
        };
        let (mut tasks, mut waits, mut by_cut_run) = (Vec::new(), Vec::new(), Vec::new());
        for (i, shape) in shapes.iter().enumerate() {
            let agent = AgentRecord::public(format!("a{i}"), 1);
            let owner = agent.id;
            if shape.live {
                plan.spawn.push(agent);
            }
            // Ids in the order they were made: the waits armed before the
            // run, the run, then those armed after it.
            let before: Vec<WaitRecord> = shape
                .waits
                .iter()
                .filter(|(_, after)| !after)
                .map(|(timer, _)| wait(owner, WaitId::generate(), *timer))
                .collect();
            let run = RunId::generate();
            if shape.cut {
                let mut message =
                    MessageRecord::queued(owner, Provenance::Operator, "cut".into(), None, 1);
                message.status = MessageStatus::Handling { run_id: run };
                plan.interrupted.push(message);
            }
            for record in before {
                by_cut_run.push(false);
                waits.push(record);
            }
            for (timer, _) in shape.waits.iter().filter(|(_, after)| *after) {
                by_cut_run.push(shape.cut);
                waits.push(wait(owner, WaitId::generate(), *timer));
            }
            for child_live in &shape.children {
                let child = AgentRecord::public(format!("c{i}"), 1);
                let child_id = child.id;
                if *child_live {
                    plan.spawn.push(child);
                }
                tasks.push(TaskRecord::running(
                    TaskId::generate(),
                    owner,
                    TaskKind::ChildAgent {
                        child_agent_id: child_id,
                    },
                    "child".into(),
                    1,
                ));
            }
        }
        (plan, tasks, waits, by_cut_run)
    }

    proptest! {
        /// Every armed wait is re-armed or cancelled, once; a timer a cut
        /// run armed is cancelled (its turn arms its own again), a trigger
        /// never for that; a wait whose owner does not come back is
        /// cancelled. Every task handle comes back exactly when its owner
        /// and child do, and is failed otherwise. Every cut turn is queued
        /// again and its run remembered.
        #[test]
        fn each_task_and_wait_is_kept_or_ended_once_and_cut_turns_rearm_only_their_own(
            shapes in shapes(),
        ) {
            let (plan, tasks, waits, by_cut_run) = world(&shapes);
            let live: HashSet<AgentId> = plan.spawn.iter().map(|a| a.id).collect();
            let repair = repair(&plan, Vec::new(), tasks.clone(), waits.clone(), 9);
            let writes = &repair.plan.batch.writes;
            for (wait, cut) in waits.iter().zip(&by_cut_run) {
                let kept = repair.waits_to_arm.iter().filter(|w| w.id == wait.id).count();
                let ended: Vec<&WaitRecord> = writes.iter().filter_map(|w| match w {
                    Write::PutWait(w) if w.id == wait.id => Some(w),
                    _ => None,
                }).collect();
                prop_assert_eq!(kept + ended.len(), 1, "wait {:?}", wait);
                prop_assert!(ended.iter().all(|w| w.status == WaitStatus::Cancelled));
                let timer = matches!(wait.kind, WaitKind::Timer { .. });
                let should_keep = live.contains(&wait.owner_agent_id) && !(timer && *cut);
                prop_assert_eq!(kept == 1, should_keep, "wait {:?} cut {}", wait, cut);
            }
            prop_assert_eq!(
                repair.cut_timers_cancelled,
                waits.iter().zip(&by_cut_run).filter(|(w, cut)| **cut && matches!(w.kind, WaitKind::Timer { .. })).count()
            );
            for task in &tasks {
                let TaskKind::ChildAgent { child_agent_id } = task.kind else { unreachable!() };
                let back = live.contains(&task.owner_agent_id) && live.contains(&child_agent_id);
                let kept = repair.tasks_to_spawn.iter().filter(|t| t.id == task.id).count();
                let failed = writes.iter().filter(|w| matches!(w, Write::PutTask(t) if t.id == task.id && t.status == TaskStatus::Failed)).count();
                prop_assert_eq!((kept, failed), if back { (1, 0) } else { (0, 1) });
            }
            for message in &plan.interrupted {
                let MessageStatus::Handling { run_id } = message.status else { unreachable!() };
                prop_assert_eq!(repair.cut.get(&message.agent_id), Some(&run_id.as_u128()));
                let requeued = writes.iter().filter(|w| matches!(w, Write::PutMessage(m) if m.id == message.id && m.status == MessageStatus::Queued)).count();
                prop_assert_eq!(requeued, 1);
            }
        }
    }
}
