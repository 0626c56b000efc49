//! Tools an agent's brain may call, and their execution. Which tools an
//! agent has follows from its profile's tool families alone, never from who
//! sent the current message.

use holarchy_supervision::limits;
use holarchy_supervision::work::WorkUpdate;
use holarchy_supervision::workspace::WorkspaceMode;
use holarchy_supervision::{
    AgentId, AgentRecord, Ownership, PlanStep, Preset, Profile, StepStatus, TaskId, WorkItemId,
    WorkStatus,
};
use ractor::rpc::CallResult;
use serde_json::{json, Value};

use crate::brain::ToolCall;
use crate::plane::spawn::{self, SpawnRequest};
use crate::plane::{
    command as command_plane, task as task_plane, wait as wait_plane, work as work_plane,
};
use crate::protocol::{AgentMsg, AgentSnapshot};
use crate::Ctx;

mod cap;
mod catalog;
mod placeholder;
mod workspace;

pub use cap::cap_output;
pub use catalog::{tool_surface, ToolSpec, CATALOG};
pub use placeholder::{escaped_len, fill_placeholders, InputTooLarge};

pub use crate::context::{place_json, task_json, wait_json, work_json, worktree_json};
pub use crate::protocol::ToolResult;

/// Runs one tool call for `agent_id`. Failures are tool errors the brain
/// can read, not turn failures.
pub async fn call(
    ctx: &std::sync::Arc<Ctx>,
    agent_id: AgentId,
    profile: Profile,
    call: &ToolCall,
) -> ToolResult {
    let outcome = if tool_surface(profile).any(|spec| spec.name == call.name) {
        run(ctx, agent_id, profile, &call.name, &call.input).await
    } else {
        Err(format!(
            "tool `{}` is not in this agent's tool catalog",
            call.name
        ))
    };
    let (output, is_error) = match outcome {
        Ok(value) => (value, false),
        Err(message) => (json!({ "error": message }), true),
    };
    ToolResult {
        tool: call.name.clone(),
        input: call.input.to_string(),
        output: output.to_string(),
        is_error,
    }
}

pub(crate) fn text_field<'a>(input: &'a Value, field: &str) -> Result<Option<&'a str>, String> {
    match input.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("`{field}` must be a string")),
    }
}

fn task_id(input: &Value) -> Result<TaskId, String> {
    text_field(input, "task_id")?
        .ok_or("`task_id` is required")?
        .parse()
        .map_err(|e| format!("`task_id`: {e}"))
}

async fn run(
    ctx: &std::sync::Arc<Ctx>,
    agent_id: AgentId,
    profile: Profile,
    tool: &str,
    input: &Value,
) -> Result<Value, String> {
    match tool {
        "AgentGet" => {
            let record = ctx
                .store
                .agent(agent_id)
                .map_err(|e| e.to_string())?
                .ok_or("agent record not found")?;
            Ok(json!({ "agent": agent_view(ctx, &record).await? }))
        }
        "SpawnAgent" => {
            let preset = match text_field(input, "preset")? {
                None => Preset::PrivateChild,
                Some(name) => {
                    Preset::from_name(name).ok_or_else(|| format!("unknown preset `{name}`"))?
                }
            };
            let fork = match text_field(input, "context")? {
                None | Some("fresh") => false,
                Some("fork") => true,
                Some(other) => return Err(format!("`context` is fresh or fork, not `{other}`")),
            };
            let workspace_mode = match text_field(input, "workspace_mode")? {
                None => WorkspaceMode::Inherit,
                Some(name) => WorkspaceMode::from_name(name).ok_or_else(|| {
                    format!("`workspace_mode` is inherit, worktree or explicit_root, not `{name}`")
                })?,
            };
            let request = SpawnRequest {
                fork,
                preset,
                workspace_mode,
                root: text_field(input, "root")?.map(std::path::PathBuf::from),
                initial_message: text_field(input, "initial_message")?.map(str::to_owned),
                name: text_field(input, "name")?.map(str::to_owned),
            };
            let spawned = spawn::spawn_agent(ctx, agent_id, profile, request)
                .await
                .map_err(|e| e.to_string())?;
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
        "TaskList" => {
            let tasks = task_plane::list(ctx, agent_id).map_err(|e| e.to_string())?;
            Ok(Value::Array(tasks.iter().map(task_json).collect()))
        }
        "TaskStatus" => {
            let task =
                task_plane::get(ctx, task_id(input)?, Some(agent_id)).map_err(|e| e.to_string())?;
            Ok(task_json(&task))
        }
        "TaskOutput" => {
            let offset = input.get("offset").and_then(Value::as_u64).unwrap_or(0);
            let (task, output) = task_plane::output(ctx, task_id(input)?, Some(agent_id), offset)
                .map_err(|e| e.to_string())?;
            Ok(json!({
                "task_id": task.id.to_string(),
                "status": task.status.name(),
                "output": output.text,
                "next_offset": output.next_offset,
                "dropped_bytes": output.dropped,
                "exit": task.exit.map(|e| e.describe()),
            }))
        }
        "TaskInput" => {
            let text = text_field(input, "text")?
                .ok_or("`text` is required")?
                .to_owned();
            let delivered = task_plane::input(ctx, task_id(input)?, Some(agent_id), text)
                .await
                .map_err(|e| e.to_string())?;
            Ok(json!({ "message_id": delivered.map(|d| d.message_id.to_string()) }))
        }
        "TaskStop" => {
            let task = task_plane::stop(ctx, task_id(input)?, Some(agent_id), "by its owner")
                .await
                .map_err(|e| e.to_string())?;
            Ok(task_json(&task))
        }
        "ExecCommand" => {
            let command = text_field(input, "command")?
                .ok_or("`command` is required")?
                .to_owned();
            let yield_ms = input
                .get("yield_ms")
                .and_then(Value::as_u64)
                .unwrap_or(command_plane::DEFAULT_YIELD_MS);
            let env = match input.get("env") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Object(vars)) => vars
                    .iter()
                    .map(|(k, v)| {
                        if !command_plane::is_variable_name(k) {
                            return Err(format!(
                                "`env`: `{}` is not a variable name (letters, digits, `_`)",
                                k.chars().take(64).collect::<String>()
                            ));
                        }
                        v.as_str()
                            .filter(|v| !v.contains('\0'))
                            .map(|v| (k.clone(), v.to_owned()))
                            .ok_or(format!("`env.{k}` must be a string without NUL"))
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err("`env` must be an object of strings".into()),
            };
            let done = command_plane::exec(ctx, agent_id, command, env, yield_ms)
                .await
                .map_err(|e| e.to_string())?;
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
        "Sleep" => {
            let duration_ms = input
                .get("duration_ms")
                .and_then(Value::as_u64)
                .ok_or("`duration_ms` (a whole number) is required")?;
            let wait = wait_plane::sleep(
                ctx,
                agent_id,
                duration_ms,
                reason(input)?,
                work_item_id(input)?,
            )
            .await
            .map_err(|e| e.to_string())?;
            Ok(wait_json(&wait))
        }
        "CreateExternalTrigger" => {
            let (wait, token) =
                wait_plane::create_trigger(ctx, agent_id, reason(input)?, work_item_id(input)?)
                    .await
                    .map_err(|e| e.to_string())?;
            let mut out = wait_json(&wait);
            out["token"] = Value::String(token);
            Ok(out)
        }
        "CancelExternalTrigger" => {
            let wait_id = text_field(input, "wait_id")?
                .ok_or("`wait_id` is required")?
                .parse()
                .map_err(|e| format!("`wait_id`: {e}"))?;
            let wait = wait_plane::cancel(ctx, wait_id, Some(agent_id))
                .await
                .map_err(|e| e.to_string())?;
            Ok(wait_json(&wait))
        }
        "Enqueue" => {
            let text = text_field(input, "text")?
                .ok_or("`text` is required")?
                .to_owned();
            // The message limit every other way onto a queue has.
            limits::check_message(&text).map_err(|e| e.to_string())?;
            let delivered = work_plane::enqueue(ctx, agent_id, text)
                .await
                .map_err(|e| e.to_string())?;
            Ok(json!({ "message_id": delivered.message_id.to_string() }))
        }
        "update_work_item" => {
            let status = match text_field(input, "status")? {
                Some(name) => Some(
                    WorkStatus::from_name(name)
                        .ok_or_else(|| format!("unknown status `{name}`"))?,
                ),
                None => None,
            };
            let change = WorkUpdate {
                id: work_item_id(input)?,
                objective: text_field(input, "objective")?.map(str::to_owned),
                status,
                plan: None,
            };
            let item = work_plane::update(ctx, agent_id, change)
                .await
                .map_err(|e| e.to_string())?;
            Ok(work_json(&item))
        }
        "update_work_plan" => {
            let id = work_item_id(input)?.ok_or("`work_item_id` is required")?;
            let steps = input
                .get("steps")
                .and_then(Value::as_array)
                .ok_or("`steps` (an array) is required")?;
            let mut plan = Vec::with_capacity(steps.len());
            for step in steps {
                let title = step
                    .get("title")
                    .and_then(Value::as_str)
                    .ok_or("every step needs a `title`")?;
                let status = match step.get("status").and_then(Value::as_str) {
                    None => StepStatus::Pending,
                    Some(name) => StepStatus::from_name(name)
                        .ok_or_else(|| format!("unknown step status `{name}`"))?,
                };
                plan.push(PlanStep {
                    title: title.to_owned(),
                    status,
                });
            }
            let change = WorkUpdate {
                id: Some(id),
                plan: Some(plan),
                ..WorkUpdate::default()
            };
            let item = work_plane::update(ctx, agent_id, change)
                .await
                .map_err(|e| e.to_string())?;
            Ok(work_json(&item))
        }
        other => match workspace::run(ctx, agent_id, profile, other, input).await {
            Some(result) => result,
            None => Err(format!("tool `{other}` has no implementation")),
        },
    }
}

fn reason(input: &Value) -> Result<String, String> {
    Ok(text_field(input, "reason")?.unwrap_or_default().to_owned())
}

fn work_item_id(input: &Value) -> Result<Option<WorkItemId>, String> {
    text_field(input, "work_item_id")?
        .map(|t| t.parse().map_err(|e| format!("`work_item_id`: {e}")))
        .transpose()
}

/// The agent's summary as brains and `AgentGet` see it: its record, its
/// live view (the turn runs beside the actor, so the actor can answer), its
/// waits and its work focus.
pub async fn agent_view(ctx: &Ctx, record: &AgentRecord) -> Result<Value, String> {
    let agent_id = record.id;
    let live = match ctx.directory.get(agent_id) {
        Some(entry) => {
            let timeout = Some(ctx.config.call_timeout);
            match entry.actor.call(AgentMsg::Snapshot, timeout).await {
                Ok(CallResult::Success(snapshot)) => Some(snapshot),
                _ => None,
            }
        }
        None => None,
    };
    let mut agent = agent_json(record, live.as_ref());
    let waits = ctx.store.waits_of(agent_id).map_err(|e| e.to_string())?;
    agent["waiting_on"] = waits
        .iter()
        .filter(|w| w.status == holarchy_supervision::WaitStatus::Armed)
        .map(|w| Value::String(w.describe()))
        .collect();
    agent["current_work_item"] = work_plane::focus(ctx, agent_id)
        .map_err(|e| e.to_string())?
        .map_or(Value::Null, |w| work_json(&w));
    let place = crate::plane::workspace::place(ctx, agent_id).map_err(|e| e.to_string())?;
    agent["active_workspace"] = place_json(&place);
    agent["running_tasks"] = json!(ctx
        .store
        .tasks_of(agent_id)
        .map_err(|e| e.to_string())?
        .iter()
        .filter(|t| t.status == holarchy_supervision::TaskStatus::Running)
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
        "brain": record.brain.kind(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_parses_and_names_are_unique() {
        let mut names = std::collections::HashSet::new();
        for spec in CATALOG {
            assert!(spec.schema().is_object(), "{} has a bad schema", spec.name);
            assert!(names.insert(spec.name), "{} twice", spec.name);
        }
    }

    #[test]
    fn catalogs_follow_profiles_only() {
        use holarchy_supervision::Preset;
        let names = |p: Preset| {
            tool_surface(p.profile())
                .map(|t| t.name)
                .collect::<Vec<_>>()
        };
        assert!(!names(Preset::PrivateChild).contains(&"SpawnAgent"));
        assert!(names(Preset::PrivateDelegator).contains(&"SpawnAgent"));
        assert_eq!(names(Preset::PublicNamed).len(), CATALOG.len());
    }

    #[test]
    fn tokens_are_redacted_and_other_text_kept() {
        let token = format!("htr_{}", "a".repeat(64));
        let text = format!("{{\"token\":\"{token}\",\"note\":\"htr_short\"}}");
        let redacted = crate::secrets::redact_trigger_tokens(&text);
        assert!(!redacted.contains(&token));
        assert!(redacted.contains("htr_<redacted>") && redacted.contains("htr_short"));
    }
}
