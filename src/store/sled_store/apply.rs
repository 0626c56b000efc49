//! The body of a commit's transaction: every encoded write applied to its
//! trees, with the guards (names, supervisors, live agents, armed waits,
//! running tasks) that abort the whole batch.

use holarchy_actors::StoreError;
use holarchy_supervision::{
    AgentId, LifecycleState, MessageRecord, TaskStatus, UsageTotals, WaitRecord, WaitStatus,
};
use sled::transaction::{ConflictableTransactionError, TransactionalTree};

use super::encoded::Encoded;
use super::{pair_key, MESSAGES, TASKS, USAGE, WAITS};
use crate::store::agent_trees;
use crate::store::codec::{decode, decode_agent, decode_task, encode};
use crate::store::event_log::EncodedRun;

/// Why a transaction gave up on purpose.
pub(super) enum Abort {
    Precondition(String),
    NameTaken(String),
    SupervisorGone(AgentId),
    Corrupt(StoreError),
}

pub(super) type TxResult = Result<(), ConflictableTransactionError<Abort>>;

/// The agents' trees of a transaction: public, then private.
type RecordTrees<'a> = (&'a TransactionalTree, &'a TransactionalTree);

fn agent_is_live(
    (public, private): RecordTrees<'_>,
    sup: AgentId,
) -> Result<bool, ConflictableTransactionError<Abort>> {
    match agent_trees::get_in(public, private, &sup.to_bytes())? {
        Some((tree, bytes)) => decode_agent(tree, &bytes)
            .map(|r| r.state.is_live())
            .map_err(|e| ConflictableTransactionError::Abort(Abort::Corrupt(e))),
        None => Ok(false),
    }
}

/// Applies `writes` inside one transaction over every tree (in the order
/// `SledStore::commit` lists them).
pub(super) fn apply(t: &[TransactionalTree], writes: &[Encoded]) -> TxResult {
    let (private_agents, names, messages, pending, dedupe) = (&t[0], &t[1], &t[2], &t[3], &t[4]);
    let (tasks, owned, children, cleanups) = (&t[6], &t[7], &t[8], &t[9]);
    let (waits, owned_waits, triggers, work, owned_work) = (&t[10], &t[11], &t[12], &t[13], &t[14]);
    let output = &t[15];
    let public_agents = &t[16];
    let agents = (public_agents, private_agents);
    let records = |public: bool| {
        if public {
            public_agents
        } else {
            private_agents
        }
    };
    let (workspaces, worktrees) = (&t[17], &t[18]);
    let usage_totals = &t[19];
    for write in writes {
        match write {
            Encoded::CreateAgent {
                id,
                name,
                supervisor,
                public,
                value,
            } => {
                if let Some(name) = name {
                    if names.get(name.as_bytes())?.is_some() {
                        return Err(ConflictableTransactionError::Abort(Abort::NameTaken(
                            name.clone(),
                        )));
                    }
                    names.insert(name.as_bytes(), id.as_slice())?;
                }
                if let Some(sup) = supervisor {
                    if !agent_is_live(agents, *sup)? {
                        return Err(ConflictableTransactionError::Abort(Abort::SupervisorGone(
                            *sup,
                        )));
                    }
                    children.insert(pair_key(*sup, id), &[] as &[u8])?;
                }
                records(*public).insert(id.as_slice(), value.as_slice())?;
            }
            Encoded::PutAgent {
                id,
                public,
                guard_live,
                child_key,
                value,
            } => {
                if *guard_live && !agent_is_live(agents, AgentId::from_bytes(*id))? {
                    return Err(ConflictableTransactionError::Abort(Abort::Precondition(
                        "the agent has ended".into(),
                    )));
                }
                if let Some((key, live)) = child_key {
                    if *live {
                        children.insert(key.as_slice(), &[] as &[u8])?;
                    } else {
                        children.remove(key.as_slice())?;
                    }
                }
                records(*public).insert(id.as_slice(), value.as_slice())?;
            }
            Encoded::PutMessage {
                key,
                pending: is_pending,
                dedupe: dedupe_entry,
                value,
            } => {
                messages.insert(key.as_slice(), value.as_slice())?;
                if *is_pending {
                    pending.insert(key.as_slice(), &[] as &[u8])?;
                } else {
                    pending.remove(key.as_slice())?;
                }
                if let Some((dedupe_key, message_id)) = dedupe_entry {
                    dedupe.insert(dedupe_key.as_slice(), message_id.as_slice())?;
                }
            }
            Encoded::Requeue { key, agent, value } => {
                let handling = match messages.get(key.as_slice())? {
                    Some(bytes) => matches!(
                        decode::<MessageRecord>(MESSAGES, &bytes)
                            .map_err(|e| ConflictableTransactionError::Abort(Abort::Corrupt(e)))?
                            .status,
                        holarchy_supervision::MessageStatus::Handling { .. }
                    ),
                    None => false,
                };
                if handling && agent_is_live(agents, *agent)? {
                    messages.insert(key.as_slice(), value.as_slice())?;
                    pending.insert(key.as_slice(), &[] as &[u8])?;
                }
            }
            Encoded::PutTask {
                id,
                owned_key,
                guard_running,
                worktree_pending,
                value,
            } => {
                if *guard_running {
                    let running = match tasks.get(id.as_slice())? {
                        Some(bytes) => {
                            decode_task(TASKS, &bytes)
                                .map_err(|e| {
                                    ConflictableTransactionError::Abort(Abort::Corrupt(e))
                                })?
                                .status
                                == TaskStatus::Running
                        }
                        None => false,
                    };
                    if !running {
                        return Err(ConflictableTransactionError::Abort(Abort::Precondition(
                            "the task has already ended".into(),
                        )));
                    }
                }
                tasks.insert(id.as_slice(), value.as_slice())?;
                owned.insert(owned_key.as_slice(), &[] as &[u8])?;
                if *worktree_pending {
                    worktrees.insert(id.as_slice(), &[] as &[u8])?;
                } else {
                    worktrees.remove(id.as_slice())?;
                }
            }
            Encoded::PutWorkspaces { id, value } => {
                workspaces.insert(id.as_slice(), value.as_slice())?;
            }
            Encoded::PutWait {
                id,
                owned_key,
                trigger,
                guard_armed,
                value,
            } => {
                if *guard_armed {
                    let armed = match waits.get(id.as_slice())? {
                        Some(bytes) => {
                            decode::<WaitRecord>(WAITS, &bytes)
                                .map_err(|e| {
                                    ConflictableTransactionError::Abort(Abort::Corrupt(e))
                                })?
                                .status
                                == WaitStatus::Armed
                        }
                        None => false,
                    };
                    if !armed {
                        return Err(ConflictableTransactionError::Abort(Abort::Precondition(
                            "the wait is no longer armed".into(),
                        )));
                    }
                }
                waits.insert(id.as_slice(), value.as_slice())?;
                owned_waits.insert(owned_key.as_slice(), &[] as &[u8])?;
                if let Some(hash) = trigger {
                    triggers.insert(hash.as_slice(), id.as_slice())?;
                }
            }
            Encoded::PutWorkItem {
                id,
                owned_key,
                value,
            } => {
                work.insert(id.as_slice(), value.as_slice())?;
                owned_work.insert(owned_key.as_slice(), &[] as &[u8])?;
            }
            Encoded::PutOutput { key, value } => {
                output.insert(key.as_slice(), value.as_slice())?;
            }
            Encoded::DropOutput { key } => {
                output.remove(key.as_slice())?;
            }
            Encoded::PutIntent { id, value } => {
                cleanups.insert(id.as_slice(), value.as_slice())?;
            }
            Encoded::DeleteIntent { id } => {
                cleanups.remove(id.as_slice())?;
            }
            Encoded::DeleteAgent { id, name, public } => {
                let archived =
                    match agent_trees::get_in(public_agents, private_agents, id.as_slice())? {
                        Some((tree, bytes)) => {
                            decode_agent(tree, &bytes)
                                .map_err(|e| {
                                    ConflictableTransactionError::Abort(Abort::Corrupt(e))
                                })?
                                .state
                                == LifecycleState::Archived
                        }
                        None => false,
                    };
                if !archived {
                    return Err(ConflictableTransactionError::Abort(Abort::Precondition(
                        "only an archived agent can be deleted".into(),
                    )));
                }
                records(*public).remove(id.as_slice())?;
                // The name is freed only if it is still this agent's.
                if let Some(name) = name {
                    if names.get(name.as_bytes())?.as_deref() == Some(id.as_slice()) {
                        names.remove(name.as_bytes())?;
                    }
                }
                usage_totals.remove(id.as_slice())?;
                workspaces.remove(id.as_slice())?;
            }
            Encoded::AddUsage { id, usage } => {
                let mut totals: UsageTotals = match usage_totals.get(id.as_slice())? {
                    Some(bytes) => decode(USAGE, &bytes)
                        .map_err(|e| ConflictableTransactionError::Abort(Abort::Corrupt(e)))?,
                    None => UsageTotals::default(),
                };
                totals.add_turn(*usage);
                let value = encode(USAGE, &totals)
                    .map_err(|e| ConflictableTransactionError::Abort(Abort::Corrupt(e)))?;
                usage_totals.insert(id.as_slice(), value)?;
            }
        }
    }
    Ok(())
}

/// Writes each slot's last event number down, as of cursor `through`
/// (see `slots`), in the same transaction as the events.
pub(super) fn note_seqs(
    t: &[TransactionalTree],
    at: usize,
    through: holarchy_supervision::EventCursor,
    seqs: &crate::store::slots::SlotSeqs,
) -> TxResult {
    let value = crate::store::slots::encode_note(through, seqs)
        .map_err(|e| ConflictableTransactionError::Abort(Abort::Corrupt(e)))?;
    t[at].insert(crate::store::slots::NOTE_KEY, value)?;
    Ok(())
}

/// Writes a commit's event runs (see `event_log`) in the same transaction.
pub(super) fn append_events(t: &[TransactionalTree], runs: Vec<EncodedRun>) -> TxResult {
    let log = &t[5];
    for run in runs {
        log.insert(run.key().as_slice(), run.value)?;
    }
    Ok(())
}
