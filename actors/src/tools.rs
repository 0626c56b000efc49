//! Tools an agent's brain may call, and their execution. Which tools an
//! agent has follows from its profile's tool families alone, never from who
//! sent the current message.
//!
//! Each tool is a type implementing [`Tool`]: its spec, a typed input
//! (parsed with serde; its JSON Schema generated with schemars) and a
//! typed error that keeps its [`ErrorKind`]. The [`CATALOG`] lists the
//! types, so a tool cannot be listed without an implementation.
//!
//! # Layout
//! - `tool`: the [`Tool`] trait, [`Spec`], [`Plane`], [`Caller`].
//! - `catalog`: the registered tools, their schemas, the profile surface.
//! - `input`, `schema`: parsing inputs, generating their schemas.
//! - `error`: [`ToolError`] and its kinds.
//! - one file per plane: `agent`, `task`, `command`, `wait`, `work`,
//!   `workspace`; `memory` (the agent's notes); and `skill` (an instance's skills) (the record shapes they share are [`crate::views`]).
//! - `mcp`: the tools of MCP servers (`mcp__<server>__<tool>`), listed
//!   at run time beside the typed ones, and the whole [`Catalog`].
//! - `placeholder`, `cap`: bounds on inputs and outputs.

use holarchy_supervision::{AgentId, Profile};

use crate::brain::ToolCall;
use crate::Ctx;

mod agent;
mod cap;
mod catalog;
mod command;
mod error;
mod input;
mod mcp;
mod memory;
mod placeholder;
mod schema;
mod skill;
pub use skill::loaded_json as loaded_skill_json;
mod task;
mod tool;
mod wait;
mod work;
mod workspace;

pub use crate::views::{task_json, wait_json, work_json};
pub use agent::agent_view;
pub use cap::cap_output;
pub use catalog::{family_name, input_bound, tool_surface, ToolSpec, CATALOG};
pub use command::ENV_NOT_STORED;
pub use error::{error_json, Classify, ErrorKind, ToolError};
pub use input::InputError;
pub use mcp::{catalog, Catalog, CatalogEntry};
pub use placeholder::{escaped_len, fill_placeholders, InputTooLarge};
pub use tool::{Caller, InputBound, Plane, Spec, Tool};

pub use crate::protocol::{CallInput, ToolResult};

/// A call's input as it may be stored (events, decisions, approvals once
/// decided, memory, exports): what a tool passes on without keeping (an
/// `ExecCommand`'s `env` values) left out. `None`: store it as it is.
pub fn recorded_input(tool: &str, input: &serde_json::Value) -> Option<serde_json::Value> {
    match tool {
        "ExecCommand" => command::without_env_values(input),
        _ => None,
    }
}

/// A call of a tool the caller's profile does not have.
#[derive(Debug, thiserror::Error)]
#[error("tool `{0}` is not in this agent's tool catalog")]
pub struct NotInCatalog(String);

error::classified!(NotInCatalog);

impl Classify for NotInCatalog {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Refused
    }
}

/// Runs one tool call for `agent_id`. Failures are tool errors the brain
/// can read (`{"error": .., "kind": ..}`), not turn failures.
pub async fn call(
    ctx: &std::sync::Arc<Ctx>,
    agent_id: AgentId,
    profile: Profile,
    call: &ToolCall,
) -> ToolResult {
    let caller = Caller { agent_id, profile };
    let outcome = if call.name.starts_with(crate::mcp::PREFIX) {
        mcp::call(ctx, caller, &call.name, &call.input).await
    } else {
        match tool_surface(profile).find(|spec| spec.name == call.name) {
            Some(spec) => spec.call(ctx, caller, &call.input).await,
            None => Err(NotInCatalog(call.name.clone()).into()),
        }
    };
    let (output, is_error) = match outcome {
        Ok(value) => (value, false),
        Err(err) => (err.to_json(), true),
    };
    ToolResult {
        tool: call.name.clone(),
        input: CallInput::Whole(call.input.clone()),
        output,
        is_error,
    }
}

#[cfg(test)]
mod tests;
