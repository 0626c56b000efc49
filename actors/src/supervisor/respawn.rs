//! Bringing supervised actors back from the store: one agent, a task
//! handle, a wait, or an agent's whole live subtree, parents first. Every
//! actor is started through the runtime's [`Factory`](crate::shared::Factory),
//! so this names no actor kind.

use std::collections::VecDeque;
use std::sync::Arc;

use holarchy_supervision::effect::Plan;
use holarchy_supervision::{
    AgentId, AgentRecord, EventKind, MessageEvent, MessageId, MessageStatus, RunOutcome, TaskKind,
    TaskRecord, TaskStatus, WaitRecord, WaitStatus,
};
use ractor::{ActorCell, ActorProcessingErr, ActorRef, ActorStatus};
use tracing::warn;

use crate::directory::DirectoryEntry;
use crate::limits::AgentSlots;
use crate::live::LiveView;
use crate::protocol::{AgentArgs, AgentMsg, TaskSnapshot};
use crate::store::{Batch, StoreError, Write};
use crate::Ctx;

/// Spawns one agent actor under `supervisor` with the given queue, and
/// registers it, giving back one of `slots` (a creation's) as it does.
/// Returns `None` (and stops the new actor) if the agent was cleaned up
/// while it started.
pub async fn spawn_agent(
    ctx: &Arc<Ctx>,
    record: AgentRecord,
    queue: Vec<MessageId>,
    supervisor: ActorCell,
    held: bool,
    slots: Option<&mut AgentSlots>,
) -> Result<Option<ActorRef<AgentMsg>>, ActorProcessingErr> {
    let agent_id = record.id;
    let actor = start_agent(ctx, record, queue, supervisor, held, slots).await?;
    keep_if_live(ctx, agent_id, actor)
}

/// [`spawn_agent`] for an agent whose record was just created:
/// `ends_before` is [`Store::agent_ends`](crate::store::Store::agent_ends)
/// as it was before that record's commit. Anything that ends the agent
/// must read the record first, so it commits after the record and counts
/// its end before that. An unchanged count after the registration thus
/// means nothing has ended the agent, and the record need not be read
/// back: a read waits whenever the store's writer is in a transaction,
/// which at full load held up creations by a fifth.
pub async fn spawn_created(
    ctx: &Arc<Ctx>,
    record: AgentRecord,
    queue: Vec<MessageId>,
    supervisor: ActorCell,
    ends_before: u64,
    slots: &mut AgentSlots,
) -> Result<Option<ActorRef<AgentMsg>>, ActorProcessingErr> {
    let agent_id = record.id;
    // Under its own lock, which a restarted partition's respawn of it takes
    // too: a partition that died after the commit may have listed it and
    // started it already; it never gets two actors.
    let _own = ctx.locks.structure.lock(agent_id).await;
    if ctx.directory.get(agent_id).is_some() {
        return Ok(None);
    }
    let actor = start_agent(ctx, record, queue, supervisor, false, Some(slots)).await?;
    if crate::apply::agent_ends(ctx) == ends_before {
        return Ok(Some(actor));
    }
    keep_if_live(ctx, agent_id, actor)
}

/// Stops a just-registered `actor` whose agent is no longer live.
///
/// A start can race a cleanup of the same agent. A cleanup commits before
/// it forgets actors, and this check follows the registration, so one of
/// the two always sees the other: no actor outlives its record.
fn keep_if_live(
    ctx: &Ctx,
    agent_id: AgentId,
    actor: ActorRef<AgentMsg>,
) -> Result<Option<ActorRef<AgentMsg>>, ActorProcessingErr> {
    if !ctx
        .reads()
        .agent(agent_id)?
        .is_some_and(|r| r.state.is_live())
    {
        ctx.directory.remove_actor(actor.get_id());
        actor.stop(Some("ended while starting".into()));
        return Ok(None);
    }
    Ok(Some(actor))
}

/// [`spawn_agent`] for recovery, without reading the record back:
/// recovery read it a moment ago and nothing can clean an agent up before
/// the daemon answers anyone (a million reads were 5% of recovery).
pub async fn spawn_recovered(
    ctx: &Arc<Ctx>,
    record: AgentRecord,
    queue: Vec<MessageId>,
    supervisor: ActorCell,
) -> Result<ActorRef<AgentMsg>, ActorProcessingErr> {
    // Not held one by one: the daemon's turn gate holds back those with
    // work until every agent is up.
    start_agent(ctx, record, queue, supervisor, false, None).await
}

/// Starts the actor and puts it in the directory, giving back one of
/// `slots` (a creation's) as it does.
async fn start_agent(
    ctx: &Arc<Ctx>,
    record: AgentRecord,
    queue: Vec<MessageId>,
    supervisor: ActorCell,
    held: bool,
    slots: Option<&mut AgentSlots>,
) -> Result<ActorRef<AgentMsg>, ActorProcessingErr> {
    let agent_id = record.id;
    let visibility = record.profile.visibility;
    let paused = record.state == holarchy_supervision::LifecycleState::Paused;
    let live = Arc::new(LiveView::new(agent_id));
    let namespace = ctx.namespaces.get(&record.namespace);
    let args = AgentArgs {
        record,
        queue,
        held,
        live: live.clone(),
        namespace: namespace.clone(),
    };
    let actor = ctx.factory.agent(ctx, args, supervisor).await?;
    let entry = DirectoryEntry {
        actor: actor.clone(),
        visibility,
        paused,
        live,
        namespace,
    };
    match slots {
        Some(slots) => ctx.directory.insert_reserved(agent_id, entry, slots),
        None => ctx.directory.insert(agent_id, entry),
    }
    Ok(actor)
}

/// Spawns the task actor of a running task under its owner's actor.
pub async fn spawn_task(
    ctx: &Arc<Ctx>,
    task: &TaskRecord,
    owner: ActorCell,
) -> Result<(), ActorProcessingErr> {
    let snapshot = TaskSnapshot {
        task_id: task.id,
        owner_agent_id: task.owner_agent_id,
    };
    let actor = ctx.factory.task(ctx, snapshot, owner).await?;
    ctx.directory.insert_task(task.id, actor.clone());
    // A task that ended while its actor started has nothing to supervise;
    // what ended it found no actor to stop.
    if !ctx
        .reads()
        .task(task.id)?
        .is_some_and(|t| t.status == TaskStatus::Running)
    {
        ctx.directory.remove_task(task.id);
        actor.stop(Some("ended while starting".into()));
        return Ok(());
    }
    exited_while_starting(ctx, &actor.get_cell())
}

/// Spawns the wait actor of an armed wait under its owner's actor.
pub async fn spawn_wait(
    ctx: &Arc<Ctx>,
    wait: &WaitRecord,
    owner: ActorCell,
) -> Result<(), ActorProcessingErr> {
    let actor = ctx.factory.wait(ctx, wait.clone(), owner).await?;
    let timer = matches!(wait.kind, holarchy_supervision::WaitKind::Timer { .. });
    ctx.directory.insert_wait(wait.id, actor.clone(), timer);
    if !ctx
        .reads()
        .wait(wait.id)?
        .is_some_and(|w| w.status == WaitStatus::Armed)
    {
        ctx.directory.remove_wait(wait.id);
        actor.stop(Some("ended while starting".into()));
        return Ok(());
    }
    exited_while_starting(ctx, &actor.get_cell())
}

/// An actor that exited before it was registered had its exit passed over
/// by its owner (nothing was registered yet to forget): it is taken back
/// out and its start reported failed, for the caller to decide. Checked
/// after the record's own end, so a timer that fired at once is no failure.
fn exited_while_starting(ctx: &Ctx, actor: &ActorCell) -> Result<(), ActorProcessingErr> {
    if actor.get_status() >= ActorStatus::Stopping
        && ctx.directory.remove_actor(actor.get_id()).is_some()
    {
        return Err("its actor exited while starting".into());
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
    let pending = ctx.reads().pending_messages(agent_id)?;
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
        let Some(record) = ctx.reads().agent(agent_id)?.filter(|r| r.state.is_live()) else {
            continue;
        };
        let (batch, queue) = requeue_interrupted(ctx, agent_id, reason)?;
        crate::apply::apply(ctx, Plan::writes(batch))?;
        let actor = match spawn_agent(ctx, record, queue, supervisor, true, None).await {
            Ok(Some(actor)) => actor,
            Ok(None) => continue,
            Err(err) if agent_id == root => return Err(err),
            // Its supervisor ended while the subtree came back.
            Err(err) => {
                warn!(agent_id = %agent_id, error = %err, "skipped respawning a descendant");
                continue;
            }
        };
        for task in ctx.reads().tasks_of(agent_id)? {
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
                    let plan = crate::apply::interrupt(ctx, &task, "its agent restarted", true);
                    match crate::apply::apply(ctx, plan) {
                        // Its actor ended it on its way down: that stands.
                        Err(StoreError::Precondition(_)) => {}
                        other => other?,
                    }
                }
            }
        }
        for wait in ctx.reads().waits_of(agent_id)? {
            if wait.status == WaitStatus::Armed {
                if let Err(err) = spawn_wait(ctx, &wait, actor.get_cell()).await {
                    warn!(wait_id = %wait.id, error = %err, "skipped re-arming a wait");
                }
            }
        }
        for child in ctx.reads().children_of(agent_id)? {
            todo.push_back((child, actor.get_cell()));
        }
        started.push((agent_id, actor));
    }
    let count = started.len();
    for (agent_id, actor) in started {
        // Messages that reached the store after the queue was read (a
        // child's result, say) would otherwise wait for the next start.
        let pending = ctx
            .reads()
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
    let reads = ctx.reads();
    // Most ids a restarted partition walks may be agents that ended long
    // ago: those cost one read here, not a walk of their subtree's locks.
    if !reads.agent(agent_id)?.is_some_and(|r| r.state.is_live()) {
        return Ok(0);
    }
    let _structure = ctx
        .locks
        .structure
        .lock_subtree(agent_id, |agent| reads.children_of(agent))
        .await?;
    // Read again under the locks: a cleanup may have ended it since.
    let Some(record) = reads.agent(agent_id)?.filter(|r| r.state.is_live()) else {
        return Ok(0);
    };
    // A supervisor that died again meanwhile has a later respawn coming:
    // forgetting now would drop the actors that one may have started.
    if supervisor.get_status() >= ActorStatus::Draining || ctx.lifecycle.is_shutting_down() {
        return Ok(0);
    }
    // An agent created just before the share was listed may have been
    // started by its creator under the new partition since: forgetting it
    // would leave that actor running unseen beside a second one.
    let started_since = ctx.directory.get(agent_id).is_some_and(|entry| {
        entry.actor.get_status() < ActorStatus::Draining
            && entry
                .actor
                .try_get_supervisor()
                .is_some_and(|s| s.get_id() == supervisor.get_id())
    });
    if started_since {
        return Ok(0);
    }
    forget_subtree(ctx, agent_id)?;
    spawn_tree(ctx, record, supervisor, reason).await
}

/// Forgets every actor of `root`'s subtree: they died with it.
pub(super) fn forget_subtree(ctx: &Ctx, root: AgentId) -> Result<(), StoreError> {
    let mut todo = vec![root];
    while let Some(agent_id) = todo.pop() {
        ctx.directory.remove(agent_id);
        for task in ctx.reads().tasks_of(agent_id)? {
            ctx.directory.remove_task(task.id);
            ctx.directory.remove_command(task.id);
        }
        for wait in ctx.reads().waits_of(agent_id)? {
            ctx.directory.remove_wait(wait.id);
        }
        todo.extend(ctx.reads().children_of(agent_id)?);
    }
    Ok(())
}
