//! The workspace tools: `UseWorkspace` and `ApplyPatch` (local environment)
//! and `AttachWorkspace` / `DetachWorkspace` (authority expanding). Input
//! parsing and result shapes; the work is the workspace plane's.

use std::path::PathBuf;
use std::sync::Arc;

use holarchy_supervision::workspace::Binding;
use holarchy_supervision::{AgentId, Profile, ToolFamily};
use serde_json::{json, Value};

use super::text_field;
use crate::plane::workspace::apply_patch;
use crate::plane::workspace::{self, Target, View};
use crate::Ctx;

/// Runs one of the workspace tools; `None` if `tool` is not one of them.
pub(super) async fn run(
    ctx: &Arc<Ctx>,
    agent_id: AgentId,
    profile: Profile,
    tool: &str,
    input: &Value,
) -> Option<Result<Value, String>> {
    let result = match tool {
        "UseWorkspace" => use_workspace(ctx, agent_id, profile, input).await,
        "AttachWorkspace" => attach(ctx, agent_id, input).await,
        "DetachWorkspace" => detach(ctx, agent_id, input).await,
        "ApplyPatch" => patch(ctx, agent_id, input).await,
        _ => return None,
    };
    Some(result)
}

async fn use_workspace(
    ctx: &Arc<Ctx>,
    agent_id: AgentId,
    profile: Profile,
    input: &Value,
) -> Result<Value, String> {
    let target = match (
        text_field(input, "workspace_id")?,
        text_field(input, "path")?,
    ) {
        (Some(id), None) => Target::Id(id.to_owned()),
        (None, Some(path)) => Target::Path(PathBuf::from(path)),
        _ => return Err(workspace::WorkspaceError::OneTarget.to_string()),
    };
    // The family, not the message's sender, decides: the surface is stable.
    let may_attach = profile
        .tool_families
        .contains(ToolFamily::AuthorityExpansion);
    let view = workspace::use_workspace(ctx, agent_id, target, may_attach)
        .await
        .map_err(|e| e.to_string())?;
    Ok(view_json(&view))
}

async fn attach(ctx: &Arc<Ctx>, agent_id: AgentId, input: &Value) -> Result<Value, String> {
    let path = text_field(input, "path")?.ok_or("`path` is required")?;
    let id = text_field(input, "workspace_id")?.map(str::to_owned);
    let (view, binding) = workspace::attach(ctx, agent_id, path.as_ref(), id)
        .await
        .map_err(|e| e.to_string())?;
    let mut out = view_json(&view);
    out["attached"] = binding_json(&binding);
    Ok(out)
}

async fn detach(ctx: &Arc<Ctx>, agent_id: AgentId, input: &Value) -> Result<Value, String> {
    let id = text_field(input, "workspace_id")?.ok_or("`workspace_id` is required")?;
    let (view, binding) = workspace::detach(ctx, agent_id, id)
        .await
        .map_err(|e| e.to_string())?;
    let mut out = view_json(&view);
    out["detached"] = binding_json(&binding);
    Ok(out)
}

async fn patch(ctx: &Arc<Ctx>, agent_id: AgentId, input: &Value) -> Result<Value, String> {
    let text = text_field(input, "patch")?.ok_or("`patch` is required")?;
    let changed = apply_patch::apply(ctx, agent_id, text)
        .await
        .map_err(|e| e.to_string())?;
    Ok(json!({
        "files": changed.iter().map(|c| json!({
            "path": c.path.display().to_string(),
            "change": c.change.name(),
        })).collect::<Vec<_>>(),
    }))
}

fn binding_json(binding: &Binding) -> Value {
    json!({
        "workspace_id": binding.workspace_id,
        "root": binding.root.display().to_string(),
    })
}

/// The agent's workspaces as its tools report them.
pub fn view_json(view: &View) -> Value {
    let place = view.place();
    json!({
        "active": {
            "workspace_id": place.workspace_id,
            "dir": place.dir.display().to_string(),
        },
        "workspaces": view.bindings().iter().map(binding_json).collect::<Vec<_>>(),
    })
}
