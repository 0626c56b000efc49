//! Recorded turn inputs, outside the batch path: one row per turn of a
//! brain that reads context, the role and catalog they share once by
//! digest. A record, its shared part and the drop of the agent's oldest
//! go in one transaction of their own.

use holarchy_actors::{SharedInput, StoreError, TurnInputRecord, TurnInputs};
use holarchy_supervision::{AgentId, RunId};

use super::access::values;
use super::statements::bigint;
use super::{backend, PgStore};
use crate::store::codec::encode;

/// The tables of this module (migration 6).
pub(super) const TABLES: &str = r#"
CREATE TABLE turn_inputs (
    agent_id    bytea NOT NULL,
    run_id      bytea NOT NULL,
    shared      text NOT NULL,
    value       bytea NOT NULL,
    PRIMARY KEY (agent_id, run_id)
);
CREATE INDEX turn_inputs_shared ON turn_inputs (shared);

-- A role and catalog recorded turns share; `written_ms` is when a daemon
-- last wrote it, which keeps a part a daemon believes written from the
-- sweep of those no record uses.
CREATE TABLE turn_shared (
    digest      text COLLATE "C" PRIMARY KEY,
    written_ms  bigint NOT NULL,
    value       bytea NOT NULL
);
"#;

/// How long a shared part no record uses is kept: far longer than a daemon
/// trusts its memory that it wrote one ([`holarchy_actors::turn`]).
const UNUSED_KEPT_MS: u64 = 24 * 60 * 60 * 1000;

fn id(bytes: [u8; 16]) -> Vec<u8> {
    bytes.to_vec()
}

/// Drops the shared parts no record uses and no daemon wrote for a day;
/// run at open.
pub(super) async fn sweep_shared(
    client: &tokio_postgres::Client,
) -> Result<u64, tokio_postgres::Error> {
    let cutoff = bigint(holarchy_actors::now_ms().saturating_sub(UNUSED_KEPT_MS));
    client
        .execute(
            "DELETE FROM turn_shared s WHERE s.written_ms < $1 \
             AND NOT EXISTS (SELECT 1 FROM turn_inputs t WHERE t.shared = s.digest)",
            &[&cutoff],
        )
        .await
}

impl TurnInputs for PgStore {
    fn put_turn_input(
        &self,
        agent_id: AgentId,
        run_id: RunId,
        record: &TurnInputRecord,
        shared: Option<&SharedInput>,
        keep: usize,
    ) -> Result<(), StoreError> {
        let value = encode("turn_inputs", record)?;
        let shared = shared
            .map(|s| encode("turn_shared", s))
            .transpose()?
            .map(|bytes| (record.shared.clone(), bytes));
        let digest = record.shared.clone();
        let now = bigint(holarchy_actors::now_ms());
        let keep = bigint(keep as u64);
        self.call(move |mut client| async move {
            let tx = client.transaction().await.map_err(backend)?;
            let (agent, run) = (id(agent_id.to_bytes()), id(run_id.to_bytes()));
            if let Some((digest, bytes)) = &shared {
                tx.execute(
                    "INSERT INTO turn_shared (digest, written_ms, value) VALUES ($1, $2, $3) \
                     ON CONFLICT (digest) DO UPDATE SET written_ms = excluded.written_ms",
                    &[digest, &now, bytes],
                )
                .await
                .map_err(backend)?;
            }
            tx.execute(
                "INSERT INTO turn_inputs (agent_id, run_id, shared, value) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (agent_id, run_id) DO UPDATE SET shared = excluded.shared, \
                 value = excluded.value",
                &[&agent, &run, &digest, &value],
            )
            .await
            .map_err(backend)?;
            // The newest `keep` stay; an index walk of at most `keep` rows.
            tx.execute(
                "DELETE FROM turn_inputs WHERE agent_id = $1 AND run_id < ( \
                   SELECT run_id FROM turn_inputs WHERE agent_id = $1 \
                   ORDER BY run_id DESC OFFSET GREATEST($2::bigint - 1, 0) LIMIT 1)",
                &[&agent, &keep],
            )
            .await
            .map_err(backend)?;
            tx.commit().await.map_err(backend)
        })
    }

    fn turn_input(
        &self,
        agent_id: AgentId,
        run_id: RunId,
    ) -> Result<Option<TurnInputRecord>, StoreError> {
        let rows = self.rows(
            "SELECT value FROM turn_inputs WHERE agent_id = $1 AND run_id = $2",
            vec![
                Box::new(id(agent_id.to_bytes())),
                Box::new(id(run_id.to_bytes())),
            ],
        )?;
        Ok(values(&rows, "turn_inputs")?.into_iter().next())
    }

    fn shared_input(&self, digest: &str) -> Result<Option<SharedInput>, StoreError> {
        let rows = self.rows(
            "SELECT value FROM turn_shared WHERE digest = $1",
            vec![Box::new(digest.to_owned())],
        )?;
        Ok(values(&rows, "turn_shared")?.into_iter().next())
    }

    fn forget_turn_inputs(&self, agent_id: AgentId) -> Result<(), StoreError> {
        self.execute(
            "DELETE FROM turn_inputs WHERE agent_id = $1",
            vec![Box::new(id(agent_id.to_bytes()))],
        )
        .map(drop)
    }
}
