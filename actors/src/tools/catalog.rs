//! The tool catalog: every tool's name, family, plane, description and
//! input schema, and the surface a profile gets.

use holarchy_supervision::{Profile, ToolFamily};
use serde_json::{json, Value};

/// One tool of the catalog: its name, family and plane, what it does, and
/// the JSON Schema of its input.
#[derive(Debug, Clone, Copy)]
pub struct ToolSpec {
    pub name: &'static str,
    pub family: ToolFamily,
    /// agent, task, waiting, work, workspace or core.
    pub plane: &'static str,
    pub description: &'static str,
    /// JSON Schema text (checked to parse by a test).
    pub input_schema: &'static str,
}

impl ToolSpec {
    pub fn schema(&self) -> Value {
        serde_json::from_str(self.input_schema).unwrap_or(Value::Null)
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
}

const TASK_ID: &str = r#"{"type":"object","properties":{"task_id":{"type":"string"}},"required":["task_id"],"additionalProperties":false}"#;

/// Every tool this build knows, in a stable order: an agent's catalog is
/// the same for every turn.
pub const CATALOG: &[ToolSpec] = &[
    ToolSpec {
        name: "AgentGet",
        family: ToolFamily::Core,
        plane: "agent",
        description: "Returns the calling agent's own summary: identity, profile, lineage, supervisor, lifecycle state, current work item, waits, active workspace and tools.",
        input_schema: r#"{"type":"object","properties":{},"additionalProperties":false}"#,
    },
    ToolSpec {
        name: "SpawnAgent",
        family: ToolFamily::AgentCreation,
        plane: "agent",
        description: "Creates an agent. `preset` is private_child (default), private_delegator or public_named. A private child is supervised by the caller, gets `initial_message` (required) as its first message, and comes back with a task handle; a public agent needs a `name` and keeps only lineage. The child runs on the caller's brain. A private child's `workspace_mode`: `inherit` (default: the caller's attached workspaces and active directory), `worktree` (a git worktree of the caller's active workspace on a new branch `holarchy/<task id>`, owned by the task handle and removed with its branch when the task is stopped or its owner cleaned up; kept after the child completes until then) or `explicit_root` (`root`, a directory inside the caller's attached set, becomes the child's only workspace). A public agent inherits the caller's attached workspaces, not its active one. `context: fork` also gives it the caller's work item, plan and recent turns; `fresh` (the default) only the handoff.",
        input_schema: r#"{"type":"object","properties":{"preset":{"type":"string","enum":["private_child","private_delegator","public_named"]},"initial_message":{"type":"string"},"name":{"type":"string"},"context":{"type":"string","enum":["fresh","fork"]},"workspace_mode":{"type":"string","enum":["inherit","worktree","explicit_root"]},"root":{"type":"string"}},"additionalProperties":false}"#,
    },
    ToolSpec {
        name: "TaskList",
        family: ToolFamily::Core,
        plane: "task",
        description: "Lists the tasks this agent owns (child agents and commands) with their kind, label and status.",
        input_schema: r#"{"type":"object","properties":{},"additionalProperties":false}"#,
    },
    ToolSpec {
        name: "TaskStatus",
        family: ToolFamily::Core,
        plane: "task",
        description: "Returns the lifecycle state of one of this agent's tasks.",
        input_schema: TASK_ID,
    },
    ToolSpec {
        name: "TaskOutput",
        family: ToolFamily::Core,
        plane: "task",
        description: "Returns a task's output: a command's output from `offset`, or a child's result (its replies so far while it runs).",
        input_schema: r#"{"type":"object","properties":{"task_id":{"type":"string"},"offset":{"type":"integer","minimum":0}},"required":["task_id"],"additionalProperties":false}"#,
    },
    ToolSpec {
        name: "TaskInput",
        family: ToolFamily::Core,
        plane: "task",
        description: "Sends follow-up input: a message to a supervised child, or text to a command's stdin.",
        input_schema: r#"{"type":"object","properties":{"task_id":{"type":"string"},"text":{"type":"string"}},"required":["task_id","text"],"additionalProperties":false}"#,
    },
    ToolSpec {
        name: "TaskStop",
        family: ToolFamily::Core,
        plane: "task",
        description: "Stops a task: a child agent and its whole private subtree, or a command (SIGTERM, then SIGKILL).",
        input_schema: TASK_ID,
    },
    ToolSpec {
        name: "ExecCommand",
        family: ToolFamily::LocalEnvironment,
        plane: "task",
        description: "Runs a shell command in this agent's active workspace directory, in its own process group. A command done within `yield_ms` (default 3000) returns its output; a longer one returns a task handle and reports back when it ends. `env` is passed to the process and never stored.",
        input_schema: r#"{"type":"object","properties":{"command":{"type":"string"},"yield_ms":{"type":"integer","minimum":0,"maximum":600000},"env":{"type":"object","additionalProperties":{"type":"string"}}},"required":["command"],"additionalProperties":false}"#,
    },
    ToolSpec {
        name: "UseWorkspace",
        family: ToolFamily::LocalEnvironment,
        plane: "workspace",
        description: "Makes a workspace active, so commands and patches run there. `workspace_id` activates an attached workspace's root (`agent_home` is always attached); `path` (relative to the active directory, or absolute) activates a directory inside the attached workspaces. A path outside them is attached as a new workspace only with the authority_expansion family; otherwise it is refused and nothing changes.",
        input_schema: r#"{"type":"object","properties":{"workspace_id":{"type":"string"},"path":{"type":"string"}},"additionalProperties":false}"#,
    },
    ToolSpec {
        name: "ApplyPatch",
        family: ToolFamily::LocalEnvironment,
        plane: "workspace",
        description: "Applies a unified diff (diff -u or git diff; paths relative to the active directory) inside the active workspace. Every hunk of every file must apply, or nothing is written; each file is replaced atomically. Paths outside the active workspace are refused. Returns the files changed.",
        input_schema: r#"{"type":"object","properties":{"patch":{"type":"string"}},"required":["patch"],"additionalProperties":false}"#,
    },
    ToolSpec {
        name: "AttachWorkspace",
        family: ToolFamily::AuthorityExpansion,
        plane: "workspace",
        description: "Attaches a host directory (an absolute path) as a workspace this agent may use, under `workspace_id` or an id made from the directory's name. Does not make it active.",
        input_schema: r#"{"type":"object","properties":{"path":{"type":"string"},"workspace_id":{"type":"string"}},"required":["path"],"additionalProperties":false}"#,
    },
    ToolSpec {
        name: "DetachWorkspace",
        family: ToolFamily::AuthorityExpansion,
        plane: "workspace",
        description: "Removes a workspace binding; the directory itself is never touched. An agent working in it goes back to agent_home.",
        input_schema: r#"{"type":"object","properties":{"workspace_id":{"type":"string"}},"required":["workspace_id"],"additionalProperties":false}"#,
    },
    ToolSpec {
        name: "Sleep",
        family: ToolFamily::Core,
        plane: "waiting",
        description: "Sets a timer; when it fires the agent gets a wake message. It survives restarts and fires once.",
        input_schema: r#"{"type":"object","properties":{"duration_ms":{"type":"integer","minimum":0},"reason":{"type":"string"},"work_item_id":{"type":"string"}},"required":["duration_ms"],"additionalProperties":false}"#,
    },
    ToolSpec {
        name: "Enqueue",
        family: ToolFamily::Core,
        plane: "work",
        description: "Queues a message to this agent itself, for a later turn.",
        input_schema: r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}"#,
    },
    ToolSpec {
        name: "update_work_item",
        family: ToolFamily::Core,
        plane: "work",
        description: "Creates (no `work_item_id`) or updates a work item: objective and status (active, blocked, done). At most one item is active: the agent's current work focus.",
        input_schema: r#"{"type":"object","properties":{"work_item_id":{"type":"string"},"objective":{"type":"string"},"status":{"type":"string","enum":["active","blocked","done"]}},"additionalProperties":false}"#,
    },
    ToolSpec {
        name: "update_work_plan",
        family: ToolFamily::Core,
        plane: "work",
        description: "Replaces a work item's plan with the given steps.",
        input_schema: r#"{"type":"object","properties":{"work_item_id":{"type":"string"},"steps":{"type":"array","items":{"type":"object","properties":{"title":{"type":"string"},"status":{"type":"string","enum":["pending","in_progress","done","skipped"]}},"required":["title"]}}},"required":["work_item_id","steps"],"additionalProperties":false}"#,
    },
    ToolSpec {
        name: "CreateExternalTrigger",
        family: ToolFamily::ExternalTrigger,
        plane: "waiting",
        description: "Creates a wake channel for machines and returns its secret token, once. Deliveries with it (TriggerService.DeliverTrigger) wake this agent with their payload.",
        input_schema: r#"{"type":"object","properties":{"reason":{"type":"string"},"work_item_id":{"type":"string"}},"additionalProperties":false}"#,
    },
    ToolSpec {
        name: "CancelExternalTrigger",
        family: ToolFamily::ExternalTrigger,
        plane: "waiting",
        description: "Cancels a trigger; its token stops working.",
        input_schema: r#"{"type":"object","properties":{"wait_id":{"type":"string"}},"required":["wait_id"],"additionalProperties":false}"#,
    },
];

/// The tools an agent with this profile may call, in catalog order.
pub fn tool_surface(profile: Profile) -> impl Iterator<Item = &'static ToolSpec> {
    CATALOG
        .iter()
        .filter(move |spec| profile.tool_families.contains(spec.family))
}
