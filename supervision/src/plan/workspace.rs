//! An agent's places, decided: its workspace projection changed (attach,
//! detach, switch) with the event that says how, a work item created or
//! updated, and a child's git worktree marked removed once git let go.

use crate::effect::{Batch, Plan, Write};
use crate::work::{self, WorkError, WorkUpdate};
use crate::workspace::{Projection, Worktree};
use crate::{AgentId, EventKind, TaskRecord, WorkItemId, WorkItemRecord};

/// How a projection changed, for its event.
#[derive(Debug, Clone)]
pub struct Change {
    pub workspace_id: String,
    pub what: &'static str,
    pub detail: String,
}

/// Records `projection`, changed as `change` says, at `now_ms`.
pub fn changed(mut projection: Projection, change: Change, now_ms: u64) -> (Plan, Projection) {
    projection.updated_at_ms = now_ms;
    let batch = Batch::new()
        .event(
            projection.agent_id,
            EventKind::WorkspaceChanged {
                workspace_id: change.workspace_id,
                change: change.what.into(),
                detail: change.detail,
            },
        )
        .write(Write::PutWorkspaces(projection.clone()));
    (Plan::writes(batch), projection)
}

/// Applies `update` to `owner`'s work items (as read), a new item taking
/// `new_id`, at `now_ms`: the item and the plan that records it, or why
/// the update is refused (see [`work::apply`]).
pub fn work_item(
    owner: AgentId,
    items: &[WorkItemRecord],
    update: WorkUpdate,
    new_id: WorkItemId,
    now_ms: u64,
) -> Result<(Plan, WorkItemRecord), WorkError> {
    let item = work::apply(owner, items, update, new_id, now_ms)?;
    let batch = Batch::new()
        .event(
            owner,
            EventKind::WorkItemUpdated {
                work_item_id: item.id,
                status: item.status.name().into(),
                objective: item.objective.clone(),
            },
        )
        .write(Write::PutWorkItem(item.clone()));
    Ok((Plan::writes(batch), item))
}

/// `task`'s worktree, removed from disk at `now_ms`; `None` if it has none
/// left to remove as read.
pub fn worktree_removed(task: &TaskRecord, now_ms: u64) -> Option<(Plan, Worktree)> {
    let worktree = task.pending_worktree()?.clone();
    let task = TaskRecord {
        worktree: Some(Worktree {
            removed: true,
            ..worktree.clone()
        }),
        updated_at_ms: now_ms,
        ..task.clone()
    };
    let detail = format!("worktree {} removed", worktree.path.display());
    Some((Plan::writes(Batch::new().put_task(task, detail)), worktree))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use proptest::prelude::*;

    use super::*;
    use crate::{TaskId, TaskKind};

    proptest! {
        /// A worktree is marked removed once, and only one not yet removed.
        #[test]
        fn a_worktree_is_marked_removed_once(has in any::<bool>(), removed in any::<bool>(), now in any::<u64>()) {
            let mut task = TaskRecord::running(
                TaskId::generate(),
                AgentId::generate(),
                TaskKind::ChildAgent { child_agent_id: AgentId::generate() },
                "child".into(),
                1,
            );
            if has {
                task.worktree = Some(Worktree {
                    repo: PathBuf::from("/r/.git"),
                    path: PathBuf::from("/w/t"),
                    branch: "holarchy/t".into(),
                    base: "abc".into(),
                    removed,
                });
            }
            match worktree_removed(&task, now) {
                Some((plan, _)) => {
                    prop_assert!(has && !removed);
                    let marked = matches!(plan.batch.writes.as_slice(),
                        [Write::PutTask(t)] if t.worktree.as_ref().is_some_and(|w| w.removed) && t.updated_at_ms == now);
                    prop_assert!(marked);
                }
                None => prop_assert!(!has || removed),
            }
        }

        /// A projection's change lands with its one event, stamped now.
        #[test]
        fn a_projection_change_lands_with_its_event(now in any::<u64>()) {
            let agent = AgentId::generate();
            let change = Change { workspace_id: "src".into(), what: "attached", detail: "/src".into() };
            let (plan, projection) = changed(Projection::home_only(agent, 1), change, now);
            prop_assert_eq!(projection.updated_at_ms, now);
            prop_assert_eq!(plan.batch.events.len(), 1);
            let put = matches!(plan.batch.writes.as_slice(), [Write::PutWorkspaces(p)] if p.agent_id == agent);
            prop_assert!(put);
        }
    }
}
