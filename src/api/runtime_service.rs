//! `holarchy.v1.RuntimeService`: the daemon's status, and its activity
//! (totals and bounded top lists, for `holarchy top`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use holarchy_actors::metrics::activity::WINDOW_MS;
use holarchy_actors::runtime::activity::{ActiveAgent, ActivityError, ActivityReport};
use holarchy_actors::sandbox::SandboxReport;
use holarchy_actors::Runtime;
use holarchy_supervision::bounds::head;
use holarchy_supervision::{AgentId, TaskRecord, WaitKind, WaitRecord};
use tonic::{Request, Response, Status};

use super::convert::{self, ApiError};
use super::pb;
use super::pb::runtime_service_server::RuntimeService;
use super::read_model::ReadModel;

#[derive(Debug, Clone)]
pub struct RuntimeApi {
    runtime: Arc<Runtime>,
    store: Arc<dyn ReadModel>,
    data_dir: PathBuf,
    sandbox: SandboxReport,
    listeners: Vec<String>,
}

impl RuntimeApi {
    pub fn new(
        runtime: Arc<Runtime>,
        store: Arc<dyn ReadModel>,
        data_dir: PathBuf,
        sandbox: SandboxReport,
    ) -> Self {
        Self {
            runtime,
            store,
            data_dir,
            sandbox,
            listeners: Vec::new(),
        }
    }

    /// Where the daemon answers, as `GetStatus` lists it.
    pub fn listeners(self, listeners: Vec<String>) -> Self {
        Self { listeners, ..self }
    }
}

/// Resident set size of this process, from `/proc` (0 where there is none).
pub fn rss_bytes() -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map(|kib| kib * 1024)
        .unwrap_or(0)
}

#[tonic::async_trait]
impl RuntimeService for RuntimeApi {
    async fn get_status(
        &self,
        request: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        // A caller of one namespace sees the daemon's figures, but not
        // where it keeps its data, its database, its pid, nor damaged
        // records of agents not its own.
        let scoped = request
            .extensions()
            .get::<crate::access::Caller>()
            .filter(|caller| !caller.global)
            .map(|caller| caller.namespace.clone());
        let snapshot = self.runtime.snapshot().await.map_err(ApiError::from)?;
        let heap = crate::memory::heap_stats().unwrap_or_default();
        let (flushes, transactions) = self.store.work_done();
        let mut status = pb::GetStatusResponse {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            uptime_ms: self.runtime.uptime().as_millis() as u64,
            public_agents: snapshot.public_agents as u64,
            private_agents: snapshot.private_agents as u64,
            activity: if snapshot.busy_runs > 0 {
                "busy"
            } else {
                "idle"
            }
            .to_owned(),
            busy_runs: snapshot.busy_runs as u64,
            restarts: snapshot.restarts,
            agents_given_up: snapshot.given_up,
            recovered_agents: snapshot.recovered_agents as u64,
            interrupted_runs: snapshot.interrupted_runs as u64,
            rss_bytes: rss_bytes(),
            store_bytes: self.store.size_on_disk(),
            store: self.store.describe(),
            store_flushes: flushes,
            store_transactions: transactions,
            event_cursor: *self.store.event_watermark().borrow(),
            data_dir: self.data_dir.display().to_string(),
            sandbox_landlock_abi: self.sandbox.landlock_abi.into(),
            sandbox: self.sandbox.describe(),
            sandbox_network: self.sandbox.describe_network(),
            listeners: self.listeners.clone(),
            running_tasks: snapshot.running_tasks as u64,
            armed_waits: snapshot.armed_waits as u64,
            pid: std::process::id(),
            heap_allocated_bytes: heap.allocated,
            heap_resident_bytes: heap.resident,
            damaged_records: snapshot
                .damaged
                .iter()
                .map(|d| pb::DamagedRecord {
                    tree: d.tree.to_owned(),
                    key: d.key.clone(),
                    agent_id: d.agent_id.map(|id| id.to_string()).unwrap_or_default(),
                    reason: d.reason.clone(),
                })
                .collect(),
            damaged_count: snapshot.damaged_count as u64,
            held_agents: snapshot.held_agents as u64,
        };
        if let Some(namespace) = scoped {
            status.data_dir.clear();
            status.store.clear();
            status.pid = 0;
            let store = self.store.clone();
            status.damaged_records.retain(|damaged| {
                damaged
                    .agent_id
                    .parse()
                    .ok()
                    .and_then(|id| store.agent(id).ok().flatten())
                    .is_some_and(|record| record.namespace == namespace)
            });
        }
        Ok(Response::new(status))
    }

    async fn get_activity(
        &self,
        request: Request<pb::GetActivityRequest>,
    ) -> Result<Response<pb::GetActivityResponse>, Status> {
        let namespace = super::scope::namespace_of(&request);
        let limit = match request.into_inner().limit {
            0 => DEFAULT_ACTIVITY_LIMIT,
            n => usize::try_from(n).unwrap_or(usize::MAX),
        };
        let report = self
            .runtime
            .activity(limit)
            .await
            .map_err(|err| match err {
                ActivityError::Limit(_) => ApiError::InvalidArgument(err.to_string()),
                ActivityError::Runtime(err) => ApiError::from(err),
                ActivityError::Store(err) => ApiError::from(err),
            })?;
        let mut answer = activity(report, self.runtime.uptime().as_millis() as u64);
        // The lists name agents: only the caller's namespace's. The totals
        // are the daemon's.
        let mine = |id: &str| {
            id.parse::<AgentId>()
                .ok()
                .and_then(|id| self.store.agent(id).ok().flatten())
                .is_some_and(|record| record.namespace == namespace)
        };
        answer.busiest.retain(|a| mine(&a.agent_id));
        answer.longest_queues.retain(|a| mine(&a.agent_id));
        answer.running_tasks.retain(|t| mine(&t.owner_agent_id));
        answer.armed_waits.retain(|w| mine(&w.owner_agent_id));
        Ok(Response::new(answer))
    }
}

/// Entries per list when a call names no limit.
const DEFAULT_ACTIVITY_LIMIT: usize = 10;

/// Agent-written text in a list (a task's label, a wait's reason) is cut to
/// this, so a page of 4 lists of 100 stays small.
const LISTED_TEXT_BYTES: usize = 200;

fn activity(report: ActivityReport, uptime_ms: u64) -> pb::GetActivityResponse {
    let status = &report.status;
    pb::GetActivityResponse {
        totals: Some(pb::ActivityTotals {
            uptime_ms,
            public_agents: status.public_agents as u64,
            private_agents: status.private_agents as u64,
            busy_runs: status.busy_runs as u64,
            turns_started: report.turns.started,
            turns_finished: report.turns.finished,
            turns_failed: report.turns.failed,
            queued_messages: report.queued_messages,
            queue_max: report.queue_max as u64,
            running_tasks: status.running_tasks as u64,
            armed_waits: status.armed_waits as u64,
            restarts: status.restarts,
            agents_given_up: status.given_up,
        }),
        busiest: report.busiest.iter().map(active_agent).collect(),
        longest_queues: report.longest_queues.iter().map(active_agent).collect(),
        running_tasks: report
            .tasks
            .iter()
            .map(|t| running_task(t, &report.owner_names))
            .collect(),
        armed_waits: report
            .waits
            .iter()
            .map(|w| armed_wait(w, &report.owner_names))
            .collect(),
        hot_agents: report.hot_agents as u64,
        hot_left_out: report.left_out,
        window_ms: WINDOW_MS,
        now_ms: holarchy_actors::now_ms(),
    }
}

fn active_agent(a: &ActiveAgent) -> pb::ActiveAgent {
    pb::ActiveAgent {
        agent_id: a.agent_id.to_string(),
        name: a.name.clone().unwrap_or_default(),
        visibility: convert::visibility(a.visibility).into(),
        state: convert::lifecycle(a.state).into(),
        queue_length: a.queue_len as u64,
        current_run_id: a.current_run.map(|r| r.to_string()).unwrap_or_default(),
        recent_turns: a.recent_turns,
    }
}

/// An owner's name, or nothing for an unnamed (private) one.
fn owner_name(names: &HashMap<AgentId, String>, owner: AgentId) -> String {
    names.get(&owner).cloned().unwrap_or_default()
}

fn running_task(t: &TaskRecord, names: &HashMap<AgentId, String>) -> pb::RunningTask {
    let label = t.command.as_deref().unwrap_or(&t.label);
    pb::RunningTask {
        task_id: t.id.to_string(),
        owner_agent_id: t.owner_agent_id.to_string(),
        kind: t.kind.name().to_owned(),
        label: head(label, LISTED_TEXT_BYTES).to_owned(),
        started_at_ms: t.created_at_ms,
        owner_name: owner_name(names, t.owner_agent_id),
    }
}

fn armed_wait(w: &WaitRecord, names: &HashMap<AgentId, String>) -> pb::ArmedWait {
    pb::ArmedWait {
        wait_id: w.id.to_string(),
        owner_agent_id: w.owner_agent_id.to_string(),
        kind: w.kind.name().to_owned(),
        reason: head(&w.reason, LISTED_TEXT_BYTES).to_owned(),
        fires_at_ms: match w.kind {
            WaitKind::Timer { deadline_ms } => deadline_ms,
            WaitKind::Trigger { .. } => 0,
        },
        owner_name: owner_name(names, w.owner_agent_id),
    }
}
