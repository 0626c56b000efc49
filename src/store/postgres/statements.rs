//! Each `Write` as SQL statements, with the guards that refuse its batch.
//!
//! A guard is a statement that must touch exactly one row: the name
//! claimed (an insert that does nothing on conflict), the supervisor found
//! live, the agent, task or wait updated only while in the state the write
//! needs. Guards never raise an error in the database, which would abort
//! the transaction under every later statement of the pipeline; the
//! committer reads their row counts once the pipeline answers and rolls
//! the group back if one refused (see `committer`).

use holarchy_actors::{StoreError, Write};
use holarchy_supervision::{
    AgentId, LifecycleState, MessageRecord, TaskRecord, TaskStatus, Visibility, WaitKind,
    WaitRecord, WaitStatus, WorkItemRecord,
};
use tokio_postgres::types::ToSql;

use crate::store::codec::{encode, encode_agent, encode_task};

/// One parameter of a statement, owned so a group's statements outlive
/// the batches they came from.
pub(super) type Param = Box<dyn ToSql + Sync + Send>;

/// The statements the committer prepares once per connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sql {
    InsertName,
    SupervisorLive,
    UpsertAgent,
    UpdateLiveAgent,
    UpsertMessage,
    UpsertDedupe,
    Requeue,
    UpsertTask,
    EndTask,
    UpsertWait,
    EndWait,
    UpsertTrigger,
    UpsertWorkItem,
    UpsertOutput,
    DropOutput,
    UpsertCleanup,
    DeleteCleanup,
    UpsertWorkspaces,
    AddUsage,
    DeleteArchivedAgent,
    DeleteNameOf,
    DeleteUsage,
    DeleteWorkspaces,
    InsertEvents,
    UpsertMessages,
    UpsertAudit,
}

impl Sql {
    pub const ALL: [Sql; 26] = [
        Sql::InsertName,
        Sql::SupervisorLive,
        Sql::UpsertAgent,
        Sql::UpdateLiveAgent,
        Sql::UpsertMessage,
        Sql::UpsertDedupe,
        Sql::Requeue,
        Sql::UpsertTask,
        Sql::EndTask,
        Sql::UpsertWait,
        Sql::EndWait,
        Sql::UpsertTrigger,
        Sql::UpsertWorkItem,
        Sql::UpsertOutput,
        Sql::DropOutput,
        Sql::UpsertCleanup,
        Sql::DeleteCleanup,
        Sql::UpsertWorkspaces,
        Sql::AddUsage,
        Sql::DeleteArchivedAgent,
        Sql::DeleteNameOf,
        Sql::DeleteUsage,
        Sql::DeleteWorkspaces,
        Sql::InsertEvents,
        Sql::UpsertMessages,
        Sql::UpsertAudit,
    ];

    pub fn text(self) -> &'static str {
        match self {
            Sql::InsertName => {
                "INSERT INTO names (name, agent_id) VALUES ($1, $2) ON CONFLICT DO NOTHING"
            }
            Sql::SupervisorLive => "SELECT 1 FROM agents WHERE id = $1 AND live",
            Sql::UpsertAgent => {
                "INSERT INTO agents (id, public, supervisor, live, archived, value) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO UPDATE SET \
                 public = excluded.public, supervisor = excluded.supervisor, \
                 live = excluded.live, archived = excluded.archived, value = excluded.value"
            }
            Sql::UpdateLiveAgent => {
                "UPDATE agents SET public = $2, supervisor = $3, live = $4, archived = $5, \
                 value = $6 WHERE id = $1 AND live"
            }
            Sql::UpsertMessage => {
                "INSERT INTO messages (agent_id, id, pending, handling, value) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (agent_id, id) DO UPDATE SET \
                 pending = excluded.pending, handling = excluded.handling, value = excluded.value"
            }
            Sql::UpsertDedupe => {
                "INSERT INTO dedupe (agent_id, key, message_id) VALUES ($1, $2, $3) \
                 ON CONFLICT (agent_id, key) DO UPDATE SET message_id = excluded.message_id"
            }
            // Put back to queued only while still in its turn and its agent
            // live: a cleanup that cancelled it meanwhile wins.
            Sql::Requeue => {
                "UPDATE messages SET pending = true, handling = $3, value = $4 \
                 WHERE agent_id = $1 AND id = $2 AND handling \
                 AND EXISTS (SELECT 1 FROM agents WHERE id = $1 AND live)"
            }
            Sql::UpsertTask => {
                "INSERT INTO tasks (id, owner, running, worktree, value) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO UPDATE SET \
                 owner = excluded.owner, running = excluded.running, \
                 worktree = excluded.worktree, value = excluded.value"
            }
            Sql::EndTask => {
                "UPDATE tasks SET owner = $2, running = $3, worktree = $4, value = $5 \
                 WHERE id = $1 AND running"
            }
            Sql::UpsertWait => {
                "INSERT INTO waits (id, owner, armed, value) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, \
                 armed = excluded.armed, value = excluded.value"
            }
            Sql::EndWait => {
                "UPDATE waits SET owner = $2, armed = $3, value = $4 WHERE id = $1 AND armed"
            }
            Sql::UpsertTrigger => {
                "INSERT INTO triggers (token_hash, wait_id) VALUES ($1, $2) \
                 ON CONFLICT (token_hash) DO UPDATE SET wait_id = excluded.wait_id"
            }
            Sql::UpsertWorkItem => {
                "INSERT INTO work_items (id, owner, value) VALUES ($1, $2, $3) \
                 ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, value = excluded.value"
            }
            Sql::UpsertOutput => {
                "INSERT INTO output (task_id, \"offset\", value) VALUES ($1, $2, $3) \
                 ON CONFLICT (task_id, \"offset\") DO UPDATE SET value = excluded.value"
            }
            Sql::DropOutput => "DELETE FROM output WHERE task_id = $1 AND \"offset\" = $2",
            Sql::UpsertCleanup => {
                "INSERT INTO cleanups (id, value) VALUES ($1, $2) \
                 ON CONFLICT (id) DO UPDATE SET value = excluded.value"
            }
            Sql::DeleteCleanup => "DELETE FROM cleanups WHERE id = $1",
            Sql::UpsertWorkspaces => {
                "INSERT INTO workspaces (agent_id, value) VALUES ($1, $2) \
                 ON CONFLICT (agent_id) DO UPDATE SET value = excluded.value"
            }
            // Totals saturate at the column's bound, as the sled store's
            // saturate at u64's: a server may report anything.
            Sql::AddUsage => {
                "INSERT INTO usage (agent_id, prompt, completion, cached, turns) \
                 VALUES ($1, $2, $3, $4, 1) ON CONFLICT (agent_id) DO UPDATE SET \
                 prompt = least(usage.prompt::numeric + excluded.prompt, 9223372036854775807)::bigint, \
                 completion = least(usage.completion::numeric + excluded.completion, 9223372036854775807)::bigint, \
                 cached = least(usage.cached::numeric + excluded.cached, 9223372036854775807)::bigint, \
                 turns = least(usage.turns::numeric + 1, 9223372036854775807)::bigint"
            }
            Sql::DeleteArchivedAgent => "DELETE FROM agents WHERE id = $1 AND archived",
            // The name is freed only if it is still this agent's.
            Sql::DeleteNameOf => "DELETE FROM names WHERE name = $1 AND agent_id = $2",
            Sql::DeleteUsage => "DELETE FROM usage WHERE agent_id = $1",
            Sql::DeleteWorkspaces => "DELETE FROM workspaces WHERE agent_id = $1",
            // A group's runs, as arrays of their columns.
            Sql::InsertEvents => {
                "INSERT INTO events (first, last, slot, seq, value) \
                 SELECT * FROM unnest($1::int8[], $2::int8[], $3::int2[], $4::int8[], $5::bytea[])"
            }
            // A group's message rows, as arrays of their columns; no two
            // of one message (an upsert may touch a row once).
            Sql::UpsertMessages => {
                "INSERT INTO messages (agent_id, id, pending, handling, value) \
                 SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bool[], $4::bool[], \
                 $5::bytea[]) ON CONFLICT (agent_id, id) DO UPDATE SET \
                 pending = excluded.pending, handling = excluded.handling, value = excluded.value"
            }
            // A group's audit entries, the same way: each written whole.
            Sql::UpsertAudit => {
                "INSERT INTO audit (id, value) SELECT * FROM unnest($1::bytea[], $2::bytea[]) \
                 ON CONFLICT (id) DO UPDATE SET value = excluded.value"
            }
        }
    }
}

/// What a guard that touched no row refuses its batch with.
#[derive(Debug, Clone)]
pub(super) enum Refusal {
    NameTaken(String),
    SupervisorGone(AgentId),
    Precondition(&'static str),
}

impl From<Refusal> for StoreError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::NameTaken(name) => StoreError::NameTaken(name),
            Refusal::SupervisorGone(id) => StoreError::SupervisorGone(id),
            Refusal::Precondition(why) => StoreError::Precondition(why.into()),
        }
    }
}

/// One statement of a batch.
pub(super) struct Step {
    pub sql: Sql,
    pub params: Vec<Param>,
    /// Set for a guard: it must touch exactly one row.
    pub guard: Option<Refusal>,
    /// A message's row, kept typed (and `params` empty) so the committer
    /// can upsert a group's messages in one statement.
    pub message: Option<MessageRow>,
}

/// A message's columns, as `messages (agent_id, id, pending, handling,
/// value)` holds them.
pub(super) struct MessageRow {
    pub agent_id: Vec<u8>,
    pub id: Vec<u8>,
    pub pending: bool,
    pub handling: bool,
    pub value: Vec<u8>,
}

impl MessageRow {
    fn new(message: &MessageRecord) -> Result<Self, StoreError> {
        Ok(Self {
            agent_id: message.agent_id.to_bytes().to_vec(),
            id: message.id.to_bytes().to_vec(),
            pending: message.status.is_pending(),
            handling: is_handling(message),
            value: encode("messages", message)?,
        })
    }

    /// The row as one upsert's parameters.
    pub fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.agent_id,
            &self.id,
            &self.pending,
            &self.handling,
            &self.value,
        ]
    }
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Step")
            .field("sql", &self.sql)
            .field("guard", &self.guard)
            .finish_non_exhaustive()
    }
}

fn step(sql: Sql, params: Vec<Param>) -> Step {
    Step {
        sql,
        params,
        guard: None,
        message: None,
    }
}

fn guard(sql: Sql, params: Vec<Param>, refusal: Refusal) -> Step {
    Step {
        sql,
        params,
        guard: Some(refusal),
        message: None,
    }
}

pub(super) fn id(bytes: [u8; 16]) -> Param {
    Box::new(bytes.to_vec())
}

/// A u64 as the database's bigint, held at its bound.
pub(super) fn bigint(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(super) fn agent_columns(
    record: &holarchy_supervision::AgentRecord,
) -> Result<Vec<Param>, StoreError> {
    Ok(vec![
        id(record.id.to_bytes()),
        Box::new(record.profile.visibility == Visibility::Public),
        Box::new(record.supervisor_agent_id.map(|s| s.to_bytes().to_vec())),
        Box::new(record.state.is_live()),
        Box::new(record.state == LifecycleState::Archived),
        Box::new(encode_agent("agents", record)?),
    ])
}

/// A message's row: `messages (agent_id, id, pending, handling, value)`.
pub(super) fn message_columns(message: &MessageRecord) -> Result<Vec<Param>, StoreError> {
    Ok(vec![
        id(message.agent_id.to_bytes()),
        id(message.id.to_bytes()),
        Box::new(message.status.is_pending()),
        Box::new(is_handling(message)),
        Box::new(encode("messages", message)?),
    ])
}

/// A task's row: `tasks (id, owner, running, worktree, value)`.
pub(super) fn task_columns(task: &TaskRecord) -> Result<Vec<Param>, StoreError> {
    Ok(vec![
        id(task.id.to_bytes()),
        id(task.owner_agent_id.to_bytes()),
        Box::new(task.status == TaskStatus::Running),
        Box::new(task.pending_worktree().is_some()),
        Box::new(encode_task("tasks", task)?),
    ])
}

/// A wait's row: `waits (id, owner, armed, value)`.
pub(super) fn wait_columns(wait: &WaitRecord) -> Result<Vec<Param>, StoreError> {
    Ok(vec![
        id(wait.id.to_bytes()),
        id(wait.owner_agent_id.to_bytes()),
        Box::new(wait.status == WaitStatus::Armed),
        Box::new(encode("waits", wait)?),
    ])
}

/// A work item's row: `work_items (id, owner, value)`.
pub(super) fn work_item_columns(item: &WorkItemRecord) -> Result<Vec<Param>, StoreError> {
    Ok(vec![
        id(item.id.to_bytes()),
        id(item.owner_agent_id.to_bytes()),
        Box::new(encode("work", item)?),
    ])
}

/// The statements of one batch, in the order they run.
///
/// A message written twice in one batch is upserted once, as its last
/// write has it: a message delivered to an idle agent is queued and its
/// turn started in one commit, and the first upsert would only be
/// overwritten (a third of the turn path's row writes). A requeue of the
/// message between the two keeps both, as it reads the row the first
/// wrote.
pub(super) fn batch_steps(writes: &[Write]) -> Result<Vec<Step>, StoreError> {
    let superseded = superseded_messages(writes);
    let mut out = Vec::with_capacity(writes.len());
    for (write, superseded) in writes.iter().zip(superseded) {
        match write {
            Write::PutMessage(message) if superseded => dedupe_step(message, &mut out),
            _ => steps(write, &mut out)?,
        }
    }
    Ok(out)
}

/// For each write, whether it puts a message that a later write of the
/// same batch puts again with nothing reading the row in between.
fn superseded_messages(writes: &[Write]) -> Vec<bool> {
    let mut written_later = std::collections::HashSet::new();
    let mut superseded = vec![false; writes.len()];
    for (at, write) in writes.iter().enumerate().rev() {
        match write {
            Write::PutMessage(message) => {
                superseded[at] = !written_later.insert((message.agent_id, message.id));
            }
            Write::Requeue(message) => {
                written_later.remove(&(message.agent_id, message.id));
            }
            _ => {}
        }
    }
    superseded
}

/// The statements of one write, in the order they run.
fn steps(write: &Write, out: &mut Vec<Step>) -> Result<(), StoreError> {
    match write {
        Write::CreateAgent(record) => {
            // Unique within its namespace: keyed as `namespace::qualified`.
            if let Some(name) = record.name_key() {
                out.push(guard(
                    Sql::InsertName,
                    vec![Box::new(name.clone()), id(record.id.to_bytes())],
                    Refusal::NameTaken(name),
                ));
            }
            if let Some(sup) = record.supervisor_agent_id {
                out.push(guard(
                    Sql::SupervisorLive,
                    vec![id(sup.to_bytes())],
                    Refusal::SupervisorGone(sup),
                ));
            }
            out.push(step(Sql::UpsertAgent, agent_columns(record)?));
        }
        Write::PutAgent(record) => out.push(step(Sql::UpsertAgent, agent_columns(record)?)),
        Write::PutLiveAgent(record) => out.push(guard(
            Sql::UpdateLiveAgent,
            agent_columns(record)?,
            Refusal::Precondition("the agent has ended"),
        )),
        Write::PutMessage(message) => {
            out.push(Step {
                message: Some(MessageRow::new(message)?),
                ..step(Sql::UpsertMessage, Vec::new())
            });
            dedupe_step(message, out);
        }
        Write::Requeue(message) => out.push(step(
            Sql::Requeue,
            vec![
                id(message.agent_id.to_bytes()),
                id(message.id.to_bytes()),
                Box::new(is_handling(message)),
                Box::new(encode("messages", message)?),
            ],
        )),
        Write::PutTask(task) | Write::EndTask(task) => {
            let params = task_columns(task)?;
            out.push(match write {
                Write::EndTask(_) => guard(
                    Sql::EndTask,
                    params,
                    Refusal::Precondition("the task has already ended"),
                ),
                _ => step(Sql::UpsertTask, params),
            });
        }
        Write::PutWait(wait) | Write::EndWait(wait) => {
            let params = wait_columns(wait)?;
            out.push(match write {
                Write::EndWait(_) => guard(
                    Sql::EndWait,
                    params,
                    Refusal::Precondition("the wait is no longer armed"),
                ),
                _ => step(Sql::UpsertWait, params),
            });
            if let WaitKind::Trigger { token_hash } = wait.kind {
                out.push(step(
                    Sql::UpsertTrigger,
                    vec![Box::new(token_hash.to_vec()), id(wait.id.to_bytes())],
                ));
            }
        }
        Write::PutWorkItem(item) => out.push(step(Sql::UpsertWorkItem, work_item_columns(item)?)),
        Write::PutOutput { task_id, chunk } => out.push(step(
            Sql::UpsertOutput,
            vec![
                id(task_id.to_bytes()),
                Box::new(bigint(chunk.offset)),
                Box::new(encode("output", chunk)?),
            ],
        )),
        Write::DropOutput { task_id, offset } => out.push(step(
            Sql::DropOutput,
            vec![id(task_id.to_bytes()), Box::new(bigint(*offset))],
        )),
        Write::PutIntent(intent) => out.push(step(
            Sql::UpsertCleanup,
            vec![
                id(intent.id.to_bytes()),
                Box::new(encode("cleanups", intent)?),
            ],
        )),
        Write::DeleteIntent(cleanup) => {
            out.push(step(Sql::DeleteCleanup, vec![id(cleanup.to_bytes())]))
        }
        Write::PutWorkspaces(projection) => out.push(step(
            Sql::UpsertWorkspaces,
            vec![
                id(projection.agent_id.to_bytes()),
                Box::new(encode("workspaces", projection)?),
            ],
        )),
        Write::AddUsage { agent_id, usage } => out.push(step(
            Sql::AddUsage,
            vec![
                id(agent_id.to_bytes()),
                Box::new(bigint(usage.prompt_tokens)),
                Box::new(bigint(usage.completion_tokens)),
                Box::new(bigint(usage.cached_tokens)),
            ],
        )),
        Write::DeleteAgent(record) => {
            out.push(guard(
                Sql::DeleteArchivedAgent,
                vec![id(record.id.to_bytes())],
                Refusal::Precondition("only an archived agent can be deleted"),
            ));
            if let Some(name) = record.name_key() {
                out.push(step(
                    Sql::DeleteNameOf,
                    vec![Box::new(name), id(record.id.to_bytes())],
                ));
            }
            out.push(step(Sql::DeleteUsage, vec![id(record.id.to_bytes())]));
            out.push(step(Sql::DeleteWorkspaces, vec![id(record.id.to_bytes())]));
        }
    }
    Ok(())
}

/// The dedupe key's row of a message that has one.
fn dedupe_step(message: &MessageRecord, out: &mut Vec<Step>) {
    if let Some(key) = &message.dedupe_key {
        out.push(step(
            Sql::UpsertDedupe,
            vec![
                id(message.agent_id.to_bytes()),
                Box::new(key.clone()),
                id(message.id.to_bytes()),
            ],
        ));
    }
}

fn is_handling(message: &holarchy_supervision::MessageRecord) -> bool {
    matches!(
        message.status,
        holarchy_supervision::MessageStatus::Handling { .. }
    )
}
