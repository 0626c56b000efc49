//! The full-text index of agents' notes: one tantivy index for the whole
//! daemon, each document a note with its agent as a filter term.
//!
//! The index is derived data. Notes are durable in sled first; each write
//! queues the note in the `memory_queue` tree in the same transaction, and
//! the indexer thread here drains that queue off every turn's path: it
//! re-reads each queued note from sled (present: indexed anew; gone:
//! removed), commits, and only then takes the entries off the queue, so a
//! crash repeats work and never loses it. An index that is missing,
//! unreadable or of another schema is recreated empty at open, and a
//! durable rebuild cursor walks every note into it; searches answer
//! meanwhile from what is indexed.
//!
//! A search reads back each hit's note from sled, so a hit always shows
//! the note as it is now, and a note deleted but not yet unindexed is
//! never returned.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use holarchy_actors::{MemoryHit, MemoryNote, StoreError};
use holarchy_supervision::{AgentId, NoteId};
use sled::Tree;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query, QueryParser, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED, STRING, TEXT,
};
use tantivy::snippet::SnippetGenerator;
use tantivy::{doc, Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};
use tracing::{info, warn};

use super::codec::decode;

/// Tree names, shared with the sled side.
pub const MEMORY: &str = "memory";
pub const MEMORY_QUEUE: &str = "memory_queue";
pub const MEMORY_META: &str = "memory_meta";
/// Key in `memory_meta` of the rebuild cursor: the last note key indexed
/// by a rebuild in progress (empty: none yet). Absent when no rebuild runs.
const REBUILD: &[u8] = b"rebuild";

/// Queue entries or notes indexed per commit.
const CHUNK: usize = 1024;
/// How long the indexer sleeps without a wake-up before it looks again.
const IDLE: Duration = Duration::from_secs(5);
/// The writer's memory budget: tantivy's least for one thread.
const WRITER_BUDGET: usize = 15_000_000;
/// Characters in a hit's snippet, at most.
const SNIPPET_CHARS: usize = 240;

fn failed(err: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("memory index: {err}"))
}

fn backend(err: sled::Error) -> StoreError {
    StoreError::Backend(err.to_string())
}

#[derive(Debug, Clone, Copy)]
struct Fields {
    id: Field,
    agent: Field,
    key: Field,
    text: Field,
    tags: Field,
}

fn schema() -> (Schema, Fields) {
    // English stemming: "deploys" finds "deploy"; positions for phrases.
    let stemmed = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("en_stem")
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let mut builder = Schema::builder();
    let fields = Fields {
        // Raw tokens: exact terms to filter and delete by.
        id: builder.add_text_field("id", STRING | STORED),
        agent: builder.add_text_field("agent", STRING),
        // Texts are not stored: a hit is read back from sled.
        key: builder.add_text_field("key", stemmed.clone()),
        text: builder.add_text_field("text", stemmed),
        tags: builder.add_text_field("tags", TEXT),
    };
    (builder.build(), fields)
}

/// The daemon's memory index: searches here, writes on the indexer thread.
pub struct MemoryIndex {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    /// Wakes the indexer; dropping it stops the indexer.
    wake: Mutex<Option<mpsc::SyncSender<()>>>,
    indexer: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for MemoryIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryIndex").finish_non_exhaustive()
    }
}

/// The sled trees the indexer reads.
#[derive(Debug, Clone)]
pub struct IndexSource {
    pub notes: Tree,
    pub queue: Tree,
    pub meta: Tree,
}

impl MemoryIndex {
    /// Opens the index in `dir`, recreating it (and scheduling a rebuild
    /// from `source`) when it is missing or unreadable, and starts the
    /// indexer.
    pub fn open(dir: &Path, source: IndexSource) -> Result<Self, StoreError> {
        let (schema, fields) = schema();
        let index = match open_existing(dir, &schema) {
            Ok(index) => index,
            Err(reason) => {
                info!(dir = %dir.display(), %reason, "memory index rebuilt from the store");
                recreate(dir, &schema, &source.meta)?
            }
        };
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(failed)?;
        let writer: IndexWriter = index
            .writer_with_num_threads(1, WRITER_BUDGET)
            .map_err(failed)?;
        let (wake, woken) = mpsc::sync_channel(1);
        let indexer = Indexer {
            writer,
            reader: Clone::clone(&reader),
            fields,
            source,
        };
        let thread = std::thread::Builder::new()
            .name("memory-indexer".into())
            .spawn(move || indexer.run(woken))
            .map_err(failed)?;
        Ok(Self {
            index,
            reader,
            fields,
            wake: Mutex::new(Some(wake)),
            indexer: Mutex::new(Some(thread)),
        })
    }

    /// Tells the indexer there is work; never blocks.
    pub fn wake(&self) {
        let wake = self.wake.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(wake) = wake.as_ref() {
            // Full: a wake-up is already pending, which is enough.
            let _ = wake.try_send(());
        }
    }

    /// Stops the indexer after its current chunk; what is still queued is
    /// indexed at the next start.
    pub fn stop(&self) {
        drop(
            self.wake
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let thread = self
            .indexer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            if thread.join().is_err() {
                warn!("the memory indexer panicked");
            }
        }
    }

    /// The agent's best hits for `query`, read back through `note`.
    pub fn search(
        &self,
        agent: AgentId,
        query: &str,
        limit: usize,
        note: impl Fn(NoteId) -> Result<Option<MemoryNote>, StoreError>,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        let fields = self.fields;
        let parser =
            QueryParser::for_index(&self.index, vec![fields.text, fields.key, fields.tags]);
        // Lenient: an agent's query is text, not syntax to get right.
        let (matched, _) = parser.parse_query_lenient(query);
        let owner = TermQuery::new(
            Term::from_field_text(fields.agent, &agent.to_string()),
            IndexRecordOption::Basic,
        );
        let query = BooleanQuery::new(vec![
            (Occur::Must, Box::new(owner) as Box<dyn Query>),
            (Occur::Must, matched.box_clone()),
        ]);
        let searcher = self.reader.searcher();
        let top = searcher
            .search(&query, &TopDocs::with_limit(limit))
            .map_err(failed)?;
        let mut snippets =
            SnippetGenerator::create(&searcher, &*matched, fields.text).map_err(failed)?;
        snippets.set_max_num_chars(SNIPPET_CHARS);
        let mut hits = Vec::with_capacity(top.len());
        for (score, address) in top {
            let doc: TantivyDocument = searcher.doc(address).map_err(failed)?;
            let Some(id) = doc
                .get_first(fields.id)
                .and_then(|v| v.as_str())
                .and_then(|id| id.parse::<NoteId>().ok())
            else {
                continue;
            };
            // Deleted since it was indexed: not the agent's any more.
            let Some(note) = note(id)? else { continue };
            let snippet = highlighted(&snippets, &note.text);
            hits.push(MemoryHit {
                note,
                score,
                snippet,
            });
        }
        Ok(hits)
    }
}

impl Drop for MemoryIndex {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The passage of `text` around the matches, each wrapped in `**`.
fn highlighted(snippets: &SnippetGenerator, text: &str) -> String {
    let snippet = snippets.snippet(text);
    let fragment = snippet.fragment();
    let mut out = String::with_capacity(fragment.len() + 16);
    let mut at = 0;
    for range in snippet.highlighted() {
        let (Some(before), Some(word)) =
            (fragment.get(at..range.start), fragment.get(range.clone()))
        else {
            break;
        };
        out.push_str(before);
        out.push_str("**");
        out.push_str(word);
        out.push_str("**");
        at = range.end;
    }
    out.push_str(fragment.get(at..).unwrap_or_default());
    out
}

fn open_existing(dir: &Path, schema: &Schema) -> Result<Index, String> {
    let index = Index::open_in_dir(dir).map_err(|err| err.to_string())?;
    if &index.schema() != schema {
        return Err("the index has another schema".into());
    }
    // Opening reads only the meta file: load every segment too, so a
    // damaged one is found now rather than by a search.
    index.load_metas().map_err(|err| err.to_string())?;
    index
        .searchable_segments()
        .map_err(|err| err.to_string())?
        .iter()
        .try_for_each(|segment| {
            tantivy::SegmentReader::open(segment)
                .map(drop)
                .map_err(|err| err.to_string())
        })?;
    Ok(index)
}

/// An empty index in `dir` and a rebuild cursor at the start, set durably
/// first: a crash before the index exists rebuilds again.
fn recreate(dir: &Path, schema: &Schema, meta: &Tree) -> Result<Index, StoreError> {
    meta.insert(REBUILD, &[] as &[u8]).map_err(backend)?;
    meta.flush().map_err(backend)?;
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(failed)?;
    }
    std::fs::create_dir_all(dir).map_err(failed)?;
    Index::create_in_dir(dir, schema.clone()).map_err(failed)
}

/// Where the index of a store in `store_dir` lives.
pub fn index_dir(store_dir: &Path) -> PathBuf {
    store_dir.join("memory_index")
}

/// The indexer thread's state.
struct Indexer {
    writer: IndexWriter,
    reader: IndexReader,
    fields: Fields,
    source: IndexSource,
}

impl Indexer {
    fn run(mut self, woken: mpsc::Receiver<()>) {
        loop {
            let worked = match self.step() {
                Ok(worked) => worked,
                Err(err) => {
                    warn!(error = %err, "memory indexing failed; retrying");
                    false
                }
            };
            if worked {
                continue;
            }
            match woken.recv_timeout(IDLE) {
                Ok(()) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        if let Err(err) = self.writer.wait_merging_threads() {
            warn!(error = %err, "memory index merges did not finish");
        }
    }

    /// One chunk of the rebuild, else one chunk of the queue; whether
    /// there was anything to do.
    fn step(&mut self) -> Result<bool, StoreError> {
        if let Some(cursor) = self.source.meta.get(REBUILD).map_err(backend)? {
            self.rebuild_chunk(&cursor)?;
            return Ok(true);
        }
        self.queue_chunk()
    }

    fn rebuild_chunk(&mut self, cursor: &[u8]) -> Result<(), StoreError> {
        let mut last = None;
        let range = (
            std::ops::Bound::Excluded(cursor.to_vec()),
            std::ops::Bound::Unbounded,
        );
        for entry in self.source.notes.range(range).take(CHUNK) {
            let (key, value) = entry.map_err(backend)?;
            let note: MemoryNote = decode(MEMORY, &value)?;
            self.upsert(&note)?;
            last = Some(key);
        }
        self.commit()?;
        match last {
            Some(key) => self.source.meta.insert(REBUILD, key).map_err(backend)?,
            None => {
                info!("memory index rebuild finished");
                self.source.meta.remove(REBUILD).map_err(backend)?
            }
        };
        Ok(())
    }

    fn queue_chunk(&mut self) -> Result<bool, StoreError> {
        let mut taken = Vec::new();
        for entry in self.source.queue.iter().take(CHUNK) {
            let (key, stamp) = entry.map_err(backend)?;
            match key.len() {
                // An agent's whole memory went.
                16 => {
                    let agent = AgentId::from_bytes(key_bytes(&key)?);
                    self.writer
                        .delete_term(Term::from_field_text(self.fields.agent, &agent.to_string()));
                }
                32 => {
                    let id = NoteId::from_bytes(key_bytes(&key[16..])?);
                    self.delete(id);
                    if let Some(value) = self.source.notes.get(&key).map_err(backend)? {
                        let note: MemoryNote = decode(MEMORY, &value)?;
                        self.upsert(&note)?;
                    }
                }
                _ => {}
            }
            taken.push((key, stamp));
        }
        if taken.is_empty() {
            return Ok(false);
        }
        self.commit()?;
        for (key, stamp) in taken {
            // Queued again meanwhile: left for the next chunk.
            let _ = self
                .source
                .queue
                .compare_and_swap(key, Some(stamp), None::<&[u8]>)
                .map_err(backend)?;
        }
        Ok(true)
    }

    fn delete(&mut self, id: NoteId) {
        self.writer
            .delete_term(Term::from_field_text(self.fields.id, &id.to_string()));
    }

    fn upsert(&mut self, note: &MemoryNote) -> Result<(), StoreError> {
        self.delete(note.id);
        let fields = self.fields;
        let mut document = doc!(
            fields.id => note.id.to_string(),
            fields.agent => note.agent_id.to_string(),
            fields.text => note.text.as_str(),
        );
        if let Some(key) = &note.key {
            document.add_text(fields.key, key);
        }
        for tag in &note.tags {
            document.add_text(fields.tags, tag);
        }
        self.writer.add_document(document).map_err(failed)?;
        Ok(())
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        self.writer.commit().map_err(failed)?;
        self.reader.reload().map_err(failed)
    }
}

fn key_bytes(bytes: &[u8]) -> Result<[u8; 16], StoreError> {
    bytes
        .get(..16)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| StoreError::Corrupt {
            tree: MEMORY_QUEUE,
            detail: format!("key of {} bytes", bytes.len()),
        })
}
