//! The database's tables, as numbered migrations run at start.
//!
//! Each migration runs once, in its own transaction, and records its number
//! in `holarchy_schema`. A database migrated by a newer build (a number
//! this one does not know) is refused: this build would misread tables it
//! has never seen. Values are the same versioned bincode the sled store
//! writes (`store::codec`), so a record's format version travels with it;
//! columns beside a value hold only what a query filters or orders by.

use tokio_postgres::Client;

use super::PgError;

/// Every migration, in order, each as the parts that run in one
/// transaction; the schema's version is the last number.
const MIGRATIONS: &[(i32, &[&str])] = &[
    (1, &[V1, super::side::TABLES, super::memory::TABLES]),
    // Tokens and the audit trail.
    (2, &[super::access::TABLES]),
    // Namespaces' quotas.
    (3, &[super::access::QUOTAS]),
    // Events numbered by slot.
    (4, &[V4]),
    // What the event log's retention removed.
    (5, &[super::retention::FLOORS]),
    // Recorded turn inputs, and replays' jobs and reports.
    (6, &[super::turn_inputs::TABLES, super::replays::TABLES]),
];

/// The version this build writes and reads.
pub const VERSION: i32 = 6;

/// Each run of events is one slot's, keyed by slot and the number of its
/// first event there (`crate::store::slots`); a run's numbers go on by
/// one to `seq + (last - first)`. Runs written before have neither: their
/// events are numbered 0.
const V4: &str = r#"
ALTER TABLE events ADD COLUMN slot smallint, ADD COLUMN seq bigint;
CREATE UNIQUE INDEX events_slot_seq ON events (slot, seq);
"#;

/// Ids are 16 big-endian bytes (`bytea`), so `ORDER BY id` is the sled
/// key order: creation order for agents, messages, tasks, waits and items.
/// Names sort by bytes (`COLLATE "C"`), as sled's keys do, whatever the
/// database's locale.
const V1: &str = r#"
CREATE TABLE agents (
    id          bytea PRIMARY KEY,
    public      boolean NOT NULL,
    supervisor  bytea,
    live        boolean NOT NULL,
    archived    boolean NOT NULL,
    value       bytea NOT NULL
);
CREATE INDEX agents_public ON agents (id) WHERE public;
CREATE INDEX agents_children ON agents (supervisor, id) WHERE live AND supervisor IS NOT NULL;

CREATE TABLE names (
    name        text COLLATE "C" PRIMARY KEY,
    agent_id    bytea NOT NULL
);

CREATE TABLE messages (
    agent_id    bytea NOT NULL,
    id          bytea NOT NULL,
    pending     boolean NOT NULL,
    handling    boolean NOT NULL,
    value       bytea NOT NULL,
    PRIMARY KEY (agent_id, id)
);
CREATE INDEX messages_pending ON messages (agent_id, id) WHERE pending;

CREATE TABLE dedupe (
    agent_id    bytea NOT NULL,
    key         text NOT NULL,
    message_id  bytea NOT NULL,
    PRIMARY KEY (agent_id, key)
);

CREATE TABLE tasks (
    id          bytea PRIMARY KEY,
    owner       bytea NOT NULL,
    running     boolean NOT NULL,
    worktree    boolean NOT NULL,
    value       bytea NOT NULL
);
CREATE INDEX tasks_owner ON tasks (owner, id);
CREATE INDEX tasks_running ON tasks (id) WHERE running;
CREATE INDEX tasks_worktree ON tasks (id) WHERE worktree;

CREATE TABLE waits (
    id          bytea PRIMARY KEY,
    owner       bytea NOT NULL,
    armed       boolean NOT NULL,
    value       bytea NOT NULL
);
CREATE INDEX waits_owner ON waits (owner, id);
CREATE INDEX waits_armed ON waits (id) WHERE armed;

CREATE TABLE triggers (
    token_hash  bytea PRIMARY KEY,
    wait_id     bytea NOT NULL
);

CREATE TABLE work_items (
    id          bytea PRIMARY KEY,
    owner       bytea NOT NULL,
    value       bytea NOT NULL
);
CREATE INDEX work_items_owner ON work_items (owner, id);

CREATE TABLE output (
    task_id     bytea NOT NULL,
    "offset"    bigint NOT NULL,
    value       bytea NOT NULL,
    PRIMARY KEY (task_id, "offset")
);

CREATE TABLE cleanups (
    id          bytea PRIMARY KEY,
    value       bytea NOT NULL
);

CREATE TABLE workspaces (
    agent_id    bytea PRIMARY KEY,
    value       bytea NOT NULL
);

-- Token totals as numbers, so a turn's end adds to them in SQL.
CREATE TABLE usage (
    agent_id    bytea PRIMARY KEY,
    prompt      bigint NOT NULL,
    completion  bigint NOT NULL,
    cached      bigint NOT NULL,
    turns       bigint NOT NULL
);

-- The event log: each row a run of consecutive events (the sled store's
-- encoding), from cursor `first` to `last`. Cursors are dense and in
-- commit order: the store's one committer hands them out.
CREATE TABLE events (
    first       bigint PRIMARY KEY,
    last        bigint NOT NULL,
    value       bytea NOT NULL
);
CREATE INDEX events_last ON events (last);
"#;

/// Brings the database to [`VERSION`], or refuses one that is newer.
pub async fn migrate(client: &mut Client) -> Result<i32, PgError> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS holarchy_schema (
                 version integer PRIMARY KEY,
                 applied_at timestamptz NOT NULL DEFAULT now()
             )",
        )
        .await?;
    // Two daemons starting on one new database must not both migrate it.
    let tx = client.transaction().await?;
    tx.execute("LOCK TABLE holarchy_schema IN EXCLUSIVE MODE", &[])
        .await?;
    let row = tx
        .query_one("SELECT coalesce(max(version), 0) FROM holarchy_schema", &[])
        .await?;
    let current: i32 = row.get(0);
    if current > VERSION {
        return Err(PgError::NewerSchema {
            found: current,
            known: VERSION,
        });
    }
    for (number, parts) in MIGRATIONS.iter().filter(|(n, _)| *n > current) {
        for sql in *parts {
            tx.batch_execute(sql).await?;
        }
        tx.execute(
            "INSERT INTO holarchy_schema (version) VALUES ($1)",
            &[number],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(VERSION)
}
