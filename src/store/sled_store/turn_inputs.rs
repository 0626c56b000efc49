//! Recorded turn inputs in their own trees, outside the batch path: a
//! record per turn of a brain that reads context, keyed by agent then run
//! (so an agent's are in time order), the role and catalog they share kept
//! once by digest, and an index of which records use which digest, so a
//! start can drop the shared parts no record uses any more.

use holarchy_actors::{SharedInput, StoreError, TurnInputRecord, TurnInputs};
use holarchy_supervision::{AgentId, RunId};
use sled::Tree;

use super::{backend, pair_key, SledStore, TURN_INPUTS, TURN_SHARED};
use crate::store::codec::{decode, encode};

fn ref_key(digest: &str, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(digest.len() + 1 + key.len());
    out.extend_from_slice(digest.as_bytes());
    out.push(0);
    out.extend_from_slice(key);
    out
}

impl SledStore {
    /// Drops the agent's records past its newest `keep`.
    fn prune_turn_inputs(&self, agent_id: AgentId, keep: usize) -> Result<(), StoreError> {
        let old: Vec<_> = self
            .turn_inputs
            .scan_prefix(agent_id.to_bytes())
            .rev()
            .skip(keep)
            .collect::<Result<_, _>>()
            .map_err(backend)?;
        for (key, value) in old {
            self.drop_turn_input(&key, &value)?;
        }
        Ok(())
    }

    fn drop_turn_input(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.turn_inputs.remove(key).map_err(backend)?;
        // A record that does not decode has no reference worth keeping.
        if let Ok(record) = decode::<TurnInputRecord>(TURN_INPUTS, value) {
            self.turn_shared_refs
                .remove(ref_key(&record.shared, key))
                .map_err(backend)?;
        }
        Ok(())
    }
}

/// Drops the shared parts no record uses; run at open, before any turn
/// can record one.
pub(super) fn sweep_shared(shared: &Tree, refs: &Tree) -> Result<usize, StoreError> {
    let mut dropped = 0;
    for key in shared.iter().keys() {
        let digest = key.map_err(backend)?;
        let mut prefix = digest.to_vec();
        prefix.push(0);
        if refs.scan_prefix(&prefix).next().is_none() {
            shared.remove(&digest).map_err(backend)?;
            dropped += 1;
        }
    }
    Ok(dropped)
}

impl TurnInputs for SledStore {
    fn put_turn_input(
        &self,
        agent_id: AgentId,
        run_id: RunId,
        record: &TurnInputRecord,
        shared: Option<&SharedInput>,
        keep: usize,
    ) -> Result<(), StoreError> {
        let key = pair_key(agent_id, &run_id.to_bytes());
        let value = encode(TURN_INPUTS, record)?;
        let shared = shared.map(|s| encode(TURN_SHARED, s)).transpose()?;
        // Counted as a write, so the next `durable()` flushes it.
        self.group.begin_write();
        let written = (|| {
            if let Some(bytes) = shared {
                self.turn_shared
                    .insert(record.shared.as_bytes(), bytes)
                    .map_err(backend)?;
            }
            // The reference before the record: a crash between them leaves
            // a reference too many, which keeps a shared part, never one
            // too few, which would lose it.
            self.turn_shared_refs
                .insert(ref_key(&record.shared, &key), &[])
                .map_err(backend)?;
            self.turn_inputs.insert(&key, value).map_err(backend)?;
            // A walk of the newest `keep` keys, per turn of a brain that
            // reads context (a process or a model call each): cheap beside it.
            self.prune_turn_inputs(agent_id, keep)
        })();
        self.group.end_write();
        written
    }

    fn turn_input(
        &self,
        agent_id: AgentId,
        run_id: RunId,
    ) -> Result<Option<TurnInputRecord>, StoreError> {
        let key = pair_key(agent_id, &run_id.to_bytes());
        match self.turn_inputs.get(key).map_err(backend)? {
            Some(bytes) => decode(TURN_INPUTS, &bytes).map(Some),
            None => Ok(None),
        }
    }

    fn shared_input(&self, digest: &str) -> Result<Option<SharedInput>, StoreError> {
        match self.turn_shared.get(digest.as_bytes()).map_err(backend)? {
            Some(bytes) => decode(TURN_SHARED, &bytes).map(Some),
            None => Ok(None),
        }
    }

    fn forget_turn_inputs(&self, agent_id: AgentId) -> Result<(), StoreError> {
        self.group.begin_write();
        let dropped = self.prune_turn_inputs(agent_id, 0);
        self.group.end_write();
        dropped
    }
}
