//! What a turn's brain saw besides its message and its own steps: the
//! agent's view, its bounded context, its role and tool catalog. The event
//! log holds the message, the steps and their results; together they are
//! what a replay (`holarchy replay`) runs a candidate brain on.
//!
//! Only turns of brains that read context are recorded (a scripted turn's
//! message is its whole input). The role and catalog, the same turn after
//! turn, are kept once by digest ([`SharedInput`]); each agent keeps its
//! newest [`TurnInputs::keep`] records, and an ended agent's go with it.
//! Written apart from the batch path, at the turn's end, by the turn's own
//! task.

use holarchy_supervision::{AgentId, RunId};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::StoreError;

/// One turn's recorded input. JSON values are kept as their text, so the
/// record does not depend on a self-describing encoding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnInputRecord {
    /// The brain kind that saw it (`command`, `openai`, `anthropic`).
    pub brain: String,
    /// The agent's own summary, as JSON text.
    pub agent: String,
    /// The bounded context, as JSON text.
    pub context: String,
    /// The digest of its [`SharedInput`].
    pub shared: String,
    pub max_steps: u32,
    /// The turn logged a decision (an instance's agent).
    pub logs_decision: bool,
    /// The brain said the delegated work was done.
    pub done: bool,
    /// When the turn ended, Unix milliseconds.
    pub at_ms: u64,
}

/// What many turns share: the role (as cut to fit) and the tool catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedInput {
    pub role: Option<SharedRole>,
    /// The catalog, as JSON text.
    pub catalog: String,
}

/// A role as its turns' brains were shown it: its version and its prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedRole {
    pub version: String,
    pub prompt: String,
}

impl SharedInput {
    /// Its digest: `sha256:` and the hex of its encoding's hash.
    pub fn digest(&self) -> String {
        let mut hash = Sha256::new();
        if let Some(role) = &self.role {
            hash.update(b"role\0");
            hash.update(role.version.as_bytes());
            hash.update(b"\0");
            hash.update(role.prompt.as_bytes());
        }
        hash.update(b"\0catalog\0");
        hash.update(self.catalog.as_bytes());
        format!("sha256:{}", hex::encode(hash.finalize()))
    }
}

/// How many recorded inputs each agent keeps, when the daemon is not told.
pub const DEFAULT_KEPT: usize = 1000;

/// The recorded inputs of turns.
pub trait TurnInputs: Send + Sync {
    /// Records `record` for `run_id` of `agent_id`, with its shared part
    /// when the caller has not written it this incarnation (`shared`: its
    /// digest's content; an existing one is kept). Drops the agent's
    /// records older than its newest `keep`. Durable once a later
    /// [`super::Store::durable`] resolves.
    fn put_turn_input(
        &self,
        agent_id: AgentId,
        run_id: RunId,
        record: &TurnInputRecord,
        shared: Option<&SharedInput>,
        keep: usize,
    ) -> Result<(), StoreError>;
    fn turn_input(
        &self,
        agent_id: AgentId,
        run_id: RunId,
    ) -> Result<Option<TurnInputRecord>, StoreError>;
    fn shared_input(&self, digest: &str) -> Result<Option<SharedInput>, StoreError>;
    /// Drops every record of the agent (it ended); idempotent.
    fn forget_turn_inputs(&self, agent_id: AgentId) -> Result<(), StoreError>;
}
