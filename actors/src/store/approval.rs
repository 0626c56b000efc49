//! Where parked tool calls are kept. Apart from the batch path, like
//! instances: each change of an approval is a compare-and-swap on its
//! status, so an approval is decided once and run at most once, however
//! many operators press the button.

use holarchy_composition::approval::{ApprovalRecord, ApprovalStatus};
use holarchy_supervision::{AgentId, ApprovalId};

use super::StoreError;

pub trait ApprovalStore: Send + Sync {
    fn approval(&self, id: ApprovalId) -> Result<Option<ApprovalRecord>, StoreError>;
    /// Approvals, oldest first, at most `limit`: one agent's (by its
    /// index) or every agent's, decided ones included (history).
    fn approvals(
        &self,
        agent: Option<AgentId>,
        limit: usize,
    ) -> Result<Vec<ApprovalRecord>, StoreError>;
    /// Open approvals, oldest first, at most `limit`: those not yet
    /// decided, or decided and not yet told to their agent. Kept in an
    /// index of their own, so however long the history grows, what an
    /// operator must act on (and what a start must finish) is found
    /// without reading it.
    fn open_approvals(
        &self,
        agent: Option<AgentId>,
        limit: usize,
    ) -> Result<Vec<ApprovalRecord>, StoreError>;
    /// Stores a new approval; fails with [`StoreError::Precondition`] if
    /// its id is taken.
    fn insert_approval(&self, record: &ApprovalRecord) -> Result<(), StoreError>;
    /// Replaces an approval whose stored status is still `expect`;
    /// [`StoreError::Precondition`] otherwise (someone else decided it).
    fn swap_approval(
        &self,
        expect: &ApprovalStatus,
        new: &ApprovalRecord,
    ) -> Result<(), StoreError>;
}
