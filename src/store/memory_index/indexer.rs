//! The indexer thread: the only writer of the memory index. It brings the
//! index up to the store from three durable sources, each with its place
//! kept in sled so a crash repeats work and never loses it:
//!
//! - a **rebuild**, scheduled when the index was recreated: every note
//!   (cursor `rebuild` in `memory_meta`), then the whole event log again
//!   (the `events` cursor set back to its start);
//! - the **queue** (`memory_queue`) that each note write and each agent's
//!   memory deletion adds to in its own transaction: each entry is re-read
//!   from the store (present: indexed anew; gone: removed), the index
//!   committed, and only then the entry taken off, if not queued again;
//! - the **event log**, from cursor `events` up to the durable watermark:
//!   a `run_finished` event indexes its message, once handled, with its
//!   reply, and a `tool_called` event the call, if its agent is still
//!   live.
//!
//! Work is taken in chunks of at most [`CHUNK`] entries or [`CHUNK_TIME`],
//! one index commit per chunk: a commit costs the same for ten entries as
//! for ten thousand, and a backlog is worked off in large ones.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use holarchy_actors::{MemoryKind, MemoryNote, RecalledToolCall};
use holarchy_supervision::{AgentId, EventCursor, EventKind, MessageRecord, MessageStatus, NoteId};
use sled::{IVec, Tree};
use tantivy::{doc, IndexReader, IndexWriter, TantivyDocument, Term};
use tokio::sync::watch;
use tracing::{info, warn};

use super::{backend, failed, Fields, MEMORY, MEMORY_QUEUE};
use crate::store::agent_trees::AgentTrees;
use crate::store::codec::decode;
use crate::store::event_log;
use holarchy_actors::StoreError;

/// Queue entries, notes, messages or events taken per commit.
const CHUNK: usize = 16_384;
/// Work one chunk may take before its commit, so that a note written
/// while a backlog is indexed is still searchable within about a second.
const CHUNK_TIME: Duration = Duration::from_millis(500);
/// How long the indexer sleeps without a wake-up before it looks again.
const IDLE: Duration = Duration::from_secs(5);
/// After a wake-up, how long more work may gather before the indexer
/// starts: one commit for a burst of writes rather than one each.
const GATHER: Duration = Duration::from_millis(100);

/// Keys in `memory_meta`.
const REBUILD: &[u8] = b"rebuild";
/// Where an earlier layout's rebuild of the messages stood; removed.
const REBUILD_MESSAGES: &[u8] = b"rebuild_messages";
const EVENTS: &[u8] = b"events";
const FORMAT: &[u8] = b"format";
/// What the index holds and how; an index of another format is rebuilt.
/// 2: tool calls, and messages by provenance kind.
const INDEX_FORMAT: u32 = 2;

/// What the indexer reads from the store.
#[derive(Debug, Clone)]
pub struct IndexSource {
    pub notes: Tree,
    pub queue: Tree,
    pub meta: Tree,
    pub agents: AgentTrees,
    pub messages: Tree,
    pub events: Tree,
    /// The last durable event.
    pub watermark: watch::Receiver<EventCursor>,
}

impl IndexSource {
    /// Schedules a rebuild of everything, durably: the notes, then the
    /// event log from its start.
    pub fn schedule_rebuild(&self) -> Result<(), StoreError> {
        self.meta.insert(REBUILD, &[] as &[u8]).map_err(backend)?;
        self.meta
            .insert(EVENTS, &0u64.to_be_bytes())
            .map_err(backend)?;
        self.meta.remove(REBUILD_MESSAGES).map_err(backend)?;
        self.meta.remove(FORMAT).map_err(backend)?;
        self.meta.flush().map_err(backend)?;
        Ok(())
    }

    /// Whether the index on disk was written in this build's format.
    pub fn format_current(&self) -> Result<bool, StoreError> {
        let stored = self.meta.get(FORMAT).map_err(backend)?;
        Ok(stored.as_deref() == Some(&INDEX_FORMAT.to_be_bytes()[..]))
    }

    /// Records that the index is in this build's format (once recreated).
    pub fn mark_format(&self) -> Result<(), StoreError> {
        self.meta
            .insert(FORMAT, &INDEX_FORMAT.to_be_bytes())
            .map_err(backend)?;
        self.meta.flush().map_err(backend)?;
        Ok(())
    }

    /// Starts following the event log from now, unless it already is:
    /// what came before is the rebuild's.
    pub fn start_following(&self) -> Result<(), StoreError> {
        let now = *self.watermark.borrow();
        self.meta
            .compare_and_swap(EVENTS, None::<&[u8]>, Some(&now.to_be_bytes()[..]))
            .map_err(backend)?
            .ok();
        Ok(())
    }

    fn live(&self, agent: AgentId) -> Result<bool, StoreError> {
        self.agents.is_live(agent)
    }
}

/// What one step did.
#[derive(Debug, Default, Clone, Copy)]
struct Progress {
    worked: bool,
    /// A chunk was full: more is waiting.
    more: bool,
}

impl Progress {
    fn of(chunk: &Chunk) -> Self {
        Self {
            worked: chunk.taken > 0,
            more: chunk.full(),
        }
    }
}

/// One chunk's allowance of entries and time.
struct Chunk {
    started: Instant,
    taken: usize,
}

impl Chunk {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            taken: 0,
        }
    }

    fn full(&self) -> bool {
        self.taken >= CHUNK || self.started.elapsed() >= CHUNK_TIME
    }

    /// Counts one more entry in, unless the chunk is full.
    fn take(&mut self) -> bool {
        if self.full() {
            return false;
        }
        self.taken += 1;
        true
    }
}

pub(super) struct Indexer {
    writer: IndexWriter,
    reader: IndexReader,
    fields: Fields,
    source: IndexSource,
    /// Documents changed since the last commit.
    dirty: bool,
}

impl Indexer {
    pub(super) fn new(
        writer: IndexWriter,
        reader: IndexReader,
        fields: Fields,
        source: IndexSource,
    ) -> Self {
        Self {
            writer,
            reader,
            fields,
            source,
            dirty: false,
        }
    }

    pub(super) fn run(mut self, woken: mpsc::Receiver<()>, stopping: &AtomicBool) {
        while !stopping.load(Ordering::SeqCst) {
            let progress = self.step().unwrap_or_else(|err| {
                warn!(error = %err, "memory indexing failed; retrying");
                Progress::default()
            });
            if progress.more {
                continue;
            }
            match woken.recv_timeout(IDLE) {
                Ok(()) => std::thread::sleep(GATHER),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        if let Err(err) = self.writer.wait_merging_threads() {
            warn!(error = %err, "memory index merges did not finish");
        }
    }

    /// The rebuild first, then the queue and the event log.
    fn step(&mut self) -> Result<Progress, StoreError> {
        if let Some(cursor) = self.source.meta.get(REBUILD).map_err(backend)? {
            return self.rebuild_notes(&cursor);
        }
        let queued = self.queue_chunk()?;
        let logged = self.events_chunk()?;
        Ok(Progress {
            worked: queued.worked || logged.worked,
            more: queued.more || logged.more,
        })
    }

    fn rebuild_notes(&mut self, cursor: &[u8]) -> Result<Progress, StoreError> {
        let mut last = None;
        let range = (Bound::Excluded(cursor.to_vec()), Bound::Unbounded);
        let mut chunk = Chunk::new();
        for entry in self.source.notes.range(range) {
            if !chunk.take() {
                break;
            }
            let (key, value) = entry.map_err(backend)?;
            if let Some(note) = readable(MEMORY, &key, &value) {
                self.put_note(&note)?;
            }
            last = Some(key);
        }
        self.commit()?;
        self.advance(REBUILD, last)?;
        Ok(Progress {
            worked: true,
            more: true,
        })
    }

    /// Moves a rebuild cursor to `last`, or ends that rebuild.
    fn advance(&self, cursor: &[u8], last: Option<IVec>) -> Result<(), StoreError> {
        match last {
            Some(key) => self.source.meta.insert(cursor, key).map_err(backend)?,
            None => {
                info!(
                    part = %String::from_utf8_lossy(cursor),
                    "memory index rebuild finished"
                );
                self.source.meta.remove(cursor).map_err(backend)?
            }
        };
        Ok(())
    }

    fn queue_chunk(&mut self) -> Result<Progress, StoreError> {
        let mut taken = Vec::new();
        let mut chunk = Chunk::new();
        for entry in self.source.queue.iter() {
            if !chunk.take() {
                break;
            }
            let (key, stamp) = entry.map_err(backend)?;
            match key.len() {
                // An agent's whole memory went.
                16 => {
                    let agent = AgentId::from_bytes(key_bytes(&key)?);
                    self.delete(self.fields.agent, &agent.to_string());
                }
                32 => {
                    let id = NoteId::from_bytes(key_bytes(&key[16..])?);
                    self.delete(self.fields.id, &id.to_string());
                    let value = self.source.notes.get(&key).map_err(backend)?;
                    if let Some(note) = value.and_then(|v| readable(MEMORY, &key, &v)) {
                        self.put_note(&note)?;
                    }
                }
                _ => {}
            }
            taken.push((key, stamp));
        }
        self.commit()?;
        for (key, stamp) in &taken {
            // Queued again meanwhile: left for the next chunk.
            let _ = self
                .source
                .queue
                .compare_and_swap(key, Some(stamp), None::<&[u8]>)
                .map_err(backend)?;
        }
        Ok(Progress::of(&chunk))
    }

    fn events_chunk(&mut self) -> Result<Progress, StoreError> {
        let after = match self.source.meta.get(EVENTS).map_err(backend)? {
            Some(bytes) => u64::from_be_bytes(key_bytes::<8>(&bytes)?),
            None => return Ok(Progress::default()),
        };
        let durable = *self.source.watermark.borrow();
        if after >= durable {
            return Ok(Progress::default());
        }
        let mut last = after;
        let mut chunk = Chunk::new();
        // Asked once per agent per chunk: a turn's events come together.
        let mut live: HashMap<AgentId, bool> = HashMap::new();
        let mut cut_short = false;
        for read in event_log::range(&self.source.events, after, durable) {
            if !chunk.take() {
                cut_short = true;
                break;
            }
            let event = match read {
                Ok(event) => event,
                // sled failing to read is tried again on the next pass.
                Err(err @ StoreError::Backend(_)) => return Err(err),
                // A run that does not decode never will: its events are left
                // out, and `last` moves past them with the next readable
                // event, or to `durable` below.
                Err(err) => {
                    warn!(tree = "events", error = %err, "events left out of the memory index");
                    continue;
                }
            };
            last = event.cursor;
            let Some(agent) = event.agent_id else {
                continue;
            };
            if !matches!(
                event.kind,
                EventKind::RunFinished { .. } | EventKind::ToolCalled { .. }
            ) {
                continue;
            }
            let is_live = match live.get(&agent) {
                Some(known) => *known,
                None => {
                    let known = self.source.live(agent)?;
                    live.insert(agent, known);
                    known
                }
            };
            if !is_live {
                continue;
            }
            match &event.kind {
                EventKind::RunFinished { message_id, .. } => {
                    let key = [agent.to_bytes(), message_id.to_bytes()].concat();
                    let Some(value) = self.source.messages.get(&key).map_err(backend)? else {
                        continue;
                    };
                    if let Some(message) = readable("messages", &key, &value) {
                        self.put_message(&message)?;
                    }
                }
                EventKind::ToolCalled {
                    tool,
                    input,
                    output,
                    ..
                } => self.put_tool_call(event.cursor, agent, tool, input, output)?,
                _ => {}
            }
        }
        // Every event up to `durable` was seen, readable or not: an
        // unreadable run at the end is not read (and warned of) again.
        if !cut_short {
            last = durable;
        }
        self.commit()?;
        self.source
            .meta
            .insert(EVENTS, &last.to_be_bytes())
            .map_err(backend)?;
        Ok(Progress::of(&chunk))
    }

    fn delete(&mut self, field: tantivy::schema::Field, text: &str) {
        self.writer.delete_term(Term::from_field_text(field, text));
        self.dirty = true;
    }

    fn put_note(&mut self, note: &MemoryNote) -> Result<(), StoreError> {
        let id = note.id.to_string();
        self.delete(self.fields.id, &id);
        let fields = self.fields;
        let mut document = doc!(
            fields.id => id,
            fields.agent => note.agent_id.to_string(),
            fields.kind => "note",
            fields.text => note.text.as_str(),
        );
        if let Some(key) = &note.key {
            document.add_text(fields.key, key);
        }
        for tag in &note.tags {
            document.add_text(fields.tags, tag);
        }
        self.add(document)
    }

    /// A handled message and its reply; one not handled is left out.
    fn put_message(&mut self, message: &MessageRecord) -> Result<(), StoreError> {
        if !matches!(message.status, MessageStatus::Handled { .. }) {
            return Ok(());
        }
        let id = message.id.to_string();
        self.delete(self.fields.id, &id);
        let fields = self.fields;
        let mut document = doc!(
            fields.id => id,
            fields.agent => message.agent_id.to_string(),
            fields.kind => MemoryKind::of_message(&message.provenance).name(),
            fields.text => message.body.as_str(),
        );
        if let Some(reply) = &message.reply {
            document.add_text(fields.text, reply);
        }
        self.add(document)
    }

    /// A tool call of one of the agent's turns: its name, input and
    /// output (as recorded, secrets redacted) are its text.
    fn put_tool_call(
        &mut self,
        cursor: EventCursor,
        agent: AgentId,
        tool: &str,
        input: &str,
        output: &str,
    ) -> Result<(), StoreError> {
        let id = RecalledToolCall::memory_id(cursor);
        self.delete(self.fields.id, &id);
        let fields = self.fields;
        let document = doc!(
            fields.id => id,
            fields.agent => agent.to_string(),
            fields.kind => MemoryKind::ToolCall.name(),
            fields.text => tool,
            fields.text => input,
            fields.text => output,
        );
        self.add(document)
    }

    fn add(&mut self, document: TantivyDocument) -> Result<(), StoreError> {
        self.writer.add_document(document).map_err(failed)?;
        self.dirty = true;
        Ok(())
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        if !std::mem::take(&mut self.dirty) {
            return Ok(());
        }
        self.writer.commit().map_err(failed)?;
        self.reader.reload().map_err(failed)
    }
}

fn key_bytes<const N: usize>(bytes: &[u8]) -> Result<[u8; N], StoreError> {
    bytes
        .get(..N)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| StoreError::Corrupt {
            tree: MEMORY_QUEUE,
            detail: format!("key of {} bytes, expected {N}", bytes.len()),
        })
}

/// A record the index can read, or `None` (logged): one unreadable record
/// is left out of the index, never a stop to indexing everyone else's.
fn readable<T: serde::de::DeserializeOwned>(
    tree: &'static str,
    key: &[u8],
    value: &[u8],
) -> Option<T> {
    match decode(tree, value) {
        Ok(record) => Some(record),
        Err(err) => {
            warn!(tree, key = ?key, error = %err, "record left out of the memory index");
            None
        }
    }
}
