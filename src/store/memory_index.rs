//! The full-text index of agents' memory: one tantivy index for the whole
//! daemon, each document a note, a handled message or a tool call, with
//! its agent and kind as filter terms.
//!
//! The index is derived data, written by the [`indexer`] thread off every
//! turn's path and rebuilt from the store when lost. A search reads back
//! each hit from sled, so a hit always shows the record as it is now, and
//! one deleted but not yet unindexed is never returned.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use holarchy_actors::store::memory::{MemoryKind, Recalled};
use holarchy_actors::{MemoryHit, StoreError};
use holarchy_supervision::AgentId;
use tantivy::collector::Count;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED, STRING, TEXT,
};
use tantivy::snippet::SnippetGenerator;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};
use tracing::{info, warn};

pub use indexer::IndexSource;

mod budgeted;
mod indexer;
mod query;

/// The query syntax, shared with the PostgreSQL store's search.
pub(crate) use query::{clauses, Clause};
pub use query::{MAX_PHRASE_WORDS, MAX_QUERY_WORDS};

/// Tree names, shared with the sled side.
pub const MEMORY: &str = "memory";
pub const MEMORY_QUEUE: &str = "memory_queue";
pub const MEMORY_META: &str = "memory_meta";

/// The writer's memory budget: tantivy's least for one thread.
const WRITER_BUDGET: usize = 15_000_000;
/// CPU one search may take on its thread before it is stopped: a search
/// of bounded words takes well under a millisecond per thousand entries.
pub const SEARCH_CPU_BUDGET: Duration = Duration::from_millis(250);
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
    /// The entry's id as text (`note_...`, `msg_...`, `tool_<cursor>`).
    id: Field,
    agent: Field,
    kind: Field,
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
        kind: builder.add_text_field("kind", STRING),
        // Texts are not stored: a hit is read back from sled.
        key: builder.add_text_field("key", stemmed.clone()),
        text: builder.add_text_field("text", stemmed),
        tags: builder.add_text_field("tags", TEXT),
    };
    (builder.build(), fields)
}

/// The daemon's memory index: searches here, writes on the indexer thread.
pub struct MemoryIndex {
    reader: IndexReader,
    fields: Fields,
    wake: mpsc::SyncSender<()>,
    stopping: Arc<AtomicBool>,
    indexer: Mutex<Option<JoinHandle<()>>>,
    /// The searched fields (text, key, tags) with their analyzers, looked
    /// up once: each search clones them (an analyzer is `&mut` to use).
    searched: Vec<query::Searched>,
}

impl std::fmt::Debug for MemoryIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryIndex").finish_non_exhaustive()
    }
}

impl MemoryIndex {
    /// Opens the index in `dir`, recreating it (and scheduling a rebuild
    /// from `source`) when it is missing or unreadable, and starts the
    /// indexer.
    pub fn open(dir: &Path, source: IndexSource) -> Result<Self, StoreError> {
        let (schema, fields) = schema();
        let existing = match source.format_current()? {
            true => open_existing(dir, &schema),
            false if dir.exists() => Err(Unusable::EarlierFormat),
            false => Err(Unusable::Missing),
        };
        let index = match existing {
            Ok(index) => index,
            Err(reason) => {
                info!(dir = %dir.display(), %reason, "memory index rebuilt from the store");
                source.schedule_rebuild()?;
                let index = recreate(dir, &schema)?;
                source.mark_format()?;
                index
            }
        };
        source.start_following()?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(failed)?;
        let writer: IndexWriter = index
            .writer_with_num_threads(1, WRITER_BUDGET)
            .map_err(failed)?;
        let (wake, woken) = mpsc::sync_channel(1);
        let stopping = Arc::new(AtomicBool::new(false));
        let indexer = indexer::Indexer::new(writer, reader.clone(), fields, source);
        let stop = stopping.clone();
        let thread = std::thread::Builder::new()
            .name("memory-indexer".into())
            .spawn(move || indexer.run(woken, &stop))
            .map_err(failed)?;
        let searched = [fields.text, fields.key, fields.tags]
            .into_iter()
            .map(|field| {
                Ok(query::Searched {
                    field,
                    analyzer: index.tokenizer_for_field(field).map_err(failed)?,
                })
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(Self {
            searched,
            reader,
            fields,
            wake,
            stopping,
            indexer: Mutex::new(Some(thread)),
        })
    }

    /// Tells the indexer there is work; never blocks.
    pub fn wake(&self) {
        // Full: a wake-up is already pending, which is enough.
        let _ = self.wake.try_send(());
    }

    /// A handle that wakes the indexer, for whoever sees new work.
    pub fn waker(&self) -> mpsc::SyncSender<()> {
        self.wake.clone()
    }

    /// Stops the indexer after its current chunk; what is still to index
    /// is indexed at the next start.
    pub fn stop(&self) {
        if let Some(thread) = self.stopping_thread() {
            joined(thread);
        }
    }

    /// Like [`MemoryIndex::stop`], waiting for the thread off the async
    /// workers: its last chunk may take a commit and a merge.
    pub async fn stop_async(&self) {
        if let Some(thread) = self.stopping_thread() {
            let _ = tokio::task::spawn_blocking(move || joined(thread)).await;
        }
    }

    /// Asks the indexer to stop; its thread, the first time.
    fn stopping_thread(&self) -> Option<JoinHandle<()>> {
        self.stopping.store(true, Ordering::SeqCst);
        self.wake();
        self.indexer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Entries in the index, every agent's, not counting deleted ones.
    pub fn documents(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// The agent's entries in the index. Most agents have none, which
    /// the term dictionaries tell at once; only an agent with entries has
    /// them counted (deleted ones left out).
    pub fn entries(&self, agent: AgentId) -> Result<u64, StoreError> {
        let term = Term::from_field_text(self.fields.agent, &agent.to_string());
        let searcher = self.reader.searcher();
        if searcher.doc_freq(&term).map_err(failed)? == 0 {
            return Ok(0);
        }
        let query = TermQuery::new(term, IndexRecordOption::Basic);
        let count = searcher.search(&query, &Count).map_err(failed)?;
        Ok(count as u64)
    }

    /// The agent's best hits for `query` among `kinds` (empty: all), each
    /// read back by its id through `recall` (`None`: gone, left out). The
    /// query is read by [`query::build`], never tantivy's parser, and the
    /// search stops past `budget` of this thread's CPU (the store gives
    /// [`SEARCH_CPU_BUDGET`]).
    pub(crate) fn search(
        &self,
        agent: AgentId,
        query: &str,
        kinds: &[MemoryKind],
        limit: usize,
        recall: &dyn Fn(&str) -> Result<Option<Recalled>, StoreError>,
        budget: Duration,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        let fields = self.fields;
        let mut searched = self.searched.clone();
        let matched = query::build(query, &mut searched);
        let term = |field, text: &str| -> Box<dyn Query> {
            Box::new(TermQuery::new(
                Term::from_field_text(field, text),
                IndexRecordOption::Basic,
            ))
        };
        let mut clauses = vec![
            (Occur::Must, term(fields.agent, &agent.to_string())),
            (Occur::Must, matched.box_clone()),
        ];
        // A caller may name a kind many times (a client's repeated field,
        // a brain's list): one clause each, at most five.
        let mut names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        if !names.is_empty() {
            let any_kind = names
                .into_iter()
                .map(|name| (Occur::Should, term(fields.kind, name)))
                .collect();
            clauses.push((Occur::Must, Box::new(BooleanQuery::new(any_kind))));
        }
        let searcher = self.reader.searcher();
        let top = budgeted::top_docs(&searcher, &BooleanQuery::new(clauses), limit, budget)?;
        let mut snippets =
            SnippetGenerator::create(&searcher, &*matched, fields.text).map_err(failed)?;
        snippets.set_max_num_chars(SNIPPET_CHARS);
        let mut hits = Vec::with_capacity(top.len());
        for (score, address) in top {
            let doc: TantivyDocument = searcher.doc(address).map_err(failed)?;
            let Some(id) = doc.get_first(fields.id).and_then(|v| v.as_str()) else {
                continue;
            };
            // Deleted since it was indexed: not the agent's any more.
            let Some(item) = recall(id)? else {
                continue;
            };
            let snippet = highlighted(&snippets, &item.text());
            hits.push(MemoryHit {
                item,
                score,
                snippet,
            });
        }
        Ok(hits)
    }
}

fn joined(thread: JoinHandle<()>) {
    if thread.join().is_err() {
        warn!("the memory indexer panicked");
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

/// Why the index on disk is not used as it is: it is rebuilt from the
/// store instead.
#[derive(Debug, thiserror::Error)]
enum Unusable {
    #[error("the index holds an earlier format")]
    EarlierFormat,
    #[error("there was no index yet")]
    Missing,
    #[error("the index has another schema")]
    OtherSchema,
    /// Its meta file or a segment could not be opened.
    #[error(transparent)]
    Unreadable(#[from] tantivy::TantivyError),
}

fn open_existing(dir: &Path, schema: &Schema) -> Result<Index, Unusable> {
    let index = Index::open_in_dir(dir)?;
    if &index.schema() != schema {
        return Err(Unusable::OtherSchema);
    }
    // Opening reads only the meta file: open every segment too, so a
    // damaged one is found now rather than by a search.
    index
        .searchable_segments()?
        .iter()
        .try_for_each(|segment| tantivy::SegmentReader::open(segment).map(drop))?;
    Ok(index)
}

/// An empty index in `dir`. The rebuild is scheduled durably before, so
/// a crash before the index exists rebuilds again.
fn recreate(dir: &Path, schema: &Schema) -> Result<Index, StoreError> {
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
