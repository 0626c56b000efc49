//! What a tool is: the [`Tool`] trait every tool implements, with its
//! [`Spec`], its typed input and its typed error, and the [`Caller`] it
//! runs for.

use std::future::Future;
use std::sync::Arc;

use holarchy_supervision::{AgentId, Profile, ToolFamily};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ToolError;
pub use crate::limits::InputBound;
use crate::Ctx;

/// The plane a tool works on, shown to brains to group the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plane {
    Agent,
    Task,
    Waiting,
    Work,
    Workspace,
    Memory,
}

impl Plane {
    pub const fn name(self) -> &'static str {
        match self {
            Plane::Agent => "agent",
            Plane::Task => "task",
            Plane::Waiting => "waiting",
            Plane::Work => "work",
            Plane::Workspace => "workspace",
            Plane::Memory => "memory",
        }
    }
}

/// What a brain is told about a tool besides its input schema.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// The name a brain calls it by; unique in the catalog.
    pub name: &'static str,
    /// Decides which profiles have it: the family, never the sender.
    pub family: ToolFamily,
    pub plane: Plane,
    pub description: &'static str,
}

/// The agent a tool runs for. A tool sees its caller's id and profile,
/// never who sent the message being handled.
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub agent_id: AgentId,
    pub profile: Profile,
}

/// One tool a brain may call. The catalog lists implementations of this
/// trait, so a tool cannot be listed without one, and its input schema is
/// generated from `Input`, so the schema a brain reads is the one the
/// tool parses.
pub trait Tool {
    const SPEC: Spec;

    /// The bound its input is held to.
    const INPUT_BOUND: InputBound = InputBound::Standard;

    /// The input, parsed from the call's JSON before the tool runs; a
    /// failed parse is an `invalid_input` error and the tool never runs.
    type Input: DeserializeOwned + JsonSchema + Send;

    /// The plane's own error; `ToolError` gives it its kind.
    type Error: Into<ToolError>;

    /// Runs the tool. `Ok` is the JSON result the brain reads.
    fn run(
        ctx: &Arc<Ctx>,
        caller: Caller,
        input: Self::Input,
    ) -> impl Future<Output = Result<Value, Self::Error>> + Send;
}
