//! `holarchy.v1.MemoryService`: operators search and list any agent's
//! notes, and write into a public agent's memory. The bounds are the
//! agents' own (`holarchy_actors::store::memory`); a request over the
//! transport's 4 MiB never reaches this handler (OUT_OF_RANGE).

use std::sync::Arc;

use holarchy_actors::store::memory::MAX_SEARCH_HITS;
use holarchy_actors::store::{check_search, MemoryInputError};
use holarchy_actors::{
    MemoryHit, MemoryKind, MemoryNote, NoteDraft, Recalled, RecalledToolCall, Runtime,
};
use holarchy_supervision::{AgentId, NoteId, Visibility};
use tonic::{Request, Response, Status};

use super::agent_service::{page_token, parse_agent_id};
use super::convert::ApiError;
use super::pb;
use super::pb::memory_service_server::MemoryService;

/// Notes per listed page when the request names no size, and at most.
const DEFAULT_PAGE: usize = 100;
const MAX_PAGE: usize = 1000;

#[derive(Debug, Clone)]
pub struct MemoryApi {
    runtime: Arc<Runtime>,
}

impl MemoryApi {
    pub fn new(runtime: Arc<Runtime>) -> Self {
        Self { runtime }
    }

    /// The agent, which must exist (archived ones included: their memory
    /// is gone, so they answer empty).
    fn agent(&self, text: &str) -> Result<(AgentId, Visibility, bool), ApiError> {
        let agent_id = parse_agent_id(text)?;
        let record = self
            .runtime
            .agent_record(agent_id)?
            .ok_or_else(|| ApiError::NotFound(format!("no agent {agent_id}")))?;
        Ok((agent_id, record.profile.visibility, record.state.is_live()))
    }
}

impl From<MemoryInputError> for ApiError {
    fn from(err: MemoryInputError) -> Self {
        ApiError::InvalidArgument(err.to_string())
    }
}

fn note(note: &MemoryNote) -> pb::MemoryNote {
    pb::MemoryNote {
        note_id: note.id.to_string(),
        agent_id: note.agent_id.to_string(),
        key: note.key.clone().unwrap_or_default(),
        text: note.text.clone(),
        tags: note.tags.clone(),
        created_at_ms: note.created_at_ms as i64,
        updated_at_ms: note.updated_at_ms as i64,
    }
}

fn hit(hit: &MemoryHit) -> pb::MemoryHit {
    let mut out = pb::MemoryHit {
        score: hit.score,
        snippet: hit.snippet.clone(),
        kind: hit.item.kind().name().into(),
        ..pb::MemoryHit::default()
    };
    match &hit.item {
        Recalled::Note(found) => out.note = Some(note(found)),
        Recalled::Message(found) => {
            out.message = Some(pb::RecalledMessage {
                message_id: found.id.to_string(),
                text: found.body.clone(),
                reply: found.reply.clone().unwrap_or_default(),
                created_at_ms: found.created_at_ms as i64,
                provenance: found.provenance.kind().into(),
            })
        }
        Recalled::ToolCall(call) => {
            out.tool_call = Some(pb::RecalledToolCall {
                id: RecalledToolCall::memory_id(call.cursor),
                run_id: call.run_id.to_string(),
                tool: call.tool.clone(),
                input: call.input.clone(),
                output: call.output.clone(),
                is_error: call.is_error,
                at_ms: call.at_ms as i64,
            })
        }
    }
    out
}

/// The longest prefix of `records` within the page budget (always at
/// least one): a response stays far under the gRPC message bound whatever
/// the notes and messages hold.
fn within_page<T: prost::Message>(records: impl Iterator<Item = T>) -> Vec<T> {
    let mut used = 0;
    let mut page = Vec::new();
    for record in records {
        // Each repeated field costs its length prefix and tag too.
        used += record.encoded_len() + 8;
        if !page.is_empty() && used > super::budget::PAGE_BUDGET_BYTES {
            break;
        }
        page.push(record);
    }
    page
}

#[tonic::async_trait]
impl MemoryService for MemoryApi {
    async fn search_memory(
        &self,
        request: Request<pb::SearchMemoryRequest>,
    ) -> Result<Response<pb::SearchMemoryResponse>, Status> {
        let req = request.into_inner();
        check_search(&req.query, u64::from(req.limit)).map_err(ApiError::from)?;
        let (agent_id, _, _) = self.agent(&req.agent_id)?;
        let kinds = req
            .kinds
            .iter()
            .map(|name| {
                MemoryKind::from_name(name).ok_or_else(|| {
                    ApiError::InvalidArgument(format!(
                        "`{}` is not a memory kind (note, message, child_result, event, tool_call)",
                        super::convert::quote(name)
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let limit = (req.limit as usize).min(MAX_SEARCH_HITS);
        let hits = self
            .runtime
            .search_memory(agent_id, req.query, kinds, limit)
            .await
            .map_err(ApiError::from)?;
        // Best first: what a page's bytes leave out are the weakest hits.
        let hits = within_page(hits.iter().map(hit));
        Ok(Response::new(pb::SearchMemoryResponse { hits }))
    }

    async fn list_memory(
        &self,
        request: Request<pb::ListMemoryRequest>,
    ) -> Result<Response<pb::ListMemoryResponse>, Status> {
        let req = request.into_inner();
        let (agent_id, _, _) = self.agent(&req.agent_id)?;
        let after: Option<NoteId> = page_token(&req.page_token)?;
        let limit = match req.page_size as usize {
            0 => DEFAULT_PAGE,
            n => n.min(MAX_PAGE),
        };
        let (mut notes, total) = self
            .runtime
            .notes(agent_id, after, limit + 1)
            .await
            .map_err(ApiError::from)?;
        // One row more than the page tells whether another page follows.
        let more = notes.len() > limit;
        notes.truncate(limit);
        let page = within_page(notes.iter().map(note));
        // A page its bytes cut short goes on after its last note too.
        let next_page_token = if more || page.len() < notes.len() {
            page.last().map(|n| n.note_id.clone()).unwrap_or_default()
        } else {
            String::new()
        };
        Ok(Response::new(pb::ListMemoryResponse {
            notes: page,
            next_page_token,
            total,
        }))
    }

    async fn write_memory(
        &self,
        request: Request<pb::WriteMemoryRequest>,
    ) -> Result<Response<pb::MemoryNote>, Status> {
        let req = request.into_inner();
        let draft = NoteDraft {
            agent_id: parse_agent_id(&req.agent_id)?,
            key: Some(req.key).filter(|k| !k.is_empty()),
            text: req.text,
            tags: req.tags,
        };
        draft.check().map_err(ApiError::from)?;
        let (_, visibility, live) = self.agent(&req.agent_id)?;
        if !live {
            return Err(ApiError::FailedPrecondition(format!(
                "agent {} is archived: its memory went with it",
                draft.agent_id
            ))
            .into());
        }
        if visibility != Visibility::Public {
            return Err(ApiError::PermissionDenied(format!(
                "agent {} is private: only its own tools write its memory",
                draft.agent_id
            ))
            .into());
        }
        let written = self
            .runtime
            .write_note(draft)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(note(&written)))
    }
}
