//! `SpawnAgent`: an agent creates another. A private child is supervised
//! by its creator: its actor is linked under the creator's, and the creator
//! gets a task handle, itself a linked task actor. A public agent keeps only
//! lineage and runs under the runtime.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use holarchy_supervision::bounds::{check_message, check_name, InvalidInput};
use holarchy_supervision::plan;
use holarchy_supervision::spawn::{may_spawn, SpawnRefusal};
use holarchy_supervision::workspace::{Place, Projection, WorkspaceMode, AGENT_HOME};
use holarchy_supervision::{
    AgentId, AgentRecord, Composition, Preset, Profile, TaskId, TaskRecord, TaskStatus, Visibility,
};
use ractor::ActorStatus;

use crate::limits::AgentSlots;
use crate::quota::{self, SpawnLimitError};
use crate::store::StoreError;
use crate::workspace::path::Roots;
use crate::workspace::worktree::{self, Planned, WorktreeError};
use crate::workspace::{self, View, WorkspaceError};
use crate::{now_ms, supervisor, Ctx};

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
    /// How a private child's workspaces are made from the caller's.
    pub workspace_mode: WorkspaceMode,
    /// The child's root in `explicit_root` mode: a directory inside the
    /// caller's attached set, relative to its active directory or absolute.
    pub root: Option<PathBuf>,
    /// A role prompt of the child's own; by default it takes its creator's.
    pub role: Option<String>,
}

/// The composition a child starts with: its creator's, with its own role
/// when the spawn names one (an agent outside any instance then gets a
/// role and nothing else).
fn child_composition(
    creator: Option<&Composition>,
    role: Option<String>,
) -> Result<Option<Box<Composition>>, SpawnError> {
    let mut composition = creator.cloned();
    if let Some(text) = role {
        let role = holarchy_composition::role::from_text(&text)?;
        composition.get_or_insert_with(Composition::default).role = Some(role);
    }
    Ok(composition.map(Box::new))
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
    #[error(transparent)]
    Limit(#[from] crate::limits::LimitError),
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
    #[error("workspace_mode `{0}` is for parent-supervised children; a public agent inherits its creator's attached workspaces")]
    ModeNeedsPrivate(&'static str),
    #[error("`root` is required in explicit_root mode, and only there")]
    RootMismatch,
    #[error("the caller's active workspace changed while its worktree was planned; spawn again")]
    WorkspaceMoved,
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error("role: {0}")]
    Role(#[from] holarchy_composition::role::RoleError),
    #[error(transparent)]
    Worktree(#[from] WorktreeError),
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
    let tasks = ctx.lifecycle.tasks.clone();
    tasks
        .spawn(async move { spawn_to_completion(&ctx, caller, caller_profile, request).await })
        .await
        .map_err(|join| SpawnError::Spawn(format!("spawn task failed: {join}")))?
}

async fn spawn_to_completion(
    ctx: &Arc<Ctx>,
    caller: AgentId,
    caller_profile: Profile,
    request: SpawnRequest,
) -> Result<Spawned, SpawnError> {
    validate(caller_profile, &request)?;
    // In its creator's slot: a tree is never split across slots.
    let agent_id = AgentId::generate_in(caller.slot());
    let task_id = TaskId::generate();
    let profile = request.preset.profile();
    let workspaces = ChildWorkspaces::prepare(
        ctx,
        caller,
        profile,
        request.workspace_mode,
        request.root.clone(),
        task_id,
    )
    .await?;
    let planned = match &workspaces {
        ChildWorkspaces::Worktree { planned, .. } => Some(planned.clone()),
        ChildWorkspaces::Public | ChildWorkspaces::Inherit | ChildWorkspaces::ExplicitRoot(_) => {
            None
        }
    };
    // The child is of its supervisor's namespace.
    let namespace = ctx.directory.get(caller).map(|entry| entry.namespace);
    let namespace = namespace
        .as_ref()
        .map_or(holarchy_supervision::namespace::DEFAULT, |namespace| {
            namespace.name()
        });
    let mut agent_slot = quota::reserve_agents(ctx, [namespace])?;
    let decided = commit_child(ctx, caller, request, workspaces, agent_id, task_id).await?;
    let made = match &planned {
        Some(planned) => make_worktree(ctx, planned).await,
        None => Ok(()),
    };
    let task = decided.task;
    let started = match made {
        Ok(()) => {
            let (record, queue) = (decided.record, decided.queue);
            start(ctx, caller, record, queue, task.as_ref(), &mut agent_slot).await
        }
        Err(err) => Err(SpawnError::Worktree(err)),
    };
    drop(agent_slot);
    if let Err(err) = started {
        // Leave no half-made child behind: clean up what was committed.
        let _ = supervisor::end_child(
            ctx,
            agent_id,
            TaskStatus::Failed,
            format!("could not start: {err}"),
            false,
        )
        .await;
        // A cleanup that ran while git made the worktree swept before it
        // existed: remove it now rather than at the next sweep.
        if planned.is_some() {
            if let Err(err) = worktree::release(ctx, task_id).await {
                tracing::warn!(task_id = %task_id, error = %err, "worktree of a child that did not start not removed");
            }
        }
        return Err(err);
    }
    crate::apply::durable(ctx).await?;
    Ok(Spawned { agent_id, task })
}

/// Refuses a spawn the caller's profile does not allow, a malformed first
/// message, or a name where its visibility wants none (or none where it
/// wants one), before anything is read.
fn validate(caller_profile: Profile, request: &SpawnRequest) -> Result<(), SpawnError> {
    let initial = request.initial_message.as_deref();
    may_spawn(caller_profile, request.preset, initial)?;
    if let Some(body) = initial {
        check_message(body)?;
    }
    match (request.preset.profile().visibility, &request.name) {
        (Visibility::Public, Some(name)) => Ok(check_name(name)?),
        (Visibility::Public, None) => Err(SpawnError::NameRequired),
        (Visibility::Private, Some(_)) => Err(SpawnError::NameNotAllowed),
        (Visibility::Private, None) => Ok(()),
    }
}

/// Commits the child under the caller's structure lock, so no cleanup of
/// the caller runs between its liveness check and the commit; the slow
/// part (flush, git) runs outside it.
async fn commit_child(
    ctx: &Arc<Ctx>,
    caller: AgentId,
    request: SpawnRequest,
    workspaces: ChildWorkspaces,
    agent_id: AgentId,
    task_id: TaskId,
) -> Result<plan::spawn::Spawn, SpawnError> {
    let _structure = ctx.locks.structure.lock(caller).await;
    let Some(creator) = ctx.reads().agent(caller)?.filter(|r| r.state.is_live()) else {
        return Err(SpawnError::CallerGone);
    };
    // Bounds, checked under the lock every spawn under this caller takes,
    // so two of them cannot both pass the last free place.
    if request.preset.profile().visibility == Visibility::Private {
        quota::check_private_child(ctx, caller).map_err(|err| match err {
            SpawnLimitError::Limit(limit) => SpawnError::Limit(limit),
            SpawnLimitError::Store(store) => SpawnError::Store(store),
        })?;
    }
    // Read under the lock: a workspace change that returned OK is seen.
    let parent = workspace::view(ctx, caller)?;
    let projection = workspaces.projection(&parent, agent_id)?;
    let worktree = match workspaces {
        ChildWorkspaces::Worktree { planned, .. } => Some(planned.worktree),
        ChildWorkspaces::Public | ChildWorkspaces::Inherit | ChildWorkspaces::ExplicitRoot(_) => {
            None
        }
    };
    let forked_context = match request.fork {
        true => Some(crate::context::inherited_view(ctx, caller)?.to_string()),
        false => None,
    };
    let child = plan::spawn::Child {
        id: agent_id,
        task_id,
        preset: request.preset,
        name: request.name,
        initial_message: request.initial_message,
        forked_context,
        // The role too passes down, unless the spawn names one.
        composition: child_composition(creator.composition.as_deref(), request.role)?,
        worktree,
        projection,
    };
    let mut decided = plan::spawn::spawn(&creator, child, now_ms());
    crate::apply::apply(ctx, std::mem::take(&mut decided.plan))?;
    Ok(decided)
}

/// Starts the committed child's actor and its handle, under the caller's
/// structure lock again: while it was let go, a cleanup may have ended the
/// child (nothing to start) or a restart of the caller may have started it
/// from the store already (nothing more to start).
async fn start(
    ctx: &Arc<Ctx>,
    caller: AgentId,
    record: AgentRecord,
    queue: Vec<holarchy_supervision::MessageId>,
    task: Option<&TaskRecord>,
    slot: &mut AgentSlots,
) -> Result<(), SpawnError> {
    let _structure = ctx.locks.structure.lock(caller).await;
    let child = record.id;
    // A public child is no child of the caller's in the tree: a restarted
    // partition's respawn of it takes its own lock instead, so it is taken
    // too (after the caller's; the respawn takes no other).
    let _own = match record.supervisor_agent_id {
        None => Some(ctx.locks.structure.lock(child).await),
        Some(_) => None,
    };
    // Its supervisor's cleanup ends it: the caller is going away.
    if !ctx.reads().agent(child)?.is_some_and(|r| r.state.is_live()) {
        return Err(SpawnError::CallerGone);
    }
    if ctx.directory.get(child).is_some() {
        return Ok(());
    }
    let supervisor_cell = match record.supervisor_agent_id {
        Some(_) => match ctx.directory.get(caller) {
            Some(entry) if entry.actor.get_status() < ActorStatus::Draining => {
                entry.actor.get_cell()
            }
            // The caller's actor died after the commit (its entry may not
            // be forgotten yet): its restart brings the child back from the
            // store with the rest of its subtree.
            _ => return Ok(()),
        },
        None => ctx
            .topology
            .partition_for(child)
            .ok_or_else(|| SpawnError::Spawn("the runtime is stopping".into()))?,
    };
    supervisor::spawn_agent(
        ctx,
        record,
        queue,
        supervisor_cell.clone(),
        false,
        Some(slot),
    )
    .await
    .map_err(|err| SpawnError::Spawn(err.to_string()))?;
    if let Some(task) = task {
        supervisor::spawn_task(ctx, task, supervisor_cell)
            .await
            .map_err(|err| SpawnError::Spawn(err.to_string()))?;
    }
    Ok(())
}

/// How the child's workspaces will be made, checked and (for a worktree)
/// planned before the caller's structure lock is taken.
enum ChildWorkspaces {
    /// A public agent: the caller's attached set.
    Public,
    Inherit,
    /// Planned from where the caller stood; checked again under the lock.
    Worktree {
        from: Place,
        planned: Planned,
    },
    ExplicitRoot(PathBuf),
}

impl ChildWorkspaces {
    /// Refuses a mode the child's profile or `root` does not fit; plans a
    /// worktree (git is slow: this runs before the lock).
    async fn prepare(
        ctx: &Ctx,
        caller: AgentId,
        profile: Profile,
        mode: WorkspaceMode,
        root: Option<PathBuf>,
        task_id: TaskId,
    ) -> Result<Self, SpawnError> {
        match (profile.visibility, mode, root) {
            (Visibility::Public, WorkspaceMode::Inherit, None) => Ok(Self::Public),
            (Visibility::Public, WorkspaceMode::Worktree | WorkspaceMode::ExplicitRoot, _) => {
                Err(SpawnError::ModeNeedsPrivate(mode.name()))
            }
            (Visibility::Private, WorkspaceMode::Inherit, None) => Ok(Self::Inherit),
            (Visibility::Private, WorkspaceMode::Worktree, None) => {
                let parent = workspace::view(ctx, caller)?;
                let from = parent.place();
                let root = workspace::active_root(&parent);
                let planned = worktree::plan(ctx, &root, &from.dir, task_id).await?;
                Ok(Self::Worktree { from, planned })
            }
            (Visibility::Private, WorkspaceMode::ExplicitRoot, Some(root)) => {
                Ok(Self::ExplicitRoot(root))
            }
            (_, WorkspaceMode::Inherit | WorkspaceMode::Worktree, Some(_))
            | (_, WorkspaceMode::ExplicitRoot, None) => Err(SpawnError::RootMismatch),
        }
    }

    /// The child's projection from its parent's as it stands under the lock
    /// (`None`: only its own home).
    fn projection(&self, parent: &View, child: AgentId) -> Result<Option<Projection>, SpawnError> {
        Ok(match self {
            Self::Public => parent.projection.for_public_child(child, now_ms()),
            Self::Inherit => parent.projection.inherited(child, now_ms()),
            Self::Worktree { from, planned } => {
                if parent.place() != *from {
                    return Err(SpawnError::WorkspaceMoved);
                }
                Some(Projection::confined(
                    child,
                    "worktree".into(),
                    planned.root.clone(),
                    planned.start.clone(),
                    now_ms(),
                ))
            }
            Self::ExplicitRoot(root) => Some(explicit_root(parent, child, root)?),
        })
    }
}

/// The projection of a private child in `explicit_root` mode: `root`, a
/// directory inside the parent's attached set, is its one workspace.
fn explicit_root(parent: &View, child: AgentId, root: &Path) -> Result<Projection, SpawnError> {
    let roots = Roots::existing(parent.projection.roots(&parent.home));
    let dir = roots
        .resolve(&parent.place().dir, root)
        .map_err(WorkspaceError::from)?;
    if !dir.is_dir() {
        return Err(WorkspaceError::NotADirectory(root.to_owned()).into());
    }
    // The parent's home is the parent's: under the child it needs another
    // name than the child's own `agent_home`.
    let id = match parent.projection.owner_of(&parent.home, &dir) {
        Some(id) if id != AGENT_HOME => id,
        _ => "parent_home".to_owned(),
    };
    Ok(Projection::confined(child, id, dir.clone(), dir, now_ms()))
}

/// Makes the worktree once the task naming it is on disk (no crash can
/// then leave a worktree the store forgot), and the child's starting
/// directory in it if that is not part of the checkout (an untracked one).
async fn make_worktree(ctx: &Ctx, planned: &Planned) -> Result<(), WorktreeError> {
    crate::apply::durable(ctx).await?;
    worktree::add(ctx, &planned.worktree).await?;
    std::fs::create_dir_all(&planned.start)?;
    Ok(())
}
