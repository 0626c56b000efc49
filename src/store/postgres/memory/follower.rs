//! The follower: brings handled messages and tool calls into the memory
//! search as their events commit, off every turn's path.
//!
//! It reads the event log from its own durable cursor (`memory_follower`)
//! up to the committed watermark, in chunks, as the sled store's indexer
//! does: a `run_finished` event puts its message in, once handled, with its
//! reply; a `tool_called` event its call. Only entries of agents that are
//! live when the chunk runs go in. A chunk's entries and the cursor past
//! them commit in one transaction, so a crash repeats a chunk at most (its
//! writes are upserts) and never skips one. The committer never waits for
//! it: its cost is one transaction per chunk on a connection of the pool.

use std::time::Duration;

use deadpool_postgres::Pool;
use holarchy_actors::{MemoryKind, RecalledToolCall, StoreError};
use holarchy_supervision::{AgentId, EventCursor, EventKind, MessageRecord, MessageStatus};
use tokio::sync::{oneshot, watch};
use tracing::warn;

use super::{column, execute, id, id_bytes, rows, searchable};
use crate::store::codec::{decode, decode_event_run};
use crate::store::postgres::backend;
use crate::store::postgres::statements::bigint;

/// Event runs (each one commit's events) read per chunk.
const CHUNK_RUNS: i64 = 256;
/// Bytes of text one chunk analyses at most, so that a backlog of large
/// outputs is taken in transactions of bounded length; a chunk stops after
/// the run that passes it.
const CHUNK_TEXT: usize = 8 * 1024 * 1024;
/// After new events commit, how long more may gather before the follower
/// starts: one transaction for a burst of turns rather than one each.
const GATHER: Duration = Duration::from_millis(100);
/// How long the follower sleeps without news before it looks again.
const IDLE: Duration = Duration::from_secs(5);
/// How long it waits after a failed chunk (the database unreachable)
/// before it tries again.
const RETRY: Duration = Duration::from_secs(1);

/// The follower's task, stopped by [`Following::stop`] at the store's
/// close (and with the store's runtime, if it is dropped unclosed).
#[derive(Debug)]
pub(in crate::store::postgres) struct Following {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Following {
    /// Starts the follower on `runtime`.
    pub fn start(
        runtime: &tokio::runtime::Handle,
        pool: Pool,
        watermark: watch::Receiver<EventCursor>,
    ) -> Self {
        let (stop, stopped) = oneshot::channel();
        let task = runtime.spawn(run(pool, watermark, stopped));
        Self { stop, task }
    }

    /// Stops it after the chunk it is working on, if any; what is left is
    /// followed at the next open.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

async fn run(
    pool: Pool,
    mut watermark: watch::Receiver<EventCursor>,
    mut stopped: oneshot::Receiver<()>,
) {
    loop {
        let upto = *watermark.borrow_and_update();
        let pause = match chunk(&pool, upto).await {
            Ok(Progress::More) => Duration::ZERO,
            Ok(Progress::CaughtUp) => IDLE,
            Err(err) => {
                warn!(error = %err, "following the event log into the memory search failed; retrying");
                RETRY
            }
        };
        if pause.is_zero() {
            match stopped.try_recv() {
                Err(oneshot::error::TryRecvError::Empty) => continue,
                _ => return,
            }
        }
        tokio::select! {
            _ = &mut stopped => return,
            changed = watermark.changed(), if pause == IDLE => {
                if changed.is_err() {
                    return;
                }
                tokio::select! {
                    _ = &mut stopped => return,
                    () = tokio::time::sleep(GATHER) => {}
                }
            }
            () = tokio::time::sleep(pause) => {}
        }
    }
}

enum Progress {
    /// A chunk was full: more is waiting.
    More,
    CaughtUp,
}

/// An entry for the search: its agent, id, kind and text.
struct Entry {
    agent: AgentId,
    id: String,
    kind: &'static str,
    text: String,
}

/// The entries go in only for agents live now: an archived agent's memory
/// is gone, and its late events must not bring it back.
const PUT_ENTRIES: &str = "INSERT INTO memory (agent_id, id, kind, words) \
     SELECT e.agent_id, e.id, e.kind, to_tsvector('english', e.text) \
     FROM unnest($1::bytea[], $2::text[], $3::text[], $4::text[]) AS e(agent_id, id, kind, text) \
     WHERE EXISTS (SELECT 1 FROM agents a WHERE a.id = e.agent_id AND a.live) \
     ON CONFLICT (agent_id, id) DO UPDATE SET kind = excluded.kind, words = excluded.words";

/// One chunk: the events after the follower's cursor, up to `upto`.
async fn chunk(pool: &Pool, upto: EventCursor) -> Result<Progress, StoreError> {
    let mut client = pool
        .get()
        .await
        .map_err(|err| StoreError::Backend(format!("no connection to PostgreSQL: {err}")))?;
    let tx = client.transaction().await.map_err(backend)?;
    // The row is locked first, before any agent is found live: a deletion
    // of an agent's memory waits for this chunk (see `delete_memory`).
    let cursor = rows(&tx, "SELECT cursor FROM memory_follower FOR UPDATE", &[])
        .await
        .map_err(backend)?;
    let after = match cursor.first() {
        Some(row) => u64::try_from(column::<i64>(row, 0, "memory_follower")?).unwrap_or(0),
        None => {
            return Err(StoreError::Corrupt {
                tree: "memory_follower",
                detail: "its one row is missing".into(),
            })
        }
    };
    if after >= upto {
        return Ok(Progress::CaughtUp);
    }
    let runs = rows(
        &tx,
        // By `last`, as `reads::events_after` reads, for its index.
        "SELECT last, value FROM events WHERE last > $1 AND first <= $2 ORDER BY last LIMIT $3",
        &[&bigint(after), &bigint(upto), &CHUNK_RUNS],
    )
    .await
    .map_err(backend)?;
    let mut finished: Vec<(AgentId, [u8; 16])> = Vec::new();
    let mut entries: Vec<Entry> = Vec::new();
    let mut text = 0;
    // Every event up to `upto` is seen unless the chunk stops early.
    let mut reached = upto;
    let mut full = runs.len() as i64 == CHUNK_RUNS;
    for (at, row) in runs.iter().enumerate() {
        let last = u64::try_from(column::<i64>(row, 0, "events")?).unwrap_or(0);
        // A run that does not decode never will: its events are left out,
        // and the cursor moves past them.
        let events = match decode_event_run("events", column(row, 1, "events")?) {
            Ok(events) => events,
            Err(err) => {
                warn!(error = %err, last, "events left out of the memory search");
                Vec::new()
            }
        };
        for event in events {
            if event.cursor <= after || event.cursor > upto {
                continue;
            }
            let Some(agent) = event.agent_id else {
                continue;
            };
            match event.kind {
                EventKind::RunFinished { message_id, .. } => {
                    finished.push((agent, message_id.to_bytes()));
                }
                EventKind::ToolCalled {
                    tool,
                    input,
                    output,
                    ..
                } => {
                    let entry = Entry {
                        agent,
                        id: RecalledToolCall::memory_id(event.cursor),
                        kind: MemoryKind::ToolCall.name(),
                        text: searchable(&format!("{tool}\n\n{input}\n\n{output}")).into_owned(),
                    };
                    text += entry.text.len();
                    entries.push(entry);
                }
                _ => {}
            }
        }
        if text >= CHUNK_TEXT && at + 1 < runs.len() {
            reached = last;
            full = true;
            break;
        }
        if full {
            reached = last;
        }
    }
    entries.extend(handled(&tx, &finished).await?);
    let mut agents = Vec::with_capacity(entries.len());
    let mut ids = Vec::with_capacity(entries.len());
    let mut kinds = Vec::with_capacity(entries.len());
    let mut texts = Vec::with_capacity(entries.len());
    for entry in entries {
        agents.push(id(entry.agent.to_bytes()));
        ids.push(entry.id);
        kinds.push(entry.kind);
        texts.push(entry.text);
    }
    if !agents.is_empty() {
        execute(&tx, PUT_ENTRIES, &[&agents, &ids, &kinds, &texts])
            .await
            .map_err(backend)?;
    }
    execute(
        &tx,
        "UPDATE memory_follower SET cursor = $1",
        &[&bigint(reached)],
    )
    .await
    .map_err(backend)?;
    tx.commit().await.map_err(backend)?;
    Ok(match full {
        true => Progress::More,
        false => Progress::CaughtUp,
    })
}

/// The messages `finished` names that are handled, as entries: the
/// message and its reply. One unreadable message is left out (logged),
/// never a stop to everyone else's.
async fn handled(
    tx: &deadpool_postgres::Transaction<'_>,
    finished: &[(AgentId, [u8; 16])],
) -> Result<Vec<Entry>, StoreError> {
    if finished.is_empty() {
        return Ok(Vec::new());
    }
    let agents: Vec<Vec<u8>> = finished.iter().map(|(a, _)| id(a.to_bytes())).collect();
    let messages: Vec<Vec<u8>> = finished.iter().map(|(_, m)| m.to_vec()).collect();
    let found = rows(
        tx,
        "SELECT m.agent_id, m.value FROM messages m \
         JOIN unnest($1::bytea[], $2::bytea[]) AS f(agent_id, id) \
         ON m.agent_id = f.agent_id AND m.id = f.id",
        &[&agents, &messages],
    )
    .await
    .map_err(backend)?;
    let mut out = Vec::with_capacity(found.len());
    for row in &found {
        let agent = AgentId::from_bytes(id_bytes(row, 0, "messages")?);
        let message: MessageRecord = match decode("messages", column(row, 1, "messages")?) {
            Ok(message) => message,
            Err(err) => {
                warn!(agent_id = %agent, error = %err, "a message left out of the memory search");
                continue;
            }
        };
        if !matches!(message.status, MessageStatus::Handled { .. }) {
            continue;
        }
        let text = match &message.reply {
            Some(reply) => format!("{}\n\n{reply}", message.body),
            None => message.body.clone(),
        };
        out.push(Entry {
            agent,
            id: message.id.to_string(),
            kind: MemoryKind::of_message(&message.provenance).name(),
            text: searchable(&text).into_owned(),
        });
    }
    Ok(out)
}
