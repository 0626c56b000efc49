//! The decision a turn records: a small, auditable vocabulary with a
//! reason, a target and an idempotency key, given by the brain or derived
//! from what the turn did.
//!
//! A brain may return a decision explicitly ([`Decision::parse_explicit`]);
//! otherwise [`Decision::derive`] reads it off the turn, first row that
//! matches:
//!
//! | the turn                          | kind           | target                        |
//! |-----------------------------------|----------------|-------------------------------|
//! | called `LoadSkill`                | `invoke_skill` | the input's `name`, if a string |
//! | called a waiting tool (`Sleep`, `WaitFor…`) | `wait` | that tool                   |
//! | called any other tool             | `tool_calls`   | the first tool called         |
//! | only replied (non-blank text)     | `comment`      | none                          |
//! | neither                           | `no_op`        | none                          |
//!
//! A derived decision never asks for approval (approvals of tool calls come
//! from the constraints), and its idempotency key is `run:<run_id>`, as is
//! an explicit one's when the brain gives none.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Bounds on an explicit decision, in bytes.
pub const MAX_DECISION_JSON_BYTES: usize = 8 * 1024;
pub const MAX_REASON_BYTES: usize = 2 * 1024;
pub const MAX_TARGET_BYTES: usize = 256;
pub const MAX_KEY_BYTES: usize = 256;

/// The tool that loads a skill; its input names the skill in `name`.
pub const LOAD_SKILL_TOOL: &str = "LoadSkill";

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    NoOp,
    InvokeSkill,
    Comment,
    Escalate,
    Wait,
    ToolCalls,
}

impl DecisionKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            DecisionKind::NoOp => "no_op",
            DecisionKind::InvokeSkill => "invoke_skill",
            DecisionKind::Comment => "comment",
            DecisionKind::Escalate => "escalate",
            DecisionKind::Wait => "wait",
            DecisionKind::ToolCalls => "tool_calls",
        }
    }
}

/// One turn's decision, as the store keeps it and `decisions.ndjson`
/// exports it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub kind: DecisionKind,
    pub reason: String,
    pub target: Option<String>,
    pub idempotency_key: String,
    pub requires_approval: bool,
    /// Given by the brain, not derived from the turn.
    pub explicit: bool,
}

/// Why a brain's explicit decision is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecisionError {
    #[error("the decision is {len} bytes, over the limit of {MAX_DECISION_JSON_BYTES}")]
    TooLarge { len: usize },
    /// serde's message names the unknown kind or field and lists the
    /// accepted ones.
    #[error("the decision is not a valid decision object: {0}")]
    Invalid(String),
    #[error("{field} is {len} bytes, over the limit of {max}")]
    TooLong {
        field: &'static str,
        len: usize,
        max: usize,
    },
    #[error("{0} must not be empty")]
    Empty(&'static str),
}

/// The explicit form a brain returns.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Explicit {
    kind: DecisionKind,
    reason: String,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    idempotency_key: Option<String>,
    #[serde(default)]
    requires_approval: bool,
}

/// Whether a brain's explicit decision asks an operator to approve the
/// step's calls: its `requires_approval` is `true`. Read on its own, so a
/// decision refused for another field (its log records why) still holds
/// the calls it asked to hold; a flag of any other type asks nothing.
pub fn asks_approval(decision: &serde_json::Value) -> bool {
    #[derive(Deserialize)]
    struct Flag {
        #[serde(default)]
        requires_approval: bool,
    }
    Flag::deserialize(decision).is_ok_and(|flag| flag.requires_approval)
}

/// One tool call of a turn: its name and its input, unless the turn kept
/// only a cut of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolCall<'a> {
    pub name: &'a str,
    pub input: Option<&'a serde_json::Value>,
}

impl Decision {
    /// A brain's decision, e.g.
    /// `{"kind":"escalate","reason":"needs a human","target":"issue#12"}`.
    /// Unknown kinds and fields are refused; the key defaults to
    /// `run:<run_id>`. An `invoke_skill` decision must name its skill.
    pub fn parse_explicit(run_id: &str, json: &str) -> Result<Decision, DecisionError> {
        if json.len() > MAX_DECISION_JSON_BYTES {
            return Err(DecisionError::TooLarge { len: json.len() });
        }
        let explicit: Explicit = serde_json::from_str(json)
            .map_err(|error| DecisionError::Invalid(error.to_string()))?;
        if explicit.reason.trim().is_empty() {
            return Err(DecisionError::Empty("reason"));
        }
        bounded("reason", &explicit.reason, MAX_REASON_BYTES)?;
        if let Some(target) = &explicit.target {
            bounded("target", target, MAX_TARGET_BYTES)?;
        }
        if explicit.kind == DecisionKind::InvokeSkill
            && explicit.target.as_deref().is_none_or(str::is_empty)
        {
            return Err(DecisionError::Empty("target (the skill to invoke)"));
        }
        let idempotency_key = match explicit.idempotency_key {
            Some(key) if key.is_empty() => return Err(DecisionError::Empty("idempotency_key")),
            Some(key) => key,
            None => run_key(run_id),
        };
        bounded("idempotency_key", &idempotency_key, MAX_KEY_BYTES)?;
        Ok(Decision {
            kind: explicit.kind,
            reason: explicit.reason,
            target: explicit.target,
            idempotency_key,
            requires_approval: explicit.requires_approval,
            explicit: true,
        })
    }

    /// The decision read off a turn that gave none: see the table in the
    /// module doc.
    pub fn derive(run_id: &str, reply: Option<&str>, tools: &[ToolCall<'_>]) -> Decision {
        let (kind, target, reason) =
            if let Some(load) = tools.iter().find(|call| call.name == LOAD_SKILL_TOOL) {
                let skill = skill_name(load.input);
                let reason = match &skill {
                    Some(skill) => format!("loaded the skill {skill}"),
                    None => "loaded a skill".to_string(),
                };
                (DecisionKind::InvokeSkill, skill, reason)
            } else if let Some(wait) = tools.iter().find(|call| is_waiting_tool(call.name)) {
                let reason = format!("waited with {}", wait.name);
                (DecisionKind::Wait, Some(wait.name.to_string()), reason)
            } else if let Some(first) = tools.first() {
                let reason = format!("called {} tool(s)", tools.len());
                (
                    DecisionKind::ToolCalls,
                    Some(first.name.to_string()),
                    reason,
                )
            } else if reply.is_some_and(|reply| !reply.trim().is_empty()) {
                (DecisionKind::Comment, None, "replied".to_string())
            } else {
                (DecisionKind::NoOp, None, "did nothing".to_string())
            };
        Decision {
            kind,
            reason,
            target: target.map(|target| truncated(&target, MAX_TARGET_BYTES)),
            idempotency_key: truncated(&run_key(run_id), MAX_KEY_BYTES),
            requires_approval: false,
            explicit: false,
        }
    }
}

/// Tools whose call parks the turn: `Sleep` and any `WaitFor…`.
pub fn is_waiting_tool(name: &str) -> bool {
    name == "Sleep" || name.starts_with("WaitFor")
}

fn run_key(run_id: &str) -> String {
    format!("run:{run_id}")
}

/// `LoadSkill`'s `name` field, if its input is an object that has one.
fn skill_name(input: Option<&serde_json::Value>) -> Option<String> {
    let name = input?.get("name")?.as_str()?;
    Some(name.to_string()).filter(|name| !name.is_empty())
}

fn bounded(field: &'static str, value: &str, max: usize) -> Result<(), DecisionError> {
    if value.len() > max {
        return Err(DecisionError::TooLong {
            field,
            len: value.len(),
            max,
        });
    }
    Ok(())
}

/// Derived values come from the runtime, not a sender, so they are cut
/// (at a char boundary) rather than refused: a turn always has a decision.
fn truncated(value: &str, max: usize) -> String {
    holarchy_supervision::bounds::head(value, max).to_string()
}

#[cfg(test)]
#[path = "decision/tests.rs"]
mod tests;
