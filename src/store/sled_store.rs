//! [`SledStore`]: the actors' store on sled.
//!
//! Trees and keys (all ids as 16 big-endian bytes):
//! - `agents`:   agent id                 -> AgentRecord
//! - `names`:    name (UTF-8)             -> agent id
//! - `messages`: agent id ++ message id   -> MessageRecord
//! - `pending`:  agent id ++ message id   -> (empty) for queued or handling messages
//! - `dedupe`:   agent id ++ dedupe key   -> message id
//! - `events`:   cursor (u64)             -> Event
//!
//! Each commit is one sled transaction over all trees, so a record and its
//! events land together. Event cursors are handed out under a lock held
//! across the transaction, which keeps the log dense and in cursor order.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use holarchy_actors::{Batch, DurableFuture, Store, StoreError, Write};
use holarchy_supervision::{
    AgentId, AgentRecord, Event, EventCursor, MessageId, MessageRecord, Visibility,
};
use sled::transaction::{ConflictableTransactionError, TransactionError};
use sled::Tree;
use tokio::sync::watch;

use super::codec::{decode, encode};
use super::group_commit::{FlushStats, GroupCommit};

const AGENTS: &str = "agents";
const NAMES: &str = "names";
const MESSAGES: &str = "messages";
const PENDING: &str = "pending";
const DEDUPE: &str = "dedupe";
const EVENTS: &str = "events";

fn backend(err: sled::Error) -> StoreError {
    StoreError::Backend(err.to_string())
}

fn pair_key(agent_id: AgentId, tail: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(16 + tail.len());
    key.extend_from_slice(&agent_id.to_bytes());
    key.extend_from_slice(tail);
    key
}

fn id_from_key<const N: usize>(tree: &'static str, bytes: &[u8]) -> Result<[u8; N], StoreError> {
    bytes.try_into().map_err(|_| StoreError::Corrupt {
        tree,
        detail: format!("key of {} bytes, expected {N}", bytes.len()),
    })
}

/// sled tuning the daemon exposes.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Bytes of page cache sled may hold.
    pub cache_capacity: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            cache_capacity: 256 * 1024 * 1024,
        }
    }
}

/// The one store implementation.
#[derive(Debug)]
pub struct SledStore {
    db: sled::Db,
    agents: Tree,
    names: Tree,
    messages: Tree,
    pending: Tree,
    dedupe: Tree,
    events: Tree,
    /// The last event cursor handed out; held across each transaction.
    next_cursor: Mutex<EventCursor>,
    /// The last event cursor whose transaction has been applied.
    committed: Arc<AtomicU64>,
    group: GroupCommit,
    stats: Arc<FlushStats>,
}

impl SledStore {
    /// Opens (or creates) the store in `path`. Must run inside a tokio
    /// runtime: it starts the group-commit flusher.
    pub fn open(path: &Path, config: &StoreConfig) -> Result<Self, StoreError> {
        let db = sled::Config::new()
            .path(path)
            .cache_capacity(config.cache_capacity)
            .open()
            .map_err(backend)?;
        // After a crash sled replays log bytes that may never have been
        // fsynced; flush them before calling any of it durable.
        db.flush().map_err(backend)?;
        let tree = |name: &str| db.open_tree(name).map_err(backend);
        let events = tree(EVENTS)?;
        let last = match events.last().map_err(backend)? {
            Some((key, _)) => u64::from_be_bytes(id_from_key::<8>(EVENTS, &key)?),
            None => 0,
        };
        let committed = Arc::new(AtomicU64::new(last));
        let stats = Arc::new(FlushStats::default());
        let group = GroupCommit::start(db.clone(), committed.clone(), stats.clone());
        Ok(Self {
            agents: tree(AGENTS)?,
            names: tree(NAMES)?,
            messages: tree(MESSAGES)?,
            pending: tree(PENDING)?,
            dedupe: tree(DEDUPE)?,
            events,
            next_cursor: Mutex::new(last),
            committed,
            group,
            stats,
            db,
        })
    }

    /// Flushes everything and stops the flusher; the last step of a
    /// shutdown. The database is released when the last handle drops.
    pub async fn close(&self) {
        self.group.close().await;
    }

    pub fn flush_stats(&self) -> &FlushStats {
        &self.stats
    }

    /// Bytes the database takes on disk.
    pub fn size_on_disk(&self) -> u64 {
        self.db.size_on_disk().unwrap_or(0)
    }

    /// One page of agents after `after`, in id (creation) order.
    pub fn list_agents(
        &self,
        after: Option<AgentId>,
        limit: usize,
        include_private: bool,
    ) -> Result<Vec<AgentRecord>, StoreError> {
        let start = after.map(|id| id.as_u128().saturating_add(1)).unwrap_or(0);
        let mut page = Vec::with_capacity(limit.min(1024));
        if after.is_some_and(|id| id.as_u128() == u128::MAX) {
            return Ok(page);
        }
        for entry in self.agents.range(start.to_be_bytes()..) {
            let (_, value) = entry.map_err(backend)?;
            let record: AgentRecord = decode(AGENTS, &value)?;
            if include_private || record.profile.visibility == Visibility::Public {
                page.push(record);
                if page.len() >= limit {
                    break;
                }
            }
        }
        Ok(page)
    }

    /// One page of an agent's messages after `after`, oldest first.
    pub fn list_messages(
        &self,
        agent_id: AgentId,
        after: Option<MessageId>,
        limit: usize,
    ) -> Result<Vec<MessageRecord>, StoreError> {
        let start = match after {
            Some(id) if id.as_u128() == u128::MAX => return Ok(Vec::new()),
            Some(id) => pair_key(agent_id, &(id.as_u128() + 1).to_be_bytes()),
            None => agent_id.to_bytes().to_vec(),
        };
        let end = pair_key(agent_id, &[0xff; 17]);
        self.messages
            .range(start..end)
            .take(limit)
            .map(|entry| {
                let (_, value) = entry.map_err(backend)?;
                decode(MESSAGES, &value)
            })
            .collect()
    }

    /// Durable events after `cursor`, at most `limit`.
    pub fn events_after(
        &self,
        cursor: EventCursor,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let durable = *self.group.watermark().borrow();
        if cursor >= durable {
            return Ok(Vec::new());
        }
        let start = (cursor + 1).to_be_bytes();
        let end = durable.to_be_bytes();
        self.events
            .range(start..=end)
            .take(limit)
            .map(|entry| {
                let (_, value) = entry.map_err(backend)?;
                decode(EVENTS, &value)
            })
            .collect()
    }

    /// Changes whenever more events become durable.
    pub fn event_watermark(&self) -> watch::Receiver<EventCursor> {
        self.group.watermark()
    }

    fn get<T: serde::de::DeserializeOwned>(
        &self,
        tree: &Tree,
        name: &'static str,
        key: &[u8],
    ) -> Result<Option<T>, StoreError> {
        match tree.get(key).map_err(backend)? {
            Some(bytes) => decode(name, &bytes).map(Some),
            None => Ok(None),
        }
    }
}

/// A batch, encoded ahead of the transaction (whose closure may rerun).
enum Encoded {
    CreateAgent {
        id: [u8; 16],
        name: Option<String>,
        value: Vec<u8>,
    },
    PutAgent {
        id: [u8; 16],
        value: Vec<u8>,
    },
    PutMessage {
        key: Vec<u8>,
        pending: bool,
        dedupe: Option<(Vec<u8>, [u8; 16])>,
        value: Vec<u8>,
    },
}

fn encode_write(write: &Write) -> Result<Encoded, StoreError> {
    Ok(match write {
        Write::CreateAgent(record) => Encoded::CreateAgent {
            id: record.id.to_bytes(),
            name: record.name.clone(),
            value: encode(AGENTS, record)?,
        },
        Write::PutAgent(record) => Encoded::PutAgent {
            id: record.id.to_bytes(),
            value: encode(AGENTS, record)?,
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
    })
}

impl Store for SledStore {
    fn agent(&self, id: AgentId) -> Result<Option<AgentRecord>, StoreError> {
        self.get(&self.agents, AGENTS, &id.to_bytes())
    }

    fn agent_id_by_name(&self, name: &str) -> Result<Option<AgentId>, StoreError> {
        match self.names.get(name.as_bytes()).map_err(backend)? {
            Some(bytes) => Ok(Some(AgentId::from_bytes(id_from_key(NAMES, &bytes)?))),
            None => Ok(None),
        }
    }

    fn message(
        &self,
        agent_id: AgentId,
        id: MessageId,
    ) -> Result<Option<MessageRecord>, StoreError> {
        self.get(
            &self.messages,
            MESSAGES,
            &pair_key(agent_id, &id.to_bytes()),
        )
    }

    fn message_id_by_dedupe_key(
        &self,
        agent_id: AgentId,
        key: &str,
    ) -> Result<Option<MessageId>, StoreError> {
        match self
            .dedupe
            .get(pair_key(agent_id, key.as_bytes()))
            .map_err(backend)?
        {
            Some(bytes) => Ok(Some(MessageId::from_bytes(id_from_key(DEDUPE, &bytes)?))),
            None => Ok(None),
        }
    }

    fn pending_messages(&self, agent_id: AgentId) -> Result<Vec<MessageRecord>, StoreError> {
        let mut out = Vec::new();
        for entry in self.pending.scan_prefix(agent_id.to_bytes()) {
            let (key, _) = entry.map_err(backend)?;
            if let Some(bytes) = self.messages.get(&key).map_err(backend)? {
                out.push(decode(MESSAGES, &bytes)?);
            }
        }
        Ok(out)
    }

    fn recovery_input(&self) -> Result<(Vec<AgentRecord>, Vec<MessageRecord>), StoreError> {
        let agents = self
            .agents
            .iter()
            .map(|entry| {
                let (_, value) = entry.map_err(backend)?;
                decode(AGENTS, &value)
            })
            .collect::<Result<Vec<AgentRecord>, _>>()?;
        let mut pending = Vec::new();
        for entry in self.pending.iter() {
            let (key, _) = entry.map_err(backend)?;
            if let Some(bytes) = self.messages.get(&key).map_err(backend)? {
                pending.push(decode(MESSAGES, &bytes)?);
            }
        }
        Ok((agents, pending))
    }

    fn commit(&self, batch: Batch) -> Result<(), StoreError> {
        let writes = batch
            .writes
            .iter()
            .map(encode_write)
            .collect::<Result<Vec<_>, _>>()?;
        let mut next = self
            .next_cursor
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let first = *next + 1;
        let at_ms = holarchy_actors::now_ms();
        let events = batch
            .events
            .into_iter()
            .enumerate()
            .map(|(i, (agent_id, kind))| {
                let cursor = first + i as u64;
                let event = Event {
                    cursor,
                    at_ms,
                    agent_id,
                    kind,
                };
                Ok((cursor.to_be_bytes(), encode(EVENTS, &event)?))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;

        self.group.begin_write();
        let trees = (
            &self.agents,
            &self.names,
            &self.messages,
            &self.pending,
            &self.dedupe,
            &self.events,
        );
        let result = sled::Transactional::transaction(
            &trees,
            |(agents, names, messages, pending, dedupe, log)| {
                for write in &writes {
                    match write {
                        Encoded::CreateAgent { id, name, value } => {
                            if let Some(name) = name {
                                if names.get(name.as_bytes())?.is_some() {
                                    return Err(ConflictableTransactionError::Abort(name.clone()));
                                }
                                names.insert(name.as_bytes(), id.as_slice())?;
                            }
                            agents.insert(id.as_slice(), value.as_slice())?;
                        }
                        Encoded::PutAgent { id, value } => {
                            agents.insert(id.as_slice(), value.as_slice())?;
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
                    }
                }
                for (cursor, value) in &events {
                    log.insert(cursor.as_slice(), value.as_slice())?;
                }
                Ok(())
            },
        );
        self.group.end_write();
        match result {
            Ok(()) => {
                *next += events.len() as u64;
                self.committed.store(*next, Ordering::Release);
                drop(next);
                self.group.nudge();
                Ok(())
            }
            Err(TransactionError::Abort(name)) => Err(StoreError::NameTaken(name)),
            Err(TransactionError::Storage(err)) => Err(backend(err)),
        }
    }

    fn durable(&self) -> DurableFuture {
        self.group.durable()
    }
}

#[cfg(test)]
mod tests {
    use holarchy_supervision::{
        EventKind, LifecycleState, MessageStatus, Preset, Provenance, RunId,
    };

    use super::*;

    fn agent(name: &str) -> AgentRecord {
        AgentRecord {
            id: AgentId::generate(),
            name: Some(name.into()),
            profile: Preset::PublicNamed.profile(),
            lineage_parent_agent_id: None,
            supervisor_agent_id: None,
            state: LifecycleState::Active,
            created_at_ms: 1,
            updated_at_ms: 1,
        }
    }

    fn message(agent_id: AgentId, status: MessageStatus, dedupe: Option<&str>) -> MessageRecord {
        MessageRecord {
            id: MessageId::generate(),
            agent_id,
            provenance: Provenance::Operator,
            body: "hi".into(),
            dedupe_key: dedupe.map(str::to_owned),
            status,
            reply: None,
            attempts: 0,
            created_at_ms: 1,
        }
    }

    fn created(record: &AgentRecord) -> Batch {
        Batch::new()
            .write(Write::CreateAgent(record.clone()))
            .event(
                record.id,
                EventKind::AgentCreated {
                    name: record.name.clone(),
                    preset: None,
                    lineage_parent_agent_id: None,
                    supervisor_agent_id: None,
                },
            )
    }

    #[tokio::test]
    async fn a_taken_name_fails_the_whole_batch() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
        let first = agent("ops");
        store.commit(created(&first)).expect("first create");
        let second = agent("ops");
        assert!(
            matches!(store.commit(created(&second)), Err(StoreError::NameTaken(n)) if n == "ops")
        );
        assert_eq!(store.agent(second.id).expect("reads"), None);
        store.durable().await.expect("flushes");
        let events = store.events_after(0, 10).expect("reads events");
        assert_eq!(events.len(), 1, "the failed batch wrote no event");
        assert_eq!(events[0].cursor, 1);
    }

    #[tokio::test]
    async fn pending_and_dedupe_indexes_follow_the_message() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
        let owner = agent("a");
        store.commit(created(&owner)).expect("create");
        let mut m = message(owner.id, MessageStatus::Queued, Some("k1"));
        store
            .commit(Batch::new().write(Write::PutMessage(m.clone())))
            .expect("put");
        assert_eq!(store.pending_messages(owner.id).expect("pending").len(), 1);
        assert_eq!(
            store
                .message_id_by_dedupe_key(owner.id, "k1")
                .expect("dedupe"),
            Some(m.id)
        );
        m.status = MessageStatus::Handled {
            run_id: RunId::generate(),
        };
        store
            .commit(Batch::new().write(Write::PutMessage(m.clone())))
            .expect("put");
        assert!(store
            .pending_messages(owner.id)
            .expect("pending")
            .is_empty());
        assert_eq!(
            store.list_messages(owner.id, None, 10).expect("list"),
            vec![m.clone()]
        );
        assert!(store
            .list_messages(owner.id, Some(m.id), 10)
            .expect("list")
            .is_empty());
    }

    #[tokio::test]
    async fn events_become_visible_only_once_durable_and_survive_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
            for i in 0..5 {
                store
                    .commit(created(&agent(&format!("a{i}"))))
                    .expect("create");
            }
            store.durable().await.expect("flushes");
            let events = store.events_after(0, 100).expect("events");
            let cursors: Vec<_> = events.iter().map(|e| e.cursor).collect();
            assert_eq!(cursors, [1, 2, 3, 4, 5]);
            assert_eq!(store.events_after(3, 1).expect("events")[0].cursor, 4);
            store.close().await;
        }
        let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("reopens");
        store.commit(created(&agent("later"))).expect("create");
        store.durable().await.expect("flushes");
        let cursors: Vec<_> = store
            .events_after(4, 100)
            .expect("events")
            .iter()
            .map(|e| e.cursor)
            .collect();
        assert_eq!(cursors, [5, 6], "cursors continue densely after a reopen");
    }

    #[tokio::test]
    async fn concurrent_waiters_share_flushes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("opens"));
        let mut tasks = Vec::new();
        for i in 0..200 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                store
                    .commit(created(&agent(&format!("n{i}"))))
                    .expect("create");
                store.durable().await
            }));
        }
        for task in tasks {
            task.await.expect("joins").expect("durable");
        }
        let flushes = store.flush_stats().flushes.load(Ordering::Relaxed);
        assert!(flushes < 200, "200 waiters took {flushes} flushes");
        assert_eq!(
            store.list_agents(None, 1000, true).expect("list").len(),
            200
        );
    }
}
