//! Tokens and the audit trail in tables of their own (the schema's second
//! migration). Each write is committed before it returns (audit entries
//! in the committer's next group, the rest one statement each), so
//! [`AccessStore::flushed`] has nothing left to wait for.

use holarchy_actors::store::DurableFuture;
use holarchy_actors::StoreError;

use super::committer::{Answer, AuditRow};
use super::statements::{bigint, Param};
use super::{backend, PgStore};
use crate::access::{AccessStore, AuditEntry, AuditFuture, QuotaRecord, TokenRecord};
use crate::store::codec::{decode, encode};

/// Entries as the rows of their table; the committer writes them with the
/// group of commits that is next, one statement for the group.
fn audit_rows(entries: &[AuditEntry]) -> Result<Vec<AuditRow>, StoreError> {
    entries
        .iter()
        .map(|entry| Ok((entry.id.to_vec(), encode("audit", entry)?)))
        .collect()
}

/// The tables of this module: migration 2.
pub(super) const TABLES: &str = r#"
CREATE TABLE tokens (
    id          text COLLATE "C" PRIMARY KEY,
    value       bytea NOT NULL
);

-- Ids are ULIDs as 16 bytes: their order is the entries' time order.
CREATE TABLE audit (
    id          bytea PRIMARY KEY,
    value       bytea NOT NULL
);
"#;

/// Migration 3.
pub(super) const QUOTAS: &str = r#"
CREATE TABLE quotas (
    namespace   text COLLATE "C" PRIMARY KEY,
    value       bytea NOT NULL
);
"#;

fn bytes(value: Vec<u8>) -> Param {
    Box::new(value)
}

/// Each row's first column decoded: the value of a record of `table`.
pub(super) fn values<T: serde::de::DeserializeOwned>(
    rows: &[tokio_postgres::Row],
    table: &'static str,
) -> Result<Vec<T>, StoreError> {
    rows.iter()
        .map(|row| {
            let value: Vec<u8> = row.try_get(0).map_err(backend)?;
            decode(table, &value)
        })
        .collect()
}

/// Absent bounds as ids no entry has: every id sorts between them.
const LOWEST: [u8; 16] = [0; 16];
const HIGHEST: [u8; 16] = [0xff; 16];

impl AccessStore for PgStore {
    fn put_token(&self, token: &TokenRecord) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO tokens (id, value) VALUES ($1, $2) \
             ON CONFLICT (id) DO UPDATE SET value = excluded.value",
            vec![Box::new(token.id.clone()), bytes(encode("tokens", token)?)],
        )
        .map(drop)
    }

    fn token(&self, id: &str) -> Result<Option<TokenRecord>, StoreError> {
        let rows = self.rows(
            "SELECT value FROM tokens WHERE id = $1",
            vec![Box::new(id.to_owned())],
        )?;
        Ok(values(&rows, "tokens")?.into_iter().next())
    }

    fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        let rows = self.rows("SELECT value FROM tokens ORDER BY id", Vec::new())?;
        values(&rows, "tokens")
    }

    fn put_quota(&self, namespace: &str, quota: Option<&QuotaRecord>) -> Result<(), StoreError> {
        match quota {
            Some(quota) => self.execute(
                "INSERT INTO quotas (namespace, value) VALUES ($1, $2) \
                 ON CONFLICT (namespace) DO UPDATE SET value = excluded.value",
                vec![
                    Box::new(namespace.to_owned()),
                    bytes(encode("quotas", quota)?),
                ],
            ),
            None => self.execute(
                "DELETE FROM quotas WHERE namespace = $1",
                vec![Box::new(namespace.to_owned())],
            ),
        }
        .map(drop)
    }

    fn quotas(&self) -> Result<Vec<QuotaRecord>, StoreError> {
        let rows = self.rows("SELECT value FROM quotas ORDER BY namespace", Vec::new())?;
        values(&rows, "quotas")
    }

    fn append_audit(&self, entries: &[AuditEntry]) -> Result<u64, StoreError> {
        let rows = audit_rows(entries)?;
        // A std channel: the caller may be a runtime's worker.
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        self.send_audit(rows, Answer::Blocking(answer));
        answered
            .recv()
            .unwrap_or(Err(StoreError::Closed))
            .map(|()| 0)
    }

    fn append_audit_queued(&self, entries: &[AuditEntry]) -> Option<AuditFuture> {
        let rows = match audit_rows(entries) {
            Ok(rows) => rows,
            Err(err) => return Some(Box::pin(std::future::ready(Err(err)))),
        };
        let (answer, answered) = tokio::sync::oneshot::channel();
        self.send_audit(rows, Answer::Waiting(answer));
        Some(Box::pin(async move {
            answered.await.unwrap_or(Err(StoreError::Closed))
        }))
    }

    fn audit_range(
        &self,
        after: Option<[u8; 16]>,
        before: Option<[u8; 16]>,
        limit: usize,
        descending: bool,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let params = vec![
            bytes(after.unwrap_or(LOWEST).to_vec()),
            bytes(before.unwrap_or(HIGHEST).to_vec()),
            Box::new(bigint(limit as u64)),
        ];
        // The absent bounds are ids themselves: one that is exactly all
        // zeroes or all ones is not a ULID a clock makes.
        let rows = if descending {
            self.rows(
                "SELECT value FROM audit WHERE id > $1 AND id < $2 ORDER BY id DESC LIMIT $3",
                params,
            )?
        } else {
            self.rows(
                "SELECT value FROM audit WHERE id > $1 AND id < $2 ORDER BY id LIMIT $3",
                params,
            )?
        };
        values(&rows, "audit")
    }

    fn trim_audit(&self, before: [u8; 16], limit: usize) -> Result<usize, StoreError> {
        let removed = self.execute(
            "DELETE FROM audit WHERE id IN \
             (SELECT id FROM audit WHERE id < $1 ORDER BY id LIMIT $2)",
            vec![bytes(before.to_vec()), Box::new(bigint(limit as u64))],
        )?;
        Ok(removed as usize)
    }

    fn flushed(&self) -> DurableFuture {
        Box::pin(std::future::ready(Ok(())))
    }

    fn flushed_through(&self, _mark: u64) -> DurableFuture {
        Box::pin(std::future::ready(Ok(())))
    }

    fn shares_flushes(&self) -> bool {
        false
    }
}
