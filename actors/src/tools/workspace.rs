//! The workspace plane's tools: `UseWorkspace` and `ApplyPatch` (local
//! environment) and `AttachWorkspace` / `DetachWorkspace` (authority
//! expanding). Input parsing and result shapes; the work is the workspace
//! plane's and `apply_patch`'s.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use holarchy_supervision::patch::PatchError;
use holarchy_supervision::workspace::{Binding, WorkspaceRefusal};
use holarchy_supervision::ToolFamily;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{classified, Classify, ErrorKind, ToolError};
use super::tool::{Caller, InputBound, Plane, Spec, Tool};
use crate::workspace::apply_patch::{self, ApplyError};
use crate::workspace::path::PathError;
use crate::workspace::{self as workspace_plane, Target, View, WorkspaceError};
use crate::Ctx;

/// `UseWorkspace`: makes a workspace, or a directory in one, active.
#[derive(Debug)]
pub struct UseWorkspace;

/// Exactly one of the two (checked when the tool runs).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UseInput {
    workspace_id: Option<String>,
    path: Option<String>,
}

impl Tool for UseWorkspace {
    const SPEC: Spec = Spec {
        name: "UseWorkspace",
        family: ToolFamily::LocalEnvironment,
        plane: Plane::Workspace,
        description: "Makes a workspace active, so commands and patches run there. `workspace_id` activates an attached workspace's root (`agent_home` is always attached); `path` (relative to the active directory, or absolute) activates a directory inside the attached workspaces. A path outside them is attached as a new workspace only with the authority_expansion family; otherwise it is refused and nothing changes.",
    };
    type Input = UseInput;
    type Error = WorkspaceError;

    async fn run(ctx: &Arc<Ctx>, caller: Caller, input: UseInput) -> Result<Value, WorkspaceError> {
        let target = match (input.workspace_id, input.path) {
            (Some(id), None) => Target::Id(id),
            (None, Some(path)) => Target::Path(PathBuf::from(path)),
            (Some(_), Some(_)) | (None, None) => return Err(WorkspaceError::OneTarget),
        };
        // The family, not the message's sender, decides: the surface is stable.
        let may_attach = caller
            .profile
            .tool_families
            .contains(ToolFamily::AuthorityExpansion);
        let view = workspace_plane::use_workspace(ctx, caller.agent_id, target, may_attach).await?;
        Ok(view_json(&view))
    }
}

/// `ApplyPatch`: a unified diff, all or nothing, in the active workspace.
#[derive(Debug)]
pub struct ApplyPatch;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchInput {
    patch: String,
}

impl Tool for ApplyPatch {
    const SPEC: Spec = Spec {
        name: "ApplyPatch",
        family: ToolFamily::LocalEnvironment,
        plane: Plane::Workspace,
        description: "Applies a unified diff (diff -u or git diff; paths relative to the active directory) inside the active workspace. Every hunk of every file must apply, or nothing is written; each file is replaced atomically. Paths outside the active workspace are refused. Returns the files changed.",
    };
    const INPUT_BOUND: InputBound = InputBound::Patch;
    type Input = PatchInput;
    type Error = ApplyError;

    async fn run(ctx: &Arc<Ctx>, caller: Caller, input: PatchInput) -> Result<Value, ApplyError> {
        let changed = apply_patch::apply(ctx, caller.agent_id, &input.patch).await?;
        Ok(json!({
            "files": changed.iter().map(|c| json!({
                "path": c.path.display().to_string(),
                "change": c.change.name(),
            })).collect::<Vec<_>>(),
        }))
    }
}

/// `AttachWorkspace`: a host directory becomes a workspace of the agent.
#[derive(Debug)]
pub struct AttachWorkspace;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachInput {
    path: String,
    /// Default: made from the directory's name.
    workspace_id: Option<String>,
}

impl Tool for AttachWorkspace {
    const SPEC: Spec = Spec {
        name: "AttachWorkspace",
        family: ToolFamily::AuthorityExpansion,
        plane: Plane::Workspace,
        description: "Attaches a host directory (an absolute path) as a workspace this agent may use, under `workspace_id` or an id made from the directory's name. Does not make it active.",
    };
    type Input = AttachInput;
    type Error = WorkspaceError;

    async fn run(
        ctx: &Arc<Ctx>,
        caller: Caller,
        input: AttachInput,
    ) -> Result<Value, WorkspaceError> {
        let path = PathBuf::from(input.path);
        let (view, binding) =
            workspace_plane::attach(ctx, caller.agent_id, &path, input.workspace_id).await?;
        let mut out = view_json(&view);
        out["attached"] = binding_json(&binding);
        Ok(out)
    }
}

/// `DetachWorkspace`: removes a binding; the directory is never touched.
#[derive(Debug)]
pub struct DetachWorkspace;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DetachInput {
    workspace_id: String,
}

impl Tool for DetachWorkspace {
    const SPEC: Spec = Spec {
        name: "DetachWorkspace",
        family: ToolFamily::AuthorityExpansion,
        plane: Plane::Workspace,
        description: "Removes a workspace binding; the directory itself is never touched. An agent working in it goes back to agent_home.",
    };
    type Input = DetachInput;
    type Error = WorkspaceError;

    async fn run(
        ctx: &Arc<Ctx>,
        caller: Caller,
        input: DetachInput,
    ) -> Result<Value, WorkspaceError> {
        let (view, binding) =
            workspace_plane::detach(ctx, caller.agent_id, &input.workspace_id).await?;
        let mut out = view_json(&view);
        out["detached"] = binding_json(&binding);
        Ok(out)
    }
}

fn binding_json(binding: &Binding) -> Value {
    json!({
        "workspace_id": binding.workspace_id,
        "root": binding.root.display().to_string(),
    })
}

/// The agent's workspaces as its tools report them.
fn view_json(view: &View) -> Value {
    let place = view.place();
    json!({
        "active": {
            "workspace_id": place.workspace_id,
            "dir": place.dir.display().to_string(),
        },
        "workspaces": view.bindings().iter().map(binding_json).collect::<Vec<_>>(),
    })
}

classified!(WorkspaceError, ApplyError);

impl Classify for WorkspaceError {
    fn kind(&self) -> ErrorKind {
        match self {
            // The calling agent itself is gone or between lives.
            WorkspaceError::AgentNotFound(_) | WorkspaceError::AgentNotLive(_) => ErrorKind::Failed,
            WorkspaceError::Refused(e) => e.kind(),
            WorkspaceError::Path(e) => e.kind(),
            WorkspaceError::NeedsAuthority(_)
            | WorkspaceError::Protected(_)
            | WorkspaceError::NotAllowed(_) => ErrorKind::Refused,
            WorkspaceError::NotAbsolute(_)
            | WorkspaceError::NotADirectory(_)
            | WorkspaceError::OneTarget => ErrorKind::InvalidInput,
            WorkspaceError::Home(_) => ErrorKind::Failed,
            WorkspaceError::Store(e) => e.kind(),
        }
    }
}

impl Classify for WorkspaceRefusal {
    fn kind(&self) -> ErrorKind {
        match self {
            WorkspaceRefusal::BadId => ErrorKind::InvalidInput,
            WorkspaceRefusal::Unknown(_) => ErrorKind::NotFound,
            WorkspaceRefusal::Builtin
            | WorkspaceRefusal::IdTaken(_)
            | WorkspaceRefusal::RootTaken(..)
            | WorkspaceRefusal::OutsideWorkspace(..) => ErrorKind::Refused,
        }
    }
}

impl Classify for PathError {
    fn kind(&self) -> ErrorKind {
        match self {
            PathError::Outside(_) => ErrorKind::Refused,
            PathError::ClimbsFromMissing(_) | PathError::Empty => ErrorKind::InvalidInput,
            PathError::DanglingLink(_) => ErrorKind::NotFound,
            PathError::Io { source, .. } => io_kind(source),
        }
    }
}

impl Classify for ApplyError {
    fn kind(&self) -> ErrorKind {
        match self {
            ApplyError::TooLarge => ErrorKind::InvalidInput,
            ApplyError::Patch(e) => e.kind(),
            ApplyError::Path { source, .. } => source.kind(),
            // What is on disk is not what a patch may touch.
            ApplyError::Exists(_)
            | ApplyError::NotAFile(_)
            | ApplyError::Link(_)
            | ApplyError::NotText(_) => ErrorKind::Refused,
            ApplyError::Io { source, .. } => io_kind(source),
            ApplyError::Workspace(e) => e.kind(),
            ApplyError::Store(e) => e.kind(),
        }
    }
}

impl Classify for PatchError {
    fn kind(&self) -> ErrorKind {
        match self {
            PatchError::Missing { .. } => ErrorKind::NotFound,
            // The patch does not read, or does not fit the files as they
            // are: read them again and write another.
            PatchError::Empty
            | PatchError::Malformed { .. }
            | PatchError::CountMismatch { .. }
            | PatchError::Binary { .. }
            | PatchError::Unsupported { .. }
            | PatchError::AlreadyExists { .. }
            | PatchError::DoesNotApply { .. }
            | PatchError::DeleteIncomplete { .. } => ErrorKind::InvalidInput,
        }
    }
}

/// A missing file is not found; any other I/O error is a failure.
fn io_kind(err: &io::Error) -> ErrorKind {
    match err.kind() {
        io::ErrorKind::NotFound => ErrorKind::NotFound,
        _ => ErrorKind::Failed,
    }
}
