//! Approvals in their own tree, each change a compare-and-swap on the
//! stored bytes after checking the stored status, so two operators
//! deciding one approval cannot both win. An index by agent lists one
//! agent's approvals without a scan of everyone's.

use holarchy_actors::{ApprovalStore, StoreError};
use holarchy_composition::approval::{ApprovalRecord, ApprovalStatus};
use holarchy_supervision::{AgentId, ApprovalId};

use super::{backend, pair_key, SledStore, APPROVALS};
use crate::store::codec::{decode_approval as decode, encode_approval};

/// An approval of a listing, or `None` for one that cannot be read: a
/// damaged record must not hide every other approval, nor stop the
/// daemon's start (which closes and tells them from this listing).
fn listable(bytes: &[u8]) -> Result<Option<ApprovalRecord>, StoreError> {
    match decode(APPROVALS, bytes) {
        Ok(record) => Ok(Some(record)),
        Err(err @ (StoreError::Corrupt { .. } | StoreError::UnsupportedVersion { .. })) => {
            tracing::error!(error = %err, "a damaged approval record left out of a listing");
            Ok(None)
        }
        Err(err) => Err(err),
    }
}

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
                        out.extend(listable(&bytes)?);
                    }
                }
            }
            None => {
                for entry in self.approvals.iter().take(limit) {
                    out.extend(listable(&entry.map_err(backend)?.1)?);
                }
            }
        }
        Ok(out)
    }

    fn open_approvals(
        &self,
        agent: Option<AgentId>,
        limit: usize,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        let keys = match agent {
            Some(agent) => self.open_approvals.scan_prefix(agent.to_bytes()),
            None => self.open_approvals.iter(),
        };
        let mut out = Vec::new();
        for entry in keys.take(limit) {
            let (key, _) = entry.map_err(backend)?;
            let Some(id) = key.get(16..) else { continue };
            if let Some(bytes) = self.approvals.get(id).map_err(backend)? {
                out.extend(listable(&bytes)?);
            }
        }
        Ok(out)
    }

    fn insert_approval(&self, record: &ApprovalRecord) -> Result<(), StoreError> {
        let value = encode_approval(APPROVALS, record)?;
        let id = record.id.to_bytes();
        self.group.begin_write();
        let inserted = self
            .approvals
            .compare_and_swap(id, None::<&[u8]>, Some(value))
            .map_err(backend)
            .and_then(|swapped| {
                // Indexed after the record: an index entry always has one.
                let key = pair_key(record.agent_id, &id);
                self.agent_approvals
                    .insert(key.as_slice(), &[] as &[u8])
                    .map_err(backend)?;
                self.open_approvals
                    .insert(key, &[] as &[u8])
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
            Some(bytes) => decode(APPROVALS, bytes)?.status,
            None => return Err(StoreError::Precondition(format!("no approval {}", new.id))),
        };
        if &stored != expect {
            return Err(decided(new.id, &stored));
        }
        let value = encode_approval(APPROVALS, new)?;
        self.group.begin_write();
        let swapped = self
            .approvals
            .compare_and_swap(id, old, Some(value))
            .map_err(backend)
            .and_then(|swapped| {
                // Closed once decided and told: out of the open index
                // (after the record, so an open entry always has one).
                if swapped.is_ok() && new.status.is_decided() && new.delivered {
                    self.open_approvals
                        .remove(pair_key(new.agent_id, &id))
                        .map_err(backend)?;
                }
                Ok(swapped)
            });
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

#[cfg(test)]
mod tests {
    use holarchy_supervision::workspace::Place;
    use holarchy_supervision::RunId;

    use super::super::{SledStore, StoreConfig};
    use super::*;

    fn parked(agent: AgentId) -> ApprovalRecord {
        ApprovalRecord {
            id: ApprovalId::generate(),
            agent_id: agent,
            instance: None,
            run_id: RunId::generate(),
            tool: "ExecCommand".into(),
            input: "{}".into(),
            layer: "config".into(),
            status: ApprovalStatus::Pending,
            delivered: false,
            created_at_ms: 1,
            decided_at_ms: None,
            place: Some(Place {
                workspace_id: "agent_home".into(),
                dir: "/parked/here".into(),
            }),
        }
    }

    #[tokio::test]
    async fn an_approval_is_decided_once_and_leaves_the_open_index_when_told() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
        let agent = AgentId::generate();
        let record = parked(agent);
        store.insert_approval(&record).expect("inserted");
        assert!(
            store.insert_approval(&record).is_err(),
            "an id is taken once"
        );
        let denied = ApprovalRecord {
            status: ApprovalStatus::Denied {
                reason: "no".into(),
            },
            ..record.clone()
        };
        store
            .swap_approval(&ApprovalStatus::Pending, &denied)
            .expect("decided");
        let approved = ApprovalRecord {
            status: ApprovalStatus::Running,
            ..record.clone()
        };
        assert!(
            matches!(
                store.swap_approval(&ApprovalStatus::Pending, &approved),
                Err(StoreError::Precondition(_))
            ),
            "a decided approval is not decided again"
        );
        // Decided but not told: still open, so a start tells it.
        assert_eq!(
            store.open_approvals(Some(agent), 10).expect("open").len(),
            1
        );
        let told = ApprovalRecord {
            delivered: true,
            ..denied.clone()
        };
        store.swap_approval(&denied.status, &told).expect("told");
        assert!(store
            .open_approvals(Some(agent), 10)
            .expect("open")
            .is_empty());
        assert!(store.open_approvals(None, 10).expect("open").is_empty());
        assert_eq!(store.approvals(Some(agent), 10).expect("history"), [told]);
    }

    #[tokio::test]
    async fn a_damaged_approval_is_left_out_of_listings_not_fatal_to_them() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
        let agent = AgentId::generate();
        let damaged = parked(agent);
        let whole = parked(agent);
        store.insert_approval(&damaged).expect("inserted");
        store.insert_approval(&whole).expect("inserted");
        // Bytes cut in half, as a disk might leave them.
        let key = damaged.id.to_bytes();
        let bytes = store.approvals.get(key).expect("reads").expect("there");
        store
            .approvals
            .insert(key, &bytes[..bytes.len() / 2])
            .expect("cut");
        assert_eq!(
            store.open_approvals(None, 10).expect("open"),
            std::slice::from_ref(&whole)
        );
        assert_eq!(store.approvals(Some(agent), 10).expect("history"), [whole]);
    }
}
