//! The agent plane's tools: `AgentGet` (the caller's own summary) and
//! `SpawnAgent`; and the agent summary brains are shown.

use std::path::PathBuf;
use std::sync::Arc;

use holarchy_supervision::spawn::SpawnRefusal;
use holarchy_supervision::workspace::WorkspaceMode;
use holarchy_supervision::{AgentRecord, Ownership, Preset, TaskStatus, ToolFamily, WaitStatus};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{classified, Classify, ErrorKind, ToolError};
use super::input::NoInput;
use super::tool::{Caller, Plane, Spec, Tool};
use super::tool_surface;
use crate::live::AgentSnapshot;
use crate::plane::spawn::{self, SpawnError, SpawnRequest};
use crate::store::StoreError;
use crate::views::{place_json, work_json, worktree_json};
use crate::workspace as workspace_plane;
use crate::Ctx;

/// `AgentGet`: the calling agent's own summary.
#[derive(Debug)]
pub struct AgentGet;

/// Why `AgentGet` failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentGetError {
    #[error("agent record not found")]
    NoRecord,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Tool for AgentGet {
    const SPEC: Spec = Spec {
        name: "AgentGet",
        family: ToolFamily::Core,
        plane: Plane::Agent,
        description: "Returns the calling agent's own summary: identity, profile, lineage, supervisor, lifecycle state, current work item, waits, active workspace and tools.",
    };
    type Input = NoInput;
    type Error = AgentGetError;

    async fn run(ctx: &Arc<Ctx>, caller: Caller, _: NoInput) -> Result<Value, AgentGetError> {
        let record = ctx
            .reads()
            .agent(caller.agent_id)?
            .ok_or(AgentGetError::NoRecord)?;
        Ok(json!({ "agent": agent_view(ctx, &record)? }))
    }
}

/// `SpawnAgent`: a private child (with a task handle) or a public agent.
#[derive(Debug)]
pub struct SpawnAgent;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnInput {
    preset: Option<PresetName>,
    initial_message: Option<String>,
    name: Option<String>,
    context: Option<Context>,
    workspace_mode: Option<Mode>,
    root: Option<String>,
    role: Option<String>,
}

/// The presets a tool may name, in the order the schema lists them.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum PresetName {
    PrivateChild,
    PrivateDelegator,
    PublicNamed,
}

impl From<PresetName> for Preset {
    fn from(name: PresetName) -> Self {
        match name {
            PresetName::PrivateChild => Preset::PrivateChild,
            PresetName::PrivateDelegator => Preset::PrivateDelegator,
            PresetName::PublicNamed => Preset::PublicNamed,
        }
    }
}

/// What the child starts from: the handoff alone, or the caller's view.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Context {
    Fresh,
    Fork,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Inherit,
    Worktree,
    ExplicitRoot,
}

impl From<Mode> for WorkspaceMode {
    fn from(mode: Mode) -> Self {
        match mode {
            Mode::Inherit => WorkspaceMode::Inherit,
            Mode::Worktree => WorkspaceMode::Worktree,
            Mode::ExplicitRoot => WorkspaceMode::ExplicitRoot,
        }
    }
}

impl Tool for SpawnAgent {
    const SPEC: Spec = Spec {
        name: "SpawnAgent",
        family: ToolFamily::AgentCreation,
        plane: Plane::Agent,
        description: "Creates an agent. `preset` is private_child (default), private_delegator or public_named. A private child is supervised by the caller, gets `initial_message` (required) as its first message, and comes back with a task handle; a public agent needs a `name` and keeps only lineage. The child runs on the caller's brain. A private child's `workspace_mode`: `inherit` (default: the caller's attached workspaces and active directory), `worktree` (a git worktree of the caller's active workspace on a new branch `holarchy/<task id>`, owned by the task handle and removed with its branch when the task is stopped or its owner cleaned up; kept after the child completes until then) or `explicit_root` (`root`, a directory inside the caller's attached set, becomes the child's only workspace). A public agent inherits the caller's attached workspaces, not its active one. `context: fork` also gives it the caller's work item, plan and recent turns; `fresh` (the default) only the handoff. A child runs under its creator's role, skills and instance constraints; `role` gives it a role prompt of its own (constraints always pass down).",
    };
    type Input = SpawnInput;
    type Error = SpawnError;

    async fn run(ctx: &Arc<Ctx>, caller: Caller, input: SpawnInput) -> Result<Value, SpawnError> {
        let request = SpawnRequest {
            fork: matches!(input.context, Some(Context::Fork)),
            preset: input.preset.map_or(Preset::PrivateChild, Preset::from),
            workspace_mode: input
                .workspace_mode
                .map_or(WorkspaceMode::Inherit, Into::into),
            root: input.root.map(PathBuf::from),
            initial_message: input.initial_message,
            name: input.name,
            role: input.role,
        };
        let spawned = spawn::spawn_agent(ctx, caller.agent_id, caller.profile, request).await?;
        Ok(json!({
            "agent_id": spawned.agent_id.to_string(),
            "task_handle": spawned.task.as_ref().map(|t| json!({
                "task_id": t.id.to_string(),
                "task_kind": t.kind.name(),
                "status": t.status.name(),
                "initial_output": Value::Null,
                "worktree": t.worktree.as_ref().map(worktree_json),
            })),
        }))
    }
}

classified!(AgentGetError, SpawnError);

impl Classify for AgentGetError {
    fn kind(&self) -> ErrorKind {
        match self {
            AgentGetError::NoRecord => ErrorKind::NotFound,
            AgentGetError::Store(e) => e.kind(),
        }
    }
}

impl Classify for SpawnError {
    fn kind(&self) -> ErrorKind {
        match self {
            SpawnError::Refused(refusal) => match refusal {
                SpawnRefusal::NoAgentCreation | SpawnRefusal::PrivateMayNotSpawnPublic => {
                    ErrorKind::Refused
                }
                SpawnRefusal::MissingInitialMessage => ErrorKind::InvalidInput,
            },
            SpawnError::Invalid(e) => e.kind(),
            SpawnError::Limit(e) => e.kind(),
            SpawnError::NameRequired
            | SpawnError::Role(_)
            | SpawnError::NameNotAllowed
            | SpawnError::ModeNeedsPrivate(_)
            | SpawnError::RootMismatch => ErrorKind::InvalidInput,
            // The caller is going away, or the runtime could not start the
            // child; a moved workspace is worth another try.
            SpawnError::CallerGone | SpawnError::Spawn(_) | SpawnError::WorkspaceMoved => {
                ErrorKind::Failed
            }
            SpawnError::Store(e) => e.kind(),
            SpawnError::Workspace(e) => e.kind(),
            SpawnError::Worktree(e) => e.kind(),
        }
    }
}

/// The agent's summary as brains and `AgentGet` see it: its record, its
/// live view (as the agent published it, without asking the actor), its
/// waits and its work focus.
pub fn agent_view(ctx: &Ctx, record: &AgentRecord) -> Result<Value, StoreError> {
    let agent_id = record.id;
    let live = ctx.directory.get(agent_id).map(|entry| entry.snapshot());
    let mut agent = agent_json(record, live.as_ref());
    let waits = ctx.reads().waits_of(agent_id)?;
    agent["waiting_on"] = waits
        .iter()
        .filter(|w| w.status == WaitStatus::Armed)
        .map(|w| Value::String(w.describe()))
        .collect();
    agent["current_work_item"] = ctx
        .reads()
        .work_focus(agent_id)?
        .map_or(Value::Null, |w| work_json(&w));
    agent["active_workspace"] = place_json(&workspace_plane::place(ctx, agent_id)?);
    agent["running_tasks"] = json!(ctx
        .reads()
        .tasks_of(agent_id)?
        .iter()
        .filter(|t| t.status == TaskStatus::Running)
        .count());
    Ok(agent)
}

/// The agent's summary, shaped like the API's `AgentGetResult.agent`.
fn agent_json(record: &AgentRecord, live: Option<&AgentSnapshot>) -> Value {
    let ownership = match record.profile.ownership {
        Ownership::SelfOwned => "self_owned",
        Ownership::ParentSupervised => "parent_supervised",
    };
    json!({
        "agent_id": record.id.to_string(),
        "name": record.name,
        "profile": {
            "preset": record.profile.preset().map(|p| p.name()),
            "tool_families": record.profile.tool_families.iter().map(|f| f.name()).collect::<Vec<_>>(),
        },
        "visibility": format!("{:?}", record.profile.visibility).to_lowercase(),
        "ownership": ownership,
        "lineage_parent_agent_id": record.lineage_parent_agent_id.map(|id| id.to_string()),
        "supervisor_agent_id": record.supervisor_agent_id.map(|id| id.to_string()),
        "state": record.state.name(),
        "queue_length": live.map(|s| s.queue_len),
        "current_run_id": live.and_then(|s| s.current_run).map(|id| id.to_string()),
        "turns_completed": live.map(|s| s.turns_completed),
        "tools": tool_surface(record.profile).map(|t| t.name).collect::<Vec<_>>(),
        "mcp_servers": record.mcp_servers,
        "brain": record.brain.kind(),
    })
}
