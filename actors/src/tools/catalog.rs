//! The tool catalog: every registered tool, in a stable order, with its
//! spec, its generated input schema and how to run it; and the surface a
//! profile gets. A tool is registered by naming its type here, so the
//! catalog cannot list a tool that has no implementation.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use holarchy_supervision::{Profile, ToolFamily};
use serde_json::{json, Value};

use super::agent::{AgentGet, SpawnAgent};
use super::command::ExecCommand;
use super::memory::{MemoryGet, MemorySearch, MemoryWrite};
use super::skill::LoadSkill;
use super::task::{TaskInput, TaskList, TaskOutput, TaskStatus, TaskStop};
use super::tool::{Caller, InputBound, Tool};
use super::wait::{CancelExternalTrigger, CreateExternalTrigger, Sleep};
use super::work::{Enqueue, UpdateWorkItem, UpdateWorkPlan};
use super::workspace::{ApplyPatch, AttachWorkspace, DetachWorkspace, UseWorkspace};
use super::{input, schema, ToolError};
use crate::Ctx;

/// A running tool call, its type erased.
type Running<'a> = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send + 'a>>;

/// One registered tool: what a brain is told of it, and its entry point.
#[derive(Debug, Clone, Copy)]
pub struct ToolSpec {
    pub name: &'static str,
    pub family: ToolFamily,
    /// agent, task, waiting, work, workspace or memory.
    pub plane: &'static str,
    pub description: &'static str,
    pub input_bound: InputBound,
    /// Generates the input's JSON Schema (cached by [`ToolSpec::schema`]).
    input_schema: fn() -> Value,
    /// Parses the input, then runs the tool.
    run: for<'a> fn(&'a Arc<Ctx>, Caller, &Value) -> Running<'a>,
}

impl ToolSpec {
    /// The entry of tool `T`.
    const fn of<T: Tool + 'static>() -> Self {
        ToolSpec {
            name: T::SPEC.name,
            family: T::SPEC.family,
            plane: T::SPEC.plane.name(),
            description: T::SPEC.description,
            input_bound: T::INPUT_BOUND,
            input_schema: schema::input_schema::<T::Input>,
            run: run::<T>,
        }
    }

    /// The JSON Schema of the tool's input, generated once per process.
    pub fn schema(&self) -> Value {
        static SCHEMAS: OnceLock<HashMap<&'static str, Value>> = OnceLock::new();
        let schemas = SCHEMAS.get_or_init(|| {
            CATALOG
                .iter()
                .map(|spec| (spec.name, (spec.input_schema)()))
                .collect()
        });
        match schemas.get(self.name) {
            Some(schema) => schema.clone(),
            // Only a spec built outside the catalog (none is) lands here.
            None => (self.input_schema)(),
        }
    }

    /// What a brain is shown of the tool.
    pub fn view(&self) -> Value {
        json!({
            "name": self.name,
            "family": self.family.name(),
            "plane": self.plane,
            "description": self.description,
            "input_schema": self.schema(),
        })
    }

    /// Runs the tool for `caller` on `input` as the brain wrote it (its
    /// placeholders filled in).
    pub(super) fn call<'a>(&self, ctx: &'a Arc<Ctx>, caller: Caller, input: &Value) -> Running<'a> {
        (self.run)(ctx, caller, input)
    }
}

/// Parses the input before the future is made, so the future does not
/// borrow it; a parse failure never runs the tool.
fn run<'a, T: Tool + 'static>(ctx: &'a Arc<Ctx>, caller: Caller, input: &Value) -> Running<'a> {
    let parsed = input::parse::<T::Input>(input);
    Box::pin(async move {
        let input = parsed?;
        T::run(ctx, caller, input).await.map_err(Into::into)
    })
}

/// Every tool this build knows, in a stable order: an agent's catalog is
/// the same for every turn.
pub static CATALOG: &[ToolSpec] = &[
    ToolSpec::of::<AgentGet>(),
    ToolSpec::of::<SpawnAgent>(),
    ToolSpec::of::<TaskList>(),
    ToolSpec::of::<TaskStatus>(),
    ToolSpec::of::<TaskOutput>(),
    ToolSpec::of::<TaskInput>(),
    ToolSpec::of::<TaskStop>(),
    ToolSpec::of::<ExecCommand>(),
    ToolSpec::of::<UseWorkspace>(),
    ToolSpec::of::<ApplyPatch>(),
    ToolSpec::of::<AttachWorkspace>(),
    ToolSpec::of::<DetachWorkspace>(),
    ToolSpec::of::<Sleep>(),
    ToolSpec::of::<Enqueue>(),
    ToolSpec::of::<UpdateWorkItem>(),
    ToolSpec::of::<UpdateWorkPlan>(),
    ToolSpec::of::<CreateExternalTrigger>(),
    ToolSpec::of::<CancelExternalTrigger>(),
    ToolSpec::of::<LoadSkill>(),
    ToolSpec::of::<MemoryWrite>(),
    ToolSpec::of::<MemorySearch>(),
    ToolSpec::of::<MemoryGet>(),
];

/// The tools an agent with this profile may call, in catalog order.
/// The bound the input of a call of `tool` is held to: its spec's, and
/// the standard one for a name no tool of the catalog has (an MCP tool).
pub fn input_bound(tool: &str) -> InputBound {
    CATALOG
        .iter()
        .find(|spec| spec.name == tool)
        .map_or(InputBound::Standard, |spec| spec.input_bound)
}

/// The family a tool name belongs to, for metrics: `mcp` for an MCP
/// server's tool, `unknown` for a name no tool has (a brain may call
/// anything).
pub fn family_name(tool: &str) -> &'static str {
    if tool.starts_with(crate::mcp::PREFIX) {
        return ToolFamily::Mcp.name();
    }
    CATALOG
        .iter()
        .find(|spec| spec.name == tool)
        .map_or("unknown", |spec| spec.family.name())
}

pub fn tool_surface(profile: Profile) -> impl Iterator<Item = &'static ToolSpec> {
    CATALOG
        .iter()
        .filter(move |spec| profile.tool_families.contains(spec.family))
}
