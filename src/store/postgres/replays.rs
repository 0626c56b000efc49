//! Replays and their reports, outside the batch path: each write one
//! statement (or, for a delete, one transaction) of its own.

use holarchy_actors::StoreError;
use holarchy_supervision::ReplayId;

use super::access::values;
use super::statements::Param;
use super::{backend, PgStore};
use crate::replay::model::{ReplayRecord, TurnReport};
use crate::replay::store::ReplayStore;
use crate::store::codec::encode;

/// The tables of this module (migration 6).
pub(super) const TABLES: &str = r#"
CREATE TABLE replay_jobs (
    id          bytea PRIMARY KEY,
    value       bytea NOT NULL
);

CREATE TABLE replay_turns (
    replay_id   bytea NOT NULL,
    idx         integer NOT NULL,
    value       bytea NOT NULL,
    PRIMARY KEY (replay_id, idx)
);
"#;

fn id(replay: ReplayId) -> Param {
    Box::new(replay.to_bytes().to_vec())
}

impl ReplayStore for PgStore {
    fn put_replay(&self, record: &ReplayRecord) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO replay_jobs (id, value) VALUES ($1, $2) \
             ON CONFLICT (id) DO UPDATE SET value = excluded.value",
            vec![id(record.id), Box::new(encode("replay_jobs", record)?)],
        )
        .map(drop)
    }

    fn replay(&self, replay: ReplayId) -> Result<Option<ReplayRecord>, StoreError> {
        let rows = self.rows(
            "SELECT value FROM replay_jobs WHERE id = $1",
            vec![id(replay)],
        )?;
        Ok(values(&rows, "replay_jobs")?.into_iter().next())
    }

    fn replays(&self) -> Result<Vec<ReplayRecord>, StoreError> {
        let rows = self.rows("SELECT value FROM replay_jobs ORDER BY id", Vec::new())?;
        values(&rows, "replay_jobs")
    }

    fn put_reports(&self, replay: ReplayId, reports: &[TurnReport]) -> Result<(), StoreError> {
        if reports.is_empty() {
            return Ok(());
        }
        let indices: Vec<i32> = reports
            .iter()
            .map(|r| i32::try_from(r.index).unwrap_or(i32::MAX))
            .collect();
        let encoded = reports
            .iter()
            .map(|r| encode("replay_turns", r))
            .collect::<Result<Vec<_>, _>>()?;
        self.execute(
            "INSERT INTO replay_turns (replay_id, idx, value) \
             SELECT $1, * FROM unnest($2::integer[], $3::bytea[]) \
             ON CONFLICT (replay_id, idx) DO UPDATE SET value = excluded.value",
            vec![id(replay), Box::new(indices), Box::new(encoded)],
        )
        .map(drop)
    }

    fn reports(
        &self,
        replay: ReplayId,
        after: Option<u32>,
        limit: usize,
    ) -> Result<Vec<TurnReport>, StoreError> {
        let after: i32 = after.map_or(-1, |a| i32::try_from(a).unwrap_or(i32::MAX));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.rows(
            "SELECT value FROM replay_turns WHERE replay_id = $1 AND idx > $2 \
             ORDER BY idx LIMIT $3",
            vec![id(replay), Box::new(after), Box::new(limit)],
        )?;
        values(&rows, "replay_turns")
    }

    fn reported(&self, replay: ReplayId) -> Result<Vec<u32>, StoreError> {
        let rows = self.rows(
            "SELECT idx FROM replay_turns WHERE replay_id = $1 ORDER BY idx",
            vec![id(replay)],
        )?;
        rows.iter()
            .map(|row| {
                let index: i32 = row.try_get(0).map_err(backend)?;
                Ok(u32::try_from(index).unwrap_or(0))
            })
            .collect()
    }

    fn delete_replay(&self, replay: ReplayId) -> Result<(), StoreError> {
        let key = replay.to_bytes().to_vec();
        self.call(move |mut client| async move {
            let tx = client.transaction().await.map_err(backend)?;
            tx.execute("DELETE FROM replay_turns WHERE replay_id = $1", &[&key])
                .await
                .map_err(backend)?;
            tx.execute("DELETE FROM replay_jobs WHERE id = $1", &[&key])
                .await
                .map_err(backend)?;
            tx.commit().await.map_err(backend)
        })
    }
}
