//! `DeleteAgent`: which records an `agent delete` purges (an archived
//! public agent and its private descendants, as the store holds them) and
//! the runtime's one commit of their purge. Only archived agents: their
//! actors are gone and their subtree was cleaned up when they were
//! archived, so nothing running refers to them.

use std::collections::{HashMap, HashSet};

use holarchy_supervision::{AgentId, AgentRecord, LifecycleState, Visibility};

use super::AgentApi;
use crate::api::convert::ApiError;
use crate::api::read_model::ReadModel;

/// Agents read per page while looking for descendants.
const PAGE: usize = 1000;

/// Purges `agent_id` and its private descendants; how many agents went.
pub(super) async fn delete(api: &AgentApi, agent_id: AgentId) -> Result<usize, ApiError> {
    let root = api.record(agent_id)?;
    if root.profile.visibility != Visibility::Public {
        return Err(ApiError::FailedPrecondition(format!(
            "agent {agent_id} is private: it is deleted with its public ancestor"
        )));
    }
    if root.state != LifecycleState::Archived {
        return Err(ApiError::FailedPrecondition(format!(
            "agent {agent_id} is {}: only an archived agent can be deleted (archive it first)",
            root.state.name()
        )));
    }
    let mut records = vec![root];
    for id in private_descendants(api.store.as_ref(), agent_id)? {
        // Gone meanwhile (another delete): nothing left to purge.
        if let Some(record) = api.store.agent(id)? {
            records.push(record);
        }
    }
    let count = records.len();
    api.runtime
        .delete_archived(records)
        .await
        .map_err(ApiError::from)?;
    Ok(count)
}

/// Every private agent below `root`, by supervisor (or, for one no
/// longer supervised, by lineage). Only ids are kept while the store is
/// read, so a daemon of a million agents costs tens of megabytes here,
/// not a million records.
fn private_descendants(store: &dyn ReadModel, root: AgentId) -> Result<Vec<AgentId>, ApiError> {
    let mut children: HashMap<AgentId, Vec<AgentId>> = HashMap::new();
    let mut after = None;
    loop {
        let page = store.list_agents(after, PAGE, true)?;
        let Some(last) = page.last() else {
            break;
        };
        after = Some(last.id);
        for record in &page {
            if record.profile.visibility != Visibility::Private {
                continue;
            }
            if let Some(parent) = parent(record) {
                children.entry(parent).or_default().push(record.id);
            }
        }
    }
    let mut seen = HashSet::from([root]);
    let mut found = Vec::new();
    let mut next = vec![root];
    while let Some(id) = next.pop() {
        for child in children.remove(&id).unwrap_or_default() {
            if seen.insert(child) {
                found.push(child);
                next.push(child);
            }
        }
    }
    Ok(found)
}

fn parent(record: &AgentRecord) -> Option<AgentId> {
    record
        .supervisor_agent_id
        .or(record.lineage_parent_agent_id)
}
