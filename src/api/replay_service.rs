//! `holarchy.v1.ReplayService`: operators replay an agent's recorded turns
//! through a candidate and read the report. A replay belongs to its
//! agent's namespace; callers of another see none of it (NOT_FOUND, as for
//! an id that does not exist). Every write answers once it is durable.

use std::sync::Arc;

use holarchy_supervision::{ReplayId, RunId};
use tonic::{Request, Response, Status};

use super::agent_service::{page_token, parse_agent_id};
use super::convert::{brain_from, quote, ApiError};
use super::pb;
use super::pb::replay_service_server::ReplayService;
use super::scope::namespace_of;
use crate::replay::model::{
    Budget, CandidateSpec, ReplayRecord, ReplaySpec, TurnReport, MAX_CONCURRENCY, MAX_TURNS,
};
use crate::replay::{JobError, Replays};
use holarchy_actors::replay::{Class, Decided};
use holarchy_actors::Runtime;

/// Turns chosen when the request names no count.
const DEFAULT_TURNS: u32 = 100;
/// Reports per page when the request names no size, and at most.
const DEFAULT_PAGE: usize = 100;
const MAX_PAGE: usize = 1000;
/// Bytes of a candidate's label, and names in its tool lists.
const MAX_LABEL: usize = 128;
const MAX_TOOL_NAMES: usize = 256;

#[derive(Debug, Clone)]
pub struct ReplayApi {
    runtime: Arc<Runtime>,
    replays: Arc<Replays>,
}

impl ReplayApi {
    pub fn new(runtime: Arc<Runtime>, replays: Arc<Replays>) -> Self {
        Self { runtime, replays }
    }

    /// The replay `text` names, if the caller's namespace holds it.
    async fn owned(&self, text: &str, namespace: &str) -> Result<ReplayRecord, ApiError> {
        let id = parse_replay_id(text)?;
        match self.replays.get(id).await {
            Ok(record) if record.namespace == namespace => Ok(record),
            Ok(_) | Err(JobError::NotFound(_)) => {
                Err(ApiError::NotFound(format!("no replay {}", quote(text))))
            }
            Err(err) => Err(err.into()),
        }
    }
}

fn parse_replay_id(text: &str) -> Result<ReplayId, ApiError> {
    if text.is_empty() {
        return Err(ApiError::InvalidArgument("replay_id is required".into()));
    }
    Ok(text.parse()?)
}

impl From<JobError> for ApiError {
    fn from(err: JobError) -> Self {
        match err {
            JobError::NotFound(id) => ApiError::NotFound(format!("no replay {id}")),
            JobError::Precondition(why) => ApiError::FailedPrecondition(why),
            JobError::Invalid(why) => ApiError::InvalidArgument(why),
            JobError::Store(err) => err.into(),
        }
    }
}

/// Tool names as a request gives them: bounded, each non-empty.
fn tool_names(names: Vec<String>, field: &str) -> Result<Vec<String>, ApiError> {
    if names.len() > MAX_TOOL_NAMES {
        return Err(ApiError::InvalidArgument(format!(
            "{field} names {} tools; the most is {MAX_TOOL_NAMES}",
            names.len()
        )));
    }
    if let Some(bad) = names.iter().find(|n| n.is_empty() || n.len() > 128) {
        return Err(ApiError::InvalidArgument(format!(
            "{field} holds a tool name that is empty or over 128 bytes: `{}`",
            quote(bad)
        )));
    }
    Ok(names)
}

/// A candidate's skills folder must lie under one of the daemon's own
/// (`serve --skills-dir`): the daemon reads no folder a caller chose
/// elsewhere, and a skill's text reaches the report.
fn skills_under(dir: &str, roots: &[std::path::PathBuf]) -> Result<(), ApiError> {
    let outside = || {
        ApiError::InvalidArgument(format!(
            "candidate skills_dir `{}` is not a folder under the daemon's skill folders (serve --skills-dir): put the candidate skills there",
            quote(dir)
        ))
    };
    let path = std::path::Path::new(dir);
    if !path.is_absolute() {
        return Err(outside());
    }
    let dir = std::fs::canonicalize(path).map_err(|_| outside())?;
    let under = roots
        .iter()
        .filter_map(|root| std::fs::canonicalize(root).ok())
        .any(|root| dir.starts_with(&root));
    if under && dir.is_dir() {
        Ok(())
    } else {
        Err(outside())
    }
}

/// The candidate a request names, checked.
fn candidate(
    given: Option<pb::ReplayCandidate>,
    roots: &[std::path::PathBuf],
) -> Result<CandidateSpec, ApiError> {
    let Some(c) = given else {
        return Ok(CandidateSpec::default());
    };
    let brain = match c.brain {
        Some(brain) => brain_from(brain)?,
        None => None,
    };
    if let Some(brain) = &brain {
        brain.validate()?;
    }
    let role_prompt = (!c.role_prompt.is_empty()).then_some(c.role_prompt);
    if let Some(prompt) = &role_prompt {
        holarchy_composition::role::from_text(prompt)
            .map_err(|err| ApiError::InvalidArgument(format!("candidate role_prompt: {err}")))?;
    }
    let skills_dir = (!c.skills_dir.is_empty()).then_some(c.skills_dir);
    if let Some(dir) = &skills_dir {
        skills_under(dir, roots)?;
    }
    if c.label.len() > MAX_LABEL {
        return Err(ApiError::InvalidArgument(format!(
            "candidate label is {} bytes; the most is {MAX_LABEL}",
            c.label.len()
        )));
    }
    let allow = tool_names(c.allow_tools, "allow_tools")?;
    Ok(CandidateSpec {
        brain,
        role_prompt,
        skills_dir,
        allow_tools: (!allow.is_empty()).then_some(allow),
        deny_tools: tool_names(c.deny_tools, "deny_tools")?,
        label: c.label,
    })
}

/// What a candidate changes, one line, for listings.
fn describe(c: &CandidateSpec) -> String {
    let mut parts = Vec::new();
    if let Some(brain) = &c.brain {
        parts.push(format!("brain {}", brain.kind()));
    }
    if let Some(prompt) = &c.role_prompt {
        parts.push(format!("role of {} bytes", prompt.len()));
    }
    if let Some(dir) = &c.skills_dir {
        parts.push(format!("skills from {dir}"));
    }
    if let Some(allow) = &c.allow_tools {
        parts.push(format!("only tools {}", allow.join(",")));
    }
    if !c.deny_tools.is_empty() {
        parts.push(format!("no tools {}", c.deny_tools.join(",")));
    }
    if parts.is_empty() {
        "the agent's own (a replay against itself)".into()
    } else {
        parts.join("; ")
    }
}

pub fn replay(record: &ReplayRecord) -> pb::Replay {
    let s = &record.summary;
    pb::Replay {
        replay_id: record.id.to_string(),
        agent_id: record.spec.agent_id.to_string(),
        status: record.status.name().into(),
        reason: record.reason.clone(),
        selected: record.selected,
        replayed: s.replayed(),
        same: s.same,
        same_tools_different_text: s.same_tools_different_text,
        different_tools: s.different_tools,
        errors: s.errors,
        unrecorded_calls: s.unrecorded_calls,
        recorded_tokens: s.recorded_tokens,
        candidate_tokens: s.candidate_tokens,
        created_at_ms: record.created_ms as i64,
        updated_at_ms: record.updated_ms as i64,
        candidate_label: record.spec.candidate.label.clone(),
        candidate: describe(&record.spec.candidate),
    }
}

fn decision(d: &Decided, usage: Option<holarchy_supervision::TokenUsage>) -> pb::ReplayDecision {
    pb::ReplayDecision {
        steps: d
            .steps
            .iter()
            .map(|s| pb::ReplayStep {
                reply: s.reply.clone().unwrap_or_default(),
                calls: s
                    .calls
                    .iter()
                    .map(|(tool, input)| pb::ReplayCall {
                        tool: tool.clone(),
                        input: input.clone(),
                    })
                    .collect(),
            })
            .collect(),
        reply: d.reply.clone().unwrap_or_default(),
        done: d.done,
        decision: d.decision.clone().unwrap_or_default(),
        failed: d.failed.clone().unwrap_or_default(),
        prompt_tokens: usage.map_or(0, |u| u.prompt_tokens),
        completion_tokens: usage.map_or(0, |u| u.completion_tokens),
    }
}

fn turn(report: &TurnReport) -> pb::ReplayTurn {
    pb::ReplayTurn {
        index: report.index,
        run_id: report.run_id.to_string(),
        agent_id: report.agent_id.to_string(),
        at_ms: report.at_ms as i64,
        class: report.class.clone(),
        recorded: Some(decision(&report.recorded, report.recorded_usage)),
        candidate: Some(decision(&report.candidate, report.candidate_usage)),
        unrecorded_calls: report.unrecorded_calls,
        error: report.error.clone().unwrap_or_default(),
    }
}

#[tonic::async_trait]
impl ReplayService for ReplayApi {
    async fn start_replay(
        &self,
        request: Request<pb::StartReplayRequest>,
    ) -> Result<Response<pb::Replay>, Status> {
        let req = request.into_inner();
        let agent_id = parse_agent_id(&req.agent_id)?;
        let record = self
            .runtime
            .agent_record(agent_id)
            .map_err(ApiError::from)?
            .ok_or_else(|| ApiError::NotFound(format!("no agent {agent_id}")))?;
        let max_turns = match req.max_turns {
            0 => DEFAULT_TURNS,
            n if n > MAX_TURNS => {
                return Err(ApiError::InvalidArgument(format!(
                    "max_turns is {n}; the most is {MAX_TURNS}"
                ))
                .into())
            }
            n => n,
        };
        let (from_ms, to_ms) = (req.from_ms, req.to_ms);
        if from_ms < 0 || to_ms < 0 || (to_ms > 0 && from_ms >= to_ms) {
            return Err(ApiError::InvalidArgument(format!(
                "from_ms ({from_ms}) and to_ms ({to_ms}) must be Unix milliseconds, from before to"
            ))
            .into());
        }
        if req.run_ids.len() > MAX_TURNS as usize {
            return Err(ApiError::InvalidArgument(format!(
                "run_ids names {} turns; the most is {MAX_TURNS}",
                req.run_ids.len()
            ))
            .into());
        }
        let run_ids = req
            .run_ids
            .iter()
            .map(|text| text.parse::<RunId>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(ApiError::from)?;
        let budget = req.budget.unwrap_or_default();
        if budget.concurrency > MAX_CONCURRENCY {
            return Err(ApiError::InvalidArgument(format!(
                "concurrency is {}; the most is {MAX_CONCURRENCY}",
                budget.concurrency
            ))
            .into());
        }
        let spec = ReplaySpec {
            agent_id,
            from_ms: (from_ms > 0).then_some(from_ms as u64),
            to_ms: (to_ms > 0).then_some(to_ms as u64),
            run_ids,
            max_turns,
            candidate: candidate(req.candidate, &self.runtime.ctx().config.skill_roots)?,
            budget: Budget {
                max_tokens: budget.max_tokens,
                max_wall_ms: budget.max_wall_ms,
                concurrency: budget.concurrency.max(1),
            },
            until_ms: holarchy_actors::now_ms(),
        };
        // The gate let the caller name the agent: its namespace is theirs.
        let started = self
            .replays
            .start(spec, record.namespace)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(replay(&started)))
    }

    async fn get_replay(
        &self,
        request: Request<pb::GetReplayRequest>,
    ) -> Result<Response<pb::GetReplayResponse>, Status> {
        let namespace = namespace_of(&request);
        let req = request.into_inner();
        let record = self.owned(&req.replay_id, &namespace).await?;
        let limit = match req.page_size as usize {
            0 => DEFAULT_PAGE,
            n => n.min(MAX_PAGE),
        };
        let mut after: Option<u32> = page_token(&req.page_token)?;
        let mut turns = Vec::new();
        // A page of differences may pass over many same turns: read on
        // until the page is full or the reports end.
        let next = loop {
            let page = self
                .replays
                .reports(record.id, after, limit)
                .await
                .map_err(ApiError::from)?;
            let full = page.len() == limit;
            for report in page {
                after = Some(report.index);
                if req.differences_only && report.class == Class::Same.name() {
                    continue;
                }
                turns.push(turn(&report));
                if turns.len() == limit {
                    break;
                }
            }
            if turns.len() == limit {
                break after.map(|a| a.to_string()).unwrap_or_default();
            }
            if !full {
                break String::new();
            }
        };
        Ok(Response::new(pb::GetReplayResponse {
            replay: Some(replay(&record)),
            turns,
            next_page_token: next,
        }))
    }

    async fn list_replays(
        &self,
        request: Request<pb::ListReplaysRequest>,
    ) -> Result<Response<pb::ListReplaysResponse>, Status> {
        let namespace = namespace_of(&request);
        let mut replays: Vec<pb::Replay> = self
            .replays
            .list()
            .await
            .map_err(ApiError::from)?
            .iter()
            .filter(|r| r.namespace == namespace)
            .map(replay)
            .collect();
        replays.reverse();
        Ok(Response::new(pb::ListReplaysResponse { replays }))
    }

    async fn cancel_replay(
        &self,
        request: Request<pb::ReplayRequest>,
    ) -> Result<Response<pb::Replay>, Status> {
        let namespace = namespace_of(&request);
        let record = self.owned(&request.get_ref().replay_id, &namespace).await?;
        let cancelled = self
            .replays
            .cancel(record.id)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(replay(&cancelled)))
    }

    async fn resume_replay(
        &self,
        request: Request<pb::ReplayRequest>,
    ) -> Result<Response<pb::Replay>, Status> {
        let namespace = namespace_of(&request);
        let record = self.owned(&request.get_ref().replay_id, &namespace).await?;
        let resumed = self
            .replays
            .resume(record.id)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(replay(&resumed)))
    }

    async fn delete_replay(
        &self,
        request: Request<pb::ReplayRequest>,
    ) -> Result<Response<pb::DeleteReplayResponse>, Status> {
        let namespace = namespace_of(&request);
        let record = self.owned(&request.get_ref().replay_id, &namespace).await?;
        self.replays
            .delete(record.id)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::DeleteReplayResponse {}))
    }
}
