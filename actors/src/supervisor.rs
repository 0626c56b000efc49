//! What every supervisor does, whether it is the runtime (for self-owned
//! agents) or an agent (for its private children and task handles).
//!
//! A supervised actor that exits while its record is still live has
//! failed. Its whole linked subtree died with it, so a restart respawns the
//! subtree from the store, parents first. Past the restart intensity the
//! supervisor gives up: the subtree is cleaned up, the agent marked failed,
//! and its parent learns it through the task handle.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use holarchy_supervision::effect::Plan;
use holarchy_supervision::plan::finish;
use holarchy_supervision::restart::{RestartBudgets, RestartDecision};
use holarchy_supervision::{
    AgentId, AgentRecord, EventKind, TaskId, TaskKind, TaskRecord, TaskStatus, WaitId,
};
use ractor::{ActorCell, ActorProcessingErr, ActorStatus, SupervisionEvent};
use tracing::{error, warn};

use crate::directory::Member;
use crate::store::{Batch, StoreError};
use crate::{now_ms, Ctx};

pub mod cleanup;
mod relaunch;
mod respawn;

use relaunch::Relaunch;

use respawn::forget_subtree;
pub use respawn::{
    requeue_interrupted, respawn_subtree, spawn_agent, spawn_created, spawn_recovered, spawn_task,
    spawn_tree, spawn_wait,
};

/// What a supervisor keeps restart budgets for: its child agents, and the
/// actors of its tasks and waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Supervised {
    Agent(AgentId),
    Task(TaskId),
    Wait(WaitId),
}

/// One supervisor's restart budgets: a pointer until a child first fails.
pub type Budgets = RestartBudgets<Supervised>;

/// The task through which `child`'s supervisor holds it, if any.
pub fn handle_task_of(ctx: &Ctx, child: &AgentRecord) -> Result<Option<TaskRecord>, StoreError> {
    let Some(supervisor) = child.supervisor_agent_id else {
        return Ok(None);
    };
    Ok(ctx.reads().tasks_of(supervisor)?.into_iter().find(|t| {
        t.status == TaskStatus::Running
            && matches!(t.kind, TaskKind::ChildAgent { child_agent_id } if child_agent_id == child.id)
    }))
}

/// Ends a supervised child's subtree and its handle: completion, a stop,
/// or a failure. Tells the owner with a child-result message when asked.
pub async fn end_child(
    ctx: &Arc<Ctx>,
    child: AgentId,
    status: TaskStatus,
    output: String,
    notify_owner: bool,
) -> Result<Option<TaskId>, StoreError> {
    let Some(record) = ctx.reads().agent(child)? else {
        return Ok(None);
    };
    let handle = handle_task_of(ctx, &record)?;
    let task_id = handle.as_ref().map(|t| t.id);
    let extra = match &handle {
        Some(task) => finish::finish_handle(task, child, status, output, notify_owner, now_ms()),
        None => Plan::default(),
    };
    let reason = finish::end_reason(status, task_id);
    cleanup::run(ctx, child, reason, extra).await?;
    Ok(task_id)
}

/// The child and the reason, when a supervision event is an exit.
pub fn exit_of(event: SupervisionEvent) -> Option<(ActorCell, String)> {
    match event {
        SupervisionEvent::ActorFailed(child, err) => Some((child, err.to_string())),
        SupervisionEvent::ActorTerminated(child, _, reason) => {
            Some((child, reason.unwrap_or_else(|| "stopped".into())))
        }
        SupervisionEvent::ActorStarted(_) | SupervisionEvent::ProcessGroupChanged(_) => None,
    }
}

/// Handles the exit of a supervised actor, in its supervisor's `handle`,
/// with the supervisor's restart budgets. Never fails: a supervisor must
/// outlive any one child, so problems are logged.
pub async fn on_child_exit(
    ctx: &Arc<Ctx>,
    supervisor: ActorCell,
    budgets: &mut Budgets,
    child: ActorCell,
    reason: String,
) {
    if ctx.lifecycle.is_shutting_down() {
        return;
    }
    let result = match ctx.directory.remove_actor(child.get_id()) {
        // Forgotten on purpose already (a cleanup).
        None => Ok(()),
        Some(Member::Task(task_id)) => {
            relaunch::on_exit(ctx, budgets, Relaunch::Task(task_id), supervisor, reason);
            Ok(())
        }
        Some(Member::Wait(wait_id)) => {
            relaunch::on_exit(ctx, budgets, Relaunch::Wait(wait_id), supervisor, reason);
            Ok(())
        }
        // A process cannot be restarted: the task ends interrupted (its
        // group died with the actor) and its owner is told.
        Some(Member::Command(task_id)) => interrupt_command(ctx, task_id, &reason),
        Some(Member::Agent(agent_id)) => match decide(ctx, budgets, agent_id, &supervisor) {
            Ok(Some(decision)) => {
                // The restart runs as a task of its own under the structure
                // locks of the agent's whole subtree, so it never
                // interleaves with a spawn, a wait being armed or a cleanup
                // in it, and the supervisor's `handle` returns at once.
                let ctx = ctx.clone();
                let tasks = ctx.lifecycle.tasks.clone();
                tasks.spawn(async move {
                    let reads = ctx.reads();
                    let locked = ctx
                        .locks
                        .structure
                        .lock_subtree(agent_id, |agent| reads.children_of(agent))
                        .await;
                    let restarted = match locked {
                        Ok(_structure) => {
                            restart_agent(&ctx, agent_id, supervisor, reason, decision).await
                        }
                        Err(err) => Err(err.into()),
                    };
                    if let Err(err) = restarted {
                        error!(agent_id = %agent_id, error = %err, "restart failed");
                    }
                });
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(err) => Err(err.into()),
        },
    };
    if let Err(err) = result {
        error!(error = %err, "supervision step failed");
    }
}

/// Whether a child agent whose actor exited failed, and if so what its
/// supervisor's budget says. `None`: it was stopped on purpose (no longer
/// live in the store), or its supervisor is going down and takes it along
/// (the supervisor's own supervisor brings the whole subtree back).
fn decide(
    ctx: &Ctx,
    budgets: &mut Budgets,
    agent_id: AgentId,
    supervisor: &ActorCell,
) -> Result<Option<RestartDecision>, StoreError> {
    if !ctx
        .reads()
        .agent(agent_id)?
        .is_some_and(|r| r.state.is_live())
    {
        return Ok(None);
    }
    if supervisor.get_status() >= ActorStatus::Draining {
        return Ok(None);
    }
    let policy = ctx.config.restart_policy;
    Ok(Some(budgets.on_failure(
        Supervised::Agent(agent_id),
        policy,
        now_ms(),
    )))
}

fn interrupt_command(ctx: &Ctx, task_id: TaskId, reason: &str) -> Result<(), ActorProcessingErr> {
    if let Some(task) = ctx
        .reads()
        .task(task_id)?
        .filter(|t| t.status == TaskStatus::Running)
    {
        let plan =
            crate::apply::interrupt(ctx, &task, &format!("its actor stopped: {reason}"), true);
        match crate::apply::apply(ctx, plan) {
            // A cleanup ended the task first: its word stands.
            Err(StoreError::Precondition(_)) => return Ok(()),
            other => other?,
        }
    }
    Ok(())
}

async fn restart_agent(
    ctx: &Arc<Ctx>,
    agent_id: AgentId,
    supervisor: ActorCell,
    reason: String,
    decision: RestartDecision,
) -> Result<(), ActorProcessingErr> {
    // Read again under the locks: a cleanup may have ended it since.
    let Some(record) = ctx.reads().agent(agent_id)?.filter(|r| r.state.is_live()) else {
        return Ok(());
    };
    if supervisor.get_status() >= ActorStatus::Draining || ctx.lifecycle.is_shutting_down() {
        return Ok(());
    }
    forget_subtree(ctx, agent_id)?;
    match decision {
        RestartDecision::Restart => {
            let restarted = EventKind::AgentRestarted {
                reason: reason.clone(),
            };
            crate::apply::apply(ctx, Plan::writes(Batch::new().event(agent_id, restarted)))?;
            ctx.stats.restarts.fetch_add(1, Ordering::Relaxed);
            warn!(agent_id = %agent_id, reason = %reason, "restarting failed agent");
            let detail = format!("agent actor failed: {reason}");
            if let Err(err) = spawn_tree(ctx, record, supervisor.clone(), &detail).await {
                if supervisor.get_status() < ActorStatus::Draining {
                    give_up(ctx, agent_id, format!("restart failed: {err}"));
                }
            }
        }
        RestartDecision::GiveUp => {
            let policy = ctx.config.restart_policy;
            let why = format!(
                "restart intensity exceeded ({} in {} ms): {reason}",
                policy.max_restarts, policy.period_ms
            );
            give_up(ctx, agent_id, why);
        }
    }
    Ok(())
}

/// Marks the agent failed and cleans up its subtree, in a task of its own
/// (a cleanup never runs inside a `handle`).
fn give_up(ctx: &Arc<Ctx>, agent_id: AgentId, why: String) {
    ctx.stats.given_up.fetch_add(1, Ordering::Relaxed);
    warn!(agent_id = %agent_id, reason = %why, "giving up on agent");
    let ctx = ctx.clone();
    let tasks = ctx.lifecycle.tasks.clone();
    tasks.spawn(async move {
        let output = format!("failed: {why}");
        if let Err(err) = end_child(&ctx, agent_id, TaskStatus::Failed, output, true).await {
            error!(agent_id = %agent_id, error = %err, "could not record a failed agent");
        }
    });
}
