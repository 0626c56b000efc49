//! The task plane's tools: what an agent can do with the tasks it owns
//! (its child agents and its commands). `ExecCommand`, which starts a
//! command task, is in `command.rs`.

use std::sync::Arc;

use holarchy_supervision::{TaskId, ToolFamily};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{classified, Classify, ErrorKind, ToolError};
use super::input::{from_text, NoInput};
use super::tool::{Caller, Plane, Spec, Tool};
use crate::plane::task::{self as task_plane, TaskError};
use crate::views::task_json;
use crate::Ctx;

/// Names one of the caller's tasks.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskRef {
    #[serde(deserialize_with = "from_text")]
    #[schemars(with = "String")]
    task_id: TaskId,
}

/// `TaskList`: the caller's tasks.
#[derive(Debug)]
pub struct TaskList;

impl Tool for TaskList {
    const SPEC: Spec = Spec {
        name: "TaskList",
        family: ToolFamily::Core,
        plane: Plane::Task,
        description: "Lists the tasks this agent owns (child agents and commands) with their kind, label and status.",
    };
    type Input = NoInput;
    type Error = TaskError;

    async fn run(ctx: &Arc<Ctx>, caller: Caller, _: NoInput) -> Result<Value, TaskError> {
        let tasks = task_plane::list(ctx, caller.agent_id)?;
        Ok(Value::Array(tasks.iter().map(task_json).collect()))
    }
}

/// `TaskStatus`: one task's lifecycle state.
#[derive(Debug)]
pub struct TaskStatus;

impl Tool for TaskStatus {
    const SPEC: Spec = Spec {
        name: "TaskStatus",
        family: ToolFamily::Core,
        plane: Plane::Task,
        description: "Returns the lifecycle state of one of this agent's tasks.",
    };
    type Input = TaskRef;
    type Error = TaskError;

    async fn run(ctx: &Arc<Ctx>, caller: Caller, input: TaskRef) -> Result<Value, TaskError> {
        let task = task_plane::get(ctx, input.task_id, Some(caller.agent_id))?;
        Ok(task_json(&task))
    }
}

/// `TaskOutput`: a page of a command's output, or a child's result.
#[derive(Debug)]
pub struct TaskOutput;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputInput {
    #[serde(deserialize_with = "from_text")]
    #[schemars(with = "String")]
    task_id: TaskId,
    /// Where the page starts in the command's output (default 0).
    offset: Option<u64>,
}

impl Tool for TaskOutput {
    const SPEC: Spec = Spec {
        name: "TaskOutput",
        family: ToolFamily::Core,
        plane: Plane::Task,
        description: "Returns a task's output: a command's output from `offset`, or a child's result (its replies so far while it runs).",
    };
    type Input = OutputInput;
    type Error = TaskError;

    async fn run(ctx: &Arc<Ctx>, caller: Caller, input: OutputInput) -> Result<Value, TaskError> {
        let offset = input.offset.unwrap_or(0);
        let (task, output) = task_plane::output(ctx, input.task_id, Some(caller.agent_id), offset)?;
        Ok(json!({
            "task_id": task.id.to_string(),
            "status": task.status.name(),
            "output": output.text,
            "next_offset": output.next_offset,
            "dropped_bytes": output.dropped,
            "exit": task.exit.map(|e| e.describe()),
        }))
    }
}

/// `TaskInput`: a message to a supervised child, or text to a command's
/// stdin.
#[derive(Debug)]
pub struct TaskInput;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InputInput {
    #[serde(deserialize_with = "from_text")]
    #[schemars(with = "String")]
    task_id: TaskId,
    text: String,
}

impl Tool for TaskInput {
    const SPEC: Spec = Spec {
        name: "TaskInput",
        family: ToolFamily::Core,
        plane: Plane::Task,
        description:
            "Sends follow-up input: a message to a supervised child, or text to a command's stdin.",
    };
    type Input = InputInput;
    type Error = TaskError;

    async fn run(ctx: &Arc<Ctx>, caller: Caller, input: InputInput) -> Result<Value, TaskError> {
        let delivered =
            task_plane::input(ctx, input.task_id, Some(caller.agent_id), input.text).await?;
        Ok(json!({ "message_id": delivered.map(|d| d.message_id.to_string()) }))
    }
}

/// `TaskStop`: stops a child's whole private subtree, or a command.
#[derive(Debug)]
pub struct TaskStop;

impl Tool for TaskStop {
    const SPEC: Spec = Spec {
        name: "TaskStop",
        family: ToolFamily::Core,
        plane: Plane::Task,
        description: "Stops a task: a child agent and its whole private subtree, or a command (SIGTERM, then SIGKILL).",
    };
    type Input = TaskRef;
    type Error = TaskError;

    async fn run(ctx: &Arc<Ctx>, caller: Caller, input: TaskRef) -> Result<Value, TaskError> {
        let task =
            task_plane::stop(ctx, input.task_id, Some(caller.agent_id), "by its owner").await?;
        Ok(task_json(&task))
    }
}

classified!(TaskError);

impl Classify for TaskError {
    fn kind(&self) -> ErrorKind {
        match self {
            // Also a task of another agent: a tool never learns it exists.
            TaskError::NotFound(_) => ErrorKind::NotFound,
            TaskError::NotRunning { .. } => ErrorKind::Refused,
            TaskError::Worktree(e) => e.kind(),
            TaskError::Deliver(e) => e.kind(),
            TaskError::Command(e) => e.kind(),
            TaskError::Store(e) => e.kind(),
        }
    }
}
