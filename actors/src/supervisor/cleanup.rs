//! Durable cleanup of a supervision subtree: archive, `TaskStop`, a child
//! finishing its work, or a supervisor giving up.
//!
//! Durability first: one batch records the intent and brings every record
//! of the subtree (agents, their queued messages, their tasks) to its
//! terminal state; only then does the root actor stop, and ractor's linkage
//! takes the subtree's actors with it. A crash after that batch leaves an
//! intent that the next start finishes; a crash before it leaves the
//! subtree as it was, whole.
//!
//! The agents' notes go with them, after their actors stop and before the
//! intent is deleted, so a crash in between deletes them again at start.
//!
//! Runs in its own task, never inside an actor's `handle`: it waits for the
//! root actor to stop, and a `handle` that waited for that would deadlock.

use std::sync::Arc;
use std::time::Duration;

use holarchy_supervision::cleanup::{cleanup_plan, CleanupIntent, CleanupReason};
use holarchy_supervision::{
    AgentId, CleanupId, EventKind, LifecycleState, MessageEvent, TaskStatus, WaitStatus,
};
use ractor::ActorRef;
use tracing::{info, warn};

use crate::protocol::{AgentMsg, CommandMsg, TaskMsg, WaitMsg};
use crate::store::{Batch, StoreError, Write};
use crate::{now_ms, Ctx};

/// How long the root actor may take to stop before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// What a cleanup did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanupOutcome {
    pub agents: usize,
    pub tasks: usize,
}

/// Cleans up `root` and its supervised subtree. `extra` lands in the same
/// batch (the root's handle task, a message to its parent). A root that is
/// no longer live is left alone and nothing is written.
///
/// Runs as a task of its own, so a caller that is cancelled half-way (a
/// turn aborted or timed out) cannot leave a cleanup half done.
pub async fn run(
    ctx: &Arc<Ctx>,
    root: AgentId,
    reason: CleanupReason,
    extra: Batch,
) -> Result<CleanupOutcome, StoreError> {
    let ctx = ctx.clone();
    let tasks = ctx.lifecycle.tasks.clone();
    tasks
        .spawn(async move { run_to_completion(&ctx, root, reason, extra).await })
        .await
        .map_err(|join| StoreError::Backend(format!("cleanup task failed: {join}")))?
}

async fn run_to_completion(
    ctx: &Arc<Ctx>,
    root: AgentId,
    reason: CleanupReason,
    extra: Batch,
) -> Result<CleanupOutcome, StoreError> {
    let store = &ctx.store;
    // The whole subtree's structure locks, parents first: no child, task or
    // wait can be added anywhere in it unseen until the batch below marks
    // it all ended. Let go before the slow part (stopping actors).
    let structure = ctx
        .locks
        .structure
        .lock_subtree(root, |agent| store.children_of(agent))
        .await?;
    let Some(root_record) = store.agent(root)? else {
        return Ok(CleanupOutcome::default());
    };
    if !root_record.state.is_live() {
        return Ok(CleanupOutcome::default());
    }
    let plan = cleanup_plan(
        root,
        |a| store.children_of(a),
        |a| {
            Ok(store
                .tasks_of(a)?
                .into_iter()
                .filter(|t| t.status == TaskStatus::Running)
                .map(|t| t.id)
                .collect())
        },
    )?;

    let now = now_ms();
    let mut batch = extra;
    for agent_id in &plan.agents {
        let Some(mut record) = store.agent(*agent_id)? else {
            continue;
        };
        record.state = match reason {
            CleanupReason::Failed { .. } if *agent_id == root => LifecycleState::Failed,
            _ => LifecycleState::Archived,
        };
        record.updated_at_ms = now;
        let state = record.state;
        batch = batch.write(Write::PutAgent(record)).event(
            *agent_id,
            EventKind::AgentStateChanged {
                state,
                reason: reason.name().into(),
            },
        );
        for mut message in store.pending_messages(*agent_id)? {
            let Some(cancelled) = message.status.next(MessageEvent::Cancel) else {
                continue;
            };
            message.status = cancelled;
            batch = batch.write(Write::PutMessage(message));
        }
    }
    let mut waits = Vec::new();
    for agent_id in &plan.agents {
        for mut wait in store.waits_of(*agent_id)? {
            if wait.status != WaitStatus::Armed {
                continue;
            }
            wait.status = WaitStatus::Cancelled;
            wait.updated_at_ms = now;
            waits.push(wait.id);
            batch = batch
                .event(
                    *agent_id,
                    EventKind::WaitUpdated {
                        wait_id: wait.id,
                        kind: wait.kind.name().into(),
                        status: wait.status,
                    },
                )
                .write(Write::PutWait(wait));
        }
    }
    for task_id in &plan.tasks {
        let Some(mut task) = store.task(*task_id)? else {
            continue;
        };
        let Some(stopped) = task.status.end(TaskStatus::Stopped) else {
            continue;
        };
        task.status = stopped;
        task.output = Some(format!(
            "stopped: its owner was cleaned up ({})",
            reason.name()
        ));
        task.updated_at_ms = now;
        batch = batch.put_task(task, reason.name().into());
    }
    let intent = CleanupIntent {
        id: CleanupId::generate(),
        root_agent_id: root,
        reason,
        agents: plan.agents.clone(),
        created_at_ms: now,
    };
    let intent_id = intent.id;
    batch = batch.event(
        root,
        EventKind::CleanupStarted {
            reason: reason.name().into(),
            agents: plan.agents.len() as u32,
            tasks: plan.tasks.len() as u32,
        },
    );
    store.commit(batch.write(Write::PutIntent(intent)))?;
    // Forgotten at once, under the locks: from here no ingress is routed to
    // an agent of the subtree, though its actors stop only below.
    let actors = forget_actors(ctx, root, &plan.agents, &plan.tasks, &waits, reason);
    // Every record of the subtree is ended: a change that takes one of
    // these locks from now on finds its agent not live and refuses.
    drop(structure);

    stop_actors(root, actors, reason).await;
    remove_tmp_dirs(ctx, &plan.agents).await;
    // Before the intent goes: a crash in between deletes them again at
    // the next start (`finish`).
    delete_memories(ctx, &plan.agents).await?;
    store.commit(Batch::new().write(Write::DeleteIntent(intent_id)))?;
    store.durable().await?;
    // Worktrees owned by the tasks just ended, or by the cleaned agents'
    // completed tasks, go now; a crash before this leaves them indexed for
    // the sweep at the next start.
    if let Err(err) = crate::workspace::worktree::sweep(ctx).await {
        warn!(agent_id = %root, error = %err, "worktree sweep failed");
    }
    info!(
        agent_id = %root,
        reason = reason.name(),
        agents = plan.agents.len(),
        tasks = plan.tasks.len(),
        "subtree cleaned up"
    );
    Ok(CleanupOutcome {
        agents: plan.agents.len(),
        tasks: plan.tasks.len(),
    })
}

/// The subtree's running actors, taken out of the directory so nothing
/// routes to them and their exits are not taken for failures.
struct Forgotten {
    descendants: Vec<ActorRef<AgentMsg>>,
    tasks: Vec<ActorRef<TaskMsg>>,
    commands: Vec<ActorRef<CommandMsg>>,
    waits: Vec<ActorRef<WaitMsg>>,
    root: Option<ActorRef<AgentMsg>>,
    /// The root's own handle task, held by its supervisor.
    handle: Option<ActorRef<TaskMsg>>,
}

fn forget_actors(
    ctx: &Ctx,
    root: AgentId,
    agents: &[AgentId],
    tasks: &[holarchy_supervision::TaskId],
    waits: &[holarchy_supervision::WaitId],
    reason: CleanupReason,
) -> Forgotten {
    let descendants = agents
        .iter()
        .filter(|a| **a != root)
        .filter_map(|a| ctx.directory.remove(*a).map(|entry| entry.actor))
        .collect();
    let mut task_actors = Vec::new();
    let mut commands = Vec::new();
    for task_id in tasks {
        task_actors.extend(ctx.directory.remove_task(*task_id));
        commands.extend(ctx.directory.remove_command(*task_id));
        // Followers of its output learn that it ended.
        ctx.notify_output(*task_id);
    }
    let waits = waits
        .iter()
        .filter_map(|w| ctx.directory.remove_wait(*w))
        .collect();
    let handle = match reason {
        CleanupReason::TaskStopped { task_id } | CleanupReason::Completed { task_id } => {
            Some(task_id)
        }
        CleanupReason::Failed { task_id } => task_id,
        CleanupReason::Archived | CleanupReason::Orphaned => None,
    };
    Forgotten {
        descendants,
        tasks: task_actors,
        commands,
        waits,
        root: ctx.directory.remove(root).map(|entry| entry.actor),
        handle: handle.and_then(|t| ctx.directory.remove_task(t)),
    }
}

/// Stops the forgotten actors. Descendants go first, children before
/// parents, so none keeps acting on a record that is already archived while
/// the root winds down; the root then stops gracefully.
async fn stop_actors(root: AgentId, actors: Forgotten, reason: CleanupReason) {
    for actor in &actors.descendants {
        actor.kill();
    }
    for actor in &actors.tasks {
        actor.kill();
    }
    // Killing a command's actor drops its state, which kills the process
    // group: no process outlives its task.
    for actor in &actors.commands {
        actor.kill();
    }
    for actor in &actors.waits {
        actor.kill();
    }
    if let Some(actor) = actors.root {
        let stopped = actor
            .stop_and_wait(Some(reason.name().into()), Some(STOP_TIMEOUT))
            .await;
        if let Err(err) = stopped {
            warn!(agent_id = %root, error = %err, "agent did not stop in time; killing it");
            actor.kill();
        }
    }
    if let Some(actor) = actors.handle {
        actor.stop(Some(reason.name().into()));
    }
}

/// Removes the ended agents' private temporary directories, once their
/// processes are gone (their units died with their actors). Off the async
/// workers: an agent may have left a large tree there.
async fn remove_tmp_dirs(ctx: &Arc<Ctx>, agents: &[AgentId]) {
    let sandbox = ctx.config.sandbox.clone();
    let agents = agents.to_vec();
    let removed = tokio::task::spawn_blocking(move || {
        for agent_id in agents {
            if let Err(err) = sandbox.remove_tmp_dir(agent_id) {
                warn!(agent_id = %agent_id, error = %err, "could not remove the agent's temporary directory");
            }
        }
    })
    .await;
    if let Err(err) = removed {
        warn!(error = %err, "removing temporary directories failed");
    }
}

/// Deletes the ended agents' notes and context summaries (and queues the
/// notes' removal from the search index), once their actors are gone and
/// can write no more. Off the async workers: an agent may keep thousands
/// of notes.
async fn delete_memories(ctx: &Arc<Ctx>, agents: &[AgentId]) -> Result<(), StoreError> {
    let store = ctx.store.clone();
    let agents = agents.to_vec();
    tokio::task::spawn_blocking(move || {
        agents.iter().try_for_each(|agent| {
            store.delete_memory(*agent)?;
            // The running summary of its context goes with its notes.
            store.forget_context(*agent)
        })
    })
    .await
    .map_err(|join| StoreError::Backend(format!("deleting memories failed: {join}")))?
}

/// Finishes a cleanup a crash interrupted: every agent it named that is
/// still live is archived, then the intent goes. Called at start, before
/// any actor runs, so there is nothing to stop.
pub fn finish(ctx: &Ctx, intent: &CleanupIntent) -> Result<usize, StoreError> {
    let mut batch = Batch::new().write(Write::DeleteIntent(intent.id));
    let mut finished = 0;
    for agent_id in &intent.agents {
        let Some(mut record) = ctx.store.agent(*agent_id)? else {
            continue;
        };
        if !record.state.is_live() {
            continue;
        }
        record.state = LifecycleState::Archived;
        record.updated_at_ms = now_ms();
        batch = batch.write(Write::PutAgent(record)).event(
            *agent_id,
            EventKind::AgentStateChanged {
                state: LifecycleState::Archived,
                reason: format!("{} (finished after restart)", intent.reason.name()),
            },
        );
        finished += 1;
    }
    // Idempotent: notes a first run deleted stay deleted.
    for agent_id in &intent.agents {
        ctx.store.delete_memory(*agent_id)?;
        ctx.store.forget_context(*agent_id)?;
    }
    ctx.store.commit(batch)?;
    // Nothing of theirs runs at start: their temporary directories go too.
    for agent_id in &intent.agents {
        if let Err(err) = ctx.config.sandbox.remove_tmp_dir(agent_id) {
            warn!(agent_id = %agent_id, error = %err, "could not remove the agent's temporary directory");
        }
    }
    Ok(finished)
}
