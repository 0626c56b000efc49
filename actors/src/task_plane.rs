//! The task plane: what a parent (through its tools) or an operator (over
//! gRPC) can do with a task handle. Agent tools pass their own id as the
//! owner, so an agent only ever sees its own tasks; operators pass none.

use std::sync::Arc;

use holarchy_supervision::{
    AgentId, MessageStatus, Provenance, TaskId, TaskKind, TaskRecord, TaskStatus,
};
use ractor::rpc::CallResult;

use crate::agent::{AgentMsg, DeliverError, Delivered, NewMessage, NotRunning};
use crate::store::StoreError;
use crate::{supervise, Ctx};

/// How many of a running child's messages make its progress output.
const PROGRESS_MESSAGES: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("task {0} not found")]
    NotFound(TaskId),
    #[error("task {task_id} is {status}, not running")]
    NotRunning {
        task_id: TaskId,
        status: &'static str,
    },
    #[error(transparent)]
    Deliver(#[from] DeliverError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Reads a task, as seen by `owner` (None: an operator sees every task).
pub fn get(ctx: &Ctx, task_id: TaskId, owner: Option<AgentId>) -> Result<TaskRecord, TaskError> {
    ctx.store
        .task(task_id)?
        .filter(|t| owner.is_none_or(|o| t.owner_agent_id == o))
        .ok_or(TaskError::NotFound(task_id))
}

pub fn list(ctx: &Ctx, owner: AgentId) -> Result<Vec<TaskRecord>, TaskError> {
    Ok(ctx.store.tasks_of(owner)?)
}

fn child_of(task: &TaskRecord) -> AgentId {
    match task.kind {
        TaskKind::ChildAgent { child_agent_id } => child_agent_id,
    }
}

/// The task's output: its result once ended; while it runs, the child's
/// replies so far, one per line (progress).
pub fn output(
    ctx: &Ctx,
    task_id: TaskId,
    owner: Option<AgentId>,
) -> Result<(TaskRecord, String), TaskError> {
    let task = get(ctx, task_id, owner)?;
    if let Some(output) = &task.output {
        return Ok((task.clone(), output.clone()));
    }
    let child = child_of(&task);
    let mut replies = Vec::new();
    for message in ctx.store.list_messages(child, None, PROGRESS_MESSAGES)? {
        if let (MessageStatus::Handled { .. }, Some(reply)) = (message.status, &message.reply) {
            replies.push(reply.clone());
        }
    }
    Ok((task, replies.join("\n")))
}

/// Follow-up input to a child: a message with the parent's provenance.
pub async fn input(
    ctx: &Ctx,
    task_id: TaskId,
    owner: Option<AgentId>,
    body: String,
) -> Result<Delivered, TaskError> {
    let task = get(ctx, task_id, owner)?;
    if task.status != TaskStatus::Running {
        return Err(TaskError::NotRunning {
            task_id,
            status: task.status.name(),
        });
    }
    let child = child_of(&task);
    let actor = ctx.directory.get(child).ok_or(DeliverError::NotRunning {
        agent_id: child,
        why: NotRunning::Restarting,
    })?;
    let message = NewMessage {
        provenance: Provenance::Parent {
            agent_id: task.owner_agent_id,
        },
        body,
        dedupe_key: None,
    };
    let answer = actor
        .actor
        .call(
            |reply| AgentMsg::Deliver { message, reply },
            Some(ctx.config.call_timeout),
        )
        .await;
    match answer {
        Ok(CallResult::Success(delivered)) => Ok(delivered?),
        Ok(_) => Err(DeliverError::Unavailable("the child did not answer".into()).into()),
        Err(err) => Err(DeliverError::Unavailable(err.to_string()).into()),
    }
}

/// Stops the child and its whole subtree; the handle ends `stopped`.
pub async fn stop(
    ctx: &Arc<Ctx>,
    task_id: TaskId,
    owner: Option<AgentId>,
    why: &str,
) -> Result<TaskRecord, TaskError> {
    let task = get(ctx, task_id, owner)?;
    if task.status != TaskStatus::Running {
        return Err(TaskError::NotRunning {
            task_id,
            status: task.status.name(),
        });
    }
    supervise::end_child(
        ctx,
        child_of(&task),
        TaskStatus::Stopped,
        format!("stopped: {why}"),
        false,
    )
    .await?;
    get(ctx, task_id, owner)
}
