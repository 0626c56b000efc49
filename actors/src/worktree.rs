//! Git worktrees for children spawned in `worktree` mode. A worktree is an
//! artifact of the parent's task handle on the child, not of the child
//! (seed: agent-control-plane-model): it is made before the child's first
//! turn and removed, with its branch, once that task is done with it.
//!
//! Durability: the task record names the worktree before `git worktree add`
//! runs, and the store keeps an index of worktrees not yet removed. So
//! whatever a crash interrupts, [`sweep`] at the next start finds every
//! worktree a task no longer holds and removes it (tolerating one never
//! made or already half gone), and makes again the worktree of a running
//! task whose `add` the crash cut short.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use holarchy_supervision::workspace::Worktree;
use holarchy_supervision::{EventKind, TaskId, TaskKind, TaskRecord, TaskStatus};
use tokio::process::Command;
use tracing::{info, warn};

use crate::store::{Batch, StoreError, Write};
use crate::{now_ms, Ctx};

/// How long one git command may take; a checkout of a large tree is slow.
const GIT_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    #[error("`{0}` is not inside a git repository: worktree mode needs one")]
    NotARepository(PathBuf),
    #[error("git {args}: {detail}")]
    Git { args: String, detail: String },
    #[error("worktree directory: {0}")]
    Io(#[from] std::io::Error),
}

/// Runs git with `args` in `dir`; stdout on success, stderr in the error.
async fn git(dir: &Path, args: &[&str]) -> Result<String, WorktreeError> {
    let mut command = Command::new("git");
    command
        .arg("-C")
        .arg(dir)
        .args(args)
        // Never wait on a prompt, never read the daemon's own git config
        // for hooks that could hang.
        .env("GIT_TERMINAL_PROMPT", "0")
        .kill_on_drop(true);
    let failed = |detail: String| WorktreeError::Git {
        args: args.join(" "),
        detail,
    };
    let output = tokio::time::timeout(GIT_TIMEOUT, command.output())
        .await
        .map_err(|_| failed(format!("no answer in {} s", GIT_TIMEOUT.as_secs())))?
        .map_err(|err| failed(err.to_string()))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    } else {
        Err(failed(
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        ))
    }
}

/// The canonical directory under which worktrees are made.
pub fn root(ctx: &Ctx) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(&ctx.config.worktree_root)?;
    std::fs::canonicalize(&ctx.config.worktree_root)
}

/// A worktree for `task` of the repository holding `dir`, not yet made, and
/// the directory the child starts in: where `dir` sits in the checkout.
/// Reads git only; nothing changes.
pub async fn plan(
    ctx: &Ctx,
    dir: &Path,
    task: TaskId,
) -> Result<(Worktree, PathBuf), WorktreeError> {
    let top = git(dir, &["rev-parse", "--show-toplevel"])
        .await
        .map_err(|_| WorktreeError::NotARepository(dir.to_owned()))?;
    let top = std::fs::canonicalize(top)?;
    let within = dir.strip_prefix(&top).unwrap_or(Path::new("")).to_owned();
    let worktree = Worktree::for_task(top, &root(ctx)?, task);
    // Joining an empty path would add a trailing `/`.
    let start = if within.as_os_str().is_empty() {
        worktree.path.clone()
    } else {
        worktree.path.join(within)
    };
    Ok((worktree, start))
}

/// Makes the worktree on a new branch at the repository's `HEAD`.
pub async fn add(worktree: &Worktree) -> Result<(), WorktreeError> {
    let path = worktree.path.to_string_lossy();
    git(
        &worktree.repo,
        &["worktree", "add", "-b", &worktree.branch, &path, "HEAD"],
    )
    .await
    .map(|_| ())
}

/// Removes the worktree and its branch; a no-op for parts already gone.
/// The directory is deleted by hand only if git no longer knows it and it
/// lies under the runtime's own worktree root.
pub async fn remove(ctx: &Ctx, worktree: &Worktree) -> Result<(), WorktreeError> {
    let path = worktree.path.to_string_lossy().into_owned();
    if worktree.path.exists() {
        let removed = git(
            &worktree.repo,
            &["worktree", "remove", "--force", "--force", &path],
        )
        .await;
        if let Err(err) = removed {
            let ours = root(ctx).is_ok_and(|r| worktree.path.starts_with(r));
            if !ours {
                return Err(err);
            }
            warn!(path = %path, error = %err, "git could not remove the worktree; deleting it");
            std::fs::remove_dir_all(&worktree.path)?;
        }
    }
    if !worktree.repo.exists() {
        // The repository is gone, and its branches and worktree list with it.
        return Ok(());
    }
    let _ = git(&worktree.repo, &["worktree", "prune"]).await;
    let branch = format!("refs/heads/{}", worktree.branch);
    if git(
        &worktree.repo,
        &["rev-parse", "--verify", "--quiet", &branch],
    )
    .await
    .is_ok()
    {
        git(&worktree.repo, &["branch", "-D", &worktree.branch]).await?;
    }
    Ok(())
}

/// Whether `task` still holds its worktree: while it runs, and after its
/// child completed for as long as the owner lives and has not stopped the
/// task, so the owner can take the child's work from the branch.
fn held(ctx: &Ctx, task: &TaskRecord) -> Result<bool, StoreError> {
    Ok(match task.status {
        TaskStatus::Running => true,
        TaskStatus::Completed => ctx
            .store
            .agent(task.owner_agent_id)?
            .is_some_and(|owner| owner.state.is_live()),
        TaskStatus::Failed | TaskStatus::Stopped | TaskStatus::Interrupted => false,
    })
}

/// Removes every worktree whose task no longer holds it. Idempotent: runs
/// after each cleanup and at start, where it finishes removals a crash
/// interrupted. Returns how many it removed.
pub async fn sweep(ctx: &Arc<Ctx>) -> Result<usize, StoreError> {
    let mut removed = 0;
    for task in ctx.store.worktree_tasks()? {
        if !held(ctx, &task)? {
            if release(ctx, task).await? {
                removed += 1;
            }
        } else if task.status == TaskStatus::Running {
            if let Err(err) = restore(ctx, &task).await {
                warn!(task_id = %task.id, error = %err, "worktree of a running task could not be made again");
            }
        }
    }
    Ok(removed)
}

/// Makes a running task's worktree again when a crash cut `git worktree
/// add` short (the record names it first), on its branch if git got that
/// far, so the child does not wake up in a directory that is not there.
async fn restore(ctx: &Ctx, task: &TaskRecord) -> Result<(), WorktreeError> {
    let Some(worktree) = task.worktree.as_ref().filter(|w| !w.removed) else {
        return Ok(());
    };
    if worktree.path.exists() {
        return Ok(());
    }
    // A half-registered worktree would block the add.
    let _ = git(&worktree.repo, &["worktree", "prune"]).await;
    let branch = format!("refs/heads/{}", worktree.branch);
    let path = worktree.path.to_string_lossy();
    if git(
        &worktree.repo,
        &["rev-parse", "--verify", "--quiet", &branch],
    )
    .await
    .is_ok()
    {
        git(
            &worktree.repo,
            &["worktree", "add", &path, &worktree.branch],
        )
        .await?;
    } else {
        add(worktree).await?;
    }
    // The child may start in a directory of the checkout git does not make.
    if let TaskKind::ChildAgent { child_agent_id } = task.kind {
        let active = ctx
            .store
            .workspaces(child_agent_id)
            .ok()
            .flatten()
            .and_then(|p| p.active)
            .map(|a| a.dir)
            .filter(|dir| dir.starts_with(&worktree.path));
        if let Some(dir) = active {
            std::fs::create_dir_all(dir)?;
        }
    }
    info!(task_id = %task.id, path = %path, "worktree made again after a crash");
    Ok(())
}

/// Removes `task`'s worktree now and records it; `false` if git refused
/// (the worktree stays indexed, so a later sweep tries again).
pub async fn release(ctx: &Arc<Ctx>, mut task: TaskRecord) -> Result<bool, StoreError> {
    let Some(worktree) = task.worktree.clone().filter(|w| !w.removed) else {
        return Ok(false);
    };
    if let Err(err) = remove(ctx, &worktree).await {
        warn!(task_id = %task.id, path = %worktree.path.display(), error = %err, "worktree not removed");
        return Ok(false);
    }
    task.worktree = Some(Worktree {
        removed: true,
        ..worktree.clone()
    });
    task.updated_at_ms = now_ms();
    ctx.store.commit(
        Batch::new()
            .event(
                task.owner_agent_id,
                EventKind::TaskUpdated {
                    task_id: task.id,
                    kind: task.kind.name().into(),
                    status: task.status,
                    detail: format!("worktree {} removed", worktree.path.display()),
                },
            )
            .write(Write::PutTask(task.clone())),
    )?;
    info!(task_id = %task.id, path = %worktree.path.display(), branch = %worktree.branch, "worktree removed");
    Ok(true)
}
