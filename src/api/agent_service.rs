//! `holarchy.v1.AgentService`: translates requests into runtime and store
//! calls and their results back into proto. No rule lives here; listings
//! are bounded in count and in bytes ([`super::budget`]).

use std::pin::Pin;
use std::sync::Arc;

use holarchy_actors::protocol::Control;
use holarchy_actors::{AgentSnapshot, DeliverError, NewAgent, Outgoing, Runtime};
use holarchy_supervision::event::ActedBy;
use holarchy_supervision::{
    bounds, AgentId, AgentRecord, BrainConfig, MessageId, Visibility, WorkStatus,
};
use tokio::sync::watch;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};
use tracing::instrument;

use super::budget;
use super::convert::{self, quote, ApiError};
use super::pb;
use super::pb::agent_service_server::AgentService;
use super::read_model::ReadModel;
use crate::store::view::Beside;

mod context_view;
mod delete;
mod events;
mod replies;

/// Default and largest page sizes for listings.
const DEFAULT_PAGE: usize = 100;
const MAX_PAGE: usize = 1000;

#[derive(Debug, Clone)]
pub struct AgentApi {
    runtime: Arc<Runtime>,
    store: Arc<dyn ReadModel>,
    /// Flips to `true` when the daemon shuts down; open watches end then.
    shutdown: watch::Receiver<bool>,
}

impl AgentApi {
    pub fn new(
        runtime: Arc<Runtime>,
        store: Arc<dyn ReadModel>,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        Self {
            runtime,
            store,
            shutdown,
        }
    }

    fn record(&self, agent_id: AgentId) -> Result<AgentRecord, ApiError> {
        self.store
            .agent(agent_id)?
            .ok_or_else(|| ApiError::NotFound(format!("agent {agent_id} not found")))
    }

    /// One agent's summary, bounded in bytes like every record.
    fn summary(&self, record: &AgentRecord) -> Result<pb::AgentSummary, ApiError> {
        let beside = self.store.beside(&[record.id])?.pop().unwrap_or_default();
        self.bounded_summary(record, beside)
    }

    fn bounded_summary(
        &self,
        record: &AgentRecord,
        beside: Beside,
    ) -> Result<pb::AgentSummary, ApiError> {
        let live = self.runtime.agent_snapshot(record.id);
        let mut summary = self.summary_with(record, live, beside)?;
        budget::bound(&mut summary);
        Ok(summary)
    }

    /// A page's summaries, from what each agent published: no actor is
    /// asked. What each shows beside its record is read for the page at
    /// once.
    fn summaries(&self, records: &[AgentRecord]) -> Result<Vec<pb::AgentSummary>, ApiError> {
        let ids: Vec<AgentId> = records.iter().map(|r| r.id).collect();
        let beside = self.store.beside(&ids)?;
        records
            .iter()
            .zip(beside)
            .map(|(record, beside)| {
                self.summary_with(record, self.runtime.agent_snapshot(record.id), beside)
            })
            .collect()
    }

    fn summary_with(
        &self,
        record: &AgentRecord,
        live: Option<AgentSnapshot>,
        (waits, work_items): Beside,
    ) -> Result<pb::AgentSummary, ApiError> {
        let focus = work_items
            .into_iter()
            .find(|w| w.status == WorkStatus::Active);
        let mut summary = convert::summary(record, live.as_ref(), &waits, focus.as_ref());
        // A call parked for an operator is something the agent waits on
        // like a wait: listed the same way.
        if record.composition.is_some() {
            let approvals = self.runtime.approvals(Some(record.id), false)?;
            summary.waiting_on.extend(
                approvals
                    .iter()
                    .filter(|a| !a.status.is_decided())
                    .map(|a| format!("approval {} of {} ({})", a.id, a.tool, a.status.name())),
            );
        }
        Ok(summary)
    }

    async fn control(
        &self,
        agent_id: AgentId,
        action: Control,
    ) -> Result<Response<pb::ControlResponse>, Status> {
        let outcome = self
            .runtime
            .control(agent_id, action)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ControlResponse {
            state: convert::lifecycle(outcome.state).into(),
            aborted_run_id: outcome
                .aborted_run
                .map(|r| r.to_string())
                .unwrap_or_default(),
        }))
    }

    /// Reads see the store's memory, which may hold writes a crash could
    /// still take back; wait until what was read is durable before showing
    /// it. Free when nothing is left unflushed.
    async fn durable(&self) -> Result<(), ApiError> {
        self.store.durable().await.map_err(ApiError::from)
    }
}

pub(crate) fn parse_agent_id(text: &str) -> Result<AgentId, ApiError> {
    if text.is_empty() {
        return Err(ApiError::InvalidArgument("agent_id is required".into()));
    }
    Ok(text.parse()?)
}

/// Checks a brain configuration before it is stored.
/// A request's network policy; refused whole, naming what to write.
fn network_policy(text: &str) -> Result<holarchy_supervision::NetworkPolicy, ApiError> {
    holarchy_supervision::NetworkPolicy::parse(text)
        .map_err(|err| ApiError::InvalidArgument(err.to_string()))
}

fn check_brain(config: Option<BrainConfig>) -> Result<Option<BrainConfig>, ApiError> {
    if let Some(brain) = &config {
        brain.validate()?;
    }
    Ok(config)
}

fn page_size(requested: u32) -> usize {
    match requested as usize {
        0 => DEFAULT_PAGE,
        n => n.min(MAX_PAGE),
    }
}

pub(crate) fn page_token<T: std::str::FromStr>(token: &str) -> Result<Option<T>, ApiError> {
    if token.is_empty() {
        return Ok(None);
    }
    token
        .parse()
        .map(Some)
        .map_err(|_| ApiError::InvalidArgument(format!("malformed page token `{}`", quote(token))))
}

/// Cuts a listing read with one extra row to `limit`, and returns the page
/// token that continues after it (empty on the last page).
fn next_page<T>(rows: &mut Vec<T>, limit: usize, key: impl Fn(&T) -> String) -> String {
    if rows.len() <= limit {
        return String::new();
    }
    rows.truncate(limit);
    rows.last().map(key).unwrap_or_default()
}

/// One page of a listing held whole in memory (`rows`, after the page
/// token): at most `page_size` rows, and at most the byte budget; with the
/// token of the next page (empty on the last).
pub(crate) fn page<R, T: budget::Bounded>(
    rows: Vec<R>,
    page_size: u32,
    convert: impl Fn(&R) -> T,
    key: impl Fn(&T) -> String,
) -> (Vec<T>, String) {
    let limit = self::page_size(page_size);
    let more = rows.len() > limit;
    let mut items: Vec<T> = rows.iter().take(limit).map(convert).collect();
    let cut = budget::fit_page(&mut items);
    let token = if cut || more {
        items.last().map(key).unwrap_or_default()
    } else {
        String::new()
    };
    (items, token)
}

type EventStream = Pin<Box<dyn Stream<Item = Result<pb::Event, Status>> + Send>>;
type ReplyStream = Pin<Box<dyn Stream<Item = Result<pb::ReplyEvent, Status>> + Send>>;

#[tonic::async_trait]
impl AgentService for AgentApi {
    #[instrument(skip_all, fields(name = %request.get_ref().name))]
    async fn create_agent(
        &self,
        request: Request<pb::CreateAgentRequest>,
    ) -> Result<Response<pb::CreateAgentResponse>, Status> {
        let namespace = super::scope::namespace_of(&request);
        let created_by = acted_by(&request, "AgentService/CreateAgent");
        let req = request.into_inner();
        bounds::check_name(&req.name).map_err(ApiError::from)?;
        if let Some(body) = &req.initial_message {
            bounds::check_message(body).map_err(ApiError::from)?;
        }
        let brain = match req.brain {
            Some(config) => check_brain(convert::brain_from(config)?)?,
            None => None,
        };
        let warnings = self
            .runtime
            .brain_warning(brain.as_ref())
            .into_iter()
            .collect();
        let agent_id = self
            .runtime
            .create_one(NewAgent {
                name: req.name,
                initial_message: req.initial_message,
                brain,
                context_tokens: req.context_tokens,
                mcp_servers: req.mcp_servers,
                network: network_policy(&req.network)?,
                namespace,
                labels: req.labels.into_iter().collect(),
                created_by: created_by.clone(),
            })
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::CreateAgentResponse {
            agent_id: agent_id.to_string(),
            warnings,
        }))
    }

    #[instrument(skip_all, fields(count = request.get_ref().agents.len()))]
    async fn create_agents(
        &self,
        request: Request<pb::CreateAgentsRequest>,
    ) -> Result<Response<pb::CreateAgentsResponse>, Status> {
        let mut specs = Vec::with_capacity(request.get_ref().agents.len());
        let namespace = super::scope::namespace_of(&request);
        let created_by = acted_by(&request, "AgentService/CreateAgents");
        for req in request.into_inner().agents {
            bounds::check_name(&req.name).map_err(ApiError::from)?;
            if let Some(body) = &req.initial_message {
                bounds::check_message(body).map_err(ApiError::from)?;
            }
            let brain = match req.brain {
                Some(config) => check_brain(convert::brain_from(config)?)?,
                None => None,
            };
            specs.push(NewAgent {
                name: req.name,
                initial_message: req.initial_message,
                brain,
                context_tokens: req.context_tokens,
                mcp_servers: req.mcp_servers,
                network: network_policy(&req.network)?,
                namespace: namespace.clone(),
                labels: req.labels.into_iter().collect(),
                created_by: created_by.clone(),
            });
        }
        let ids = self
            .runtime
            .create_agents(specs)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::CreateAgentsResponse {
            agent_ids: ids.iter().map(ToString::to_string).collect(),
        }))
    }

    async fn get_agent(
        &self,
        request: Request<pb::GetAgentRequest>,
    ) -> Result<Response<pb::AgentGetResult>, Status> {
        let namespace = super::scope::namespace_of(&request);
        let agent_id = match request.into_inner().agent {
            Some(pb::get_agent_request::Agent::AgentId(id)) => parse_agent_id(&id)?,
            // A name is looked up in the caller's namespace only.
            Some(pb::get_agent_request::Agent::Name(name)) => self
                .store
                .agent_id_by_name(&holarchy_supervision::namespace::qualified(
                    &namespace, &name,
                ))
                .map_err(ApiError::from)?
                .ok_or_else(|| ApiError::NotFound(format!("no agent named `{}`", quote(&name))))?,
            None => return Err(ApiError::InvalidArgument("give agent_id or name".into()).into()),
        };
        let view = self
            .store
            .agent_view(agent_id)
            .map_err(ApiError::from)?
            .ok_or_else(|| ApiError::NotFound(format!("agent {agent_id} not found")))?;
        // A memory that cannot be counted leaves its figures out rather
        // than hiding the agent.
        let memory = match view.memory {
            Ok(size) => Some(pb::AgentMemory {
                notes: size.notes,
                entries: size.entries,
            }),
            Err(err) => {
                tracing::warn!(agent_id = %agent_id, error = %err, "memory size not read");
                None
            }
        };
        let usage = view.usage.unwrap_or_default();
        self.durable().await?;
        Ok(Response::new(pb::AgentGetResult {
            agent: Some(self.bounded_summary(&view.record, (view.waits, view.work_items))?),
            memory,
            usage: Some(pb::AgentUsage {
                prompt_tokens: usage.tokens.prompt_tokens,
                completion_tokens: usage.tokens.completion_tokens,
                cached_tokens: usage.tokens.cached_tokens,
                turns: usage.turns,
            }),
        }))
    }

    async fn list_agents(
        &self,
        request: Request<pb::ListAgentsRequest>,
    ) -> Result<Response<pb::ListAgentsResponse>, Status> {
        let namespace = super::scope::namespace_of(&request);
        let req = request.into_inner();
        let limit = page_size(req.page_size);
        let after: Option<AgentId> = page_token(&req.page_token)?;
        let mut records = self
            .store
            .list_agents(after, limit + 1, req.include_private)
            .map_err(ApiError::from)?;
        let mut next_page_token = next_page(&mut records, limit, |r| r.id.to_string());
        // Paged by id over every agent, each page kept to the caller's
        // namespace: a page may come back short, its token going on.
        records.retain(|r| r.namespace == namespace);
        let mut agents = self.summaries(&records)?;
        if budget::fit_page(&mut agents) {
            next_page_token = agents
                .last()
                .map(|a| a.agent_id.clone())
                .unwrap_or_default();
        }
        self.durable().await?;
        Ok(Response::new(pb::ListAgentsResponse {
            agents,
            next_page_token,
        }))
    }

    #[instrument(skip_all, fields(agent_id = %request.get_ref().agent_id))]
    async fn send_message(
        &self,
        request: Request<pb::SendMessageRequest>,
    ) -> Result<Response<pb::SendMessageResponse>, Status> {
        let by = sent_by(&request, "AgentService/SendMessage");
        let req = request.into_inner();
        let agent_id = parse_agent_id(&req.agent_id)?;
        bounds::check_message(&req.text).map_err(ApiError::from)?;
        bounds::check_dedupe_key(&req.dedupe_key).map_err(ApiError::from)?;
        let dedupe_key = (!req.dedupe_key.is_empty()).then_some(req.dedupe_key);
        let delivered = self
            .runtime
            .send_message_logged(agent_id, req.text, dedupe_key, by)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::SendMessageResponse {
            message_id: delivered.message_id.to_string(),
            duplicate: delivered.duplicate,
        }))
    }

    async fn send_messages(
        &self,
        request: Request<pb::SendMessagesRequest>,
    ) -> Result<Response<pb::SendMessagesResponse>, Status> {
        let by = sent_by(&request, "AgentService/SendMessages");
        let requests = request.into_inner().messages;
        if requests.is_empty() || requests.len() > MAX_SEND_BATCH {
            return Err(ApiError::InvalidArgument(format!(
                "send 1 to {MAX_SEND_BATCH} messages, not {}",
                requests.len()
            ))
            .into());
        }
        // A malformed id refuses that message only, like any other refusal.
        let mut results: Vec<Option<pb::SendMessageResult>> = Vec::with_capacity(requests.len());
        let mut outgoing = Vec::with_capacity(requests.len());
        for req in requests {
            match parse_agent_id(&req.agent_id) {
                Ok(agent_id) => {
                    results.push(None);
                    outgoing.push(Outgoing {
                        agent_id,
                        body: req.text,
                        dedupe_key: (!req.dedupe_key.is_empty()).then_some(req.dedupe_key),
                        events: by.clone(),
                    });
                }
                Err(err) => results.push(Some(refused(err.into()))),
            }
        }
        let mut answers = self.runtime.send_messages(outgoing).await.into_iter();
        for slot in results.iter_mut().filter(|slot| slot.is_none()) {
            let answer = answers.next().unwrap_or_else(|| {
                Err(DeliverError::Unavailable(
                    "no answer for this message".into(),
                ))
            });
            *slot = Some(match answer {
                Ok(delivered) => pb::SendMessageResult {
                    result: Some(pb::send_message_result::Result::Sent(
                        pb::SendMessageResponse {
                            message_id: delivered.message_id.to_string(),
                            duplicate: delivered.duplicate,
                        },
                    )),
                },
                Err(err) => refused(Status::from(ApiError::from(err))),
            });
        }
        Ok(Response::new(pb::SendMessagesResponse {
            results: results.into_iter().flatten().collect(),
        }))
    }

    async fn list_messages(
        &self,
        request: Request<pb::ListMessagesRequest>,
    ) -> Result<Response<pb::ListMessagesResponse>, Status> {
        let req = request.into_inner();
        let agent_id = parse_agent_id(&req.agent_id)?;
        self.record(agent_id)?;
        let limit = page_size(req.page_size);
        let after: Option<MessageId> = page_token(&req.page_token)?;
        let mut records = self
            .store
            .list_messages(agent_id, after, limit + 1)
            .map_err(ApiError::from)?;
        let mut next_page_token = next_page(&mut records, limit, |r| r.id.to_string());
        let mut messages: Vec<pb::Message> = records.iter().map(convert::message).collect();
        if budget::fit_page(&mut messages) {
            next_page_token = messages
                .last()
                .map(|m| m.message_id.clone())
                .unwrap_or_default();
        }
        self.durable().await?;
        Ok(Response::new(pb::ListMessagesResponse {
            messages,
            next_page_token,
        }))
    }

    #[instrument(skip_all, fields(agent_id = %request.get_ref().agent_id))]
    async fn archive_agent(
        &self,
        request: Request<pb::ArchiveAgentRequest>,
    ) -> Result<Response<pb::ArchiveAgentResponse>, Status> {
        let agent_id = parse_agent_id(&request.into_inner().agent_id)?;
        let outcome = self
            .runtime
            .archive_agent(agent_id)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ArchiveAgentResponse {
            agents: outcome.agents as u32,
            tasks: outcome.tasks as u32,
        }))
    }

    #[instrument(skip_all, fields(agent_id = %request.get_ref().agent_id))]
    async fn delete_agent(
        &self,
        request: Request<pb::DeleteAgentRequest>,
    ) -> Result<Response<pb::DeleteAgentResponse>, Status> {
        let agent_id = parse_agent_id(&request.into_inner().agent_id)?;
        let agents = delete::delete(self, agent_id).await?;
        Ok(Response::new(pb::DeleteAgentResponse {
            agents: agents as u32,
        }))
    }

    #[instrument(skip_all, fields(agent_id = %request.get_ref().agent_id, run_id = %request.get_ref().run_id))]
    async fn abort_run(
        &self,
        request: Request<pb::AbortRunRequest>,
    ) -> Result<Response<pb::ControlResponse>, Status> {
        let req = request.into_inner();
        let agent_id = parse_agent_id(&req.agent_id)?;
        let run_id = if req.run_id.is_empty() {
            None
        } else {
            Some(req.run_id.parse().map_err(ApiError::from)?)
        };
        self.control(agent_id, Control::Abort { run_id }).await
    }

    #[instrument(skip_all, fields(agent_id = %request.get_ref().agent_id))]
    async fn pause_agent(
        &self,
        request: Request<pb::PauseAgentRequest>,
    ) -> Result<Response<pb::ControlResponse>, Status> {
        let agent_id = parse_agent_id(&request.into_inner().agent_id)?;
        self.control(agent_id, Control::Pause).await
    }

    #[instrument(skip_all, fields(agent_id = %request.get_ref().agent_id))]
    async fn resume_agent(
        &self,
        request: Request<pb::ResumeAgentRequest>,
    ) -> Result<Response<pb::ControlResponse>, Status> {
        let agent_id = parse_agent_id(&request.into_inner().agent_id)?;
        self.control(agent_id, Control::Resume).await
    }

    #[instrument(skip_all, fields(agent_id = %request.get_ref().agent_id))]
    async fn update_agent_brain(
        &self,
        request: Request<pb::UpdateAgentBrainRequest>,
    ) -> Result<Response<pb::AgentGetResult>, Status> {
        let req = request.into_inner();
        let agent_id = parse_agent_id(&req.agent_id)?;
        let config = req
            .brain
            .map(convert::brain_from)
            .transpose()?
            .flatten()
            .ok_or_else(|| ApiError::InvalidArgument("brain is required".into()))?;
        let config = check_brain(Some(config))?.unwrap_or_default();
        let record = self
            .runtime
            .update_brain(agent_id, config)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::AgentGetResult {
            agent: Some(self.summary(&record)?),
            memory: None,
            usage: None,
        }))
    }

    async fn list_tools(
        &self,
        request: Request<pb::ListToolsRequest>,
    ) -> Result<Response<pb::ListToolsResponse>, Status> {
        let agent_id = parse_agent_id(&request.into_inner().agent_id)?;
        let record = self.record(agent_id)?;
        let catalog = self.runtime.tool_catalog(&record).await;
        let tools = catalog
            .tools
            .into_iter()
            .map(|t| pb::ToolDescriptor {
                name: t.name,
                family: t.family.name().to_owned(),
                plane: t.plane.to_owned(),
                description: t.description,
                input_schema_json: t.input_schema.to_string(),
            })
            .collect();
        Ok(Response::new(pb::ListToolsResponse {
            tools,
            unavailable: catalog.unavailable,
        }))
    }

    async fn get_agent_context(
        &self,
        request: Request<pb::GetAgentContextRequest>,
    ) -> Result<Response<pb::GetAgentContextResponse>, Status> {
        let agent_id = parse_agent_id(&request.into_inner().agent_id)?;
        let record = self.record(agent_id)?;
        Ok(Response::new(
            context_view::preview(&self.runtime, record).await?,
        ))
    }

    type WatchEventsStream = EventStream;

    async fn watch_events(
        &self,
        request: Request<pb::WatchEventsRequest>,
    ) -> Result<Response<Self::WatchEventsStream>, Status> {
        let namespace = super::scope::namespace_of(&request);
        // In process (no caller): the daemon's own, every namespace's.
        let global = request
            .extensions()
            .get::<crate::access::Caller>()
            .is_none_or(|caller| caller.global);
        let req = request.into_inner();
        let filter = if req.agent_id.is_empty() {
            None
        } else {
            Some(parse_agent_id(&req.agent_id)?)
        };
        let watch = events::Watch {
            after: req.after_cursor,
            agent: filter,
            namespace,
            global,
            follow: req.follow,
        };
        let stream = events::stream(self.store.clone(), watch, self.shutdown.clone());
        Ok(Response::new(Box::pin(stream)))
    }

    type WatchRepliesStream = ReplyStream;

    #[instrument(skip_all, fields(agent_id = %request.get_ref().agent_id))]
    async fn watch_replies(
        &self,
        request: Request<pb::WatchRepliesRequest>,
    ) -> Result<Response<Self::WatchRepliesStream>, Status> {
        let agent_id = parse_agent_id(&request.into_inner().agent_id)?;
        let record = self.record(agent_id)?;
        // What operators may send to, they may watch: public agents.
        if record.profile.visibility != Visibility::Public {
            return Err(ApiError::PermissionDenied(format!(
                "agent {agent_id} is private: watch its supervisor instead"
            ))
            .into());
        }
        let receiver = self.runtime.watch_replies(agent_id);
        let stream = replies::stream(agent_id, receiver, self.shutdown.clone());
        Ok(Response::new(Box::pin(stream)))
    }
}

/// Most messages one `SendMessages` call may carry.
pub const MAX_SEND_BATCH: usize = 1_000;

/// One refused message of a batch, as the status a single call would get.
fn refused(status: Status) -> pb::SendMessageResult {
    pb::SendMessageResult {
        result: Some(pb::send_message_result::Result::Refused(
            pb::MessageRefused {
                code: status.code() as i32,
                message: status.message().to_owned(),
            },
        )),
    }
}

/// Who made the call, as the audit trail names callers: the caller the
/// gate found (none for the daemon's own calls).
fn caller_of<T>(request: &Request<T>) -> Option<String> {
    request
        .extensions()
        .get::<crate::access::Caller>()
        .map(crate::access::Caller::who)
}

/// Who made the call and which, for the log of the agent it acts on.
fn acted_by<T>(request: &Request<T>, action: &str) -> Option<ActedBy> {
    caller_of(request).map(|caller| ActedBy {
        caller,
        action: action.to_owned(),
    })
}

/// Who sent a message, for its agent's log.
fn sent_by<T>(request: &Request<T>, action: &str) -> Vec<holarchy_supervision::EventKind> {
    acted_by(request, action)
        .map(Into::into)
        .into_iter()
        .collect()
}
