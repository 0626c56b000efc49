//! The ractor actors that run the holarchy model.
//!
//! # Layers, bottom up
//! Each module imports only from layers below it (no import loops):
//! 1. Data and leaf services: [`protocol`] (the messages actors exchange,
//!    data only), [`store`] (the storage trait), [`structure`] (per-agent
//!    locks), [`limits`], [`process`], [`sandbox`], [`secrets`],
//!    [`in_flight`], [`lifecycle`] (recovering, running, shutting down),
//!    [`topology`], [`views`] (records as JSON), [`replies`]
//!    (replies as they are written, for watchers), [`live`] (what a running
//!    agent publishes for reads that do not ask it), [`mcp`] (MCP servers and
//!    their connections), [`step`] (a turn's message, calls and results
//!    as brains see them), [`brain`] (the brain trait and brains), [`skills`] (the skill catalog),
//!    [`compose`] (an agent's role and tool policy).
//! 2. [`directory`] (running actors by id), [`config`] and [`shared`] (what
//!    every actor shares, the doors to the store, and the
//!    [`shared::Factory`] supervisors start children through), with
//!    [`apply`] inside it (the executor of the pure planners' plans, the
//!    one place that commits), [`quota`] (counting against the limits).
//! 3. [`workspace`] (attached workspaces, paths, worktrees, `ApplyPatch`),
//!    then [`plane`]: what an agent acts on (commands, tasks, waits, work),
//!    each plane its actor and its operations.
//! 4. [`supervisor`]: what every supervisor does when a child exits, how
//!    it brings a subtree back, and durable cleanup. Then
//!    [`plane::spawn`], which creates children through it.
//! 5. [`context`] (what a brain sees), [`tools`] (what a brain may call),
//!    [`approval`] (calls parked for an operator),
//!    [`turn`] (one turn, whichever brain).
//! 6. [`agent`] (one actor per live agent), [`gateway`] (operator
//!    ingress), [`inbound`] (inbound events and the scheduler actor that
//!    fires schedules), [`runtime`] (the root supervisor, its partitions, the
//!    factory, and [`Runtime`], the handle the daemon drives it with),
//!    [`tree`] (the supervision tree as operators inspect it).
//!
//! Every actor overrides `handle_supervisor_evt`: ractor's default stops a
//! parent whenever any child exits.

use std::time::{SystemTime, UNIX_EPOCH};

pub mod agent;
pub mod approval;
pub mod brain;
pub mod compose;
pub mod config;
pub mod context;
pub mod directory;
pub mod gateway;
pub mod in_flight;
pub mod inbound;
pub mod lifecycle;
pub mod limits;
pub mod live;
pub mod mcp;
pub mod metrics;
pub mod namespaces;
pub mod plane;
pub mod process;
pub mod protocol;
pub mod quota;
pub mod replay;
pub mod replies;
pub mod runtime;
pub mod sandbox;
pub mod secrets;
pub mod shared;
pub mod skills;
pub mod step;
pub mod store;
pub mod structure;
pub mod supervisor;
pub mod tools;
pub mod topology;
pub mod tree;
pub mod turn;
pub mod turn_gate;
pub mod views;
pub mod workspace;

// The executor is a child of `shared`, the one module that may see the
// whole store; it keeps its own name.
pub use shared::apply;

pub use brain::{Brain, ScriptedBrain};
pub use config::RuntimeConfig;
pub use live::AgentSnapshot;
pub use protocol::{DeliverError, Delivered};
pub use runtime::{
    ArchiveError, BrainError, CreateError, NewAgent, Outgoing, Runtime, RuntimeError,
    RuntimeSnapshot,
};
pub use shared::Ctx;
pub use store::{
    ApprovalStore, Batch, CommitFuture, ContextRecord, ContextStore, DamagedRecord, DurableFuture,
    InboundStore, InstanceStore, MemoryHit, MemoryKind, MemoryNote, MemorySize, MemoryStore,
    NoteDraft, Reads, Recalled, RecalledToolCall, RecoveryInput, ReplayGuard, SharedInput, Store,
    StoreError, StoredEvent, TurnInputRecord, TurnInputs, Write,
};

/// Wall-clock milliseconds since the Unix epoch, for record timestamps.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
