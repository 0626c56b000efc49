//! Git worktrees for children spawned in `worktree` mode. A worktree is an
//! artifact of the parent's task handle on the child, not of the child
//! (seed: agent-control-plane-model): it is made before the child's first
//! turn and removed, with its branch, once that task is done with it.
//!
//! Durability: the task record names the worktree before `git worktree add`
//! runs, and the store keeps an index of worktrees not yet removed. So
//! whatever a crash interrupts, [`sweep`] at the next start finds every
//! worktree a task no longer holds and removes it (tolerating one never
//! made or already half gone), and [`restore_running`] makes again, before
//! any agent runs, the worktree of a running task whose `add` the crash cut
//! short. Spawns flush the record before git runs, so no worktree exists
//! that the store could forget.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use holarchy_supervision::plan;
use holarchy_supervision::workspace::Worktree;
use holarchy_supervision::{TaskId, TaskKind, TaskRecord, TaskStatus};
use tokio::process::Command;
use tracing::{info, warn};

use crate::store::StoreError;
use crate::{now_ms, Ctx};

/// How long one git command may take; a checkout of a large tree is slow.
const GIT_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    #[error("`{0}` is not inside a git repository: worktree mode needs one")]
    NotARepository(PathBuf),
    #[error("`{0}` has no commit yet: a worktree branches from one")]
    NoCommit(PathBuf),
    #[error("git {args}: {detail}")]
    Git { args: String, detail: String },
    #[error("worktree directory: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Runs git with `args` in `dir`, in the daemon; stdout on success,
/// stderr in the error. Only for git commands that run no program of the
/// repository's (reads, removals): a checkout goes through [`checkout`].
///
/// Git runs with the scrubbed environment commands get (the daemon's holds
/// model keys and the TCP token), no system or user config, no hooks and
/// no fsmonitor: an agent can write a repository's hooks.
async fn git(dir: &Path, args: &[&str]) -> Result<String, WorktreeError> {
    let mut command = Command::new("git");
    command.args(git_args(dir, args));
    run(command, args, false).await
}

/// Runs a git command that checks files out, confined in a unit like an
/// agent's command: a checkout runs the repository's filters, programs an
/// agent can configure in the repository it works in, so they must not run
/// with the daemon's reach. The unit may write the repository's git
/// directory and this worktree (made empty first, which git accepts), not
/// other agents' worktrees, and read what any command may.
async fn checkout(ctx: &Ctx, worktree: &Worktree, args: &[&str]) -> Result<String, WorktreeError> {
    let sandbox = &ctx.config.sandbox;
    std::fs::create_dir_all(&worktree.path)?;
    let writable = vec![worktree.repo.clone(), worktree.path.clone()];
    let spec = sandbox.spec(writable, Vec::new(), ctx.config.stop_grace);
    let command = sandbox
        .command(&spec, "git", &git_args(&worktree.repo, args))
        .map_err(|err| WorktreeError::Git {
            args: args.join(" "),
            detail: err.to_string(),
        })?;
    run(command, args, true).await
}

/// The arguments that make git run `args` in `dir` without hooks or an
/// fsmonitor.
fn git_args(dir: &Path, args: &[&str]) -> Vec<String> {
    let mut all: Vec<String> = [
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "core.fsmonitor=false",
        "-C",
    ]
    .map(str::to_owned)
    .to_vec();
    all.push(dir.to_string_lossy().into_owned());
    all.extend(args.iter().map(|a| (*a).to_owned()));
    all
}

/// Runs `command` (git, or a unit running git when `unit`) to its end.
async fn run(mut command: Command, args: &[&str], unit: bool) -> Result<String, WorktreeError> {
    crate::process::scrub(
        &mut command,
        &[
            ("GIT_TERMINAL_PROMPT".into(), "0".into()),
            ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
            // Not the daemon user's config either: the repository's own
            // is all a worktree needs, and a unit may not read $HOME.
            ("GIT_CONFIG_GLOBAL".into(), "/dev/null".into()),
        ],
        None,
    );
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        // A unit killed outright would strand git and its filters; it is
        // asked to kill its whole tree instead (below).
        .kill_on_drop(!unit);
    let failed = |detail: String| WorktreeError::Git {
        args: args.join(" "),
        detail,
    };
    let child = command.spawn().map_err(|err| failed(err.to_string()))?;
    let mut hangup = crate::sandbox::UnitHangup::new(child.id().filter(|_| unit));
    let output = tokio::time::timeout(GIT_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| failed(format!("no answer in {} s", GIT_TIMEOUT.as_secs())))?
        .map_err(|err| failed(err.to_string()))?;
    // Reaped: its tree is gone, and its pid may be another process's now.
    hangup.disarm();
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    } else {
        Err(failed(
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        ))
    }
}

/// Whether `branch` exists in `repo`.
async fn branch_exists(repo: &Path, branch: &str) -> bool {
    let reference = format!("refs/heads/{branch}");
    git(repo, &["rev-parse", "--verify", "--quiet", &reference])
        .await
        .is_ok()
}

/// A worktree planned for a child, not yet made.
#[derive(Debug, Clone)]
pub struct Planned {
    pub worktree: Worktree,
    /// The child's one workspace: the checkout's counterpart of the
    /// parent's active workspace root, so the child reaches no further
    /// into the repository than its parent did.
    pub root: PathBuf,
    /// Where the child starts: the counterpart of the parent's directory.
    pub start: PathBuf,
}

/// `base` joined with `rest`, without the trailing `/` an empty `rest` adds.
fn under(base: &Path, rest: &Path) -> PathBuf {
    if rest.as_os_str().is_empty() {
        base.to_owned()
    } else {
        base.join(rest)
    }
}

/// Plans a worktree for `task` of the repository holding `dir`, the
/// parent's active directory inside its active workspace `parent_root`.
/// Reads git only; nothing changes.
pub async fn plan(
    ctx: &Ctx,
    parent_root: &Path,
    dir: &Path,
    task: TaskId,
) -> Result<Planned, WorktreeError> {
    let not_a_repo = |_| WorktreeError::NotARepository(dir.to_owned());
    let top = git(dir, &["rev-parse", "--show-toplevel"])
        .await
        .map_err(not_a_repo)?;
    let top = std::fs::canonicalize(top)?;
    let common = git(
        dir,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .await
    .map_err(not_a_repo)?;
    let common = std::fs::canonicalize(common)?;
    let base = git(dir, &["rev-parse", "--verify", "HEAD^{commit}"])
        .await
        .map_err(|_| WorktreeError::NoCommit(top.clone()))?;
    // The root is canonical (the runtime made it so); git makes the rest.
    let worktree = Worktree::for_task(common, base, &ctx.config.worktree_root, task);
    let within = dir.strip_prefix(&top).unwrap_or(Path::new(""));
    let scope = parent_root.strip_prefix(&top).unwrap_or(Path::new(""));
    Ok(Planned {
        root: under(&worktree.path, scope),
        start: under(&worktree.path, within),
        worktree,
    })
}

/// Makes the worktree on a new branch at its base commit, confined.
pub async fn add(ctx: &Ctx, worktree: &Worktree) -> Result<(), WorktreeError> {
    let path = worktree.path.to_string_lossy();
    checkout(
        ctx,
        worktree,
        &[
            "worktree",
            "add",
            "-b",
            &worktree.branch,
            &path,
            &worktree.base,
        ],
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
            if !worktree.path.starts_with(&ctx.config.worktree_root) {
                return Err(err);
            }
            warn!(path = %path, error = %err, "git could not remove the worktree; deleting it");
            match std::fs::remove_dir_all(&worktree.path) {
                // Another removal of the same worktree got there first.
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err.into()),
                _ => {}
            }
        }
    }
    if !worktree.repo.exists() {
        // The repository is gone, and its branches and worktree list with it.
        return Ok(());
    }
    let _ = git(&worktree.repo, &["worktree", "prune"]).await;
    if branch_exists(&worktree.repo, &worktree.branch).await {
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
            .reads()
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
    for task in ctx.reads().worktree_tasks()? {
        if held(ctx, &task)? {
            continue;
        }
        match release(ctx, task.id).await {
            Ok(()) => removed += 1,
            Err(WorktreeError::Store(err)) => return Err(err),
            // Still indexed: the next sweep tries again.
            Err(err) => warn!(task_id = %task.id, error = %err, "worktree not removed"),
        }
    }
    if removed > 0 {
        // Whoever asked (a stop, an archive) is answered after this.
        crate::apply::durable(ctx).await?;
    }
    Ok(removed)
}

/// At start, before any agent runs: makes again every running task's
/// worktree that a crash kept `git worktree add` from finishing. Only
/// here: at any other time a running task's missing worktree is a spawn
/// still making it (committed, between its flush and its git call).
pub async fn restore_running(ctx: &Ctx) -> Result<usize, StoreError> {
    let mut restored = 0;
    for task in ctx.reads().worktree_tasks()? {
        if task.status != TaskStatus::Running {
            continue;
        }
        match restore(ctx, &task).await {
            Ok(true) => restored += 1,
            Ok(false) => {}
            Err(err) => {
                warn!(task_id = %task.id, error = %err, "worktree of a running task could not be made again");
            }
        }
    }
    Ok(restored)
}

/// Makes a running task's worktree again when a crash cut `git worktree
/// add` short (the record names it first), on its branch if git got that
/// far, so the child does not wake up in a directory that is not there.
async fn restore(ctx: &Ctx, task: &TaskRecord) -> Result<bool, WorktreeError> {
    let Some(worktree) = task.pending_worktree() else {
        return Ok(false);
    };
    if worktree.path.exists() {
        return Ok(false);
    }
    // A half-registered worktree would block the add.
    let _ = git(&worktree.repo, &["worktree", "prune"]).await;
    let path = worktree.path.to_string_lossy();
    if branch_exists(&worktree.repo, &worktree.branch).await {
        checkout(ctx, worktree, &["worktree", "add", &path, &worktree.branch]).await?;
    } else {
        add(ctx, worktree).await?;
    }
    // The child may start in a directory of the checkout git does not make.
    if let TaskKind::ChildAgent { child_agent_id } = task.kind {
        let active = ctx
            .reads()
            .workspaces(child_agent_id)?
            .and_then(|p| p.active)
            .map(|a| a.dir)
            .filter(|dir| dir.starts_with(&worktree.path));
        if let Some(dir) = active {
            std::fs::create_dir_all(dir)?;
        }
    }
    info!(task_id = %task.id, path = %path, "worktree made again after a crash");
    Ok(true)
}

/// Removes the worktree of task `task_id` now, with its branch, and records
/// it; a no-op if it is already gone. On a git error the worktree stays
/// indexed, so a later sweep tries again.
pub async fn release(ctx: &Arc<Ctx>, task_id: TaskId) -> Result<(), WorktreeError> {
    let Some(repo) = ctx
        .reads()
        .task(task_id)?
        .and_then(|t| t.pending_worktree().map(|w| w.repo.clone()))
    else {
        return Ok(());
    };
    // One removal at a time per repository (git locks its worktree list and
    // refs), each on the record as it stands under the lock: a stop and a
    // sweep may both reach for the same worktree. Other repositories'
    // removals do not wait.
    let _one_per_repository = ctx.locks.worktrees.lock(repo).await;
    let Some(task) = ctx.reads().task(task_id)? else {
        return Ok(());
    };
    let Some(worktree) = task.pending_worktree() else {
        return Ok(());
    };
    remove(ctx, worktree).await?;
    let Some((plan, worktree)) = plan::workspace::worktree_removed(&task, now_ms()) else {
        return Ok(());
    };
    crate::apply::apply(ctx, plan)?;
    info!(task_id = %task_id, path = %worktree.path.display(), branch = %worktree.branch, "worktree removed");
    Ok(())
}
