//! The reads of [`crate::store::view`] on PostgreSQL: each one call on one
//! connection, its queries pipelined, so an operator's `GetAgent` or a page
//! of `ListAgents` costs one round trip, not one per part (five, and two
//! per listed agent, before).

use std::collections::HashMap;

use deadpool_postgres::Object;
use holarchy_actors::StoreError;
use holarchy_supervision::{AgentId, WaitRecord, WorkItemRecord};
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::memory::{memory_size_from, MEMORY_SIZE};
use super::reads::{column, id_bytes, usage_from, AGENT, USAGE_OF, WAITS_OF, WORK_ITEMS_OF};
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

fn values<T: serde::de::DeserializeOwned>(
    rows: &[Row],
    table: &'static str,
) -> Result<Vec<T>, StoreError> {
    rows.iter()
        .map(|row| decode(table, column(row, 0, table)?))
        .collect()
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

impl PgStore {
    /// The agent `id` with its usage, memory size, waits and work items.
    pub fn agent_view(&self, id: AgentId) -> Result<Option<AgentView>, StoreError> {
        let key = id.to_bytes().to_vec();
        let (agent, usage, memory, waits, items) = self.call(move |client| async move {
            let (client, key) = (&client, &key);
            let (agent, usage, memory, waits, items) = futures::future::join5(
                query(client, AGENT, key),
                query(client, USAGE_OF, key),
                query(client, MEMORY_SIZE, key),
                query(client, WAITS_OF, key),
                query(client, WORK_ITEMS_OF, key),
            )
            .await;
            Ok((
                agent.map_err(backend)?,
                usage.map_err(backend)?,
                memory.map_err(backend),
                waits.map_err(backend)?,
                items.map_err(backend)?,
            ))
        })?;
        let Some(agent) = agent.first() else {
            return Ok(None);
        };
        Ok(Some(AgentView {
            record: decode_agent("agents", column(agent, 0, "agents")?)?,
            usage: usage.first().map(usage_from).transpose()?,
            memory: memory.and_then(|rows| memory_size_from(&rows)),
            waits: values(&waits, "waits")?,
            work_items: values(&items, "work_items")?,
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
