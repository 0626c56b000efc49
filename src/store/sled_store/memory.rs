//! Agents' notes in trees of their own, outside the batch path. A note,
//! its key's index, its agent's count and its place on the indexing queue
//! change in one sled transaction, counted by the group commit so the next
//! `durable()` covers it. Searches go to the [`MemoryIndex`].

use std::path::Path;

use holarchy_actors::store::memory::MAX_NOTES_PER_TREE;
use holarchy_actors::{
    MemoryHit, MemoryKind, MemoryNote, MemorySize, MemoryStore, NoteDraft, Reads, Recalled,
    RecalledToolCall, StoreError,
};
use holarchy_supervision::{
    AgentId, AgentRecord, EventCursor, EventKind, MessageId, MessageStatus, NoteId,
};
use sled::transaction::{ConflictableTransactionError, TransactionError, TransactionalTree};
use sled::{Transactional, Tree};
use tokio::sync::watch;

use super::{backend, pair_key, SledStore, EVENTS, MESSAGES};
use crate::store::agent_trees::{self, AgentTrees};
use crate::store::codec::{decode, decode_agent, encode};
use crate::store::event_log;
use crate::store::memory_index::{
    index_dir, IndexSource, MemoryIndex, MEMORY, MEMORY_META, MEMORY_QUEUE, SEARCH_CPU_BUDGET,
};

/// `memory_keys`: agent id ++ key (UTF-8) -> note id.
const MEMORY_KEYS: &str = "memory_keys";
/// `memory_counts`: agent id -> notes kept (u64 BE) ++ the id of the tree
/// they count against (16 bytes; absent in entries written before trees
/// were counted, which join their tree's count at their next note).
const MEMORY_COUNTS: &str = "memory_counts";
/// `memory_tree_counts`: a tree's root agent id -> notes its agents keep
/// (u64 BE), against [`MAX_NOTES_PER_TREE`].
const MEMORY_TREE_COUNTS: &str = "memory_tree_counts";
/// Lineage steps looked up to find a tree's root: past it, the agent
/// reached stands for the root (a chain that deep is already bounded by
/// the daemon's agent count).
const MAX_LINEAGE_WALK: usize = 1024;

/// The memory trees and the index over them.
#[derive(Debug)]
pub(super) struct Memory {
    /// agent id ++ note id -> MemoryNote
    pub(super) notes: Tree,
    keys: Tree,
    /// agent id ++ note id -> stamp: a note to (re)index or unindex;
    /// agent id alone -> stamp: an agent's whole memory to unindex.
    queue: Tree,
    pub(super) counts: Tree,
    pub(super) tree_counts: Tree,
    index: MemoryIndex,
}

impl Memory {
    /// Opens the trees of `db` and the index beside the store in `dir`,
    /// and wakes the indexer whenever more events become durable.
    pub(super) fn open(
        db: &sled::Db,
        dir: &Path,
        agents: &AgentTrees,
        watermark: watch::Receiver<EventCursor>,
    ) -> Result<Self, StoreError> {
        let tree = |name: &str| db.open_tree(name).map_err(backend);
        let notes = tree(MEMORY)?;
        let queue = tree(MEMORY_QUEUE)?;
        let source = IndexSource {
            notes: notes.clone(),
            queue: queue.clone(),
            meta: tree(MEMORY_META)?,
            agents: agents.clone(),
            messages: tree(MESSAGES)?,
            events: tree(EVENTS)?,
            watermark: watermark.clone(),
        };
        let index = MemoryIndex::open(&index_dir(dir), source)?;
        let waker = index.waker();
        let mut flushed = watermark;
        // Ends when the store's flusher goes, at close.
        tokio::spawn(async move {
            while flushed.changed().await.is_ok() {
                let _ = waker.try_send(());
            }
        });
        Ok(Self {
            index,
            notes,
            keys: tree(MEMORY_KEYS)?,
            queue,
            counts: tree(MEMORY_COUNTS)?,
            tree_counts: tree(MEMORY_TREE_COUNTS)?,
        })
    }

    /// Stops the indexer (at shutdown), off the async workers.
    pub(super) async fn stop(&self) {
        self.index.stop_async().await;
    }
}

impl SledStore {
    /// Entries the memory index holds now, every agent's (what it has
    /// caught up with).
    pub fn memory_indexed(&self) -> u64 {
        self.memory.index.documents()
    }

    /// [`MemoryStore::search_memory`] with a budget of this thread's CPU
    /// of the caller's choosing (that call gives [`SEARCH_CPU_BUDGET`]);
    /// past it the search fails with [`StoreError::OverBudget`].
    pub fn search_memory_within(
        &self,
        agent: AgentId,
        query: &str,
        kinds: &[MemoryKind],
        limit: usize,
        budget: std::time::Duration,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        // Archived (or never created): its memory is gone, whatever the
        // index has not yet dropped.
        if !self.agent(agent)?.is_some_and(|a| a.state.is_live()) {
            return Ok(Vec::new());
        }
        let recall = |id: &str| self.recall(agent, id);
        self.memory
            .index
            .search(agent, query, kinds, limit, &recall, budget)
    }
}

fn count_of(bytes: Option<sled::IVec>) -> u64 {
    bytes
        .and_then(|b| <[u8; 8]>::try_from(b.as_ref()).ok())
        .map(u64::from_be_bytes)
        .unwrap_or(0)
}

/// An agent's entry in `memory_counts`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Kept {
    pub(super) notes: u64,
    /// The root of the tree the notes count against; `None` in an entry
    /// written before trees were counted.
    pub(super) tree: Option<AgentId>,
}

impl Kept {
    pub(super) fn read(bytes: Option<&[u8]>) -> Self {
        let Some(bytes) = bytes else {
            return Self::default();
        };
        let notes = bytes
            .get(..8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map_or(0, u64::from_be_bytes);
        let tree = bytes
            .get(8..24)
            .and_then(|b| <[u8; 16]>::try_from(b).ok())
            .map(AgentId::from_bytes);
        Self { notes, tree }
    }

    fn bytes(self, tree: AgentId) -> [u8; 24] {
        let mut out = [0u8; 24];
        out[..8].copy_from_slice(&self.notes.to_be_bytes());
        out[8..].copy_from_slice(&tree.to_bytes());
        out
    }
}

/// The root of `record`'s tree: its lineage followed up to the agent an
/// operator (or an instance) created, or to the nearest ancestor whose
/// notes already name their tree.
fn tree_of(
    record: &AgentRecord,
    counts: &TransactionalTree,
    public: &TransactionalTree,
    private: &TransactionalTree,
) -> Result<AgentId, ConflictableTransactionError<Abort>> {
    let mut root = record.id;
    let mut parent = record.lineage_parent_agent_id;
    for _ in 0..MAX_LINEAGE_WALK {
        let Some(at) = parent else {
            break;
        };
        if let Some(tree) = Kept::read(counts.get(at.to_bytes())?.as_deref()).tree {
            return Ok(tree);
        }
        root = at;
        parent = match agent_trees::get_in(public, private, &at.to_bytes())? {
            Some((tree, bytes)) => {
                decode_agent(tree, &bytes)
                    .map_err(|e| abort(Abort::Store(e)))?
                    .lineage_parent_agent_id
            }
            None => None,
        };
    }
    Ok(root)
}

/// Why a transaction gave up.
enum Abort {
    Full(AgentId),
    /// The agent is archived (or was never created): no note outlives it.
    Ended,
    Store(StoreError),
}

fn abort(err: Abort) -> ConflictableTransactionError<Abort> {
    ConflictableTransactionError::Abort(err)
}

impl MemoryStore for SledStore {
    fn put_note(&self, draft: &NoteDraft, now_ms: u64) -> Result<MemoryNote, StoreError> {
        let memory = &self.memory;
        let agent = draft.agent_id;
        let key_entry = draft.key.as_ref().map(|k| pair_key(agent, k.as_bytes()));
        self.group.begin_write();
        // The agent's record is read inside the transaction: a note either
        // lands before the archive's commit (and the archive's deletion
        // takes it) or finds the agent ended, however a write in flight
        // races the archive.
        let trees = (
            &memory.notes,
            &memory.keys,
            &memory.queue,
            &memory.counts,
            &memory.tree_counts,
            &self.agents.public,
            &self.agents.private,
        );
        let stored = trees.transaction(
            |(notes, keys, queue, counts, tree_counts, public, private)| {
                let record = match agent_trees::get_in(public, private, &agent.to_bytes())? {
                    Some((tree, bytes)) => {
                        Some(decode_agent(tree, &bytes).map_err(|e| abort(Abort::Store(e)))?)
                    }
                    None => None,
                };
                let Some(record) = record.filter(|r| r.state.is_live()) else {
                    return Err(abort(Abort::Ended));
                };
                let existing = match &key_entry {
                    Some(entry) => match keys.get(entry)? {
                        Some(id) => {
                            let note_key = pair_key(agent, &id);
                            match notes.get(&note_key)? {
                                Some(bytes) => Some(
                                    decode::<MemoryNote>(MEMORY, &bytes)
                                        .map_err(|e| abort(Abort::Store(e)))?,
                                ),
                                None => None,
                            }
                        }
                        None => None,
                    },
                    None => None,
                };
                let note = match existing {
                    Some(old) => MemoryNote {
                        text: draft.text.clone(),
                        tags: draft.tags.clone(),
                        updated_at_ms: now_ms,
                        ..old
                    },
                    None => {
                        let kept = Kept::read(counts.get(agent.to_bytes())?.as_deref());
                        let tree = match kept.tree {
                            Some(tree) => tree,
                            None => tree_of(&record, counts, public, private)?,
                        };
                        // An entry from before trees were counted brings its
                        // notes into its tree's count now.
                        let joining = if kept.tree.is_none() { kept.notes } else { 0 };
                        let in_tree = count_of(tree_counts.get(tree.to_bytes())?) + joining;
                        if in_tree >= MAX_NOTES_PER_TREE {
                            return Err(abort(Abort::Full(tree)));
                        }
                        let kept = Kept {
                            notes: kept.notes + 1,
                            tree: Some(tree),
                        };
                        counts.insert(&agent.to_bytes(), &kept.bytes(tree))?;
                        tree_counts.insert(&tree.to_bytes(), &(in_tree + 1).to_be_bytes())?;
                        MemoryNote {
                            id: NoteId::generate(),
                            agent_id: agent,
                            key: draft.key.clone(),
                            text: draft.text.clone(),
                            tags: draft.tags.clone(),
                            created_at_ms: now_ms,
                            updated_at_ms: now_ms,
                        }
                    }
                };
                let note_key = pair_key(agent, &note.id.to_bytes());
                let value = encode(MEMORY, &note).map_err(|e| abort(Abort::Store(e)))?;
                notes.insert(note_key.as_slice(), value)?;
                if let Some(entry) = &key_entry {
                    keys.insert(entry.as_slice(), &note.id.to_bytes())?;
                }
                // A fresh stamp, so the indexer removes only the entry it
                // indexed, not one queued again since.
                let stamp = queue.generate_id()?;
                queue.insert(note_key, &stamp.to_be_bytes())?;
                Ok(note)
            },
        );
        self.group.end_write();
        let note = stored.map_err(|err| match err {
            TransactionError::Abort(Abort::Full(tree)) => StoreError::Precondition(format!(
                "the agents of tree {tree} (the agent an operator created and every agent spawned from it) keep {MAX_NOTES_PER_TREE} notes, the most they may; replace one by its key"
            )),
            TransactionError::Abort(Abort::Ended) => {
                StoreError::Precondition(format!("agent {agent} has ended: its memory is gone"))
            }
            TransactionError::Abort(Abort::Store(err)) => err,
            TransactionError::Storage(err) => backend(err),
        })?;
        memory.index.wake();
        Ok(note)
    }

    fn note(&self, agent: AgentId, id: NoteId) -> Result<Option<MemoryNote>, StoreError> {
        self.get(&self.memory.notes, MEMORY, &pair_key(agent, &id.to_bytes()))
    }

    fn notes(
        &self,
        agent: AgentId,
        after: Option<NoteId>,
        limit: usize,
    ) -> Result<Vec<MemoryNote>, StoreError> {
        let start = match after {
            Some(id) if id.as_u128() == u128::MAX => return Ok(Vec::new()),
            Some(id) => pair_key(agent, &(id.as_u128() + 1).to_be_bytes()),
            None => agent.to_bytes().to_vec(),
        };
        let end = pair_key(agent, &[0xff; 17]);
        self.memory
            .notes
            .range(start..end)
            .take(limit)
            .map(|entry| decode(MEMORY, &entry.map_err(backend)?.1))
            .collect()
    }

    fn note_count(&self, agent: AgentId) -> Result<u64, StoreError> {
        let entry = self.memory.counts.get(agent.to_bytes()).map_err(backend)?;
        Ok(Kept::read(entry.as_deref()).notes)
    }

    fn recall(&self, agent: AgentId, id: &str) -> Result<Option<Recalled>, StoreError> {
        if let Ok(note) = id.parse::<NoteId>() {
            return Ok(self.note(agent, note)?.map(Recalled::Note));
        }
        if let Ok(message) = id.parse::<MessageId>() {
            // Only handled messages are memory: a queued one is still work.
            return Ok(self
                .message(agent, message)?
                .filter(|m| matches!(m.status, MessageStatus::Handled { .. }))
                .map(Recalled::Message));
        }
        let Some(cursor) = RecalledToolCall::cursor_of(id) else {
            return Ok(None);
        };
        let Some(event) = event_log::at(&self.events, cursor)? else {
            return Ok(None);
        };
        Ok(match event.kind {
            EventKind::ToolCalled {
                run_id,
                tool,
                input,
                output,
                is_error,
            } if event.agent_id == Some(agent) => Some(Recalled::ToolCall(RecalledToolCall {
                cursor,
                run_id,
                at_ms: event.at_ms,
                tool,
                input,
                output,
                is_error,
            })),
            _ => None,
        })
    }

    fn memory_size(&self, agent: AgentId) -> Result<MemorySize, StoreError> {
        Ok(MemorySize {
            notes: self.note_count(agent)?,
            entries: self.memory.index.entries(agent)?,
        })
    }

    fn search_memory(
        &self,
        agent: AgentId,
        query: &str,
        kinds: &[MemoryKind],
        limit: usize,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        self.search_memory_within(agent, query, kinds, limit, SEARCH_CPU_BUDGET)
    }

    fn delete_memory(&self, agent: AgentId) -> Result<usize, StoreError> {
        let memory = &self.memory;
        // Whether or not it kept notes, its messages and tool calls may be
        // indexed: the agent-wide removal is always queued.
        let mut deleted = 0;
        self.group.begin_write();
        let done = (|| {
            for entry in memory.notes.scan_prefix(agent.to_bytes()) {
                let (key, value) = entry.map_err(backend)?;
                let note: MemoryNote = decode(MEMORY, &value)?;
                if let Some(k) = &note.key {
                    memory
                        .keys
                        .remove(pair_key(agent, k.as_bytes()))
                        .map_err(backend)?;
                }
                memory.notes.remove(&key).map_err(backend)?;
                memory.queue.remove(&key).map_err(backend)?;
                deleted += 1;
            }
            // Once no note is left to index again: the whole agent leaves
            // the index, however far the indexer had got.
            let stamp = self.db.generate_id().map_err(backend)?;
            memory
                .queue
                .insert(agent.to_bytes(), &stamp.to_be_bytes())
                .map_err(backend)?;
            forget_count(memory, agent)?;
            Ok::<_, StoreError>(())
        })();
        self.group.end_write();
        done?;
        memory.index.wake();
        Ok(deleted)
    }
}

/// Takes the agent's count out, and its notes out of its tree's count, in
/// one transaction: a cleanup repeated after a crash takes them out once.
fn forget_count(memory: &Memory, agent: AgentId) -> Result<(), StoreError> {
    (&memory.counts, &memory.tree_counts)
        .transaction(|(counts, tree_counts)| {
            let Some(entry) = counts.remove(&agent.to_bytes())? else {
                return Ok(());
            };
            let kept = Kept::read(Some(&entry));
            if let Some(tree) = kept.tree {
                let left = count_of(tree_counts.get(tree.to_bytes())?).saturating_sub(kept.notes);
                match left {
                    0 => tree_counts.remove(&tree.to_bytes())?,
                    n => tree_counts.insert(&tree.to_bytes(), &n.to_be_bytes())?,
                };
            }
            Ok(())
        })
        .map_err(|err: TransactionError<()>| match err {
            TransactionError::Abort(()) => StoreError::Backend("memory counts: aborted".into()),
            TransactionError::Storage(err) => backend(err),
        })
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod ended;
