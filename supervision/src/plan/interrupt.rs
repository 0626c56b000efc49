//! A command task that cannot run on (its agent restarted, its actor
//! stopped, the daemon restarted while it ran): its record ends as
//! interrupted, its process group is ended, and its owner may be told.

use crate::effect::{Batch, Directive, Plan, Write};
use crate::{EventKind, MessageRecord, Provenance, TaskRecord, TaskStatus};

/// Interrupts `task` because of `why`, at `now_ms`; with `tell_owner`, a
/// message to its owner says so (left out when the owner has ended: the
/// message would have no one to read it), and wakes it once it lands.
pub fn interrupt(task: &TaskRecord, why: &str, tell_owner: bool, now_ms: u64) -> Plan {
    let directives = task.process.map(Directive::KillGroup).into_iter().collect();
    let mut ended = task.clone();
    ended.status = TaskStatus::Interrupted;
    ended.output = Some(format!("interrupted: {why}"));
    ended.updated_at_ms = now_ms;
    let owner = task.owner_agent_id;
    // An ending write: a cleanup's `stopped` committed first stands, and
    // the batch (with its message to an owner that may have ended) fails.
    let mut batch = Batch::new()
        .event(
            owner,
            EventKind::TaskUpdated {
                task_id: task.id,
                kind: task.kind.name().into(),
                status: ended.status,
                detail: why.into(),
            },
        )
        .write(Write::EndTask(ended));
    let mut told = None;
    if tell_owner {
        let body = format!(
            "command `{}` interrupted: {why}",
            task.command.as_deref().unwrap_or(&task.label)
        );
        let message = MessageRecord::queued(
            owner,
            Provenance::TaskResult { task_id: task.id },
            body,
            None,
            now_ms,
        );
        told = Some(message.id);
        batch = batch.put_queued(message);
    }
    Plan { batch, directives }.wake(owner, told)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::{AgentId, ProcessRef, TaskId, TaskKind};

    fn command(process: Option<ProcessRef>) -> TaskRecord {
        let mut task = TaskRecord::running(
            TaskId::generate(),
            AgentId::generate(),
            TaskKind::Command,
            "build".into(),
            1,
        );
        task.command = Some("make".into());
        task.process = process;
        task
    }

    proptest! {
        /// Whatever the task and the reason: one ending write, interrupted,
        /// of that task alone; its group ended when it has one; its owner
        /// told exactly when asked, by a message the batch queues.
        #[test]
        fn an_interrupt_ends_the_task_once_and_tells_only_when_asked(
            pgid in proptest::option::of(1i32..100_000),
            why in "\\PC{0,80}",
            tell in any::<bool>(),
            now in any::<u64>(),
        ) {
            let process = pgid.map(|pgid| ProcessRef { pgid, start_ticks: 7 });
            let task = command(process);
            let plan = interrupt(&task, &why, tell, now);
            let told = plan.woken();
            let kills: Vec<Directive> = plan.directives.iter().copied().filter(Directive::before_commit).collect();
            prop_assert_eq!(kills, process.map(Directive::KillGroup).into_iter().collect::<Vec<_>>());
            let ends: Vec<&TaskRecord> = plan.batch.writes.iter().filter_map(|w| match w {
                Write::EndTask(t) => Some(t),
                _ => None,
            }).collect();
            prop_assert_eq!(ends.len(), 1);
            prop_assert_eq!(ends[0].id, task.id);
            prop_assert_eq!(ends[0].status, TaskStatus::Interrupted);
            prop_assert_eq!(ends[0].updated_at_ms, now);
            let queued: Vec<&MessageRecord> = plan.batch.writes.iter().filter_map(|w| match w {
                Write::PutMessage(m) => Some(m),
                _ => None,
            }).collect();
            prop_assert_eq!(told.is_some(), tell);
            prop_assert_eq!(queued.len(), usize::from(tell));
            if let (Some(id), Some(message)) = (told, queued.first()) {
                prop_assert_eq!(message.id, id);
                prop_assert_eq!(message.agent_id, task.owner_agent_id);
                prop_assert!(message.body.contains(&why));
            }
            prop_assert!(plan.batch.writes.iter().all(|w| matches!(w, Write::EndTask(_) | Write::PutMessage(_))));
        }
    }
}
