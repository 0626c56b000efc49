//! Bulk import into an empty database: the receiving half of `holarchy
//! store copy`.
//!
//! Everything goes in one transaction, each chunk of records as a binary
//! `COPY` into its table: a copy that fails half-way (a damaged record, a
//! lost connection, a full disk) leaves the database as empty as it found
//! it, so it can simply be run again. Rows are built by the same column
//! functions the committer uses, so a copied record is indexed exactly as
//! one the daemon wrote.

use std::collections::BTreeMap;

use holarchy_actors::StoreError;
use tokio::sync::mpsc;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};

use super::committer::slot_column;
use super::statements::{
    agent_columns, bigint, id, message_columns, task_columns, wait_columns, work_item_columns,
    Param,
};
use super::{backend, PgStore};
use crate::store::codec::{encode, encode_approval, encode_instance};
use crate::store::dump::{Record, Table};
use crate::store::event_log;

const BYTEA: Type = Type::BYTEA;
const BOOL: Type = Type::BOOL;
const TEXT: Type = Type::TEXT;
const INT8: Type = Type::INT8;
const INT2: Type = Type::INT2;

/// The table a dump's table lands in, its columns and their types.
fn layout(table: Table) -> (&'static str, &'static str, &'static [Type]) {
    match table {
        Table::Agents => (
            "agents",
            "id, public, supervisor, live, archived, value",
            &[BYTEA, BOOL, BYTEA, BOOL, BOOL, BYTEA],
        ),
        Table::Names => ("names", "name, agent_id", &[TEXT, BYTEA]),
        Table::Messages => (
            "messages",
            "agent_id, id, pending, handling, value",
            &[BYTEA, BYTEA, BOOL, BOOL, BYTEA],
        ),
        Table::Dedupe => ("dedupe", "agent_id, key, message_id", &[BYTEA, TEXT, BYTEA]),
        Table::Tasks => (
            "tasks",
            "id, owner, running, worktree, value",
            &[BYTEA, BYTEA, BOOL, BOOL, BYTEA],
        ),
        Table::Waits => (
            "waits",
            "id, owner, armed, value",
            &[BYTEA, BYTEA, BOOL, BYTEA],
        ),
        Table::Triggers => ("triggers", "token_hash, wait_id", &[BYTEA, BYTEA]),
        Table::WorkItems => ("work_items", "id, owner, value", &[BYTEA, BYTEA, BYTEA]),
        Table::Output => (
            "output",
            "task_id, \"offset\", value",
            &[BYTEA, INT8, BYTEA],
        ),
        Table::Cleanups => ("cleanups", "id, value", &[BYTEA, BYTEA]),
        Table::Workspaces => ("workspaces", "agent_id, value", &[BYTEA, BYTEA]),
        Table::Usage => (
            "usage",
            "agent_id, prompt, completion, cached, turns",
            &[BYTEA, INT8, INT8, INT8, INT8],
        ),
        Table::Events => (
            "events",
            "first, last, slot, seq, value",
            &[INT8, INT8, INT2, INT8, BYTEA],
        ),
        Table::Instances => ("instances", "name, digest, value", &[TEXT, TEXT, BYTEA]),
        Table::Inbound => (
            "inbound",
            "instance, dedupe_key, value",
            &[TEXT, TEXT, BYTEA],
        ),
        Table::Replays => ("replays", "instance, digest, value", &[TEXT, TEXT, BYTEA]),
        Table::Schedules => (
            "schedules",
            "instance, schedule, value",
            &[TEXT, TEXT, BYTEA],
        ),
        Table::Approvals => (
            "approvals",
            "id, agent_id, open, status, value",
            &[BYTEA, BYTEA, BOOL, BYTEA, BYTEA],
        ),
        Table::Context => ("context", "agent_id, value", &[BYTEA, BYTEA]),
        Table::Notes => (
            "notes",
            "agent_id, id, key, value",
            &[BYTEA, BYTEA, TEXT, BYTEA],
        ),
        Table::NoteCounts => (
            "note_counts",
            "agent_id, tree, notes",
            &[BYTEA, BYTEA, INT8],
        ),
        Table::NoteTrees => ("note_trees", "tree, notes", &[BYTEA, INT8]),
        Table::Tokens => ("tokens", "id, value", &[TEXT, BYTEA]),
        Table::Audit => ("audit", "id, value", &[BYTEA, BYTEA]),
        Table::Quotas => ("quotas", "namespace, value", &[TEXT, BYTEA]),
    }
}

/// A note's words, staged for the search table (its `tsvector` is built
/// by the database, from text only this side can decode).
const NOTE_WORDS: &str = "CREATE TEMPORARY TABLE note_words \
     (agent_id bytea, id text, text text, key text, tags text) ON COMMIT DROP";
const NOTE_WORDS_COPY: &str =
    "COPY note_words (agent_id, id, text, key, tags) FROM STDIN (FORMAT binary)";
const NOTE_WORDS_TYPES: &[Type] = &[BYTEA, TEXT, TEXT, TEXT, TEXT];
/// The same words a note's write would store (see `memory::put_note`).
const NOTE_ENTRIES: &str = "INSERT INTO memory (agent_id, id, kind, words) \
     SELECT agent_id, id, 'note', to_tsvector('english', text) || to_tsvector('english', key) \
     || to_tsvector('english', tags) FROM note_words";

fn text(s: &str) -> Param {
    Box::new(s.to_owned())
}

/// The rows `record` becomes in its table: one, but for a run of events,
/// which the database keeps one slot's to a row.
fn rows(record: Record) -> Result<Vec<Vec<Param>>, StoreError> {
    match record {
        Record::EventRun { encoded, .. } => Ok(event_log::split_by_slot(encoded)?
            .into_iter()
            .map(|run| {
                let (slot, seq) = run.slot.unzip();
                vec![
                    Box::new(bigint(run.first)) as Param,
                    Box::new(bigint(run.last)),
                    Box::new(slot.map(slot_column)),
                    Box::new(seq.map(bigint)),
                    Box::new(run.value),
                ]
            })
            .collect()),
        other => row(other).map(|row| vec![row]),
    }
}

/// The row `record` becomes in its table.
fn row(record: Record) -> Result<Vec<Param>, StoreError> {
    Ok(match record {
        Record::Agent(agent) => agent_columns(&agent)?,
        Record::Name(name, agent) => vec![Box::new(name), id(agent.to_bytes())],
        Record::Message(message) => message_columns(&message)?,
        Record::Dedupe {
            agent_id,
            key,
            message_id,
        } => vec![
            id(agent_id.to_bytes()),
            Box::new(key),
            id(message_id.to_bytes()),
        ],
        Record::Task(task) => task_columns(&task)?,
        Record::Wait(wait) => wait_columns(&wait)?,
        Record::Trigger {
            token_hash,
            wait_id,
        } => vec![Box::new(token_hash.to_vec()), id(wait_id.to_bytes())],
        Record::WorkItem(item) => work_item_columns(&item)?,
        Record::Output { task_id, chunk } => vec![
            id(task_id.to_bytes()),
            Box::new(bigint(chunk.offset)),
            Box::new(encode("output", &chunk)?),
        ],
        Record::Cleanup(intent) => {
            vec![
                id(intent.id.to_bytes()),
                Box::new(encode("cleanups", &intent)?),
            ]
        }
        Record::Workspaces(projection) => vec![
            id(projection.agent_id.to_bytes()),
            Box::new(encode("workspaces", &projection)?),
        ],
        Record::Usage(agent, usage) => vec![
            id(agent.to_bytes()),
            Box::new(bigint(usage.tokens.prompt_tokens)),
            Box::new(bigint(usage.tokens.completion_tokens)),
            Box::new(bigint(usage.tokens.cached_tokens)),
            Box::new(bigint(usage.turns)),
        ],
        // Split by slot first (see `rows`).
        Record::EventRun { .. } => {
            return Err(StoreError::Corrupt {
                tree: "events",
                detail: "an event run reached the copy whole, not split by slot".into(),
            })
        }
        Record::Instance(instance) => vec![
            text(instance.name()),
            text(&instance.digest),
            Box::new(encode_instance("instances", &instance)?),
        ],
        Record::Inbound { instance, event } => vec![
            Box::new(instance),
            text(&event.dedupe_key),
            Box::new(encode("inbound", event.as_ref())?),
        ],
        Record::Replay {
            instance,
            digest,
            encoded,
        } => vec![Box::new(instance), Box::new(digest), Box::new(encoded)],
        Record::Schedule {
            instance,
            schedule,
            state,
        } => vec![
            Box::new(instance),
            Box::new(schedule),
            Box::new(encode("schedules", &state)?),
        ],
        Record::Approval(approval) => vec![
            id(approval.id.to_bytes()),
            id(approval.agent_id.to_bytes()),
            // As `swap_approval` keeps it: open until decided and told.
            Box::new(!(approval.status.is_decided() && approval.delivered)),
            Box::new(encode("approvals", &approval.status)?),
            Box::new(encode_approval("approvals", &approval)?),
        ],
        Record::Context(agent, context) => {
            vec![id(agent.to_bytes()), Box::new(encode("context", &context)?)]
        }
        Record::Note(note) => {
            let value = encode("notes", note.as_ref())?;
            vec![
                id(note.agent_id.to_bytes()),
                id(note.id.to_bytes()),
                Box::new(note.key),
                Box::new(value),
            ]
        }
        Record::NoteCount {
            agent_id,
            tree,
            notes,
        } => vec![
            id(agent_id.to_bytes()),
            id(tree.to_bytes()),
            Box::new(bigint(notes)),
        ],
        Record::NoteTree { tree, notes } => vec![id(tree.to_bytes()), Box::new(bigint(notes))],
        Record::Token(token) => vec![
            Box::new(token.id.clone()),
            Box::new(encode("tokens", token.as_ref())?),
        ],
        Record::Audit(entry) => vec![id(entry.id), Box::new(encode("audit", entry.as_ref())?)],
        Record::Quota(quota) => vec![
            Box::new(quota.namespace.clone()),
            Box::new(encode("quotas", quota.as_ref())?),
        ],
    })
}

/// What a dump sends: records of one table, or the word that it is
/// complete. A channel that closes without it is a dump that failed, and
/// the import rolls back.
#[derive(Debug)]
pub enum Chunk {
    Records(Vec<Record>),
    Done,
}

/// A note's row in `note_words`.
fn note_words(record: &Record) -> Option<Vec<Param>> {
    let Record::Note(note) = record else {
        return None;
    };
    Some(vec![
        id(note.agent_id.to_bytes()),
        text(&note.id.to_string()),
        text(&super::memory::searchable(&note.text)),
        text(note.key.as_deref().unwrap_or_default()),
        text(&note.tags.join(" ")),
    ])
}

/// Writes `rows` through one binary `COPY`; how many it took.
async fn copy_in(
    tx: &tokio_postgres::Transaction<'_>,
    statement: &str,
    types: &[Type],
    rows: Vec<Vec<Param>>,
) -> Result<u64, StoreError> {
    let sink = tx.copy_in(statement).await.map_err(backend)?;
    let writer = BinaryCopyInWriter::new(sink, types);
    let mut writer = std::pin::pin!(writer);
    for row in &rows {
        let refs: Vec<&(dyn ToSql + Sync)> = row
            .iter()
            .map(|p| p.as_ref() as &(dyn ToSql + Sync))
            .collect();
        writer.as_mut().write(&refs).await.map_err(backend)?;
    }
    writer.finish().await.map_err(backend)
}

/// Why an import took nothing.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// These tables already hold rows: an import goes only into a
    /// database no daemon has written to.
    #[error("the database already holds holarchy data (in {})", .0.join(", "))]
    Occupied(Vec<&'static str>),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The tables of `tx` that hold rows, once every one is locked against
/// writers: a daemon that starts on the database during the import waits
/// for it, rather than writing beside it.
async fn occupied(tx: &tokio_postgres::Transaction<'_>) -> Result<Vec<&'static str>, StoreError> {
    let names: Vec<&'static str> = Table::ALL.iter().map(|t| layout(*t).0).collect();
    tx.batch_execute(&format!(
        "LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE",
        names.join(", ")
    ))
    .await
    .map_err(backend)?;
    let mut occupied = Vec::new();
    for name in names {
        let row = tx
            .query_one(&format!("SELECT EXISTS (SELECT 1 FROM {name})"), &[])
            .await
            .map_err(backend)?;
        if row.get::<_, bool>(0) {
            occupied.push(name);
        }
    }
    Ok(occupied)
}

impl PgStore {
    /// Takes every chunk `chunks` brings (each of one table, in
    /// [`Table`] order) into the database in one transaction, committed
    /// at [`Chunk::Done`]; the rows each table took. Refuses a database
    /// that holds any rows in the tables it writes, checked in the same
    /// transaction.
    pub fn import(
        &self,
        mut chunks: mpsc::Receiver<Chunk>,
    ) -> Result<BTreeMap<Table, u64>, ImportError> {
        let (tx_result, refused) = self.call(move |mut client| async move {
            let tx = client.transaction().await.map_err(backend)?;
            let occupied = occupied(&tx).await?;
            if !occupied.is_empty() {
                return Ok((None, occupied));
            }
            tx.batch_execute(NOTE_WORDS).await.map_err(backend)?;
            let mut taken: BTreeMap<Table, u64> = BTreeMap::new();
            loop {
                let chunk = match chunks.recv().await {
                    Some(Chunk::Records(chunk)) => chunk,
                    Some(Chunk::Done) => break,
                    // Dropped by the transaction: nothing was taken.
                    None => {
                        return Err(StoreError::Backend(
                            "the copy stopped before its end: nothing was written".into(),
                        ))
                    }
                };
                let Some(table) = chunk.first().map(Record::table) else {
                    continue;
                };
                let (name, columns, types) = layout(table);
                let words: Vec<_> = chunk.iter().filter_map(note_words).collect();
                let rows = chunk
                    .into_iter()
                    .map(rows)
                    .collect::<Result<Vec<_>, _>>()?
                    .into_iter()
                    .flatten()
                    .collect();
                let statement = format!("COPY {name} ({columns}) FROM STDIN (FORMAT binary)");
                *taken.entry(table).or_default() += copy_in(&tx, &statement, types, rows).await?;
                if !words.is_empty() {
                    copy_in(&tx, NOTE_WORDS_COPY, NOTE_WORDS_TYPES, words).await?;
                }
            }
            tx.batch_execute(NOTE_ENTRIES).await.map_err(backend)?;
            tx.commit().await.map_err(backend)?;
            Ok((Some(taken), Vec::new()))
        })?;
        match tx_result {
            Some(taken) => Ok(taken),
            None => Err(ImportError::Occupied(refused)),
        }
    }
}
