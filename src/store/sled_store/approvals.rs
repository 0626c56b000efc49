//! Approvals in their own tree, each change a compare-and-swap on the
//! stored bytes after checking the stored status, so two operators
//! deciding one approval cannot both win. An index by agent lists one
//! agent's approvals without a scan of everyone's.

use holarchy_actors::{ApprovalStore, StoreError};
use holarchy_composition::approval::{ApprovalRecord, ApprovalStatus};
use holarchy_supervision::{AgentId, ApprovalId};

use super::{backend, pair_key, SledStore, APPROVALS};
use crate::store::codec::{decode, encode};

impl ApprovalStore for SledStore {
    fn approval(&self, id: ApprovalId) -> Result<Option<ApprovalRecord>, StoreError> {
        match self.approvals.get(id.to_bytes()).map_err(backend)? {
            Some(bytes) => decode(APPROVALS, &bytes).map(Some),
            None => Ok(None),
        }
    }

    fn approvals(
        &self,
        agent: Option<AgentId>,
        limit: usize,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        let mut out = Vec::new();
        match agent {
            Some(agent) => {
                for entry in self
                    .agent_approvals
                    .scan_prefix(agent.to_bytes())
                    .take(limit)
                {
                    let (key, _) = entry.map_err(backend)?;
                    let Some(id) = key.get(16..) else { continue };
                    if let Some(bytes) = self.approvals.get(id).map_err(backend)? {
                        out.push(decode(APPROVALS, &bytes)?);
                    }
                }
            }
            None => {
                for entry in self.approvals.iter().take(limit) {
                    out.push(decode(APPROVALS, &entry.map_err(backend)?.1)?);
                }
            }
        }
        Ok(out)
    }

    fn insert_approval(&self, record: &ApprovalRecord) -> Result<(), StoreError> {
        let value = encode(APPROVALS, record)?;
        let id = record.id.to_bytes();
        self.group.begin_write();
        let inserted = self
            .approvals
            .compare_and_swap(id, None::<&[u8]>, Some(value))
            .map_err(backend)
            .and_then(|swapped| {
                // Indexed after the record: an index entry always has one.
                self.agent_approvals
                    .insert(pair_key(record.agent_id, &id), &[] as &[u8])
                    .map_err(backend)?;
                Ok(swapped)
            });
        self.group.end_write();
        match inserted? {
            Ok(()) => Ok(()),
            Err(_) => Err(StoreError::Precondition(format!(
                "approval {} exists",
                record.id
            ))),
        }
    }

    fn swap_approval(
        &self,
        expect: &ApprovalStatus,
        new: &ApprovalRecord,
    ) -> Result<(), StoreError> {
        let id = new.id.to_bytes();
        let old = self.approvals.get(id).map_err(backend)?;
        let stored = match &old {
            Some(bytes) => decode::<ApprovalRecord>(APPROVALS, bytes)?.status,
            None => return Err(StoreError::Precondition(format!("no approval {}", new.id))),
        };
        if &stored != expect {
            return Err(decided(new.id, &stored));
        }
        let value = encode(APPROVALS, new)?;
        self.group.begin_write();
        let swapped = self
            .approvals
            .compare_and_swap(id, old, Some(value))
            .map_err(backend);
        self.group.end_write();
        match swapped? {
            Ok(()) => Ok(()),
            Err(_) => Err(decided(new.id, &stored)),
        }
    }
}

fn decided(id: ApprovalId, status: &ApprovalStatus) -> StoreError {
    StoreError::Precondition(format!("approval {id} is already {}", status.name()))
}
