//! The JSON shapes of records as tools, brains and the API's JSON views
//! show them: tasks, waits, work items, places and worktrees. Data in,
//! JSON out: every layer may use them.

use holarchy_supervision::workspace::{Place, Worktree};
use holarchy_supervision::{TaskKind, TaskRecord, WaitKind, WaitRecord, WorkItemRecord};
use serde_json::{json, Value};

pub fn wait_json(wait: &WaitRecord) -> Value {
    let deadline = match wait.kind {
        WaitKind::Timer { deadline_ms } => Some(deadline_ms),
        WaitKind::Trigger { .. } => None,
    };
    json!({
        "wait_id": wait.id.to_string(),
        "kind": wait.kind.name(),
        "status": wait.status.name(),
        "reason": wait.reason,
        "work_item_id": wait.work_item_id.map(|w| w.to_string()),
        "deadline_ms": deadline,
    })
}

pub fn work_json(item: &WorkItemRecord) -> Value {
    json!({
        "work_item_id": item.id.to_string(),
        "objective": item.objective,
        "status": item.status.name(),
        "plan": item.plan.iter().map(|s| json!({ "title": s.title, "status": s.status.name() })).collect::<Vec<_>>(),
    })
}

pub fn task_json(task: &TaskRecord) -> Value {
    let child = match task.kind {
        TaskKind::ChildAgent { child_agent_id } => Some(child_agent_id.to_string()),
        TaskKind::Command => None,
    };
    json!({
        "task_id": task.id.to_string(),
        "task_kind": task.kind.name(),
        "label": task.label,
        "status": task.status.name(),
        "child_agent_id": child,
        "command": task.command,
        "exit": task.exit.map(|e| e.describe()),
        "output": task.output,
        "ran_in": task.place.as_ref().map(place_json),
        "worktree": task.worktree.as_ref().map(worktree_json),
    })
}

pub fn place_json(place: &Place) -> Value {
    json!({ "workspace_id": place.workspace_id, "dir": place.dir.display().to_string() })
}

pub fn worktree_json(worktree: &Worktree) -> Value {
    json!({
        "path": worktree.path.display().to_string(),
        "branch": worktree.branch,
        "repository": worktree.repo.display().to_string(),
        "removed": worktree.removed,
    })
}
