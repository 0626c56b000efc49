//! The ractor actors that run the holarchy model.
//!
//! # Layout
//! - [`runtime`]: the root supervisor, and [`Runtime`], the handle the daemon
//!   drives it with. Supervises the gateway and the root partitions, which
//!   supervise the public agents and restart failed ones within an
//!   OTP-style intensity.
//! - [`gateway`]: routes operator ingress, refusing private agents.
//! - [`agent`]: one actor per live agent; runs one turn at a time, beside
//!   its `handle`, never inside it.
//! - [`brain`]: what decides a turn: the `scripted` and `command` brains.
//! - [`turn`]: one turn, whichever brain: decide, run tools, repeat.
//! - [`tools`]: the tools a brain may call, by profile.
//! - [`supervise`]: what every supervisor (runtime or agent) does when a
//!   child exits: one-for-one restart of the child's whole subtree within
//!   an intensity, or give up and clean the subtree up.
//! - [`cleanup`]: durable cleanup of a supervision subtree.
//! - [`spawn`]: the `SpawnAgent` tool: private children linked under their
//!   supervisor, public agents under a root partition.
//! - [`task`]: the task actor, a parent's live handle on a child.
//! - [`workspace_plane`]: attaching, detaching and using workspaces; where
//!   an agent's commands run. [`workspace_path`] keeps requested paths
//!   inside the attached set; [`worktree`] makes and removes the git
//!   worktrees of `worktree`-mode children.
//! - [`apply_patch`]: the `ApplyPatch` tool, all or nothing, file by file
//!   atomic.
//! - [`limits`]: the bounds on what agents can make the daemon do.
//! - [`directory`]: running actors by id, shared by every supervisor.
//! - [`structure`]: one lock per agent on its children, tasks and waits.
//! - [`store`]: the storage trait these actors need.
//!
//! Every actor overrides `handle_supervisor_evt`: ractor's default stops a
//! parent whenever any child exits.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use holarchy_supervision::restart::RestartPolicy;
use holarchy_supervision::AgentId;
use ractor::{ActorCell, ActorRef};

pub mod agent;
pub mod apply_patch;
pub mod brain;
pub mod cleanup;
pub mod command;
pub mod command_plane;
pub mod directory;
pub mod environment;
pub mod gateway;
pub mod limits;
pub mod runtime;
pub mod sandbox;
pub mod secrets;
pub mod spawn;
pub mod store;
pub mod structure;
pub mod supervise;
pub mod task;
pub mod task_plane;
pub mod tools;
pub mod tree;
pub mod turn;
pub mod wait;
pub mod wait_plane;
pub mod work_plane;
pub mod workspace_path;
pub mod workspace_plane;
pub mod worktree;

pub use agent::{AgentSnapshot, DeliverError, Delivered};
pub use brain::{Brain, ScriptedBrain};
pub use runtime::{
    ArchiveError, BrainError, CreateError, NewAgent, Runtime, RuntimeError, RuntimeSnapshot,
};
pub use store::{Batch, CommitFuture, DurableFuture, RecoveryInput, Store, StoreError, Write};

use crate::directory::Directory;
use crate::gateway::GatewayMsg;

/// Tunables of a runtime.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Messages an agent may hold waiting; past it, ingress is refused
    /// (ractor mailboxes are unbounded, so the bound lives here).
    pub max_queue_len: usize,
    /// How often a failing agent is restarted before it is marked failed.
    pub restart_policy: RestartPolicy,
    /// How long a caller waits for an actor to answer.
    pub call_timeout: Duration,
    /// How long one turn (brain call and tool calls) may run before it is
    /// recorded as failed and the agent moves on.
    pub turn_timeout: Duration,
    /// Bytes of output a command task keeps (a ring: the oldest go first).
    pub output_capacity: u64,
    /// Where agents' home workspaces live: `<root>/<agent id>`.
    pub workspace_root: std::path::PathBuf,
    /// Where git worktrees of `worktree`-mode children are made:
    /// `<root>/<task id>`.
    pub worktree_root: std::path::PathBuf,
    /// Between SIGTERM and SIGKILL when a command task is stopped.
    pub stop_grace: Duration,
    /// The brain of agents created without one.
    pub default_brain: holarchy_supervision::BrainConfig,
    /// How OpenAI-compatible requests are retried.
    pub openai_retry: brain::openai::RetryPolicy,
    /// How agents' programs are confined and bounded.
    pub sandbox: sandbox::SandboxConfig,
    /// The daemon's secrets: handed to brains by name, redacted from
    /// everything stored.
    pub secrets: Arc<secrets::Secrets>,
    /// Bounds on what agents can make the daemon do.
    pub limits: limits::Limits,
    /// Supervisor actors public agents are spread over (at least one).
    pub partitions: usize,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            max_queue_len: 1024,
            restart_policy: RestartPolicy::default(),
            call_timeout: Duration::from_secs(10),
            turn_timeout: Duration::from_secs(600),
            output_capacity: 1024 * 1024,
            workspace_root: std::env::temp_dir().join("holarchy-workspaces"),
            worktree_root: std::env::temp_dir().join("holarchy-worktrees"),
            stop_grace: Duration::from_secs(2),
            default_brain: holarchy_supervision::BrainConfig::Scripted,
            openai_retry: brain::openai::RetryPolicy::default(),
            sandbox: sandbox::SandboxConfig::default(),
            secrets: Arc::default(),
            limits: limits::Limits::default(),
            partitions: std::thread::available_parallelism().map_or(1, usize::from),
        }
    }
}

/// What every actor of one runtime shares. Read-only but for the counters
/// and the gateway slot, which the runtime fills in.
pub struct Ctx {
    pub store: Arc<dyn Store>,
    pub brain: Arc<dyn Brain>,
    pub directory: Directory,
    pub config: RuntimeConfig,
    /// Turns in flight, across all agents.
    pub busy: Arc<AtomicUsize>,
    /// Which messages those turns hold, for a graceful shutdown.
    pub in_flight: Arc<agent::InFlight>,
    /// Set before the runtime stops its children, so their exits are not
    /// taken for failures.
    pub shutting_down: AtomicBool,
    /// One lock per agent on its structure (children, tasks, waits,
    /// workspaces), so a child is never created under a supervisor being
    /// cleaned up. Never taken inside an actor's `handle`.
    pub structure: structure::StructureLocks,
    /// Serialises worktree removals per repository (its git directory): a
    /// stop and a sweep may race for one worktree, and git locks a
    /// repository's worktree list and refs.
    pub worktrees: structure::KeyedLocks<std::path::PathBuf>,
    pub restarts: AtomicU64,
    pub given_up: AtomicU64,
    gateway: RwLock<Option<ActorRef<GatewayMsg>>>,
    root: RwLock<Option<ActorCell>>,
    /// The root partitions, supervisors of the public agents.
    partitions: RwLock<Vec<ActorCell>>,
    /// One HTTP client (and connection pool) for every model brain.
    pub http: reqwest::Client,
    /// Daemon-wide counts behind [`limits::Limits`].
    pub usage: limits::Usage,
    /// Slots for command-brain steps, one process each, across the daemon.
    pub brain_processes: Arc<tokio::sync::Semaphore>,
    /// Task ids whose command output grew or ended, for followers.
    output_events: tokio::sync::broadcast::Sender<holarchy_supervision::TaskId>,
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
    pub fn new(store: Arc<dyn Store>, brain: Arc<dyn Brain>, mut config: RuntimeConfig) -> Self {
        // Paths under these roots are compared with canonical ones, so the
        // roots themselves are made canonical once (made first, if need be).
        for root in [
            &mut config.workspace_root,
            &mut config.worktree_root,
            &mut config.sandbox.tmp_root,
        ] {
            let canonical =
                std::fs::create_dir_all(&*root).and_then(|()| std::fs::canonicalize(&*root));
            if let Ok(canonical) = canonical {
                *root = canonical;
            }
        }
        let sandbox = &mut config.sandbox;
        for path in sandbox
            .protected
            .iter_mut()
            .chain(&mut sandbox.allowed_roots)
        {
            if let Ok(canonical) = std::fs::canonicalize(&*path) {
                *path = canonical;
            }
        }
        // A system path that holds a protected one (a data directory under
        // /opt, say) would let every program read it: it is dropped. The
        // daemon's program is protected from writes only: it is no secret,
        // and dropping the directory holding it (/usr/bin) would take the
        // shell away.
        let program = std::env::current_exe()
            .ok()
            .and_then(|exe| std::fs::canonicalize(exe).ok());
        let protected: Vec<_> = config
            .sandbox
            .protected
            .iter()
            .filter(|p| Some(*p) != program.as_ref())
            .cloned()
            .collect();
        config.sandbox.read_only.retain(|path| {
            let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
            let holds = protected.iter().any(|p| p.starts_with(&canonical));
            if holds {
                tracing::warn!(path = %path.display(), "not readable by agents' programs: it holds the daemon's data");
            }
            !holds
        });
        let brain_processes = Arc::new(tokio::sync::Semaphore::new(
            config.limits.max_brain_processes.max(1),
        ));
        // Every write passes the redactor: no path can store a secret.
        let store: Arc<dyn Store> =
            Arc::new(secrets::RedactingStore::new(store, config.secrets.clone()));
        Self {
            store,
            brain,
            directory: Directory::default(),
            config,
            busy: Arc::new(AtomicUsize::new(0)),
            in_flight: Arc::default(),
            shutting_down: AtomicBool::new(false),
            structure: structure::StructureLocks::default(),
            worktrees: structure::KeyedLocks::default(),
            restarts: AtomicU64::new(0),
            given_up: AtomicU64::new(0),
            gateway: RwLock::new(None),
            root: RwLock::new(None),
            partitions: RwLock::new(Vec::new()),
            usage: limits::Usage::default(),
            brain_processes,
            output_events: tokio::sync::broadcast::channel(1024).0,
            // A stalled server must not hold a turn until its deadline: the
            // request fails and is retried like any transient error.
            http: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .timeout(Duration::from_secs(180))
                .build()
                .unwrap_or_default(),
        }
    }

    pub fn gateway(&self) -> Option<ActorRef<GatewayMsg>> {
        self.gateway
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_gateway(&self, gateway: ActorRef<GatewayMsg>) {
        *self.gateway.write().unwrap_or_else(PoisonError::into_inner) = Some(gateway);
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

    /// The runtime's root actor, supervisor of the gateway and the root
    /// partitions.
    pub fn root(&self) -> Option<ActorCell> {
        self.root
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_root(&self, root: ActorCell) {
        *self.root.write().unwrap_or_else(PoisonError::into_inner) = Some(root);
    }

    /// The root partition that supervises the public agent `agent`.
    pub fn partition_for(&self, agent: AgentId) -> Option<ActorCell> {
        let partitions = self
            .partitions
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let index = runtime::partition::partition_of(agent, partitions.len());
        partitions.get(index).cloned()
    }

    /// How many root partitions there are (0 before the runtime started).
    pub fn partition_count(&self) -> usize {
        self.partitions
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The index of the partition actor `actor`, if it is one.
    pub fn partition_index(&self, actor: ractor::ActorId) -> Option<usize> {
        self.partitions
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .position(|p| p.get_id() == actor)
    }

    fn set_partitions(&self, partitions: Vec<ActorCell>) {
        *self
            .partitions
            .write()
            .unwrap_or_else(PoisonError::into_inner) = partitions;
    }

    fn set_partition(&self, index: usize, partition: ActorCell) {
        if let Some(slot) = self
            .partitions
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(index)
        {
            *slot = partition;
        }
    }
}

/// Wall-clock milliseconds since the Unix epoch, for record timestamps.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
