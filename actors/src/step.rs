//! A turn's steps as brains and the turn's context see them: the message,
//! the tool calls a brain asks for, what they returned, and the record of
//! each step.
//! Data only (and the turn's token meter), below both the brains and the
//! context that compacts their steps, so neither needs the other's module.

use std::sync::{Arc, Mutex, PoisonError};

use holarchy_supervision::TokenUsage;
use serde::{Deserialize, Serialize};

/// The tokens one turn's model calls spent so far. Shared by the turn and
/// its agent, so what a turn spent is recorded even when it is aborted or
/// runs past its deadline. Brains that report nothing leave it empty, and
/// their turns record no usage.
#[derive(Debug, Clone, Default)]
pub struct UsageMeter(Arc<Mutex<Option<TokenUsage>>>);

impl UsageMeter {
    pub fn add(&self, usage: TokenUsage) {
        let mut total = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        total.get_or_insert_with(TokenUsage::default).add(usage);
    }

    /// What was spent, if anything was reported, leaving the meter empty.
    pub fn take(&self) -> Option<TokenUsage> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// One tool call a brain asks for. `input` is a JSON value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub name: String,
    #[serde(default)]
    pub input: serde_json::Value,
}

/// A tool call's result, as a brain sees it.
#[derive(Debug, Clone, Serialize)]
pub struct ResultView {
    pub tool: String,
    pub input: serde_json::Value,
    pub output: serde_json::Value,
    pub is_error: bool,
}

/// One decision of a turn and what its tool calls returned.
#[derive(Debug, Clone, Serialize)]
pub struct StepRecord {
    pub reply: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub results: Vec<ResultView>,
}

/// The message a turn works on, as a brain sees it.
#[derive(Debug, Clone, Serialize)]
pub struct MessageView {
    pub message_id: String,
    /// operator, parent, child_result, trigger, timer, self, task_result...
    pub provenance: String,
    /// The sending agent, for parent, child_result and creator provenance.
    pub from_agent_id: Option<String>,
    pub text: String,
}
