//! Where replays and their reports are kept: apart from every agent's
//! records, on whichever store the daemon runs (sled or PostgreSQL).
//! Each write is durable once the store's next `durable()` resolves.

use holarchy_actors::StoreError;
use holarchy_supervision::ReplayId;

use super::model::{ReplayRecord, TurnReport};

pub trait ReplayStore: Send + Sync + std::fmt::Debug {
    /// Writes the replay's record (new or replacing).
    fn put_replay(&self, record: &ReplayRecord) -> Result<(), StoreError>;
    fn replay(&self, id: ReplayId) -> Result<Option<ReplayRecord>, StoreError>;
    /// Every stored replay, oldest first (there are at most
    /// [`super::model::MAX_STORED`]).
    fn replays(&self) -> Result<Vec<ReplayRecord>, StoreError>;
    /// Adds reports of the replay's turns (replacing any of the same index).
    fn put_reports(&self, id: ReplayId, reports: &[TurnReport]) -> Result<(), StoreError>;
    /// Up to `limit` reports after index `after` (from the first if none),
    /// in index order.
    fn reports(
        &self,
        id: ReplayId,
        after: Option<u32>,
        limit: usize,
    ) -> Result<Vec<TurnReport>, StoreError>;
    /// The indices of the turns already reported, in order.
    fn reported(&self, id: ReplayId) -> Result<Vec<u32>, StoreError>;
    /// Drops the replay and its reports; idempotent.
    fn delete_replay(&self, id: ReplayId) -> Result<(), StoreError>;
}
