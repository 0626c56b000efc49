//! [`SledStore`]: the actors' store on sled.
//!
//! Trees and keys (all ids as 16 big-endian bytes):
//! - `agents`:   agent id                 -> AgentRecord of a private agent
//! - `public_agents`: agent id            -> AgentRecord of a public agent (see
//!   [`crate::store::agent_trees`])
//! - `names`:    name (UTF-8)             -> agent id
//! - `messages`: agent id ++ message id   -> MessageRecord
//! - `pending`:  agent id ++ message id   -> (empty) for queued or handling messages
//! - `dedupe`:   agent id ++ dedupe key   -> message id
//! - `events`:   first cursor (u64)       -> a run of consecutive events (see `event_log`)
//! - `tasks`:    task id                  -> TaskRecord
//! - `owned`:    owner id ++ task id       -> (empty): tasks by owner
//! - `children`: supervisor id ++ agent id -> (empty): live supervised agents
//! - `cleanups`: cleanup id               -> CleanupIntent
//! - `waits`:    wait id                  -> WaitRecord
//! - `owned_waits`: owner id ++ wait id   -> (empty): waits by owner
//! - `triggers`: SHA-256 of a token       -> wait id (armed or cancelled)
//! - `work`:     work item id             -> WorkItemRecord
//! - `owned_work`: owner id ++ item id    -> (empty): work items by owner
//! - `output`:   task id ++ offset (u64)  -> OutputChunk of a command
//! - `workspaces`: agent id               -> workspace Projection (absent: only agent_home)
//! - `worktrees`: task id                 -> (empty): tasks whose worktree is not yet removed
//! - `instances`: instance name          -> InstanceRecord (written by compare-and-swap, not in batches)
//! - `inbound`: instance \0 dedupe key     -> InboundEvent (insert-if-absent, not in batches)
//! - `replays`: instance \0 body digest    -> the dedupe key and time of the event a webhook
//!   body first came with (written with that event, not in batches)
//! - `schedules`: instance \0 schedule name -> ScheduleState (not in batches)
//! - `approvals`: approval id             -> ApprovalRecord (compare-and-swap on its status, not in batches)
//! - `agent_approvals`: agent id ++ approval id -> (empty): an agent's approvals, oldest first
//! - `open_approvals`: agent id ++ approval id -> (empty): approvals not yet decided and told
//! - `context`: agent id                 -> ContextRecord, its running summary (not in batches)
//! - `turn_inputs`: agent id ++ run id -> TurnInputRecord, what a recorded turn's brain saw
//!   (not in batches; see `turn_inputs`)
//! - `turn_shared`: digest            -> SharedInput, a role and catalog recorded turns share
//! - `turn_shared_refs`: digest ++ 0 ++ agent id ++ run id -> (empty): which records use it
//! - `replay_jobs`: replay id        -> ReplayRecord (not in batches; see `replays`)
//! - `replay_turns`: replay id ++ index -> TurnReport of one replayed turn
//! - `usage`:   agent id                  -> UsageTotals: tokens its turns spent (added to in
//!   the batch of each turn's end)
//! - `tokens`:  token id (ULID text)     -> TokenRecord, hashed (not in batches; see `access`)
//! - `audit`:   entry id (ULID, 16 bytes) -> AuditEntry of an operator's write (not in batches)
//! - `quotas`:  namespace                 -> QuotaRecord (not in batches; see `access`)
//! - `memory`, `memory_keys`, `memory_counts`, `memory_queue`, `memory_meta`:
//!   agents' notes and their indexing (not in batches; see `memory`)
//!
//! Each commit is one sled transaction over all trees, so a record and its
//! events land together. Event cursors are handed out inside the
//! transaction, under sled's lock, which keeps the log dense and in cursor
//! order.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use holarchy_actors::{Batch, StoreError};
use holarchy_supervision::{AgentId, AgentRecord, Event, EventCursor, TaskId, UsageTotals};
use sled::Tree;
use tokio::sync::watch;

use super::agent_trees::{AgentTrees, AGENTS, PUBLIC_AGENTS};
use super::codec::{decode, decode_agent};
use super::event_log;
use super::group_commit::GroupCommit;
use super::slots::SlotSeqs;
use super::stats::{StatsSnapshot, StoreStats};
use grouped::Applier;
use writer::Job;
use writer::Writer;

const NAMES: &str = "names";
const MESSAGES: &str = "messages";
const PENDING: &str = "pending";
const DEDUPE: &str = "dedupe";
const EVENTS: &str = "events";
const TASKS: &str = "tasks";
const OWNED: &str = "owned";
const CHILDREN: &str = "children";
const CLEANUPS: &str = "cleanups";
const WAITS: &str = "waits";
const OWNED_WAITS: &str = "owned_waits";
const TRIGGERS: &str = "triggers";
const WORK: &str = "work";
const OWNED_WORK: &str = "owned_work";
const OUTPUT: &str = "output";
const WORKSPACES: &str = "workspaces";
const WORKTREES: &str = "worktrees";
const USAGE: &str = "usage";
/// Outside the batch path: see `instances`.
const INSTANCES: &str = "instances";
/// Outside the batch path: see `inbound`.
const INBOUND: &str = "inbound";
/// Outside the batch path: see `replays`.
const REPLAYS: &str = "replays";
const SCHEDULES: &str = "schedules";
/// Outside the batch path: see `approvals`.
const APPROVALS: &str = "approvals";
const AGENT_APPROVALS: &str = "agent_approvals";
const OPEN_APPROVALS: &str = "open_approvals";
/// Outside the batch path: see `context`.
const CONTEXT: &str = "context";
/// Outside the batch path: see `turn_inputs`.
const TURN_INPUTS: &str = "turn_inputs";
const TURN_SHARED: &str = "turn_shared";
const TURN_SHARED_REFS: &str = "turn_shared_refs";
/// Outside the batch path: see `replays`.
const REPLAY_JOBS: &str = "replay_jobs";
const REPLAY_TURNS: &str = "replay_turns";
/// Outside the batch path: see `access`.
const TOKENS: &str = "tokens";
const AUDIT: &str = "audit";
const QUOTAS: &str = "quotas";

/// Every tree, in the order `apply::apply` takes them in a transaction.
const APPLY_ORDER: [&str; 21] = [
    AGENTS,
    NAMES,
    MESSAGES,
    PENDING,
    DEDUPE,
    EVENTS,
    TASKS,
    OWNED,
    CHILDREN,
    CLEANUPS,
    WAITS,
    OWNED_WAITS,
    TRIGGERS,
    WORK,
    OWNED_WORK,
    OUTPUT,
    PUBLIC_AGENTS,
    WORKSPACES,
    WORKTREES,
    USAGE,
    crate::store::slots::NOTE_TREE,
];

/// Each slot's last event number: the last note's, and the log's after
/// it, noted again so the next start reads from here. Read once per start.
fn slot_seqs(events: &Tree, notes: &Tree) -> Result<SlotSeqs, StoreError> {
    use crate::store::slots::{decode_note, encode_note, NOTE_KEY};
    let (through, mut seqs) = match notes.get(NOTE_KEY).map_err(backend)? {
        Some(bytes) => decode_note(&bytes)?,
        None => (0, SlotSeqs::default()),
    };
    let last = event_log::seqs_after(events, through, &mut seqs)?;
    if last > through {
        notes
            .insert(NOTE_KEY, encode_note(last, &seqs)?)
            .map_err(backend)?;
    }
    Ok(seqs)
}

fn backend(err: sled::Error) -> StoreError {
    StoreError::Backend(err.to_string())
}

/// An agent record of a listing, or `None` for one that cannot be read:
/// the start named it to the operator (`holarchy status`), and one damaged
/// record must not hide every other agent.
fn readable(
    tree: &'static str,
    (key, value): (sled::IVec, sled::IVec),
) -> Result<Option<AgentRecord>, StoreError> {
    match decode_agent(tree, &value) {
        Ok(record) => Ok(Some(record)),
        Err(StoreError::Corrupt { .. } | StoreError::UnsupportedVersion { .. }) => {
            tracing::debug!(tree, key = %hex::encode(key), "a damaged agent record left out of a listing");
            Ok(None)
        }
        Err(err) => Err(err),
    }
}

fn output_key(task_id: TaskId, offset: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(24);
    key.extend_from_slice(&task_id.to_bytes());
    key.extend_from_slice(&offset.to_be_bytes());
    key
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
    /// Bytes of page cache sled may hold, as sled counts them: serialized
    /// page sizes. Its in-memory nodes cost about three times that.
    pub cache_capacity: u64,
}

/// The default cache, in MiB: 96 MiB (about 300 MB of real memory) kept
/// every latency and creation target at 1,000,000 agents and brought the
/// memory after archiving 900,000 of them to 2.0x the 100,000 it leaves,
/// where 256 MiB gave 2.4x (docs/benchmarks.md, 2026-11-23).
pub const DEFAULT_CACHE_MIB: u64 = 96;

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            cache_capacity: DEFAULT_CACHE_MIB * 1024 * 1024,
        }
    }
}

/// The one store implementation.
#[derive(Debug)]
pub struct SledStore {
    db: sled::Db,
    /// The store's directory, as an operator named it.
    path: std::path::PathBuf,
    agents: AgentTrees,
    names: Tree,
    messages: Tree,
    pending: Tree,
    dedupe: Tree,
    events: Tree,
    tasks: Tree,
    owned: Tree,
    children: Tree,
    cleanups: Tree,
    waits: Tree,
    owned_waits: Tree,
    triggers: Tree,
    work: Tree,
    owned_work: Tree,
    output: Tree,
    workspaces: Tree,
    worktrees: Tree,
    instances: Tree,
    inbound: Tree,
    replays: Tree,
    schedules: Tree,
    approvals: Tree,
    agent_approvals: Tree,
    open_approvals: Tree,
    context: Tree,
    turn_inputs: Tree,
    turn_shared: Tree,
    turn_shared_refs: Tree,
    replay_jobs: Tree,
    replay_turns: Tree,
    usage: Tree,
    tokens: Tree,
    audit: Tree,
    quotas: Tree,
    /// Agents' notes and their search index.
    memory: memory::Memory,
    /// Applies batches (see `writer`).
    writer: Arc<Writer>,
    group: Arc<GroupCommit<Job>>,
    stats: Arc<StoreStats>,
    /// See [`Store::agent_ends`].
    agent_ends: AtomicU64,
}

impl SledStore {
    /// Opens (or creates) the store in `path`. Must run inside a tokio
    /// runtime: it starts the store's writer thread.
    pub fn open(path: &Path, config: &StoreConfig) -> Result<Self, StoreError> {
        let db = sled::Config::new()
            .path(path)
            .cache_capacity(config.cache_capacity)
            .open()
            .map_err(backend)?;
        // After a crash sled replays log bytes that may never have been
        // fsynced; flush them before calling any of it durable.
        db.flush().map_err(backend)?;
        // Before the writer starts: an old store's records move first.
        let agents = AgentTrees::open(&db)?;
        let tree = |name: &str| db.open_tree(name).map_err(backend);
        let events = tree(EVENTS)?;
        let last = event_log::last_cursor(&events)?;
        let slot_notes = tree(crate::store::slots::NOTE_TREE)?;
        let seqs = slot_seqs(&events, &slot_notes)?;
        let committed = Arc::new(AtomicU64::new(last));
        let stats = Arc::new(StoreStats::default());
        let (group, unstarted) = GroupCommit::new(committed.clone(), stats.clone());
        let group = Arc::new(group);
        let trees = APPLY_ORDER
            .iter()
            .map(|name| tree(name))
            .collect::<Result<Vec<_>, _>>()?;
        let writer = Arc::new(Writer::new(
            trees,
            last,
            seqs,
            committed,
            group.clone(),
            stats.clone(),
        ));
        unstarted.start(db.clone(), Applier(writer.clone()))?;
        let memory = memory::Memory::open(&db, path, &agents, group.watermark())?;
        turn_inputs::sweep_shared(&tree(TURN_SHARED)?, &tree(TURN_SHARED_REFS)?)?;
        Ok(Self {
            agents,
            names: tree(NAMES)?,
            messages: tree(MESSAGES)?,
            pending: tree(PENDING)?,
            dedupe: tree(DEDUPE)?,
            tasks: tree(TASKS)?,
            owned: tree(OWNED)?,
            children: tree(CHILDREN)?,
            cleanups: tree(CLEANUPS)?,
            waits: tree(WAITS)?,
            owned_waits: tree(OWNED_WAITS)?,
            triggers: tree(TRIGGERS)?,
            work: tree(WORK)?,
            owned_work: tree(OWNED_WORK)?,
            output: tree(OUTPUT)?,
            workspaces: tree(WORKSPACES)?,
            worktrees: tree(WORKTREES)?,
            instances: tree(INSTANCES)?,
            inbound: tree(INBOUND)?,
            replays: tree(REPLAYS)?,
            schedules: tree(SCHEDULES)?,
            approvals: tree(APPROVALS)?,
            agent_approvals: tree(AGENT_APPROVALS)?,
            open_approvals: tree(OPEN_APPROVALS)?,
            context: tree(CONTEXT)?,
            turn_inputs: tree(TURN_INPUTS)?,
            turn_shared: tree(TURN_SHARED)?,
            turn_shared_refs: tree(TURN_SHARED_REFS)?,
            replay_jobs: tree(REPLAY_JOBS)?,
            replay_turns: tree(REPLAY_TURNS)?,
            usage: tree(USAGE)?,
            tokens: tree(TOKENS)?,
            audit: tree(AUDIT)?,
            quotas: tree(QUOTAS)?,
            memory,
            events,
            writer,
            group,
            stats,
            agent_ends: AtomicU64::new(0),
            db,
            path: path.to_path_buf(),
        })
    }

    /// Flushes everything and stops the flusher; the last step of a
    /// shutdown. The database is released when the last handle drops.
    pub async fn close(&self) {
        self.memory.stop().await;
        self.group.close().await;
        // One line an operator (or a benchmark) can read after a run.
        self.stats.snapshot().log();
    }

    /// Adds the commit path's histograms to `registry`.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.stats.register(registry);
    }

    /// Resolves with the reason once the disk refuses a write or a flush:
    /// from then on the store takes nothing more until it is opened again.
    pub async fn failed(&self) -> String {
        let mut failure = self.group.failure().watch();
        let why = match failure.wait_for(Option::is_some).await {
            Ok(why) => why.clone(),
            Err(_) => None,
        };
        match why {
            Some(why) => why,
            // The store is gone for good: nothing is failing.
            None => std::future::pending().await,
        }
    }

    /// How long the flush under way has run, if one does: a disk that
    /// stalls shows here before any caller times out.
    pub fn flush_running_for(&self) -> Option<std::time::Duration> {
        self.group.flush_running_for()
    }

    /// Batches committed so far.
    pub fn commits(&self) -> u64 {
        self.stats.commits()
    }

    /// Flushes so far.
    pub fn flushes(&self) -> u64 {
        self.stats.flushes()
    }

    /// Where commits waited so far (see [`StoreStats`]).
    pub fn commit_stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// Flushes and transactions since the store opened.
    pub fn work_done(&self) -> (u64, u64) {
        let stats = self.commit_stats();
        (stats.flushes, stats.commits)
    }

    /// Bytes the database takes on disk.
    pub fn size_on_disk(&self) -> u64 {
        self.db.size_on_disk().unwrap_or(0)
    }

    /// Bytes of the records the store holds for `agent` (their values,
    /// as PostgreSQL counts them): its record, messages, notes, context,
    /// and its commands' records and output. What a namespace's store
    /// quota counts; reads them all.
    pub fn agent_bytes(&self, agent: AgentId) -> Result<u64, StoreError> {
        fn sum(tree: &Tree, prefix: &[u8]) -> Result<u64, StoreError> {
            tree.scan_prefix(prefix).try_fold(0u64, |bytes, entry| {
                let (_, value) = entry.map_err(backend)?;
                Ok(bytes + value.len() as u64)
            })
        }
        let id = agent.to_bytes();
        let mut bytes = self.agents.get(&id)?.map_or(0, |(_, v)| v.len() as u64);
        bytes += sum(&self.messages, &id)? + sum(&self.memory.notes, &id)?;
        bytes += self
            .context
            .get(id)
            .map_err(backend)?
            .map_or(0, |v| v.len() as u64);
        for key in self.scan_keys(&self.owned, agent) {
            let key = key?;
            let task = key.get(16..).unwrap_or_default();
            bytes += self
                .tasks
                .get(task)
                .map_err(backend)?
                .map_or(0, |v| v.len() as u64);
            bytes += sum(&self.output, task)?;
        }
        Ok(bytes)
    }

    /// "sled at <dir>", for an operator.
    pub fn describe(&self) -> String {
        format!("sled at {}", self.path.display())
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
        let from = start.to_be_bytes();
        let mut public = self.agents.public.range(from..).peekable();
        if !include_private {
            for entry in public.take(limit) {
                page.extend(readable(PUBLIC_AGENTS, entry.map_err(backend)?)?);
            }
            return Ok(page);
        }
        // Both trees in id order, merged.
        let mut private = self.agents.private.range(from..).peekable();
        while page.len() < limit {
            let take_public = match (public.peek(), private.peek()) {
                (Some(Ok((p, _))), Some(Ok((q, _)))) => p < q,
                (Some(_), _) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            let (tree, next) = if take_public {
                (PUBLIC_AGENTS, public.next())
            } else {
                (AGENTS, private.next())
            };
            if let Some(entry) = next {
                page.extend(readable(tree, entry.map_err(backend)?)?);
            }
        }
        Ok(page)
    }

    /// The tokens `agent_id`'s turns spent, summed; `None` before any
    /// turn reported usage.
    pub fn usage_of(&self, agent_id: AgentId) -> Result<Option<UsageTotals>, StoreError> {
        self.get(&self.usage, USAGE, &agent_id.to_bytes())
    }

    /// Up to `limit` agent names starting with `prefix`, in name order,
    /// each with its agent: what an operator's search by name reads.
    pub fn names_from(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, AgentId)>, StoreError> {
        self.names
            .scan_prefix(prefix.as_bytes())
            .take(limit)
            .map(|entry| {
                let (key, value) = entry.map_err(backend)?;
                let id = AgentId::from_bytes(id_from_key(NAMES, &value)?);
                Ok((String::from_utf8_lossy(&key).into_owned(), id))
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
        event_log::range(&self.events, cursor, durable)
            .take(limit)
            .collect()
    }

    /// Changes whenever more events become durable.
    pub fn event_watermark(&self) -> watch::Receiver<EventCursor> {
        self.group.watermark()
    }

    /// Removes up to `limit` runs of the oldest events, all made before
    /// `before_ms`: the log's retention. Each slot's numbers are noted
    /// first, so none is given twice once its events are gone; the newest
    /// run always stays. How many events went.
    pub fn trim_events(&self, before_ms: u64, limit: usize) -> Result<u64, StoreError> {
        // Noted only when something is due: a note is a write.
        if !event_log::oldest_due(&self.events, before_ms)? {
            return Ok(0);
        }
        let through = self.writer.note_now()?;
        event_log::trim(&self.events, before_ms, through, limit)
    }

    fn get_agent(&self, key: &[u8]) -> Result<Option<AgentRecord>, StoreError> {
        self.agents.record(key)
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

impl SledStore {
    fn scan_keys(
        &self,
        tree: &Tree,
        prefix: AgentId,
    ) -> impl Iterator<Item = Result<sled::IVec, StoreError>> {
        tree.scan_prefix(prefix.to_bytes())
            .map(|entry| entry.map(|(key, _)| key).map_err(backend))
    }

    /// Moves [`Store::agent_ends`] for a batch that may end an agent,
    /// before the batch is applied (a refused one is counted too: the
    /// count may move for nothing, never stay put for an end).
    fn count_an_end(&self, batch: &Batch) {
        if batch.may_end_an_agent() {
            self.agent_ends.fetch_add(1, Ordering::SeqCst);
        }
    }
}

mod access;
mod apply;
mod approvals;
mod context;
mod encoded;
mod export;
mod grouped;
mod inbound;
mod instances;
mod memory;
mod reads;
mod recovery;
mod replays;
#[cfg(test)]
mod tests;
mod turn_inputs;
mod views;
mod writer;
