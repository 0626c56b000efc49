//! Batches encoded ahead of their transaction: sled may rerun the
//! transaction closure, so nothing inside it should allocate or encode.

use holarchy_actors::{StoreError, Write};
use holarchy_supervision::{AgentId, TokenUsage, WaitKind};

use super::{
    output_key, pair_key, AGENTS, CLEANUPS, MESSAGES, OUTPUT, TASKS, WAITS, WORK, WORKSPACES,
};
use crate::store::codec::{encode, encode_agent, encode_task};

/// A batch, encoded ahead of the transaction (whose closure may rerun).
pub(super) enum Encoded {
    CreateAgent {
        id: [u8; 16],
        name: Option<String>,
        supervisor: Option<AgentId>,
        /// Public agents' records have a tree of their own.
        public: bool,
        value: Vec<u8>,
    },
    PutAgent {
        id: [u8; 16],
        /// Which tree holds it: fixed at its creation.
        public: bool,
        guard_live: bool,
        /// `supervisor ++ agent`, and whether the agent is live.
        child_key: Option<(Vec<u8>, bool)>,
        value: Vec<u8>,
    },
    PutMessage {
        key: Vec<u8>,
        pending: bool,
        dedupe: Option<(Vec<u8>, [u8; 16])>,
        value: Vec<u8>,
    },
    Requeue {
        key: Vec<u8>,
        agent: AgentId,
        value: Vec<u8>,
    },
    PutTask {
        id: [u8; 16],
        owned_key: Vec<u8>,
        guard_running: bool,
        /// Whether the task owns a worktree still on disk.
        worktree_pending: bool,
        value: Vec<u8>,
    },
    PutWorkspaces {
        id: [u8; 16],
        value: Vec<u8>,
    },
    PutWait {
        id: [u8; 16],
        owned_key: Vec<u8>,
        /// The token hash of a trigger. Kept after cancellation, so a
        /// cancelled token is told apart from one that never existed.
        trigger: Option<[u8; 32]>,
        guard_armed: bool,
        value: Vec<u8>,
    },
    PutWorkItem {
        id: [u8; 16],
        owned_key: Vec<u8>,
        value: Vec<u8>,
    },
    PutOutput {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    DropOutput {
        key: Vec<u8>,
    },
    PutIntent {
        id: [u8; 16],
        value: Vec<u8>,
    },
    DeleteIntent {
        id: [u8; 16],
    },
    /// Added to what the tree holds, so encoded inside the transaction
    /// (four integers; a rerun reads the total afresh).
    AddUsage {
        id: [u8; 16],
        usage: TokenUsage,
    },
    DeleteAgent {
        id: [u8; 16],
        name: Option<String>,
        public: bool,
    },
}

pub(super) fn encode_write(write: &Write) -> Result<Encoded, StoreError> {
    Ok(match write {
        Write::DeleteAgent(record) => Encoded::DeleteAgent {
            id: record.id.to_bytes(),
            name: record.name_key(),
            public: record.profile.visibility == holarchy_supervision::Visibility::Public,
        },
        Write::CreateAgent(record) => Encoded::CreateAgent {
            id: record.id.to_bytes(),
            name: record.name_key(),
            supervisor: record.supervisor_agent_id,
            public: record.profile.visibility == holarchy_supervision::Visibility::Public,
            value: encode_agent(AGENTS, record)?,
        },
        Write::PutAgent(record) | Write::PutLiveAgent(record) => Encoded::PutAgent {
            id: record.id.to_bytes(),
            public: record.profile.visibility == holarchy_supervision::Visibility::Public,
            guard_live: matches!(write, Write::PutLiveAgent(_)),
            child_key: record
                .supervisor_agent_id
                .map(|sup| (pair_key(sup, &record.id.to_bytes()), record.state.is_live())),
            value: encode_agent(AGENTS, record)?,
        },
        Write::PutMessage(message) => Encoded::PutMessage {
            key: pair_key(message.agent_id, &message.id.to_bytes()),
            pending: message.status.is_pending(),
            dedupe: message.dedupe_key.as_ref().map(|k| {
                (
                    pair_key(message.agent_id, k.as_bytes()),
                    message.id.to_bytes(),
                )
            }),
            value: encode(MESSAGES, message)?,
        },
        Write::Requeue(message) => Encoded::Requeue {
            key: pair_key(message.agent_id, &message.id.to_bytes()),
            agent: message.agent_id,
            value: encode(MESSAGES, message)?,
        },
        Write::PutTask(task) | Write::EndTask(task) => Encoded::PutTask {
            id: task.id.to_bytes(),
            owned_key: pair_key(task.owner_agent_id, &task.id.to_bytes()),
            guard_running: matches!(write, Write::EndTask(_)),
            worktree_pending: task.pending_worktree().is_some(),
            value: encode_task(TASKS, task)?,
        },
        Write::PutWorkspaces(projection) => Encoded::PutWorkspaces {
            id: projection.agent_id.to_bytes(),
            value: encode(WORKSPACES, projection)?,
        },
        Write::PutWait(wait) | Write::EndWait(wait) => Encoded::PutWait {
            id: wait.id.to_bytes(),
            owned_key: pair_key(wait.owner_agent_id, &wait.id.to_bytes()),
            trigger: match wait.kind {
                WaitKind::Trigger { token_hash } => Some(token_hash),
                WaitKind::Timer { .. } => None,
            },
            guard_armed: matches!(write, Write::EndWait(_)),
            value: encode(WAITS, wait)?,
        },
        Write::PutWorkItem(item) => Encoded::PutWorkItem {
            id: item.id.to_bytes(),
            owned_key: pair_key(item.owner_agent_id, &item.id.to_bytes()),
            value: encode(WORK, item)?,
        },
        Write::PutOutput { task_id, chunk } => Encoded::PutOutput {
            key: output_key(*task_id, chunk.offset),
            value: encode(OUTPUT, chunk)?,
        },
        Write::DropOutput { task_id, offset } => Encoded::DropOutput {
            key: output_key(*task_id, *offset),
        },
        Write::PutIntent(intent) => Encoded::PutIntent {
            id: intent.id.to_bytes(),
            value: encode(CLEANUPS, intent)?,
        },
        Write::DeleteIntent(id) => Encoded::DeleteIntent { id: id.to_bytes() },
        Write::AddUsage { agent_id, usage } => Encoded::AddUsage {
            id: agent_id.to_bytes(),
            usage: *usage,
        },
    })
}
