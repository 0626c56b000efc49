//! Brains decide what an agent does with a message: a reply, tool calls,
//! and whether the delegated work is done. The runtime is the same whatever
//! decides: a turn asks the brain for a decision, runs its tool calls,
//! gives the results back, and repeats until the brain calls no tool or the
//! step limit is reached.
//!
//! - [`ScriptedBrain`]: deterministic; the message carries the decision.
//! - [`command::CommandBrain`]: an external program per step (the pup
//!   contract: JSON on stdin, JSON on stdout).
//! - [`openai::OpenAiBrain`]: an OpenAI-compatible chat-completions server
//!   with function calling.
//! - [`anthropic::AnthropicBrain`]: Anthropic's Messages API with tool use.
//!
//! The two model brains share their prompt text, `RecordDecision`, their
//! HTTP retries and the reading of streamed answers through [`model`]; as
//! they read, they write each step's text to [`TurnInput::replies`] and
//! what their calls spent to [`TurnInput::usage`].

use std::future::Future;
use std::pin::Pin;

use holarchy_supervision::{AgentId, RunId};
use serde::{Deserialize, Serialize};

use crate::context::compact::{truncation, CompactRequest, Compaction};
use crate::context::tokens::Tokenizer;
use crate::replies::ReplySink;
pub use crate::step::{MessageView, ResultView, StepRecord, ToolCall, UsageMeter};

pub mod anthropic;
pub mod command;
pub mod model;
pub mod openai;
mod scripted;

pub use scripted::ScriptedBrain;

/// What a brain is asked to decide on, at each step of a turn.
#[derive(Debug, Clone, Serialize)]
pub struct TurnInput {
    #[serde(skip)]
    pub agent_id: AgentId,
    #[serde(skip)]
    pub run_id: RunId,
    /// The agent's own summary.
    pub agent: serde_json::Value,
    /// The role it runs under (an instance's), for every brain and step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<crate::compose::RoleView>,
    pub message: MessageView,
    /// The agent's tool catalog: the same at every step and turn.
    pub tools: Vec<serde_json::Value>,
    /// Bounded, structured context: work focus, waits, recent turns.
    pub context: serde_json::Value,
    /// 1 for the first decision of the turn.
    pub step: u32,
    pub max_steps: u32,
    /// The results of the previous step's tool calls.
    pub previous_results: Vec<ResultView>,
    /// Every earlier step of this turn (for conversation-shaped brains),
    /// or the newest of them once older ones were compacted.
    pub steps: Vec<StepRecord>,
    /// What stands for the steps compacted away, when the turn outgrew
    /// its budget (absent until then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compacted: Option<Compaction>,
    /// The turn logs a decision (an instance's agent or a descendant), so
    /// a brain may offer its model a way to give one.
    #[serde(skip)]
    pub logs_decision: bool,
    /// Where a brain that streams its model's answer writes the step's
    /// text as it comes, for the agent's watchers (never stored).
    #[serde(skip)]
    pub replies: Option<ReplySink>,
    /// Where a brain that calls a model adds the tokens it spent.
    #[serde(skip)]
    pub usage: UsageMeter,
}

/// A brain's decision for one turn.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TurnPlan {
    pub reply: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    /// The delegated work is finished (meaningful for supervised children).
    pub done: bool,
    /// The brain's own decision for the turn's log, as it wrote it
    /// (`{kind, reason, target?, idempotency_key?, requires_approval?}`);
    /// checked at the turn's end, where one that does not parse is noted,
    /// never a failure. Only instances' agents record decisions.
    pub decision: Option<serde_json::Value>,
}

/// Why a brain could not decide; the turn is recorded as failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("brain `{brain}` failed: {detail}")]
pub struct BrainError {
    pub brain: &'static str,
    pub detail: String,
}

pub type BrainFuture = Pin<Box<dyn Future<Output = Result<TurnPlan, BrainError>> + Send>>;

/// A compaction's summary, once written.
pub type CompactFuture = Pin<Box<dyn Future<Output = Compaction> + Send>>;

/// Decides turns. Implementations must be cheap to share: one instance
/// serves every agent of a daemon.
pub trait Brain: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    fn decide(&self, input: TurnInput) -> BrainFuture;

    /// Whether the brain reads more than the message and the results of
    /// its own tool calls: the agent's view, the context and the tool
    /// catalog. A brain that does not (the scripted brain) is given them
    /// empty, and the turn does not build them.
    fn reads_context(&self) -> bool {
        true
    }

    /// Folds a long turn's oldest steps into a summary. By default a
    /// deterministic truncation, marked as such; a brain with a model may
    /// have it write one. Never fails: a brain that cannot summarise falls
    /// back to the truncation, so a turn is never lost to its length.
    fn compact(&self, tokenizer: Tokenizer, request: CompactRequest) -> CompactFuture {
        Box::pin(std::future::ready(truncation(tokenizer, &request)))
    }
}
