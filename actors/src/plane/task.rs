//! The task plane: what a parent (through its tools) or an operator (over
//! gRPC) can do with a task handle. Agent tools pass their own id as the
//! owner, so an agent only ever sees its own tasks; operators pass none.

use std::sync::Arc;

use holarchy_supervision::{
    AgentId, MessageStatus, OutputChunk, Provenance, TaskId, TaskKind, TaskRecord, TaskStatus,
};

use crate::directory::deliver;
use crate::plane::command::{self, CommandError};
use crate::protocol::{DeliverError, Delivered, NewMessage, NotRunning};
use crate::store::StoreError;
use crate::workspace::worktree::WorktreeError;
use crate::{supervisor, Ctx};

mod actor;

pub use actor::TaskActor;

/// How many of a running child's messages make its progress output.
const PROGRESS_MESSAGES: usize = 100;
/// Output bytes returned per read.
const OUTPUT_PAGE: usize = 256 * 1024;

/// One read of a task's output.
#[derive(Debug, Clone, Default)]
pub struct TaskOutput {
    /// The output as text (chunks joined, streams interleaved).
    pub text: String,
    pub chunks: Vec<OutputChunk>,
    /// Bytes from the requested offset already dropped by the ring.
    pub dropped: u64,
    /// Where the next read continues.
    pub next_offset: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("task {0} not found")]
    NotFound(TaskId),
    #[error("task {task_id} is {status}, not running")]
    NotRunning {
        task_id: TaskId,
        status: &'static str,
    },
    #[error("the task's worktree is kept (retried at the next cleanup or start): {0}")]
    Worktree(#[from] WorktreeError),
    #[error(transparent)]
    Deliver(#[from] DeliverError),
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Reads a task, as seen by `owner` (None: an operator sees every task).
pub fn get(ctx: &Ctx, task_id: TaskId, owner: Option<AgentId>) -> Result<TaskRecord, TaskError> {
    ctx.reads()
        .task(task_id)?
        .filter(|t| owner.is_none_or(|o| t.owner_agent_id == o))
        .ok_or(TaskError::NotFound(task_id))
}

pub fn list(ctx: &Ctx, owner: AgentId) -> Result<Vec<TaskRecord>, TaskError> {
    Ok(ctx.reads().tasks_of(owner)?)
}

/// The task's output from `offset`: for a command, its retained output
/// chunks (streams tagged, in order); for a child agent, its result once
/// ended, or its replies so far (progress).
pub fn output(
    ctx: &Ctx,
    task_id: TaskId,
    owner: Option<AgentId>,
    offset: u64,
) -> Result<(TaskRecord, TaskOutput), TaskError> {
    let task = get(ctx, task_id, owner)?;
    let out = match task.kind {
        TaskKind::Command => {
            let chunks = ctx.reads().output_after(task_id, offset, OUTPUT_PAGE)?;
            let first = chunks.first().map_or(offset, |c| c.offset);
            let next = chunks
                .last()
                .map_or(offset, |c| c.offset + c.data.len() as u64);
            TaskOutput {
                text: command::text(&chunks),
                // Bytes before `first` that the caller asked for are gone.
                dropped: first.saturating_sub(offset),
                next_offset: next,
                chunks,
            }
        }
        TaskKind::ChildAgent { child_agent_id } => {
            let text = match &task.output {
                Some(result) => result.clone(),
                None => {
                    let mut replies = Vec::new();
                    for message in
                        ctx.reads()
                            .list_messages(child_agent_id, None, PROGRESS_MESSAGES)?
                    {
                        if let (MessageStatus::Handled { .. }, Some(reply)) =
                            (message.status, &message.reply)
                        {
                            replies.push(reply.clone());
                        }
                    }
                    replies.join("\n")
                }
            };
            TaskOutput {
                text,
                chunks: Vec::new(),
                dropped: 0,
                next_offset: 0,
            }
        }
    };
    Ok((task, out))
}

/// Follow-up input: a message to a child with its parent's provenance, or
/// bytes on a command's stdin.
pub async fn input(
    ctx: &Ctx,
    task_id: TaskId,
    owner: Option<AgentId>,
    body: String,
) -> Result<Option<Delivered>, TaskError> {
    // The message limit, whether the text goes to a child's queue or a
    // command's stdin, and whoever sends it (a brain or a gRPC client).
    holarchy_supervision::bounds::check_message(&body).map_err(DeliverError::from)?;
    let task = get(ctx, task_id, owner)?;
    if task.status != TaskStatus::Running {
        return Err(TaskError::NotRunning {
            task_id,
            status: task.status.name(),
        });
    }
    let child = match task.kind {
        TaskKind::ChildAgent { child_agent_id } => child_agent_id,
        TaskKind::Command => {
            command::input(ctx, task_id, body.into_bytes()).await?;
            return Ok(None);
        }
    };
    let actor = ctx.directory.get(child).ok_or(DeliverError::NotRunning {
        agent_id: child,
        why: NotRunning::Restarting,
    })?;
    let message = NewMessage {
        cause: None,
        provenance: Provenance::Parent {
            agent_id: task.owner_agent_id,
        },
        body,
        dedupe_key: None,
        events: Vec::new(),
    };
    Ok(Some(
        deliver(&actor.actor, message, ctx.config.call_timeout).await?,
    ))
}

/// Stops a task: a child and its whole subtree, or a command's process
/// group (SIGTERM, then SIGKILL after the grace period).
pub async fn stop(
    ctx: &Arc<Ctx>,
    task_id: TaskId,
    owner: Option<AgentId>,
    why: &str,
) -> Result<TaskRecord, TaskError> {
    let task = get(ctx, task_id, owner)?;
    if task.status != TaskStatus::Running {
        // A completed child's task keeps its worktree until told to let it
        // go: stopping the ended task is that word.
        if task.pending_worktree().is_some() {
            crate::workspace::worktree::release(ctx, task_id).await?;
            crate::apply::durable(ctx).await?;
            return get(ctx, task_id, owner);
        }
        return Err(TaskError::NotRunning {
            task_id,
            status: task.status.name(),
        });
    }
    match task.kind {
        TaskKind::ChildAgent { child_agent_id } => {
            supervisor::end_child(
                ctx,
                child_agent_id,
                TaskStatus::Stopped,
                format!("stopped: {why}"),
                false,
            )
            .await?;
        }
        TaskKind::Command => command::stop(ctx, task_id).await?,
    }
    get(ctx, task_id, owner)
}
