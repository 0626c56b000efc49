//! The actors' reads, each one query. Orders match the sled store's key
//! orders (ids as big-endian bytes), so both stores list alike.

use holarchy_actors::store::{DamagedRecord, RecoveryInput};
use holarchy_actors::StoreError;
use holarchy_supervision::cleanup::CleanupIntent;
use holarchy_supervision::workspace::Projection;
use holarchy_supervision::{
    AgentId, AgentRecord, Event, EventCursor, MessageId, MessageRecord, OutputChunk, TaskId,
    TaskRecord, UsageTotals, WaitId, WaitRecord, WorkItemId, WorkItemRecord,
};
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::statements::{bigint, Param};
use super::{backend, PgStore};
use crate::store::codec::{decode, decode_agent, decode_event_run, decode_task};

fn id(bytes: [u8; 16]) -> Param {
    Box::new(bytes.to_vec())
}

/// A page's length as the database's bigint.
fn limit(n: usize) -> Param {
    Box::new(i64::try_from(n).unwrap_or(i64::MAX))
}

pub(super) fn column<'r, T: tokio_postgres::types::FromSql<'r>>(
    row: &'r Row,
    index: usize,
    table: &'static str,
) -> Result<T, StoreError> {
    row.try_get(index).map_err(|err| StoreError::Corrupt {
        tree: table,
        detail: err.to_string(),
    })
}

pub(super) fn id_bytes(
    row: &Row,
    index: usize,
    table: &'static str,
) -> Result<[u8; 16], StoreError> {
    let bytes: &[u8] = column(row, index, table)?;
    bytes.try_into().map_err(|_| StoreError::Corrupt {
        tree: table,
        detail: format!("an id of {} bytes", bytes.len()),
    })
}

impl PgStore {
    /// The rows `sql` answers with `params`.
    pub(super) fn rows(
        &self,
        sql: &'static str,
        params: Vec<Param>,
    ) -> Result<Vec<Row>, StoreError> {
        self.call(move |client| async move {
            let statement = client.prepare_cached(sql).await.map_err(backend)?;
            let refs: Vec<&(dyn ToSql + Sync)> = params
                .iter()
                .map(|p| p.as_ref() as &(dyn ToSql + Sync))
                .collect();
            client.query(&statement, &refs).await.map_err(backend)
        })
    }

    /// The first column of each row, decoded as `table`'s values.
    fn values<T>(
        &self,
        table: &'static str,
        sql: &'static str,
        params: Vec<Param>,
        decode: fn(&'static str, &[u8]) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        self.rows(sql, params)?
            .iter()
            .map(|row| decode(table, column(row, 0, table)?))
            .collect()
    }

    fn value<T>(
        &self,
        table: &'static str,
        sql: &'static str,
        params: Vec<Param>,
        decode: fn(&'static str, &[u8]) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        Ok(self.values(table, sql, params, decode)?.into_iter().next())
    }

    fn ids(
        &self,
        table: &'static str,
        sql: &'static str,
        params: Vec<Param>,
    ) -> Result<Vec<[u8; 16]>, StoreError> {
        self.rows(sql, params)?
            .iter()
            .map(|row| id_bytes(row, 0, table))
            .collect()
    }
}

fn decoded<T: serde::de::DeserializeOwned>(
    table: &'static str,
    bytes: &[u8],
) -> Result<T, StoreError> {
    decode(table, bytes)
}

pub(super) const AGENT: &str = "SELECT value FROM agents WHERE id = $1";

pub(super) fn agent(store: &PgStore, id_: AgentId) -> Result<Option<AgentRecord>, StoreError> {
    store.value("agents", AGENT, vec![id(id_.to_bytes())], decode_agent)
}

pub(super) fn agent_id_by_name(store: &PgStore, name: &str) -> Result<Option<AgentId>, StoreError> {
    Ok(store
        .ids(
            "names",
            "SELECT agent_id FROM names WHERE name = $1",
            vec![Box::new(name.to_owned())],
        )?
        .into_iter()
        .next()
        .map(AgentId::from_bytes))
}

pub(super) fn message(
    store: &PgStore,
    agent_id: AgentId,
    id_: MessageId,
) -> Result<Option<MessageRecord>, StoreError> {
    store.value(
        "messages",
        "SELECT value FROM messages WHERE agent_id = $1 AND id = $2",
        vec![id(agent_id.to_bytes()), id(id_.to_bytes())],
        decoded,
    )
}

pub(super) fn message_id_by_dedupe_key(
    store: &PgStore,
    agent_id: AgentId,
    key: &str,
) -> Result<Option<MessageId>, StoreError> {
    Ok(store
        .ids(
            "dedupe",
            "SELECT message_id FROM dedupe WHERE agent_id = $1 AND key = $2",
            vec![id(agent_id.to_bytes()), Box::new(key.to_owned())],
        )?
        .into_iter()
        .next()
        .map(MessageId::from_bytes))
}

pub(super) fn list_messages(
    store: &PgStore,
    agent_id: AgentId,
    after: Option<MessageId>,
    n: usize,
) -> Result<Vec<MessageRecord>, StoreError> {
    // The empty byte string sorts before every id.
    let after: Vec<u8> = after.map(|m| m.to_bytes().to_vec()).unwrap_or_default();
    store.values(
        "messages",
        "SELECT value FROM messages WHERE agent_id = $1 AND id > $2 ORDER BY id LIMIT $3",
        vec![id(agent_id.to_bytes()), Box::new(after), limit(n)],
        decoded,
    )
}

pub(super) fn last_settled_messages(
    store: &PgStore,
    agent_id: AgentId,
    n: usize,
) -> Result<Vec<MessageRecord>, StoreError> {
    let mut newest = store.values(
        "messages",
        "SELECT value FROM messages WHERE agent_id = $1 AND NOT pending ORDER BY id DESC LIMIT $2",
        vec![id(agent_id.to_bytes()), limit(n)],
        decoded,
    )?;
    newest.reverse();
    Ok(newest)
}

pub(super) fn last_run_starts(
    store: &PgStore,
    agent_id: AgentId,
    scan: usize,
) -> Result<Vec<u64>, StoreError> {
    let newest: Vec<MessageRecord> = store.values(
        "messages",
        "SELECT value FROM messages WHERE agent_id = $1 ORDER BY id DESC LIMIT $2",
        vec![id(agent_id.to_bytes()), limit(scan)],
        decoded,
    )?;
    Ok(newest
        .iter()
        .filter_map(|m| m.status.run_id().map(|run| run.timestamp_ms()))
        .collect())
}

pub(super) fn pending_messages(
    store: &PgStore,
    agent_id: AgentId,
) -> Result<Vec<MessageRecord>, StoreError> {
    store.values(
        "messages",
        "SELECT value FROM messages WHERE agent_id = $1 AND pending ORDER BY id",
        vec![id(agent_id.to_bytes())],
        decoded,
    )
}

pub(super) fn task(store: &PgStore, id_: TaskId) -> Result<Option<TaskRecord>, StoreError> {
    store.value(
        "tasks",
        "SELECT value FROM tasks WHERE id = $1",
        vec![id(id_.to_bytes())],
        decode_task,
    )
}

pub(super) fn workspaces(
    store: &PgStore,
    agent_id: AgentId,
) -> Result<Option<Projection>, StoreError> {
    store.value(
        "workspaces",
        "SELECT value FROM workspaces WHERE agent_id = $1",
        vec![id(agent_id.to_bytes())],
        decoded,
    )
}

pub(super) fn worktree_tasks(store: &PgStore) -> Result<Vec<TaskRecord>, StoreError> {
    // Read at every start: a damaged task must not keep the daemon down;
    // its worktree stays until the record is restored.
    let rows = store.rows(
        "SELECT value FROM tasks WHERE worktree ORDER BY id",
        Vec::new(),
    )?;
    let mut out = Vec::new();
    for row in &rows {
        match decode_task("tasks", column(row, 0, "tasks")?) {
            Ok(task) => out.push(task),
            Err(err @ (StoreError::Corrupt { .. } | StoreError::UnsupportedVersion { .. })) => {
                tracing::error!(error = %err, "a worktree's task record cannot be read; its worktree is left as it is");
            }
            Err(err) => return Err(err),
        }
    }
    Ok(out)
}

pub(super) fn tasks_of(store: &PgStore, owner: AgentId) -> Result<Vec<TaskRecord>, StoreError> {
    store.values(
        "tasks",
        "SELECT value FROM tasks WHERE owner = $1 ORDER BY id",
        vec![id(owner.to_bytes())],
        decode_task,
    )
}

pub(super) fn children_of(
    store: &PgStore,
    supervisor: AgentId,
) -> Result<Vec<AgentId>, StoreError> {
    Ok(store
        .ids(
            "agents",
            "SELECT id FROM agents WHERE supervisor = $1 AND live ORDER BY id",
            vec![id(supervisor.to_bytes())],
        )?
        .into_iter()
        .map(AgentId::from_bytes)
        .collect())
}

pub(super) fn public_agent_ids(store: &PgStore) -> Result<Vec<AgentId>, StoreError> {
    Ok(store
        .ids(
            "agents",
            "SELECT id FROM agents WHERE public ORDER BY id",
            Vec::new(),
        )?
        .into_iter()
        .map(AgentId::from_bytes)
        .collect())
}

pub(super) fn wait(store: &PgStore, id_: WaitId) -> Result<Option<WaitRecord>, StoreError> {
    store.value(
        "waits",
        "SELECT value FROM waits WHERE id = $1",
        vec![id(id_.to_bytes())],
        decoded,
    )
}

pub(super) const WAITS_OF: &str = "SELECT value FROM waits WHERE owner = $1 ORDER BY id";

pub(super) fn waits_of(store: &PgStore, owner: AgentId) -> Result<Vec<WaitRecord>, StoreError> {
    store.values("waits", WAITS_OF, vec![id(owner.to_bytes())], decoded)
}

pub(super) fn wait_by_token_hash(
    store: &PgStore,
    hash: [u8; 32],
) -> Result<Option<WaitId>, StoreError> {
    Ok(store
        .ids(
            "triggers",
            "SELECT wait_id FROM triggers WHERE token_hash = $1",
            vec![Box::new(hash.to_vec())],
        )?
        .into_iter()
        .next()
        .map(WaitId::from_bytes))
}

pub(super) fn work_item(
    store: &PgStore,
    id_: WorkItemId,
) -> Result<Option<WorkItemRecord>, StoreError> {
    store.value(
        "work_items",
        "SELECT value FROM work_items WHERE id = $1",
        vec![id(id_.to_bytes())],
        decoded,
    )
}

pub(super) const WORK_ITEMS_OF: &str = "SELECT value FROM work_items WHERE owner = $1 ORDER BY id";

pub(super) fn work_items_of(
    store: &PgStore,
    owner: AgentId,
) -> Result<Vec<WorkItemRecord>, StoreError> {
    store.values(
        "work_items",
        WORK_ITEMS_OF,
        vec![id(owner.to_bytes())],
        decoded,
    )
}

/// Rows of output a read takes at a time: a ring's chunks are many and
/// small, and a read stops once it has `max_bytes`.
const OUTPUT_PAGE: usize = 64;

pub(super) fn output_after(
    store: &PgStore,
    task_id: TaskId,
    offset: u64,
    max_bytes: usize,
) -> Result<Vec<OutputChunk>, StoreError> {
    let mut out = Vec::new();
    let mut size = 0;
    // The chunk holding `offset` may start before it.
    let mut from = store
        .rows(
            "SELECT max(\"offset\") FROM output WHERE task_id = $1 AND \"offset\" <= $2",
            vec![id(task_id.to_bytes()), Box::new(bigint(offset))],
        )?
        .first()
        .and_then(|row| row.get::<_, Option<i64>>(0))
        .unwrap_or(bigint(offset));
    loop {
        let page: Vec<OutputChunk> = store.values(
            "output",
            "SELECT value FROM output WHERE task_id = $1 AND \"offset\" >= $2 ORDER BY \"offset\" LIMIT $3",
            vec![id(task_id.to_bytes()), Box::new(from), limit(OUTPUT_PAGE)],
            decoded,
        )?;
        let full = page.len() == OUTPUT_PAGE;
        for mut chunk in page {
            from = bigint(chunk.offset).saturating_add(1);
            if chunk.offset + chunk.data.len() as u64 <= offset {
                continue;
            }
            // Start exactly at `offset`, even inside a chunk.
            if chunk.offset < offset {
                chunk.data.drain(..(offset - chunk.offset) as usize);
                chunk.offset = offset;
            }
            size += chunk.data.len();
            out.push(chunk);
            if size >= max_bytes {
                return Ok(out);
            }
        }
        if !full {
            return Ok(out);
        }
    }
}

pub(super) const USAGE_OF: &str =
    "SELECT prompt, completion, cached, turns FROM usage WHERE agent_id = $1";

pub(super) fn usage_of(
    store: &PgStore,
    agent_id: AgentId,
) -> Result<Option<UsageTotals>, StoreError> {
    let rows = store.rows(USAGE_OF, vec![id(agent_id.to_bytes())])?;
    rows.first().map(usage_from).transpose()
}

/// A row of [`USAGE_OF`] as totals.
pub(super) fn usage_from(row: &Row) -> Result<UsageTotals, StoreError> {
    let n = |i: usize| -> Result<u64, StoreError> {
        Ok(u64::try_from(column::<i64>(row, i, "usage")?).unwrap_or(0))
    };
    let mut totals = UsageTotals::default();
    totals.tokens.prompt_tokens = n(0)?;
    totals.tokens.completion_tokens = n(1)?;
    totals.tokens.cached_tokens = n(2)?;
    totals.turns = n(3)?;
    Ok(totals)
}

/// Committed events after `after`, up to `upto`, oldest first.
pub(super) fn events_after(
    store: &PgStore,
    after: EventCursor,
    upto: EventCursor,
    n: usize,
) -> Result<Vec<Event>, StoreError> {
    if after >= upto || n == 0 {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut from = after;
    while out.len() < n && from < upto {
        // Runs are disjoint and in cursor order, so ordering by `last`
        // orders them as by `first`, and lets the `events_last` index start
        // at the cursor and stop at the limit: ordered by `first`, a
        // planner with stale statistics walked the log from its start (5 ms
        // a read at 60,000 runs, most of the database's time under load).
        let runs = store.values(
            "events",
            "SELECT value FROM events WHERE last > $1 AND first <= $2 ORDER BY last LIMIT $3",
            vec![Box::new(bigint(from)), Box::new(bigint(upto)), limit(64)],
            decode_event_run,
        )?;
        if runs.is_empty() {
            break;
        }
        for event in runs.into_iter().flatten() {
            from = from.max(event.cursor);
            if event.cursor > after && event.cursor <= upto && out.len() < n {
                out.push(event);
            }
        }
    }
    Ok(out)
}

/// One page of agents after `after`, in id order.
pub(super) fn list_agents(
    store: &PgStore,
    after: Option<AgentId>,
    n: usize,
    include_private: bool,
) -> Result<Vec<AgentRecord>, StoreError> {
    let after: Vec<u8> = after.map(|a| a.to_bytes().to_vec()).unwrap_or_default();
    let sql = if include_private {
        "SELECT value FROM agents WHERE id > $1 ORDER BY id LIMIT $2"
    } else {
        "SELECT value FROM agents WHERE public AND id > $1 ORDER BY id LIMIT $2"
    };
    let rows = store.rows(sql, vec![Box::new(after), limit(n)])?;
    let mut page = Vec::with_capacity(rows.len());
    for row in &rows {
        // A damaged record is named at start, not in every listing.
        match decode_agent("agents", column(row, 0, "agents")?) {
            Ok(record) => page.push(record),
            Err(StoreError::Corrupt { .. } | StoreError::UnsupportedVersion { .. }) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(page)
}

/// Up to `n` names starting with `prefix`, in name order.
pub(super) fn names_from(
    store: &PgStore,
    prefix: &str,
    n: usize,
) -> Result<Vec<(String, AgentId)>, StoreError> {
    let rows = store.rows(
        "SELECT name, agent_id FROM names WHERE name >= $1 AND starts_with(name, $1) \
         ORDER BY name LIMIT $2",
        vec![Box::new(prefix.to_owned()), limit(n)],
    )?;
    rows.iter()
        .map(|row| {
            Ok((
                column::<String>(row, 0, "names")?,
                AgentId::from_bytes(id_bytes(row, 1, "names")?),
            ))
        })
        .collect()
}

/// A row as recovery reads it: its key, the agent it belongs to, and its
/// value, not yet decoded.
type RawRow = (Vec<u8>, Option<AgentId>, Vec<u8>);

/// Everything recovery starts from. A record that cannot be decoded is
/// set aside as damaged, with its table, key and owner.
pub(super) fn recovery_input(store: &PgStore) -> Result<RecoveryInput, StoreError> {
    let mut damaged = Vec::new();
    let read = |table: &'static str, sql: &'static str| -> Result<Vec<RawRow>, StoreError> {
        store
            .rows(sql, Vec::new())?
            .iter()
            .map(|row| {
                let key: Vec<u8> = column(row, 0, table)?;
                let owner: Option<Vec<u8>> = column(row, 1, table)?;
                let owner = owner
                    .and_then(|o| <[u8; 16]>::try_from(o.as_slice()).ok())
                    .map(AgentId::from_bytes);
                Ok((key, owner, column(row, 2, table)?))
            })
            .collect()
    };
    let agents_rows = read(
        "agents",
        "SELECT id, id, value FROM agents ORDER BY public DESC, id",
    )?;
    let pending_rows = read(
        "messages",
        "SELECT id, agent_id, value FROM messages WHERE pending ORDER BY agent_id, id",
    )?;
    let task_rows = read(
        "tasks",
        "SELECT id, owner, value FROM tasks WHERE running ORDER BY id",
    )?;
    let wait_rows = read(
        "waits",
        "SELECT id, owner, value FROM waits WHERE armed ORDER BY id",
    )?;
    let intent_rows = read(
        "cleanups",
        "SELECT id, NULL::bytea, value FROM cleanups ORDER BY id",
    )?;

    let agents = split(agents_rows, "agents", &mut damaged, |v| {
        decode_agent("agents", v)
    });
    let pending = split(pending_rows, "messages", &mut damaged, |v| {
        decoded::<MessageRecord>("messages", v)
    });
    let running_tasks = split(task_rows, "tasks", &mut damaged, |v| {
        decode_task("tasks", v)
    });
    let armed_waits = split(wait_rows, "waits", &mut damaged, |v| {
        decoded::<WaitRecord>("waits", v)
    });
    let intents = split(intent_rows, "cleanups", &mut damaged, |v| {
        decoded::<CleanupIntent>("cleanups", v)
    });
    Ok(RecoveryInput {
        agents,
        pending,
        running_tasks,
        intents,
        armed_waits,
        damaged,
    })
}

/// Decodes each row, setting aside those that do not decode.
fn split<T>(
    rows: Vec<RawRow>,
    table: &'static str,
    damaged: &mut Vec<DamagedRecord>,
    decode: impl Fn(&[u8]) -> Result<T, StoreError>,
) -> Vec<T> {
    let mut out = Vec::with_capacity(rows.len());
    for (key, owner, value) in rows {
        match decode(&value) {
            Ok(record) => out.push(record),
            Err(err) => damaged.push(DamagedRecord {
                tree: table,
                key: hex::encode(&key),
                agent_id: owner,
                reason: err.to_string(),
            }),
        }
    }
    out
}
