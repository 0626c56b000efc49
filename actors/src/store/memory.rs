//! An agent's durable memory: notes it keeps, the messages it handled
//! (with its replies; child results and inbound events among them) and
//! its tool calls, found again by full-text search. Apart from the batch path, like approvals: a note is written
//! (and counted by the group commit) on its own, durable before the search
//! index sees it; the index catches up in the background and is rebuilt
//! from the notes when lost.
//!
//! Each agent's notes are its own: every read names the agent, and a note
//! of another agent is never returned.

use holarchy_supervision::{
    AgentId, EventCursor, MessageId, MessageRecord, NoteId, Provenance, RunId,
};
use serde::{Deserialize, Serialize};

use super::StoreError;

/// Bytes of a note's text, at most.
pub const MAX_NOTE_TEXT: usize = 16 * 1024;
/// Bytes of a note's key, at most.
pub const MAX_NOTE_KEY: usize = 128;
/// Tags on one note, at most.
pub const MAX_NOTE_TAGS: usize = 8;
/// Bytes of one tag, at most.
pub const MAX_NOTE_TAG: usize = 32;
/// Notes one tree of agents keeps, at most: the agent an operator (or an
/// instance) created and every agent spawned from it, public or private,
/// at any depth. 10,000 notes of at most 16 KiB bound what a brain can make
/// its agents keep to 160 MiB of text, however many agents it spawns.
pub const MAX_NOTES_PER_TREE: u64 = 10_000;
/// Bytes of a search query, at most.
pub const MAX_QUERY: usize = 1024;
/// Hits one search returns, at most.
pub const MAX_SEARCH_HITS: usize = 50;

/// One note in an agent's memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryNote {
    pub id: NoteId,
    pub agent_id: AgentId,
    /// A name the agent chose; writing the same key again replaces the note
    /// (its id and creation time stay).
    pub key: Option<String>,
    pub text: String,
    pub tags: Vec<String>,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
}

/// A note as its author hands it over, checked by [`NoteDraft::check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteDraft {
    pub agent_id: AgentId,
    pub key: Option<String>,
    pub text: String,
    pub tags: Vec<String>,
}

/// A note or a query out of its bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryInputError {
    #[error("a note's text must not be empty")]
    EmptyText,
    #[error("a note's text is {0} bytes; at most {MAX_NOTE_TEXT} are kept")]
    TextTooLong(usize),
    #[error("a note's key must be 1 to {MAX_NOTE_KEY} bytes, without control characters")]
    BadKey,
    #[error("a note has {0} tags; at most {MAX_NOTE_TAGS}")]
    TooManyTags(usize),
    #[error("a tag must be 1 to {MAX_NOTE_TAG} bytes, without whitespace or control characters")]
    BadTag,
    #[error("a search query must not be empty")]
    EmptyQuery,
    #[error("a search query is {0} bytes; at most {MAX_QUERY}")]
    QueryTooLong(usize),
    #[error("a search limit must be 1 to {MAX_SEARCH_HITS}, not {0}")]
    BadLimit(u64),
}

impl NoteDraft {
    /// Checks every bound; a draft that passes may be stored.
    pub fn check(&self) -> Result<(), MemoryInputError> {
        if self.text.trim().is_empty() {
            return Err(MemoryInputError::EmptyText);
        }
        if self.text.len() > MAX_NOTE_TEXT {
            return Err(MemoryInputError::TextTooLong(self.text.len()));
        }
        if let Some(key) = &self.key {
            if key.is_empty() || key.len() > MAX_NOTE_KEY || key.chars().any(char::is_control) {
                return Err(MemoryInputError::BadKey);
            }
        }
        if self.tags.len() > MAX_NOTE_TAGS {
            return Err(MemoryInputError::TooManyTags(self.tags.len()));
        }
        let bad_tag = |tag: &String| {
            tag.is_empty()
                || tag.len() > MAX_NOTE_TAG
                || tag.chars().any(|c| c.is_whitespace() || c.is_control())
        };
        if self.tags.iter().any(bad_tag) {
            return Err(MemoryInputError::BadTag);
        }
        Ok(())
    }
}

/// Checks a search's query and limit.
pub fn check_search(query: &str, limit: u64) -> Result<(), MemoryInputError> {
    if query.trim().is_empty() {
        return Err(MemoryInputError::EmptyQuery);
    }
    if query.len() > MAX_QUERY {
        return Err(MemoryInputError::QueryTooLong(query.len()));
    }
    if limit == 0 || limit > MAX_SEARCH_HITS as u64 {
        return Err(MemoryInputError::BadLimit(limit));
    }
    Ok(())
}

/// What a search can find.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    /// A note the agent wrote (`MemoryWrite`).
    Note,
    /// A message the agent handled, with its reply: from an operator, its
    /// supervisor, a timer, a trigger, itself.
    Message,
    /// A handled message that was a child's result.
    ChildResult,
    /// A handled message that was an inbound event routed to its instance.
    Event,
    /// A tool call of one of its turns, with its input and result.
    ToolCall,
}

impl MemoryKind {
    pub const ALL: [MemoryKind; 5] = [
        MemoryKind::Note,
        MemoryKind::Message,
        MemoryKind::ChildResult,
        MemoryKind::Event,
        MemoryKind::ToolCall,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            MemoryKind::Note => "note",
            MemoryKind::Message => "message",
            MemoryKind::ChildResult => "child_result",
            MemoryKind::Event => "event",
            MemoryKind::ToolCall => "tool_call",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The kind a handled message is searched as, by why it was queued.
    pub fn of_message(provenance: &Provenance) -> Self {
        match provenance {
            Provenance::ChildResult { .. } => MemoryKind::ChildResult,
            Provenance::Event { .. } => MemoryKind::Event,
            _ => MemoryKind::Message,
        }
    }
}

/// A tool call read back from the event log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecalledToolCall {
    /// The `tool_called` event's cursor: the call's id in memory.
    pub cursor: EventCursor,
    pub run_id: RunId,
    pub at_ms: u64,
    pub tool: String,
    /// JSON text, as recorded (secrets redacted).
    pub input: String,
    pub output: String,
    pub is_error: bool,
}

impl RecalledToolCall {
    /// The id a tool call goes by in memory: `tool_` and its cursor.
    pub fn memory_id(cursor: EventCursor) -> String {
        format!("tool_{cursor}")
    }

    /// The cursor of a tool call's memory id.
    pub fn cursor_of(id: &str) -> Option<EventCursor> {
        id.strip_prefix("tool_")?.parse().ok()
    }
}

/// Whether `id` has the form of a memory entry's id: a note's, a
/// message's, or `tool_` and a cursor.
pub fn is_memory_id(id: &str) -> bool {
    id.parse::<NoteId>().is_ok()
        || id.parse::<MessageId>().is_ok()
        || RecalledToolCall::cursor_of(id).is_some()
}

/// What a hit found, read back from the store as it is now.
#[derive(Debug, Clone, PartialEq)]
pub enum Recalled {
    Note(MemoryNote),
    Message(MessageRecord),
    ToolCall(RecalledToolCall),
}

impl Recalled {
    pub fn kind(&self) -> MemoryKind {
        match self {
            Recalled::Note(_) => MemoryKind::Note,
            Recalled::Message(message) => MemoryKind::of_message(&message.provenance),
            Recalled::ToolCall(_) => MemoryKind::ToolCall,
        }
    }

    /// The searched text: a note's text, a message and its reply, or a
    /// tool's name, input and output.
    pub fn text(&self) -> String {
        match self {
            Recalled::Note(note) => note.text.clone(),
            Recalled::Message(message) => match &message.reply {
                Some(reply) => format!("{}\n\n{reply}", message.body),
                None => message.body.clone(),
            },
            Recalled::ToolCall(call) => {
                format!("{}\n\n{}\n\n{}", call.tool, call.input, call.output)
            }
        }
    }
}

/// How much an agent's memory holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemorySize {
    /// Notes it keeps.
    pub notes: u64,
    /// Entries of every kind its searches can find now (the index trails
    /// the writes briefly).
    pub entries: u64,
}

/// One search result, best first.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryHit {
    pub item: Recalled,
    /// The engine's relevance score (BM25): higher is better.
    pub score: f32,
    /// A short passage of the text around the matched terms, each match
    /// wrapped in `**`; empty when only the key or a tag matched.
    pub snippet: String,
}

pub trait MemoryStore: Send + Sync {
    /// Stores a checked draft at `now_ms`: a new note, or, when the agent
    /// already has a note with the draft's key, that note replaced.
    /// [`StoreError::Precondition`] when the agents of its tree already keep
    /// [`MAX_NOTES_PER_TREE`] notes.
    fn put_note(&self, draft: &NoteDraft, now_ms: u64) -> Result<MemoryNote, StoreError>;
    /// One of the agent's notes; `None` if it has no such note.
    fn note(&self, agent: AgentId, id: NoteId) -> Result<Option<MemoryNote>, StoreError>;
    /// One page of the agent's notes after `after`, oldest first.
    fn notes(
        &self,
        agent: AgentId,
        after: Option<NoteId>,
        limit: usize,
    ) -> Result<Vec<MemoryNote>, StoreError>;
    /// How many notes the agent keeps.
    fn note_count(&self, agent: AgentId) -> Result<u64, StoreError>;
    /// One entry of the agent's memory by the id a write or a search gave
    /// (a note, a handled message, a tool call); `None` if the agent has
    /// no such entry.
    fn recall(&self, agent: AgentId, id: &str) -> Result<Option<Recalled>, StoreError>;
    /// How much the agent's memory holds.
    fn memory_size(&self, agent: AgentId) -> Result<MemorySize, StoreError>;
    /// The agent's memory entries (of `kinds`; empty: all)
    /// best matching a checked `query`, at most `limit`, from what the
    /// index holds so far (it trails the writes briefly). An agent that is
    /// not live has no memory: nothing is found.
    fn search_memory(
        &self,
        agent: AgentId,
        query: &str,
        kinds: &[MemoryKind],
        limit: usize,
    ) -> Result<Vec<MemoryHit>, StoreError>;
    /// Deletes every note of the agent and queues the removal of all its
    /// memory (every kind) from the index; idempotent, so a cleanup may run it again after a crash.
    /// Returns how many notes were deleted.
    fn delete_memory(&self, agent: AgentId) -> Result<usize, StoreError>;
}
