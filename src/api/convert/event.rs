//! Events to proto: each kind's one-line text and its detail as JSON.

use holarchy_supervision::{Event, EventKind};
use serde_json::json;

use super::{opt_id, pb};

pub fn event(event: &Event) -> pb::Event {
    let mut out = pb::Event {
        cursor: event.cursor,
        at_ms: event.at_ms as i64,
        agent_id: opt_id(event.agent_id),
        kind: event.kind.name().to_owned(),
        slot: u32::from(event.slot().get()),
        seq: event.seq,
        ..Default::default()
    };
    let detail = match &event.kind {
        EventKind::AgentCreated {
            name,
            preset,
            lineage_parent_agent_id,
            supervisor_agent_id,
        } => {
            out.text = name.clone().unwrap_or_default();
            json!({
                "name": name,
                "preset": preset,
                "lineage_parent_agent_id": lineage_parent_agent_id.map(|id| id.to_string()),
                "supervisor_agent_id": supervisor_agent_id.map(|id| id.to_string()),
            })
        }
        EventKind::AgentStateChanged { state, reason } => {
            out.text = state.name().to_owned();
            json!({ "state": state.name(), "reason": reason })
        }
        EventKind::OperatorAction { caller, action } => {
            out.text = action.clone();
            json!({ "caller": caller, "action": action })
        }
        EventKind::AgentRestarted { reason } => {
            out.text = reason.clone();
            json!({ "reason": reason })
        }
        EventKind::MessageQueued {
            message_id,
            provenance,
        } => {
            out.message_id = message_id.to_string();
            out.text = provenance.kind().to_owned();
            json!({ "message_id": message_id.to_string(), "provenance": provenance.kind() })
        }
        EventKind::RunStarted { run_id, message_id } => {
            out.run_id = run_id.to_string();
            out.message_id = message_id.to_string();
            json!({ "run_id": run_id.to_string(), "message_id": message_id.to_string() })
        }
        EventKind::StepDecided {
            run_id,
            step,
            reply,
            tool_calls,
        } => {
            out.run_id = run_id.to_string();
            out.text = reply.clone().unwrap_or_default();
            json!({ "run_id": run_id.to_string(), "step": step, "reply": reply, "tool_calls": tool_calls })
        }
        EventKind::ToolCalled {
            run_id,
            tool,
            input,
            output,
            is_error,
        } => {
            out.run_id = run_id.to_string();
            out.text = tool.clone();
            json!({ "run_id": run_id.to_string(), "tool": tool, "input": input, "output": output, "is_error": is_error })
        }
        EventKind::Replied {
            run_id,
            message_id,
            text,
        } => {
            out.run_id = run_id.to_string();
            out.message_id = message_id.to_string();
            out.text = text.clone();
            json!({ "run_id": run_id.to_string(), "message_id": message_id.to_string(), "text": text })
        }
        EventKind::TaskUpdated {
            task_id,
            kind,
            status,
            detail,
        } => {
            out.text = status.name().to_owned();
            json!({ "task_id": task_id.to_string(), "task_kind": kind, "status": status.name(), "detail": detail })
        }
        EventKind::WaitUpdated {
            wait_id,
            kind,
            status,
        } => {
            out.text = status.name().to_owned();
            json!({ "wait_id": wait_id.to_string(), "kind": kind, "status": status.name() })
        }
        EventKind::WorkItemUpdated {
            work_item_id,
            status,
            objective,
        } => {
            out.text = objective.clone();
            json!({ "work_item_id": work_item_id.to_string(), "status": status, "objective": objective })
        }
        EventKind::WorkspaceChanged {
            workspace_id,
            change,
            detail,
        } => {
            out.text = format!("{change} {workspace_id}");
            json!({ "workspace_id": workspace_id, "change": change, "detail": detail })
        }
        EventKind::InstanceChanged {
            name,
            change,
            digest,
        } => {
            out.text = format!("{change} {name}");
            json!({ "instance": name, "change": change, "digest": digest })
        }
        EventKind::EventReceived {
            event_id,
            instance,
            source,
            kind,
            subject,
            dedupe_key,
        } => {
            out.text = format!("{kind} {subject}");
            json!({
                "event_id": event_id.to_string(),
                "instance": instance,
                "source": source,
                "type": kind,
                "subject": subject,
                "dedupe_key": dedupe_key,
            })
        }
        EventKind::Decided {
            run_id,
            instance,
            kind,
            reason,
            target,
            idempotency_key,
            requires_approval,
            explicit,
        } => {
            out.run_id = run_id.to_string();
            out.text = kind.clone();
            json!({
                "run_id": run_id.to_string(),
                "instance": instance,
                "kind": kind,
                "reason": reason,
                "target": target,
                "idempotency_key": idempotency_key,
                "requires_approval": requires_approval,
                "explicit": explicit,
            })
        }
        EventKind::TurnUsage {
            run_id,
            prompt_tokens,
            completion_tokens,
            cached_tokens,
        } => {
            out.run_id = run_id.to_string();
            out.text = format!(
                "{prompt_tokens} prompt ({cached_tokens} cached) + {completion_tokens} completion tokens"
            );
            json!({
                "run_id": run_id.to_string(),
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "cached_tokens": cached_tokens,
            })
        }
        EventKind::CleanupStarted {
            reason,
            agents,
            tasks,
        } => {
            out.text = reason.clone();
            json!({ "reason": reason, "agents": agents, "tasks": tasks })
        }
        EventKind::RunFinished {
            run_id,
            message_id,
            outcome,
            detail,
        } => {
            out.run_id = run_id.to_string();
            out.message_id = message_id.to_string();
            out.text = outcome.name().to_owned();
            json!({
                "run_id": run_id.to_string(),
                "message_id": message_id.to_string(),
                "outcome": outcome.name(),
                "detail": detail,
            })
        }
    };
    out.detail_json = detail.to_string();
    out
}
