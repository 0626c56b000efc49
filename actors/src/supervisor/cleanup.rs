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
use holarchy_supervision::effect::Plan;
use holarchy_supervision::plan::{self, cleanup::Subtree};
use holarchy_supervision::{AgentId, CleanupId, TaskId, TaskStatus};
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
/// batch (the root's handle task, a message to its parent), and its
/// directives run with the cleanup's. A root that is
/// no longer live is left alone and nothing is written.
///
/// Runs as a task of its own, so a caller that is cancelled half-way (a
/// turn aborted or timed out) cannot leave a cleanup half done.
pub async fn run(
    ctx: &Arc<Ctx>,
    root: AgentId,
    reason: CleanupReason,
    extra: Plan,
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
    extra: Plan,
) -> Result<CleanupOutcome, StoreError> {
    // The whole subtree's structure locks, parents first: no child, task or
    // wait can be added anywhere in it unseen until the batch below marks
    // it all ended. Let go before the slow part (stopping actors).
    let structure = ctx
        .locks
        .structure
        .lock_subtree(root, |agent| ctx.reads().children_of(agent))
        .await?;
    let Some(subtree) = read_subtree(ctx, root)? else {
        return Ok(CleanupOutcome::default());
    };
    let decided = plan::cleanup::cleanup(
        root,
        &subtree,
        reason,
        extra,
        CleanupId::generate(),
        now_ms(),
    );
    // Told before the batch lands: an agent ending a turn meanwhile reads
    // its message back (the batch cancels it) instead of trusting what it
    // kept of it.
    for agent in &decided.agents {
        if let Some(entry) = ctx.directory.get(*agent) {
            entry.live.mark_ending();
        }
    }
    crate::apply::apply(ctx, decided.plan)?;
    // Forgotten at once, under the locks: from here no ingress is routed to
    // an agent of the subtree, though its actors stop only below.
    let actors = forget_actors(
        ctx,
        root,
        &decided.agents,
        &decided.tasks,
        &decided.waits,
        reason,
    );
    // Every record of the subtree is ended: a change that takes one of
    // these locks from now on finds its agent not live and refuses.
    drop(structure);

    stop_actors(root, actors, reason).await;
    remove_tmp_dirs(ctx, &decided.agents).await;
    // Before the intent goes: a crash in between deletes them again at
    // the next start (`finish`).
    delete_memories(ctx, &decided.agents).await?;
    let delete = Batch::new().write(Write::DeleteIntent(decided.intent));
    crate::apply::apply_durable(ctx, Plan::writes(delete)).await?;
    // Worktrees owned by the tasks just ended, or by the cleaned agents'
    // completed tasks, go now; a crash before this leaves them indexed for
    // the sweep at the next start.
    if let Err(err) = crate::workspace::worktree::sweep(ctx).await {
        warn!(agent_id = %root, error = %err, "worktree sweep failed");
    }
    let outcome = CleanupOutcome {
        agents: decided.agents.len(),
        tasks: decided.tasks.len(),
    };
    info!(agent_id = %root, reason = reason.name(), agents = outcome.agents, tasks = outcome.tasks, "subtree cleaned up");
    Ok(outcome)
}

/// The live subtree of `root`, read under its locks; `None` when the root
/// is no longer live (a cleanup or a give-up got there first).
fn read_subtree(ctx: &Ctx, root: AgentId) -> Result<Option<Subtree>, StoreError> {
    let reads = ctx.reads();
    if !reads.agent(root)?.is_some_and(|r| r.state.is_live()) {
        return Ok(None);
    }
    let running_tasks = |agent| -> Result<Vec<TaskId>, StoreError> {
        Ok(reads
            .tasks_of(agent)?
            .into_iter()
            .filter(|t| t.status == TaskStatus::Running)
            .map(|t| t.id)
            .collect())
    };
    let order = cleanup_plan(root, |a| reads.children_of(a), running_tasks)?;
    let mut subtree = Subtree::default();
    subtree.ids.clone_from(&order.agents);
    for agent_id in &order.agents {
        if let Some(record) = reads.agent(*agent_id)? {
            subtree.agents.push(record);
        }
        subtree.pending.extend(reads.pending_messages(*agent_id)?);
        subtree.waits.extend(reads.waits_of(*agent_id)?);
    }
    for task_id in &order.tasks {
        subtree.tasks.extend(reads.task(*task_id)?);
    }
    Ok(Some(subtree))
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
    let ctx = ctx.clone();
    let agents = agents.to_vec();
    tokio::task::spawn_blocking(move || {
        agents.iter().try_for_each(|agent| {
            ctx.memory().delete_memory(*agent)?;
            // The running summary of its context goes with its notes, and
            // so do its recorded turns' inputs.
            ctx.context_records().forget_context(*agent)?;
            ctx.turn_inputs().forget_turn_inputs(*agent)
        })
    })
    .await
    .map_err(|join| StoreError::Backend(format!("deleting memories failed: {join}")))?
}

/// Finishes a cleanup a crash interrupted: every agent it named that is
/// still live is archived, then the intent goes. Called at start, before
/// any actor runs, so there is nothing to stop.
pub fn finish(ctx: &Ctx, intent: &CleanupIntent) -> Result<usize, StoreError> {
    let mut agents = Vec::with_capacity(intent.agents.len());
    for agent_id in &intent.agents {
        agents.extend(ctx.reads().agent(*agent_id)?);
    }
    let (plan, finished) = plan::cleanup::finish_interrupted(intent, &agents, now_ms());
    // Idempotent: notes a first run deleted stay deleted.
    for agent_id in &intent.agents {
        ctx.memory().delete_memory(*agent_id)?;
        ctx.context_records().forget_context(*agent_id)?;
        ctx.turn_inputs().forget_turn_inputs(*agent_id)?;
    }
    crate::apply::apply(ctx, plan)?;
    // Nothing of theirs runs at start: their temporary directories go too.
    for agent_id in &intent.agents {
        if let Err(err) = ctx.config.sandbox.remove_tmp_dir(agent_id) {
            warn!(agent_id = %agent_id, error = %err, "could not remove the agent's temporary directory");
        }
    }
    Ok(finished)
}
