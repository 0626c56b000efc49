//! A supervised child's end (it completed its work, its handle was
//! stopped, or its supervisor gave up on it): the parent's task handle
//! ends with the outcome, the parent may be told, and the child's subtree
//! is cleaned up for the reason that matches.

use crate::cleanup::CleanupReason;
#[cfg(test)]
use crate::effect::Directive;
use crate::effect::{Batch, Plan, Write};
use crate::{AgentId, EventKind, MessageRecord, Provenance, TaskId, TaskRecord, TaskStatus};

/// Ends `task`, the handle on `child`, with `status` and `output` at
/// `now_ms`; with `notify_owner`, a child-result message tells the
/// parent, and wakes it once it lands.
pub fn finish_handle(
    task: &TaskRecord,
    child: AgentId,
    status: TaskStatus,
    output: String,
    notify_owner: bool,
    now_ms: u64,
) -> Plan {
    let mut task = task.clone();
    task.status = task.status.end(status).unwrap_or(task.status);
    task.output = Some(output.clone());
    task.updated_at_ms = now_ms;
    let owner = task.owner_agent_id;
    let mut batch = Batch::new().event(
        owner,
        EventKind::TaskUpdated {
            task_id: task.id,
            kind: task.kind.name().into(),
            status,
            detail: output.clone(),
        },
    );
    batch = batch.write(Write::PutTask(task));
    let mut told = None;
    if notify_owner {
        let message = MessageRecord::queued(
            owner,
            Provenance::ChildResult { agent_id: child },
            output,
            None,
            now_ms,
        );
        told = Some(message.id);
        batch = batch.put_queued(message);
    }
    Plan::writes(batch).wake(owner, told)
}

/// Why a child's subtree is cleaned up, from how it ended and the handle
/// its parent held (none for a public agent, or a handle already gone).
pub fn end_reason(status: TaskStatus, handle: Option<TaskId>) -> CleanupReason {
    match (status, handle) {
        (TaskStatus::Completed, Some(task_id)) => CleanupReason::Completed { task_id },
        (TaskStatus::Stopped, Some(task_id)) => CleanupReason::TaskStopped { task_id },
        (TaskStatus::Failed, task_id) => CleanupReason::Failed { task_id },
        // Without a handle to name, a completion or stop is an archive; an
        // interrupted or still-running status never ends a child.
        (TaskStatus::Completed | TaskStatus::Stopped, None)
        | (TaskStatus::Running | TaskStatus::Interrupted, _) => CleanupReason::Archived,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::TaskKind;

    fn status() -> impl Strategy<Value = TaskStatus> {
        prop_oneof![
            Just(TaskStatus::Running),
            Just(TaskStatus::Completed),
            Just(TaskStatus::Failed),
            Just(TaskStatus::Stopped),
            Just(TaskStatus::Interrupted),
        ]
    }

    proptest! {
        /// One write ends the handle (a running one with the status asked,
        /// an ended one keeps its own: a cleanup's `stopped` stands), its
        /// output kept; the parent is told exactly when asked, by a child
        /// result naming the child.
        #[test]
        fn a_handle_ends_once_and_its_parent_is_told_only_when_asked(
            was in status(),
            to in status(),
            notify in any::<bool>(),
            output in "\\PC{0,40}",
            now in any::<u64>(),
        ) {
            let child = AgentId::generate();
            let mut task = TaskRecord::running(
                TaskId::generate(),
                AgentId::generate(),
                TaskKind::ChildAgent { child_agent_id: child },
                "child".into(),
                1,
            );
            task.status = was;
            let plan = finish_handle(&task, child, to, output.clone(), notify, now);
            let told = plan.woken();
            let ended: Vec<&TaskRecord> = plan.batch.writes.iter().filter_map(|w| match w {
                Write::PutTask(t) => Some(t),
                _ => None,
            }).collect();
            prop_assert_eq!(ended.len(), 1);
            let want = if was == TaskStatus::Running && to.is_terminal() { to } else { was };
            prop_assert_eq!(ended[0].status, want);
            prop_assert_eq!(ended[0].output.as_deref(), Some(output.as_str()));
            let queued: Vec<&MessageRecord> = plan.batch.writes.iter().filter_map(|w| match w {
                Write::PutMessage(m) => Some(m),
                _ => None,
            }).collect();
            prop_assert_eq!(queued.len(), usize::from(notify));
            prop_assert_eq!(told.is_some(), notify);
            if let Some(message) = queued.first() {
                prop_assert_eq!(message.agent_id, task.owner_agent_id);
                prop_assert_eq!(message.provenance, Provenance::ChildResult { agent_id: child });
                prop_assert_eq!(Some(message.id), told);
            }
            let wakes_owner = |d: &Directive| matches!(d, Directive::Wake { agent_id, .. } if *agent_id == task.owner_agent_id);
            prop_assert!(plan.directives.iter().all(wakes_owner));
        }

        /// A failure is always a failure, with the handle it had; a
        /// completion or stop names its handle, or is an archive without
        /// one; nothing else ends a child but as an archive.
        #[test]
        fn the_cleanup_reason_follows_the_end_and_keeps_the_handle(
            status in status(),
            has_handle in any::<bool>(),
        ) {
            let handle = has_handle.then(TaskId::generate);
            let reason = end_reason(status, handle);
            match (status, handle) {
                (TaskStatus::Failed, _) => prop_assert_eq!(reason, CleanupReason::Failed { task_id: handle }),
                (TaskStatus::Completed, Some(task_id)) => prop_assert_eq!(reason, CleanupReason::Completed { task_id }),
                (TaskStatus::Stopped, Some(task_id)) => prop_assert_eq!(reason, CleanupReason::TaskStopped { task_id }),
                (TaskStatus::Completed | TaskStatus::Stopped, None)
                | (TaskStatus::Running | TaskStatus::Interrupted, _) => prop_assert_eq!(reason, CleanupReason::Archived),
            }
        }
    }
}
