//! The event log's retention on PostgreSQL: the oldest runs go, and what
//! they numbered stays written as floors, so no cursor and no slot's
//! number is given twice once their rows are gone.

use holarchy_actors::StoreError;

use super::{backend, PgStore};
use crate::store::codec::decode_event_run;

/// Migration 5: each slot's last number and the log's last cursor (slot
/// -1) among the rows the retention removed.
pub(super) const FLOORS: &str = r#"
CREATE TABLE event_floors (
    slot        smallint PRIMARY KEY,
    seq         bigint NOT NULL
);
"#;

/// Runs read per query while looking for what is due.
const PAGE: i64 = 32;

/// The floors' row that holds the last removed cursor.
pub(super) const CURSOR_FLOOR: i16 = -1;

/// Removes up to `limit` of the oldest runs whose events were all made
/// before `before_ms`, never the newest; how many events went.
pub(super) fn trim(store: &PgStore, before_ms: u64, limit: usize) -> Result<u64, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    store.call(move |mut client| async move {
        let tx = client.transaction().await.map_err(backend)?;
        let mut firsts = Vec::new();
        let mut floors: std::collections::BTreeMap<i16, i64> = Default::default();
        let mut removed = 0u64;
        // A page at a time, oldest first, until a run is too new: most
        // calls find the first one so and read no more.
        let mut after = i64::MIN;
        'pages: while (firsts.len() as i64) < limit {
            let rows = tx
                .query(
                    "SELECT first, last, slot, seq, value FROM events \
                     WHERE last > $1 AND last < (SELECT max(last) FROM events) \
                     ORDER BY last LIMIT $2",
                    &[&after, &PAGE.min(limit - firsts.len() as i64)],
                )
                .await
                .map_err(backend)?;
            if rows.is_empty() {
                break;
            }
            for row in &rows {
                let first: i64 = row.try_get(0).map_err(backend)?;
                let last: i64 = row.try_get(1).map_err(backend)?;
                let slot: Option<i16> = row.try_get(2).map_err(backend)?;
                let seq: Option<i64> = row.try_get(3).map_err(backend)?;
                let value: Vec<u8> = row.try_get(4).map_err(backend)?;
                let events = decode_event_run("events", &value)?;
                if events.iter().any(|event| event.at_ms >= before_ms) {
                    break 'pages;
                }
                after = last;
                firsts.push(first);
                removed += events.len() as u64;
                let cursor = floors.entry(CURSOR_FLOOR).or_default();
                *cursor = (*cursor).max(last);
                if let (Some(slot), Some(seq)) = (slot, seq) {
                    let number = floors.entry(slot).or_default();
                    *number = (*number).max(seq + (last - first));
                }
            }
        }
        if firsts.is_empty() {
            return Ok(0);
        }
        let (slots, seqs): (Vec<i16>, Vec<i64>) = floors.into_iter().unzip();
        tx.execute(
            "INSERT INTO event_floors (slot, seq) SELECT * FROM unnest($1::int2[], $2::int8[]) \
             ON CONFLICT (slot) DO UPDATE SET seq = greatest(event_floors.seq, excluded.seq)",
            &[&slots, &seqs],
        )
        .await
        .map_err(backend)?;
        tx.execute("DELETE FROM events WHERE first = ANY($1)", &[&firsts])
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(removed)
    })
}
