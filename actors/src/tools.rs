//! Tools an agent's brain may call, and their execution. Which tools an
//! agent has follows from its profile's tool families alone, never from who
//! sent the current message.

use holarchy_supervision::{AgentId, AgentRecord, Profile, ToolFamily};
use serde_json::json;

use crate::brain::ToolCall;
use crate::Ctx;

/// One tool of the catalog.
#[derive(Debug, Clone, Copy)]
pub struct ToolSpec {
    pub name: &'static str,
    pub family: ToolFamily,
    pub description: &'static str,
}

/// Every tool this build knows. Later planes add theirs here.
pub const CATALOG: &[ToolSpec] = &[ToolSpec {
    name: "AgentGet",
    family: ToolFamily::Core,
    description: "Returns the calling agent's own summary: identity, profile, lineage, supervisor and lifecycle state.",
}];

/// The tools an agent with this profile may call, in catalog order.
pub fn tool_surface(profile: Profile) -> impl Iterator<Item = &'static ToolSpec> {
    CATALOG
        .iter()
        .filter(move |spec| profile.tool_families.contains(spec.family))
}

/// The outcome of one tool call, as the brain and the event log see it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub tool: String,
    pub input: String,
    pub output: String,
    pub is_error: bool,
}

impl ToolResult {
    fn error(call: &ToolCall, message: String) -> Self {
        Self {
            tool: call.name.clone(),
            input: call.input.to_string(),
            output: json!({ "error": message }).to_string(),
            is_error: true,
        }
    }

    fn ok(call: &ToolCall, output: serde_json::Value) -> Self {
        Self {
            tool: call.name.clone(),
            input: call.input.to_string(),
            output: output.to_string(),
            is_error: false,
        }
    }
}

/// Runs one tool call for `agent_id`. Failures are tool errors the brain
/// can read, not turn failures.
pub async fn call(ctx: &Ctx, agent_id: AgentId, profile: Profile, call: &ToolCall) -> ToolResult {
    if !tool_surface(profile).any(|spec| spec.name == call.name) {
        return ToolResult::error(
            call,
            format!("tool `{}` is not in this agent's tool catalog", call.name),
        );
    }
    match call.name.as_str() {
        "AgentGet" => match ctx.store.agent(agent_id) {
            Ok(Some(record)) => ToolResult::ok(call, agent_json(&record)),
            Ok(None) => ToolResult::error(call, "agent record not found".into()),
            Err(err) => ToolResult::error(call, err.to_string()),
        },
        other => ToolResult::error(call, format!("tool `{other}` has no implementation")),
    }
}

fn agent_json(record: &AgentRecord) -> serde_json::Value {
    json!({
        "agent_id": record.id.to_string(),
        "name": record.name,
        "profile": record.profile.preset().map(|p| p.name()),
        "visibility": format!("{:?}", record.profile.visibility).to_lowercase(),
        "tool_families": record.profile.tool_families.iter().map(|f| f.name()).collect::<Vec<_>>(),
        "lineage_parent_agent_id": record.lineage_parent_agent_id.map(|id| id.to_string()),
        "supervisor_agent_id": record.supervisor_agent_id.map(|id| id.to_string()),
        "state": record.state.name(),
    })
}
