//! `SpawnAgent`: an agent creates another. A private child is supervised
//! by its creator: its actor is linked under the creator's, and the creator
//! gets a task handle, itself a linked task actor. A public agent keeps only
//! lineage and runs under the runtime.

use std::sync::Arc;

use holarchy_supervision::limits::{self, InvalidInput};
use holarchy_supervision::spawn::{may_spawn, relations, SpawnRefusal};
use holarchy_supervision::task::task_label;
use holarchy_supervision::{
    AgentId, AgentRecord, EventKind, LifecycleState, MessageRecord, Preset, Profile, Provenance,
    TaskId, TaskKind, TaskRecord, TaskStatus, Visibility,
};

use crate::store::{Batch, StoreError, Write};
use crate::{now_ms, supervise, Ctx};

/// What the caller asks for.
#[derive(Debug, Clone)]
pub struct SpawnRequest {
    pub preset: Preset,
    pub initial_message: Option<String>,
    /// Required for a public agent; private agents have none.
    pub name: Option<String>,
    /// Give the child its parent's view (work item, plan, recent turns)
    /// besides the handoff; otherwise it starts fresh with the handoff only.
    pub fork: bool,
}

/// What was made.
#[derive(Debug, Clone)]
pub struct Spawned {
    pub agent_id: AgentId,
    /// The handle, for a parent-supervised child.
    pub task: Option<TaskRecord>,
}

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error(transparent)]
    Refused(#[from] SpawnRefusal),
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    #[error("a public agent needs a `name`")]
    NameRequired,
    #[error("private agents have no name; leave `name` out")]
    NameNotAllowed,
    #[error("the calling agent is not running")]
    CallerGone,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("could not start the new agent: {0}")]
    Spawn(String),
}

/// Spawns an agent for `caller`. Runs as a task of its own, so a caller
/// cancelled half-way (its turn aborted) cannot leave a child committed to
/// the store without its actors.
pub async fn spawn_agent(
    ctx: &Arc<Ctx>,
    caller: AgentId,
    caller_profile: Profile,
    request: SpawnRequest,
) -> Result<Spawned, SpawnError> {
    let ctx = ctx.clone();
    tokio::spawn(async move { spawn_to_completion(&ctx, caller, caller_profile, request).await })
        .await
        .map_err(|join| SpawnError::Spawn(format!("spawn task failed: {join}")))?
}

async fn spawn_to_completion(
    ctx: &Arc<Ctx>,
    caller: AgentId,
    caller_profile: Profile,
    request: SpawnRequest,
) -> Result<Spawned, SpawnError> {
    let SpawnRequest {
        preset,
        initial_message,
        name,
        fork,
    } = request;
    may_spawn(caller_profile, preset, initial_message.as_deref())?;
    if let Some(body) = &initial_message {
        limits::check_message(body)?;
    }
    let profile = preset.profile();
    match (profile.visibility, &name) {
        (Visibility::Public, Some(name)) => limits::check_name(name)?,
        (Visibility::Public, None) => return Err(SpawnError::NameRequired),
        (Visibility::Private, Some(_)) => return Err(SpawnError::NameNotAllowed),
        (Visibility::Private, None) => {}
    }

    // Held until the new actors are registered, so no cleanup of the caller
    // can run between the caller's liveness check and the child's birth.
    let tree = ctx.tree_lock.lock().await;
    let caller_actor = ctx.directory.get(caller).ok_or(SpawnError::CallerGone)?;
    let Some(caller_record) = ctx.store.agent(caller)?.filter(|r| r.state.is_live()) else {
        return Err(SpawnError::CallerGone);
    };
    let (lineage, supervisor) = relations(caller, preset);
    let now = now_ms();
    let record = AgentRecord {
        id: AgentId::generate(),
        name: name.clone(),
        profile,
        lineage_parent_agent_id: lineage,
        supervisor_agent_id: supervisor,
        state: LifecycleState::Active,
        // A child thinks the way its creator does.
        brain: caller_record.brain.clone(),
        forked_context: if fork {
            Some(
                crate::turn::inherited_view(ctx, caller)
                    .map_err(SpawnError::Spawn)?
                    .to_string(),
            )
        } else {
            None
        },
        created_at_ms: now,
        updated_at_ms: now,
    };
    let agent_id = record.id;
    let mut batch = Batch::new()
        .write(Write::CreateAgent(record.clone()))
        .event(
            agent_id,
            EventKind::AgentCreated {
                name,
                preset: Some(preset.name().into()),
                lineage_parent_agent_id: lineage,
                supervisor_agent_id: supervisor,
            },
        );
    let mut queue = Vec::new();
    if let Some(body) = initial_message.clone() {
        let provenance = match supervisor {
            Some(parent) => Provenance::Parent { agent_id: parent },
            None => Provenance::Creator { agent_id: caller },
        };
        let message = MessageRecord::queued(agent_id, provenance, body, None, now);
        queue.push(message.id);
        batch = batch
            .event(
                agent_id,
                EventKind::MessageQueued {
                    message_id: message.id,
                    provenance,
                },
            )
            .write(Write::PutMessage(message));
    }
    let task = supervisor.map(|owner| TaskRecord {
        id: TaskId::generate(),
        owner_agent_id: owner,
        kind: TaskKind::ChildAgent {
            child_agent_id: agent_id,
        },
        label: task_label(initial_message.as_deref().unwrap_or_default()),
        status: TaskStatus::Running,
        output: None,
        command: None,
        process: None,
        exit: None,
        created_at_ms: now,
        updated_at_ms: now,
    });
    if let Some(task) = &task {
        batch = batch
            .event(
                task.owner_agent_id,
                EventKind::TaskUpdated {
                    task_id: task.id,
                    kind: task.kind.name().into(),
                    status: task.status,
                    detail: task.label.clone(),
                },
            )
            .write(Write::PutTask(task.clone()));
    }
    ctx.store.commit(batch)?;

    let supervisor_cell = match supervisor {
        Some(_) => caller_actor.actor.get_cell(),
        None => ctx.root().ok_or(SpawnError::CallerGone)?,
    };
    let started = async {
        supervise::spawn_agent(ctx, record, queue, supervisor_cell, false).await?;
        if let Some(task) = &task {
            supervise::spawn_task(ctx, task, caller_actor.actor.get_cell()).await?;
        }
        Ok::<_, ractor::ActorProcessingErr>(())
    };
    let started = started.await;
    // The tree is consistent from here on; other spawns need not wait for
    // this one's flush, and sharing flushes is what makes spawns fast.
    drop(tree);
    if let Err(err) = started {
        // Leave no half-made child behind: clean up what was committed.
        let _ = supervise::end_child(
            ctx,
            agent_id,
            TaskStatus::Failed,
            format!("could not start: {err}"),
            false,
        )
        .await;
        return Err(SpawnError::Spawn(err.to_string()));
    }
    ctx.store.durable().await?;
    Ok(Spawned { agent_id, task })
}
