//! What an agent was composed from when it runs an instance (or descends
//! from one): its role, its skills and the instance's constraints. Stored
//! with the agent so every turn reads the newest composition with the
//! record it already reads; an applied change takes effect from the next
//! turn.

use serde::{Deserialize, Serialize};

/// A role prompt, versioned by the SHA-256 of its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Role {
    pub text: String,
    /// Lowercase hex SHA-256 of `text`.
    pub hash: String,
}

impl Role {
    /// The short form operators see: `sha256:` and the first 12 hex digits.
    pub fn version(&self) -> String {
        let short = self.hash.get(..12).unwrap_or(&self.hash);
        format!("sha256:{short}")
    }
}

/// The instance's own limits on tool calls and turns (the configuration
/// layer of the seed's `system > config > prompt`). Each list holds exact
/// tool names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolLimits {
    /// When set, only these tools may run.
    pub allow: Option<Vec<String>>,
    pub deny: Vec<String>,
    /// These run only once an operator approves the call.
    pub require_approval: Vec<String>,
    pub max_turns_per_hour: Option<u32>,
}

impl ToolLimits {
    pub fn is_empty(&self) -> bool {
        self.allow.is_none()
            && self.deny.is_empty()
            && self.require_approval.is_empty()
            && self.max_turns_per_hour.is_none()
    }
}

/// An agent's composition. A child spawned by a composed agent inherits it
/// whole (role, skills and limits: a limit a child could shed would be no
/// limit), with `instance` kept so audit can tell where it came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Composition {
    /// The instance this agent runs, or descends from.
    pub instance: Option<String>,
    pub role: Option<Role>,
    /// Skill names; their text is read from the daemon's skill roots.
    pub skills: Vec<String>,
    pub limits: ToolLimits,
    /// Whether the instance declared the `trigger` ingress: without it, the
    /// agent cannot arm external triggers.
    pub triggers: bool,
}
