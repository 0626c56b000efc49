//! The ractor actors that run the holarchy model.
//!
//! # Layout
//! - [`runtime`]: the root supervisor, and [`Runtime`], the handle the daemon
//!   drives it with. Supervises the gateway and every public agent; restarts
//!   failed agents within an OTP-style intensity.
//! - [`gateway`]: routes operator ingress, refusing private agents.
//! - [`agent`]: one actor per live agent; runs one turn at a time, beside
//!   its `handle`, never inside it.
//! - [`brain`]: what decides a turn; the deterministic `scripted` brain.
//! - [`tools`]: the tools a brain may call, by profile.
//! - [`directory`]: running agents by id, shared by runtime and gateway.
//! - [`store`]: the storage trait these actors need.
//!
//! Every actor overrides `handle_supervisor_evt`: ractor's default stops a
//! parent whenever any child exits.

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use holarchy_supervision::restart::RestartPolicy;
use ractor::ActorRef;

pub mod agent;
pub mod brain;
pub mod directory;
pub mod gateway;
pub mod runtime;
pub mod store;
pub mod tools;

pub use agent::{AgentSnapshot, DeliverError, Delivered};
pub use brain::{Brain, ScriptedBrain};
pub use runtime::{CreateError, Runtime, RuntimeError, RuntimeSnapshot};
pub use store::{Batch, DurableFuture, Store, StoreError, Write};

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
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            max_queue_len: 1024,
            restart_policy: RestartPolicy::default(),
            call_timeout: Duration::from_secs(10),
            turn_timeout: Duration::from_secs(600),
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
    /// Set before the runtime stops its children, so their exits are not
    /// taken for failures.
    pub shutting_down: AtomicBool,
    gateway: RwLock<Option<ActorRef<GatewayMsg>>>,
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
    pub fn new(store: Arc<dyn Store>, brain: Arc<dyn Brain>, config: RuntimeConfig) -> Self {
        Self {
            store,
            brain,
            directory: Directory::default(),
            config,
            busy: Arc::new(AtomicUsize::new(0)),
            shutting_down: AtomicBool::new(false),
            gateway: RwLock::new(None),
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
}

/// Wall-clock milliseconds since the Unix epoch, for record timestamps.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
