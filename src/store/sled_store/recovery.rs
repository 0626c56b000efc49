//! What a daemon start reads to rebuild the tree: every agent, pending
//! message, running task, cut cleanup and armed wait.
//!
//! A record that cannot be decoded is set aside as damaged, with its tree,
//! key and owner, instead of failing the whole start: one flipped byte
//! must not keep a daemon's healthy agents down.
//!
//! Agents are read on two threads: at a million agents one scan and its
//! decoding took over a second on one thread while the other cores waited.

use std::ops::Bound;

use holarchy_actors::{DamagedRecord, RecoveryInput, StoreError};
use holarchy_supervision::cleanup::CleanupIntent;
use holarchy_supervision::{AgentId, AgentRecord, TaskStatus, WaitRecord, WaitStatus};
use sled::Tree;

use super::{backend, SledStore, CLEANUPS, MESSAGES, TASKS, WAITS};
use crate::store::agent_trees::{AGENTS, PUBLIC_AGENTS};
use crate::store::codec::{decode, decode_agent, decode_task};

/// Everything recovery starts from (see [`holarchy_actors::Reads::recovery_input`]).
pub(super) fn input(store: &SledStore) -> Result<RecoveryInput, StoreError> {
    let mut damaged = Vec::new();
    let mut pending = Vec::new();
    for entry in store.pending.iter() {
        let (key, _) = entry.map_err(backend)?;
        if let Some(bytes) = store.messages.get(&key).map_err(backend)? {
            match decode(MESSAGES, &bytes) {
                Ok(message) => pending.push(message),
                Err(err) => damaged.push(damage(MESSAGES, &key, leading_id(&key), err)),
            }
        }
    }
    let mut running_tasks = Vec::new();
    for entry in store.tasks.iter() {
        let (key, value) = entry.map_err(backend)?;
        match decode_task(TASKS, &value) {
            Ok(task) if task.status == TaskStatus::Running => running_tasks.push(task),
            Ok(_) => {}
            Err(err) => {
                let owner = owner_in_index(&store.owned, &key)?;
                damaged.push(damage(TASKS, &key, owner, err));
            }
        }
    }
    let mut armed_waits = Vec::new();
    for entry in store.waits.iter() {
        let (key, value) = entry.map_err(backend)?;
        match decode::<WaitRecord>(WAITS, &value) {
            Ok(wait) if wait.status == WaitStatus::Armed => armed_waits.push(wait),
            Ok(_) => {}
            Err(err) => {
                let owner = owner_in_index(&store.owned_waits, &key)?;
                damaged.push(damage(WAITS, &key, owner, err));
            }
        }
    }
    // A cut cleanup's record holds the agent it was for: a damaged one
    // names no agent.
    let mut intents = Vec::new();
    for entry in store.cleanups.iter() {
        let (key, value) = entry.map_err(backend)?;
        match decode::<CleanupIntent>(CLEANUPS, &value) {
            Ok(intent) => intents.push(intent),
            Err(err) => damaged.push(damage(CLEANUPS, &key, None, err)),
        }
    }
    let mut agents = all_agents(&store.agents.public, PUBLIC_AGENTS, &mut damaged)?;
    agents.extend(all_agents(&store.agents.private, AGENTS, &mut damaged)?);
    Ok(RecoveryInput {
        agents,
        pending,
        running_tasks,
        intents,
        armed_waits,
        damaged,
    })
}

fn damage(
    tree: &'static str,
    key: &[u8],
    agent_id: Option<AgentId>,
    err: StoreError,
) -> DamagedRecord {
    tracing::error!(tree, key = %hex::encode(key), agent_id = ?agent_id, error = %err, "a record could not be read; set aside");
    DamagedRecord {
        tree,
        key: hex::encode(key),
        agent_id,
        reason: err.to_string(),
    }
}

/// The agent id a key starts with, if it is long enough to hold one.
fn leading_id(key: &[u8]) -> Option<AgentId> {
    let id: [u8; 16] = key.get(..16)?.try_into().ok()?;
    Some(AgentId::from_bytes(id))
}

/// The owner of the record keyed `id` in an `owner ++ id` index: read
/// only for a damaged record, whose own bytes cannot say.
fn owner_in_index(index: &Tree, id: &[u8]) -> Result<Option<AgentId>, StoreError> {
    for entry in index.iter().keys() {
        let key = entry.map_err(backend)?;
        if key.len() == 16 + id.len() && key.ends_with(id) {
            return Ok(leading_id(&key));
        }
    }
    Ok(None)
}

/// Every record of `agents`, in id order. The id space between the first
/// and the last key is cut in two and each half scanned and decoded on a
/// thread of its own. Ids begin with their creation time, so a daemon's
/// agents spread over that range; a lopsided cut costs time, never
/// records.
fn all_agents(
    agents: &Tree,
    name: &'static str,
    damaged: &mut Vec<DamagedRecord>,
) -> Result<Vec<AgentRecord>, StoreError> {
    let first = agents.first().map_err(backend)?;
    let last = agents.last().map_err(backend)?;
    let (Some(first), Some(last)) = (first.and_then(id_key), last.and_then(id_key)) else {
        return read(agents, name, (Bound::Unbounded, Bound::Unbounded)).map(|(records, bad)| {
            damaged.extend(bad);
            records
        });
    };
    let middle = (first / 2 + last / 2).to_be_bytes();
    std::thread::scope(|scope| {
        let upper = std::thread::Builder::new()
            .name("recovery-read".into())
            .spawn_scoped(scope, || {
                read(agents, name, (Bound::Included(middle), Bound::Unbounded))
            })
            .map_err(|err| StoreError::Backend(format!("cannot start a reading thread: {err}")))?;
        let lower = read(agents, name, (Bound::Unbounded, Bound::Excluded(middle)));
        // Joined before either result is looked at: a scope whose thread
        // panicked and was never joined would panic itself.
        let upper = upper.join();
        let (mut records, bad) = lower?;
        damaged.extend(bad);
        let (more, bad) =
            upper.map_err(|_| StoreError::Backend("the reading thread panicked".into()))??;
        records.extend(more);
        damaged.extend(bad);
        Ok(records)
    })
}

/// A key as the id it holds, if it is one (16 bytes).
fn id_key((key, _): (sled::IVec, sled::IVec)) -> Option<u128> {
    <[u8; 16]>::try_from(key.as_ref())
        .ok()
        .map(u128::from_be_bytes)
}

/// The records of `range`, and those of it that could not be decoded.
fn read(
    agents: &Tree,
    name: &'static str,
    range: (Bound<[u8; 16]>, Bound<[u8; 16]>),
) -> Result<(Vec<AgentRecord>, Vec<DamagedRecord>), StoreError> {
    let mut records = Vec::new();
    let mut damaged = Vec::new();
    for entry in agents.range(range) {
        let (key, value) = entry.map_err(backend)?;
        match decode_agent(name, &value) {
            Ok(record) => records.push(record),
            Err(err) => damaged.push(damage(name, &key, leading_id(&key), err)),
        }
    }
    Ok((records, damaged))
}

#[cfg(test)]
mod tests {
    use holarchy_actors::{Reads, Store};
    use holarchy_supervision::AgentId;

    use super::super::tests::{agent, created};
    use super::super::{SledStore, StoreConfig};

    #[tokio::test]
    async fn both_halves_together_hold_every_agent_once_in_id_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
        assert!(store.recovery_input().expect("reads").agents.is_empty());
        let mut ids = Vec::new();
        for i in 0..300u128 {
            let mut record = agent(&format!("a{i}"));
            // Ids at both ends of the space and between, so the cut falls
            // among them and an id on it is read once.
            record.id = AgentId::from_u128(match i {
                0 => 0,
                1 => u128::MAX,
                2 => u128::MAX / 2,
                _ => i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835),
            });
            store.commit(created(&record)).expect("creates");
            ids.push(record.id);
        }
        ids.sort();
        let read: Vec<AgentId> = store
            .recovery_input()
            .expect("reads")
            .agents
            .iter()
            .map(|a| a.id)
            .collect();
        assert_eq!(read, ids);
    }
}
