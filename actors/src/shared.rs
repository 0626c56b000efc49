//! What every actor of one runtime shares (see [`Ctx`]), the doors
//! through which it reaches the store, and the [`Factory`] through which
//! supervisors start their children.
//!
//! The store itself is private to this module and to its child [`apply`],
//! the executor: whatever else a function does with the store goes through
//! a door named after a part of it ([`Ctx::reads`], [`Ctx::approvals`],
//! ...), so its body says which part it touches, and no one but the
//! executor commits a batch.

pub mod apply;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::Arc;
use std::time::Duration;

use holarchy_supervision::{AgentId, WaitRecord};
use ractor::{ActorCell, ActorProcessingErr, ActorRef};

use crate::brain::Brain;
use crate::config::RuntimeConfig;
use crate::directory::Directory;
use crate::lifecycle::Lifecycle;
use crate::protocol::{AgentArgs, AgentMsg, TaskMsg, TaskSnapshot, WaitMsg};
use crate::store::{
    ApprovalStore, ContextStore, InboundStore, InstanceStore, MemoryStore, Reads, Store, TurnInputs,
};
use crate::topology::Topology;
use crate::{limits, secrets, structure};

/// What every actor of one runtime shares: read-only services at the top,
/// then, each in a struct of its own, the locks that order structural
/// changes, the statistics (atomics), where the runtime is in its life, and
/// where its fixed actors are. What changes with one actor's
/// work (queues, restart budgets, runs) lives in that actor's state.
pub struct Ctx {
    // Services, read-only after construction.
    /// The store, redacting every write. Reached through the doors below;
    /// only the executor ([`apply`]) commits, flushes or sees it whole.
    store: Arc<dyn Store>,
    pub brain: Arc<dyn Brain>,
    pub directory: Directory,
    pub config: RuntimeConfig,
    /// Starts the actors supervisors supervise, so supervision names no
    /// actor kind.
    pub factory: Arc<dyn Factory>,
    /// One HTTP client (and connection pool) for every model brain.
    pub http: reqwest::Client,
    /// The skills under the daemon's skill roots.
    pub skills: crate::skills::Skills,
    /// Slots for command-brain steps, one process each, across the daemon.
    pub brain_processes: Arc<tokio::sync::Semaphore>,
    /// Replies as model brains write them, for the agents' watchers.
    pub replies: Arc<crate::replies::Replies>,
    /// The MCP servers agents may use, started on demand.
    pub mcp: crate::mcp::McpServers,
    /// The shared parts of recorded turn inputs written this incarnation,
    /// by digest: each is written once, not with every turn.
    pub shared_inputs: crate::turn::SharedWritten,
    /// Task ids whose command output grew or ended, for followers.
    output_events: tokio::sync::broadcast::Sender<holarchy_supervision::TaskId>,

    /// The locks that order structural changes.
    pub locks: structure::Locks,
    /// Counters: statistics for status and metrics, and the daemon-wide
    /// counts the limits admit against.
    pub stats: Stats,
    /// Recovering, running or shutting down.
    pub lifecycle: Lifecycle,
    /// Per-namespace quotas and the counts held against them.
    pub namespaces: crate::namespaces::Namespaces,

    /// The root, the gateway and the root partitions, once started.
    pub topology: Topology,
}

/// Daemon-wide counters: atomics read by status, the metrics registry,
/// and the usage counts behind the limits.
#[derive(Debug, Default)]
pub struct Stats {
    /// Turns in flight, across all agents.
    pub busy: Arc<AtomicUsize>,
    /// Agents restarted after a failure.
    pub restarts: AtomicU64,
    /// Agents whose supervisor gave up on them.
    pub given_up: AtomicU64,
    /// Turns, tool calls and queues, for `GET /metrics`.
    pub metrics: crate::metrics::RuntimeMetrics,
    /// Daemon-wide counts behind [`limits::Limits`].
    pub usage: limits::Usage,
}

/// A future that starts one actor.
pub type Starting<'a, M> =
    Pin<Box<dyn Future<Output = Result<ActorRef<M>, ActorProcessingErr>> + Send + 'a>>;

/// How supervisors start the actors they supervise, linked under the
/// supervisor given. The runtime provides it; supervision code only ever
/// asks for "an agent", "a task handle" or "a wait", never names the actor
/// that runs one.
pub trait Factory: Send + Sync + 'static {
    fn agent<'a>(
        &'a self,
        ctx: &'a Arc<Ctx>,
        args: AgentArgs,
        supervisor: ActorCell,
    ) -> Starting<'a, AgentMsg>;

    fn task<'a>(
        &'a self,
        ctx: &'a Arc<Ctx>,
        task: TaskSnapshot,
        owner: ActorCell,
    ) -> Starting<'a, TaskMsg>;

    fn wait<'a>(
        &'a self,
        ctx: &'a Arc<Ctx>,
        wait: WaitRecord,
        owner: ActorCell,
    ) -> Starting<'a, WaitMsg>;
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("brain", &self.brain.name())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Ctx {
    /// The runtime's shared context, over `config` as
    /// [`RuntimeConfig::settled`] made it. Touches no disk.
    pub fn new(
        store: Arc<dyn Store>,
        brain: Arc<dyn Brain>,
        factory: Arc<dyn Factory>,
        config: RuntimeConfig,
    ) -> Self {
        let brain_processes = Arc::new(tokio::sync::Semaphore::new(
            config.limits.max_brain_processes.max(1),
        ));
        // Every write passes the redactor: no path can store a secret.
        let store: Arc<dyn Store> =
            Arc::new(secrets::RedactingStore::new(store, config.secrets.clone()));
        // Read from disk by the runtime's start, not here.
        let skills = crate::skills::Skills::unread(config.skill_roots.clone());
        let mcp = crate::mcp::McpServers::new(
            &config.mcp,
            config.sandbox.clone(),
            config.secrets.clone(),
        );
        let metrics = if config.metrics {
            crate::metrics::RuntimeMetrics::default()
        } else {
            crate::metrics::RuntimeMetrics::off()
        };
        Self {
            mcp,
            store,
            brain,
            skills,
            directory: Directory::default(),
            config,
            factory,
            stats: Stats {
                metrics,
                ..Stats::default()
            },
            lifecycle: Lifecycle::default(),
            namespaces: crate::namespaces::Namespaces::default(),
            locks: structure::Locks::default(),
            topology: Topology::default(),
            brain_processes,
            shared_inputs: crate::turn::SharedWritten::default(),
            output_events: tokio::sync::broadcast::channel(1024).0,
            replies: Arc::default(),
            // A stalled server must not hold a turn until its deadline: the
            // request fails and is retried like any transient error.
            http: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .timeout(Duration::from_secs(180))
                .build()
                .unwrap_or_default(),
        }
    }

    /// The tree's records, to read. A change to them is a plan the
    /// executor ([`apply`]) commits.
    pub fn reads(&self) -> &dyn Reads {
        self.store.as_ref()
    }

    /// Tool calls parked for an operator, and their decisions.
    pub fn approvals(&self) -> &dyn ApprovalStore {
        self.store.as_ref()
    }

    /// The applied instances (compositions an operator named).
    pub fn instances(&self) -> &dyn InstanceStore {
        self.store.as_ref()
    }

    /// Inbound events as they arrived, and the schedules' state.
    pub fn inbound(&self) -> &dyn InboundStore {
        self.store.as_ref()
    }

    /// Each agent's running summary of its context.
    pub fn context_records(&self) -> &dyn ContextStore {
        self.store.as_ref()
    }

    /// What recorded turns' brains saw, for replays.
    pub fn turn_inputs(&self) -> &dyn TurnInputs {
        self.store.as_ref()
    }

    /// The agents' memory notes and the search over them.
    pub fn memory(&self) -> &dyn MemoryStore {
        self.store.as_ref()
    }

    /// Tells followers of a command's output that it grew or ended.
    pub fn notify_output(&self, task_id: holarchy_supervision::TaskId) {
        // Nobody following is fine.
        let _ = self.output_events.send(task_id);
    }

    pub fn follow_output(&self) -> tokio::sync::broadcast::Receiver<holarchy_supervision::TaskId> {
        self.output_events.subscribe()
    }

    /// The agent's `agent_home` directory (not necessarily made yet).
    pub fn workspace(&self, agent_id: AgentId) -> std::path::PathBuf {
        self.config.workspace_root.join(agent_id.to_string())
    }
}
