//! Domain to proto; errors to gRPC statuses in [`error`].

use holarchy_actors::AgentSnapshot;
use holarchy_supervision::BrainConfig;
use holarchy_supervision::{
    AgentRecord, LifecycleState, MessageRecord, MessageStatus, OutputChunk, Ownership, Provenance,
    TaskKind, TaskRecord, Visibility, WaitRecord, WaitStatus, WorkItemRecord,
};

use super::pb;

mod error;
mod event;

pub use error::{quote, ApiError, MAX_QUOTE, MAX_STATUS_MESSAGE};
pub use event::event;

pub fn visibility(v: Visibility) -> pb::Visibility {
    match v {
        Visibility::Public => pb::Visibility::Public,
        Visibility::Private => pb::Visibility::Private,
    }
}

pub fn ownership(o: Ownership) -> pb::Ownership {
    match o {
        Ownership::SelfOwned => pb::Ownership::SelfOwned,
        Ownership::ParentSupervised => pb::Ownership::ParentSupervised,
    }
}

pub fn lifecycle(state: LifecycleState) -> pb::LifecycleState {
    match state {
        LifecycleState::Active => pb::LifecycleState::Active,
        LifecycleState::Paused => pb::LifecycleState::Paused,
        LifecycleState::Failed => pb::LifecycleState::Failed,
        LifecycleState::Archived => pb::LifecycleState::Archived,
    }
}

fn opt_id(id: Option<impl ToString>) -> String {
    id.map(|id| id.to_string()).unwrap_or_default()
}

/// A summary from the stored record and, when its actor runs, its live view.
/// `waits` and `focus` are the agent's waits and its active work item.
pub fn summary(
    record: &AgentRecord,
    live: Option<&AgentSnapshot>,
    waits: &[WaitRecord],
    focus: Option<&WorkItemRecord>,
) -> pb::AgentSummary {
    let profile = record.profile;
    let activity = match live {
        None => pb::Activity::Stopped,
        Some(s) if s.current_run.is_some() || s.queue_len > 0 => pb::Activity::Busy,
        Some(_) => pb::Activity::Idle,
    };
    let composition = record.composition.as_deref();
    pb::AgentSummary {
        // Set by the API's byte budget, never here.
        truncated_from_bytes: 0,
        agent_id: record.id.to_string(),
        name: record.name.clone().unwrap_or_default(),
        profile: Some(pb::Profile {
            preset: profile
                .preset()
                .map(|p| p.name().to_owned())
                .unwrap_or_default(),
            visibility: visibility(profile.visibility).into(),
            ownership: ownership(profile.ownership).into(),
            tool_families: profile
                .tool_families
                .iter()
                .map(|f| f.name().to_owned())
                .collect(),
        }),
        visibility: visibility(profile.visibility).into(),
        ownership: ownership(profile.ownership).into(),
        lineage_parent_agent_id: opt_id(record.lineage_parent_agent_id),
        supervisor_agent_id: opt_id(record.supervisor_agent_id),
        state: lifecycle(record.state).into(),
        activity: activity.into(),
        queue_length: live.map(|s| s.queue_len as u32).unwrap_or(0),
        current_run_id: opt_id(live.and_then(|s| s.current_run)),
        turns_completed: live.map(|s| s.turns_completed).unwrap_or(0),
        turn_deferred: live.is_some_and(|s| s.turn_deferred),
        created_at_ms: record.created_at_ms as i64,
        instance: composition
            .and_then(|c| c.instance.clone())
            .unwrap_or_default(),
        role_version: composition
            .and_then(|c| c.role.as_ref())
            .map(|r| r.version())
            .unwrap_or_default(),
        skills: composition.map(|c| c.skills.clone()).unwrap_or_default(),
        waiting_on: waits
            .iter()
            .filter(|w| w.status == WaitStatus::Armed)
            .map(WaitRecord::describe)
            .collect(),
        current_work_item: focus.map(|item| work_item(item, waits)),
        brain: Some(brain(&record.brain)),
        context_tokens: record.context_tokens.unwrap_or(0),
        mcp_servers: record.mcp_servers.clone(),
        network: record.network.to_string(),
        labels: record.labels.clone().into_iter().collect(),
    }
}

pub fn message(record: &MessageRecord) -> pb::Message {
    let provenance_agent = match record.provenance {
        Provenance::Parent { agent_id }
        | Provenance::ChildResult { agent_id }
        | Provenance::Creator { agent_id } => Some(agent_id),
        Provenance::Operator
        | Provenance::Trigger { .. }
        | Provenance::Timer { .. }
        | Provenance::SelfQueued
        | Provenance::TaskResult { .. }
        | Provenance::Runtime
        | Provenance::Event { .. } => None,
    };
    let status = match record.status {
        MessageStatus::Queued => pb::MessageStatus::Queued,
        MessageStatus::Handling { .. } => pb::MessageStatus::Handling,
        MessageStatus::Handled { .. } => pb::MessageStatus::Handled,
        MessageStatus::Failed { .. } => pb::MessageStatus::Failed,
        MessageStatus::Cancelled => pb::MessageStatus::Cancelled,
        MessageStatus::Aborted { .. } => pb::MessageStatus::Aborted,
    };
    pb::Message {
        // Set by the API's byte budget, never here.
        truncated_from_bytes: 0,
        message_id: record.id.to_string(),
        agent_id: record.agent_id.to_string(),
        provenance: record.provenance.kind().to_owned(),
        provenance_agent_id: opt_id(provenance_agent),
        text: record.body.clone(),
        dedupe_key: record.dedupe_key.clone().unwrap_or_default(),
        status: status.into(),
        run_id: opt_id(record.status.run_id()),
        reply: record.reply.clone().unwrap_or_default(),
        attempts: record.attempts,
        created_at_ms: record.created_at_ms as i64,
    }
}

pub fn task(task: &TaskRecord) -> pb::TaskHandle {
    let child = match task.kind {
        TaskKind::ChildAgent { child_agent_id } => child_agent_id.to_string(),
        TaskKind::Command => String::new(),
    };
    pb::TaskHandle {
        // Set by the API's byte budget, never here.
        truncated_from_bytes: 0,
        task_id: task.id.to_string(),
        task_kind: task.kind.name().to_owned(),
        status: task.status.name().to_owned(),
        owner_agent_id: task.owner_agent_id.to_string(),
        child_agent_id: child,
        label: task.label.clone(),
        output: task.output.clone().unwrap_or_default(),
        created_at_ms: task.created_at_ms as i64,
        updated_at_ms: task.updated_at_ms as i64,
        command: task.command.clone().unwrap_or_default(),
        exit: task.exit.map(|e| e.describe()).unwrap_or_default(),
        workspace_id: task
            .place
            .as_ref()
            .map(|p| p.workspace_id.clone())
            .unwrap_or_default(),
        workdir: task
            .place
            .as_ref()
            .map(|p| p.dir.display().to_string())
            .unwrap_or_default(),
        worktree: worktree(task),
    }
}

/// The worktree `task` owns, if any.
pub fn worktree(task: &TaskRecord) -> Option<pb::Worktree> {
    task.worktree.as_ref().map(|w| pb::Worktree {
        path: w.path.display().to_string(),
        branch: w.branch.clone(),
        repository: w.repo.display().to_string(),
        owner_task_id: task.id.to_string(),
        removed: w.removed,
    })
}

pub fn chunk(chunk: &OutputChunk) -> pb::OutputChunk {
    pb::OutputChunk {
        offset: chunk.offset,
        stream: chunk.stream.name().to_owned(),
        data: chunk.data.clone(),
    }
}

/// The proto brain configuration to the domain's (defaults filled in).
pub fn brain_from(config: pb::BrainConfig) -> Result<Option<BrainConfig>, ApiError> {
    use pb::brain_config::Kind;
    Ok(match config.kind {
        None => None,
        Some(Kind::Scripted(_)) => Some(BrainConfig::Scripted),
        Some(Kind::Command(c)) => {
            let mut env: Vec<(String, String)> = c.env.into_iter().collect();
            env.sort();
            Some(BrainConfig::Command {
                program: c.program,
                args: c.args,
                env,
                timeout_ms: if c.timeout_ms == 0 {
                    60_000
                } else {
                    c.timeout_ms
                },
            })
        }
        Some(Kind::Openai(o)) => Some(BrainConfig::OpenAi {
            base_url: o.base_url,
            model: o.model,
            api_key_env: o.api_key_env,
            temperature: o.temperature,
            max_steps: o.max_steps,
        }),
        Some(Kind::Anthropic(a)) => Some(BrainConfig::Anthropic {
            base_url: if a.base_url.is_empty() {
                holarchy_supervision::brain::ANTHROPIC_BASE_URL.to_owned()
            } else {
                a.base_url
            },
            model: a.model,
            api_key_env: if a.api_key_env.is_empty() {
                holarchy_supervision::brain::ANTHROPIC_KEY_ENV.to_owned()
            } else {
                a.api_key_env
            },
            max_tokens: match a.max_tokens {
                None | Some(0) => holarchy_supervision::brain::DEFAULT_ANTHROPIC_TOKENS,
                Some(n) => n,
            },
            temperature: a.temperature,
            max_steps: a.max_steps,
        }),
    })
}

pub fn brain(config: &BrainConfig) -> pb::BrainConfig {
    use pb::brain_config::Kind;
    let kind = match config {
        BrainConfig::Scripted => Kind::Scripted(pb::ScriptedBrain {}),
        BrainConfig::Command {
            program,
            args,
            env,
            timeout_ms,
        } => Kind::Command(pb::CommandBrain {
            program: program.clone(),
            args: args.clone(),
            // Values may be secrets: show which variables are set, not what.
            env: env
                .iter()
                .map(|(k, _)| (k.clone(), "<set>".to_owned()))
                .collect(),
            timeout_ms: *timeout_ms,
        }),
        BrainConfig::OpenAi {
            base_url,
            model,
            api_key_env,
            temperature,
            max_steps,
        } => Kind::Openai(pb::OpenAiBrain {
            base_url: base_url.clone(),
            model: model.clone(),
            api_key_env: api_key_env.clone(),
            temperature: *temperature,
            max_steps: *max_steps,
        }),
        BrainConfig::Anthropic {
            base_url,
            model,
            api_key_env,
            max_tokens,
            max_steps,
            temperature,
        } => Kind::Anthropic(pb::AnthropicBrain {
            base_url: base_url.clone(),
            model: model.clone(),
            api_key_env: api_key_env.clone(),
            max_tokens: Some(*max_tokens),
            temperature: *temperature,
            max_steps: *max_steps,
        }),
    };
    pb::BrainConfig { kind: Some(kind) }
}

pub fn work_item(item: &WorkItemRecord, waits: &[WaitRecord]) -> pb::WorkItem {
    pb::WorkItem {
        // Set by the API's byte budget, never here.
        truncated_from_bytes: 0,
        work_item_id: item.id.to_string(),
        owner_agent_id: item.owner_agent_id.to_string(),
        objective: item.objective.clone(),
        status: item.status.name().to_owned(),
        plan: item
            .plan
            .iter()
            .map(|s| pb::PlanStep {
                title: s.title.clone(),
                status: s.status.name().to_owned(),
            })
            .collect(),
        waiting_on: waits
            .iter()
            .filter(|w| w.status == WaitStatus::Armed && w.work_item_id == Some(item.id))
            .map(WaitRecord::describe)
            .collect(),
        created_at_ms: item.created_at_ms as i64,
        updated_at_ms: item.updated_at_ms as i64,
    }
}
