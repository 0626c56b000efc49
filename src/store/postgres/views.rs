//! The reads of [`crate::store::view`] on PostgreSQL: each one call on one
//! connection, its queries pipelined, so an operator's `GetAgent` or a page
//! of `ListAgents` costs one round trip, not one per part (five, and two
//! per listed agent, before).

use std::collections::HashMap;

use deadpool_postgres::Object;
use holarchy_actors::StoreError;
use holarchy_supervision::{AgentId, UsageTotals, WaitRecord, WorkItemRecord};
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::memory::{memory_size_from, MEMORY_SIZE};
use super::reads::{column, id_bytes};
use super::{backend, PgStore};
use crate::store::codec::{decode, decode_agent};
use crate::store::view::{AgentView, Beside};

const WAITS_OF_MANY: &str =
    "SELECT owner, value FROM waits WHERE owner = ANY($1) ORDER BY owner, id";
const WORK_ITEMS_OF_MANY: &str =
    "SELECT owner, value FROM work_items WHERE owner = ANY($1) ORDER BY owner, id";

/// `sql`'s rows, its statement prepared once per connection; run beside
/// others on the same connection, the queries are pipelined.
async fn query(
    client: &Object,
    sql: &'static str,
    param: &(dyn ToSql + Sync),
) -> Result<Vec<Row>, tokio_postgres::Error> {
    let statement = client.prepare_cached(sql).await?;
    client.query(&statement, &[param]).await
}

/// Rows of `(owner, value)` grouped by owner, decoded.
fn by_owner<T: serde::de::DeserializeOwned>(
    rows: &[Row],
    table: &'static str,
) -> Result<HashMap<[u8; 16], Vec<T>>, StoreError> {
    let mut out: HashMap<[u8; 16], Vec<T>> = HashMap::new();
    for row in rows {
        let owner = id_bytes(row, 0, table)?;
        out.entry(owner)
            .or_default()
            .push(decode(table, column(row, 1, table)?)?);
    }
    Ok(out)
}

/// An agent with its usage, waits and work items, in one statement: five
/// pipelined statements cost the server five executions. The usage is
/// null for an agent that never took a turn.
const AGENT_VIEW: &str = "SELECT a.value, u.prompt, u.completion, u.cached, u.turns, \
     ARRAY(SELECT w.value FROM waits w WHERE w.owner = a.id ORDER BY w.id), \
     ARRAY(SELECT i.value FROM work_items i WHERE i.owner = a.id ORDER BY i.id) \
     FROM agents a LEFT JOIN usage u ON u.agent_id = a.id WHERE a.id = $1";

/// The usage columns of [`AGENT_VIEW`], from its second.
fn view_usage(row: &Row) -> Result<Option<UsageTotals>, StoreError> {
    let n = |i: usize| -> Result<Option<u64>, StoreError> {
        Ok(column::<Option<i64>>(row, i, "usage")?.map(|n| u64::try_from(n).unwrap_or(0)))
    };
    let (Some(prompt), Some(completion), Some(cached), Some(turns)) = (n(1)?, n(2)?, n(3)?, n(4)?)
    else {
        return Ok(None);
    };
    let mut totals = UsageTotals::default();
    totals.tokens.prompt_tokens = prompt;
    totals.tokens.completion_tokens = completion;
    totals.tokens.cached_tokens = cached;
    totals.turns = turns;
    Ok(Some(totals))
}

/// An array column of encoded values, decoded.
fn array_values<T: serde::de::DeserializeOwned>(
    row: &Row,
    at: usize,
    table: &'static str,
) -> Result<Vec<T>, StoreError> {
    column::<Vec<Vec<u8>>>(row, at, table)?
        .iter()
        .map(|value| decode(table, value))
        .collect()
}

impl PgStore {
    /// The agent `id` with its usage, memory size, waits and work items:
    /// two statements pipelined, the memory's apart so that a memory that
    /// cannot be counted does not hide the agent.
    pub fn agent_view(&self, id: AgentId) -> Result<Option<AgentView>, StoreError> {
        let key = id.to_bytes().to_vec();
        let (agent, memory) = self.call(move |client| async move {
            let (client, key) = (&client, &key);
            let (agent, memory) = futures::future::join(
                query(client, AGENT_VIEW, key),
                query(client, MEMORY_SIZE, key),
            )
            .await;
            Ok((agent.map_err(backend)?, memory.map_err(backend)))
        })?;
        let Some(row) = agent.first() else {
            return Ok(None);
        };
        Ok(Some(AgentView {
            record: decode_agent("agents", column(row, 0, "agents")?)?,
            usage: view_usage(row)?,
            memory: memory.and_then(|rows| memory_size_from(&rows)),
            waits: array_values(row, 5, "waits")?,
            work_items: array_values(row, 6, "work_items")?,
        }))
    }

    /// Each of `owners`' waits and work items, in `owners`' order.
    pub fn beside(&self, owners: &[AgentId]) -> Result<Vec<Beside>, StoreError> {
        let keys: Vec<Vec<u8>> = owners.iter().map(|o| o.to_bytes().to_vec()).collect();
        let (waits, items) = self.call(move |client| async move {
            let (client, keys) = (&client, &keys);
            let (waits, items) = futures::future::join(
                query(client, WAITS_OF_MANY, keys),
                query(client, WORK_ITEMS_OF_MANY, keys),
            )
            .await;
            Ok((waits.map_err(backend)?, items.map_err(backend)?))
        })?;
        let mut waits: HashMap<_, Vec<WaitRecord>> = by_owner(&waits, "waits")?;
        let mut items: HashMap<_, Vec<WorkItemRecord>> = by_owner(&items, "work_items")?;
        Ok(owners
            .iter()
            .map(|owner| {
                let key = owner.to_bytes();
                (
                    waits.remove(&key).unwrap_or_default(),
                    items.remove(&key).unwrap_or_default(),
                )
            })
            .collect())
    }
}
