//! Records a daemon start could not read. The agent a damaged record
//! belongs to is not started and is marked failed with the reason; its
//! descendants are held down with it (neither started without their
//! supervisor nor archived as orphans), and every other agent serves.
//! The damaged bytes stay where they are, for a restore from a backup, so
//! each start finds and reports them again.

use std::collections::HashSet;

use holarchy_supervision::recovery::hold_subtrees;
use holarchy_supervision::{AgentId, EventKind, LifecycleState};
use tracing::warn;

use crate::now_ms;
use crate::store::{Batch, DamagedRecord, RecoveryInput, Write};

/// The reason a damaged record's agent is failed with, first in its
/// state change's reason.
pub const DAMAGED_RECORD: &str = "damaged_record";

/// Damaged records the status lists; the rest are counted.
pub const MAX_KEPT: usize = 100;

/// Damaged records one agent's failure reason names; the rest are counted,
/// so an agent with thousands of damaged messages gets a reason of a
/// readable size.
const NAMED_PER_AGENT: usize = 3;

/// Takes the agents `input.damaged` names (and their descendants) out of
/// recovery. Returns the batch that marks the live ones failed and every
/// agent kept down.
pub(super) fn set_aside(input: &mut RecoveryInput) -> (Batch, HashSet<AgentId>) {
    let mut batch = Batch::new();
    if input.damaged.is_empty() {
        return (batch, HashSet::new());
    }
    let mut named: HashSet<AgentId> = HashSet::new();
    for record in &input.damaged {
        if let Some(agent_id) = record.agent_id {
            named.insert(agent_id);
        }
    }
    let now = now_ms();
    for agent in input.agents.iter_mut() {
        if !named.contains(&agent.id) || !agent.state.is_live() {
            continue;
        }
        let reason = reason_for(agent.id, &input.damaged);
        warn!(agent_id = %agent.id, %reason, "agent not started: one of its records is damaged");
        agent.state = LifecycleState::Failed;
        agent.updated_at_ms = now;
        batch = batch.write(Write::PutAgent(agent.clone())).event(
            agent.id,
            EventKind::AgentStateChanged {
                state: LifecycleState::Failed,
                reason,
            },
        );
    }
    let descendants = hold_subtrees(&mut input.agents, &named);
    if !descendants.is_empty() {
        warn!(
            held = descendants.len(),
            "agents held down with a supervisor whose records are damaged"
        );
    }
    let mut held = named;
    held.extend(descendants);
    // Their tasks and waits are left as they are, for when the damage is
    // repaired: not failed or cancelled for an owner that never came.
    input
        .running_tasks
        .retain(|t| !held.contains(&t.owner_agent_id));
    input
        .armed_waits
        .retain(|w| !held.contains(&w.owner_agent_id));
    (batch, held)
}

/// What an operator reads on the failed agent: which record, and why.
fn reason_for(agent_id: AgentId, damaged: &[DamagedRecord]) -> String {
    let mut reason = String::from(DAMAGED_RECORD);
    let mut its = damaged.iter().filter(|r| r.agent_id == Some(agent_id));
    for record in its.by_ref().take(NAMED_PER_AGENT) {
        reason.push_str(&format!(
            ": {} record {} cannot be read ({})",
            record.tree, record.key, record.reason
        ));
    }
    let more = its.count();
    if more > 0 {
        reason.push_str(&format!(" (and {more} more of its records)"));
    }
    reason.push_str("; restore it from a backup, or archive the agent");
    reason
}
