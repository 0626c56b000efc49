//! Agents' memory on PostgreSQL (docs/memory.md, "On PostgreSQL"): notes in
//! tables of their own, outside the batch path, and every kind of entry
//! found by PostgreSQL's full-text search rather than by a search index
//! beside the store.
//!
//! - `memory` holds one row per searchable entry (a note, a handled
//!   message, a tool call): its agent, its kind and its words as a
//!   `tsvector` under a GIN index. Texts stay where they are (the note,
//!   the message, the event log): a hit is read back from them, so it
//!   shows the record as it is now, and its snippet is cut from that.
//! - A note, its counts and its `memory` row change in one transaction, so
//!   a note is searchable as soon as its write answers.
//! - Handled messages and tool calls reach `memory` through the
//!   [`follower`], which reads committed event runs, as the sled store's
//!   indexer does; the committer never waits for it.
//! - A search is built by [`query`] and runs under a `statement_timeout`,
//!   the store's counterpart of the sled store's CPU budget.

use std::borrow::Cow;
use std::time::Duration;

use deadpool_postgres::GenericClient;
use holarchy_actors::store::memory::{MAX_NOTES_PER_TREE, MAX_SEARCH_HITS};
use holarchy_actors::{
    MemoryHit, MemoryKind, MemoryNote, MemorySize, MemoryStore, NoteDraft, Recalled,
    RecalledToolCall, StoreError,
};
use holarchy_supervision::{
    AgentId, AgentRecord, EventCursor, EventKind, MessageId, MessageRecord, MessageStatus, NoteId,
};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::reads::{column, id_bytes};
use super::statements::bigint;
use super::{backend, PgStore};
use crate::store::codec::{decode, decode_agent, decode_event_run, encode};
use crate::store::memory_index::SEARCH_CPU_BUDGET;

mod follower;
mod query;

pub(super) use follower::Following;

/// The tables of this module, created by the schema's first migration.
///
/// Ids are 16 big-endian bytes, as everywhere in this store, so notes list
/// in id (creation) order; an entry of `memory` goes by the id a search
/// hands out (`note_...`, `msg_...`, `tool_<cursor>`), whatever its kind.
pub(super) const TABLES: &str = r#"
CREATE TABLE notes (
    agent_id    bytea NOT NULL,
    id          bytea NOT NULL,
    key         text COLLATE "C",
    value       bytea NOT NULL,
    PRIMARY KEY (agent_id, id)
);
CREATE UNIQUE INDEX notes_key ON notes (agent_id, key) WHERE key IS NOT NULL;

-- The notes an agent keeps, and the root of the tree they count against.
CREATE TABLE note_counts (
    agent_id    bytea PRIMARY KEY,
    tree        bytea NOT NULL,
    notes       bigint NOT NULL
);

-- The notes a tree's agents keep, against MAX_NOTES_PER_TREE.
CREATE TABLE note_trees (
    tree        bytea PRIMARY KEY,
    notes       bigint NOT NULL
);

CREATE TABLE memory (
    agent_id    bytea NOT NULL,
    id          text NOT NULL,
    kind        text NOT NULL,
    words       tsvector NOT NULL,
    PRIMARY KEY (agent_id, id)
);
CREATE INDEX memory_words ON memory USING gin (words);

-- How far the follower has read the event log: one row, locked by each of
-- its chunks and by each deletion of an agent's memory, so the two take
-- turns.
CREATE TABLE memory_follower (
    one         boolean PRIMARY KEY DEFAULT true CHECK (one),
    cursor      bigint NOT NULL
);
INSERT INTO memory_follower (cursor) VALUES (0);
"#;

/// Bytes of one entry's text that are searched: a tsvector holds at most
/// 1 MiB of lexemes, and a text of this size stays well under it whatever
/// its words. A note (16 KiB) and a message (64 KiB) are searched whole;
/// only a huge reply or tool output is cut.
const MAX_SEARCHED_TEXT: usize = 256 * 1024;

/// Lineage steps looked up to find a tree's root, as in the sled store:
/// past it, the agent reached stands for the root.
const MAX_LINEAGE_WALK: usize = 1024;

/// An agent's notes and searchable entries; entries of an agent that is
/// not live are none its searches find.
pub(super) const MEMORY_SIZE: &str =
    "SELECT coalesce((SELECT notes FROM note_counts WHERE agent_id = $1), 0), \
     CASE WHEN EXISTS (SELECT 1 FROM agents WHERE id = $1 AND live) \
     THEN (SELECT count(*) FROM memory WHERE agent_id = $1) ELSE 0 END";

/// The answer of [`MEMORY_SIZE`].
pub(super) fn memory_size_from(rows: &[Row]) -> Result<MemorySize, StoreError> {
    let Some(row) = rows.first() else {
        return Ok(MemorySize::default());
    };
    let count = |i| -> Result<u64, StoreError> {
        Ok(u64::try_from(column::<i64>(row, i, "memory")?).unwrap_or(0))
    };
    Ok(MemorySize {
        notes: count(0)?,
        entries: count(1)?,
    })
}

/// The snippet's shape: a passage of about forty words (the sled store's
/// 240 characters) around the matches, each wrapped in `**`.
const HEADLINE: &str = "StartSel=\"**\", StopSel=\"**\", MaxWords=35, MinWords=15, ShortWord=3";

/// `text` as the search reads it: without NUL (PostgreSQL's text holds
/// none), at most [`MAX_SEARCHED_TEXT`] bytes.
pub(super) fn searchable(text: &str) -> Cow<'_, str> {
    let mut end = text.len().min(MAX_SEARCHED_TEXT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let text = &text[..end];
    match text.contains('\0') {
        true => Cow::Owned(text.replace('\0', " ")),
        false => Cow::Borrowed(text),
    }
}

fn id(bytes: [u8; 16]) -> Vec<u8> {
    bytes.to_vec()
}

/// The rows `sql` answers, its statement prepared once per connection.
async fn rows<C: GenericClient>(
    client: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, tokio_postgres::Error> {
    let statement = client.prepare_cached(sql).await?;
    client.query(&statement, params).await
}

async fn execute<C: GenericClient>(
    client: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, tokio_postgres::Error> {
    let statement = client.prepare_cached(sql).await?;
    client.execute(&statement, params).await
}

/// Why a note was not written.
enum Refused {
    /// The tree (its root) keeps [`MAX_NOTES_PER_TREE`] notes.
    Full(AgentId),
    /// The agent is archived, or was never created: no note outlives it.
    Ended,
}

impl Refused {
    fn error(self, agent: AgentId) -> StoreError {
        match self {
            Refused::Full(tree) => StoreError::Precondition(format!(
                "the agents of tree {tree} (the agent an operator created and every agent spawned from it) keep {MAX_NOTES_PER_TREE} notes, the most they may; replace one by its key"
            )),
            Refused::Ended => {
                StoreError::Precondition(format!("agent {agent} has ended: its memory is gone"))
            }
        }
    }
}

/// The agent's row, locked until the note's transaction ends. An archive
/// (the committer's update of that row) waits for the note to commit, or
/// the note waits for the archive and finds the agent ended: either way a
/// cleanup's deletion, which runs after the archive, finds every note. It
/// also serialises the agent's own writes, so two notes with one new key
/// cannot both be inserted.
const LOCK_LIVE_AGENT: &str = "SELECT value FROM agents WHERE id = $1 AND live FOR NO KEY UPDATE";
const NOTE_BY_KEY: &str = "SELECT value FROM notes WHERE agent_id = $1 AND key = $2";
/// The tree the agent's notes already count against, if it keeps any.
const OWN_TREE: &str = "SELECT tree FROM note_counts WHERE agent_id = $1";
/// One step up a lineage: whether the agent's notes already name their
/// tree, and its record (for its parent).
const TREE_STEP: &str = "SELECT (SELECT tree FROM note_counts WHERE agent_id = $1), \
                                (SELECT value FROM agents WHERE id = $1)";
/// One more note in the tree, unless it is full: no row when it is. One
/// statement, so two writers in one tree cannot both take its last place.
const COUNT_IN_TREE: &str = "INSERT INTO note_trees (tree, notes) VALUES ($1, 1) \
     ON CONFLICT (tree) DO UPDATE SET notes = note_trees.notes + 1 \
     WHERE note_trees.notes < $2";
const COUNT_FOR_AGENT: &str = "INSERT INTO note_counts (agent_id, tree, notes) VALUES ($1, $2, 1) \
     ON CONFLICT (agent_id) DO UPDATE SET notes = note_counts.notes + 1";
const UPSERT_NOTE: &str = "INSERT INTO notes (agent_id, id, key, value) VALUES ($1, $2, $3, $4) \
     ON CONFLICT (agent_id, id) DO UPDATE SET value = excluded.value";
/// A note's words: its text, its key and its tags, analysed as English
/// (lower-cased, stemmed: `deploys` finds `deploy`).
const UPSERT_NOTE_ENTRY: &str = "INSERT INTO memory (agent_id, id, kind, words) \
     VALUES ($1, $2, 'note', to_tsvector('english', $3) || to_tsvector('english', $4) \
     || to_tsvector('english', $5)) \
     ON CONFLICT (agent_id, id) DO UPDATE SET words = excluded.words";

/// Stores a checked draft, in the caller's transaction (see
/// [`MemoryStore::put_note`]); a refusal leaves it to be rolled back.
///
/// Statements that do not depend on each other's answers are pipelined:
/// the tree's count row is locked from its increment to the commit, and
/// every writer of the tree waits for it, so the fewer round trips it is
/// held over, the more notes a tree takes per second.
async fn put_note<C: GenericClient>(
    tx: &C,
    draft: &NoteDraft,
    now_ms: u64,
) -> Result<Result<MemoryNote, Refused>, StoreError> {
    let agent = draft.agent_id;
    let agent_key = id(agent.to_bytes());
    // In this order on the connection: the key is looked up once the
    // agent's lock is held, so it sees the agent's last note committed.
    let by_key = async {
        match &draft.key {
            Some(key) => rows(tx, NOTE_BY_KEY, &[&agent_key, key]).await,
            None => Ok(Vec::new()),
        }
    };
    let (locked, existing, own_tree) = futures::future::try_join3(
        rows(tx, LOCK_LIVE_AGENT, &[&agent_key]),
        by_key,
        rows(tx, OWN_TREE, &[&agent_key]),
    )
    .await
    .map_err(backend)?;
    let Some(row) = locked.first() else {
        return Ok(Err(Refused::Ended));
    };
    let record = decode_agent("agents", column(row, 0, "agents")?)?;
    let existing = existing
        .first()
        .map(|row| decode::<MemoryNote>("notes", column(row, 0, "notes")?))
        .transpose()?;
    let replaced = existing.is_some();
    let note = match existing {
        Some(old) => MemoryNote {
            text: draft.text.clone(),
            tags: draft.tags.clone(),
            updated_at_ms: now_ms,
            ..old
        },
        None => MemoryNote {
            id: NoteId::generate(),
            agent_id: agent,
            key: draft.key.clone(),
            text: draft.text.clone(),
            tags: draft.tags.clone(),
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
        },
    };
    let value = encode("notes", &note)?;
    let (key, tags) = (note.key.clone().unwrap_or_default(), note.tags.join(" "));
    let (note_key, entry_id) = (id(note.id.to_bytes()), note.id.to_string());
    let words = searchable(&note.text);
    let text: &str = &words;
    let (key, tags) = (key.as_str(), tags.as_str());
    let note_params: [&(dyn ToSql + Sync); 4] = [&agent_key, &note_key, &note.key, &value];
    let entry_params: [&(dyn ToSql + Sync); 5] = [&agent_key, &entry_id, &text, &key, &tags];
    let stored = futures::future::try_join(
        execute(tx, UPSERT_NOTE, &note_params),
        execute(tx, UPSERT_NOTE_ENTRY, &entry_params),
    );
    if replaced {
        stored.await.map_err(backend)?;
        return Ok(Ok(note));
    }
    let tree = match own_tree.first() {
        Some(row) => AgentId::from_bytes(id_bytes(row, 0, "note_counts")?),
        None => tree_of(tx, &record).await?,
    };
    let tree_key = id(tree.to_bytes());
    // The counts and the note in one round trip; a full tree's answer
    // (no row counted) rolls them all back.
    let (counted, _, _) = futures::future::try_join3(
        execute(tx, COUNT_IN_TREE, &[&tree_key, &bigint(MAX_NOTES_PER_TREE)]),
        execute(tx, COUNT_FOR_AGENT, &[&agent_key, &tree_key]),
        stored,
    )
    .await
    .map_err(backend)?;
    if counted == 0 {
        return Ok(Err(Refused::Full(tree)));
    }
    Ok(Ok(note))
}

/// The root of `record`'s tree: its lineage followed up to the agent an
/// operator (or an instance) created, or to the nearest agent whose notes
/// already name their tree (the agent itself first).
async fn tree_of<C: GenericClient>(tx: &C, record: &AgentRecord) -> Result<AgentId, StoreError> {
    let mut at = record.id;
    let mut root = record.id;
    for _ in 0..MAX_LINEAGE_WALK {
        let step = rows(tx, TREE_STEP, &[&id(at.to_bytes())])
            .await
            .map_err(backend)?;
        let Some(row) = step.first() else {
            break;
        };
        if column::<Option<&[u8]>>(row, 0, "note_counts")?.is_some() {
            return Ok(AgentId::from_bytes(id_bytes(row, 0, "note_counts")?));
        }
        root = at;
        // An ancestor deleted since still names the tree, as in the sled
        // store: its descendants keep counting against it.
        let Some(value) = column::<Option<&[u8]>>(row, 1, "agents")? else {
            break;
        };
        let parent = match at == record.id {
            true => record.lineage_parent_agent_id,
            false => decode_agent("agents", value)?.lineage_parent_agent_id,
        };
        let Some(parent) = parent else {
            break;
        };
        at = parent;
    }
    Ok(root)
}

/// One entry of the agent's memory by its id (see [`MemoryStore::recall`]).
async fn recall<C: GenericClient>(
    client: &C,
    agent: AgentId,
    entry: &str,
) -> Result<Option<Recalled>, StoreError> {
    let agent_key = id(agent.to_bytes());
    if let Ok(note) = entry.parse::<NoteId>() {
        let found = rows(
            client,
            "SELECT value FROM notes WHERE agent_id = $1 AND id = $2",
            &[&agent_key, &id(note.to_bytes())],
        )
        .await
        .map_err(backend)?;
        return found
            .first()
            .map(|row| Ok(Recalled::Note(decode("notes", column(row, 0, "notes")?)?)))
            .transpose();
    }
    if let Ok(message) = entry.parse::<MessageId>() {
        let found = rows(
            client,
            "SELECT value FROM messages WHERE agent_id = $1 AND id = $2",
            &[&agent_key, &id(message.to_bytes())],
        )
        .await
        .map_err(backend)?;
        let Some(row) = found.first() else {
            return Ok(None);
        };
        let message: MessageRecord = decode("messages", column(row, 0, "messages")?)?;
        // Only handled messages are memory: a queued one is still work.
        return Ok(matches!(message.status, MessageStatus::Handled { .. })
            .then_some(Recalled::Message(message)));
    }
    let Some(cursor) = RecalledToolCall::cursor_of(entry) else {
        return Ok(None);
    };
    Ok(tool_call(client, cursor)
        .await?
        .and_then(|(owner, call)| (owner == agent).then_some(Recalled::ToolCall(call))))
}

/// The tool call whose `tool_called` event is at `cursor`, with its agent.
async fn tool_call<C: GenericClient>(
    client: &C,
    cursor: EventCursor,
) -> Result<Option<(AgentId, RecalledToolCall)>, StoreError> {
    // The run that holds the cursor: the last one starting at or before it.
    let found = rows(
        client,
        "SELECT value FROM events WHERE first <= $1 ORDER BY first DESC LIMIT 1",
        &[&bigint(cursor)],
    )
    .await
    .map_err(backend)?;
    let Some(row) = found.first() else {
        return Ok(None);
    };
    let run = decode_event_run("events", column(row, 0, "events")?)?;
    let Some(event) = run.into_iter().find(|e| e.cursor == cursor) else {
        return Ok(None);
    };
    Ok(match (event.agent_id, event.kind) {
        (
            Some(agent),
            EventKind::ToolCalled {
                run_id,
                tool,
                input,
                output,
                is_error,
            },
        ) => Some((
            agent,
            RecalledToolCall {
                cursor,
                run_id,
                at_ms: event.at_ms,
                tool,
                input,
                output,
                is_error,
            },
        )),
        _ => None,
    })
}

/// The statements of a search, in order. The clauses' texts are analysed
/// first; their queries, joined, find the agent's best entries (none for
/// an agent that is not live); each hit is read back; its snippet is cut
/// from the text read back.
const ANALYSE: &str = "SELECT phraseto_tsquery('english', t)::text \
     FROM unnest($1::text[]) WITH ORDINALITY AS c(t, n) ORDER BY n";
const SEARCH: &str = "SELECT id, ts_rank(words, $3::text::tsquery) AS score FROM memory \
     WHERE agent_id = $1 AND kind = ANY($4::text[]) AND words @@ $2::text::tsquery \
     AND EXISTS (SELECT 1 FROM agents WHERE id = $1 AND live) \
     ORDER BY score DESC, id LIMIT $5";
/// Empty where the text itself has none of the words (a note found by its
/// key or a tag), as the sled store's snippets are.
const SNIPPETS: &str = "SELECT CASE WHEN to_tsvector('english', t) @@ q \
     THEN ts_headline('english', t, q, $3) ELSE '' END \
     FROM unnest($1::text[]) WITH ORDINALITY AS s(t, n), (SELECT $2::text::tsquery AS q) AS w \
     ORDER BY n";

/// A search's failure: past its budget of `timeout_ms`, the server
/// cancelled it.
fn searched(err: tokio_postgres::Error, timeout_ms: u128) -> StoreError {
    if err.code() == Some(&SqlState::QUERY_CANCELED) {
        return StoreError::OverBudget(format!(
            "the memory search was stopped after {timeout_ms} ms: search for fewer or rarer words, or name the kinds to search"
        ));
    }
    backend(err)
}

impl PgStore {
    /// [`MemoryStore::search_memory`] with a budget of the caller's
    /// choosing (that call gives [`SEARCH_CPU_BUDGET`]): each of the
    /// search's statements is cancelled past it (at least 1 ms, as 0 would
    /// turn the bound off), and the search fails with
    /// [`StoreError::OverBudget`].
    pub fn search_memory_within(
        &self,
        agent: AgentId,
        query: &str,
        kinds: &[MemoryKind],
        limit: usize,
        budget: Duration,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        let clauses = query::bounded(query);
        let limit = limit.min(MAX_SEARCH_HITS);
        if clauses.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        // A caller may name a kind many times: each name once.
        let mut names: Vec<String> = match kinds.is_empty() {
            true => MemoryKind::ALL
                .iter()
                .map(|k| k.name().to_owned())
                .collect(),
            false => kinds.iter().map(|k| k.name().to_owned()).collect(),
        };
        names.sort_unstable();
        names.dedup();
        let timeout_ms = budget.as_millis().clamp(1, u128::from(u32::MAX));
        self.call(move |mut client| async move {
            let fail = |err| searched(err, timeout_ms);
            // A read-only transaction, for its statement timeout: never
            // committed, it is rolled back when dropped, without a wait.
            let tx = client.transaction().await.map_err(backend)?;
            let texts: Vec<&str> = clauses.iter().map(|c| c.text.as_str()).collect();
            // One round trip: the timeout is set before the analysis runs.
            let bounded = format!("SET LOCAL statement_timeout = {timeout_ms}");
            let (set, analysed) =
                futures::future::join(tx.batch_execute(&bounded), rows(&tx, ANALYSE, &[&texts]))
                    .await;
            set.map_err(backend)?;
            let analysed = analysed
                .map_err(fail)?
                .iter()
                .map(|row| column::<String>(row, 0, "memory"))
                .collect::<Result<Vec<_>, _>>()?;
            let Some(built) = query::built(&clauses, &analysed) else {
                return Ok(Vec::new());
            };
            let top = rows(
                &tx,
                SEARCH,
                &[
                    &id(agent.to_bytes()),
                    &built.matching,
                    &built.wanted,
                    &names,
                    &bigint(limit as u64),
                ],
            )
            .await
            .map_err(fail)?;
            let mut ranked = Vec::with_capacity(top.len());
            for row in &top {
                ranked.push((
                    column::<String>(row, 0, "memory")?,
                    column::<f32>(row, 1, "memory")?,
                ));
            }
            // Read back together, pipelined on the connection.
            let items = futures::future::join_all(
                ranked.iter().map(|(entry, _)| recall(&tx, agent, entry)),
            )
            .await;
            let mut found = Vec::with_capacity(ranked.len());
            for ((_, score), item) in ranked.into_iter().zip(items) {
                // Deleted since it was found: not the agent's any more.
                if let Some(item) = item? {
                    found.push((item, score));
                }
            }
            let texts: Vec<String> = found
                .iter()
                .map(|(item, _)| searchable(&item.text()).into_owned())
                .collect();
            let snippets = rows(&tx, SNIPPETS, &[&texts, &built.wanted, &HEADLINE])
                .await
                .map_err(fail)?;
            drop(tx);
            found
                .into_iter()
                .zip(&snippets)
                .map(|((item, score), row)| {
                    Ok(MemoryHit {
                        item,
                        score,
                        snippet: column(row, 0, "memory")?,
                    })
                })
                .collect()
        })
    }

    /// About how many entries the search finds, every agent's: the
    /// planner's estimate, kept by autovacuum. A metrics scrape reads it,
    /// and `count(*)` would scan the whole table each time (hundreds of
    /// milliseconds at millions of entries).
    pub fn memory_indexed(&self) -> u64 {
        self.call(|client| async move {
            let row = client
                .query_one(
                    "SELECT greatest(reltuples, 0)::bigint FROM pg_class \
                     WHERE oid = 'memory'::regclass",
                    &[],
                )
                .await
                .map_err(backend)?;
            Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
        })
        .unwrap_or(0)
    }
}

impl MemoryStore for PgStore {
    fn put_note(&self, draft: &NoteDraft, now_ms: u64) -> Result<MemoryNote, StoreError> {
        let agent = draft.agent_id;
        let draft = draft.clone();
        self.call(move |mut client| async move {
            let tx = client.transaction().await.map_err(backend)?;
            match put_note(&tx, &draft, now_ms).await? {
                Ok(note) => {
                    tx.commit().await.map_err(backend)?;
                    Ok(note)
                }
                // Dropped, the transaction rolls back.
                Err(refused) => Err(refused.error(agent)),
            }
        })
    }

    fn note(&self, agent: AgentId, note: NoteId) -> Result<Option<MemoryNote>, StoreError> {
        match self.recall(agent, &note.to_string())? {
            Some(Recalled::Note(note)) => Ok(Some(note)),
            _ => Ok(None),
        }
    }

    fn notes(
        &self,
        agent: AgentId,
        after: Option<NoteId>,
        limit: usize,
    ) -> Result<Vec<MemoryNote>, StoreError> {
        // The empty byte string sorts before every id.
        let after: Vec<u8> = after.map(|n| id(n.to_bytes())).unwrap_or_default();
        self.rows(
            "SELECT value FROM notes WHERE agent_id = $1 AND id > $2 ORDER BY id LIMIT $3",
            vec![
                Box::new(id(agent.to_bytes())),
                Box::new(after),
                Box::new(bigint(limit as u64)),
            ],
        )?
        .iter()
        .map(|row| decode("notes", column(row, 0, "notes")?))
        .collect()
    }

    fn note_count(&self, agent: AgentId) -> Result<u64, StoreError> {
        let rows = self.rows(
            "SELECT notes FROM note_counts WHERE agent_id = $1",
            vec![Box::new(id(agent.to_bytes()))],
        )?;
        match rows.first() {
            Some(row) => Ok(u64::try_from(column::<i64>(row, 0, "note_counts")?).unwrap_or(0)),
            None => Ok(0),
        }
    }

    fn recall(&self, agent: AgentId, entry: &str) -> Result<Option<Recalled>, StoreError> {
        let entry = entry.to_owned();
        self.call(move |client| async move { recall(&client, agent, &entry).await })
    }

    fn memory_size(&self, agent: AgentId) -> Result<MemorySize, StoreError> {
        let rows = self.rows(MEMORY_SIZE, vec![Box::new(id(agent.to_bytes()))])?;
        memory_size_from(&rows)
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
        self.call(move |mut client| async move {
            let agent_key = id(agent.to_bytes());
            let tx = client.transaction().await.map_err(backend)?;
            // First, the follower's row: a chunk in flight that found the
            // agent live commits before its entries are deleted here, and
            // the next chunk finds the agent ended (the archive commits
            // before a cleanup deletes memory).
            rows(&tx, "SELECT 1 FROM memory_follower FOR SHARE", &[])
                .await
                .map_err(backend)?;
            let deleted = execute(&tx, "DELETE FROM notes WHERE agent_id = $1", &[&agent_key])
                .await
                .map_err(backend)?;
            execute(&tx, "DELETE FROM memory WHERE agent_id = $1", &[&agent_key])
                .await
                .map_err(backend)?;
            // Its notes leave its tree's count with its own count, in this
            // transaction: a cleanup repeated after a crash takes them out
            // once.
            execute(
                &tx,
                "WITH gone AS (DELETE FROM note_counts WHERE agent_id = $1 RETURNING tree, notes) \
                 UPDATE note_trees SET notes = greatest(note_trees.notes - gone.notes, 0) \
                 FROM gone WHERE note_trees.tree = gone.tree",
                &[&agent_key],
            )
            .await
            .map_err(backend)?;
            tx.commit().await.map_err(backend)?;
            Ok(usize::try_from(deleted).unwrap_or(usize::MAX))
        })
    }
}
