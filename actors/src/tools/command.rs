//! `ExecCommand`: a shell command in the caller's active workspace, as a
//! task of its own; and how the command plane's errors read to a brain.

use std::collections::BTreeMap;
use std::sync::Arc;

use holarchy_supervision::ToolFamily;
use schemars::JsonSchema;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::{json, Value};

use super::error::{classified, Classify, ErrorKind, ToolError};
use super::tool::{Caller, Plane, Spec, Tool};
use crate::plane::command::{self as command_plane, CommandError};
use crate::views::place_json;
use crate::Ctx;

/// Longest variable name quoted back in an error.
const MAX_QUOTED_NAME: usize = 64;

/// `ExecCommand`.
#[derive(Debug)]
pub struct ExecCommand;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecInput {
    command: String,
    /// How long the call waits for the command before it yields a task
    /// handle (the plane refuses more than its maximum).
    #[schemars(range(max = 600_000))]
    yield_ms: Option<u64>,
    /// Variables for the process, checked as they are parsed so a name the
    /// shell could not take is refused before anything runs.
    #[serde(default, deserialize_with = "env_vars")]
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    env: Vec<(String, String)>,
}

/// `env`: an object of strings, each name a variable name and each value
/// free of NUL; `null` is none.
fn env_vars<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<(String, String)>, D::Error> {
    let vars = Option::<BTreeMap<String, String>>::deserialize(deserializer)?.unwrap_or_default();
    for (name, value) in &vars {
        if !command_plane::is_variable_name(name) {
            let quoted: String = name.chars().take(MAX_QUOTED_NAME).collect();
            return Err(D::Error::custom(format!(
                "`{quoted}` is not a variable name (letters, digits, `_`)"
            )));
        }
        if value.contains('\0') {
            return Err(D::Error::custom(format!(
                "the value of `{name}` holds a NUL"
            )));
        }
    }
    Ok(vars.into_iter().collect())
}

/// Stands for an `env` value in every record of a call: the value reaches
/// the process only.
pub const ENV_NOT_STORED: &str = "<not stored>";

/// `input` as records keep it: each `env` value replaced by
/// [`ENV_NOT_STORED`], the names kept, so a record says which variables a
/// command had without holding what they were (often a credential).
pub(super) fn without_env_values(input: &Value) -> Option<Value> {
    let env = input.get("env")?.as_object()?;
    if env.values().all(|v| v.as_str() == Some(ENV_NOT_STORED)) {
        return None;
    }
    let mut kept = input.clone();
    kept["env"] = env
        .keys()
        .map(|name| (name.clone(), Value::from(ENV_NOT_STORED)))
        .collect::<serde_json::Map<_, _>>()
        .into();
    Some(kept)
}

impl Tool for ExecCommand {
    const SPEC: Spec = Spec {
        name: "ExecCommand",
        family: ToolFamily::LocalEnvironment,
        plane: Plane::Task,
        description: "Runs a shell command in this agent's active workspace directory, in its own process group. A command done within `yield_ms` (default 3000) returns its output; a longer one returns a task handle and reports back when it ends. `env` is passed to the process; records keep only its names (a call waiting for an operator's approval keeps the values until it is decided).",
    };
    type Input = ExecInput;
    type Error = CommandError;

    async fn run(ctx: &Arc<Ctx>, caller: Caller, input: ExecInput) -> Result<Value, CommandError> {
        let yield_ms = input.yield_ms.unwrap_or(command_plane::DEFAULT_YIELD_MS);
        let done =
            command_plane::exec(ctx, caller.agent_id, input.command, input.env, yield_ms).await?;
        Ok(json!({
            "task_handle": {
                "task_id": done.task.id.to_string(),
                "task_kind": done.task.kind.name(),
                "status": done.task.status.name(),
                "initial_output": done.initial_output,
            },
            "exit": done.task.exit.map(|e| e.describe()),
            "ran_in": done.task.place.as_ref().map(place_json),
        }))
    }
}

classified!(CommandError);

impl Classify for CommandError {
    fn kind(&self) -> ErrorKind {
        match self {
            CommandError::BadCommand | CommandError::BadYield | CommandError::BadEnv => {
                ErrorKind::InvalidInput
            }
            CommandError::Ended => ErrorKind::Refused,
            // The owner is restarting or stopping, the process would not
            // start, or its stdin is full for now.
            CommandError::OwnerGone | CommandError::Start(_) | CommandError::StdinFull => {
                ErrorKind::Failed
            }
            CommandError::Limit(e) => e.kind(),
            CommandError::Store(e) => e.kind(),
        }
    }
}
