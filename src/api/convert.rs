//! Domain to proto, and the one place errors become gRPC statuses.

use holarchy_actors::plane::command::CommandError;
use holarchy_actors::plane::task::TaskError;
use holarchy_actors::plane::wait::WaitError;
use holarchy_actors::plane::workspace::worktree::WorktreeError;
use holarchy_actors::protocol::{ControlError, NotRunning};
use holarchy_actors::runtime::Bounded;
use holarchy_actors::{
    AgentSnapshot, ArchiveError, BrainError, CreateError, DeliverError, RuntimeError, StoreError,
};
use holarchy_supervision::brain::BrainConfigError;
use holarchy_supervision::limits::InvalidInput;
use holarchy_supervision::BrainConfig;
use holarchy_supervision::{
    AgentRecord, IdParseError, LifecycleState, MessageRecord, MessageStatus, OutputChunk,
    Ownership, Provenance, Refusal, TaskKind, TaskRecord, Visibility, WaitRecord, WaitStatus,
    WorkItemRecord,
};
use tonic::Status;

use super::pb;

mod event;

pub use event::event;

/// Every way an API call can fail, by the status it maps to.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    AlreadyExists(String),
    #[error("{0}")]
    PermissionDenied(String),
    #[error("{0}")]
    FailedPrecondition(String),
    #[error("{0}")]
    ResourceExhausted(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Internal(String),
    /// A change that did not finish in time; it may still complete.
    #[error("{0}")]
    DeadlineExceeded(String),
}

/// The most bytes of one client input an error message quotes.
pub const MAX_QUOTE: usize = 200;

/// The longest status message sent back, in bytes. A backstop: inputs are
/// quoted through [`quote`], but a message built from a deeper error (a
/// path, a brain's complaint) is cut here too, so no reply echoes a
/// client's megabytes.
pub const MAX_STATUS_MESSAGE: usize = 1024;

/// `input` cut to at most [`MAX_QUOTE`] bytes, for an error message that
/// names it. A cut quote ends with `…` and the input's full length, so the
/// reader knows it saw only the start.
pub fn quote(input: &str) -> String {
    cut(input, MAX_QUOTE)
}

/// `text` cut to at most `max` bytes at a char boundary, with a note of the
/// full length when anything was cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    format!(
        "{}… ({} bytes)",
        holarchy_supervision::limits::head(text, max),
        text.len()
    )
}

impl From<ApiError> for Status {
    fn from(err: ApiError) -> Self {
        let cut = |m: String| cut(&m, MAX_STATUS_MESSAGE);
        match err {
            ApiError::InvalidArgument(m) => Status::invalid_argument(cut(m)),
            ApiError::NotFound(m) => Status::not_found(cut(m)),
            ApiError::AlreadyExists(m) => Status::already_exists(cut(m)),
            ApiError::PermissionDenied(m) => Status::permission_denied(cut(m)),
            ApiError::FailedPrecondition(m) => Status::failed_precondition(cut(m)),
            ApiError::ResourceExhausted(m) => Status::resource_exhausted(cut(m)),
            ApiError::Unavailable(m) => Status::unavailable(cut(m)),
            ApiError::Internal(m) => Status::internal(cut(m)),
            ApiError::DeadlineExceeded(m) => Status::deadline_exceeded(cut(m)),
        }
    }
}

impl From<InvalidInput> for ApiError {
    fn from(err: InvalidInput) -> Self {
        ApiError::InvalidArgument(err.to_string())
    }
}

impl From<IdParseError> for ApiError {
    fn from(err: IdParseError) -> Self {
        ApiError::InvalidArgument(err.to_string())
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NameTaken(name) => {
                ApiError::AlreadyExists(format!("an agent named `{}` already exists", quote(&name)))
            }
            StoreError::Closed => ApiError::Unavailable("the daemon is shutting down".into()),
            StoreError::SupervisorGone(_) | StoreError::Precondition(_) => {
                ApiError::FailedPrecondition(err.to_string())
            }
            StoreError::UnsupportedVersion { .. }
            | StoreError::Corrupt { .. }
            | StoreError::Backend(_) => ApiError::Internal(err.to_string()),
        }
    }
}

impl From<Refusal> for ApiError {
    fn from(err: Refusal) -> Self {
        match err {
            Refusal::PrivateTarget | Refusal::NotSupervisor | Refusal::NotChild => {
                ApiError::PermissionDenied(err.to_string())
            }
            Refusal::Archived => ApiError::FailedPrecondition(err.to_string()),
        }
    }
}

impl From<CreateError> for ApiError {
    fn from(err: CreateError) -> Self {
        match err {
            CreateError::Invalid(e) => e.into(),
            CreateError::InvalidBrain(e) => e.into(),
            CreateError::NameTaken(_) => ApiError::AlreadyExists(err.to_string()),
            CreateError::UnknownMcpServer(_) | CreateError::DuplicateMcpServer(_) => {
                ApiError::InvalidArgument(err.to_string())
            }
            CreateError::TooMany { .. } => ApiError::InvalidArgument(err.to_string()),
            CreateError::Limit(_) => ApiError::ResourceExhausted(err.to_string()),
            CreateError::Store(e) => e.into(),
            CreateError::Spawn(_) => ApiError::Internal(err.to_string()),
            CreateError::Unavailable(_) => ApiError::Unavailable(err.to_string()),
        }
    }
}

impl From<DeliverError> for ApiError {
    fn from(err: DeliverError) -> Self {
        match err {
            DeliverError::Invalid(e) => e.into(),
            DeliverError::NotFound(_) => ApiError::NotFound(err.to_string()),
            DeliverError::Refused(refusal) => refusal.into(),
            // Passing states: the client should retry, not give up.
            DeliverError::NotRunning { why, .. } => match why {
                NotRunning::Restarting | NotRunning::Stopping => {
                    ApiError::Unavailable(err.to_string())
                }
                NotRunning::Ended(_) => ApiError::FailedPrecondition(err.to_string()),
            },
            DeliverError::QueueFull { .. } => ApiError::ResourceExhausted(err.to_string()),
            DeliverError::Store(e) => e.into(),
            DeliverError::Unavailable(_) => ApiError::Unavailable(err.to_string()),
        }
    }
}

impl From<RuntimeError> for ApiError {
    fn from(err: RuntimeError) -> Self {
        match err {
            RuntimeError::Recovery(e) => e.into(),
            RuntimeError::Spawn(_) | RuntimeError::Unavailable(_) => {
                ApiError::Unavailable(err.to_string())
            }
        }
    }
}

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

impl From<TaskError> for ApiError {
    fn from(err: TaskError) -> Self {
        match err {
            TaskError::NotFound(_) => ApiError::NotFound(err.to_string()),
            TaskError::NotRunning { .. } => ApiError::FailedPrecondition(err.to_string()),
            // Git refused (a broken or locked repository): the operator
            // must act on the repository before the stop can finish.
            TaskError::Worktree(WorktreeError::Store(e)) => e.into(),
            TaskError::Worktree(_) => ApiError::FailedPrecondition(err.to_string()),
            TaskError::Deliver(e) => e.into(),
            TaskError::Command(e) => e.into(),
            TaskError::Store(e) => e.into(),
        }
    }
}

impl From<ControlError> for ApiError {
    fn from(err: ControlError) -> Self {
        match err {
            ControlError::NotFound(_) => ApiError::NotFound(err.to_string()),
            ControlError::Private(_) => ApiError::PermissionDenied(err.to_string()),
            ControlError::NotRunning { why, .. } => match why {
                NotRunning::Restarting | NotRunning::Stopping => {
                    ApiError::Unavailable(err.to_string())
                }
                NotRunning::Ended(_) => ApiError::FailedPrecondition(err.to_string()),
            },
            ControlError::NoRun | ControlError::StaleRun { .. } => {
                ApiError::FailedPrecondition(err.to_string())
            }
            ControlError::Store(e) => e.into(),
            ControlError::Unavailable(_) => ApiError::Unavailable(err.to_string()),
        }
    }
}

impl From<WaitError> for ApiError {
    fn from(err: WaitError) -> Self {
        match err {
            WaitError::UnknownToken => ApiError::PermissionDenied(err.to_string()),
            WaitError::RevokedToken | WaitError::NotFound(_) | WaitError::WorkItemNotFound(_) => {
                ApiError::NotFound(err.to_string())
            }
            WaitError::NotArmed { .. } | WaitError::OwnerGone => {
                ApiError::FailedPrecondition(err.to_string())
            }
            WaitError::BadDuration => ApiError::InvalidArgument(err.to_string()),
            WaitError::Limit(_) => ApiError::ResourceExhausted(err.to_string()),
            WaitError::Deliver(e) => e.into(),
            WaitError::Store(e) => e.into(),
        }
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

impl From<BrainConfigError> for ApiError {
    fn from(err: BrainConfigError) -> Self {
        ApiError::InvalidArgument(err.to_string())
    }
}

impl From<BrainError> for ApiError {
    fn from(err: BrainError) -> Self {
        match err {
            BrainError::NotFound(_) => ApiError::NotFound(err.to_string()),
            BrainError::NotLive(_) => ApiError::FailedPrecondition(err.to_string()),
            BrainError::Invalid(e) => e.into(),
            BrainError::Store(e) => e.into(),
        }
    }
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

impl From<CommandError> for ApiError {
    fn from(err: CommandError) -> Self {
        match err {
            CommandError::BadCommand | CommandError::BadYield | CommandError::BadEnv => {
                ApiError::InvalidArgument(err.to_string())
            }
            CommandError::OwnerGone | CommandError::Ended | CommandError::Input(_) => {
                ApiError::FailedPrecondition(err.to_string())
            }
            CommandError::Start(_) => ApiError::Internal(err.to_string()),
            CommandError::Limit(_) => ApiError::ResourceExhausted(err.to_string()),
            CommandError::Store(e) => e.into(),
        }
    }
}

impl<E> From<Bounded<E>> for ApiError
where
    E: std::error::Error + 'static,
    ApiError: From<E>,
{
    fn from(err: Bounded<E>) -> Self {
        match err {
            Bounded::TimedOut(_) => ApiError::DeadlineExceeded(err.to_string()),
            Bounded::Panicked(_) => ApiError::Internal(err.to_string()),
            Bounded::Failed(err) => err.into(),
        }
    }
}

impl From<ArchiveError> for ApiError {
    fn from(err: ArchiveError) -> Self {
        match err {
            ArchiveError::NotFound(_) => ApiError::NotFound(err.to_string()),
            ArchiveError::Private(_) => ApiError::PermissionDenied(err.to_string()),
            ArchiveError::NotLive { .. } => ApiError::FailedPrecondition(err.to_string()),
            ArchiveError::Store(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_inputs_are_quoted_whole() {
        assert_eq!(quote("ops"), "ops");
        assert_eq!(quote(&"a".repeat(MAX_QUOTE)), "a".repeat(MAX_QUOTE));
    }

    #[test]
    fn long_inputs_are_cut_at_a_char_boundary_with_their_length() {
        let quoted = quote(&"a".repeat(100_000));
        assert_eq!(quoted, format!("{}… (100000 bytes)", "a".repeat(MAX_QUOTE)));
        // 'é' is two bytes: byte 200 falls inside the 101st, so the cut
        // keeps 100 of them rather than splitting one.
        let accents = "é".repeat(150);
        let quoted = quote(&accents);
        assert!(quoted.starts_with(&"é".repeat(100)));
        assert!(quoted.ends_with("… (300 bytes)"), "{quoted}");
        assert!(quoted.len() <= MAX_QUOTE + "… (300 bytes)".len());
    }

    proptest::proptest! {
        #[test]
        fn a_quote_never_holds_more_than_the_bound_of_the_input(text in ".{0,400}") {
            let quoted = quote(&text);
            let kept = quoted.split("… (").next().unwrap_or_default();
            proptest::prop_assert!(kept.len() <= MAX_QUOTE);
            proptest::prop_assert!(text.starts_with(kept));
        }
    }

    #[test]
    fn every_status_message_is_bounded() {
        let status = Status::from(ApiError::NotFound("x".repeat(1_000_000)));
        assert!(status.message().len() <= MAX_STATUS_MESSAGE + 32);
    }
}
