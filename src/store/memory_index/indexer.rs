//! The indexer thread: the only writer of the memory index. It brings the
//! index up to the store from three durable sources, each with its place
//! kept in sled so a crash repeats work and never loses it:
//!
//! - a **rebuild** (cursors `rebuild` over the notes and `rebuild_messages`
//!   over the messages in `memory_meta`), scheduled when the index was
//!   recreated: every note, and every handled message of a live agent;
//! - the **queue** (`memory_queue`) that each note write and each agent's
//!   memory deletion adds to in its own transaction: each entry is re-read
//!   from the store (present: indexed anew; gone: removed), the index
//!   committed, and only then the entry taken off, if not queued again;
//! - the **event log**, from cursor `events` up to the durable watermark:
//!   a `run_finished` event indexes its message, once handled, with its
//!   reply, if its agent is still live.
//!
//! Work is taken in chunks of [`CHUNK`], one index commit per chunk.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use holarchy_actors::MemoryNote;
use holarchy_supervision::{
    AgentId, Event, EventCursor, EventKind, MessageRecord, MessageStatus, NoteId,
};
use sled::{IVec, Tree};
use tantivy::{doc, IndexReader, IndexWriter, TantivyDocument, Term};
use tokio::sync::watch;
use tracing::{info, warn};

use super::{backend, failed, Fields, MEMORY, MEMORY_QUEUE};
use crate::store::codec::{decode, decode_agent};
use holarchy_actors::StoreError;

/// Queue entries, notes, messages or events taken per commit.
const CHUNK: usize = 1024;
/// How long the indexer sleeps without a wake-up before it looks again.
const IDLE: Duration = Duration::from_secs(5);
/// After a wake-up, how long more work may gather before the indexer
/// starts: one commit for a burst of writes rather than one each.
const GATHER: Duration = Duration::from_millis(100);

/// Keys in `memory_meta`.
const REBUILD: &[u8] = b"rebuild";
const REBUILD_MESSAGES: &[u8] = b"rebuild_messages";
const EVENTS: &[u8] = b"events";

/// What the indexer reads from the store.
#[derive(Debug, Clone)]
pub struct IndexSource {
    pub notes: Tree,
    pub queue: Tree,
    pub meta: Tree,
    pub agents: Tree,
    pub messages: Tree,
    pub events: Tree,
    /// The last durable event.
    pub watermark: watch::Receiver<EventCursor>,
}

impl IndexSource {
    /// Schedules a rebuild of everything, durably.
    pub fn schedule_rebuild(&self) -> Result<(), StoreError> {
        self.meta.insert(REBUILD, &[] as &[u8]).map_err(backend)?;
        self.meta
            .insert(REBUILD_MESSAGES, &[] as &[u8])
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
        match self.agents.get(agent.to_bytes()).map_err(backend)? {
            Some(bytes) => Ok(decode_agent("agents", &bytes)?.state.is_live()),
            None => Ok(false),
        }
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
    fn of(taken: usize) -> Self {
        Self {
            worked: taken > 0,
            more: taken >= CHUNK,
        }
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
        if let Some(cursor) = self.source.meta.get(REBUILD_MESSAGES).map_err(backend)? {
            return self.rebuild_messages(&cursor);
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
        for entry in self.source.notes.range(range).take(CHUNK) {
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

    fn rebuild_messages(&mut self, cursor: &[u8]) -> Result<Progress, StoreError> {
        let mut last = None;
        // Messages come grouped by agent: ask once per agent.
        let mut agent_live: Option<(AgentId, bool)> = None;
        let range = (Bound::Excluded(cursor.to_vec()), Bound::Unbounded);
        for entry in self.source.messages.range(range).take(CHUNK) {
            let (key, value) = entry.map_err(backend)?;
            let Some(message) = readable::<MessageRecord>("messages", &key, &value) else {
                last = Some(key);
                continue;
            };
            last = Some(key);
            let live = match agent_live {
                Some((agent, live)) if agent == message.agent_id => live,
                _ => {
                    let live = self.source.live(message.agent_id)?;
                    agent_live = Some((message.agent_id, live));
                    live
                }
            };
            if live {
                self.put_message(&message)?;
            }
        }
        self.commit()?;
        self.advance(REBUILD_MESSAGES, last)?;
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
        for entry in self.source.queue.iter().take(CHUNK) {
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
        Ok(Progress::of(taken.len()))
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
        let range = (after + 1).to_be_bytes()..=durable.to_be_bytes();
        let mut last = after;
        let mut taken = 0;
        for entry in self.source.events.range(range).take(CHUNK) {
            let (key, value) = entry.map_err(backend)?;
            last = u64::from_be_bytes(key_bytes::<8>(&key)?);
            taken += 1;
            let Some(event) = readable::<Event>("events", &key, &value) else {
                continue;
            };
            if let (Some(agent), EventKind::RunFinished { message_id, .. }) =
                (event.agent_id, &event.kind)
            {
                let key = [agent.to_bytes(), message_id.to_bytes()].concat();
                let Some(value) = self.source.messages.get(&key).map_err(backend)? else {
                    continue;
                };
                if self.source.live(agent)? {
                    if let Some(message) = readable("messages", &key, &value) {
                        self.put_message(&message)?;
                    }
                }
            }
        }
        self.commit()?;
        self.source
            .meta
            .insert(EVENTS, &last.to_be_bytes())
            .map_err(backend)?;
        Ok(Progress::of(taken))
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
            fields.kind => "message",
            fields.text => message.body.as_str(),
        );
        if let Some(reply) = &message.reply {
            document.add_text(fields.text, reply);
        }
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
