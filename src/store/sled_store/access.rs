//! Tokens and the audit trail in trees of their own, outside the batch
//! path: each write is one insert, counted so the next flush covers it.

use holarchy_actors::store::DurableFuture;
use holarchy_actors::{Store as _, StoreError};

use super::{backend, id_from_key, SledStore, AUDIT, QUOTAS, TOKENS};
use crate::access::{AccessStore, AuditEntry, QuotaRecord, TokenRecord};
use crate::store::codec::{decode, encode};

impl SledStore {
    /// Runs `write` counted as a write, so the next `durable()` flushes it.
    pub(super) fn counted<T>(
        &self,
        write: impl FnOnce() -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.group.begin_write();
        let done = write();
        self.group.end_write();
        done
    }
}

impl AccessStore for SledStore {
    fn put_token(&self, token: &TokenRecord) -> Result<(), StoreError> {
        let value = encode(TOKENS, token)?;
        self.counted(|| {
            self.tokens
                .insert(token.id.as_bytes(), value)
                .map(drop)
                .map_err(backend)
        })
    }

    fn token(&self, id: &str) -> Result<Option<TokenRecord>, StoreError> {
        match self.tokens.get(id.as_bytes()).map_err(backend)? {
            Some(bytes) => decode(TOKENS, &bytes).map(Some),
            None => Ok(None),
        }
    }

    fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        self.tokens
            .iter()
            .map(|entry| decode(TOKENS, &entry.map_err(backend)?.1))
            .collect()
    }

    fn put_quota(&self, namespace: &str, quota: Option<&QuotaRecord>) -> Result<(), StoreError> {
        let value = quota.map(|quota| encode(QUOTAS, quota)).transpose()?;
        self.counted(|| {
            match value {
                Some(value) => self.quotas.insert(namespace.as_bytes(), value),
                None => self.quotas.remove(namespace.as_bytes()),
            }
            .map(drop)
            .map_err(backend)
        })
    }

    fn quotas(&self) -> Result<Vec<QuotaRecord>, StoreError> {
        self.quotas
            .iter()
            .map(|entry| decode(QUOTAS, &entry.map_err(backend)?.1))
            .collect()
    }

    fn append_audit(&self, entries: &[AuditEntry]) -> Result<u64, StoreError> {
        self.group.begin_write();
        // One entry (every call's case) by a plain insert: sled's batch
        // takes its global lock for writing and writes out its log buffer,
        // which cost each audited call several system calls and held up
        // every reader (a helper's strace: 4.6 buffer writes per turn).
        let applied = match entries {
            [entry] => encode(AUDIT, entry).and_then(|value| {
                self.audit
                    .insert(entry.id, value)
                    .map(drop)
                    .map_err(backend)
            }),
            _ => entries
                .iter()
                .try_fold(sled::Batch::default(), |mut batch, entry| {
                    batch.insert(&entry.id, encode(AUDIT, entry)?);
                    Ok(batch)
                })
                .and_then(|batch| self.audit.apply_batch(batch).map_err(backend)),
        };
        let mark = self.group.end_write_marked();
        applied.map(|()| mark)
    }

    fn audit_range(
        &self,
        after: Option<[u8; 16]>,
        before: Option<[u8; 16]>,
        limit: usize,
        descending: bool,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        use std::ops::Bound;
        let low = after.map_or(Bound::Unbounded, |id| Bound::Excluded(id.to_vec()));
        let high = before.map_or(Bound::Unbounded, |id| Bound::Excluded(id.to_vec()));
        if after.is_some_and(|a| before.is_some_and(|b| a >= b)) {
            return Ok(Vec::new());
        }
        let range = self.audit.range::<Vec<u8>, _>((low, high));
        let read = |entry: Result<(sled::IVec, sled::IVec), sled::Error>| {
            let (key, value) = entry.map_err(backend)?;
            id_from_key::<16>(AUDIT, &key)?;
            decode::<AuditEntry>(AUDIT, &value)
        };
        if descending {
            range.rev().take(limit).map(read).collect()
        } else {
            range.take(limit).map(read).collect()
        }
    }

    fn trim_audit(&self, before: [u8; 16], limit: usize) -> Result<usize, StoreError> {
        let mut batch = sled::Batch::default();
        let mut removed = 0;
        for entry in self.audit.range(..before.to_vec()).take(limit) {
            let (key, _) = entry.map_err(backend)?;
            batch.remove(key);
            removed += 1;
        }
        if removed > 0 {
            self.counted(|| self.audit.apply_batch(batch).map_err(backend))?;
        }
        Ok(removed)
    }

    fn flushed(&self) -> DurableFuture {
        self.durable()
    }

    fn flushed_through(&self, mark: u64) -> DurableFuture {
        self.group.durable_through(mark)
    }

    fn shares_flushes(&self) -> bool {
        true
    }
}
