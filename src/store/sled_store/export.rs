//! The whole store as [`Record`]s, table after table, for a copy into
//! another store. Index trees (`pending`, `owned`, `children`, ...) stay
//! behind: the other store derives its own from the records.
//!
//! Every value is decoded on the way out, so a damaged record stops the
//! dump naming its tree and key rather than travelling on unreadable.

use holarchy_actors::store::{ContextRecord, MemoryNote};
use holarchy_actors::StoreError;
use holarchy_supervision::{AgentId, MessageId, WaitId};
use sled::{IVec, Tree};

use super::memory::Kept;
use super::{backend, SledStore, CONTEXT, DEDUPE, INBOUND, REPLAYS, SCHEDULES, TRIGGERS};
use crate::store::codec::{
    decode, decode_agent, decode_approval, decode_event_run, decode_instance, decode_task,
};
use crate::store::dump::Record;

/// A dump's consumer: takes one record at a time, in table order.
pub type Sink<'a> = dyn FnMut(Record) -> Result<(), StoreError> + 'a;

/// A value or key that does not read; [`each`] names its key.
fn bad(tree: &'static str, what: &str) -> StoreError {
    StoreError::Corrupt {
        tree,
        detail: what.to_owned(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn id16(tree: &'static str, bytes: &[u8]) -> Result<[u8; 16], StoreError> {
    <[u8; 16]>::try_from(bytes).map_err(|_| bad(tree, "not a 16-byte id"))
}

/// `instance \0 rest` as its two parts.
fn split_instance(tree: &'static str, key: &[u8]) -> Result<(String, String), StoreError> {
    let at = key
        .iter()
        .position(|b| *b == 0)
        .ok_or_else(|| bad(tree, "no instance separator"))?;
    let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).map_err(|_| bad(tree, "not UTF-8"));
    Ok((text(&key[..at])?, text(&key[at + 1..])?))
}

/// Every entry of `tree`, each made a record by `make`.
fn each(
    tree: &Tree,
    name: &'static str,
    sink: &mut Sink<'_>,
    mut make: impl FnMut(&IVec, &IVec) -> Result<Record, StoreError>,
) -> Result<(), StoreError> {
    for entry in tree.iter() {
        let (key, value) = entry.map_err(backend)?;
        // Whatever did not read, its tree and key are named, so an
        // operator can find it (and restore it from a backup).
        let record = make(&key, &value).map_err(|err| match err {
            StoreError::Corrupt { detail, .. } => StoreError::Corrupt {
                tree: name,
                detail: format!("key {}: {detail}", hex(&key)),
            },
            StoreError::UnsupportedVersion { version, .. } => StoreError::Corrupt {
                tree: name,
                detail: format!(
                    "key {}: format version {version}, which this build cannot read",
                    hex(&key)
                ),
            },
            other => other,
        })?;
        sink(record)?;
    }
    Ok(())
}

impl SledStore {
    /// Hands every record to `sink`, table by table in
    /// [`crate::store::dump::Table`] order. Run it on a store no daemon
    /// serves from: records written meanwhile may or may not be seen.
    pub fn dump(&self, sink: &mut Sink<'_>) -> Result<(), StoreError> {
        for (tree, name) in [
            (&self.agents.public, super::PUBLIC_AGENTS),
            (&self.agents.private, super::AGENTS),
        ] {
            each(tree, name, sink, |_, v| {
                Ok(Record::Agent(Box::new(decode_agent(name, v)?)))
            })?;
        }
        each(&self.names, super::NAMES, sink, |k, v| {
            let name = String::from_utf8(k.to_vec()).map_err(|_| bad(super::NAMES, "not UTF-8"))?;
            Ok(Record::Name(
                name,
                AgentId::from_bytes(id16(super::NAMES, v)?),
            ))
        })?;
        each(&self.messages, super::MESSAGES, sink, |_, v| {
            Ok(Record::Message(Box::new(decode(super::MESSAGES, v)?)))
        })?;
        each(&self.dedupe, DEDUPE, sink, |k, v| {
            let (agent, key) = k
                .split_at_checked(16)
                .ok_or_else(|| bad(DEDUPE, "short key"))?;
            Ok(Record::Dedupe {
                agent_id: AgentId::from_bytes(id16(DEDUPE, agent)?),
                key: String::from_utf8(key.to_vec()).map_err(|_| bad(DEDUPE, "not UTF-8"))?,
                message_id: MessageId::from_bytes(id16(DEDUPE, v)?),
            })
        })?;
        each(&self.tasks, super::TASKS, sink, |_, v| {
            Ok(Record::Task(Box::new(decode_task(super::TASKS, v)?)))
        })?;
        each(&self.waits, super::WAITS, sink, |_, v| {
            Ok(Record::Wait(Box::new(decode(super::WAITS, v)?)))
        })?;
        each(&self.triggers, TRIGGERS, sink, |k, v| {
            Ok(Record::Trigger {
                token_hash: <[u8; 32]>::try_from(k.as_ref())
                    .map_err(|_| bad(TRIGGERS, "not a 32-byte hash"))?,
                wait_id: WaitId::from_bytes(id16(TRIGGERS, v)?),
            })
        })?;
        each(&self.work, super::WORK, sink, |_, v| {
            Ok(Record::WorkItem(Box::new(decode(super::WORK, v)?)))
        })?;
        each(&self.output, super::OUTPUT, sink, |k, v| {
            let task = k.get(..16).ok_or_else(|| bad(super::OUTPUT, "short key"))?;
            Ok(Record::Output {
                task_id: holarchy_supervision::TaskId::from_bytes(id16(super::OUTPUT, task)?),
                chunk: decode(super::OUTPUT, v)?,
            })
        })?;
        each(&self.cleanups, super::CLEANUPS, sink, |_, v| {
            Ok(Record::Cleanup(decode(super::CLEANUPS, v)?))
        })?;
        each(&self.workspaces, super::WORKSPACES, sink, |_, v| {
            Ok(Record::Workspaces(decode(super::WORKSPACES, v)?))
        })?;
        each(&self.usage, super::USAGE, sink, |k, v| {
            Ok(Record::Usage(
                AgentId::from_bytes(id16(super::USAGE, k)?),
                decode(super::USAGE, v)?,
            ))
        })?;
        each(&self.events, super::EVENTS, sink, |k, v| {
            let first = <[u8; 8]>::try_from(k.as_ref())
                .map(u64::from_be_bytes)
                .map_err(|_| bad(super::EVENTS, "not an 8-byte cursor"))?;
            let last = decode_event_run(super::EVENTS, v)?
                .last()
                .map(|event| event.cursor)
                .ok_or_else(|| bad(super::EVENTS, "an empty run"))?;
            Ok(Record::EventRun {
                first,
                last,
                encoded: v.to_vec(),
            })
        })?;
        self.dump_side(sink)
    }

    /// The stores outside batches: instances, inbound events, approvals,
    /// summaries and notes.
    fn dump_side(&self, sink: &mut Sink<'_>) -> Result<(), StoreError> {
        each(&self.instances, super::INSTANCES, sink, |_, v| {
            Ok(Record::Instance(Box::new(decode_instance(
                super::INSTANCES,
                v,
            )?)))
        })?;
        each(&self.inbound, INBOUND, sink, |k, v| {
            let (instance, _) = split_instance(INBOUND, k)?;
            Ok(Record::Inbound {
                instance,
                event: Box::new(decode(INBOUND, v)?),
            })
        })?;
        each(&self.replays, REPLAYS, sink, |k, v| {
            let (instance, digest) = split_instance(REPLAYS, k)?;
            Ok(Record::Replay {
                instance,
                digest,
                encoded: v.to_vec(),
            })
        })?;
        each(&self.schedules, SCHEDULES, sink, |k, v| {
            let (instance, schedule) = split_instance(SCHEDULES, k)?;
            Ok(Record::Schedule {
                instance,
                schedule,
                state: decode(SCHEDULES, v)?,
            })
        })?;
        each(&self.approvals, super::APPROVALS, sink, |_, v| {
            Ok(Record::Approval(Box::new(decode_approval(
                super::APPROVALS,
                v,
            )?)))
        })?;
        each(&self.context, CONTEXT, sink, |k, v| {
            let record: ContextRecord = decode(CONTEXT, v)?;
            Ok(Record::Context(
                AgentId::from_bytes(id16(CONTEXT, k)?),
                record,
            ))
        })?;
        let memory = &self.memory;
        each(&memory.notes, "memory", sink, |_, v| {
            let note: MemoryNote = decode("memory", v)?;
            Ok(Record::Note(Box::new(note)))
        })?;
        each(&memory.counts, "memory_counts", sink, |k, v| {
            let agent_id = AgentId::from_bytes(id16("memory_counts", k)?);
            let kept = Kept::read(Some(v));
            // Written before trees were counted: the agent stands for its
            // tree, as the sled store's next note would make it.
            Ok(Record::NoteCount {
                agent_id,
                tree: kept.tree.unwrap_or(agent_id),
                notes: kept.notes,
            })
        })?;
        each(&memory.tree_counts, "memory_tree_counts", sink, |k, v| {
            let notes = <[u8; 8]>::try_from(v.as_ref())
                .map(u64::from_be_bytes)
                .map_err(|_| bad("memory_tree_counts", "not an 8-byte count"))?;
            Ok(Record::NoteTree {
                tree: AgentId::from_bytes(id16("memory_tree_counts", k)?),
                notes,
            })
        })?;
        each(&self.tokens, super::TOKENS, sink, |_, v| {
            Ok(Record::Token(Box::new(decode(super::TOKENS, v)?)))
        })?;
        each(&self.audit, super::AUDIT, sink, |_, v| {
            Ok(Record::Audit(Box::new(decode(super::AUDIT, v)?)))
        })?;
        each(&self.quotas, super::QUOTAS, sink, |_, v| {
            Ok(Record::Quota(Box::new(decode(super::QUOTAS, v)?)))
        })
    }
}
