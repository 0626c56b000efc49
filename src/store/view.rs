//! What an operator's read of one agent, or of a page of agents, needs
//! beside the records: read together, so a store behind a network answers
//! it in one round trip instead of one per part.

use holarchy_actors::{MemorySize, StoreError};
use holarchy_supervision::{AgentRecord, UsageTotals, WaitRecord, WorkItemRecord};

/// One agent as `GetAgent` shows it.
#[derive(Debug)]
pub struct AgentView {
    pub record: AgentRecord,
    pub usage: Option<UsageTotals>,
    /// Apart from the rest: a memory that cannot be counted leaves its
    /// figures out rather than hiding the agent.
    pub memory: Result<MemorySize, StoreError>,
    pub waits: Vec<WaitRecord>,
    pub work_items: Vec<WorkItemRecord>,
}

/// What a summary shows beside an agent's record: its waits and its work
/// items, oldest first.
pub type Beside = (Vec<WaitRecord>, Vec<WorkItemRecord>);
