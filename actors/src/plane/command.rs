//! The command plane: `ExecCommand` starts a shell command as a task owned
//! by the calling agent, run by a command actor linked under the agent's
//! actor. A command that ends within the call's yield time returns its
//! output at once; a longer one returns a task handle and, when it ends,
//! its owner gets a task-result message.

use std::sync::Arc;
use std::time::Duration;

use holarchy_supervision::plan;
use holarchy_supervision::{AgentId, OutputChunk, TaskId, TaskRecord, TaskStatus};
use ractor::rpc::CallResult;
use ractor::Actor;
use tokio::sync::watch;

use crate::protocol::{CommandMsg, StdinRefused};
use crate::store::StoreError;
use crate::{now_ms, Ctx};

mod actor;
mod pipe;
mod unit;

pub use actor::{CommandActor, CommandArgs, Handoff};

/// Default time a call waits for its command before yielding a handle.
pub const DEFAULT_YIELD_MS: u64 = 3_000;
pub const MAX_YIELD_MS: u64 = 600_000;
pub const MAX_COMMAND_LEN: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("the command must be 1 to {MAX_COMMAND_LEN} bytes")]
    BadCommand,
    #[error("yield_ms is at most {MAX_YIELD_MS}")]
    BadYield,
    #[error("`env` names must be variable names and values must hold no NUL")]
    BadEnv,
    #[error("the owning agent is not running")]
    OwnerGone,
    #[error("could not start the command: {0}")]
    Start(String),
    #[error("the command has ended")]
    Ended,
    #[error("the command has not read the input sent before; try again")]
    StdinFull,
    #[error(transparent)]
    Limit(#[from] crate::limits::LimitError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Hands the report to the owner's message if the waiting call goes away.
struct YieldOnDrop(Arc<Handoff>);

impl Drop for YieldOnDrop {
    fn drop(&mut self) {
        // A no-op once the command finished or the call already yielded.
        let _ = self.0.yield_to_owner();
    }
}

/// What `ExecCommand` returns.
#[derive(Debug, Clone)]
pub struct Executed {
    pub task: TaskRecord,
    /// The output so far (all of it, if the command ended).
    pub initial_output: String,
}

/// Whether `name` can be a shell variable: the agent's variables are set
/// by an `export` line of the command's script.
pub fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Starts `command` for `owner` and waits up to `yield_ms` for it.
pub async fn exec(
    ctx: &Arc<Ctx>,
    owner: AgentId,
    command: String,
    env: Vec<(String, String)>,
    yield_ms: u64,
) -> Result<Executed, CommandError> {
    check(&command, &env, yield_ms)?;
    // Under the owner's structure lock: no restart or cleanup of the owner
    // interleaves with starting the command.
    let structure = ctx.locks.structure.lock(owner).await;
    let Some(record) = ctx.reads().agent(owner)?.filter(|a| a.state.is_live()) else {
        return Err(CommandError::OwnerGone);
    };
    let owner_actor = ctx.directory.get(owner).ok_or(CommandError::OwnerGone)?;
    // Counted under the owner's lock, which every command start takes.
    let slot = crate::quota::command_slot(ctx, owner)?;
    let view = crate::workspace::view(ctx, owner)?;
    let place = view.place();
    let writable = writable_roots(ctx, &view)?;
    // Placeholders may have put a secret (a trigger token) in the line: the
    // record keeps it redacted, only the process sees it.
    let redacted = crate::secrets::redact_trigger_tokens(&command);
    let (plan, task) = plan::command::start(owner, redacted, place.clone(), now_ms());
    let task_id = task.id;
    crate::apply::apply(ctx, plan)?;
    let handoff = Arc::new(Handoff::default());
    let (done, mut finished) = watch::channel(false);
    let args = CommandArgs {
        task: task.clone(),
        workdir: place.dir,
        writable,
        handoff: handoff.clone(),
        done,
        env,
        line: command,
        network: record.network,
    };
    let spawned = Actor::spawn_linked(
        None,
        CommandActor::new(ctx.clone()),
        args,
        owner_actor.actor.get_cell(),
    )
    .await;
    if let Err(err) = spawned {
        let failed = plan::command::failed_to_start(&task, &err.to_string(), now_ms());
        crate::apply::apply(ctx, failed)?;
        return Err(CommandError::Start(err.to_string()));
    }
    // The slot is given back when the command ends, or its actor dies
    // (its end signal dropped), whatever becomes of this call.
    let mut ends = finished.clone();
    let tasks = ctx.lifecycle.tasks.clone();
    tasks.spawn(async move {
        let _ = ends.wait_for(|done| *done).await;
        drop(slot);
    });
    // The command runs; waiting for it must not hold up its owner.
    drop(structure);
    // If this call is cancelled (its turn aborted or timed out), the owner
    // must still hear how the command ended.
    let _report_if_dropped = YieldOnDrop(handoff.clone());
    let mut ended = tokio::time::timeout(
        Duration::from_millis(yield_ms),
        finished.wait_for(|done| *done),
    )
    .await
    .is_ok();
    if !ended && !handoff.yield_to_owner() {
        // It finished just now: its record is being written; wait for it.
        let _ = finished.wait_for(|done| *done).await;
        ended = true;
    }
    executed(ctx, task_id, ended).await
}

/// Refuses an empty or oversized command line, a wait past the bound, or
/// a variable that is no shell name (or holds a NUL), before anything runs.
fn check(command: &str, env: &[(String, String)], yield_ms: u64) -> Result<(), CommandError> {
    if command.trim().is_empty() || command.len() > MAX_COMMAND_LEN {
        return Err(CommandError::BadCommand);
    }
    if yield_ms > MAX_YIELD_MS {
        return Err(CommandError::BadYield);
    }
    if env
        .iter()
        .any(|(name, value)| !is_variable_name(name) || value.contains('\0'))
    {
        return Err(CommandError::BadEnv);
    }
    Ok(())
}

/// What the call returns, once what it saw is on disk: an ended command
/// all the output it kept, a running one what it printed so far.
async fn executed(ctx: &Ctx, task_id: TaskId, ended: bool) -> Result<Executed, CommandError> {
    let limit = if ended {
        ctx.config.output_capacity as usize
    } else {
        64 * 1024
    };
    let task = ctx
        .reads()
        .task(task_id)?
        .ok_or_else(|| StoreError::Corrupt {
            tree: "tasks",
            detail: format!("task {task_id} vanished while it ran"),
        })?;
    let initial_output = text(&ctx.reads().output_after(task_id, 0, limit)?);
    crate::apply::durable(ctx).await?;
    Ok(Executed {
        task,
        initial_output,
    })
}

/// Output chunks as text, streams interleaved in order.
pub fn text(chunks: &[OutputChunk]) -> String {
    let bytes: Vec<u8> = chunks.iter().flat_map(|c| c.data.iter().copied()).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Writes to a running command's stdin.
pub async fn input(ctx: &Ctx, task_id: TaskId, bytes: Vec<u8>) -> Result<(), CommandError> {
    let actor = ctx.directory.command(task_id).ok_or(CommandError::Ended)?;
    let answer = actor
        .call(
            |reply| CommandMsg::Input(bytes, reply),
            Some(ctx.config.call_timeout),
        )
        .await;
    match answer {
        Ok(CallResult::Success(sent)) => sent.map_err(|refused| match refused {
            StdinRefused::Ended => CommandError::Ended,
            StdinRefused::Full => CommandError::StdinFull,
        }),
        _ => Err(CommandError::Ended),
    }
}

/// SIGTERM to the group, SIGKILL after the grace period; resolves when the
/// task has ended (or the grace and a margin have passed).
pub async fn stop(ctx: &Ctx, task_id: TaskId) -> Result<(), CommandError> {
    let Some(actor) = ctx.directory.command(task_id) else {
        return Ok(());
    };
    let mut progress = ctx.follow_output();
    let grace = ctx.config.stop_grace;
    let _ = actor
        .call(
            |reply| CommandMsg::Stop { grace, reply },
            Some(ctx.config.call_timeout),
        )
        .await;
    let deadline = tokio::time::Instant::now() + grace + Duration::from_secs(5);
    while ctx
        .reads()
        .task(task_id)?
        .is_some_and(|t| t.status == TaskStatus::Running)
    {
        match tokio::time::timeout_at(deadline, progress.recv()).await {
            Ok(_) => continue,
            Err(_) => break,
        }
    }
    Ok(())
}

/// Where a command of the agent may write: beneath every workspace it has
/// attached, and, for a git worktree the daemon made for it, that
/// repository's git directory (git in a worktree writes objects and refs
/// there). The repository is taken from the daemon's own worktree record,
/// never from the worktree's `.git` file, which the agent may rewrite.
fn writable_roots(
    ctx: &Ctx,
    view: &crate::workspace::View,
) -> Result<Vec<std::path::PathBuf>, StoreError> {
    let roots: Vec<_> = view.bindings().into_iter().map(|b| b.root).collect();
    let mut writable = roots.clone();
    if roots
        .iter()
        .any(|root| root.starts_with(&ctx.config.worktree_root))
    {
        for task in ctx.reads().worktree_tasks()? {
            if let Some(worktree) = task.worktree.filter(|w| roots.contains(&w.path)) {
                writable.push(worktree.repo);
            }
        }
    }
    Ok(writable)
}
