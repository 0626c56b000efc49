//! The gRPC answers as the console's JSON. `full` is whether the caller
//! gave the token: without it, a view keeps structure (ids, names, kinds,
//! states, counts) and drops what agents hold or were told (task labels,
//! wait reasons, directories, brains' settings, work).

use serde_json::{json, Value};

use crate::api::pb;

/// An enum's proto name without its prefix, lower case:
/// `LIFECYCLE_STATE_PAUSED` is `paused`.
fn name(full_name: &str, prefix: &str) -> String {
    full_name
        .strip_prefix(prefix)
        .unwrap_or(full_name)
        .to_ascii_lowercase()
}

fn lifecycle(state: i32) -> String {
    pb::LifecycleState::try_from(state).map_or("unspecified".into(), |s| {
        name(s.as_str_name(), "LIFECYCLE_STATE_")
    })
}

fn activity(activity: i32) -> String {
    pb::Activity::try_from(activity)
        .map_or("unspecified".into(), |a| name(a.as_str_name(), "ACTIVITY_"))
}

fn visibility(visibility: i32) -> String {
    pb::Visibility::try_from(visibility).map_or("unspecified".into(), |v| {
        name(v.as_str_name(), "VISIBILITY_")
    })
}

fn ownership(ownership: i32) -> String {
    pb::Ownership::try_from(ownership).map_or("unspecified".into(), |o| {
        name(o.as_str_name(), "OWNERSHIP_")
    })
}

fn message_status(status: i32) -> String {
    pb::MessageStatus::try_from(status).map_or("unspecified".into(), |s| {
        name(s.as_str_name(), "MESSAGE_STATUS_")
    })
}

/// A state as the page shows it after a write.
pub fn control(response: &pb::ControlResponse) -> Value {
    json!({
        "state": lifecycle(response.state),
        "aborted_run_id": response.aborted_run_id,
    })
}

pub fn tree_node(node: &pb::TreeNode, full: bool) -> Value {
    let agent = node.node_type == "agent";
    // An agent's name is how operators address it; a task's label and a
    // wait's reason are cut from what an agent was told.
    let label = if agent || full {
        node.name.as_str()
    } else {
        ""
    };
    let mut out = json!({
        "type": node.node_type,
        "id": node.id,
        "name": label,
        "kind": node.kind,
        "state": node.state,
        "visibility": node.visibility,
        "ownership": node.ownership,
        "actor_alive": node.actor_alive,
        "parent": node.parent_id,
        "depth": node.depth,
        "partition": node.partition,
        "child_agent_id": node.child_agent_id,
    });
    if full {
        out["active_workspace_id"] = json!(node.active_workspace_id);
        out["active_dir"] = json!(node.active_dir);
        if let Some(worktree) = &node.worktree {
            out["worktree"] = json!({ "path": worktree.path, "branch": worktree.branch });
        }
    }
    out
}

fn brain(config: Option<&pb::BrainConfig>, full: bool) -> Value {
    use pb::brain_config::Kind;
    let Some(kind) = config.and_then(|c| c.kind.as_ref()) else {
        return json!({ "kind": "default" });
    };
    let kind_name = match kind {
        Kind::Scripted(_) => "scripted",
        Kind::Command(_) => "command",
        Kind::Openai(_) => "openai",
        Kind::Anthropic(_) => "anthropic",
    };
    if !full {
        return json!({ "kind": kind_name });
    }
    match kind {
        Kind::Scripted(_) => json!({ "kind": kind_name }),
        Kind::Command(c) => json!({
            "kind": kind_name,
            "program": c.program,
            "args": c.args,
            // The names only: values may be credentials the operator set.
            "env": c.env.keys().collect::<Vec<_>>(),
            "timeout_ms": c.timeout_ms,
        }),
        Kind::Openai(o) => json!({
            "kind": kind_name,
            "base_url": o.base_url,
            "model": o.model,
            "api_key_env": o.api_key_env,
            "temperature": o.temperature,
            "max_steps": o.max_steps,
        }),
        Kind::Anthropic(a) => json!({
            "kind": kind_name,
            "base_url": a.base_url,
            "model": a.model,
            "api_key_env": a.api_key_env,
            "max_tokens": a.max_tokens,
            "temperature": a.temperature,
            "max_steps": a.max_steps,
        }),
    }
}

pub fn work_item(item: &pb::WorkItem) -> Value {
    json!({
        "work_item_id": item.work_item_id,
        "objective": item.objective,
        "status": item.status,
        "plan": item.plan.iter().map(|s| json!({ "title": s.title, "status": s.status })).collect::<Vec<_>>(),
        "waiting_on": item.waiting_on,
        "created_at_ms": item.created_at_ms,
        "updated_at_ms": item.updated_at_ms,
        "truncated_from_bytes": item.truncated_from_bytes,
    })
}

pub fn agent(result: &pb::AgentGetResult, full: bool) -> Value {
    let summary = result.agent.clone().unwrap_or_default();
    let profile = summary.profile.clone().unwrap_or_default();
    let mut out = json!({
        "agent_id": summary.agent_id,
        "name": summary.name,
        "preset": profile.preset,
        "visibility": visibility(summary.visibility),
        "ownership": ownership(summary.ownership),
        "supervisor_agent_id": summary.supervisor_agent_id,
        "lineage_parent_agent_id": summary.lineage_parent_agent_id,
        "state": lifecycle(summary.state),
        "activity": activity(summary.activity),
        "queue_length": summary.queue_length,
        "current_run_id": summary.current_run_id,
        "turns_completed": summary.turns_completed,
        "created_at_ms": summary.created_at_ms,
        "instance": summary.instance,
        "brain": brain(summary.brain.as_ref(), full),
        "waits": summary.waiting_on.len(),
        "full": full,
    });
    if full {
        out["tool_families"] = json!(profile.tool_families);
        out["waiting_on"] = json!(summary.waiting_on);
        out["current_work_item"] = summary
            .current_work_item
            .as_ref()
            .map_or(Value::Null, work_item);
        out["role_version"] = json!(summary.role_version);
        out["skills"] = json!(summary.skills);
        out["context_tokens"] = json!(summary.context_tokens);
        out["mcp_servers"] = json!(summary.mcp_servers);
        out["truncated_from_bytes"] = json!(summary.truncated_from_bytes);
        if let Some(memory) = &result.memory {
            out["memory"] = json!({ "notes": memory.notes, "entries": memory.entries });
        }
        if let Some(usage) = &result.usage {
            out["usage"] = json!({
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "cached_tokens": usage.cached_tokens,
                "turns": usage.turns,
            });
        }
    }
    out
}

/// An agent of the overview's lists (longest queues, busiest).
pub fn active_agent(a: &pb::ActiveAgent) -> Value {
    json!({
        "agent_id": a.agent_id,
        "name": a.name,
        "visibility": visibility(a.visibility),
        "state": lifecycle(a.state),
        "queue_length": a.queue_length,
        "current_run_id": a.current_run_id,
        "recent_turns": a.recent_turns,
    })
}

/// An agent found by a search: enough to show it and open its page.
pub fn found(summary: &pb::AgentSummary) -> Value {
    json!({
        "agent_id": summary.agent_id,
        "name": summary.name,
        "visibility": visibility(summary.visibility),
        "state": lifecycle(summary.state),
    })
}

pub fn message(m: &pb::Message) -> Value {
    json!({
        "message_id": m.message_id,
        "provenance": m.provenance,
        "provenance_agent_id": m.provenance_agent_id,
        "text": m.text,
        "status": message_status(m.status),
        "run_id": m.run_id,
        "reply": m.reply,
        "attempts": m.attempts,
        "created_at_ms": m.created_at_ms,
        "truncated_from_bytes": m.truncated_from_bytes,
    })
}

pub fn task(t: &pb::TaskHandle) -> Value {
    json!({
        "task_id": t.task_id,
        "kind": t.task_kind,
        "status": t.status,
        "child_agent_id": t.child_agent_id,
        "label": t.label,
        "output": t.output,
        "command": t.command,
        "exit": t.exit,
        "workspace_id": t.workspace_id,
        "workdir": t.workdir,
        "worktree": t.worktree.as_ref().map(|w| json!({ "path": w.path, "branch": w.branch, "removed": w.removed })),
        "created_at_ms": t.created_at_ms,
        "updated_at_ms": t.updated_at_ms,
    })
}

pub fn output(o: &pb::ReadTaskOutputResponse) -> Value {
    json!({
        "task_id": o.task_id,
        "status": o.status,
        "output": o.output,
        "chunks": o.chunks.iter().map(|c| json!({
            "offset": c.offset,
            "stream": c.stream,
            "text": String::from_utf8_lossy(&c.data),
        })).collect::<Vec<_>>(),
        "next_offset": o.next_offset,
        "dropped_bytes": o.dropped_bytes,
        "truncated_from_bytes": o.truncated_from_bytes,
    })
}

pub fn workspaces(w: &pb::Workspaces) -> Value {
    json!({
        "workspaces": w.workspaces.iter().map(|s| json!({
            "workspace_id": s.workspace_id,
            "root": s.root,
            "active": s.active,
        })).collect::<Vec<_>>(),
        "active_workspace_id": w.active_workspace_id,
        "active_dir": w.active_dir,
        "next": w.next_page_token,
    })
}

pub fn event(e: &pb::Event) -> Value {
    json!({
        "cursor": e.cursor,
        "at_ms": e.at_ms,
        "kind": e.kind,
        "run_id": e.run_id,
        "message_id": e.message_id,
        "text": e.text,
        "truncated_from_bytes": e.truncated_from_bytes,
        // A failed run's reason or a tool's error, as the CLI words it.
        "problem": crate::problems::problem(e),
    })
}
