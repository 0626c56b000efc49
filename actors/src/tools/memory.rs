//! The memory family: notes an agent keeps for itself, and their search.
//! `MemoryWrite` stores a note durably (same key: replaced),
//! `MemorySearch` finds the agent's notes, the messages it handled (with
//! its replies), its child results, inbound events and tool calls by their
//! words, ranked and with the matches highlighted, and `MemoryGet` reads
//! one of them back whole. An agent reaches only its own.

use std::sync::Arc;

use holarchy_supervision::ToolFamily;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{classified, Classify, ErrorKind, ToolError};
use super::tool::{Caller, Plane, Spec, Tool};
use crate::store::memory::{is_memory_id, MAX_SEARCH_HITS};
use crate::store::{
    check_search, MemoryHit, MemoryInputError, MemoryKind, MemoryNote, NoteDraft, Recalled,
    RecalledToolCall, StoreError,
};
use crate::{now_ms, Ctx};

/// Hits a search returns when it names no limit.
const DEFAULT_HITS: u64 = 10;

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error(transparent)]
    Input(#[from] MemoryInputError),
    #[error("nothing in your memory has the id `{0}`")]
    NotFound(String),
    #[error("`{0}` is not a memory id (a note's, a message's or `tool_` and a number)")]
    BadId(String),
    #[error("the memory search stopped: {0}")]
    Interrupted(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

classified!(MemoryError);

impl Classify for MemoryError {
    fn kind(&self) -> ErrorKind {
        match self {
            MemoryError::Input(_) => ErrorKind::InvalidInput,
            MemoryError::NotFound(_) => ErrorKind::NotFound,
            MemoryError::BadId(_) => ErrorKind::InvalidInput,
            MemoryError::Interrupted(_) => ErrorKind::Failed,
            // A full memory is a precondition: refused.
            MemoryError::Store(err) => err.kind(),
        }
    }
}

/// What a brain reads of a note.
pub fn note_json(note: &MemoryNote) -> Value {
    json!({
        "id": note.id.to_string(),
        "key": note.key,
        "text": note.text,
        "tags": note.tags,
        "created_at_ms": note.created_at_ms,
        "updated_at_ms": note.updated_at_ms,
    })
}

/// `MemoryWrite`: keeps a note.
#[derive(Debug)]
pub struct MemoryWrite;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryWriteInput {
    /// A name for the note (at most 128 bytes); writing the same key again
    /// replaces that note.
    #[serde(default)]
    key: Option<String>,
    /// The note (at most 16 KiB).
    text: String,
    /// Words to find the note by (at most 8, each at most 32 bytes).
    #[serde(default)]
    tags: Vec<String>,
}

impl Tool for MemoryWrite {
    const SPEC: Spec = Spec {
        name: "MemoryWrite",
        family: ToolFamily::Memory,
        plane: Plane::Memory,
        description: "Keeps a note in your durable memory, to find later with MemorySearch (across turns and restarts). A note with a key replaces your earlier note with that key.",
    };
    type Input = MemoryWriteInput;
    type Error = MemoryError;

    async fn run(
        ctx: &Arc<Ctx>,
        caller: Caller,
        input: MemoryWriteInput,
    ) -> Result<Value, MemoryError> {
        let draft = NoteDraft {
            agent_id: caller.agent_id,
            key: input.key,
            text: input.text,
            tags: input.tags,
        };
        draft.check()?;
        let note = ctx.memory().put_note(&draft, now_ms())?;
        // Kept once on disk: a note told as written survives a crash.
        crate::apply::durable(ctx).await?;
        Ok(json!({
            "id": note.id.to_string(),
            "key": note.key,
            "replaced": note.created_at_ms != note.updated_at_ms,
        }))
    }
}

/// `MemorySearch`: the agent's notes best matching a query.
#[derive(Debug)]
pub struct MemorySearch;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemorySearchInput {
    /// Words to look for (at most 1 KiB); `"exact phrase"`, `+must` and
    /// `-must_not` work.
    query: String,
    /// How many hits, 1 to 50 (default 10).
    #[serde(default)]
    limit: Option<u64>,
    /// What to search: `note` (your notes), `message` (messages you
    /// handled, with your replies), `child_result` (your children's
    /// results), `event` (inbound events you handled), `tool_call` (your
    /// tool calls and their results); default all.
    #[serde(default)]
    kinds: Vec<KindName>,
}

/// The kinds a search may name.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum KindName {
    Note,
    Message,
    ChildResult,
    Event,
    ToolCall,
}

impl From<KindName> for MemoryKind {
    fn from(name: KindName) -> Self {
        match name {
            KindName::Note => MemoryKind::Note,
            KindName::Message => MemoryKind::Message,
            KindName::ChildResult => MemoryKind::ChildResult,
            KindName::Event => MemoryKind::Event,
            KindName::ToolCall => MemoryKind::ToolCall,
        }
    }
}

/// What a brain reads of a hit.
fn hit_json(hit: &MemoryHit) -> Value {
    let mut out = match &hit.item {
        Recalled::Note(note) => json!({
            "id": note.id.to_string(),
            "key": note.key,
            "tags": note.tags,
            "updated_at_ms": note.updated_at_ms,
        }),
        Recalled::Message(message) => json!({
            "id": message.id.to_string(),
            "provenance": message.provenance.kind(),
            "created_at_ms": message.created_at_ms,
        }),
        Recalled::ToolCall(call) => json!({
            "id": RecalledToolCall::memory_id(call.cursor),
            "tool": call.tool,
            "is_error": call.is_error,
            "at_ms": call.at_ms,
        }),
    };
    out["kind"] = json!(hit.item.kind().name());
    out["score"] = json!(hit.score);
    out["snippet"] = json!(hit.snippet);
    out
}

impl Tool for MemorySearch {
    const SPEC: Spec = Spec {
        name: "MemorySearch",
        family: ToolFamily::Memory,
        plane: Plane::Memory,
        description: "Searches your memory, full text, best first: your notes, the messages you handled (with your replies), your children's results, inbound events and your tool calls. Each hit has its kind, id, score and a snippet with the matches in **bold**; MemoryGet reads one whole. A note just written is searchable within about a second.",
    };
    type Input = MemorySearchInput;
    type Error = MemoryError;

    async fn run(
        ctx: &Arc<Ctx>,
        caller: Caller,
        input: MemorySearchInput,
    ) -> Result<Value, MemoryError> {
        let limit = input.limit.unwrap_or(DEFAULT_HITS);
        check_search(&input.query, limit)?;
        let limit = (limit as usize).min(MAX_SEARCH_HITS);
        let kinds: Vec<MemoryKind> = input.kinds.into_iter().map(Into::into).collect();
        let ctx = ctx.clone();
        // The engine scores on the CPU: off the async workers.
        let hits = tokio::task::spawn_blocking(move || {
            ctx.memory()
                .search_memory(caller.agent_id, &input.query, &kinds, limit)
        })
        .await
        .map_err(|err| MemoryError::Interrupted(err.to_string()))??;
        let hits: Vec<Value> = hits.iter().map(hit_json).collect();
        Ok(json!({ "hits": hits }))
    }
}

/// What a brain reads of any memory entry, whole.
fn entry_json(item: &Recalled) -> Value {
    let mut out = match item {
        Recalled::Note(note) => note_json(note),
        Recalled::Message(message) => json!({
            "id": message.id.to_string(),
            "provenance": message.provenance.kind(),
            "text": message.body,
            "reply": message.reply,
            "created_at_ms": message.created_at_ms,
        }),
        Recalled::ToolCall(call) => json!({
            "id": RecalledToolCall::memory_id(call.cursor),
            "run_id": call.run_id.to_string(),
            "tool": call.tool,
            "input": call.input,
            "output": call.output,
            "is_error": call.is_error,
            "at_ms": call.at_ms,
        }),
    };
    out["kind"] = json!(item.kind().name());
    out
}

/// `MemoryGet`: one entry of the agent's memory, whole.
#[derive(Debug)]
pub struct MemoryGet;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryGetInput {
    /// An id as MemoryWrite or MemorySearch gave it (a note, a message
    /// or a tool call).
    id: String,
}

impl Tool for MemoryGet {
    const SPEC: Spec = Spec {
        name: "MemoryGet",
        family: ToolFamily::Memory,
        plane: Plane::Memory,
        description: "Returns one entry of your memory whole (a note, a message with your reply, or a tool call with its input and result), by the id MemoryWrite or MemorySearch gave.",
    };
    type Input = MemoryGetInput;
    type Error = MemoryError;

    async fn run(
        ctx: &Arc<Ctx>,
        caller: Caller,
        input: MemoryGetInput,
    ) -> Result<Value, MemoryError> {
        // An id is at most a few dozen bytes; a longer one names nothing.
        let id = holarchy_supervision::bounds::head(&input.id, 64);
        if !is_memory_id(id) {
            return Err(MemoryError::BadId(id.to_owned()));
        }
        match ctx.memory().recall(caller.agent_id, id)? {
            Some(item) => Ok(entry_json(&item)),
            None => Err(MemoryError::NotFound(id.to_owned())),
        }
    }
}
