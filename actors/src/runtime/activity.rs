//! What `holarchy top` reads in one call: the runtime's totals, the turns
//! since start, and bounded lists of the busiest agents, the longest
//! queues, running tasks and armed waits. Agents come from the hot set
//! (`metrics::activity`), tasks and waits from the directory, `limit` of
//! each: nothing here walks the agents, so a read costs the same at a
//! million idle agents as at ten.

use std::collections::{HashMap, HashSet};

use holarchy_supervision::{
    AgentId, LifecycleState, RunId, TaskRecord, TaskStatus, Visibility, WaitKind, WaitRecord,
    WaitStatus,
};

use super::handle::Runtime;
use super::{RuntimeError, RuntimeSnapshot};
use crate::metrics::activity::{self, HotAgent};
use crate::metrics::TurnCounts;
use crate::store::StoreError;

/// Most entries a list may ask for.
pub const MAX_ACTIVITY_LIMIT: usize = 100;

/// One agent of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveAgent {
    pub agent_id: AgentId,
    pub name: Option<String>,
    pub visibility: Visibility,
    pub state: LifecycleState,
    pub queue_len: usize,
    pub current_run: Option<RunId>,
    /// Turns it started in about the last minute.
    pub recent_turns: u32,
}

/// The answer to [`Runtime::activity`].
#[derive(Debug, Clone)]
pub struct ActivityReport {
    pub status: RuntimeSnapshot,
    pub turns: TurnCounts,
    /// Messages on all live agents' queues.
    pub queued_messages: u64,
    /// The longest queue.
    pub queue_max: usize,
    pub busiest: Vec<ActiveAgent>,
    pub longest_queues: Vec<ActiveAgent>,
    /// The running tasks listed, oldest first.
    pub tasks: Vec<TaskRecord>,
    /// The armed waits listed, the next timer first, then triggers.
    pub waits: Vec<WaitRecord>,
    /// The names of the listed tasks' and waits' owners that have one, so
    /// a reader shows names without a call per row.
    pub owner_names: HashMap<AgentId, String>,
    /// Agents in the hot set now, and updates it had no room for since
    /// start (when not 0, a list may miss an agent).
    pub hot_agents: usize,
    pub left_out: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ActivityError {
    #[error("limit must be at most {MAX_ACTIVITY_LIMIT}, got {0}")]
    Limit(usize),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Runtime {
    /// The runtime's activity, each list at most `limit` long.
    pub async fn activity(&self, limit: usize) -> Result<ActivityReport, ActivityError> {
        if limit > MAX_ACTIVITY_LIMIT {
            return Err(ActivityError::Limit(limit));
        }
        let ctx = self.ctx();
        let metrics = &ctx.stats.metrics;
        let status = self.snapshot().await?;
        let hot = metrics.activity().agents();
        let (busiest, queued) = activity::top(&hot, limit);
        let busiest = self.describe_all(&busiest)?;
        let longest_queues = self.describe_all(&queued)?;

        // An actor may outlive its record's end by a moment: only what the
        // store says runs, or is armed, is listed.
        let mut tasks = Vec::new();
        for id in ctx.directory.some_tasks(limit) {
            tasks.extend(
                ctx.reads()
                    .task(id)?
                    .filter(|t| t.status == TaskStatus::Running),
            );
        }
        tasks.sort_by_key(|t| (t.created_at_ms, t.id));
        let mut waits = Vec::new();
        for id in ctx.directory.some_waits(limit) {
            waits.extend(
                ctx.reads()
                    .wait(id)?
                    .filter(|w| w.status == WaitStatus::Armed),
            );
        }
        waits.sort_by_key(|w| match w.kind {
            WaitKind::Timer { deadline_ms } => (0, deadline_ms, w.id),
            WaitKind::Trigger { .. } => (1, w.created_at_ms, w.id),
        });
        let owner_names = self.owner_names(
            tasks
                .iter()
                .map(|t| t.owner_agent_id)
                .chain(waits.iter().map(|w| w.owner_agent_id)),
        )?;
        Ok(ActivityReport {
            status,
            turns: metrics.turn_counts(),
            queued_messages: u64::try_from(metrics.queues().depth.get()).unwrap_or(0),
            queue_max: hot.iter().map(|h| h.queue_len).max().unwrap_or(0),
            busiest,
            longest_queues,
            tasks,
            waits,
            owner_names,
            hot_agents: hot.len(),
            left_out: metrics.activity().left_out(),
        })
    }

    /// The names of `owners`: one read per owner, however many of the
    /// listed tasks and waits it holds (at most two lists' worth).
    fn owner_names(
        &self,
        owners: impl Iterator<Item = AgentId>,
    ) -> Result<HashMap<AgentId, String>, StoreError> {
        let mut names = HashMap::new();
        let mut read = HashSet::new();
        for owner in owners {
            if !read.insert(owner) {
                continue;
            }
            if let Some(name) = self.ctx().reads().agent(owner)?.and_then(|r| r.name) {
                names.insert(owner, name);
            }
        }
        Ok(names)
    }

    /// Each listed agent's record and live view. An agent gone meanwhile
    /// (no record) is left out.
    fn describe_all(&self, hot: &[HotAgent]) -> Result<Vec<ActiveAgent>, StoreError> {
        hot.iter()
            .filter_map(|h| self.describe(*h).transpose())
            .collect()
    }

    fn describe(&self, hot: HotAgent) -> Result<Option<ActiveAgent>, StoreError> {
        let ctx = self.ctx();
        let Some(record) = ctx.reads().agent(hot.agent_id)? else {
            return Ok(None);
        };
        let mut agent = ActiveAgent {
            agent_id: hot.agent_id,
            name: record.name,
            visibility: record.profile.visibility,
            state: record.state,
            queue_len: hot.queue_len,
            current_run: None,
            recent_turns: hot.recent_turns,
        };
        let Some(entry) = ctx.directory.get(hot.agent_id) else {
            return Ok(Some(agent));
        };
        let live = entry.snapshot();
        agent.state = live.state;
        agent.queue_len = live.queue_len;
        agent.current_run = live.current_run;
        Ok(Some(agent))
    }
}
