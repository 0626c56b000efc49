//! The actors of an agent's tasks and waits, restarted from their records
//! when they exit while the task still runs or the wait is still armed,
//! within their owner's restart budgets. Past the budget the owner gives
//! up on them: a child's handle fails the child; a wait is cancelled and
//! its owner told, so an actor that dies at every start costs a few
//! restarts, not a loop.

use std::sync::Arc;

use holarchy_supervision::restart::RestartDecision;
use holarchy_supervision::{
    EventKind, MessageRecord, Provenance, TaskId, TaskKind, TaskRecord, TaskStatus, WaitId,
    WaitRecord, WaitStatus,
};
use ractor::{ActorCell, ActorProcessingErr, ActorStatus};
use tracing::{error, warn};

use super::{give_up, spawn_task, spawn_wait, Budgets, Supervised};
use crate::store::{Batch, StoreError, Write};
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
    fn live_owner(self, ctx: &Ctx) -> Result<Option<holarchy_supervision::AgentId>, StoreError> {
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
    match member.live_owner(ctx) {
        Ok(Some(_)) => {}
        Ok(None) => return,
        Err(err) => {
            error!(error = %err, "reading an exited task or wait failed");
            return;
        }
    }
    let ctx = ctx.clone();
    match budgets.on_failure(member.key(), ctx.config.restart_policy, now_ms()) {
        RestartDecision::Restart => {
            tokio::spawn(async move {
                if let Err(err) = restart(&ctx, member, owner).await {
                    error!(error = %err, "restarting a task or wait actor failed");
                }
            });
        }
        RestartDecision::GiveUp => {
            tokio::spawn(async move {
                if let Err(err) = abandon(&ctx, member, &reason).await {
                    error!(error = %err, "giving up on a task or wait actor failed");
                }
            });
        }
    }
}

fn running_task(ctx: &Ctx, task_id: TaskId) -> Result<Option<TaskRecord>, StoreError> {
    Ok(ctx
        .store
        .task(task_id)?
        .filter(|t| t.status == TaskStatus::Running))
}

fn armed_wait(ctx: &Ctx, wait_id: WaitId) -> Result<Option<WaitRecord>, StoreError> {
    Ok(ctx
        .store
        .wait(wait_id)?
        .filter(|w| w.status == WaitStatus::Armed))
}

/// The restart itself, under the owner's structure lock (so never beside a
/// cleanup of the owner, which takes that lock): nothing to do unless the
/// task still runs (or the wait is still armed) and its owner is live with
/// its actor not going down, all read again under the lock.
async fn restart(
    ctx: &Arc<Ctx>,
    member: Relaunch,
    owner: ActorCell,
) -> Result<(), ActorProcessingErr> {
    let Some(owner_id) = member.live_owner(ctx)? else {
        return Ok(());
    };
    let _structure = ctx.locks.structure.lock(owner_id).await;
    if ctx.lifecycle.is_shutting_down() {
        return Ok(());
    }
    let owner_live = ctx
        .store
        .agent(owner_id)?
        .is_some_and(|a| a.state.is_live());
    if !owner_live || owner.get_status() >= ActorStatus::Draining {
        return Ok(());
    }
    match member {
        Relaunch::Task(id) => {
            if let Some(task) = running_task(ctx, id)? {
                warn!(task_id = %id, agent_id = %owner_id, "task actor exited; restarting it");
                spawn_task(ctx, &task, owner).await?;
            }
        }
        Relaunch::Wait(id) => {
            if let Some(wait) = armed_wait(ctx, id)? {
                warn!(wait_id = %id, agent_id = %owner_id, "wait actor exited while armed; restarting it");
                spawn_wait(ctx, &wait, owner).await?;
            }
        }
    }
    Ok(())
}

/// Past the budget: a child's handle that keeps dying fails the child (as
/// its own failures would); a wait is cancelled and its owner gets a
/// message saying so, since the wake it waits for will not come.
async fn abandon(ctx: &Arc<Ctx>, member: Relaunch, reason: &str) -> Result<(), StoreError> {
    let why = format!("its actor kept failing past the restart intensity: {reason}");
    match member {
        Relaunch::Task(id) => {
            let Some(task) = running_task(ctx, id)? else {
                return Ok(());
            };
            warn!(task_id = %id, agent_id = %task.owner_agent_id, "giving up on a task actor");
            match task.kind {
                TaskKind::ChildAgent { child_agent_id } => give_up(ctx, child_agent_id, why),
                // A command's actor is never relaunched: its exit
                // interrupts the task instead.
                TaskKind::Command => {}
            }
            Ok(())
        }
        Relaunch::Wait(id) => {
            let Some(wait) = armed_wait(ctx, id)? else {
                return Ok(());
            };
            let owner = wait.owner_agent_id;
            let _structure = ctx.locks.structure.lock(owner).await;
            warn!(wait_id = %id, agent_id = %owner, "giving up on a wait actor; cancelling the wait");
            let mut ended = wait;
            ended.status = WaitStatus::Cancelled;
            ended.updated_at_ms = now_ms();
            let message = MessageRecord::queued(
                owner,
                Provenance::Runtime,
                format!("wait {id} was cancelled: {why}"),
                None,
                now_ms(),
            );
            let message_id = message.id;
            let batch = Batch::new()
                .event(
                    owner,
                    EventKind::WaitUpdated {
                        wait_id: id,
                        kind: ended.kind.name().into(),
                        status: ended.status,
                    },
                )
                .event(
                    owner,
                    EventKind::MessageQueued {
                        message_id,
                        provenance: message.provenance,
                    },
                )
                .write(Write::EndWait(ended))
                .write(Write::PutMessage(message));
            match ctx.store.commit(batch) {
                // It fired or was cancelled meanwhile: nothing to give up.
                Err(StoreError::Precondition(_)) => return Ok(()),
                other => other?,
            }
            if let Some(actor) = ctx.directory.remove_wait(id) {
                actor.stop(Some("given up".into()));
            }
            ctx.directory.wake(owner, message_id);
            Ok(())
        }
    }
}
