//! The workspace plane: an agent's attached workspaces and the one it
//! works in, changed by its tools (`UseWorkspace`, `AttachWorkspace`,
//! `DetachWorkspace`) and by operators (WorkspaceService). The rules over
//! the set are the model's ([`Projection`]); this module resolves paths on
//! the host and makes each change durable with an event.
//!
//! Every change is a read-modify-write of one record, done under the tree
//! lock so an operator's attach and the agent's own `UseWorkspace` never
//! lose one another. Idle agents store nothing: no record means only
//! `agent_home`, active.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use holarchy_supervision::plan;
use holarchy_supervision::workspace::{Binding, Place, Projection, WorkspaceRefusal, AGENT_HOME};
use holarchy_supervision::AgentId;

use crate::store::StoreError;
use crate::workspace::path::{PathError, Roots};
use crate::{now_ms, Ctx};

pub mod apply_patch;
pub mod path;
pub mod worktree;

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("agent {0} not found")]
    AgentNotFound(AgentId),
    #[error("agent {0} is not live")]
    AgentNotLive(AgentId),
    #[error(transparent)]
    Refused(#[from] WorkspaceRefusal),
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("`{0}` is outside the attached workspaces, and attaching a new root needs the authority_expansion family")]
    NeedsAuthority(PathBuf),
    #[error("`{0}` is not absolute: a workspace is attached by its absolute path")]
    NotAbsolute(PathBuf),
    #[error("`{0}` is not a directory")]
    NotADirectory(PathBuf),
    #[error("`{0}` holds or is inside the daemon's own files (its data directory, program, credentials or configuration); no agent may use it")]
    Protected(PathBuf),
    #[error(
        "`{0}` is outside the places the operator lets workspaces be attached (--workspace-allow)"
    )]
    NotAllowed(PathBuf),
    #[error("give exactly one of `workspace_id` and `path`")]
    OneTarget,
    #[error("the agent's home workspace: {0}")]
    Home(std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What `UseWorkspace` is pointed at.
#[derive(Debug, Clone)]
pub enum Target {
    /// An attached workspace's root, `agent_home` included.
    Id(String),
    /// A directory, relative to the active one or absolute.
    Path(PathBuf),
}

/// An agent's projection and the canonical root of its `agent_home`.
#[derive(Debug, Clone)]
pub struct View {
    pub projection: Projection,
    pub home: PathBuf,
}

impl View {
    pub fn place(&self) -> Place {
        self.projection.active_place(&self.home)
    }

    /// Every attached workspace, `agent_home` first, with its root.
    pub fn bindings(&self) -> Vec<Binding> {
        std::iter::once(Binding {
            workspace_id: AGENT_HOME.to_owned(),
            root: self.home.clone(),
        })
        .chain(self.projection.attached.iter().cloned())
        .collect()
    }
}

/// Makes the agent's home, for the tools that resolve paths in it.
pub fn ensure_home(ctx: &Ctx, agent_id: AgentId) -> Result<(), WorkspaceError> {
    std::fs::create_dir_all(ctx.workspace(agent_id)).map_err(WorkspaceError::Home)
}

/// The agent's workspaces as they stand. Reads the store only: the home
/// path is canonical without existing (the runtime canonicalises its
/// root), so listing a million agents makes no directory.
pub fn view(ctx: &Ctx, agent_id: AgentId) -> Result<View, StoreError> {
    let mut view = stored_view(ctx, agent_id)?;
    // Inside an approved call's run: where it was parked, if that still holds.
    let _ = PINNED.try_with(|place| {
        if view.projection.holds(&view.home, place) {
            view.projection.active = Some(holarchy_supervision::workspace::Active {
                workspace_id: place.workspace_id.clone(),
                dir: place.dir.clone(),
            });
        }
    });
    Ok(view)
}

/// The agent's workspaces as stored, never pinned: what a change reads,
/// modifies and writes back, so a pin never outlives its call.
fn stored_view(ctx: &Ctx, agent_id: AgentId) -> Result<View, StoreError> {
    let projection = ctx
        .reads()
        .workspaces(agent_id)?
        .unwrap_or_else(|| Projection::home_only(agent_id, 0));
    Ok(View {
        projection,
        home: ctx.workspace(agent_id),
    })
}

tokio::task_local! {
    /// The place an approved call was parked in, while it runs: the
    /// operator approved it as shown there, so for that call every plane
    /// reads it as the agent's active place, wherever the agent moved
    /// since. A task-local rather than a parameter because every plane a
    /// tool reaches reads the place through [`view`].
    static PINNED: Place;
}

/// Runs `work` with `place` as the agent's active place (see [`PINNED`]).
/// Callers check first that the agent's workspaces still hold it.
pub async fn pinned<F: std::future::Future>(place: Place, work: F) -> F::Output {
    PINNED.scope(place, work).await
}

/// Where the agent's commands run now.
pub fn place(ctx: &Ctx, agent_id: AgentId) -> Result<Place, StoreError> {
    Ok(view(ctx, agent_id)?.place())
}

/// The root of the active workspace, for tools confined to it.
pub fn active_root(view: &View) -> PathBuf {
    let place = view.place();
    view.projection
        .root_of(&view.home, &place.workspace_id)
        .unwrap_or_else(|| view.home.clone())
}

/// Refuses a new root that is a protected path (the data directory, and
/// what the operator named with `--protect`), lies inside one, or holds
/// one (an ancestor, `/` included): a workspace there would give an
/// agent's programs the store, the token or another agent's home.
fn unprotected(ctx: &Ctx, root: PathBuf) -> Result<PathBuf, WorkspaceError> {
    let sandbox = &ctx.config.sandbox;
    let touches = |p: &PathBuf| root.starts_with(p) || p.starts_with(&root);
    if sandbox.protected.iter().any(touches) {
        return Err(WorkspaceError::Protected(root));
    }
    let allowed = &sandbox.allowed_roots;
    if !allowed.is_empty() && !allowed.iter().any(|a| root.starts_with(a)) {
        return Err(WorkspaceError::NotAllowed(root));
    }
    Ok(root)
}

fn canonical_dir(path: &Path) -> Result<PathBuf, WorkspaceError> {
    let canonical = std::fs::canonicalize(path).map_err(|source| PathError::Io {
        path: path.to_owned(),
        source,
    })?;
    if !canonical.is_dir() {
        return Err(WorkspaceError::NotADirectory(path.to_owned()));
    }
    Ok(canonical)
}

/// What one change did, for its caller and its event.
struct Changed<T> {
    out: T,
    workspace_id: String,
    what: &'static str,
    detail: String,
}

/// Applies `change` to the live agent's projection and commits it with one
/// event under the lock; the flush is waited for outside it, so concurrent
/// changes share one.
async fn change<T>(
    ctx: &Arc<Ctx>,
    agent_id: AgentId,
    change: impl FnOnce(&mut View) -> Result<Changed<T>, WorkspaceError>,
) -> Result<(View, T), WorkspaceError> {
    let guard = ctx.locks.structure.lock(agent_id).await;
    let record = ctx
        .reads()
        .agent(agent_id)?
        .ok_or(WorkspaceError::AgentNotFound(agent_id))?;
    if !record.state.is_live() {
        return Err(WorkspaceError::AgentNotLive(agent_id));
    }
    ensure_home(ctx, agent_id)?;
    let mut view = stored_view(ctx, agent_id)?;
    let changed = change(&mut view)?;
    let how = plan::workspace::Change {
        workspace_id: changed.workspace_id,
        what: changed.what,
        detail: changed.detail,
    };
    let (plan, projection) = plan::workspace::changed(view.projection, how, now_ms());
    view.projection = projection;
    crate::apply::apply(ctx, plan)?;
    drop(guard);
    crate::apply::durable(ctx).await?;
    Ok((view, changed.out))
}

/// Attaches the host directory `path` as `workspace_id` (or an id made from
/// its name). Authority: the caller decides who may; this only checks the
/// directory and the set's rules.
pub async fn attach(
    ctx: &Arc<Ctx>,
    agent_id: AgentId,
    path: &Path,
    workspace_id: Option<String>,
) -> Result<(View, Binding), WorkspaceError> {
    if !path.is_absolute() {
        return Err(WorkspaceError::NotAbsolute(path.to_owned()));
    }
    let root = unprotected(ctx, canonical_dir(path)?)?;
    change(ctx, agent_id, |view| {
        let id = workspace_id.unwrap_or_else(|| view.projection.id_for_root(&root));
        let binding = Binding {
            workspace_id: id.clone(),
            root: root.clone(),
        };
        view.projection.attach(binding.clone())?;
        Ok(Changed {
            out: binding,
            workspace_id: id,
            what: "attached",
            detail: root.display().to_string(),
        })
    })
    .await
}

/// Removes a binding; the directory is left as it is.
pub async fn detach(
    ctx: &Arc<Ctx>,
    agent_id: AgentId,
    workspace_id: &str,
) -> Result<(View, Binding), WorkspaceError> {
    change(ctx, agent_id, |view| {
        let binding = view.projection.detach(workspace_id)?;
        Ok(Changed {
            detail: binding.root.display().to_string(),
            out: binding,
            workspace_id: workspace_id.to_owned(),
            what: "detached",
        })
    })
    .await
}

/// Makes a workspace, or a directory, active. A path outside the attached
/// set is attached first when `may_attach` (the authority_expansion
/// family); otherwise it is refused and nothing changes.
pub async fn use_workspace(
    ctx: &Arc<Ctx>,
    agent_id: AgentId,
    target: Target,
    may_attach: bool,
) -> Result<View, WorkspaceError> {
    change(ctx, agent_id, |view| {
        let home = view.home.clone();
        let (id, dir, attached) = match target {
            Target::Id(id) => {
                let root = view
                    .projection
                    .root_of(&home, &id)
                    .ok_or_else(|| WorkspaceRefusal::Unknown(id.clone()))?;
                (id, root, false)
            }
            Target::Path(path) => {
                let place = view.place();
                let roots = Roots::existing(view.projection.roots(&home));
                match roots.resolve(&place.dir, &path) {
                    Ok(dir) => {
                        let dir = canonical_dir(&dir)?;
                        let id = view
                            .projection
                            .owner_of(&home, &dir)
                            .ok_or_else(|| PathError::Outside(path.clone()))?;
                        (id, dir, false)
                    }
                    Err(PathError::Outside(_)) if may_attach => {
                        let dir = unprotected(ctx, canonical_dir(&place.dir.join(&path))?)?;
                        let id = view.projection.id_for_root(&dir);
                        view.projection.attach(Binding {
                            workspace_id: id.clone(),
                            root: dir.clone(),
                        })?;
                        (id, dir, true)
                    }
                    Err(PathError::Outside(_)) => {
                        return Err(WorkspaceError::NeedsAuthority(path));
                    }
                    Err(other) => return Err(other.into()),
                }
            }
        };
        view.projection.activate(&home, &id, dir.clone())?;
        Ok(Changed {
            out: (),
            workspace_id: id,
            what: if attached {
                "attached and activated"
            } else {
                "activated"
            },
            detail: dir.display().to_string(),
        })
    })
    .await
    .map(|(view, ())| view)
}
