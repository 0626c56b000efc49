//! Reading every agent record at start, on the path from a crash to
//! serving: at a million agents the one scan and its decoding took over a
//! second on one thread while the other cores waited.

use std::ops::Bound;

use holarchy_actors::StoreError;
use holarchy_supervision::AgentRecord;
use sled::Tree;

use super::backend;
use crate::store::codec::decode_agent;

/// Every record of `agents`, in id order. The id space between the first
/// and the last key is cut in two and each half scanned and decoded on a
/// thread of its own. Ids begin with their creation time, so a daemon's
/// agents spread over that range; a lopsided cut costs time, never
/// records.
pub(super) fn all_agents(
    agents: &Tree,
    name: &'static str,
) -> Result<Vec<AgentRecord>, StoreError> {
    let first = agents.first().map_err(backend)?;
    let last = agents.last().map_err(backend)?;
    let (Some(first), Some(last)) = (first.and_then(id_key), last.and_then(id_key)) else {
        return read(agents, name, (Bound::Unbounded, Bound::Unbounded));
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
        let mut records = lower?;
        records
            .extend(upper.map_err(|_| StoreError::Backend("the reading thread panicked".into()))??);
        Ok(records)
    })
}

/// A key as the id it holds, if it is one (16 bytes).
fn id_key((key, _): (sled::IVec, sled::IVec)) -> Option<u128> {
    <[u8; 16]>::try_from(key.as_ref())
        .ok()
        .map(u128::from_be_bytes)
}

fn read(
    agents: &Tree,
    name: &'static str,
    range: (Bound<[u8; 16]>, Bound<[u8; 16]>),
) -> Result<Vec<AgentRecord>, StoreError> {
    agents
        .range(range)
        .map(|entry| decode_agent(name, &entry.map_err(backend)?.1))
        .collect()
}

#[cfg(test)]
mod tests {
    use holarchy_actors::Store;
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
