//! Replays and their reports in two trees of their own, outside the batch
//! path: `replay_jobs` (replay id -> ReplayRecord) and `replay_turns`
//! (replay id ++ index, big-endian -> TurnReport).

use holarchy_actors::StoreError;
use holarchy_supervision::ReplayId;

use super::{backend, SledStore, REPLAY_JOBS, REPLAY_TURNS};
use crate::replay::model::{ReplayRecord, TurnReport};
use crate::replay::store::ReplayStore;
use crate::store::codec::{decode, encode};

fn report_key(id: ReplayId, index: u32) -> Vec<u8> {
    let mut key = Vec::with_capacity(20);
    key.extend_from_slice(&id.to_bytes());
    key.extend_from_slice(&index.to_be_bytes());
    key
}

fn index_of(key: &[u8]) -> Result<u32, StoreError> {
    key.get(16..20)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_be_bytes)
        .ok_or_else(|| StoreError::Corrupt {
            tree: REPLAY_TURNS,
            detail: format!("key of {} bytes, expected 20", key.len()),
        })
}

impl ReplayStore for SledStore {
    fn put_replay(&self, record: &ReplayRecord) -> Result<(), StoreError> {
        let value = encode(REPLAY_JOBS, record)?;
        self.counted(|| {
            self.replay_jobs
                .insert(record.id.to_bytes(), value)
                .map(drop)
                .map_err(backend)
        })
    }

    fn replay(&self, id: ReplayId) -> Result<Option<ReplayRecord>, StoreError> {
        self.replay_jobs
            .get(id.to_bytes())
            .map_err(backend)?
            .map(|bytes| decode(REPLAY_JOBS, &bytes))
            .transpose()
    }

    fn replays(&self) -> Result<Vec<ReplayRecord>, StoreError> {
        self.replay_jobs
            .iter()
            .values()
            .map(|value| decode(REPLAY_JOBS, &value.map_err(backend)?))
            .collect()
    }

    fn put_reports(&self, id: ReplayId, reports: &[TurnReport]) -> Result<(), StoreError> {
        let mut batch = sled::Batch::default();
        for report in reports {
            batch.insert(report_key(id, report.index), encode(REPLAY_TURNS, report)?);
        }
        self.counted(|| self.replay_turns.apply_batch(batch).map_err(backend))
    }

    fn reports(
        &self,
        id: ReplayId,
        after: Option<u32>,
        limit: usize,
    ) -> Result<Vec<TurnReport>, StoreError> {
        let start = match after {
            Some(index) => match index.checked_add(1) {
                Some(next) => report_key(id, next),
                None => return Ok(Vec::new()),
            },
            None => report_key(id, 0),
        };
        let end = {
            let mut end = id.to_bytes().to_vec();
            end.extend_from_slice(&[0xff; 5]);
            end
        };
        self.replay_turns
            .range(start..end)
            .values()
            .take(limit)
            .map(|value| decode(REPLAY_TURNS, &value.map_err(backend)?))
            .collect()
    }

    fn reported(&self, id: ReplayId) -> Result<Vec<u32>, StoreError> {
        self.replay_turns
            .scan_prefix(id.to_bytes())
            .keys()
            .map(|key| index_of(&key.map_err(backend)?))
            .collect()
    }

    fn delete_replay(&self, id: ReplayId) -> Result<(), StoreError> {
        self.counted(|| {
            // The reports first: a crash between leaves a record whose
            // delete is asked again, never reports of no record.
            for key in self.replay_turns.scan_prefix(id.to_bytes()).keys() {
                self.replay_turns
                    .remove(key.map_err(backend)?)
                    .map_err(backend)?;
            }
            self.replay_jobs.remove(id.to_bytes()).map_err(backend)?;
            Ok(())
        })
    }
}
