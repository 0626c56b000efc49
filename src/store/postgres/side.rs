//! The stores outside the batch path: instances, inbound events and
//! schedules, approvals and agents' running summaries. Each write is one
//! statement or one short transaction of its own, committed before it
//! answers; each compare-and-swap is a conditional statement, so two
//! callers racing cannot both win.

use holarchy_actors::store::{ContextRecord, ReplayGuard, StoredEvent};
use holarchy_actors::{ApprovalStore, ContextStore, InboundStore, InstanceStore, StoreError};
use holarchy_composition::approval::{ApprovalRecord, ApprovalStatus};
use holarchy_composition::event::InboundEvent;
use holarchy_composition::instance::InstanceRecord;
use holarchy_composition::schedule::ScheduleState;
use holarchy_supervision::{AgentId, ApprovalId};
use serde::{Deserialize, Serialize};

use super::statements::{bigint, Param};
use super::{backend, PgStore};
use crate::store::codec::{
    decode, decode_approval, decode_instance, encode, encode_approval, encode_instance,
};

/// The tables of this module, created by the schema's first migration.
pub(super) const TABLES: &str = r#"
CREATE TABLE instances (
    name        text COLLATE "C" PRIMARY KEY,
    digest      text NOT NULL,
    value       bytea NOT NULL
);

CREATE TABLE inbound (
    instance    text NOT NULL,
    dedupe_key  text NOT NULL,
    value       bytea NOT NULL,
    PRIMARY KEY (instance, dedupe_key)
);

-- A webhook body's digest, with the delivery it first came with.
CREATE TABLE replays (
    instance    text NOT NULL,
    digest      text NOT NULL,
    value       bytea NOT NULL,
    PRIMARY KEY (instance, digest)
);

CREATE TABLE schedules (
    instance    text NOT NULL,
    schedule    text NOT NULL,
    value       bytea NOT NULL,
    PRIMARY KEY (instance, schedule)
);

CREATE TABLE approvals (
    id          bytea PRIMARY KEY,
    agent_id    bytea NOT NULL,
    open        boolean NOT NULL,
    -- The encoded status, compared whole by a swap.
    status      bytea NOT NULL,
    value       bytea NOT NULL
);
CREATE INDEX approvals_agent ON approvals (agent_id, id);
CREATE INDEX approvals_open ON approvals (agent_id, id) WHERE open;

CREATE TABLE context (
    agent_id    bytea PRIMARY KEY,
    value       bytea NOT NULL
);
"#;

fn text(s: &str) -> Param {
    Box::new(s.to_owned())
}

fn id(bytes: [u8; 16]) -> Param {
    Box::new(bytes.to_vec())
}

fn first_value(
    rows: &[tokio_postgres::Row],
    table: &'static str,
) -> Result<Option<Vec<u8>>, StoreError> {
    rows.first()
        .map(|row| {
            row.try_get::<_, Vec<u8>>(0)
                .map_err(|err| StoreError::Corrupt {
                    tree: table,
                    detail: err.to_string(),
                })
        })
        .transpose()
}

impl InstanceStore for PgStore {
    fn instance(&self, name: &str) -> Result<Option<InstanceRecord>, StoreError> {
        let rows = self.rows(
            "SELECT value FROM instances WHERE name = $1",
            vec![text(name)],
        )?;
        first_value(&rows, "instances")?
            .map(|bytes| decode_instance("instances", &bytes))
            .transpose()
    }

    fn instances(&self) -> Result<Vec<InstanceRecord>, StoreError> {
        self.rows("SELECT value FROM instances ORDER BY name", Vec::new())?
            .iter()
            .map(|row| {
                let bytes: Vec<u8> = row.try_get(0).map_err(backend)?;
                decode_instance("instances", &bytes)
            })
            .collect()
    }

    fn swap_instance(
        &self,
        name: &str,
        expect: Option<&str>,
        new: Option<&InstanceRecord>,
    ) -> Result<(), StoreError> {
        let changed = || {
            StoreError::Precondition(format!(
                "instance `{name}` was changed by another apply meanwhile; apply again"
            ))
        };
        let rows = match (expect, new) {
            (None, None) => {
                // Deleting what is absent: true only while it is absent.
                let found =
                    self.rows("SELECT 1 FROM instances WHERE name = $1", vec![text(name)])?;
                return if found.is_empty() {
                    Ok(())
                } else {
                    Err(changed())
                };
            }
            (None, Some(record)) => self.execute(
                "INSERT INTO instances (name, digest, value) VALUES ($1, $2, $3) \
                 ON CONFLICT DO NOTHING",
                vec![
                    text(name),
                    text(&record.digest),
                    Box::new(encode_instance("instances", record)?),
                ],
            )?,
            (Some(old), Some(record)) => self.execute(
                "UPDATE instances SET digest = $3, value = $4 WHERE name = $1 AND digest = $2",
                vec![
                    text(name),
                    text(old),
                    text(&record.digest),
                    Box::new(encode_instance("instances", record)?),
                ],
            )?,
            (Some(old), None) => self.execute(
                "DELETE FROM instances WHERE name = $1 AND digest = $2",
                vec![text(name), text(old)],
            )?,
        };
        if rows == 1 {
            Ok(())
        } else {
            Err(changed())
        }
    }
}

/// A webhook body kept: the dedupe key of the event it first came with,
/// and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct BodySeen {
    dedupe_key: String,
    at_ms: u64,
}

/// What a keep of `event` found: nothing kept before (it is kept now), or
/// the encoded event first kept under its key or body.
fn stored(event: &InboundEvent, kept: Option<Vec<u8>>) -> Result<StoredEvent, StoreError> {
    Ok(match kept {
        None => StoredEvent {
            event: event.clone(),
            duplicate: false,
        },
        Some(kept) => StoredEvent {
            event: decode("inbound", &kept)?,
            duplicate: true,
        },
    })
}

impl InboundStore for PgStore {
    fn put_inbound(&self, instance: &str, event: &InboundEvent) -> Result<StoredEvent, StoreError> {
        let value = encode("inbound", event)?;
        // Inserted, or the one kept first comes back: one statement, so
        // of two deliveries racing exactly one is kept.
        let rows = self.rows(
            "WITH put AS (INSERT INTO inbound (instance, dedupe_key, value) VALUES ($1, $2, $3) \
             ON CONFLICT DO NOTHING RETURNING 1) \
             SELECT value FROM inbound WHERE instance = $1 AND dedupe_key = $2 \
             AND NOT EXISTS (SELECT 1 FROM put)",
            vec![text(instance), text(&event.dedupe_key), Box::new(value)],
        )?;
        stored(event, first_value(&rows, "inbound")?)
    }

    fn put_inbound_unless_replayed(
        &self,
        instance: &str,
        event: &InboundEvent,
        guard: ReplayGuard<'_>,
    ) -> Result<StoredEvent, StoreError> {
        let value = encode("inbound", event)?;
        let seen = encode(
            "replays",
            &BodySeen {
                dedupe_key: event.dedupe_key.clone(),
                at_ms: event.at_ms,
            },
        )?;
        let (instance_, digest, dedupe_key) = (
            instance.to_owned(),
            guard.digest.to_owned(),
            event.dedupe_key.clone(),
        );
        let (at_ms, window_ms) = (event.at_ms, guard.window_ms);
        let kept: Option<Vec<u8>> = self.call(move |mut client| async move {
            let tx = client.transaction().await.map_err(backend)?;
            // The body's row, locked, so two deliveries of one body take
            // turns: the second sees the first's event.
            tx.execute(
                "INSERT INTO replays (instance, digest, value) VALUES ($1, $2, '') \
                 ON CONFLICT DO NOTHING",
                &[&instance_, &digest],
            )
            .await
            .map_err(backend)?;
            let body = tx
                .query_one(
                    "SELECT value FROM replays WHERE instance = $1 AND digest = $2 FOR UPDATE",
                    &[&instance_, &digest],
                )
                .await
                .map_err(backend)?;
            // The same delivery again: its dedupe key answers, as ever.
            let same = tx
                .query_opt(
                    "SELECT value FROM inbound WHERE instance = $1 AND dedupe_key = $2",
                    &[&instance_, &dedupe_key],
                )
                .await
                .map_err(backend)?;
            if let Some(row) = same {
                tx.rollback().await.map_err(backend)?;
                return Ok(Some(row.try_get::<_, Vec<u8>>(0).map_err(backend)?));
            }
            let body: Vec<u8> = body.try_get(0).map_err(backend)?;
            if !body.is_empty() {
                let first: BodySeen = decode("replays", &body)?;
                if at_ms.saturating_sub(first.at_ms) < window_ms {
                    let earlier = tx
                        .query_opt(
                            "SELECT value FROM inbound WHERE instance = $1 AND dedupe_key = $2",
                            &[&instance_, &first.dedupe_key],
                        )
                        .await
                        .map_err(backend)?;
                    if let Some(row) = earlier {
                        tx.rollback().await.map_err(backend)?;
                        return Ok(Some(row.try_get::<_, Vec<u8>>(0).map_err(backend)?));
                    }
                }
            }
            tx.execute(
                "UPDATE replays SET value = $3 WHERE instance = $1 AND digest = $2",
                &[&instance_, &digest, &seen],
            )
            .await
            .map_err(backend)?;
            tx.execute(
                "INSERT INTO inbound (instance, dedupe_key, value) VALUES ($1, $2, $3)",
                &[&instance_, &dedupe_key, &value],
            )
            .await
            .map_err(backend)?;
            tx.commit().await.map_err(backend)?;
            Ok(None)
        })?;
        stored(event, kept)
    }

    fn inbound(
        &self,
        instance: &str,
        dedupe_key: &str,
    ) -> Result<Option<InboundEvent>, StoreError> {
        let rows = self.rows(
            "SELECT value FROM inbound WHERE instance = $1 AND dedupe_key = $2",
            vec![text(instance), text(dedupe_key)],
        )?;
        first_value(&rows, "inbound")?
            .map(|bytes| decode("inbound", &bytes))
            .transpose()
    }

    fn schedule_state(&self, instance: &str, schedule: &str) -> Result<ScheduleState, StoreError> {
        let rows = self.rows(
            "SELECT value FROM schedules WHERE instance = $1 AND schedule = $2",
            vec![text(instance), text(schedule)],
        )?;
        match first_value(&rows, "schedules")? {
            Some(bytes) => decode("schedules", &bytes),
            None => Ok(ScheduleState::default()),
        }
    }

    fn put_schedule_state(
        &self,
        instance: &str,
        schedule: &str,
        state: ScheduleState,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO schedules (instance, schedule, value) VALUES ($1, $2, $3) \
             ON CONFLICT (instance, schedule) DO UPDATE SET value = excluded.value",
            vec![
                text(instance),
                text(schedule),
                Box::new(encode("schedules", &state)?),
            ],
        )
        .map(drop)
    }

    fn forget_instance(&self, instance: &str) -> Result<(), StoreError> {
        let instance = instance.to_owned();
        self.call(move |mut client| async move {
            let tx = client.transaction().await.map_err(backend)?;
            for table in ["inbound", "replays", "schedules"] {
                tx.execute(
                    &format!("DELETE FROM {table} WHERE instance = $1"),
                    &[&instance],
                )
                .await
                .map_err(backend)?;
            }
            tx.commit().await.map_err(backend)
        })
    }
}

fn listable(row: &tokio_postgres::Row) -> Result<Option<ApprovalRecord>, StoreError> {
    let bytes: Vec<u8> = row.try_get(0).map_err(backend)?;
    match decode_approval("approvals", &bytes) {
        Ok(record) => Ok(Some(record)),
        Err(err @ (StoreError::Corrupt { .. } | StoreError::UnsupportedVersion { .. })) => {
            tracing::error!(error = %err, "a damaged approval record left out of a listing");
            Ok(None)
        }
        Err(err) => Err(err),
    }
}

/// Listed oldest first: ids grow with time.
fn approval_rows(
    store: &PgStore,
    agent: Option<AgentId>,
    limit: usize,
    open_only: bool,
) -> Result<Vec<ApprovalRecord>, StoreError> {
    let n: Param = Box::new(bigint(limit as u64));
    let rows = match (agent, open_only) {
        (Some(agent), false) => store.rows(
            "SELECT value FROM approvals WHERE agent_id = $1 ORDER BY id LIMIT $2",
            vec![id(agent.to_bytes()), n],
        )?,
        (Some(agent), true) => store.rows(
            "SELECT value FROM approvals WHERE agent_id = $1 AND open ORDER BY id LIMIT $2",
            vec![id(agent.to_bytes()), n],
        )?,
        (None, false) => store.rows("SELECT value FROM approvals ORDER BY id LIMIT $1", vec![n])?,
        (None, true) => store.rows(
            "SELECT value FROM approvals WHERE open ORDER BY agent_id, id LIMIT $1",
            vec![n],
        )?,
    };
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        out.extend(listable(row)?);
    }
    Ok(out)
}

impl ApprovalStore for PgStore {
    fn approval(&self, id_: ApprovalId) -> Result<Option<ApprovalRecord>, StoreError> {
        let rows = self.rows(
            "SELECT value FROM approvals WHERE id = $1",
            vec![id(id_.to_bytes())],
        )?;
        first_value(&rows, "approvals")?
            .map(|bytes| decode_approval("approvals", &bytes))
            .transpose()
    }

    fn approvals(
        &self,
        agent: Option<AgentId>,
        limit: usize,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        approval_rows(self, agent, limit, false)
    }

    fn open_approvals(
        &self,
        agent: Option<AgentId>,
        limit: usize,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        approval_rows(self, agent, limit, true)
    }

    fn insert_approval(&self, record: &ApprovalRecord) -> Result<(), StoreError> {
        let inserted = self.execute(
            "INSERT INTO approvals (id, agent_id, open, status, value) VALUES ($1, $2, true, $3, $4) \
             ON CONFLICT DO NOTHING",
            vec![
                id(record.id.to_bytes()),
                id(record.agent_id.to_bytes()),
                Box::new(encode("approvals", &record.status)?),
                Box::new(encode_approval("approvals", record)?),
            ],
        )?;
        if inserted == 1 {
            Ok(())
        } else {
            Err(StoreError::Precondition(format!(
                "approval {} exists",
                record.id
            )))
        }
    }

    fn swap_approval(
        &self,
        expect: &ApprovalStatus,
        new: &ApprovalRecord,
    ) -> Result<(), StoreError> {
        let open = !(new.status.is_decided() && new.delivered);
        let swapped = self.execute(
            "UPDATE approvals SET status = $3, open = open AND $4, value = $5 \
             WHERE id = $1 AND status = $2",
            vec![
                id(new.id.to_bytes()),
                Box::new(encode("approvals", expect)?),
                Box::new(encode("approvals", &new.status)?),
                Box::new(open),
                Box::new(encode_approval("approvals", new)?),
            ],
        )?;
        if swapped == 1 {
            return Ok(());
        }
        match self.approval(new.id)? {
            None => Err(StoreError::Precondition(format!("no approval {}", new.id))),
            Some(stored) => Err(StoreError::Precondition(format!(
                "approval {} is already {}",
                new.id,
                stored.status.name()
            ))),
        }
    }
}

impl ContextStore for PgStore {
    fn context_record(&self, agent_id: AgentId) -> Result<Option<ContextRecord>, StoreError> {
        let rows = self.rows(
            "SELECT value FROM context WHERE agent_id = $1",
            vec![id(agent_id.to_bytes())],
        )?;
        first_value(&rows, "context")?
            .map(|bytes| decode("context", &bytes))
            .transpose()
    }

    fn put_context_record(
        &self,
        agent_id: AgentId,
        record: &ContextRecord,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO context (agent_id, value) VALUES ($1, $2) \
             ON CONFLICT (agent_id) DO UPDATE SET value = excluded.value",
            vec![
                id(agent_id.to_bytes()),
                Box::new(encode("context", record)?),
            ],
        )
        .map(drop)
    }

    fn forget_context(&self, agent_id: AgentId) -> Result<(), StoreError> {
        self.execute(
            "DELETE FROM context WHERE agent_id = $1",
            vec![id(agent_id.to_bytes())],
        )
        .map(drop)
    }
}
