//! The actors of an agent's tasks and waits, restarted from their records
//! when they exit while the task still runs or the wait is still armed,
//! within their owner's restart budgets. Past the budget, or when the
//! actor cannot be started again, the owner gives up on them: a child's
//! handle fails the child; a wait is cancelled and its owner told. So an
//! actor that dies at every start costs a few restarts, not a loop.

use std::sync::Arc;

use holarchy_supervision::plan;
use holarchy_supervision::restart::RestartDecision;
use holarchy_supervision::{
    AgentId, TaskId, TaskKind, TaskRecord, TaskStatus, WaitId, WaitRecord, WaitStatus,
};
use ractor::{ActorCell, ActorProcessingErr, ActorStatus};
use tracing::{error, warn};

use super::{give_up, spawn_task, spawn_wait, Budgets, Supervised};
use crate::store::StoreError;
use crate::structure::StructureGuard;
use crate::{now_ms, Ctx};

/// A child actor restarted from its record: a task's handle or a wait.
#[derive(Debug, Clone, Copy)]
pub(super) enum Relaunch {
    Task(TaskId),
    Wait(WaitId),
}

impl Relaunch {
    fn key(self) -> Supervised {
        match self {
            Relaunch::Task(id) => Supervised::Task(id),
            Relaunch::Wait(id) => Supervised::Wait(id),
        }
    }

    /// The owner, if the task still runs or the wait is still armed.
    fn live_owner(self, ctx: &Ctx) -> Result<Option<AgentId>, StoreError> {
        Ok(match self {
            Relaunch::Task(id) => running_task(ctx, id)?.map(|t| t.owner_agent_id),
            Relaunch::Wait(id) => armed_wait(ctx, id)?.map(|w| w.owner_agent_id),
        })
    }
}

/// Decides, in the owner's `handle`, what becomes of a task's or wait's
/// actor that exited: nothing if its record ended or its owner is going
/// down with it, else a restart or, past the budget, giving up. Both run
/// in a task of their own.
pub(super) fn on_exit(
    ctx: &Arc<Ctx>,
    budgets: &mut Budgets,
    member: Relaunch,
    owner: ActorCell,
    reason: String,
) {
    if owner.get_status() >= ActorStatus::Draining {
        return;
    }
    let owner_id = match member.live_owner(ctx) {
        Ok(Some(owner_id)) => owner_id,
        Ok(None) => return,
        Err(err) => {
            error!(?member, error = %err, "reading an exited task or wait failed");
            return;
        }
    };
    let ctx = ctx.clone();
    let decision = budgets.on_failure(member.key(), ctx.config.restart_policy, now_ms());
    let tasks = ctx.lifecycle.tasks.clone();
    tasks.spawn(async move {
        let done = match decision {
            RestartDecision::Restart => restart(&ctx, member, owner, &reason).await,
            RestartDecision::GiveUp => {
                let why = format!("its actor kept failing past the restart intensity: {reason}");
                abandon(&ctx, member, owner, &why).await.map_err(Into::into)
            }
        };
        if let Err(err) = done {
            error!(?member, agent_id = %owner_id, error = %err, "supervising a task or wait actor failed");
        }
    });
}

fn running_task(ctx: &Ctx, task_id: TaskId) -> Result<Option<TaskRecord>, StoreError> {
    Ok(ctx
        .reads()
        .task(task_id)?
        .filter(|t| t.status == TaskStatus::Running))
}

fn armed_wait(ctx: &Ctx, wait_id: WaitId) -> Result<Option<WaitRecord>, StoreError> {
    Ok(ctx
        .reads()
        .wait(wait_id)?
        .filter(|w| w.status == WaitStatus::Armed))
}

/// The record of a task that still runs or a wait still armed.
enum Live {
    Task(TaskRecord),
    Wait(WaitRecord),
}

impl Live {
    fn read(ctx: &Ctx, member: Relaunch) -> Result<Option<Live>, StoreError> {
        Ok(match member {
            Relaunch::Task(id) => running_task(ctx, id)?.map(Live::Task),
            Relaunch::Wait(id) => armed_wait(ctx, id)?.map(Live::Wait),
        })
    }
}

/// Takes the owner's structure lock (so nothing here runs beside a cleanup
/// of the owner, which takes it) and reads, under it, the task that still
/// runs (or the wait still armed), after checking that the runtime is not
/// stopping and that the owner is live with its actor not going down.
/// `None`: nothing is left to do.
async fn lock_live_owner<'a>(
    ctx: &'a Ctx,
    member: Relaunch,
    owner: &ActorCell,
) -> Result<Option<(AgentId, Live, StructureGuard<'a>)>, StoreError> {
    let Some(owner_id) = member.live_owner(ctx)? else {
        return Ok(None);
    };
    let structure = ctx.locks.structure.lock(owner_id).await;
    if ctx.lifecycle.is_shutting_down() || owner.get_status() >= ActorStatus::Draining {
        return Ok(None);
    }
    let owner_live = ctx
        .reads()
        .agent(owner_id)?
        .is_some_and(|a| a.state.is_live());
    if !owner_live {
        return Ok(None);
    }
    Ok(Live::read(ctx, member)?.map(|live| (owner_id, live, structure)))
}

/// The restart itself. An actor that cannot be started again is given up
/// on at once: retrying would only fail the same way, unseen.
async fn restart(
    ctx: &Arc<Ctx>,
    member: Relaunch,
    owner: ActorCell,
    reason: &str,
) -> Result<(), ActorProcessingErr> {
    let Some((owner_id, live, structure)) = lock_live_owner(ctx, member, &owner).await? else {
        return Ok(());
    };
    warn!(?member, agent_id = %owner_id, reason, "task or wait actor exited; restarting it");
    let started = match live {
        Live::Task(task) => spawn_task(ctx, &task, owner.clone()).await,
        Live::Wait(wait) => spawn_wait(ctx, &wait, owner.clone()).await,
    };
    drop(structure);
    if let Err(err) = started {
        let why = format!("its actor could not be started again: {err}");
        abandon(ctx, member, owner, &why).await?;
    }
    Ok(())
}

/// Gives up on a task's or wait's actor: a child's handle that cannot live
/// fails the child (as its own failures would); a wait is cancelled and
/// its owner gets a message saying so, since the wake it waits for will
/// not come. Checked again under the owner's lock first, as a restart is.
async fn abandon(
    ctx: &Arc<Ctx>,
    member: Relaunch,
    owner: ActorCell,
    why: &str,
) -> Result<(), StoreError> {
    let Some((owner_id, live, structure)) = lock_live_owner(ctx, member, &owner).await? else {
        return Ok(());
    };
    match live {
        Live::Task(task) => {
            warn!(task_id = %task.id, agent_id = %owner_id, reason = why, "giving up on a task actor");
            // The child's cleanup takes its own locks, in a task of its own.
            drop(structure);
            match task.kind {
                TaskKind::ChildAgent { child_agent_id } => {
                    give_up(ctx, child_agent_id, why.to_owned());
                }
                // A command's actor is never relaunched: its exit
                // interrupts the task instead.
                TaskKind::Command => {}
            }
            Ok(())
        }
        Live::Wait(wait) => {
            let id = wait.id;
            warn!(wait_id = %id, agent_id = %owner_id, reason = why, "giving up on a wait actor; cancelling the wait");
            let plan = plan::wait::give_up(&wait, why, now_ms());
            match crate::apply::apply(ctx, plan) {
                // It fired or was cancelled meanwhile: nothing to give up.
                Err(StoreError::Precondition(_)) => return Ok(()),
                other => other?,
            }
            if let Some(actor) = ctx.directory.remove_wait(id) {
                actor.stop(Some("given up".into()));
            }
            drop(structure);
            Ok(())
        }
    }
}
