//! What every supervisor does, whether it is the runtime (for self-owned
//! agents) or an agent (for its private children and task handles).
//!
//! A supervised actor that exits while its record is still live has
//! failed. Its whole linked subtree died with it, so a restart respawns the
//! subtree from the store, parents first. Past the restart intensity the
//! supervisor gives up: the subtree is cleaned up, the agent marked failed,
//! and its parent learns it through the task handle.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use holarchy_supervision::cleanup::CleanupReason;
use holarchy_supervision::restart::{RestartBudgets, RestartDecision};
use holarchy_supervision::{
    AgentId, AgentRecord, EventKind, MessageEvent, MessageId, MessageRecord, MessageStatus,
    Provenance, RunOutcome, TaskId, TaskKind, TaskRecord, TaskStatus, WaitId, WaitRecord,
    WaitStatus,
};
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, ActorStatus, SupervisionEvent};
use tracing::{error, warn};

use crate::agent::{AgentActor, AgentArgs, AgentMsg};
use crate::directory::{DirectoryEntry, Member};
use crate::store::{Batch, StoreError, Write};
use crate::task::{TaskActor, TaskSnapshot};
use crate::wait::WaitActor;
use crate::{cleanup, command_plane, now_ms, Ctx};

/// Spawns one agent actor under `supervisor` with the given queue, and
/// registers it. Returns `None` (and stops the new actor) if the agent was
/// cleaned up while it started.
pub async fn spawn_agent(
    ctx: &Arc<Ctx>,
    record: AgentRecord,
    queue: Vec<MessageId>,
    supervisor: ActorCell,
    held: bool,
) -> Result<Option<ActorRef<AgentMsg>>, ActorProcessingErr> {
    let agent_id = record.id;
    let visibility = record.profile.visibility;
    let (actor, _) = Actor::spawn_linked(
        None,
        AgentActor::new(ctx.clone()),
        AgentArgs {
            record,
            queue,
            held,
        },
        supervisor,
    )
    .await?;
    let entry = DirectoryEntry {
        actor: actor.clone(),
        visibility,
    };
    ctx.directory.insert(agent_id, entry);
    // A restart can race a cleanup of the same agent. A cleanup commits
    // before it forgets actors, and this check follows the registration, so
    // one of the two always sees the other: no actor outlives its record.
    if !ctx
        .store
        .agent(agent_id)?
        .is_some_and(|r| r.state.is_live())
    {
        ctx.directory.remove_actor(actor.get_id());
        actor.stop(Some("ended while starting".into()));
        return Ok(None);
    }
    Ok(Some(actor))
}

/// Spawns the task actor of a running task under its owner's actor.
pub async fn spawn_task(
    ctx: &Ctx,
    task: &TaskRecord,
    owner: ActorCell,
) -> Result<(), ActorProcessingErr> {
    let snapshot = TaskSnapshot {
        task_id: task.id,
        owner_agent_id: task.owner_agent_id,
    };
    let (actor, _) = Actor::spawn_linked(None, TaskActor, snapshot, owner).await?;
    ctx.directory.insert_task(task.id, actor);
    Ok(())
}

/// Spawns the wait actor of an armed wait under its owner's actor.
pub async fn spawn_wait(
    ctx: &Arc<Ctx>,
    wait: &WaitRecord,
    owner: ActorCell,
) -> Result<(), ActorProcessingErr> {
    let (actor, _) =
        Actor::spawn_linked(None, WaitActor::new(ctx.clone()), wait.clone(), owner).await?;
    ctx.directory.insert_wait(wait.id, actor.clone());
    if !ctx
        .store
        .wait(wait.id)?
        .is_some_and(|w| w.status == WaitStatus::Armed)
    {
        ctx.directory.remove_wait(wait.id);
        actor.stop(Some("ended while starting".into()));
    }
    Ok(())
}

/// The agent's pending messages in queue order, and a batch that puts an
/// in-flight one back to queued and closes its run as interrupted.
pub fn requeue_interrupted(
    ctx: &Ctx,
    agent_id: AgentId,
    reason: &str,
) -> Result<(Batch, Vec<MessageId>), StoreError> {
    let pending = ctx.store.pending_messages(agent_id)?;
    let mut batch = Batch::new();
    let mut queue = Vec::with_capacity(pending.len());
    for mut message in pending {
        queue.push(message.id);
        if let MessageStatus::Handling { run_id } = message.status {
            batch = batch.event(
                agent_id,
                EventKind::RunFinished {
                    run_id,
                    message_id: message.id,
                    outcome: RunOutcome::Interrupted,
                    detail: reason.to_owned(),
                },
            );
            message.status = message
                .status
                .next(MessageEvent::Requeue)
                .unwrap_or(message.status);
            // Guarded: a cleanup may have cancelled it since it was read.
            batch = batch.write(Write::Requeue(message));
        }
    }
    Ok((batch, queue))
}

/// Respawns `record`'s agent under `supervisor`, then every live agent it
/// supervises (recursively, parents first) and every running task handle,
/// each from its stored state. Every agent is held (no turn starts) until
/// the whole subtree runs, so no turn reshapes the tree mid-way; a node
/// cleaned up meanwhile is skipped. Returns how many agents run again.
pub async fn spawn_tree(
    ctx: &Arc<Ctx>,
    record: AgentRecord,
    supervisor: ActorCell,
    reason: &str,
) -> Result<usize, ActorProcessingErr> {
    let root = record.id;
    let mut todo = VecDeque::from([(root, supervisor)]);
    let mut started = Vec::new();
    while let Some((agent_id, supervisor)) = todo.pop_front() {
        // Read again: a cleanup may have ended it since it was queued here.
        let Some(record) = ctx.store.agent(agent_id)?.filter(|r| r.state.is_live()) else {
            continue;
        };
        let (batch, queue) = requeue_interrupted(ctx, agent_id, reason)?;
        if !batch.is_empty() {
            ctx.store.commit(batch)?;
        }
        let actor = match spawn_agent(ctx, record, queue, supervisor, true).await {
            Ok(Some(actor)) => actor,
            Ok(None) => continue,
            Err(err) if agent_id == root => return Err(err),
            // Its supervisor ended while the subtree came back.
            Err(err) => {
                warn!(agent_id = %agent_id, error = %err, "skipped respawning a descendant");
                continue;
            }
        };
        for task in ctx.store.tasks_of(agent_id)? {
            if task.status != TaskStatus::Running {
                continue;
            }
            match task.kind {
                TaskKind::ChildAgent { .. } => {
                    if let Err(err) = spawn_task(ctx, &task, actor.get_cell()).await {
                        warn!(task_id = %task.id, error = %err, "skipped respawning a task handle");
                    }
                }
                // Its process died with the old actor; the owner learns
                // of it once released.
                TaskKind::Command => {
                    let (batch, _) = command_plane::interrupt(&task, "its agent restarted", true);
                    ctx.store.commit(batch)?;
                }
            }
        }
        for wait in ctx.store.waits_of(agent_id)? {
            if wait.status == WaitStatus::Armed {
                if let Err(err) = spawn_wait(ctx, &wait, actor.get_cell()).await {
                    warn!(wait_id = %wait.id, error = %err, "skipped re-arming a wait");
                }
            }
        }
        for child in ctx.store.children_of(agent_id)? {
            todo.push_back((child, actor.get_cell()));
        }
        started.push((agent_id, actor));
    }
    let count = started.len();
    for (agent_id, actor) in started {
        // Messages that reached the store after the queue was read (a
        // child's result, say) would otherwise wait for the next start.
        let pending = ctx
            .store
            .pending_messages(agent_id)?
            .into_iter()
            .map(|m| m.id)
            .collect();
        let _ = actor.cast(AgentMsg::Release { pending });
    }
    Ok(count)
}

/// Respawns `agent_id`'s live subtree under `supervisor` after its actors
/// died with their supervisor (a root partition), outside any restart
/// budget: the agents did not fail. Returns how many agents run again.
pub async fn respawn_subtree(
    ctx: &Arc<Ctx>,
    agent_id: AgentId,
    supervisor: ActorCell,
    reason: &str,
) -> Result<usize, ActorProcessingErr> {
    let store = &ctx.store;
    let _structure = ctx
        .structure
        .lock_subtree(agent_id, |agent| store.children_of(agent))
        .await?;
    let Some(record) = store.agent(agent_id)?.filter(|r| r.state.is_live()) else {
        return Ok(0);
    };
    forget_subtree(ctx, agent_id)?;
    spawn_tree(ctx, record, supervisor, reason).await
}

/// Forgets every actor of `root`'s subtree: they died with it.
fn forget_subtree(ctx: &Ctx, root: AgentId) -> Result<(), StoreError> {
    let mut todo = vec![root];
    while let Some(agent_id) = todo.pop() {
        ctx.directory.remove(agent_id);
        for task in ctx.store.tasks_of(agent_id)? {
            ctx.directory.remove_task(task.id);
            ctx.directory.remove_command(task.id);
        }
        for wait in ctx.store.waits_of(agent_id)? {
            ctx.directory.remove_wait(wait.id);
        }
        todo.extend(ctx.store.children_of(agent_id)?);
    }
    Ok(())
}

/// The task through which `child`'s supervisor holds it, if any.
pub fn handle_task_of(ctx: &Ctx, child: &AgentRecord) -> Result<Option<TaskRecord>, StoreError> {
    let Some(supervisor) = child.supervisor_agent_id else {
        return Ok(None);
    };
    Ok(ctx.store.tasks_of(supervisor)?.into_iter().find(|t| {
        t.status == TaskStatus::Running
            && matches!(t.kind, TaskKind::ChildAgent { child_agent_id } if child_agent_id == child.id)
    }))
}

/// A batch ending `task` with `status` and `output`, and telling its owner
/// with a child-result message. Returns the batch and the message's id.
pub fn finish_handle(
    task: &TaskRecord,
    child: AgentId,
    status: TaskStatus,
    output: String,
    notify_owner: bool,
) -> (Batch, Option<MessageId>) {
    let mut task = task.clone();
    task.status = task.status.end(status).unwrap_or(task.status);
    task.output = Some(output.clone());
    task.updated_at_ms = now_ms();
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
    if !notify_owner {
        return (batch, None);
    }
    let message = MessageRecord::queued(
        owner,
        Provenance::ChildResult { agent_id: child },
        output,
        None,
        now_ms(),
    );
    let message_id = message.id;
    batch = batch.put_queued(message);
    (batch, Some(message_id))
}

/// Puts a message already in the store on its agent's queue.
pub fn wake(ctx: &Ctx, agent_id: AgentId, message_id: MessageId) {
    if let Some(entry) = ctx.directory.get(agent_id) {
        // A parent that is not running picks the message up from the store
        // when it next starts.
        let _ = entry.actor.cast(AgentMsg::Wake(message_id));
    }
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
    let Some(record) = ctx.store.agent(child)? else {
        return Ok(None);
    };
    let handle = handle_task_of(ctx, &record)?;
    let task_id = handle.as_ref().map(|t| t.id);
    let (extra, message) = match &handle {
        Some(task) => finish_handle(task, child, status, output, notify_owner),
        None => (Batch::new(), None),
    };
    let reason = match (status, task_id) {
        (TaskStatus::Completed, Some(task_id)) => CleanupReason::Completed { task_id },
        (TaskStatus::Stopped, Some(task_id)) => CleanupReason::TaskStopped { task_id },
        (TaskStatus::Failed, task_id) => CleanupReason::Failed { task_id },
        (_, _) => CleanupReason::Archived,
    };
    cleanup::run(ctx, child, reason, extra).await?;
    if let (Some(owner), Some(message_id)) = (record.supervisor_agent_id, message) {
        wake(ctx, owner, message_id);
    }
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
    budgets: &mut RestartBudgets<AgentId>,
    child: ActorCell,
    reason: String,
) {
    if ctx.shutting_down.load(Ordering::Acquire) {
        return;
    }
    let result = match ctx.directory.remove_actor(child.get_id()) {
        // Forgotten on purpose already (a cleanup).
        None => Ok(()),
        Some(Member::Task(task_id)) => restart_task(ctx, task_id, supervisor).await,
        Some(Member::Wait(wait_id)) => restart_wait(ctx, wait_id, supervisor).await,
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
                tokio::spawn(async move {
                    let store = &ctx.store;
                    let locked = ctx
                        .structure
                        .lock_subtree(agent_id, |agent| store.children_of(agent))
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
    budgets: &mut RestartBudgets<AgentId>,
    agent_id: AgentId,
    supervisor: &ActorCell,
) -> Result<Option<RestartDecision>, StoreError> {
    if !ctx
        .store
        .agent(agent_id)?
        .is_some_and(|r| r.state.is_live())
    {
        return Ok(None);
    }
    if supervisor.get_status() >= ActorStatus::Draining {
        return Ok(None);
    }
    let policy = ctx.config.restart_policy;
    Ok(Some(budgets.on_failure(agent_id, policy, now_ms())))
}

async fn restart_task(
    ctx: &Ctx,
    task_id: TaskId,
    owner: ActorCell,
) -> Result<(), ActorProcessingErr> {
    if let Some(task) = ctx
        .store
        .task(task_id)?
        .filter(|t| t.status == TaskStatus::Running)
    {
        warn!(task_id = %task_id, "task actor exited; restarting it");
        spawn_task(ctx, &task, owner).await?;
    }
    Ok(())
}

fn interrupt_command(ctx: &Ctx, task_id: TaskId, reason: &str) -> Result<(), ActorProcessingErr> {
    if let Some(task) = ctx
        .store
        .task(task_id)?
        .filter(|t| t.status == TaskStatus::Running)
    {
        let (batch, message) =
            command_plane::interrupt(&task, &format!("its actor stopped: {reason}"), true);
        ctx.store.commit(batch)?;
        if let Some(message_id) = message {
            wake(ctx, task.owner_agent_id, message_id);
        }
    }
    Ok(())
}

async fn restart_wait(
    ctx: &Arc<Ctx>,
    wait_id: WaitId,
    owner: ActorCell,
) -> Result<(), ActorProcessingErr> {
    if let Some(wait) = ctx
        .store
        .wait(wait_id)?
        .filter(|w| w.status == WaitStatus::Armed)
    {
        warn!(wait_id = %wait_id, "wait actor exited while armed; restarting it");
        spawn_wait(ctx, &wait, owner).await?;
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
    let Some(record) = ctx.store.agent(agent_id)?.filter(|r| r.state.is_live()) else {
        return Ok(());
    };
    if supervisor.get_status() >= ActorStatus::Draining {
        return Ok(());
    }
    forget_subtree(ctx, agent_id)?;
    match decision {
        RestartDecision::Restart => {
            ctx.store.commit(Batch::new().event(
                agent_id,
                EventKind::AgentRestarted {
                    reason: reason.clone(),
                },
            ))?;
            ctx.restarts.fetch_add(1, Ordering::Relaxed);
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
    ctx.given_up.fetch_add(1, Ordering::Relaxed);
    warn!(agent_id = %agent_id, reason = %why, "giving up on agent");
    let ctx = ctx.clone();
    tokio::spawn(async move {
        let output = format!("failed: {why}");
        if let Err(err) = end_child(&ctx, agent_id, TaskStatus::Failed, output, true).await {
            error!(agent_id = %agent_id, error = %err, "could not record a failed agent");
        }
    });
}
