//! Inspection of the supervision tree: the ownership recorded in the store,
//! walked from its roots, with each node's actor checked against it. The
//! actor tree must mirror the stored tree exactly; every difference is
//! reported, never silently repaired here.

use std::collections::HashSet;

use holarchy_supervision::workspace::Place;
use holarchy_supervision::{
    AgentId, AgentRecord, TaskKind, TaskRecord, TaskStatus, WaitRecord, WaitStatus,
};
use ractor::{ActorCell, ActorId, ActorStatus};

use crate::store::StoreError;
use crate::{workspace_plane, Ctx};

/// One node: an agent, a task or a wait, and whether its actor runs.
#[derive(Debug, Clone)]
pub enum Node {
    Agent {
        record: AgentRecord,
        actor_alive: bool,
        /// Where its commands run now.
        place: Place,
        children: Vec<Node>,
    },
    Task {
        record: TaskRecord,
        actor_alive: bool,
    },
    Wait {
        record: WaitRecord,
        actor_alive: bool,
    },
}

#[derive(Debug, Clone, Default)]
pub struct TreeReport {
    pub roots: Vec<Node>,
    /// Where the actor tree and the stored tree disagree.
    pub mismatches: Vec<String>,
    pub agents: usize,
    pub tasks: usize,
    pub waits: usize,
}

fn alive(cell: &ActorCell) -> bool {
    matches!(
        cell.get_status(),
        ActorStatus::Running | ActorStatus::Upgrading | ActorStatus::Starting
    )
}

fn child_ids(cell: &ActorCell) -> HashSet<ActorId> {
    cell.get_children().iter().map(ActorCell::get_id).collect()
}

/// Walks the stored tree from `roots` (live agents) and checks each actor.
/// With `whole_runtime`, also reports running actors the walk never met.
pub fn inspect(
    ctx: &Ctx,
    roots: Vec<AgentRecord>,
    whole_runtime: bool,
) -> Result<TreeReport, StoreError> {
    let mut report = TreeReport::default();
    let mut seen_agents: HashSet<AgentId> = HashSet::new();
    let root_cell = ctx.root();
    for record in roots {
        let parent_cell = match record.supervisor_agent_id {
            None => root_cell.clone(),
            Some(sup) => ctx.directory.get(sup).map(|e| e.actor.get_cell()),
        };
        let node = walk(ctx, record, parent_cell, &mut report, &mut seen_agents)?;
        report.roots.push(node);
    }
    if whole_runtime {
        for (agent_id, _) in ctx.directory.agents() {
            if !seen_agents.contains(&agent_id) {
                report.mismatches.push(format!(
                    "agent {agent_id} has a running actor but is not live in the store"
                ));
            }
        }
    }
    Ok(report)
}

fn walk(
    ctx: &Ctx,
    record: AgentRecord,
    expected_parent: Option<ActorCell>,
    report: &mut TreeReport,
    seen: &mut HashSet<AgentId>,
) -> Result<Node, StoreError> {
    let agent_id = record.id;
    seen.insert(agent_id);
    report.agents += 1;
    let cell = ctx.directory.get(agent_id).map(|e| e.actor.get_cell());
    let actor_alive = cell.as_ref().is_some_and(alive);
    if !actor_alive {
        report.mismatches.push(format!(
            "agent {agent_id} is live in the store but its actor is not running"
        ));
    }
    if let (Some(cell), Some(parent)) = (&cell, &expected_parent) {
        if !child_ids(parent).contains(&cell.get_id()) {
            let owner = record
                .supervisor_agent_id
                .map_or("the runtime".to_owned(), |s| s.to_string());
            report.mismatches.push(format!(
                "agent {agent_id}'s actor is not linked under {owner}"
            ));
        }
    }
    let mut children = Vec::new();
    for task in ctx.store.tasks_of(agent_id)? {
        if task.status != TaskStatus::Running {
            // An ended task still holding its child's worktree is shown:
            // the worktree is on disk until the task lets it go.
            if task.pending_worktree().is_some() {
                children.push(Node::Task {
                    record: task,
                    actor_alive: false,
                });
            }
            continue;
        }
        report.tasks += 1;
        let task_cell = match task.kind {
            TaskKind::ChildAgent { .. } => ctx.directory.task(task.id).map(|a| a.get_cell()),
            TaskKind::Command => ctx.directory.command(task.id).map(|a| a.get_cell()),
        };
        let task_alive = task_cell.as_ref().is_some_and(alive);
        if !task_alive {
            report.mismatches.push(format!(
                "task {} is running in the store but its actor is not",
                task.id
            ));
        } else if let (Some(owner), Some(task_cell)) = (&cell, &task_cell) {
            if !child_ids(owner).contains(&task_cell.get_id()) {
                report.mismatches.push(format!(
                    "task {}'s actor is not linked under agent {agent_id}",
                    task.id
                ));
            }
        }
        children.push(Node::Task {
            record: task,
            actor_alive: task_alive,
        });
    }
    for wait in ctx.store.waits_of(agent_id)? {
        if wait.status != WaitStatus::Armed {
            continue;
        }
        report.waits += 1;
        let wait_cell = ctx.directory.wait(wait.id).map(|a| a.get_cell());
        let wait_alive = wait_cell.as_ref().is_some_and(alive);
        if !wait_alive {
            report.mismatches.push(format!(
                "wait {} is armed in the store but its actor is not running",
                wait.id
            ));
        } else if let (Some(owner), Some(wait_cell)) = (&cell, &wait_cell) {
            if !child_ids(owner).contains(&wait_cell.get_id()) {
                report.mismatches.push(format!(
                    "wait {}'s actor is not linked under agent {agent_id}",
                    wait.id
                ));
            }
        }
        children.push(Node::Wait {
            record: wait,
            actor_alive: wait_alive,
        });
    }
    for child in ctx.store.children_of(agent_id)? {
        let Some(child) = ctx.store.agent(child)? else {
            report.mismatches.push(format!(
                "agent {agent_id} supervises {child}, which has no record"
            ));
            continue;
        };
        if !child.state.is_live() || !seen.insert(child.id) {
            continue;
        }
        seen.remove(&child.id);
        children.push(walk(ctx, child, cell.clone(), report, seen)?);
    }
    Ok(Node::Agent {
        place: workspace_plane::place(ctx, agent_id)?,
        record,
        actor_alive,
        children,
    })
}
